//! The whole method on a model of your own, one the zoo does not have: a small CNN with a
//! two-branch block (a 1x1 and a 3x3 convolution side by side, concatenated).
//!
//! It is written once, from the layers of `bnn_models::LayerFactory`, and goes deterministic
//! -> Bayesian -> compressed (stages 1-3) -> `.swb` -> loaded back, whose predictions equal
//! those before saving. CI runs it (`crates/swshare/tests/custom_model.rs`).
//!
//! ```text
//! cargo run -p swshare --release --example custom_model
//! ```

use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
use bnn_layers::{BayesOptions, CodebookView, bayes_from_deterministic, set_sampling};
use bnn_metrics::accuracy;
use bnn_models::{Architecture, ClassifierBody, Conv, Dense, Kind, LayerFactory, ModelError};
use bnn_train::{Silent, TrainConfig, predict, train};
use burn::module::Module;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;
use serde::{Deserialize, Serialize};
use swshare::burn_edges::load_swb;
use swshare::compress::{CompressConfig, compress};
use swshare::retrain_stop::RetrainStop;

/// The layers: `stem`, then the two branches side by side, then `head`.
#[derive(Module, Debug)]
pub struct TwoBranchNet {
    stem: Conv,
    narrow: Conv,
    wide: Conv,
    head: Dense,
    pool: MaxPool2d,
}

impl ClassifierBody for TwoBranchNet {
    fn forward(&self, x: Tensor<4>, cb: Option<&CodebookView>) -> Tensor<2> {
        let x = relu(self.stem.forward(x, cb));
        let a = relu(self.narrow.forward(x.clone(), cb));
        let b = relu(self.wide.forward(x, cb));
        let x = self.pool.forward(Tensor::cat(vec![a, b], 1));
        self.head.forward(x.flatten(1, 3), cb)
    }
}

/// Everything that builds the model; stored in the `.swb` file as JSON.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TwoBranchConfig {
    classes: usize,
    image_size: usize,
    width: usize,
    kind: Kind,
    codebook_len: usize,
    bayes: BayesOptions,
}

impl Architecture for TwoBranchConfig {
    type Body = TwoBranchNet;

    fn kind(&self) -> Kind {
        self.kind
    }
    fn codebook_len(&self) -> usize {
        self.codebook_len
    }
    fn bayes_options(&self) -> &BayesOptions {
        &self.bayes
    }
    fn to_kind(&self, kind: Kind, codebook_len: usize) -> Self {
        Self {
            kind,
            codebook_len,
            ..self.clone()
        }
    }

    fn build(&self, f: &mut LayerFactory<'_>) -> Result<TwoBranchNet, ModelError> {
        let (w, half) = (self.width, self.image_size / 2);
        Ok(TwoBranchNet {
            stem: f.conv("stem", 1, w, 3, 1, 1, true),
            narrow: f.conv("narrow", w, w, 1, 1, 0, true),
            wide: f.conv("wide", w, w, 3, 1, 1, true),
            head: f.linear("head", 2 * w * half * half, self.classes, true),
            pool: MaxPool2dConfig::new([2, 2]).init(),
        })
    }

    fn validate(&self) -> Result<(), ModelError> {
        if self.classes == 0 || self.width == 0 || !(2..=256).contains(&self.image_size) {
            return Err(ModelError::InvalidConfig(format!("{self:?}")));
        }
        Ok(())
    }
}

/// 8 x 8 grey images whose class `k` lights up row `k`, plus seeded noise.
fn images(n: usize, seed: u64) -> DataLoader {
    let mut state = seed;
    let mut pixels = Vec::with_capacity(n * 64);
    for i in 0..n {
        for p in 0..64 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let noise = (state >> 60) as u8 * 4;
            pixels.push(if p / 8 == i % 4 { 180 + noise } else { noise });
        }
    }
    let labels = (0..n as u32).map(|i| i % 4).collect();
    let data = InMemoryDataset::new(pixels, labels, (1, 8, 8), 4).expect("valid images");
    let config = LoaderConfig {
        batch_size: 32,
        shuffle: true,
        drop_last: false,
        seed,
        workers: 0,
        prefetch: 2,
    };
    DataLoader::new(data, Compose::new(), config).expect("a loader")
}

/// What [`run`] measured.
pub struct Outcome {
    /// Test accuracy of the Bayesian model and of the compressed one read back from its file.
    pub accuracy: (f64, f64),
    /// Largest difference of a predictive probability before saving and after loading.
    pub max_change: f64,
}

/// Runs the example, writing `dir/two-branch.swb`.
pub fn run(dir: &std::path::Path) -> Result<Outcome, Box<dyn std::error::Error>> {
    let device = Device::default();
    let autodiff = device.clone().autodiff();
    autodiff.seed(7);
    let data = images(512, 1);
    let config = TwoBranchConfig {
        classes: 4,
        image_size: 8,
        width: 8,
        kind: Kind::Deterministic,
        codebook_len: 0,
        bayes: BayesOptions::new(),
    };

    // Deterministic, then its Bayesian twin (means from the trained weights), both trained.
    let (det, _) = train(
        config.init(&autodiff)?,
        &data,
        &TrainConfig::deterministic(2),
        None,
        &mut Silent,
    )?;
    let bayes_config = config.to_kind(Kind::Bayesian, 0);
    let (bayes, _) = bayes_from_deterministic(&det, bayes_config.init(&autodiff)?)?;
    let mut bbb = TrainConfig::bayes_by_backprop(2);
    bbb.kl_weight = 0.02; // 512 images: the full KL would pin the posterior to the prior
    let (bayes, _) = train(bayes, &data, &bbb, None, &mut Silent)?;

    // Stages 1-3 in one call, then the file.
    let mut cfg = CompressConfig::default();
    cfg.sharing.gmm.k = 16;
    cfg.sharing.refine.n_min = 4;
    cfg.retrain = TrainConfig::retrain(1);
    cfg.retrain_stop = RetrainStop::Epochs;
    let compressed = compress(&bayes, &bayes_config, &data, None, &cfg, None, &mut Silent)?;
    let path = dir.join("two-branch.swb");
    compressed.save(&path)?;
    let (file, loaded_config) = load_swb::<TwoBranchConfig>(&path, &device)?;
    let (loaded, _) = swshare::burn_edges::from_swb::<TwoBranchConfig>(&file, &device)?;
    println!(
        "compressed {} weights onto {} Gaussians ({} outliers); file {} bytes; kind {:?}",
        compressed.report.shareable_weights,
        loaded_config.codebook_len,
        compressed.report.outliers,
        std::fs::metadata(&path)?.len(),
        loaded_config.kind,
    );

    // Monte-Carlo predictions (8 samples) on the same seed, before and after the file.
    let test = images(64, 2);
    let mc = |model: &bnn_models::Classifier<TwoBranchNet>| {
        device.seed(11);
        predict(&set_sampling(model.valid(), true), &test, 8)
    };
    let before = mc(&compressed.model)?;
    let after = mc(&loaded)?;
    let source = mc(&bayes)?;
    let (p, q) = (
        before.predictive.probabilities(),
        after.predictive.probabilities(),
    );
    let diff = p
        .as_slice()
        .iter()
        .zip(q.as_slice())
        .map(|(a, b)| f64::from((a - b).abs()))
        .fold(0.0, f64::max);
    let accuracy = |p: &bnn_train::Predictions| accuracy(p.predictive.probabilities(), &p.labels);
    let outcome = Outcome {
        accuracy: (accuracy(&source)?, accuracy(&after)?),
        max_change: diff,
    };
    println!(
        "test accuracy: Bayesian {:.3}, compressed (from the file) {:.3}",
        outcome.accuracy.0, outcome.accuracy.1
    );
    println!("largest change of a predictive probability through the file: {diff:e}");
    Ok(outcome)
}

#[allow(dead_code)] // the test includes this file and calls `run`
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    run(dir.path())?;
    Ok(())
}
