//! Runs the `custom_model` example (a model the zoo does not have) through the whole method,
//! and checks what a user of it relies on.
#![cfg(feature = "burn")]

#[path = "../examples/custom_model.rs"]
mod example;

use bnn_models::ModelConfig;
use swshare::burn_edges::load_swb;

#[test]
fn a_model_outside_the_zoo_compresses_saves_and_loads_back() {
    let _rng = bnn_layers::lock_device_rng();
    let dir = tempfile::tempdir().unwrap();
    let outcome = example::run(dir.path()).unwrap();
    // The file holds the model exactly: same seed, same predictions.
    assert_eq!(outcome.max_change, 0.0);
    let (bayes, compressed) = outcome.accuracy;
    assert!(bayes > 0.9, "the Bayesian model learns the task: {bayes}");
    assert!(
        compressed > 0.9,
        "the compressed model keeps it: {compressed}"
    );

    // The file names its own architecture: read as the zoo's, it is refused.
    let path = dir.path().join("two-branch.swb");
    let err = load_swb::<ModelConfig>(&path, &bnn_layers::test_device())
        .unwrap_err()
        .to_string();
    assert!(err.contains("two-branch.swb"), "{err}");

    // A file whose layers are not its architecture's names the first layer that differs.
    let mut data = swshare::format::load(&path).unwrap();
    assert!(data.arch.contains("\"width\":8"), "{}", data.arch);
    data.arch = data.arch.replace("\"width\":8", "\"width\":16");
    let err = swshare::burn_edges::from_swb::<example::TwoBranchConfig>(
        &data,
        &bnn_layers::test_device(),
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(err.contains("body.stem.weight"), "{err}");
}
