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
