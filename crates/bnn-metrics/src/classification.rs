//! Accuracy, negative log-likelihood and Brier score.

use rayon::prelude::*;

use crate::error::Result;
use crate::probabilities::{Label, Probabilities, ROWS_PER_TASK, check_labels};

/// Probabilities are clamped to at least this value before taking the log in [`nll`].
///
/// `nll` equals PyTorch's `F.nll_loss(torch.log(p.clamp_min(1e-12)), y)` (mean reduction),
/// computed in `f64`. A zero probability on the true class therefore costs `-ln(1e-12) ≈ 27.63`
/// instead of infinity.
pub const NLL_EPSILON: f64 = 1e-12;

/// Index of the largest entry; ties go to the first (lowest) index, as `numpy.argmax`.
pub(crate) fn argmax(row: &[f32]) -> (usize, f32) {
    let mut best = 0;
    let mut best_v = row[0];
    for (k, &v) in row.iter().enumerate().skip(1) {
        if v > best_v {
            best = k;
            best_v = v;
        }
    }
    (best, best_v)
}

/// Per-example quantities that the summary metrics are averages of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowStats {
    pub correct: bool,
    pub confidence: f64,
    pub nll: f64,
    pub brier: f64,
}

pub(crate) fn row_stats(row: &[f32], label: usize) -> RowStats {
    let (pred, conf) = argmax(row);
    let p_y = f64::from(row[label]);
    // sum_k (p_k - [k = y])^2 = sum_k p_k^2 - 2 p_y + 1
    let sq: f64 = row.iter().map(|&p| f64::from(p) * f64::from(p)).sum();
    RowStats {
        correct: pred == label,
        confidence: f64::from(conf),
        nll: -p_y.max(NLL_EPSILON).ln(),
        brier: sq - 2.0 * p_y + 1.0,
    }
}

/// Computes [`RowStats`] for every example (in parallel, order preserved).
pub(crate) fn all_row_stats<L: Label>(
    probs: &Probabilities,
    labels: &[L],
) -> Result<Vec<RowStats>> {
    let labels = check_labels(labels, probs.n(), probs.classes())?;
    Ok(probs
        .as_slice()
        .par_chunks(probs.classes())
        .zip(labels.par_iter())
        .with_min_len(ROWS_PER_TASK)
        .map(|(row, &y)| row_stats(row, y))
        .collect())
}

/// Sequential (hence deterministic) mean of one field.
pub(crate) fn mean_of(stats: &[RowStats], f: impl Fn(&RowStats) -> f64) -> f64 {
    stats.iter().map(f).sum::<f64>() / stats.len() as f64
}

/// Mean confidence, `mean_i max_k p_ik` (no labels needed, so it applies to OOD data too).
pub fn mean_confidence(probs: &Probabilities) -> f64 {
    let sum: f64 = probs
        .rows()
        .map(|r| f64::from(r.iter().copied().fold(0.0f32, f32::max)))
        .sum();
    sum / probs.n().max(1) as f64
}

/// Top-1 accuracy in `[0, 1]`. The prediction is the arg-max; ties go to the lowest class index.
///
/// # Errors
/// [`crate::MetricsError::LengthMismatch`] or [`crate::MetricsError::LabelOutOfRange`].
pub fn accuracy<L: Label>(probs: &Probabilities, labels: &[L]) -> Result<f64> {
    let s = all_row_stats(probs, labels)?;
    Ok(mean_of(&s, |r| f64::from(u8::from(r.correct))))
}

/// Mean negative log-likelihood (nats) of the true class, `mean(-ln(max(p_y, NLL_EPSILON)))`.
///
/// See [`NLL_EPSILON`] for the exact PyTorch equivalent.
///
/// # Errors
/// [`crate::MetricsError::LengthMismatch`] or [`crate::MetricsError::LabelOutOfRange`].
pub fn nll<L: Label>(probs: &Probabilities, labels: &[L]) -> Result<f64> {
    let s = all_row_stats(probs, labels)?;
    Ok(mean_of(&s, |r| r.nll))
}

/// Multi-class Brier score: `mean_i sum_k (p_ik - [k = y_i])^2`, in `[0, 2]`.
///
/// This is the original Brier (1950) definition and equals scikit-learn's
/// `brier_score_loss(y, p, labels=range(C))` for multi-class input (not divided by `C`).
///
/// # Errors
/// [`crate::MetricsError::LengthMismatch`] or [`crate::MetricsError::LabelOutOfRange`].
pub fn brier<L: Label>(probs: &Probabilities, labels: &[L]) -> Result<f64> {
    let s = all_row_stats(probs, labels)?;
    Ok(mean_of(&s, |r| r.brier))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed() {
        let p = Probabilities::new(vec![0.7, 0.2, 0.1, 0.0, 0.5, 0.5], 2, 3).unwrap();
        let y = [0u32, 0];
        assert_eq!(accuracy(&p, &y).unwrap(), 0.5);
        let expected_nll = (-(0.7f32 as f64).ln() - NLL_EPSILON.ln()) / 2.0;
        assert!((nll(&p, &y).unwrap() - expected_nll).abs() < 1e-12);
        let b0 = (0.3f32 as f64).powi(2) + (0.2f32 as f64).powi(2) + (0.1f32 as f64).powi(2);
        let b1 = 1.0 + 0.25 + 0.25;
        assert!((brier(&p, &y).unwrap() - (b0 + b1) / 2.0).abs() < 1e-7);
        // Tie between classes 1 and 2 goes to class 1.
        assert_eq!(accuracy(&p, &[0u32, 1]).unwrap(), 1.0);
        assert_eq!(accuracy(&p, &[0u32, 2]).unwrap(), 0.5);
    }
}
