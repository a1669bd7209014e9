//! The extension against burn's own `conv2d` on flex: outputs and both gradients over random
//! shapes, a finite-difference check, and repeatability; and the GPU route (im2col + matmul)
//! against burn's `conv2d` on the test backend (`SWBNN_TEST_BACKEND=wgpu` on a GPU or lavapipe).

use burn::prelude::*;
use burn::tensor::ops::ConvOptions;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::{conv2d, gpu_conv, uses_kernels};

fn device() -> Device {
    Device::flex().autodiff()
}

/// Which convolution [`run`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conv {
    /// [`conv2d`] through our flex kernels.
    Kernels,
    /// [`gpu_conv::conv2d`] (plus the bias).
    Im2col,
    /// burn's own `conv2d`.
    Burn,
}

#[derive(Debug, Clone)]
struct Case {
    x: [usize; 4],
    w: [usize; 4],
    options: ConvOptions<2>,
    bias: bool,
}

fn random_case(rng: &mut Xoshiro256PlusPlus) -> Case {
    loop {
        let k = [1, 3, 5, 7];
        let square = rng.random_range(0..4) > 0;
        let kh = k[rng.random_range(0..4)];
        let kw = if square {
            kh
        } else {
            k[rng.random_range(0..4)]
        };
        let stride = [rng.random_range(1..3), rng.random_range(1..3)];
        let dilation = [rng.random_range(1..3), rng.random_range(1..3)];
        let pad = |rng: &mut Xoshiro256PlusPlus, k: usize| {
            let p = rng.random_range(0..k / 2 + 2);
            // One case in four with different padding before and after.
            if rng.random_range(0..4) == 0 {
                (p, rng.random_range(0..3))
            } else {
                (p, p)
            }
        };
        let padding = [pad(rng, kh), pad(rng, kw)];
        let x = [
            rng.random_range(1..5),
            rng.random_range(1..6),
            rng.random_range(1..14),
            rng.random_range(1..14),
        ];
        let w = [rng.random_range(1..7), x[1], kh, kw];
        let options = ConvOptions::new_with_padding(stride, padding, dilation, 1);
        if super::conv_shape(x, w, &options).is_some() {
            return Case {
                x,
                w,
                options,
                bias: rng.random_range(0..2) == 0,
            };
        }
    }
}

struct Result {
    y: Vec<f32>,
    dx: Vec<f32>,
    dw: Vec<f32>,
    db: Option<Vec<f32>>,
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_to_vec::<f32>().unwrap()
}

/// A tensor of uniform values in [-1, 1) from its own generator: burn's seeded generator is
/// global, and tests run side by side.
fn uniform<const D: usize>(dims: [usize; D], seed: u64, device: &Device) -> Tensor<D> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let n = dims.iter().product();
    let v: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    Tensor::from_data(TensorData::new(v, dims), device)
}

/// Output and gradients of `sum(conv(x, w, b) * r)` with our kernels or burn's convolution.
fn run(case: &Case, seed: u64, ours: bool) -> Result {
    let conv = if ours { Conv::Kernels } else { Conv::Burn };
    run_on(case, seed, conv, &device())
}

/// [`run`] with any of the three convolutions, on `device` (an autodiff device).
fn run_on(case: &Case, seed: u64, conv: Conv, device: &Device) -> Result {
    let device = device.clone();
    let x = uniform(case.x, seed, &device).require_grad();
    let w = uniform(case.w, seed + 1, &device).require_grad();
    let b = case
        .bias
        .then(|| uniform([case.w[0]], seed + 2, &device).require_grad());
    let y = match conv {
        Conv::Kernels => {
            assert!(uses_kernels(&x, &w, &case.options), "{case:?}");
            conv2d(x.clone(), w.clone(), b.clone(), case.options.clone())
        }
        Conv::Im2col => {
            let y = gpu_conv::conv2d(x.clone(), w.clone(), &case.options);
            match b.clone() {
                Some(b) => y + b.reshape([1, case.w[0], 1, 1]),
                None => y,
            }
        }
        Conv::Burn => {
            burn::tensor::module::conv2d(x.clone(), w.clone(), b.clone(), case.options.clone())
        }
    };
    let r = uniform(y.dims(), seed + 3, &device);
    let grads = (y.clone() * r).sum().backward();
    Result {
        y: values(y.inner()),
        dx: values(x.grad(&grads).unwrap()),
        dw: values(w.grad(&grads).unwrap()),
        db: b.map(|b| values(b.grad(&grads).unwrap())),
    }
}

fn assert_close(what: &str, case: &Case, ours: &[f32], burn: &[f32]) {
    assert_close_within(what, case, ours, burn, 1e-4);
}

/// Every value within `tol` times the largest magnitude of `burn` (at least 1).
fn assert_close_within(what: &str, case: &Case, ours: &[f32], burn: &[f32], tol: f32) {
    assert_eq!(ours.len(), burn.len(), "{what} {case:?}");
    let scale = burn.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    for (i, (a, b)) in ours.iter().zip(burn).enumerate() {
        assert!(
            (a - b).abs() <= tol * scale,
            "{what}[{i}]: ours {a}, burn {b} (scale {scale}), {case:?}"
        );
    }
}

#[test]
fn output_and_gradients_match_burns_conv2d_over_random_shapes() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
    for i in 0..60 {
        let case = random_case(&mut rng);
        let ours = run(&case, i, true);
        let burn = run(&case, i, false);
        assert_close("y", &case, &ours.y, &burn.y);
        assert_close("dx", &case, &ours.dx, &burn.dx);
        assert_close("dw", &case, &ours.dw, &burn.dw);
        if let (Some(a), Some(b)) = (&ours.db, &burn.db) {
            assert_close("db", &case, a, b);
        }
    }
}

#[test]
fn the_gpu_route_matches_burns_conv2d_over_random_shapes() {
    // The route runs on the test backend (flex by default, a GPU with SWBNN_TEST_BACKEND=wgpu or
    // cuda); the reference is burn's convolution on flex. CUDA's f32 matmul may use TF32
    // (10-bit mantissa), hence its wider tolerance.
    let flex = device();
    let device = crate::test_device().autodiff();
    let tol = if crate::device::backend_name(&device) == Some("cuda") {
        2e-2
    } else {
        1e-4
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
    for i in 0..40 {
        let case = random_case(&mut rng);
        let ours = run_on(&case, i, Conv::Im2col, &device);
        let reference = run_on(&case, i, Conv::Burn, &flex);
        assert_close_within("y", &case, &ours.y, &reference.y, tol);
        assert_close_within("dx", &case, &ours.dx, &reference.dx, tol);
        assert_close_within("dw", &case, &ours.dw, &reference.dw, tol);
        if let (Some(a), Some(b)) = (&ours.db, &reference.db) {
            assert_close_within("db", &case, a, b, tol);
        }
    }
}

/// Diagnosis for the GPU route: which of the steps (padding, one tap's strided slice, the
/// stacked columns, the product) first differs from flex on the test device.
#[test]
fn the_gpu_routes_steps_match_flex_on_the_test_device() {
    use burn::tensor::ops::PadMode;
    let device = crate::test_device();
    let flex = Device::flex();
    let x = uniform([4, 1, 7, 1], 4, &flex);
    let on = |t: &Tensor<4>| Tensor::<4>::from_data(t.to_data(), &device);
    // CUDA's f32 matmul may use TF32 (10-bit mantissa).
    let tol = if crate::device::backend_name(&device) == Some("cuda") {
        2e-2
    } else {
        1e-5
    };
    let check = |what: &str, a: Tensor<4>, b: Tensor<4>| {
        assert_eq!(a.dims(), b.dims(), "{what}");
        let (a, b) = (values(a), values(b));
        for (i, (p, q)) in a.iter().zip(&b).enumerate() {
            assert!(
                (p - q).abs() <= tol * q.abs().max(1.0),
                "{what}[{i}]: device {p}, flex {q}"
            );
        }
    };
    let xt_f = x.clone().swap_dims(0, 1);
    let xt_d = on(&x).swap_dims(0, 1);
    check("swap_dims", xt_d.clone(), xt_f.clone());
    let pad = |t: Tensor<4>| t.pad((2, 2, 2, 2), PadMode::Constant(0.0));
    let (p_d, p_f) = (pad(xt_d), pad(xt_f));
    check("pad", p_d.clone(), p_f.clone());
    let tap = |t: Tensor<4>, i: isize| {
        t.slice([
            burn::tensor::Slice::new(0, None, 1),
            burn::tensor::Slice::new(0, None, 1),
            burn::tensor::Slice::new(i, Some(i + 7), 2),
            burn::tensor::Slice::new(0, Some(1), 1),
        ])
    };
    for i in 0..5 {
        check(
            &format!("tap {i}"),
            tap(p_d.clone(), i),
            tap(p_f.clone(), i),
        );
    }
    let stack = |t: Tensor<4>| {
        let taps: Vec<Tensor<4>> = (0..5).map(|i| tap(t.clone(), i)).collect();
        Tensor::<4>::stack::<5>(taps, 1).reshape([5, 4, 4, 1])
    };
    check("stack", stack(p_d.clone()), stack(p_f.clone()));
    let cols = |t: Tensor<4>| {
        let taps: Vec<Tensor<4>> = (0..5).map(|i| tap(t.clone(), i)).collect();
        Tensor::<4>::stack::<5>(taps, 1).reshape([5, 16])
    };
    let w = uniform([5, 5], 9, &flex);
    let w2 = |d: &Device| Tensor::<2>::from_data(w.to_data(), d);
    let prod = |w: Tensor<2>, c: Tensor<2>| w.matmul(c).reshape([5, 4, 4, 1]);
    check(
        "matmul",
        prod(w2(&device), cols(p_d)),
        prod(w2(&flex), cols(p_f)),
    );
    let weight = uniform([5, 1, 5, 5], 10, &flex);
    let options = ConvOptions::new([2, 1], [2, 2], [1, 1], 1);
    let expected = gpu_conv::conv2d(x.clone(), weight.clone(), &options);
    let got = gpu_conv::conv2d(on(&x), on(&weight), &options);
    check("conv", got, expected.clone());
    let ad = device.clone().autodiff();
    let got = gpu_conv::conv2d(
        Tensor::<4>::from_data(x.to_data(), &ad).require_grad(),
        Tensor::<4>::from_data(weight.to_data(), &ad).require_grad(),
        &options,
    );
    check("conv on autodiff", got.inner(), expected.clone());
    let b = uniform([5], 11, &flex);
    let with_bias =
        |y: Tensor<4>, d: &Device| y + Tensor::<1>::from_data(b.to_data(), d).reshape([1, 5, 1, 1]);
    let got = gpu_conv::conv2d(on(&x), on(&weight), &options);
    check(
        "conv + bias",
        with_bias(got, &device),
        with_bias(expected.clone(), &flex),
    );
    // The random-shape test's sequence: a second shape on the same device after the first.
    let x2 = uniform([3, 2, 6, 5], 12, &flex);
    let w2 = uniform([4, 2, 3, 3], 13, &flex);
    let o2 = ConvOptions::new([1, 2], [1, 0], [2, 1], 1);
    check(
        "second shape",
        gpu_conv::conv2d(on(&x2), on(&w2), &o2),
        gpu_conv::conv2d(x2, w2, &o2),
    );
    let got = gpu_conv::conv2d(on(&x), on(&weight), &options);
    check("first shape again", got, expected);
}

#[test]
fn gradients_match_finite_differences() {
    // L = sum(conv(x, w) * r) is linear in x and in w, so central differences are exact up to
    // rounding whatever the step.
    let case = Case {
        x: [2, 3, 6, 5],
        w: [4, 3, 3, 3],
        options: ConvOptions::new_with_padding([2, 1], [(1, 1), (2, 0)], [1, 2], 1),
        bias: false,
    };
    let device = device();
    let x = uniform(case.x, 3, &device);
    let w = uniform(case.w, 4, &device);
    let y = conv2d(x.clone(), w.clone(), None, case.options.clone());
    let r = uniform(y.dims(), 5, &device);
    let loss = |x: Tensor<4>, w: Tensor<4>| {
        (conv2d(x, w, None, case.options.clone()) * r.clone())
            .sum()
            .into_scalar::<f32>() as f64
    };
    let (xg, wg) = (x.clone().require_grad(), w.clone().require_grad());
    let grads = (conv2d(xg.clone(), wg.clone(), None, case.options.clone()) * r.clone())
        .sum()
        .backward();
    let dx = values(xg.grad(&grads).unwrap());
    let dw = values(wg.grad(&grads).unwrap());
    let step = 0.25;
    let bump = |t: &Tensor<4>, i: usize, by: f32| {
        let mut v = values(t.clone());
        v[i] += by;
        Tensor::<4>::from_data(TensorData::new(v, t.dims()), &device)
    };
    for i in (0..dx.len()).step_by(7) {
        let fd = (loss(bump(&x, i, step), w.clone()) - loss(bump(&x, i, -step), w.clone()))
            / (2.0 * step as f64);
        assert!(
            (fd - dx[i] as f64).abs() < 1e-3,
            "dx[{i}]: {fd} vs {}",
            dx[i]
        );
    }
    for i in (0..dw.len()).step_by(5) {
        let fd = (loss(x.clone(), bump(&w, i, step)) - loss(x.clone(), bump(&w, i, -step)))
            / (2.0 * step as f64);
        assert!(
            (fd - dw[i] as f64).abs() < 1e-3,
            "dw[{i}]: {fd} vs {}",
            dw[i]
        );
    }
}

#[test]
fn repeated_runs_give_the_same_bits_on_any_thread_count() {
    let case = Case {
        x: [19, 5, 9, 9],
        w: [6, 5, 3, 3],
        options: ConvOptions::new([1, 1], [1, 1], [1, 1], 1),
        bias: true,
    };
    let bits = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                let r = run(&case, 5, true);
                [r.y, r.dx, r.dw, r.db.unwrap()].map(|v| v.iter().map(|f| f.to_bits()).collect())
            })
    };
    let first: [Vec<u32>; 4] = bits(2);
    assert_eq!(first, bits(2));
    assert_eq!(first, bits(1));
    assert_eq!(first, bits(3));
}

#[test]
fn groups_and_other_dtypes_go_to_burns_convolution() {
    let device = device();
    let x = Tensor::<4>::ones([2, 4, 5, 5], &device);
    let w = Tensor::<4>::ones([6, 2, 3, 3], &device);
    let grouped = ConvOptions::new([1, 1], [1, 1], [1, 1], 2);
    assert!(!uses_kernels(&x, &w, &grouped));
    let y = conv2d(x.clone(), w.clone(), None, grouped.clone());
    let want = burn::tensor::module::conv2d(x.clone(), w.clone(), None, grouped);
    assert_eq!(y.into_data(), want.into_data());
    let plain = ConvOptions::new([1, 1], [1, 1], [1, 1], 1);
    let w4 = Tensor::<4>::ones([6, 4, 3, 3], &device);
    assert!(uses_kernels(&x, &w4, &plain));
    let half = x.cast(burn::tensor::DType::F16);
    assert!(!uses_kernels(
        &half,
        &w4.clone().cast(burn::tensor::DType::F16),
        &plain
    ));
    // A kernel larger than the padded input is left to burn (and its error message).
    assert!(!uses_kernels(
        &Tensor::<4>::ones([1, 4, 2, 2], &device),
        &w4,
        &ConvOptions::new([1, 1], [0, 0], [1, 1], 1)
    ));
}

#[test]
fn batch_norm_matches_the_layers_own_forward_and_backward() {
    use burn::nn::BatchNormConfig;
    let device = device();
    for (i, dims) in [[4, 3, 5, 7], [1, 2, 1, 1], [9, 5, 3, 2]]
        .into_iter()
        .enumerate()
    {
        let seed = 40 + 4 * i as u64;
        let run = |ours: bool| {
            let layer = BatchNormConfig::new(dims[1]).init(&device);
            let gamma = uniform([dims[1]], seed, &device).add_scalar(1.5);
            let beta = uniform([dims[1]], seed + 1, &device);
            let layer = burn::nn::BatchNorm {
                gamma: burn::module::Param::from_tensor(gamma),
                beta: burn::module::Param::from_tensor(beta),
                ..layer
            };
            let x = uniform(dims, seed + 2, &device)
                .mul_scalar(3.0)
                .add_scalar(0.5);
            let x = x.require_grad();
            let y = if ours {
                super::batch_norm(&layer, x.clone())
            } else {
                layer.forward(x.clone())
            };
            let r = uniform(dims, seed + 3, &device);
            let grads = (y.clone() * r).sum().backward();
            [
                values(y.inner()),
                values(x.grad(&grads).unwrap()),
                values(layer.gamma.grad(&grads).unwrap()),
                values(layer.beta.grad(&grads).unwrap()),
                values(layer.running_mean.value_sync()),
                values(layer.running_var.value_sync()),
            ]
        };
        let (ours, mut burn) = (run(true), run(false));
        // burn's layer keeps the biased batch variance, ours the unbiased one (PyTorch's):
        // from 1, one step at momentum 0.1 gives 0.9 + 0.1 * v * n / (n - 1).
        let n = (dims[0] * dims[2] * dims[3]) as f32;
        let bessel = if n > 1.0 { n / (n - 1.0) } else { 1.0 };
        for v in &mut burn[5] {
            *v = 0.9 + (*v - 0.9) * bessel;
        }
        let case = Case {
            x: dims,
            w: [0; 4],
            options: ConvOptions::new([1, 1], [0, 0], [1, 1], 1),
            bias: false,
        };
        for (what, (a, b)) in ["y", "dx", "dgamma", "dbeta", "running mean", "running var"]
            .iter()
            .zip(ours.iter().zip(&burn))
        {
            assert_close(what, &case, a, b);
        }
    }
}

/// Inference-mode batch norm (and batch norm + ReLU) in one pass gives burn's bits: running
/// statistics set away from 0/1, negative, zero, NaN and infinite inputs, ranks 2 to 4.
#[test]
fn inference_batch_norm_and_relu_are_bit_for_bit_burns() {
    use burn::nn::BatchNormConfig;
    use burn::tensor::activation::relu;
    let device = Device::flex();
    let layer_for = |channels: usize, seed: u64| {
        let layer = BatchNormConfig::new(channels).init(&device);
        let stat = |s: u64, scale: f32, shift: f32| {
            burn::module::RunningState::new(
                uniform([channels], s, &device)
                    .mul_scalar(scale)
                    .add_scalar(shift),
            )
        };
        burn::nn::BatchNorm {
            gamma: burn::module::Param::from_tensor(uniform([channels], seed, &device)),
            beta: burn::module::Param::from_tensor(uniform([channels], seed + 1, &device)),
            running_mean: stat(seed + 2, 2.0, 0.0),
            running_var: stat(seed + 3, 0.4, 0.6),
            ..layer
        }
    };
    let bits = |t: Vec<f32>| t.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    let check = |what: &str, ours: Vec<f32>, burn: Vec<f32>| {
        assert!(
            bits(ours.clone()) == bits(burn.clone()),
            "{what}: {ours:?} vs {burn:?}"
        );
    };
    for (i, dims) in [[4, 3, 5, 7], [1, 2, 1, 1], [9, 5, 3, 2]]
        .into_iter()
        .enumerate()
    {
        let layer = layer_for(dims[1], 70 + 5 * i as u64);
        let mut v = values(uniform(dims, 74 + 5 * i as u64, &device).mul_scalar(3.0));
        for (slot, special) in v.iter_mut().zip([f32::NAN, 0.0, -0.0, f32::INFINITY]) {
            *slot = special;
        }
        let x = Tensor::<4>::from_data(TensorData::new(v, dims), &device);
        check(
            "batch norm",
            values(super::batch_norm(&layer, x.clone())),
            values(layer.forward(x.clone())),
        );
        check(
            "batch norm + relu",
            values(super::batch_norm_relu(&layer, x.clone())),
            values(relu(layer.forward(x))),
        );
    }
    let layer = layer_for(6, 90);
    let x = uniform([5, 6], 95, &device);
    check(
        "rank 2",
        values(super::batch_norm_relu(&layer, x.clone())),
        values(relu(layer.forward(x))),
    );
}

/// PyTorch's `BatchNorm2d(2)` in training mode on one batch whose channels hold 1, 2, 3, 4 and
/// 0, 0, 0, 8 (two images of 1x2 values): running mean `0.1 * mean` = 0.25, 0.2, running
/// variance `0.9 + 0.1 * unbiased variance` = 0.9 + 0.1 * 5/3, 0.9 + 0.1 * 16.
#[test]
fn batch_norms_running_variance_is_pytorchs_unbiased_one() {
    // Our kernels on flex; burn's batch statistics on the backend under test, if another.
    for device in [device(), crate::test_device().autodiff()] {
        running_variance_on(&device);
    }
}

fn running_variance_on(device: &Device) {
    use burn::nn::BatchNormConfig;
    let device = device.clone();
    let layer = BatchNormConfig::new(2).init(&device);
    // [batch 2, channels 2, 1, 2]: channel 0 holds 1, 2 | 3, 4, channel 1 holds 0, 0 | 0, 8.
    let x = Tensor::<4>::from_floats(
        [[[[1.0, 2.0]], [[0.0, 0.0]]], [[[3.0, 4.0]], [[0.0, 8.0]]]],
        &device,
    )
    .require_grad();
    let _ = super::batch_norm(&layer, x);
    let mean = values(layer.running_mean.value_sync());
    let var = values(layer.running_var.value_sync());
    for (got, want) in mean.iter().zip([0.25f32, 0.2]) {
        assert!((got - want).abs() < 1e-6, "running mean {mean:?}");
    }
    for (got, want) in var.iter().zip([0.9 + 0.1 * 5.0 / 3.0, 0.9 + 0.1 * 16.0f32]) {
        assert!((got - want).abs() < 1e-5, "running variance {var:?}");
    }
}

#[test]
fn softplus_and_its_gradient_match_burns_log_sigmoid() {
    let device = device();
    let x = uniform([7, 300], 60, &device)
        .mul_scalar(30.0)
        .require_grad();
    let r = uniform([7, 300], 61, &device);
    let run = |ours: bool| {
        let y = if ours {
            super::softplus(x.clone())
        } else {
            burn::tensor::activation::log_sigmoid(x.clone().neg()).neg()
        };
        let grads = (y.clone() * r.clone()).sum().backward();
        [values(y.inner()), values(x.grad(&grads).unwrap())]
    };
    let (ours, burn) = (run(true), run(false));
    let case = Case {
        x: [7, 300, 1, 1],
        w: [0; 4],
        options: ConvOptions::new([1, 1], [0, 0], [1, 1], 1),
        bias: false,
    };
    assert_close("softplus", &case, &ours[0], &burn[0]);
    assert_close("softplus gradient", &case, &ours[1], &burn[1]);
}
