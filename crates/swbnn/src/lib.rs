//! The `swbnn` command line's clap types ([`args`]: validated numbers and data sources, also
//! used by `cargo xtask`), and the library paths of earlier releases.
//!
//! The library is now three crates: the one-model operations (`swbnn-ops`: train, compress,
//! eval, calibrate, export, load), PyTorch interop (`bnn-interop`) and the experiment harness
//! (`swbnn-harness`: setups, presets, the paper's tables, the run directory, figures). The
//! module paths below are re-exports of those crates, kept for one release; depend on the
//! crates themselves.
#![warn(missing_docs)]

pub mod args;

/// Deprecated path: now the `bnn-interop` crate.
pub use bnn_interop as interop;
/// Deprecated paths: now the modules of `swbnn-harness`.
pub use swbnn_harness::{
    Reproduction, baselines, experiment, figures, method, paper_presets, plot, presets, report,
    reproduce, results, run_dir, setup, stats, store, tables, validation,
};
/// Deprecated path: the operations' and the harness's error, now `swbnn_ops::Error`.
pub use swbnn_ops::Error;
/// Deprecated path: now `swbnn_ops::calibration`.
pub use swbnn_ops::calibration;
/// Deprecated path: now `swbnn_ops::checks`.
pub use swbnn_ops::checks;
/// Deprecated path: now `swbnn_ops::commands`.
pub use swbnn_ops::commands;
/// Deprecated path: now `swbnn_ops::load`.
pub use swbnn_ops::load;
/// Deprecated path: now `swbnn_ops::warmup`.
pub use swbnn_ops::warmup;

/// Deprecated path: the data opening of the operations (`swbnn_ops::data`) with the harness's
/// `ExperimentData` (`swbnn_harness::ExperimentData`).
pub mod data {
    pub use swbnn_harness::ExperimentData;
    pub use swbnn_ops::data::*;
}
