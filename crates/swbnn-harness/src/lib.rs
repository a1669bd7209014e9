//! The experiment harness of the paper's protocol: a reproduction run's [`setup::Setup`] and
//! presets ([`presets`], [`paper_presets`]), the three-method experiment of the paper's tables
//! ([`experiment::run`], over the methods of [`method::Method`]), its results ([`results`]),
//! the run directory ([`store`], the one owner of its layout, which writes and reads it), the
//! baselines ([`baselines`]) and the paper's other tables ([`tables`]), the metrics choices are
//! made on ([`validation`]), the figures of `swbnn plot` ([`figures`], [`plot`], [`run_dir`])
//! and the reproduction's report ([`report`]). `cargo xtask reproduce` is one call of
//! [`reproduce`].
//!
//! The one-model operations it runs (train, compress, eval, calibrate, load) are the
//! `swbnn-ops` crate; a user who trains or compresses one model depends on that alone.
#![warn(missing_docs)]

pub mod baselines;
pub mod experiment;
mod experiment_data;
pub mod figures;
pub mod method;
pub mod paper_presets;
pub mod plot;
pub mod presets;
pub mod regression;
pub mod report;
mod reproduce;
pub mod results;
pub mod run_dir;
mod search_figure;
pub mod setup;
pub mod stats;
pub mod store;
pub mod tables;
pub mod validation;

/// The operations' data opening with the harness's [`ExperimentData`], under one path inside
/// the harness.
mod data {
    pub use crate::experiment_data::ExperimentData;
    pub use swbnn_ops::data::*;
}
use swbnn_ops::{calibration, checks};

pub use experiment_data::ExperimentData;
pub use reproduce::{Reproduction, reproduce};
/// The error of the operations and of the harness (`swbnn_ops::Error`).
pub use swbnn_ops::Error;

/// A figure's error as the harness's [`Error`].
pub(crate) fn plot_error(e: bnn_plot::PlotError) -> Error {
    Error::Plot(Box::new(e))
}
