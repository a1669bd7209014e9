//! The Python tests' fixtures and the Rust side's numbers on them, so that `pytest` can check
//! that the package gives the library's results.
//!
//! - `data/cloud.npy`: 2000 points of `gmm_minibatch::synthetic_cloud(2000, 3)`;
//! - `data/tiny.swb`: a weight-shared MLP (1 x 8 x 8 input, one hidden layer of 12, 3
//!   classes; K = 32 before merging) built from a randomly initialised Bayesian MLP;
//! - `data/tiny_full.swb`: the Bayesian MLP it was built from, as a full-BNN file;
//! - `data/expected.json`: the GMM's mean log-likelihood on the cloud, the sharing plan's
//!   counts on it, and `bnn_train::predict`'s probabilities of the `.swb` model on
//!   [`images`] (5 samples, seed 7), and the Bayesian MLP's; the `.swb` model's at temperature
//!   2, and the temperature fitted on the images with labels that mostly agree with it.
//!
//! `cargo test -p swbnn-python --test fixture` checks the committed files against the
//! library; `SWBNN_WRITE_FIXTURES=1` (re)writes them.

use std::path::PathBuf;

use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
use bnn_layers::{device_by_name, export_bayes, lock_device_rng};
use bnn_models::{Arch, Kind, ModelConfig, Network};
use burn::prelude::*;
use gmm_minibatch::{GmmConfig, fit, npy, synthetic_cloud};
use swshare::burn_edges::{from_swb, full_bnn_data, initial_swb, table_from_tensors};
use swshare::format::{self, SaveOptions};
use swshare::{SwshareConfig, WeightTableBuilder, build_plan};

const SIDE: usize = 8;
const IMAGES: usize = 20;
const SAMPLES: usize = 5;
const SEED: u64 = 7;
const GMM_K: usize = 8;
const PLAN_K: usize = 6;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn writing() -> bool {
    std::env::var_os("SWBNN_WRITE_FIXTURES").is_some()
}

/// `IMAGES` 1 x 8 x 8 images of a fixed byte pattern; the network sees `byte / 255` (as the
/// Python test computes with `numpy.float32`).
fn images() -> InMemoryDataset {
    let pixels: Vec<u8> = (0..IMAGES * SIDE * SIDE)
        .map(|i| ((i * 37 + i / 64 * 11) % 256) as u8)
        .collect();
    let labels: Vec<u32> = (0..IMAGES as u32).map(|i| i % 3).collect();
    InMemoryDataset::new(pixels, labels, (1, SIDE, SIDE), 3).unwrap()
}

/// The tiny Bayesian MLP (randomly initialised, seed 1) and its configuration.
fn tiny_bayes(device: &Device) -> (Network, ModelConfig) {
    device.seed(1);
    let config =
        ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 3, 1, SIDE).with_mlp_hidden(vec![12]);
    let net = config.init(device).unwrap();
    // Parameters are initialised lazily, on first use: draw them now, under this seed, rather
    // than from whatever the generator holds when the network is first run.
    bnn_layers::export_params(&net);
    (net, config)
}

/// The tiny weight-shared model's file content.
fn tiny_swb(device: &Device) -> format::SharedModelData {
    let (bayes, config) = tiny_bayes(device);
    let table = table_from_tensors(&export_bayes(&bayes, None)).unwrap();
    let mut cfg = SwshareConfig::default();
    cfg.gmm.k = 32;
    cfg.refine.n_min = 2;
    let (plan, _) = build_plan(&table, &cfg).unwrap();
    initial_swb(&config, &bayes, &table, &plan).unwrap()
}

/// The temperature of the tempered predictions in the fixture.
const TEMPERATURE: f64 = 2.0;

fn loader() -> DataLoader {
    DataLoader::new(
        images(),
        Compose::new(),
        LoaderConfig {
            batch_size: 256,
            shuffle: false,
            drop_last: false,
            seed: 0,
            workers: 0,
            prefetch: 1,
        },
    )
    .unwrap()
}

fn predictions(net: &Network, device: &Device) -> Vec<f32> {
    device.seed(SEED);
    let pred = bnn_train::predict(net, &loader(), SAMPLES).unwrap();
    pred.predictive.probabilities().as_slice().to_vec()
}

/// The predictions at [`TEMPERATURE`] (each sample's logits divided by it).
fn tempered_predictions(net: &Network, device: &Device) -> Vec<f32> {
    device.seed(SEED);
    let mut preds = bnn_train::predict_tempered(net, &loader(), SAMPLES, &[TEMPERATURE]).unwrap();
    let pred = preds.pop().unwrap();
    pred.predictive.probabilities().as_slice().to_vec()
}

/// Labels the fitted temperature has an inside optimum on: the class of highest predictive
/// probability, but the next class for every fourth image (a random network against arbitrary
/// labels would be fitted to the upper bound).
fn fit_labels(probs: &[f32]) -> Vec<u32> {
    probs
        .chunks_exact(3)
        .enumerate()
        .map(|(i, row)| {
            let top = (0..3).fold(0, |b, c| if row[c] > row[b] { c } else { b }) as u32;
            if i % 4 == 0 { (top + 1) % 3 } else { top }
        })
        .collect()
}

/// The temperature fitted on the fixture's images with `labels`, with the fit's NLLs.
fn fitted_temperature(
    net: &Network,
    labels: &[u32],
    device: &Device,
) -> bnn_metrics::TemperatureFit {
    device.seed(SEED);
    let l = bnn_train::predict_logits(net, &loader(), SAMPLES).unwrap();
    let mc = bnn_metrics::McLogits::new(&l.logits, l.samples, l.n, l.classes).unwrap();
    bnn_metrics::fit_temperature(&mc, labels).unwrap()
}

fn assert_close(committed: &serde_json::Value, values: &[f32], what: &str) {
    let got = committed.as_array().unwrap();
    assert_eq!(got.len(), values.len(), "{what}");
    for (a, b) in got.iter().zip(values) {
        assert!(
            (a.as_f64().unwrap() - f64::from(*b)).abs() < 1e-6,
            "{what}: {a} vs {b}"
        );
    }
}

#[test]
fn fixtures_match_the_library() {
    let _rng = lock_device_rng();
    let device = device_by_name("flex").unwrap();
    let dir = data_dir();
    if writing() {
        std::fs::create_dir_all(&dir).unwrap();
        npy::write_points(dir.join("cloud.npy"), &synthetic_cloud(2000, 3)).unwrap();
        let opts = SaveOptions::default();
        format::save(dir.join("tiny.swb"), &tiny_swb(&device), &opts).unwrap();
        let (bayes, config) = tiny_bayes(&device);
        let full = full_bnn_data(&bayes, &config).unwrap();
        format::save_full_bnn(
            dir.join("tiny_full.swb"),
            &full.arch,
            &full.layers,
            &full.mu,
            &full.rho,
            &full.unshared,
            None,
        )
        .unwrap();
    }
    let points = npy::read_points(dir.join("cloud.npy")).unwrap();
    assert_eq!(points, synthetic_cloud(2000, 3));

    let gmm = fit(
        &points,
        None,
        &GmmConfig {
            k: GMM_K,
            ..GmmConfig::default()
        },
    )
    .unwrap();
    let loglik = gmm.mean_log_likelihood(&points).unwrap();

    let mu: Vec<f32> = points.iter().map(|p| p[0]).collect();
    let sigma: Vec<f32> = points.iter().map(|p| p[1]).collect();
    let mut b = WeightTableBuilder::new();
    b.push_layer("weights", &[mu.len()], true, &mu, &sigma, None);
    let table = b.build().unwrap();
    let mut cfg = SwshareConfig::default();
    cfg.gmm.k = PLAN_K;
    let (plan, _) = build_plan(&table, &cfg).unwrap();

    let data = format::load(dir.join("tiny.swb")).unwrap();
    let (net, _) = from_swb::<ModelConfig>(&data, &device).unwrap();
    let probs = predictions(&net, &device);
    // The full BNN's file is checked by the Python side only (it has the loader); these are
    // the predictions of the network it was written from.
    let full_probs = predictions(&tiny_bayes(&device).0, &device);
    let tempered = tempered_predictions(&net, &device);
    let labels = fit_labels(&probs);
    let fit = fitted_temperature(&net, &labels, &device);
    // A fixture whose output ignores its input would test nothing.
    assert!(probs.chunks(3).any(|r| r != &probs[..3]), "{probs:?}");
    // Nor would a temperature that changes nothing, or a fit that stays at 1.
    assert!(
        probs
            .iter()
            .zip(&tempered)
            .any(|(a, b)| (a - b).abs() > 1e-3)
    );
    assert!(
        (fit.temperature - 1.0).abs() > 1e-3 && fit.nll_after < fit.nll_before && !fit.at_bound,
        "{fit:?}"
    );
    let expected = serde_json::json!({
        "gmm": {"k": GMM_K, "seed": 0, "k_final": gmm.k_final, "log_likelihood": loglik},
        "plan": {"k": PLAN_K, "codebook": plan.k(), "counts": plan.counts()},
        "predict": {
            "images": IMAGES, "samples": SAMPLES, "seed": SEED, "classes": 3,
            "probabilities": probs,
            "full_bnn_probabilities": full_probs,
            "temperature": TEMPERATURE,
            "tempered_probabilities": tempered,
            "fit": {
                "labels": labels,
                "temperature": fit.temperature,
                "nll_before": fit.nll_before,
                "nll_after": fit.nll_after,
            },
        },
    });
    let path = dir.join("expected.json");
    if writing() {
        std::fs::write(&path, serde_json::to_string_pretty(&expected).unwrap()).unwrap();
    }
    let committed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(committed["gmm"], expected["gmm"]);
    assert_eq!(committed["plan"], expected["plan"]);
    assert_close(
        &committed["predict"]["probabilities"],
        &probs,
        "probabilities",
    );
    assert_close(
        &committed["predict"]["tempered_probabilities"],
        &tempered,
        "tempered probabilities",
    );
    let t = committed["predict"]["fit"]["temperature"].as_f64().unwrap();
    assert!((t - fit.temperature).abs() < 1e-9, "{t} vs {fit:?}");
}
