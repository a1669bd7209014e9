//! Batch loader: determinism across worker counts, coverage, drop_last, subsets.

use std::sync::Arc;

use bnn_data::{
    Batch, Compose, DataError, DataLoader, Dataset, InMemoryDataset, LoaderConfig, NormStats,
    Normalize, RandomCrop, RandomHorizontalFlip, Sample, Subset, Transform,
};

/// `n` RGB 6×6 images; pixel values encode the index, label = index % classes.
fn toy(n: usize, classes: usize) -> InMemoryDataset {
    let per = 3 * 6 * 6;
    let pixels = (0..n)
        .flat_map(|i| (0..per).map(move |k| ((i * 17 + k * 5) % 256) as u8))
        .collect();
    let labels = (0..n).map(|i| (i % classes) as u32).collect();
    InMemoryDataset::new(pixels, labels, (3, 6, 6), classes).unwrap()
}

fn augment() -> Compose {
    Compose::new()
        .then(RandomCrop::reflect(6, 2))
        .then(RandomHorizontalFlip::default())
        .then(Normalize::new(NormStats::CIFAR10))
}

fn run(data: Arc<dyn Dataset>, config: LoaderConfig, epoch: u64) -> Vec<Batch> {
    DataLoader::from_arcs(data, Arc::new(augment()), config)
        .unwrap()
        .epoch(epoch)
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

#[test]
fn batches_are_identical_for_any_worker_count() {
    let data: Arc<dyn Dataset> = Arc::new(toy(103, 5));
    let base = LoaderConfig {
        batch_size: 8,
        seed: 11,
        workers: 0,
        prefetch: 2,
        ..Default::default()
    };
    let reference = run(data.clone(), base, 3);
    for workers in [1, 2, 3, 7] {
        for prefetch in [1, 5] {
            let got = run(
                data.clone(),
                LoaderConfig {
                    workers,
                    prefetch,
                    ..base
                },
                3,
            );
            assert_eq!(got, reference, "workers {workers}, prefetch {prefetch}");
        }
    }
    // Another epoch gives another order and other augmentations; the same epoch repeats.
    let other = run(data.clone(), base, 4);
    assert_ne!(other[0].indices, reference[0].indices);
    assert_eq!(run(data, base, 3), reference);
}

#[test]
fn every_sample_exactly_once_per_epoch() {
    let data: Arc<dyn Dataset> = Arc::new(toy(50, 4));
    for (drop_last, expect_batches, expect_samples) in [(false, 7, 50), (true, 6, 48)] {
        let config = LoaderConfig {
            batch_size: 8,
            drop_last,
            seed: 5,
            workers: 3,
            ..Default::default()
        };
        for epoch in 0..3 {
            let batches = run(data.clone(), config, epoch);
            assert_eq!(batches.len(), expect_batches);
            let mut seen: Vec<usize> = batches.iter().flat_map(|b| b.indices.clone()).collect();
            assert_eq!(seen.len(), expect_samples);
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), expect_samples, "duplicates in epoch {epoch}");
            for b in &batches {
                assert_eq!(b.images.len(), b.shape.iter().product::<usize>());
                assert_eq!(b.shape[1..], [3, 6, 6]);
                // Labels travel with their samples.
                for (&i, &l) in b.indices.iter().zip(&b.labels) {
                    assert_eq!(l as usize, i % 4);
                }
            }
        }
    }
}

#[test]
fn unshuffled_order_is_sequential_and_images_match_single_samples() {
    let data = toy(10, 2);
    let config = LoaderConfig {
        batch_size: 4,
        shuffle: false,
        seed: 1,
        workers: 2,
        ..Default::default()
    };
    let loader = DataLoader::new(data, augment(), config).unwrap();
    assert_eq!(loader.num_batches(), 3);
    let batches: Vec<Batch> = loader.epoch(2).collect::<Result<_, _>>().unwrap();
    let order: Vec<usize> = batches.iter().flat_map(|b| b.indices.clone()).collect();
    assert_eq!(order, (0..10).collect::<Vec<_>>());
    // Each batch slot equals the sample transformed on its own with (seed, epoch, index).
    let per = 3 * 6 * 6;
    for b in &batches {
        for (slot, &i) in b.indices.iter().enumerate() {
            let (img, label) = loader.sample(2, i).unwrap();
            assert_eq!(&b.images[slot * per..(slot + 1) * per], &img.data[..]);
            assert_eq!(b.labels[slot], label);
        }
    }
}

#[test]
fn early_drop_stops_workers_and_errors_surface() {
    let loader = DataLoader::new(
        toy(200, 3),
        augment(),
        LoaderConfig {
            batch_size: 2,
            workers: 4,
            prefetch: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let mut it = loader.epoch(0);
    assert_eq!(it.len(), 100);
    assert!(it.next().unwrap().is_ok());
    drop(it); // must not hang

    /// A data set whose sample 3 cannot be read.
    struct Flaky(InMemoryDataset);
    impl Dataset for Flaky {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn classes(&self) -> usize {
            self.0.classes()
        }
        fn shape(&self) -> (usize, usize, usize) {
            self.0.shape()
        }
        fn get(&self, index: usize) -> bnn_data::Result<Sample> {
            if index == 3 {
                Err(DataError::format("flaky.bin", "sample 3 is unreadable"))
            } else {
                self.0.get(index)
            }
        }
    }
    let loader = DataLoader::new(
        Flaky(toy(8, 2)),
        Compose::new(),
        LoaderConfig {
            batch_size: 2,
            shuffle: false,
            workers: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let results: Vec<_> = loader.epoch(0).collect();
    assert_eq!(results.len(), 4);
    assert!(results[0].is_ok() && results[2].is_ok() && results[3].is_ok());
    assert!(
        results[1]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("flaky.bin")
    );
    assert!(
        DataLoader::new(
            toy(2, 2),
            Compose::new(),
            LoaderConfig {
                batch_size: 0,
                ..Default::default()
            }
        )
        .is_err()
    );
}

#[test]
fn mixed_shapes_in_a_batch_are_reported() {
    /// Crops odd samples to a different size.
    struct OddCrop;
    impl Transform for OddCrop {
        fn apply(
            &self,
            img: bnn_data::Image,
            rng: &mut bnn_data::SampleRng,
        ) -> bnn_data::Result<bnn_data::Image> {
            let size = if img.data[0] > 0.5 { 4 } else { 6 };
            RandomCrop::reflect(size, 0).apply(img, rng)
        }
    }
    let pixels: Vec<u8> = (0..4)
        .flat_map(|i| vec![if i == 1 { 255 } else { 0 }; 3 * 36])
        .collect();
    let data = InMemoryDataset::new(pixels, vec![0; 4], (3, 6, 6), 1).unwrap();
    let config = LoaderConfig {
        batch_size: 4,
        shuffle: false,
        workers: 0,
        ..Default::default()
    };
    let err = DataLoader::new(data, OddCrop, config)
        .unwrap()
        .epoch(0)
        .next()
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(err, DataError::ShapeMismatch { index: 1, .. }),
        "{err}"
    );
}

#[test]
fn subsets_first_random_and_stratified() {
    let data = toy(100, 4); // 25 per class
    let first = Subset::first(data.clone(), 10);
    assert_eq!(first.indices(), &(0..10).collect::<Vec<_>>()[..]);
    assert_eq!(Subset::first(data.clone(), 1000).len(), 100);

    let a = Subset::random(data.clone(), 30, 7);
    let b = Subset::random(data.clone(), 30, 7);
    let c = Subset::random(data.clone(), 30, 8);
    assert_eq!(a.indices(), b.indices());
    assert_ne!(a.indices(), c.indices());
    let mut u = a.indices().to_vec();
    u.dedup();
    assert_eq!(u.len(), 30);
    assert!(a.indices().windows(2).all(|w| w[0] < w[1]));

    // Unbalanced classes: 0 has 40, 1 has 40, 2 has 20 samples; 10% keeps 4/4/2.
    let labels: Vec<u32> = (0..100)
        .map(|i| {
            if i < 40 {
                0
            } else if i < 80 {
                1
            } else {
                2
            }
        })
        .collect();
    let pixels = vec![0u8; 100 * 3 * 36];
    let unbalanced = InMemoryDataset::new(pixels, labels, (3, 6, 6), 3).unwrap();
    let s = Subset::stratified(unbalanced, 10, 3).unwrap();
    let mut counts = [0; 3];
    for i in 0..s.len() {
        counts[s.label(i).unwrap() as usize] += 1;
    }
    assert_eq!(counts, [4, 4, 2]);
    // Largest remainder: 7 of 25/25/25/25 gives 2/2/2/1.
    let s = Subset::stratified(data.clone(), 7, 1).unwrap();
    let mut counts = [0; 4];
    for i in 0..s.len() {
        counts[s.get(i).unwrap().label as usize] += 1;
    }
    assert_eq!(counts, [2, 2, 2, 1]);
    assert!(Subset::from_indices(data, vec![0, 100]).is_err());
}

#[test]
fn a_holdout_is_disjoint_stratified_reproducible_and_checked() {
    let data = toy(100, 4); // 25 per class
    let (rest, held) = Subset::holdout(data.clone(), 20, 5).unwrap();
    assert_eq!((rest.len(), held.len()), (80, 20));
    let mut all: Vec<usize> = rest
        .indices()
        .iter()
        .chain(held.indices())
        .copied()
        .collect();
    all.sort_unstable();
    assert_eq!(
        all,
        (0..100).collect::<Vec<_>>(),
        "the two parts cover the set once"
    );
    let mut counts = [0; 4];
    for i in 0..held.len() {
        counts[held.label(i).unwrap() as usize] += 1;
    }
    assert_eq!(counts, [5, 5, 5, 5]);
    let (_, again) = Subset::holdout(data.clone(), 20, 5).unwrap();
    assert_eq!(held.indices(), again.indices());
    let (_, other) = Subset::holdout(data.clone(), 20, 6).unwrap();
    assert_ne!(held.indices(), other.indices());
    let (rest, none) = Subset::holdout(data.clone(), 0, 5).unwrap();
    assert_eq!((rest.len(), none.len()), (100, 0));
    let err = Subset::holdout(data, 101, 5).unwrap_err().to_string();
    assert!(err.contains("101") && err.contains("100"), "{err}");
}
