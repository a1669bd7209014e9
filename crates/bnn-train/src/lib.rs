//! Training and evaluation of the model zoo on burn.
//!
//! - [`train`]: cross-entropy for deterministic models, the negative ELBO per example for
//!   Bayesian and weight-shared ones, separate learning rates for means and `rho`, per-epoch
//!   [`Checkpointer`] commits (model and optimiser state, atomically) with exact resume, and a
//!   stop with a clear error on a non-finite loss or parameter, before it is checkpointed.
//! - [`predict`] / [`evaluate`]: Monte-Carlo predictive (30 samples by default in the CLI),
//!   accuracy, NLL, ECE (15 bins), and OOD detection against a second data set.
//! - [`train_data_parallel`]: the same loop over several devices of one node ([`DataParallel`]):
//!   each replica takes a shard of every batch, gradients are averaged (burn's NCCL all-reduce
//!   on CUDA, on the first device elsewhere).
//! - [`mean_mu_gradients`]: averaged `d loss / d mu` for the gradient-outlier criterion.
//! - Regression: a network with a Gaussian head ([`bnn_models::Head`]) trains on the Gaussian
//!   NLL ([`likelihood`]) over rows of a tabular data set; [`predict_regression`] gives its
//!   Monte-Carlo mixture predictive in the user's units.
//!
//! The library prints nothing; pass an [`Observer`] for progress.
//!
//! ```
//! use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
//! use bnn_models::{Arch, Kind, ModelConfig};
//! use bnn_train::{Silent, TrainConfig, evaluate, train};
//! use burn::prelude::*;
//!
//! // 64 grey 4x4 images of two classes: bright ones are class 1.
//! let labels: Vec<u32> = (0..64).map(|i| i % 2).collect();
//! let pixels = labels.iter().flat_map(|&l| vec![if l == 1 { 220u8 } else { 30 }; 16]).collect();
//! let data = InMemoryDataset::new(pixels, labels, (1, 4, 4), 2)?;
//! let loader = DataLoader::new(data, Compose::new(), LoaderConfig { batch_size: 16, ..Default::default() })?;
//!
//! let device = bnn_layers::device_by_name("flex")?;
//! let mut config = ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 2, 1, 4);
//! config.mlp_hidden = vec![16];
//! let model = config.init(&device.autodiff())?;
//! let (model, history) = train(model, &loader, &TrainConfig::bayes_by_backprop(2), None, &mut Silent)?;
//! assert_eq!(history.len(), 2);
//! let ev = evaluate(&model.valid(), &loader, None, 10)?;
//! assert_eq!(ev.summary.n, 64);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod arrays;
mod batch;
mod checkpoint;
mod config;
mod error;
mod evaluate;
mod grads;
pub mod likelihood;
mod model_dir;
mod momentum;
mod parallel;
mod regression;
mod train;

pub use arrays::{ARRAY_BATCH, logits_of_arrays, predict_arrays};
pub use batch::{cross_entropy, to_tensors, to_vec};
pub use checkpoint::{
    CheckpointState, Checkpointer, MAX_JSON_BYTES, MAX_RECORD_BYTES, load_model, write_atomic,
};
pub use config::{ADAM_EPSILON, LrSchedule, MAX_EPOCHS, MomentumCycle, OptimizerKind, TrainConfig};
pub use error::TrainError;
pub use evaluate::{
    EvaluatedPredictions, Evaluation, LogitSamples, MAX_STACKED_INPUT, MAX_STACKED_ROWS,
    McBatching, Predictions, StackedMc, UncertaintyDiagnostics, evaluate, evaluate_ensemble,
    evaluate_ensemble_tempered, evaluate_tempered, evaluate_with_predictions, evaluation_of,
    predict, predict_ensemble, predict_ensemble_logits, predict_ensemble_tempered, predict_logits,
    predict_logits_with, predict_tempered, predict_tempered_with, predict_with,
    stacked_probability_sums,
};
pub use grads::mean_mu_gradients;
pub use model_dir::{
    CALIBRATION_FILE, CONFIG_FILE, ModelDir, QBNN_FILE, SWB_FILE, WEIGHTS_CHECKSUM_FILE,
    WEIGHTS_FILE, read_json, write_json,
};
pub use parallel::{DataParallel, DevicesError};
pub use regression::{
    REGRESSION_ARRAY_BATCH, RegressionPredictions, TargetScale, predict_regression,
    predict_regression_arrays,
};
pub use train::{
    EpochStats, MAX_PARAM_MAGNITUDE, MAX_RHO, Observer, OutOfRange, Progress, Silent, StepInfo,
    first_non_finite, first_out_of_range, train, train_data_parallel,
};
