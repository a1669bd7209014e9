//! The zoo: published parameter counts (by shapes, nothing allocated), forward shapes, kinds,
//! and layer paths that agree between the factory and the module tree.

use bnn_layers::{export_bayes, set_sampling, test_device};
use bnn_models::{Arch, Kind, ModelConfig, share_all_first};
use burn::module::Module;
use burn::prelude::*;

fn det_params(arch: Arch, classes: usize, size: usize) -> usize {
    ModelConfig::for_input(arch, Kind::Deterministic, classes, 3, size)
        .counts(&test_device())
        .unwrap()
        .trainable
}

#[test]
fn parameter_counts_match_the_published_ones() {
    // torchvision's counts (ResNets, ViT-B/16) and the WRN paper's.
    assert_eq!(det_params(Arch::Resnet18, 1000, 224), 11_689_512);
    assert_eq!(det_params(Arch::Resnet50, 1000, 224), 25_557_032);
    assert_eq!(det_params(Arch::Resnet101, 1000, 224), 44_549_160);
    assert_eq!(det_params(Arch::VitB16, 1000, 224), 86_567_656);
    assert_eq!(det_params(Arch::Wrn28x10, 10, 32), 36_479_194);
    // ResNet-20 with projection shortcuts: "0.27M" (He et al. report 0.27M with option A).
    let r20 = det_params(Arch::Resnet20, 10, 32);
    assert!((265_000..275_000).contains(&r20), "{r20}");
}

#[test]
fn bayesian_kind_doubles_the_weights() {
    let device = test_device();
    let det = ModelConfig::for_input(Arch::Resnet50, Kind::Deterministic, 1000, 3, 224)
        .counts(&device)
        .unwrap();
    let bayes = ModelConfig::for_input(Arch::Resnet50, Kind::Bayesian, 1000, 3, 224)
        .counts(&device)
        .unwrap();
    assert_eq!(
        bayes.trainable,
        det.trainable + bayes.bayes_weights + bayes.bayes_biases
    );
    let shared = ModelConfig::for_input(Arch::Resnet50, Kind::Shared, 1000, 3, 224)
        .with_codebook_len(2000)
        .counts(&device)
        .unwrap();
    assert_eq!(
        shared.trainable,
        det.trainable - bayes.bayes_weights + bayes.bayes_biases + 4000
    );
}

#[test]
fn small_models_run_in_every_kind() {
    let device = test_device();
    for (arch, c, s) in [
        (Arch::Mlp, 1, 28),
        (Arch::Lenet5, 1, 28),
        (Arch::Resnet20, 1, 28),
        (Arch::VitTiny, 1, 28),
        (Arch::Resnet18, 3, 32),
    ] {
        for kind in Kind::ALL {
            let config = ModelConfig::for_input(arch, kind, 7, c, s);
            let model = match kind {
                Kind::Shared => {
                    let cb =
                        bnn_layers::Codebook::new(&[0.01, -0.02], &[-5.0, -5.0], &device).unwrap();
                    config
                        .init_shared(&device, &mut share_all_first, cb)
                        .unwrap()
                }
                _ => config.init(&device).unwrap(),
            };
            let y = model.forward(Tensor::zeros([2, c, s, s], &device));
            assert_eq!(y.dims(), [2, 7], "{arch} {kind}");
        }
    }
}

#[test]
fn bayesian_forward_is_stochastic_and_mean_mode_is_not() {
    let device = test_device();
    let model = ModelConfig::for_input(Arch::Lenet5, Kind::Bayesian, 10, 1, 28)
        .init(&device)
        .unwrap();
    let x = Tensor::<4>::ones([2, 1, 28, 28], &device);
    let d = (model.forward(x.clone()) - model.forward(x.clone()))
        .abs()
        .sum()
        .into_scalar::<f32>();
    assert!(d > 0.0);
    let mean = set_sampling(model, false);
    let d = (mean.forward(x.clone()) - mean.forward(x))
        .abs()
        .sum()
        .into_scalar::<f32>();
    assert_eq!(d, 0.0);
}

#[test]
fn factory_paths_are_the_module_paths() {
    let device = test_device();
    for arch in [Arch::Mlp, Arch::Lenet5, Arch::Resnet20, Arch::VitTiny] {
        let config = ModelConfig::for_input(arch, Kind::Bayesian, 10, 1, 28);
        let paths = config.layer_paths(&device).unwrap();
        let model = config.init(&device).unwrap();
        let exported: Vec<String> = export_bayes(&model, None)
            .into_iter()
            .filter(|t| t.role == bnn_layers::ParamRole::Weight)
            .map(|t| t.path.trim_end_matches(".weight").to_string())
            .collect();
        assert_eq!(paths, exported, "{arch}");
    }
}

#[test]
fn names_round_trip_and_unknown_names_are_errors() {
    for a in Arch::ALL {
        assert_eq!(a.name().parse::<Arch>().unwrap(), a);
    }
    assert!("resnet19".parse::<Arch>().is_err());
    assert!("bayes".parse::<Kind>().is_err());
    let err = ModelConfig::for_input(Arch::Lenet5, Kind::Bayesian, 10, 1, 6).init(&test_device());
    assert!(err.is_err(), "6 px is too small for LeNet-5");
    let json = serde_json::to_string(&ModelConfig::for_input(
        Arch::Wrn28x10,
        Kind::Shared,
        100,
        3,
        32,
    ))
    .unwrap();
    assert!(
        json.contains("\"wrn28-10\"") && json.contains("\"shared\""),
        "{json}"
    );
    let _ = Module::num_params(
        &ModelConfig::for_input(Arch::Mlp, Kind::Deterministic, 10, 1, 28)
            .init(&test_device())
            .unwrap(),
    );
}

/// A whole network with a Monte-Carlo stack: block `s` of a stacked forward is the per-sample
/// forward given sample `s`'s noise, for LeNet-5 (Bayesian with each estimator, and shared),
/// the MLP, a narrow ResNet-20 (batch norm in evaluation mode) and the tiny ViT (dense layers
/// on tokens).
#[test]
fn stacked_networks_apply_sample_s_to_block_s() {
    use bnn_layers::noise::{common_noise_sample, common_noise_stacked, with_noise_source};
    use bnn_layers::{BayesOptions, Codebook, Estimator, SigmaInit, WeightSource, set_mc_stack};

    let device = test_device();
    let mut share = |_: &str, shape: &[usize]| {
        let n: usize = shape.iter().product();
        Ok((0..n)
            .map(|i| match i % 7 {
                0 => WeightSource::Outlier {
                    mu: 0.01 * (i % 13) as f32,
                    rho: -3.0,
                },
                6 => WeightSource::Ellipse {
                    components: vec![1, 2],
                    alphas: vec![0.5, 0.5],
                },
                _ => WeightSource::Codebook((i % 3) as u32),
            })
            .collect())
    };
    let cases = [
        (
            Arch::Lenet5,
            28,
            Kind::Bayesian,
            Estimator::Reparameterization,
        ),
        (
            Arch::Lenet5,
            28,
            Kind::Bayesian,
            Estimator::LocalReparameterization,
        ),
        (Arch::Lenet5, 28, Kind::Bayesian, Estimator::Flipout),
        (
            Arch::Lenet5,
            28,
            Kind::Shared,
            Estimator::Reparameterization,
        ),
        (Arch::Mlp, 8, Kind::Bayesian, Estimator::Reparameterization),
        (Arch::Mlp, 8, Kind::Shared, Estimator::Flipout),
        (
            Arch::Resnet20,
            8,
            Kind::Bayesian,
            Estimator::Reparameterization,
        ),
        (
            Arch::VitTiny,
            28,
            Kind::Bayesian,
            Estimator::Reparameterization,
        ),
    ];
    for (arch, size, kind, estimator) in cases {
        let mut config = ModelConfig::for_input(arch, kind, 5, 1, size)
            .with_mlp_hidden(vec![16])
            .with_width(Some(4))
            .with_codebook_len(3);
        config.bayes = BayesOptions::new()
            .with_estimator(estimator)
            .with_weight_sigma(SigmaInit::Constant { sigma: 0.05 });
        let model = match kind {
            Kind::Shared => {
                let cb = Codebook::new(&[0.05, -0.04, 0.02], &[-3.0, -3.5, -4.0], &device).unwrap();
                config.init_shared(&device, &mut share, cb).unwrap()
            }
            _ => config.init(&device).unwrap(),
        };
        let model = set_sampling(model.valid(), true);
        let stack = 3;
        let stacked = set_mc_stack(model.clone(), stack).unwrap();
        let x = Tensor::<4>::random(
            [2, 1, size, size],
            burn::tensor::Distribution::Normal(0.0, 1.0),
            &device,
        );
        let out = with_noise_source(common_noise_stacked(stack), || {
            stacked.forward(x.clone().repeat_dim(0, stack))
        });
        let what = format!("{arch} {kind} {estimator:?}");
        let mut previous: Option<Vec<f32>> = None;
        for s in 0..stack {
            let want = with_noise_source(common_noise_sample(s), || model.forward(x.clone()))
                .into_data()
                .convert::<f32>()
                .try_to_vec::<f32>()
                .unwrap();
            let got = out
                .clone()
                .narrow(0, 2 * s, 2)
                .into_data()
                .convert::<f32>()
                .try_to_vec::<f32>()
                .unwrap();
            let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-4 * scale,
                    "{what}: sample {s}: {g} vs {w}"
                );
            }
            if let Some(p) = &previous {
                let d = p
                    .iter()
                    .zip(&want)
                    .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                assert!(d > 1e-4, "{what}: samples {} and {s} are the same", s - 1);
            }
            previous = Some(want);
        }
    }
}
