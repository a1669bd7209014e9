//! Per-group learning rates: `rho` parameters train at `lr_rho`, also after a resume, and
//! Adam's epsilon does not damp their small (KL-sized) gradients.

use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
use bnn_layers::export_bayes;
use bnn_models::{Arch, Kind, ModelConfig, Network};
use bnn_train::{Checkpointer, LrSchedule, Silent, TrainConfig, train};

/// 64 examples in one batch: one optimiser step per epoch.
fn loader() -> DataLoader {
    let pixels: Vec<u8> = (0..64 * 16).map(|i| ((i * 37) % 251) as u8).collect();
    let labels: Vec<u32> = (0..64).map(|i| i % 4).collect();
    let data = InMemoryDataset::new(pixels, labels, (1, 4, 4), 4).unwrap();
    let config = LoaderConfig {
        batch_size: 64,
        shuffle: false,
        drop_last: false,
        seed: 0,
        workers: 0,
        prefetch: 1,
    };
    DataLoader::new(data, Compose::new(), config).unwrap()
}

/// Every `(mu, sigma)` of the model's Bayesian tensors, with `rho = softplus^-1(sigma)`.
fn mu_rho(model: &Network) -> (Vec<f32>, Vec<f64>) {
    let (mut mu, mut rho) = (Vec::new(), Vec::new());
    for t in export_bayes(model, None) {
        mu.extend(t.mu);
        rho.extend(
            t.sigma
                .iter()
                .map(|&s| bnn_layers::inverse_softplus(f64::from(s))),
        );
    }
    (mu, rho)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Adam's first step moves a parameter by about `lr * sign(grad)` when `|grad| >> epsilon`.
/// Means at a negligible rate, `rho` at 1e-2: after one resumed step the `rho`s must have moved
/// by about 1e-2 and the means by almost nothing.
#[test]
fn rho_trains_at_its_own_rate_after_a_resume() {
    let device = bnn_layers::test_device().autodiff();
    let config =
        ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 4, 1, 4).with_mlp_hidden(vec![8]);
    let dir = tempfile::tempdir().unwrap();
    let ck = Checkpointer::new(dir.path()).unwrap();
    let mut tc = TrainConfig::bayes_by_backprop(1);
    tc.batch_size = 64;
    tc.lr = 1e-9;
    tc.lr_rho = 1e-2;
    tc.schedule = LrSchedule::Constant;
    device.seed(3);
    let (after_first, _) = train(
        config.init(&device).unwrap(),
        &loader(),
        &tc,
        Some(&ck),
        &mut Silent,
    )
    .unwrap();
    let (mu0, rho0) = mu_rho(&after_first);

    // The resumed run builds a fresh model whose parameter ids differ from the checkpoint's.
    tc.epochs = 2;
    let (resumed, history) = train(
        config.init(&device).unwrap(),
        &loader(),
        &tc,
        Some(&ck),
        &mut Silent,
    )
    .unwrap();
    assert_eq!(history.len(), 2);
    let (mu1, rho1) = mu_rho(&resumed);
    let rho_steps: Vec<f64> = rho0.iter().zip(&rho1).map(|(a, b)| (a - b).abs()).collect();
    let mu_steps: Vec<f64> = mu0
        .iter()
        .zip(&mu1)
        .map(|(a, b)| f64::from((a - b).abs()))
        .collect();
    let m = median(rho_steps);
    assert!(
        (0.8e-2..=1.2e-2).contains(&m),
        "median |step| of rho after the resume: {m}, want about lr_rho = 1e-2"
    );
    assert!(
        mu_steps.iter().all(|&s| s < 1e-6),
        "means moved by up to {:e} at lr 1e-9",
        mu_steps.iter().cloned().fold(0.0, f64::max)
    );
}
