//! The `swbnn` command line's library: data loading with the paper's transforms, the
//! three-method experiment of the paper's tables ([`experiment::run`], over the methods of
//! [`method::Method`]) with its [`setup::Setup`] and presets ([`presets`], [`paper_presets`]),
//! its results ([`results`]), the run directory ([`store`]), post-hoc calibration
//! ([`calibration`]), the baselines ([`baselines`]) and the paper's other tables ([`tables`]),
//! the metrics choices are made on ([`validation`]), the figures of `swbnn plot` ([`figures`],
//! [`plot`], [`run_dir`]) and the reproduction's report ([`report`]), shared by the `swbnn` binary and
//! `cargo xtask reproduce`, whose one entry point is [`reproduce`].
//!
//! The one-model operations (train, compress, eval, calibrate, load) are the `swbnn-ops` crate
//! and PyTorch interop the `bnn-interop` crate; their old paths here ([`commands`], [`data`],
//! [`load`], [`calibration`], [`checks`], [`warmup`], [`interop`]) are re-exports kept for one
//! release. Use the crates directly:
//!
//! ```no_run
//! use swbnn_ops::commands::{self, CompressRequest, EvalRequest, TrainKind, TrainRequest};
//!
//! let device = bnn_layers::device_by_name("flex")?;
//! let data: bnn_data::DataSource = "npz:my-data.npz".parse()?;
//! let det = TrainRequest::new(data.clone(), "lenet5".parse()?, TrainKind::Deterministic, "det".into());
//! commands::train(&det, &device, &mut bnn_train::Silent)?;
//! let bnn = TrainRequest {
//!     from: Some("det".into()),
//!     ..TrainRequest::new(data.clone(), "lenet5".parse()?, TrainKind::Bayesian, "bnn".into())
//! };
//! commands::train(&bnn, &device, &mut bnn_train::Silent)?;
//! let request = CompressRequest::new("bnn".into(), data.clone(), "model.swb".into());
//! commands::compress(&request, &device, &mut bnn_train::Silent)?;
//! let eval = commands::eval(&EvalRequest::new("model.swb".into(), data), &device)?;
//! println!("accuracy {:.4}", eval.evaluation.summary.accuracy);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod args;
pub mod baselines;
pub mod experiment;
mod experiment_data;
pub mod figures;
pub mod method;
pub mod paper_presets;
pub mod plot;
pub mod presets;
pub mod report;
mod reproduce;
pub mod results;
pub mod run_dir;
pub mod setup;
pub mod stats;
pub mod store;
pub mod tables;
pub mod validation;

/// The one-model operations' data opening, now `swbnn_ops::data` (this path is kept for one
/// release), with the harness's [`ExperimentData`](data::ExperimentData).
pub mod data {
    pub use crate::experiment_data::ExperimentData;
    pub use swbnn_ops::data::*;
}
/// Deprecated path: PyTorch interop, now the `bnn-interop` crate.
pub use bnn_interop as interop;
/// Deprecated path: the one-model operations' calibration, now `swbnn_ops::calibration`.
pub use swbnn_ops::calibration;
/// Deprecated path: the one-model operations' checks, now `swbnn_ops::checks`.
pub use swbnn_ops::checks;
/// Deprecated path: the one-model operations, now `swbnn_ops::commands`.
pub use swbnn_ops::commands;
/// Deprecated path: the loader of every model file, now `swbnn_ops::load`.
pub use swbnn_ops::load;
/// Deprecated path: `swbnn warmup`, now `swbnn_ops::warmup`.
pub use swbnn_ops::warmup;

pub use reproduce::{Reproduction, reproduce};
/// The error of the operations and of the harness (`swbnn_ops::Error`).
pub use swbnn_ops::Error;

/// A figure's error as the harness's [`Error`].
pub(crate) fn plot_error(e: bnn_plot::PlotError) -> Error {
    Error::Plot(Box::new(e))
}
