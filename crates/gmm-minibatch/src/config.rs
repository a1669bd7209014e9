//! Fit configuration.

use serde::{Deserialize, Serialize};

use crate::GmmError;

/// Most components a fit accepts (`k`), the one bound of K everywhere (`swbnn compress --k`,
/// a `--config` file, `swshare`'s sharing config). The fit's time grows with K: on a Bayesian
/// MLP of 478,000 weights on 2 cores, compression's stages 1-2 took 8.6 s at K = 2,000 (the
/// paper's default), 21 s at 8,000, 40 s at 16,000, 51 s at 32,000 and 139 s at 65,534 (the
/// most a `.swb` index stores), and longer on larger models. 2^15 is five times the paper's
/// largest K (6,000) and ends within a minute there.
pub const MAX_K: usize = 32_768;

/// How the components are initialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Init {
    /// k-means++ (D^2-weighted) seeding on a weighted sample of histogram cells.
    #[default]
    KMeansPlusPlus,
    /// Seeds drawn at random (weight-proportional) from the sample.
    Random,
}

/// Configuration of [`crate::fit`]. All fields have defaults tuned for the `K ~ 2000`,
/// `N ~ 10^7` case; threads come from rayon's global pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GmmConfig {
    /// Number of components requested (`k_requested`). Default 2000.
    pub k: usize,
    /// Seed of every random choice. Default 0.
    pub seed: u64,
    /// Histogram resolution per axis of the fitting grid (rounded up to a power of two,
    /// 2..=4096). Default 1024.
    pub histogram_resolution: u32,
    /// Number of (weighted) cells sampled for the seeding. Default `max(20 k, 20000)` when 0.
    pub init_sample: usize,
    /// Initialisation method. Default k-means++.
    pub init: Init,
    /// Mini-batch (stepwise) EM epochs over the cells before the full-batch refinement.
    /// Default 2.
    pub minibatch_epochs: usize,
    /// Cells per mini-batch. Default 16384.
    pub batch_size: usize,
    /// Maximum full-batch EM refinement iterations. Default 40.
    pub max_iterations: usize,
    /// Stop the refinement when the per-point objective improves by less than this (nats).
    /// Default 1e-4.
    pub tolerance: f64,
    /// Smallest covariance eigenvalue, in standardised units (the data divided by its
    /// standard deviation per axis). Default 1e-6.
    pub cov_floor: f64,
    /// Relative mass of the components omitted by the spatial pruning during EM (a heuristic
    /// there). Default 1e-5.
    pub em_prune_tolerance: f64,
    /// Bound on the relative density omitted by the pruning when scoring (assignment,
    /// log-likelihood, top-k): every per-point log-likelihood is exact to within this many
    /// nats. Default 1e-9.
    pub score_prune_tolerance: f64,
}

impl Default for GmmConfig {
    fn default() -> Self {
        Self {
            k: 2000,
            seed: 0,
            histogram_resolution: 1024,
            init_sample: 0,
            init: Init::KMeansPlusPlus,
            minibatch_epochs: 2,
            batch_size: 16384,
            max_iterations: 40,
            tolerance: 1e-4,
            cov_floor: 1e-6,
            em_prune_tolerance: 1e-5,
            score_prune_tolerance: 1e-9,
        }
    }
}

impl GmmConfig {
    /// Checks the values (K = 0 is reported as [`GmmError::ZeroComponents`]).
    pub fn validate(&self) -> Result<(), GmmError> {
        if self.k == 0 {
            return Err(GmmError::ZeroComponents);
        }
        if self.k > MAX_K {
            return Err(GmmError::Config(format!(
                "k = {} is out of range: at most {MAX_K} components",
                self.k
            )));
        }
        if !(2..=4096).contains(&self.histogram_resolution) {
            return Err(GmmError::Config(format!(
                "histogram_resolution = {} not in 2..=4096",
                self.histogram_resolution
            )));
        }
        if self.batch_size == 0 {
            return Err(GmmError::Config("batch_size = 0".into()));
        }
        let pos = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(GmmError::Config(format!(
                    "{name} = {v} must be finite and > 0"
                )))
            }
        };
        pos("cov_floor", self.cov_floor)?;
        pos("em_prune_tolerance", self.em_prune_tolerance)?;
        pos("score_prune_tolerance", self.score_prune_tolerance)?;
        if !(self.tolerance.is_finite() && self.tolerance >= 0.0) {
            return Err(GmmError::Config(format!(
                "tolerance = {} must be finite and >= 0",
                self.tolerance
            )));
        }
        if self.em_prune_tolerance >= 1.0 || self.score_prune_tolerance >= 1.0 {
            return Err(GmmError::Config("prune tolerances must be < 1".into()));
        }
        Ok(())
    }

    /// Grid bits: `log2` of the histogram resolution rounded up to a power of two.
    pub(crate) fn grid_bits(&self) -> u32 {
        self.histogram_resolution
            .next_power_of_two()
            .trailing_zeros()
    }
}
