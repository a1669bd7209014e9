//! Monte Carlo prediction on in-memory images repeats under a seed.

use bnn_models::{Arch, Kind, ModelConfig};
use bnn_train::{logits_of_arrays, predict_arrays};

#[test]
fn a_seed_repeats_the_predictive_and_every_pass_is_kept() {
    let _rng = bnn_layers::lock_device_rng();
    let device = bnn_layers::test_device();
    let net = ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 3, 1, 4)
        .init(&device)
        .unwrap();
    let shape = [5, 1, 4, 4];
    let images: Vec<f32> = (0..5 * 16).map(|i| (i % 7) as f32 / 7.0).collect();
    let (a, kept) = predict_arrays(&net, &images, shape, 4, Some(7), true, None, &device).unwrap();
    assert_eq!(kept.len(), 4);
    let (b, _) = predict_arrays(&net, &images, shape, 4, Some(7), false, None, &device).unwrap();
    assert_eq!(a, b);
    let (c, _) = predict_arrays(&net, &images, shape, 4, Some(8), false, None, &device).unwrap();
    assert_ne!(a, c, "another seed draws other weights");
    let (logits, passes, classes) =
        logits_of_arrays(&net, &images, shape, 4, Some(7), &device).unwrap();
    assert_eq!((passes, classes, logits.len()), (4, 3, 4 * 5 * 3));
}
