//! Behaviour of the Bayesian and shared layers: stochasticity, mean mode, closed-form KL,
//! finite-difference gradients of the shared codebook, conversions.

use bnn_layers::{
    BayesConv2dConfig, BayesLinearConfig, BayesOptions, Codebook, Estimator, Prior, SharedConv2d,
    SharedKl, SharedLinear, WeightSource, export_bayes, kl_divergence, kl_divergence_with,
    set_mc_stack, set_sampling, test_device,
};
use burn::module::Module;
use burn::prelude::*;
use burn::tensor::{Distribution, TensorData};

use bnn_layers::lock_device_rng as rng_lock;
use bnn_layers::noise::{common_noise_sample, common_noise_stacked};

fn scalar(t: Tensor<1>) -> f64 {
    t.into_scalar::<f32>() as f64
}

#[test]
fn every_estimator_is_stochastic_and_mean_mode_is_not() {
    let _guard = rng_lock();
    let device = test_device();
    let x = Tensor::<2>::random([8, 6], Distribution::Normal(0.0, 1.0), &device);
    for e in [
        Estimator::Reparameterization,
        Estimator::LocalReparameterization,
        Estimator::Flipout,
    ] {
        let layer = BayesLinearConfig::new(6, 4)
            .with_options(
                BayesOptions::new()
                    .with_estimator(e)
                    .with_weight_sigma(bnn_layers::SigmaInit::Constant { sigma: 0.1 }),
            )
            .init(&device);
        let a = layer.forward(x.clone());
        let b = layer.forward(x.clone());
        assert!(
            scalar((a - b).abs().sum()) > 1e-3,
            "{e:?} should be stochastic"
        );
        let layer = set_sampling(layer, false);
        let d = scalar(
            (layer.forward(x.clone()) - layer.forward(x.clone()))
                .abs()
                .sum(),
        );
        assert_eq!(d, 0.0, "{e:?} mean mode must be deterministic");
    }
}

#[test]
fn sampled_outputs_average_to_the_mean_output() {
    let _guard = rng_lock();
    let device = test_device();
    let x = Tensor::<4>::ones([4, 2, 5, 5], &device);
    for e in [
        Estimator::Reparameterization,
        Estimator::LocalReparameterization,
        Estimator::Flipout,
    ] {
        let conv = BayesConv2dConfig::new([2, 3], [3, 3])
            .with_padding([1, 1])
            .with_options(
                BayesOptions::new()
                    .with_estimator(e)
                    .with_weight_sigma(bnn_layers::SigmaInit::Constant { sigma: 0.05 }),
            )
            .init(&device);
        let mean = set_sampling(conv.clone(), false).forward(x.clone());
        let mut acc = mean.zeros_like();
        let n = 400;
        for _ in 0..n {
            acc = acc + conv.forward(x.clone());
        }
        let err = scalar(
            (acc.div_scalar(n as f64) - mean.clone())
                .abs()
                .max()
                .reshape([1]),
        );
        assert!(err < 0.06, "{e:?}: mean of samples off by {err}");
    }
}

#[test]
fn kl_matches_the_closed_form_on_exported_values() {
    let _guard = rng_lock();
    let device = test_device();
    let layer = BayesLinearConfig::new(5, 3).init(&device);
    let prior = Prior::Normal {
        mu: 0.02,
        sigma: 0.1,
    };
    let kl = scalar(kl_divergence(&layer, &prior).unwrap());
    let mut expected = 0.0;
    for t in export_bayes(&layer, None) {
        for (&m, &s) in t.mu.iter().zip(&t.sigma) {
            let (m, s) = (m as f64, s as f64);
            expected += (0.1 / s).ln() + (s * s + (m - 0.02).powi(2)) / (2.0 * 0.01) - 0.5;
        }
    }
    assert!(
        (kl - expected).abs() / expected.abs() < 1e-4,
        "{kl} vs {expected}"
    );
}

fn host(t: Tensor<1>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap()
}

/// Loss of a shared layer with the codebook `(mu, rho)`, noise fixed by seeding the device.
fn shared_loss(
    device: &Device,
    mu: &[f32],
    rho: &[f32],
    sources: &[WeightSource],
    x: &Tensor<2>,
) -> (Tensor<1>, Codebook) {
    let codebook = Codebook::new(mu, rho, device).unwrap();
    let base = BayesLinearConfig::new(3, 2).with_bias(false).init(device);
    let layer = SharedLinear::from_bayes(&base, sources, mu.len()).unwrap();
    device.seed(1234);
    let out = layer.forward(x.clone(), &codebook.view());
    let prior = Prior::Normal {
        mu: 0.0,
        sigma: 1.0,
    };
    let network = SharedNet {
        layer,
        codebook: codebook.clone(),
    };
    let kl = kl_divergence(&network, &prior).unwrap();
    (
        (out.powi_scalar(2).sum() + kl.mul_scalar(0.1)).reshape([1]),
        codebook,
    )
}

#[derive(Module, Debug)]
struct SharedNet {
    layer: SharedLinear,
    codebook: Codebook,
}

#[test]
fn gradients_reach_the_codebook_and_match_finite_differences() {
    let _guard = rng_lock();
    let device = test_device().autodiff();
    let mu = [0.5f32, -0.3, 0.8];
    let rho = [-1.0f32, -0.5, -1.5];
    let sources = vec![
        WeightSource::Codebook(0),
        WeightSource::Codebook(1),
        WeightSource::Outlier { mu: 0.2, rho: -2.0 },
        WeightSource::Codebook(0),
        WeightSource::Ellipse {
            components: vec![0, 2],
            alphas: vec![0.7, 0.3],
        },
        WeightSource::Codebook(2),
    ];
    let x = Tensor::<2>::from_data(
        TensorData::new(vec![1.0f32, -0.5, 0.3, 0.2, 0.9, -1.1], [2, 3]),
        &device,
    );
    let (loss, codebook) = shared_loss(&device, &mu, &rho, &sources, &x);
    let grads = loss.backward();
    let g_mu = host(
        codebook
            .mu
            .val()
            .grad(&grads)
            .expect("codebook mu has a gradient"),
    );
    let g_rho = host(
        codebook
            .rho
            .val()
            .grad(&grads)
            .expect("codebook rho has a gradient"),
    );
    let plain = Device::default();
    let _ = plain;
    let h = 1e-2f32;
    let value = |m: &[f32], r: &[f32]| {
        let (l, _) = shared_loss(&device, m, r, &sources, &x);
        l.into_scalar::<f32>() as f64
    };
    for k in 0..3 {
        let (mut up, mut down) = (mu, mu);
        up[k] += h;
        down[k] -= h;
        let fd = (value(&up, &rho) - value(&down, &rho)) / (2.0 * h as f64);
        assert!(
            (fd - g_mu[k] as f64).abs() < 2e-2 * (1.0 + fd.abs()),
            "d/d mu_{k}: autodiff {} vs fd {fd}",
            g_mu[k]
        );
        let (mut up, mut down) = (rho, rho);
        up[k] += h;
        down[k] -= h;
        let fd = (value(&mu, &up) - value(&mu, &down)) / (2.0 * h as f64);
        assert!(
            (fd - g_rho[k] as f64).abs() < 2e-2 * (1.0 + fd.abs()),
            "d/d rho_{k}: autodiff {} vs fd {fd}",
            g_rho[k]
        );
        assert!(g_mu[k].abs() > 0.0);
    }
}

#[test]
fn shared_layer_rejects_bad_sources() {
    let _guard = rng_lock();
    let device = test_device();
    let base = BayesLinearConfig::new(2, 2).init(&device);
    let too_few = vec![WeightSource::Codebook(0); 3];
    assert!(SharedLinear::from_bayes(&base, &too_few, 4).is_err());
    let out_of_range = vec![WeightSource::Codebook(9); 4];
    assert!(SharedLinear::from_bayes(&base, &out_of_range, 4).is_err());
    let mut bad_blend = vec![WeightSource::Codebook(0); 4];
    bad_blend[1] = WeightSource::Ellipse {
        components: vec![0, 1],
        alphas: vec![f32::NAN, 1.0],
    };
    assert!(SharedLinear::from_bayes(&base, &bad_blend, 4).is_err());
    let mut nan_outlier = vec![WeightSource::Codebook(0); 4];
    nan_outlier[0] = WeightSource::Outlier {
        mu: f32::INFINITY,
        rho: 0.0,
    };
    assert!(SharedLinear::from_bayes(&base, &nan_outlier, 4).is_err());
}

#[test]
fn conversion_round_trip_by_path() {
    let _guard = rng_lock();
    use burn::nn::{Linear, LinearConfig};
    #[derive(Module, Debug)]
    struct Det {
        fc: Linear,
    }
    #[derive(Module, Debug)]
    struct Bayes {
        fc: bnn_layers::BayesLinear,
    }
    let device = test_device();
    let det = Det {
        fc: LinearConfig::new(4, 3).init(&device),
    };
    let bayes = Bayes {
        fc: BayesLinearConfig::new(4, 3)
            .with_options(BayesOptions::new().with_empirical_prior(true))
            .init(&device),
    };
    let (bayes, copied) = bnn_layers::bayes_from_deterministic(&det, bayes).unwrap();
    assert_eq!(copied, 4, "weight_mu, bias_mu and both prior centres");
    let w = host(det.fc.weight.val().reshape([12]));
    assert_eq!(host(bayes.fc.weight_mu.val().reshape([12])), w);
    assert_eq!(
        host(
            bayes
                .fc
                .weight_prior_mu
                .as_ref()
                .unwrap()
                .val()
                .reshape([12])
        ),
        w
    );
    let fresh = Det {
        fc: LinearConfig::new(4, 3).init(&device),
    };
    let (back, _) = bnn_layers::deterministic_from_bayes(&bayes, fresh).unwrap();
    assert_eq!(host(back.fc.weight.val().reshape([12])), w);
    // Empirical prior centred on the weights: the KL only sees sigma.
    let kl = scalar(kl_divergence(&bayes, &Prior::Empirical { sigma: 0.1 }).unwrap());
    let mut expected = 0.0;
    for t in export_bayes(&bayes, None) {
        for &s in &t.sigma {
            let s = s as f64;
            expected += (0.1 / s).ln() + s * s / 0.02 - 0.5;
        }
    }
    // The bias prior centre is the deterministic bias, too.
    assert!(
        (kl - expected).abs() / expected < 1e-4,
        "{kl} vs {expected}"
    );
}

/// Both ways of counting a shared layer's KL, against the closed form on host values: per
/// weight (each weight's gathered distribution once), and the paper's mixture bound (outliers
/// per weight, the other shared weights by their mean).
#[test]
fn shared_kl_per_weight_mixture_and_codebook_match_the_closed_form() {
    let device = test_device();
    let (mu, rho) = ([0.5f32, -0.3], [-1.0f32, -0.5]);
    let sources = vec![
        WeightSource::Codebook(0),
        WeightSource::Codebook(1),
        WeightSource::Outlier { mu: 0.2, rho: -2.0 },
        WeightSource::Codebook(0),
        WeightSource::Ellipse {
            components: vec![0, 1],
            alphas: vec![0.75, 0.25],
        },
        WeightSource::Codebook(0),
    ];
    let base = BayesLinearConfig::new(3, 2).with_bias(false).init(&device);
    let network = SharedNet {
        layer: SharedLinear::from_bayes(&base, &sources, 2).unwrap(),
        codebook: Codebook::new(&mu, &rho, &device).unwrap(),
    };
    let prior = Prior::Normal {
        mu: 0.1,
        sigma: 0.7,
    };
    let sp = |r: f32| (1.0 + (r as f64).exp()).ln();
    let kl = |m: f64, s: f64| (0.7f64 / s).ln() + (s * s + (m - 0.1).powi(2)) / (2.0 * 0.49) - 0.5;
    let k0 = kl(0.5, sp(-1.0));
    let k1 = kl(-0.3, sp(-0.5));
    let k_out = kl(0.2, sp(-2.0));
    // The ellipse weight: moment-matched blend of entries 0 and 1.
    let m: f64 = 0.75 * 0.5 + 0.25 * -0.3;
    let v = 0.75 * (sp(-1.0).powi(2) + (0.5 - m).powi(2))
        + 0.25 * (sp(-0.5).powi(2) + (-0.3f64 - m).powi(2));
    let k_ell = kl(m, v.sqrt());
    let per_weight = 3.0 * k0 + k1 + k_out + k_ell;
    let mixture = k_out + (3.0 * k0 + k1 + k_ell) / 5.0;
    let got = scalar(kl_divergence(&network, &prior).unwrap());
    assert!(
        (got - per_weight).abs() < 1e-4 * per_weight.abs(),
        "{got} vs {per_weight}"
    );
    let got = scalar(kl_divergence_with(&network, &prior, SharedKl::Mixture).unwrap());
    assert!(
        (got - mixture).abs() < 1e-4 * mixture.abs(),
        "{got} vs {mixture}"
    );
    // Codebook level: entry 0 has 3.75 members (the ellipse weight counts 0.75), entry 1 has
    // 1.25; the outlier keeps its own KL. Only the ellipse term differs from per weight.
    let codebook = 3.75 * k0 + 1.25 * k1 + k_out;
    assert!(
        (codebook - per_weight).abs() > 1e-3,
        "the test needs them apart"
    );
    let got = scalar(kl_divergence_with(&network, &prior, SharedKl::Codebook).unwrap());
    assert!(
        (got - codebook).abs() < 1e-4 * codebook.abs(),
        "{got} vs {codebook}"
    );
}

#[derive(Module, Debug)]
struct ManyShared {
    layers: Vec<SharedLinear>,
    codebook: Codebook,
}

/// The KL of a model with several shared layers is summed in the model's order, so it is the
/// same number on every call (each call collects the model anew). One layer's KL is about
/// `1e7` and five are about `0.3` each: in `f32` the small terms vanish when added to the
/// large one one at a time, but not when summed first, so any change of order shows.
#[test]
fn the_kl_of_many_shared_layers_is_the_same_on_every_call() {
    let device = test_device();
    // Entry 0 is far from the prior (KL about 1e6 per weight), entry 1 near it (about 0.32).
    let codebook = Codebook::new(&[1000.0, 0.1], &[-1.0, -0.87], &device).unwrap();
    let big = BayesLinearConfig::new(5, 2).with_bias(false).init(&device);
    let mut layers =
        vec![SharedLinear::from_bayes(&big, &vec![WeightSource::Codebook(0); 10], 2).unwrap()];
    for _ in 0..5 {
        let small = BayesLinearConfig::new(1, 1).with_bias(false).init(&device);
        layers.push(SharedLinear::from_bayes(&small, &[WeightSource::Codebook(1)], 2).unwrap());
    }
    let network = ManyShared { layers, codebook };
    let prior = Prior::Normal {
        mu: 0.1,
        sigma: 0.7,
    };
    for shared in [SharedKl::PerWeight, SharedKl::Mixture, SharedKl::Codebook] {
        let first = kl_divergence_with(&network, &prior, shared)
            .unwrap()
            .into_scalar::<f32>();
        for call in 1..40 {
            let again = kl_divergence_with(&network, &prior, shared)
                .unwrap()
                .into_scalar::<f32>();
            assert_eq!(
                again.to_bits(),
                first.to_bits(),
                "{shared:?}, call {call}: {again} vs {first}"
            );
        }
    }
}

/// Runs `stacked` (a forward set to `stack` samples) on `x` repeated `stack` times and
/// `single` (the same layer at stack 1) on `x` once per sample, each with the noise of its
/// sample, and checks that block `s` of the stacked output is sample `s`'s output (to f32
/// rounding: a batched matmul or grouped convolution sums in another order), and that the
/// samples differ.
fn assert_stacked_is_per_sample<const D: usize, const E: usize>(
    what: &str,
    x: Tensor<D>,
    stack: usize,
    stacked: impl FnOnce(Tensor<D>) -> Tensor<E>,
    single: impl Fn(Tensor<D>) -> Tensor<E>,
) {
    let b = x.dims()[0];
    let out = bnn_layers::noise::with_noise_source(common_noise_stacked(stack), || {
        stacked(x.clone().repeat_dim(0, stack))
    });
    assert_eq!(out.dims()[0], stack * b, "{what}");
    let mut previous: Option<Tensor<E>> = None;
    for s in 0..stack {
        let want =
            bnn_layers::noise::with_noise_source(common_noise_sample(s), || single(x.clone()));
        let got = out.clone().narrow(0, s * b, b);
        let scale = scalar(want.clone().abs().max().reshape([1])).max(1.0);
        let err = scalar((got - want.clone()).abs().max().reshape([1]));
        assert!(
            err <= 1e-5 * scale,
            "{what}: sample {s} differs by {err} (scale {scale})"
        );
        if let Some(p) = previous {
            let d = scalar((p - want.clone()).abs().max().reshape([1]));
            assert!(d > 1e-3, "{what}: samples {} and {s} are the same", s - 1);
        }
        previous = Some(want);
    }
}

const ESTIMATORS: [Estimator; 3] = [
    Estimator::Reparameterization,
    Estimator::LocalReparameterization,
    Estimator::Flipout,
];

fn noisy(e: Estimator) -> BayesOptions {
    BayesOptions::new()
        .with_estimator(e)
        .with_weight_sigma(bnn_layers::SigmaInit::Constant { sigma: 0.1 })
        .with_bias_sigma(bnn_layers::SigmaInit::Constant { sigma: 0.1 })
}

/// A stacked dense layer applies weight sample `s` to block `s` of the batch, for every
/// estimator, on 2-D and 3-D (token) inputs.
#[test]
fn stacked_linear_applies_sample_s_to_block_s() {
    let _guard = rng_lock();
    let device = test_device();
    let x2 = Tensor::<2>::random([5, 6], Distribution::Normal(0.0, 1.0), &device);
    let x3 = Tensor::<3>::random([3, 4, 6], Distribution::Normal(0.0, 1.0), &device);
    for e in ESTIMATORS {
        for stack in [2, 4] {
            let layer = BayesLinearConfig::new(6, 7)
                .with_options(noisy(e))
                .init(&device);
            let stacked = set_mc_stack(layer.clone(), stack).unwrap();
            let what = format!("linear {e:?}, stack {stack}");
            assert_stacked_is_per_sample(
                &what,
                x2.clone(),
                stack,
                |x| stacked.forward(x),
                |x| layer.forward(x),
            );
            assert_stacked_is_per_sample(
                &what,
                x3.clone(),
                stack,
                |x| stacked.forward(x),
                |x| layer.forward(x),
            );
        }
    }
}

/// A stacked convolution (one grouped convolution) applies weight sample `s` to block `s`, for
/// every estimator, with padding, stride, bias and groups of its own.
#[test]
fn stacked_conv_applies_sample_s_to_block_s() {
    let _guard = rng_lock();
    let device = test_device();
    let x = Tensor::<4>::random([3, 4, 7, 7], Distribution::Normal(0.0, 1.0), &device);
    for e in ESTIMATORS {
        for (groups, stride) in [(1, 1), (2, 2)] {
            let conv = BayesConv2dConfig::new([4, 6], [3, 3])
                .with_padding([1, 1])
                .with_stride([stride, stride])
                .with_groups(groups)
                .with_bias(true)
                .with_options(noisy(e))
                .init(&device);
            let stack = 3;
            let stacked = set_mc_stack(conv.clone(), stack).unwrap();
            assert_stacked_is_per_sample(
                &format!("conv {e:?}, groups {groups}"),
                x.clone(),
                stack,
                |x| stacked.forward(x),
                |x| conv.forward(x),
            );
        }
    }
}

/// Shared (2DGBNN) layers stack as the Bayesian ones: codebook, outlier and ellipse weights.
#[test]
fn stacked_shared_layers_apply_sample_s_to_block_s() {
    let _guard = rng_lock();
    let device = test_device();
    let codebook = Codebook::new(&[0.1, -0.2, 0.3], &[-2.0, -1.5, -2.5], &device).unwrap();
    let view = codebook.view();
    let sources = |n: usize| -> Vec<WeightSource> {
        (0..n)
            .map(|i| match i % 4 {
                0 | 1 => WeightSource::Codebook((i % 3) as u32),
                2 => WeightSource::Outlier {
                    mu: 0.05 * i as f32,
                    rho: -2.0,
                },
                _ => WeightSource::Ellipse {
                    components: vec![0, 2],
                    alphas: vec![0.3, 0.7],
                },
            })
            .collect()
    };
    for e in ESTIMATORS {
        let base = BayesLinearConfig::new(6, 5)
            .with_options(noisy(e))
            .init(&device);
        let dense = SharedLinear::from_bayes(&base, &sources(30), 3).unwrap();
        let stacked = set_mc_stack(dense.clone(), 4).unwrap();
        let x = Tensor::<2>::random([5, 6], Distribution::Normal(0.0, 1.0), &device);
        assert_stacked_is_per_sample(
            &format!("shared linear {e:?}"),
            x,
            4,
            |x| stacked.forward(x, &view),
            |x| dense.forward(x, &view),
        );

        let base = BayesConv2dConfig::new([2, 4], [3, 3])
            .with_bias(true)
            .with_options(noisy(e))
            .init(&device);
        let conv = SharedConv2d::from_bayes(&base, &sources(4 * 2 * 9), 3).unwrap();
        let stacked = set_mc_stack(conv.clone(), 2).unwrap();
        let x = Tensor::<4>::random([3, 2, 6, 6], Distribution::Normal(0.0, 1.0), &device);
        assert_stacked_is_per_sample(
            &format!("shared conv {e:?}"),
            x,
            2,
            |x| stacked.forward(x, &view),
            |x| conv.forward(x, &view),
        );
    }
}

/// At stack 1 a layer's forward is the per-sample forward of before stacking, bit for bit:
/// `x (mu + sigma eps) + (mu_b + sigma_b eps_b)` with the weight's noise drawn first.
#[test]
fn stack_1_is_the_per_sample_forward_bit_for_bit() {
    let _guard = rng_lock();
    let device = test_device();
    let layer = BayesLinearConfig::new(70, 90)
        .with_options(noisy(Estimator::Reparameterization))
        .init(&device);
    let layer = set_mc_stack(layer, 1).unwrap();
    let x = Tensor::<2>::random([4, 70], Distribution::Normal(0.0, 1.0), &device);
    // Parameters are initialised lazily, from the device generator: before the seed.
    layer.forward(x.clone());
    device.seed(9);
    let got = layer.forward(x.clone()).into_data();
    device.seed(9);
    let (w, b) = (layer.weight(), layer.bias().unwrap());
    let w = w.mu + w.sigma * bnn_layers::noise::standard_normal([70, 90], &device);
    let b = b.mu + b.sigma * bnn_layers::noise::standard_normal([90], &device);
    let want = burn::tensor::module::linear(x, w, Some(b)).into_data();
    assert_eq!(got, want);
}
