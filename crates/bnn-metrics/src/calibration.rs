//! Expected / maximum calibration error and reliability diagrams with equal-width bins.
//!
//! Bin convention (Guo et al. 2017, the common `_ECELoss`): with `B` bins the edges are
//! `k / B` for `k = 0..=B` (computed as `k as f64 / B as f64`), and bin `b` holds the examples
//! whose confidence `c` (the maximum probability) satisfies `edge[b] < c <= edge[b + 1]`:
//! intervals are open on the left and closed on the right, so a confidence of exactly `1.0` is
//! in the last bin. (A confidence of exactly 0 cannot occur for valid probabilities.)

use serde::{Deserialize, Serialize};

use crate::classification::{RowStats, all_row_stats};
use crate::error::{MetricsError, Result};
use crate::probabilities::{Label, Probabilities};

/// Number of bins used by [`ece`], [`mce`] and the summaries: 15, as in Guo et al. (2017) and the
/// 2DGBNN paper.
pub const DEFAULT_N_BINS: usize = 15;

/// One bin of a reliability diagram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReliabilityBin {
    /// Lower edge (exclusive).
    pub lower: f64,
    /// Upper edge (inclusive).
    pub upper: f64,
    /// Number of examples whose confidence falls in `(lower, upper]`.
    pub count: usize,
    /// Mean confidence of those examples; `0.0` when `count == 0`.
    pub mean_confidence: f64,
    /// Fraction of those examples that are classified correctly; `0.0` when `count == 0`.
    pub accuracy: f64,
}

impl ReliabilityBin {
    /// `|accuracy - mean_confidence|`; `0.0` for an empty bin.
    pub fn gap(&self) -> f64 {
        (self.accuracy - self.mean_confidence).abs()
    }
}

/// A reliability diagram: equal-width confidence bins over `n` examples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReliabilityDiagram {
    /// The bins, from low to high confidence.
    pub bins: Vec<ReliabilityBin>,
    /// Total number of examples.
    pub n: usize,
}

impl ReliabilityDiagram {
    /// Expected calibration error: `sum_b (count_b / n) * |acc_b - conf_b|`, in `[0, 1]`.
    pub fn ece(&self) -> f64 {
        self.bins
            .iter()
            .map(|b| b.count as f64 / self.n as f64 * b.gap())
            .sum()
    }

    /// Maximum calibration error: the largest `|acc_b - conf_b|` over non-empty bins.
    pub fn mce(&self) -> f64 {
        self.bins
            .iter()
            .filter(|b| b.count > 0)
            .map(ReliabilityBin::gap)
            .fold(0.0, f64::max)
    }
}

fn edge(k: usize, n_bins: usize) -> f64 {
    k as f64 / n_bins as f64
}

/// Bin index of a confidence in `(0, 1]` under the `(lo, hi]` convention.
fn bin_index(c: f64, n_bins: usize) -> usize {
    // Arithmetic guess, then corrected against the exact edges so that the result agrees with
    // comparing `c` to `k / B` (what the numpy reference does) even at rounding boundaries.
    let guess = (c * n_bins as f64).ceil();
    let mut b = if guess >= 1.0 {
        (guess as usize - 1).min(n_bins - 1)
    } else {
        0
    };
    while b > 0 && c <= edge(b, n_bins) {
        b -= 1;
    }
    while b + 1 < n_bins && c > edge(b + 1, n_bins) {
        b += 1;
    }
    b
}

fn check_bins(n_bins: usize) -> Result<()> {
    if n_bins == 0 {
        return Err(MetricsError::InvalidParameter {
            name: "n_bins",
            value: 0.0,
            reason: "need at least one bin",
        });
    }
    Ok(())
}

pub(crate) fn diagram_from_stats(stats: &[RowStats], n_bins: usize) -> ReliabilityDiagram {
    let mut count = vec![0usize; n_bins];
    let mut conf = vec![0.0f64; n_bins];
    let mut correct = vec![0usize; n_bins];
    for s in stats {
        let b = bin_index(s.confidence, n_bins);
        count[b] += 1;
        conf[b] += s.confidence;
        correct[b] += usize::from(s.correct);
    }
    let bins = (0..n_bins)
        .map(|b| {
            let (mean_confidence, accuracy) = if count[b] == 0 {
                (0.0, 0.0)
            } else {
                (
                    conf[b] / count[b] as f64,
                    correct[b] as f64 / count[b] as f64,
                )
            };
            ReliabilityBin {
                lower: edge(b, n_bins),
                upper: edge(b + 1, n_bins),
                count: count[b],
                mean_confidence,
                accuracy,
            }
        })
        .collect();
    ReliabilityDiagram {
        bins,
        n: stats.len(),
    }
}

/// Reliability diagram with `n_bins` equal-width bins (see the module docs for the edges).
///
/// # Errors
/// [`MetricsError::InvalidParameter`] for `n_bins == 0`, [`MetricsError::LengthMismatch`] or
/// [`MetricsError::LabelOutOfRange`].
pub fn reliability_diagram<L: Label>(
    probs: &Probabilities,
    labels: &[L],
    n_bins: usize,
) -> Result<ReliabilityDiagram> {
    check_bins(n_bins)?;
    let stats = all_row_stats(probs, labels)?;
    Ok(diagram_from_stats(&stats, n_bins))
}

/// Expected calibration error with [`DEFAULT_N_BINS`] (15) bins.
///
/// # Errors
/// As [`reliability_diagram`].
pub fn ece<L: Label>(probs: &Probabilities, labels: &[L]) -> Result<f64> {
    ece_with_bins(probs, labels, DEFAULT_N_BINS)
}

/// Expected calibration error with `n_bins` bins.
///
/// # Errors
/// As [`reliability_diagram`].
pub fn ece_with_bins<L: Label>(probs: &Probabilities, labels: &[L], n_bins: usize) -> Result<f64> {
    Ok(reliability_diagram(probs, labels, n_bins)?.ece())
}

/// Maximum calibration error with [`DEFAULT_N_BINS`] (15) bins.
///
/// # Errors
/// As [`reliability_diagram`].
pub fn mce<L: Label>(probs: &Probabilities, labels: &[L]) -> Result<f64> {
    mce_with_bins(probs, labels, DEFAULT_N_BINS)
}

/// Maximum calibration error with `n_bins` bins.
///
/// # Errors
/// As [`reliability_diagram`].
pub fn mce_with_bins<L: Label>(probs: &Probabilities, labels: &[L], n_bins: usize) -> Result<f64> {
    Ok(reliability_diagram(probs, labels, n_bins)?.mce())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_edges_are_left_open_right_closed() {
        assert_eq!(bin_index(1.0, 15), 14);
        assert_eq!(bin_index(1e-30, 15), 0);
        assert_eq!(bin_index(0.0, 15), 0);
        assert_eq!(bin_index(0.5, 2), 0);
        assert_eq!(bin_index(0.5000001, 2), 1);
        for b in 1..15 {
            let e = edge(b, 15);
            assert_eq!(bin_index(e, 15), b - 1, "edge {b}");
            assert_eq!(bin_index(e.next_up(), 15), b, "above edge {b}");
        }
    }

    #[test]
    fn zero_bins_rejected() {
        let p = Probabilities::new(vec![1.0], 1, 1).unwrap();
        assert!(matches!(
            reliability_diagram(&p, &[0u8], 0),
            Err(MetricsError::InvalidParameter { .. })
        ));
    }

    #[test]
    fn perfectly_confident_and_right_is_calibrated() {
        let p = Probabilities::new(vec![1.0, 0.0, 0.0, 1.0], 2, 2).unwrap();
        let d = reliability_diagram(&p, &[0u8, 1], 15).unwrap();
        assert_eq!(d.bins[14].count, 2);
        assert_eq!(d.ece(), 0.0);
        assert_eq!(d.mce(), 0.0);
        let d = reliability_diagram(&p, &[1u8, 1], 15).unwrap();
        assert_eq!(d.ece(), 0.5);
        assert_eq!(d.mce(), 0.5);
    }
}
