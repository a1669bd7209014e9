//! Checkpoints: resume after the last saved epoch; a non-finite loss stops training with a
//! clear error and leaves the last good checkpoint loadable.

use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
use bnn_train::{Checkpointer, Silent, TrainConfig, TrainError, load_model, train};
use models::{Arch, Kind, ModelConfig};

fn loader() -> DataLoader {
    let pixels: Vec<u8> = (0..256 * 16).map(|i| ((i * 37) % 251) as u8).collect();
    let labels: Vec<u32> = (0..256).map(|i| i % 4).collect();
    let data = InMemoryDataset::new(pixels, labels, (1, 4, 4), 4).unwrap();
    let config = LoaderConfig {
        batch_size: 64,
        shuffle: true,
        drop_last: false,
        seed: 0,
        workers: 0,
        prefetch: 2,
    };
    DataLoader::new(data, Compose::new(), config).unwrap()
}

#[test]
fn resumes_after_the_last_epoch_and_stops_on_nan() {
    let device = bnn_layers::test_device().autodiff();
    let config =
        ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 4, 1, 4).with_mlp_hidden(vec![8]);
    let dir = tempfile::tempdir().unwrap();
    let ck = Checkpointer::new(dir.path()).unwrap();
    let mut tc = TrainConfig::bayes_by_backprop(1);
    tc.batch_size = 64;
    let (_, first) = train(
        config.init(&device).unwrap(),
        &loader(),
        &tc,
        Some(&ck),
        &mut Silent,
    )
    .unwrap();
    assert_eq!(first.len(), 1);

    // Asking for two epochs resumes after the saved one: one more epoch runs.
    tc.epochs = 2;
    let (_, both) = train(
        config.init(&device).unwrap(),
        &loader(),
        &tc,
        Some(&ck),
        &mut Silent,
    )
    .unwrap();
    assert_eq!(both.len(), 2);
    assert_eq!(both[0], first[0]);

    // A NaN in the loss stops with an error naming the step; the checkpoint still loads.
    tc.epochs = 3;
    tc.kl_weight = 1e300; // finite, so valid, but KL * 1e300 overflows the f32 loss
    let err = train(
        config.init(&device).unwrap(),
        &loader(),
        &tc,
        Some(&ck),
        &mut Silent,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            TrainError::NonFiniteLoss {
                epoch: 2,
                step: 0,
                ..
            }
        ),
        "{err}"
    );
    assert!(load_model(&ck.model_path(), config.init(&device).unwrap()).is_ok());

    // A corrupt model file is an error, not a panic.
    std::fs::write(ck.model_path(), b"not a model").unwrap();
    assert!(load_model(&ck.model_path(), config.init(&device).unwrap()).is_err());
}
