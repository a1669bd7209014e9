//! [`EvalSummary`]: the classification and calibration numbers reported per model.

use serde::{Deserialize, Serialize};

use crate::calibration::{DEFAULT_N_BINS, ReliabilityDiagram, diagram_from_stats};
use crate::classification::{all_row_stats, mean_of};
use crate::error::{MetricsError, Result};
use crate::probabilities::{Label, Probabilities};

/// Accuracy, NLL, ECE, MCE and Brier score of one prediction, in one pass over the data.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    /// Top-1 accuracy in `[0, 1]` (see [`crate::accuracy`]).
    pub accuracy: f64,
    /// Mean negative log-likelihood in nats (see [`crate::nll`]).
    pub nll: f64,
    /// Expected calibration error (see [`crate::ece`]).
    pub ece: f64,
    /// Maximum calibration error (see [`crate::mce`]).
    pub mce: f64,
    /// Multi-class Brier score (see [`crate::brier`]).
    pub brier: f64,
    /// Mean confidence (the predicted class's probability). Above `accuracy`, the model is
    /// over-confident on average; below, under-confident.
    #[serde(default)]
    pub mean_confidence: f64,
    /// Number of examples.
    pub n: usize,
}

impl EvalSummary {
    /// Computes the summary with [`DEFAULT_N_BINS`] (15) calibration bins.
    ///
    /// # Errors
    /// [`MetricsError::LengthMismatch`] or [`MetricsError::LabelOutOfRange`].
    pub fn compute<L: Label>(probs: &Probabilities, labels: &[L]) -> Result<Self> {
        Ok(Self::with_diagram(probs, labels, DEFAULT_N_BINS)?.0)
    }

    /// Computes the summary and the reliability diagram with `n_bins` calibration bins.
    ///
    /// # Errors
    /// As [`EvalSummary::compute`], plus [`MetricsError::InvalidParameter`] for `n_bins == 0`.
    pub fn with_diagram<L: Label>(
        probs: &Probabilities,
        labels: &[L],
        n_bins: usize,
    ) -> Result<(Self, ReliabilityDiagram)> {
        if n_bins == 0 {
            return Err(MetricsError::InvalidParameter {
                name: "n_bins",
                value: 0.0,
                reason: "need at least one bin",
            });
        }
        let stats = all_row_stats(probs, labels)?;
        let diagram = diagram_from_stats(&stats, n_bins);
        let summary = Self {
            accuracy: mean_of(&stats, |r| f64::from(u8::from(r.correct))),
            nll: mean_of(&stats, |r| r.nll),
            ece: diagram.ece(),
            mce: diagram.mce(),
            brier: mean_of(&stats, |r| r.brier),
            mean_confidence: mean_of(&stats, |r| r.confidence),
            n: stats.len(),
        };
        Ok((summary, diagram))
    }
}
