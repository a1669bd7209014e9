//! What happens to one Bayesian weight under weight sharing.
//!
//! A weight's fate is one enum rather than several parallel masks, so the counts in the
//! compression report add up by construction: every weight is exactly one of plain-shared,
//! ellipse-blended or outlier.

use serde::{Deserialize, Serialize};

/// Why a weight keeps its own distribution instead of sharing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OutlierCause {
    /// `|mu_i| > tau_w` (paper, section "Outliers vs. Inliers Classification", tau_w = 0.2).
    MeanThreshold,
    /// `|d loss / d mu_i|` is in the top `P_g` fraction (paper: top 1 %).
    Gradient,
    /// The weight's GMM component had fewer than `N_min` members (paper: "Cluster Size Reductions").
    SmallCluster,
}

/// The fate of one weight, in the stable weight order (layer path, then row-major index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WeightFate {
    /// Samples from shared codebook entry `k`.
    Shared(u32),
    /// Samples from an alpha-blend of several codebook entries; the value indexes the plan's
    /// list of ellipse weights.
    Ellipse(u32),
    /// Keeps its own (mu, sigma).
    Outlier(OutlierCause),
}
