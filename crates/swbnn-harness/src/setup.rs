//! What one experiment is: the data set, the architecture, each stage's training, 2DGBNN's
//! configuration and where the run directory is ([`Setup`], what `setup.json` holds).
//!
//! The setup of one seed of a multi-seed run, [`Setup::for_seed`], is made in
//! [`crate::store`], which owns the run directory's layout (and reads and writes `setup.json`),
//! so that this module depends on no other of the crate.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bnn_data::{Corruption, DataSource, DatasetId};
use bnn_models::{Arch, BayesOptions, Noise};
use bnn_train::TrainConfig;
use serde::{Deserialize, Serialize};

pub use swbnn_ops::ValidationSplit;
use swshare::compress::CompressConfig;

/// Everything an experiment needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// Data set: a preset, written by its name as before user data sets could be reproduced
    /// (`"fashion-mnist"`), or a user's `folder:DIR` / `npz:FILE` ([`DataSource`]'s text).
    /// A user's data set is set up by [`crate::presets::setup_for_source`].
    pub dataset: DataSource,
    /// Architecture.
    pub arch: Arch,
    /// The target columns of a `csv:` table (at least one there, none elsewhere). A table
    /// (`csv:`, or an `.npz` with floating-point `y_*`) runs the regression experiment
    /// ([`crate::regression`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    /// A regression network's noise model (`None`: heteroscedastic); tables only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<Noise>,
    /// The MLP's hidden widths (`None`: the MLP's default); the MLP only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlp_hidden: Option<Vec<usize>>,
    /// Where the data are (else the usual search order).
    pub data_dir: Option<PathBuf>,
    /// Out-of-distribution set: kind and directory.
    pub ood: Option<(DatasetId, PathBuf)>,
    /// Splits the OOD set `ood` (not the held-out classes') in two fixed halves ([`bnn_data::Subset::alternating_halves`]: per
    /// class, even positions in file order, then odd ones). Half A is a second validation OOD
    /// set, which every choice may read (`ood_half_a_*` in `validation.json`); half B is the
    /// OOD set of the test rows, which no choice reads. `false`, as in a `setup.json` written
    /// before the halves: the test rows use the whole OOD set.
    #[serde(default)]
    pub ood_halves: bool,
    /// Classes held out of training, validation and the test rows (the others relabelled
    /// `0..` in order), whose test images are then the OOD set: a near-OOD benchmark
    /// (`--ood heldout:6,9`). Empty: none. Excludes `ood`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_out_classes: Vec<u32>,
    /// The validation split, held out of the training split before `train_subset` picks
    /// from the rest; every rule that looks at data reads it, never the test set. Absent in a
    /// `setup.json` written before validation splits existed: such a run trained on the whole
    /// training split, so it reads as [`ValidationSplit::none`] and resumes on the same
    /// training images.
    #[serde(default = "ValidationSplit::none")]
    pub validation: ValidationSplit,
    /// Training examples used (stratified subset of what the validation split leaves), all of
    /// them if `None`.
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
    /// The run's seed number `n`: every stage's seed is its preset value plus `1000 * n`
    /// ([`Setup::with_seed`]; seed `i` of a multi-seed run is `n + i`, [`Setup::for_seed`]).
    /// The data splits do not depend on it. Absent in setups written before it was recorded,
    /// which were seed 0.
    #[serde(default)]
    pub seed: u64,
    /// Continue an interrupted run in `out_dir`: stages whose checkpoints and rows are there
    /// are not trained or evaluated again. Without it, old stage checkpoints are removed first.
    #[serde(default)]
    pub resume: bool,
    /// SHA-256 of every data file the run read, by file name (OOD files under `ood/`).
    /// Recorded by the run into its `setup.json` once its data are open; not an input (a
    /// value given here is replaced).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data_sha256: BTreeMap<String, String>,
}

/// The first seed number `cargo xtask reproduce` runs by default (`--seed-offset`): seeds 0
/// to 5 of the `1000 * n` scheme were looked at when the presets' defaults were chosen (on the
/// test set, before validation splits existed), so a report on them is not on unseen seeds.
/// A choice made on validation metrics may use them (`--seed-offset 0`); a report uses seeds
/// from here on.
pub const DEFAULT_SEED_OFFSET: u64 = 6;

impl Setup {
    /// Checks every setting a run would meet later, with the words of the flag or field's own
    /// check: the Monte Carlo samples ([`swbnn_ops::limits::check_samples`]), each training
    /// stage ([`TrainConfig::validate`], epochs included), the compression
    /// ([`CompressConfig::validate`], K included) and a table's options
    /// ([`swbnn_ops::table::check_table_options`]). `cargo xtask reproduce` calls it on the
    /// setup its flags, `--config` file and preset make; [`crate::reproduce`] on any setup it is
    /// given; nothing is read or written before it passes.
    pub fn check(&self) -> Result<(), crate::Error> {
        swbnn_ops::limits::check_samples(self.samples, 0, "").map_err(crate::Error::Usage)?;
        let stage = |what: &str, e: &dyn std::fmt::Display| {
            crate::Error::Usage(format!("the setup's {what}: {e}"))
        };
        self.deterministic
            .validate()
            .map_err(|e| stage("deterministic training", &e))?;
        self.bbb
            .validate()
            .map_err(|e| stage("Bayes-by-Backprop training", &e))?;
        self.compress
            .validate()
            .map_err(|e| stage("compression settings", &e))?;
        swbnn_ops::table::check_table_options(
            &self.dataset,
            &self.targets,
            self.noise,
            self.arch,
            self.mlp_hidden.as_deref(),
        )?;
        Ok(())
    }

    /// The setup of seed number `n`: every stage's seed (deterministic, BBB, stage 3 and the
    /// GMM) moved from this setup's seed number to `n`, `1000` apart per number. The data
    /// splits and the output directory stay.
    pub fn with_seed(&self, n: u64) -> Setup {
        let mut s = self.clone();
        let shift = |seed: &mut u64| {
            *seed = seed
                .wrapping_sub(self.seed.wrapping_mul(1000))
                .wrapping_add(n.wrapping_mul(1000));
        };
        shift(&mut s.deterministic.seed);
        shift(&mut s.bbb.seed);
        shift(&mut s.compress.retrain.seed);
        shift(&mut s.compress.sharing.gmm.seed);
        s.seed = n;
        s
    }
}
