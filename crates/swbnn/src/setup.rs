//! What one experiment is: the data set, the architecture, each stage's training, 2DGBNN's
//! configuration and where the run directory is ([`Setup`], what `setup.json` holds).
//!
//! The setup of one seed of a multi-seed run, [`Setup::for_seed`], is made in
//! [`crate::store`], which owns the run directory's layout (and reads and writes `setup.json`),
//! so that this module depends on no other of the crate.

use std::path::PathBuf;

use bnn_data::{Corruption, DatasetId};
use bnn_models::{Arch, BayesOptions};
use bnn_train::TrainConfig;
use serde::{Deserialize, Serialize};
use swshare::compress::CompressConfig;

/// Everything an experiment needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// Data set.
    pub dataset: DatasetId,
    /// Architecture.
    pub arch: Arch,
    /// Where the data are (else the usual search order).
    pub data_dir: Option<PathBuf>,
    /// Out-of-distribution set: kind and directory.
    pub ood: Option<(DatasetId, PathBuf)>,
    /// Training examples used (stratified subset), all if `None`.
    pub train_subset: Option<usize>,
    /// Test examples used, all if `None`.
    pub test_subset: Option<usize>,
    /// Deterministic training.
    pub deterministic: TrainConfig,
    /// Bayes-by-Backprop training (stage 1 pre-training of 2DGBNN).
    pub bbb: TrainConfig,
    /// Start Bayes by Backprop from the deterministic weights (the paper's "with pre-trained").
    pub bbb_from_deterministic: bool,
    /// The Bayesian layers: estimator, sigma initialisation, empirical-prior centres.
    pub bayes: BayesOptions,
    /// 2DGBNN: stages 1-2 (`compress.sharing`) and the stage-3 retraining
    /// (`compress.retrain`).
    pub compress: CompressConfig,
    /// Monte-Carlo samples at evaluation (paper: 30).
    pub samples: usize,
    /// Corruptions of the test set to evaluate every method on (empty: none).
    #[serde(default)]
    pub corruptions: Vec<Corruption>,
    /// Data-loading threads.
    pub workers: usize,
    /// Output directory (models and tables).
    pub out_dir: PathBuf,
    /// Continue an interrupted run in `out_dir`: stages whose checkpoints and rows are there
    /// are not trained or evaluated again. Without it, old stage checkpoints are removed first.
    #[serde(default)]
    pub resume: bool,
}
