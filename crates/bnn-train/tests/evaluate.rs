//! Learning-rate schedules against their definitions, and Monte-Carlo evaluation against
//! metrics computed by hand from the same predictions.

use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
use bnn_metrics::EvalSummary;
use bnn_models::{Arch, Kind, ModelConfig};
use bnn_train::{LrSchedule, evaluate, predict};

#[test]
fn constant_schedule_is_one() {
    for step in [0, 5, 99] {
        assert_eq!(LrSchedule::Constant.factor(step, 100), 1.0);
    }
}

#[test]
fn cosine_runs_from_one_to_zero() {
    let s = LrSchedule::Cosine;
    let total = 1000;
    assert!((s.factor(0, total) - 1.0).abs() < 1e-5);
    // Half-way (t = 0.5): cos(pi / 2) = 0, factor 0.5.
    assert!((s.factor(total / 2 - 1, total) - 0.5).abs() < 1e-9);
    assert!(s.factor(total - 1, total).abs() < 1e-12);
    let f: Vec<f64> = (0..total).map(|i| s.factor(i, total)).collect();
    assert!(f.windows(2).all(|w| w[1] <= w[0]), "not monotone");
}

#[test]
fn one_cycle_warms_up_to_one_then_anneals_to_its_floor() {
    let s = LrSchedule::OneCycle { pct_start: 0.25 };
    let total = 400;
    // Starts near lr / 25, peaks at exactly 1 at the end of the warm-up, ends at lr / 25e4.
    assert!(
        (s.factor(0, total) - (1.0 / 25.0 + (1.0 - 1.0 / 25.0) * (1.0 / 400.0) / 0.25)).abs()
            < 1e-12
    );
    assert!((s.factor(99, total) - 1.0).abs() < 1e-12);
    assert!((s.factor(total - 1, total) - 1.0 / 25.0 / 1e4).abs() < 1e-12);
    let f: Vec<f64> = (0..total).map(|i| s.factor(i, total)).collect();
    assert!(
        f[..100].windows(2).all(|w| w[1] > w[0]),
        "warm-up not increasing"
    );
    assert!(
        f[99..].windows(2).all(|w| w[1] < w[0]),
        "annealing not decreasing"
    );
}

fn loader(n: usize, seed: u8) -> DataLoader {
    let pixels: Vec<u8> = (0..n * 16)
        .map(|i| ((i * 37 + seed as usize * 11) % 251) as u8)
        .collect();
    let labels: Vec<u32> = (0..n as u32).map(|i| i % 4).collect();
    let data = InMemoryDataset::new(pixels, labels, (1, 4, 4), 4).unwrap();
    let config = LoaderConfig {
        batch_size: 32,
        shuffle: false,
        drop_last: false,
        seed: 0,
        workers: 0,
        prefetch: 1,
    };
    DataLoader::new(data, Compose::new(), config).unwrap()
}

/// `evaluate`'s numbers are `EvalSummary`'s on `predict`'s output, samples are honoured for
/// Bayesian models, the same seed gives the same result, and a deterministic model makes one
/// pass whatever `samples` says.
#[test]
fn evaluation_matches_its_parts_and_is_reproducible() {
    let device = bnn_layers::test_device();
    device.seed(11);
    let bayes = ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 4, 1, 4)
        .with_mlp_hidden(vec![16])
        .init(&device)
        .unwrap();
    let test = loader(100, 1);
    let ood = loader(60, 2);
    // Parameters are initialised lazily, from the device generator, on first use: use them
    // once before seeding, or the first evaluation draws the initial weights from seed 5.
    predict(&bayes, &test, 1).unwrap();

    device.seed(5);
    let ev = evaluate(&bayes, &test, Some(&ood), 4).unwrap();
    device.seed(5);
    let again = evaluate(&bayes, &test, Some(&ood), 4).unwrap();
    assert_eq!(ev, again);

    device.seed(5);
    let pred = predict(&bayes, &test, 4).unwrap();
    assert_eq!(pred.predictive.n_samples(), 4);
    assert_eq!(pred.labels, (0..100u32).map(|i| i % 4).collect::<Vec<_>>());
    let summary = EvalSummary::compute(pred.predictive.probabilities(), &pred.labels).unwrap();
    assert_eq!(ev.summary, summary);
    assert_eq!(ev.summary.n, 100);
    let mi = ev.uncertainty.mean_mutual_information.unwrap();
    assert!(mi >= 0.0, "{mi}");
    assert!(ev.uncertainty.ood_auroc_mutual_information.is_some());
    let auroc = ev.ood_entropy.as_ref().unwrap().auroc;
    assert!((0.0..=1.0).contains(&auroc));

    let det = ModelConfig::for_input(Arch::Mlp, Kind::Deterministic, 4, 1, 4)
        .with_mlp_hidden(vec![16])
        .init(&device)
        .unwrap();
    let pred = predict(&det, &test, 7).unwrap();
    assert_eq!(pred.predictive.n_samples(), 1);
    let ev = evaluate(&det, &test, None, 7).unwrap();
    assert!(ev.uncertainty.mean_mutual_information.is_none());
    assert!(ev.ood_max_prob.is_none());
}
