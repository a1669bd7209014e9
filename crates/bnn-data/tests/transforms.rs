//! Augmentation properties and reference values (tests/reference/make_values.py).

use bnn_data::{
    CenterCrop, ColorJitter, Compose, DatasetId, HorizontalFlip, Image, NormStats, Normalize,
    PadMode, RandomCrop, RandomHorizontalFlip, RandomResizedCrop, SampleRng, Transform,
    adjust_brightness, adjust_contrast, adjust_hue, adjust_saturation, resize_bilinear,
};
use proptest::prelude::*;

fn reference(name: &str) -> Vec<f32> {
    include_str!("data/reference.txt")
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no reference `{name}`"))
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap() as f32)
        .collect()
}

fn close(a: &[f32], b: &[f32], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol, "element {i}: {x} vs {y}");
    }
}

fn image(c: usize, h: usize, w: usize, data: Vec<f32>) -> Image {
    Image {
        channels: c,
        height: h,
        width: w,
        data,
    }
}

fn arb_image() -> impl Strategy<Value = Image> {
    (1usize..=3, 1usize..12, 1usize..12).prop_flat_map(|(c, h, w)| {
        proptest::collection::vec(0f32..1.0, c * h * w).prop_map(move |d| image(c, h, w, d))
    })
}

#[test]
fn reflect_padding_matches_numpy() {
    let img = image(1, 3, 4, reference("reflect_input"));
    let pad = RandomCrop {
        height: 7,
        width: 8,
        padding: 2,
        mode: PadMode::Reflect,
    };
    // The window at (0, 0) of the 7×8 padded image is the whole padded image.
    close(
        &pad.crop_at(&img, 0, 0).data,
        &reference("reflect_pad2"),
        1e-6,
    );
}

#[test]
fn bilinear_resize_matches_scipy_half_pixel_zoom() {
    let src = image(1, 2, 3, reference("resize_input"));
    close(
        &resize_bilinear(&src, (0, 0, 2, 3), 5, 7).data,
        &reference("resize_5x7"),
        1e-5,
    );
    let big = image(1, 6, 8, reference("resize_big_input"));
    close(
        &resize_bilinear(&big, (0, 0, 6, 8), 4, 4).data,
        &reference("resize_4x4"),
        1e-5,
    );
}

#[test]
fn colour_operations_match_reference_formulas() {
    let input = image(3, 1, 2, reference("color_input"));
    let run = |f: &dyn Fn(&mut Image)| {
        let mut img = input.clone();
        f(&mut img);
        img.data
    };
    close(
        &run(&|i| adjust_brightness(i, 1.3)),
        &reference("brightness_1.3"),
        1e-6,
    );
    close(
        &run(&|i| adjust_contrast(i, 0.6)),
        &reference("contrast_0.6"),
        1e-6,
    );
    close(
        &run(&|i| adjust_saturation(i, 1.4)),
        &reference("saturation_1.4"),
        1e-6,
    );
    // Hue rotation agrees with Python's colorsys round trip.
    close(&run(&|i| adjust_hue(i, 0.08)), &reference("hue_0.08"), 1e-5);
    close(&run(&|i| adjust_hue(i, -0.1)), &reference("hue_-0.1"), 1e-5);
}

#[test]
fn colour_jitter_leaves_grey_images_hue_and_saturation_alone() {
    let grey = image(1, 2, 2, vec![0.2, 0.4, 0.6, 0.8]);
    let only_hue_sat = ColorJitter {
        brightness: 0.0,
        contrast: 0.0,
        saturation: 0.4,
        hue: 0.1,
    };
    for seed in 0..20 {
        let out = only_hue_sat
            .apply(grey.clone(), &mut SampleRng::new(seed))
            .unwrap();
        assert_eq!(out, grey);
    }
    let bad = ColorJitter {
        hue: 0.7,
        ..ColorJitter::paper()
    };
    assert!(bad.apply(grey, &mut SampleRng::new(0)).is_err());
}

#[test]
fn colour_jitter_stays_in_range_and_varies() {
    let img = image(3, 4, 4, (0..48).map(|v| v as f32 / 47.0).collect());
    let jitter = ColorJitter::paper();
    let mut outputs = Vec::new();
    for seed in 0..10 {
        let out = jitter
            .apply(img.clone(), &mut SampleRng::new(seed))
            .unwrap();
        assert!(out.data.iter().all(|v| (0.0..=1.0).contains(v)));
        outputs.push(out);
    }
    assert!(outputs.windows(2).any(|w| w[0] != w[1]));
}

#[test]
fn normalisation_gives_zero_mean_unit_std_for_matching_stats() {
    // A 2-channel image whose channels have known mean and (population) std.
    let c0: Vec<f32> = vec![0.1, 0.3, 0.5, 0.7];
    let c1: Vec<f32> = vec![0.2, 0.2, 0.6, 0.6];
    let stats = NormStats::new(vec![0.4, 0.4], vec![0.223_606_8, 0.2]).unwrap();
    let img = image(2, 2, 2, [c0, c1].concat());
    let out = Normalize::new(stats)
        .apply(img, &mut SampleRng::new(0))
        .unwrap();
    for ch in out.data.chunks(4) {
        let mean: f32 = ch.iter().sum::<f32>() / 4.0;
        let var: f32 = ch.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 4.0;
        assert!(mean.abs() < 1e-6 && (var.sqrt() - 1.0).abs() < 1e-5);
    }
    // Channel count mismatch is an error, not a panic.
    let rgb = image(3, 1, 1, vec![0.5; 3]);
    assert!(
        Normalize::new(NormStats::MNIST)
            .apply(rgb, &mut SampleRng::new(0))
            .is_err()
    );
}

#[test]
fn paper_stats_are_the_published_constants() {
    assert_eq!(*NormStats::CIFAR100.mean, [0.5071, 0.4865, 0.4409]);
    assert_eq!(*NormStats::CIFAR100.std, [0.2673, 0.2564, 0.2761]);
    assert_eq!(*DatasetId::FashionMnist.norm_stats().mean, [0.2860]);
    assert_eq!(*DatasetId::Mnist.norm_stats().std, [0.3081]);
}

#[test]
fn measured_stats_are_the_mean_and_population_std_of_every_pixel() {
    // Two 2-channel 1x2 images: channel 0 holds 0, 51, 102, 153 (mean 76.5, population std
    // 57.02...), channel 1 is constant 255 (std 0, so 1: nothing to scale).
    let pixels = vec![0, 51, 255, 255, 102, 153, 255, 255];
    let data = bnn_data::InMemoryDataset::new(pixels, vec![0, 1], (2, 1, 2), 2).unwrap();
    let stats = NormStats::measure(&data).unwrap();
    let std0 = (((0f64 - 76.5).powi(2)
        + (51f64 - 76.5).powi(2)
        + (102f64 - 76.5).powi(2)
        + (153f64 - 76.5).powi(2))
        / 4.0)
        .sqrt()
        / 255.0;
    assert!((stats.mean[0] as f64 - 0.3).abs() < 1e-6, "{stats:?}");
    assert!((stats.std[0] as f64 - std0).abs() < 1e-6, "{stats:?}");
    assert_eq!((stats.mean[1], stats.std[1]), (1.0, 1.0));
    assert!(NormStats::new(vec![0.5], vec![0.0]).is_err());
    assert!(NormStats::new(vec![0.5, 0.5], vec![0.2]).is_err());
    assert!(NormStats::new(vec![f32::NAN], vec![0.2]).is_err());
}

#[test]
fn presets_produce_the_paper_shapes() {
    let cifar = image(3, 32, 32, vec![0.5; 3 * 32 * 32]);
    for id in [DatasetId::Cifar10, DatasetId::Cifar100] {
        let out = id
            .train_transform()
            .apply(cifar.clone(), &mut SampleRng::new(1))
            .unwrap();
        assert_eq!(out.shape(), (3, 32, 32));
    }
    let big = image(3, 256, 256, vec![0.5; 3 * 256 * 256]);
    let out = DatasetId::ImageNet
        .train_transform()
        .apply(big.clone(), &mut SampleRng::new(1))
        .unwrap();
    assert_eq!(out.shape(), (3, 224, 224));
    let out = DatasetId::ImageNet
        .eval_transform()
        .apply(big, &mut SampleRng::new(1))
        .unwrap();
    assert_eq!(out.shape(), (3, 224, 224));
    let grey = image(1, 28, 28, vec![0.2860; 28 * 28]);
    let out = DatasetId::FashionMnist
        .train_transform()
        .apply(grey, &mut SampleRng::new(1))
        .unwrap();
    assert!(out.data.iter().all(|v| v.abs() < 1e-6));
}

#[test]
fn random_crop_covers_every_offset_and_random_flip_both_outcomes() {
    let img = image(1, 4, 4, (0..16).map(|v| v as f32).collect());
    let crop = RandomCrop {
        height: 4,
        width: 4,
        padding: 1,
        mode: PadMode::Constant(-1.0),
    };
    let mut corners = std::collections::BTreeSet::new();
    for seed in 0..400 {
        let out = crop.apply(img.clone(), &mut SampleRng::new(seed)).unwrap();
        corners.insert(out.data[0].to_bits());
    }
    // Offsets (0..3)^2 put one of {-1 (padding), 0, 1, 4, 5} in the corner.
    assert_eq!(corners.len(), 5);
    let flip = RandomHorizontalFlip::default();
    let outs: std::collections::BTreeSet<_> = (0..50)
        .map(|s| {
            flip.apply(img.clone(), &mut SampleRng::new(s))
                .unwrap()
                .data[0] as i32
        })
        .collect();
    assert_eq!(outs.into_iter().collect::<Vec<_>>(), vec![0, 3]);
}

#[test]
fn random_resized_crop_windows_respect_scale_and_ratio() {
    let rrc = RandomResizedCrop::new(224);
    let mut rng = SampleRng::new(9);
    for _ in 0..500 {
        let (top, left, h, w) = rrc.params(300, 400, &mut rng);
        assert!(top + h <= 300 && left + w <= 400 && h > 0 && w > 0);
        let area = (h * w) as f64 / (300.0 * 400.0);
        let ratio = w as f64 / h as f64;
        assert!((0.07..=1.0).contains(&area), "area {area}");
        assert!((0.74..=1.35).contains(&ratio), "ratio {ratio}");
    }
    // A very elongated image falls back to the largest centred crop in the ratio range.
    let (top, left, h, w) = RandomResizedCrop {
        size: 8,
        scale: (0.99, 1.0),
        ratio: (1.0, 1.0),
    }
    .params(10, 100, &mut SampleRng::new(0));
    assert_eq!((top, left, h, w), (0, 45, 10, 10));
}

#[test]
fn crops_that_do_not_fit_are_errors() {
    let img = image(1, 4, 4, vec![0.0; 16]);
    assert!(
        RandomCrop::reflect(9, 0)
            .apply(img.clone(), &mut SampleRng::new(0))
            .is_err()
    );
    assert!(
        CenterCrop {
            height: 5,
            width: 2
        }
        .apply(img, &mut SampleRng::new(0))
        .is_err()
    );
}

proptest! {
    #[test]
    fn flipping_twice_is_the_identity(img in arb_image()) {
        let once = HorizontalFlip.apply(img.clone(), &mut SampleRng::new(0)).unwrap();
        let twice = HorizontalFlip.apply(once.clone(), &mut SampleRng::new(0)).unwrap();
        prop_assert_eq!(&twice, &img);
        // The first flip mirrors each row.
        let (h, w) = (img.height, img.width);
        for c in 0..img.channels {
            for y in 0..h {
                for x in 0..w {
                    prop_assert_eq!(once.at(c, y, x), img.at(c, y, w - 1 - x));
                }
            }
        }
    }

    #[test]
    fn random_crop_has_the_requested_shape_and_values_from_the_image(
        img in arb_image(), pad in 0usize..5, seed in any::<u64>()
    ) {
        let (c, h, w) = img.shape();
        let crop = RandomCrop { height: h, width: w, padding: pad, mode: PadMode::Reflect };
        let out = crop.apply(img.clone(), &mut SampleRng::new(seed)).unwrap();
        prop_assert_eq!(out.shape(), (c, h, w));
        // Reflection only copies existing values.
        for v in &out.data {
            prop_assert!(img.data.contains(v));
        }
        // Without padding, a full-size crop is the identity.
        let same = RandomCrop { padding: 0, ..crop };
        prop_assert_eq!(same.apply(img.clone(), &mut SampleRng::new(seed)).unwrap(), img);
    }

    #[test]
    fn random_resized_crop_output_shape(img in arb_image(), size in 1usize..20, seed in any::<u64>()) {
        let out = RandomResizedCrop::new(size).apply(img.clone(), &mut SampleRng::new(seed)).unwrap();
        prop_assert_eq!(out.shape(), (img.channels, size, size));
        let (lo, hi) = img.data.iter().fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
        // Bilinear interpolation never leaves the input's range.
        for v in &out.data {
            prop_assert!(*v >= lo - 1e-5 && *v <= hi + 1e-5);
        }
    }

    #[test]
    fn transforms_are_deterministic_given_the_seed(img in arb_image(), seed in any::<u64>()) {
        let pipeline = Compose::new()
            .then(RandomCrop { height: img.height, width: img.width, padding: 2, mode: PadMode::Reflect })
            .then(RandomHorizontalFlip::default())
            .then(ColorJitter::paper());
        let a = pipeline.apply(img.clone(), &mut SampleRng::new(seed)).unwrap();
        let b = pipeline.apply(img, &mut SampleRng::new(seed)).unwrap();
        prop_assert_eq!(a, b);
    }
}
