//! The sharing plan: codebook, per-weight fates and ellipse blends.
//!
//! The plan covers the **shareable weights of the table, in table order** (see
//! [`crate::table`]): `fates[p]` is the fate of shareable position `p`. Unshareable weights
//! (biases, normalisation parameters) are not in the plan; they keep their own `(mu, sigma)`
//! and are counted separately in the report.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use gauss2d::Gaussian2;

use crate::fate::{OutlierCause, WeightFate};

/// Most components one ellipse weight blends.
pub const MAX_BLEND: usize = 5;

/// Tolerance on `sum(alphas) == 1` (alphas are stored as `f32`).
pub const ALPHA_SUM_TOL: f32 = 1e-5;

/// One shared distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodebookEntry {
    /// The component as a 2-D Gaussian in the `(mu, sigma)` plane.
    pub gaussian: Gaussian2,
    /// Mixing weight `pi_k` (sums to 1 over the codebook).
    pub mixing_weight: f64,
    /// Stage-3 trainable initial mean of the shared weight distribution: the component mean's
    /// `mu` coordinate.
    pub init_mu: f32,
    /// Stage-3 trainable initial standard deviation: the component mean's `sigma` coordinate
    /// (`> 0`).
    pub init_sigma: f32,
    /// Number of plain-shared weights (`WeightFate::Shared(k)`) using this entry. Ellipse
    /// weights are not counted here.
    pub count: u32,
}

impl CodebookEntry {
    /// An entry whose stage-3 initialisation is the Gaussian's mean; `count` is 0.
    ///
    /// The mean's sigma coordinate is positive for any component fitted to or merged from
    /// points with `sigma > 0`; it is clamped to `f32::MIN_POSITIVE` so the initial standard
    /// deviation is valid even for a hand-made Gaussian centred at `sigma <= 0`.
    pub fn new(gaussian: Gaussian2, mixing_weight: f64) -> Self {
        let m = gaussian.mean();
        Self {
            gaussian,
            mixing_weight,
            init_mu: m.x as f32,
            init_sigma: (m.y as f32).max(f32::MIN_POSITIVE),
            count: 0,
        }
    }
}

/// A weight sampled from a blend of up to [`MAX_BLEND`] codebook entries.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EllipseWeight {
    /// Shareable position of the weight.
    pub weight: u32,
    /// Codebook indices; the first `len` are used, in descending alpha order, distinct.
    pub components: [u32; MAX_BLEND],
    /// Blend coefficients (sum to 1 over the first `len`); unused slots are 0.
    pub alphas: [f32; MAX_BLEND],
    /// Number of used slots, `2..=MAX_BLEND`.
    pub len: u8,
}

impl EllipseWeight {
    /// The used `(component, alpha)` pairs.
    pub fn blend(&self) -> impl Iterator<Item = (u32, f32)> + '_ {
        let n = self.len as usize;
        self.components[..n]
            .iter()
            .copied()
            .zip(self.alphas[..n].iter().copied())
    }
}

/// A plan inconsistency found by [`SharingPlan::validate`].
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PlanError {
    /// A fate names a codebook entry that does not exist.
    #[error("weight {weight}: component {component} out of range (codebook has {k})")]
    ComponentOutOfRange {
        /// Shareable position.
        weight: usize,
        /// The bad index.
        component: u32,
        /// Codebook size.
        k: usize,
    },
    /// A fate names an ellipse entry that does not exist or belongs to another weight.
    #[error("weight {weight}: ellipse entry {ellipse} invalid ({why})")]
    BadEllipseLink {
        /// Shareable position.
        weight: usize,
        /// Ellipse index.
        ellipse: u32,
        /// What is wrong.
        why: &'static str,
    },
    /// An ellipse entry is malformed.
    #[error("ellipse entry {ellipse} (weight {weight}): {why}")]
    BadEllipse {
        /// Ellipse index.
        ellipse: usize,
        /// Its weight.
        weight: u32,
        /// What is wrong.
        why: &'static str,
    },
    /// A codebook entry is malformed.
    #[error("codebook entry {k}: {why}")]
    BadCodebook {
        /// Entry index.
        k: usize,
        /// What is wrong.
        why: String,
    },
    /// The codebook is empty although some weight is shared.
    #[error("codebook is empty but {0} weights are shared")]
    EmptyCodebook(usize),
}

/// The result of stages 1-2: what every shareable weight becomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharingPlan {
    /// Shared distributions.
    pub codebook: Vec<CodebookEntry>,
    /// Fate of every shareable weight, in shareable-position order.
    pub fates: Vec<WeightFate>,
    /// Ellipse weights, in increasing `weight` order; `WeightFate::Ellipse(j)` indexes this.
    pub ellipses: Vec<EllipseWeight>,
}

/// Counts of a plan's fates; `outliers() + plain_shared + ellipse == total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FateCounts {
    /// Shareable weights covered by the plan.
    pub total: usize,
    /// `WeightFate::Shared`.
    pub plain_shared: usize,
    /// `WeightFate::Ellipse`.
    pub ellipse: usize,
    /// `Outlier(MeanThreshold)`.
    pub outlier_mean: usize,
    /// `Outlier(Gradient)`.
    pub outlier_gradient: usize,
    /// `Outlier(SmallCluster)`.
    pub outlier_small_cluster: usize,
}

impl FateCounts {
    /// All outliers.
    pub fn outliers(&self) -> usize {
        self.outlier_mean + self.outlier_gradient + self.outlier_small_cluster
    }
}

impl SharingPlan {
    /// Number of shareable weights the plan covers.
    pub fn n_weights(&self) -> usize {
        self.fates.len()
    }
    /// Number of codebook entries (Gaussians).
    pub fn k(&self) -> usize {
        self.codebook.len()
    }

    /// Counts the fates.
    pub fn counts(&self) -> FateCounts {
        let mut c = FateCounts {
            total: self.fates.len(),
            ..Default::default()
        };
        for f in &self.fates {
            match f {
                WeightFate::Shared(_) => c.plain_shared += 1,
                WeightFate::Ellipse(_) => c.ellipse += 1,
                WeightFate::Outlier(OutlierCause::MeanThreshold) => c.outlier_mean += 1,
                WeightFate::Outlier(OutlierCause::Gradient) => c.outlier_gradient += 1,
                WeightFate::Outlier(OutlierCause::SmallCluster) => c.outlier_small_cluster += 1,
            }
        }
        c
    }

    /// Shareable positions and causes of the outliers, in order.
    pub fn outliers(&self) -> impl Iterator<Item = (u32, OutlierCause)> + '_ {
        self.fates.iter().enumerate().filter_map(|(p, f)| match f {
            WeightFate::Outlier(c) => Some((p as u32, *c)),
            _ => None,
        })
    }

    /// Recomputes every codebook entry's `count` from the fates. Out-of-range indices are
    /// ignored here (and reported by [`Self::validate`]).
    pub fn recount(&mut self) {
        for e in &mut self.codebook {
            e.count = 0;
        }
        for f in &self.fates {
            if let WeightFate::Shared(k) = *f
                && let Some(e) = self.codebook.get_mut(k as usize)
            {
                e.count += 1;
            }
        }
    }

    /// Checks the plan's internal consistency: indices in range, each ellipse entry linked
    /// to exactly one weight (and back), ellipse blends well-formed (2..=5 distinct
    /// components, finite non-negative alphas summing to 1 within [`ALPHA_SUM_TOL`], unused
    /// slots zero, entries sorted by weight), codebook entries finite with `init_sigma > 0`,
    /// mixing weights finite and non-negative, and counts matching the fates.
    pub fn validate(&self) -> Result<(), PlanError> {
        let k = self.codebook.len();
        let mut shared = 0usize;
        let mut counts = vec![0u32; k];
        let mut linked = vec![false; self.ellipses.len()];
        for (p, f) in self.fates.iter().enumerate() {
            match *f {
                WeightFate::Shared(c) => {
                    shared += 1;
                    match counts.get_mut(c as usize) {
                        Some(n) => *n += 1,
                        None => {
                            return Err(PlanError::ComponentOutOfRange {
                                weight: p,
                                component: c,
                                k,
                            });
                        }
                    }
                }
                WeightFate::Ellipse(j) => {
                    shared += 1;
                    let Some(e) = self.ellipses.get(j as usize) else {
                        return Err(PlanError::BadEllipseLink {
                            weight: p,
                            ellipse: j,
                            why: "index out of range",
                        });
                    };
                    if e.weight as usize != p {
                        return Err(PlanError::BadEllipseLink {
                            weight: p,
                            ellipse: j,
                            why: "entry belongs to another weight",
                        });
                    }
                    linked[j as usize] = true;
                }
                WeightFate::Outlier(_) => {}
            }
        }
        if k == 0 && shared > 0 {
            return Err(PlanError::EmptyCodebook(shared));
        }
        for (j, e) in self.ellipses.iter().enumerate() {
            let bad = |why| PlanError::BadEllipse {
                ellipse: j,
                weight: e.weight,
                why,
            };
            if !linked[j] {
                return Err(bad("no weight links to this entry"));
            }
            if j > 0 && self.ellipses[j - 1].weight >= e.weight {
                return Err(bad("entries not sorted by weight"));
            }
            let n = e.len as usize;
            if !(2..=MAX_BLEND).contains(&n) {
                return Err(bad("len not in 2..=5"));
            }
            let used = &e.components[..n];
            if used.iter().any(|&c| c as usize >= k) {
                return Err(bad("component out of range"));
            }
            for a in 0..n {
                if used[a + 1..].contains(&used[a]) {
                    return Err(bad("duplicate component"));
                }
            }
            if e.alphas[..n].iter().any(|a| !a.is_finite() || *a < 0.0) {
                return Err(bad("alpha not finite or negative"));
            }
            if e.alphas[n..].iter().any(|&a| a != 0.0) || e.components[n..].iter().any(|&c| c != 0)
            {
                return Err(bad("unused slot not zero"));
            }
            let sum: f32 = e.alphas[..n].iter().sum();
            if (sum - 1.0).abs() > ALPHA_SUM_TOL {
                return Err(bad("alphas do not sum to 1"));
            }
        }
        for (i, e) in self.codebook.iter().enumerate() {
            let bad = |why: String| PlanError::BadCodebook { k: i, why };
            if !(e.mixing_weight.is_finite() && e.mixing_weight >= 0.0) {
                return Err(bad(format!("mixing weight {}", e.mixing_weight)));
            }
            if !(e.init_mu.is_finite() && e.init_sigma.is_finite() && e.init_sigma > 0.0) {
                return Err(bad(format!(
                    "init (mu, sigma) = ({}, {})",
                    e.init_mu, e.init_sigma
                )));
            }
            if e.count != counts[i] {
                return Err(bad(format!(
                    "count {} but {} weights are Shared({i})",
                    e.count, counts[i]
                )));
            }
        }
        Ok(())
    }
}
