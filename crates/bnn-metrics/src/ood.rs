//! Out-of-distribution detection metrics, computed by sorting (`O(n log n)`).
//!
//! Conventions: scores are "in-distribution-ness" (higher = more in-distribution), and the
//! **in-distribution examples are the positive class** for the ROC curve, AUROC and FPR at a
//! given TPR (as in Hendrycks & Gimpel 2017). `aupr_in` is the average precision with
//! in-distribution positive and the score as given; `aupr_out` treats out-of-distribution as
//! positive with the negated score. Average precision follows scikit-learn's
//! `average_precision_score` (step-wise `sum_k (R_k - R_{k-1}) P_k`, no interpolation), and tied
//! scores form a single threshold, as in `roc_curve` / `precision_recall_curve`.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::classification::argmax;
use crate::error::{MetricsError, Result};
use crate::probabilities::{Probabilities, ROWS_PER_TASK};
use crate::uncertainty::predictive_entropy;

/// A ROC curve with one point per distinct score, as scikit-learn's
/// `roc_curve(y, s, drop_intermediate=False)`: the first point is `(0, 0)` at threshold `+inf`,
/// the last is `(1, 1)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RocCurve {
    /// False positive rate at each threshold (out-of-distribution scores `>= threshold`).
    pub fpr: Vec<f64>,
    /// True positive rate at each threshold (in-distribution scores `>= threshold`).
    pub tpr: Vec<f64>,
    /// Thresholds, decreasing.
    pub thresholds: Vec<f64>,
}

/// Cumulative counts at each distinct threshold (descending): `(threshold, tp, fp)`.
struct Steps {
    points: Vec<(f64, usize, usize)>,
    pos: usize,
    neg: usize,
}

fn check_scores(what: &'static str, s: &[f64]) -> Result<()> {
    match s.iter().position(|v| !v.is_finite()) {
        Some(row) => Err(MetricsError::NonFinite {
            what,
            row,
            col: 0,
            value: s[row],
        }),
        None => Ok(()),
    }
}

fn steps(positive: &[f64], negative: &[f64]) -> Result<Steps> {
    if positive.is_empty() || negative.is_empty() {
        return Err(MetricsError::SingleClass {
            in_count: positive.len(),
            out_count: negative.len(),
        });
    }
    check_scores("in-distribution scores", positive)?;
    check_scores("out-of-distribution scores", negative)?;
    let mut all: Vec<(f64, bool)> = positive
        .iter()
        .map(|&s| (s, true))
        .chain(negative.iter().map(|&s| (s, false)))
        .collect();
    all.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
    let mut points = Vec::new();
    let (mut tp, mut fp) = (0usize, 0usize);
    let mut i = 0;
    while i < all.len() {
        let t = all[i].0;
        // `==` merges -0.0 and +0.0 (total_cmp orders them apart but they are adjacent).
        while i < all.len() && all[i].0 == t {
            if all[i].1 {
                tp += 1
            } else {
                fp += 1
            }
            i += 1;
        }
        points.push((t, tp, fp));
    }
    Ok(Steps {
        points,
        pos: positive.len(),
        neg: negative.len(),
    })
}

/// ROC curve with the in-distribution `positive` scores as the positive class.
///
/// # Errors
/// [`MetricsError::SingleClass`] if either slice is empty, [`MetricsError::NonFinite`] for NaN or
/// infinite scores.
pub fn roc_curve(positive: &[f64], negative: &[f64]) -> Result<RocCurve> {
    let st = steps(positive, negative)?;
    let (p, n) = (st.pos as f64, st.neg as f64);
    let mut roc = RocCurve {
        fpr: vec![0.0],
        tpr: vec![0.0],
        thresholds: vec![f64::INFINITY],
    };
    for &(t, tp, fp) in &st.points {
        roc.fpr.push(fp as f64 / n);
        roc.tpr.push(tp as f64 / p);
        roc.thresholds.push(t);
    }
    Ok(roc)
}

/// Area under the ROC curve (trapezoidal over distinct thresholds, so a tie between a positive
/// and a negative counts 1/2), equal to scikit-learn's `roc_auc_score`.
///
/// # Errors
/// As [`roc_curve`].
pub fn auroc(positive: &[f64], negative: &[f64]) -> Result<f64> {
    let st = steps(positive, negative)?;
    // Twice the area in units of (1 negative) x (1 positive): exact in integers up to 2^53.
    let (mut area2, mut prev_tp, mut prev_fp) = (0.0f64, 0usize, 0usize);
    for &(_, tp, fp) in &st.points {
        area2 += (fp - prev_fp) as f64 * (tp + prev_tp) as f64;
        prev_tp = tp;
        prev_fp = fp;
    }
    Ok(area2 / (2.0 * st.pos as f64 * st.neg as f64))
}

/// Average precision with `positive` as the positive class (higher score = more positive), as
/// scikit-learn's `average_precision_score`.
///
/// # Errors
/// As [`roc_curve`].
pub fn average_precision(positive: &[f64], negative: &[f64]) -> Result<f64> {
    let st = steps(positive, negative)?;
    let p = st.pos as f64;
    let mut ap = 0.0;
    let mut prev_tp = 0usize;
    for &(_, tp, fp) in &st.points {
        if tp > prev_tp {
            ap += (tp - prev_tp) as f64 / p * (tp as f64 / (tp + fp) as f64);
        }
        prev_tp = tp;
    }
    Ok(ap)
}

/// False positive rate at the first ROC point (decreasing threshold) whose TPR is `>= level`:
/// the fraction of out-of-distribution examples accepted when at least `level` of the
/// in-distribution ones are. Equals `fpr[np.searchsorted(tpr, level)]` on scikit-learn's
/// `roc_curve(..., drop_intermediate=False)`; no interpolation.
///
/// # Errors
/// As [`roc_curve`], plus [`MetricsError::InvalidParameter`] unless `0 <= level <= 1`.
pub fn fpr_at_tpr(positive: &[f64], negative: &[f64], level: f64) -> Result<f64> {
    if !(0.0..=1.0).contains(&level) {
        return Err(MetricsError::InvalidParameter {
            name: "tpr level",
            value: level,
            reason: "must be in [0, 1]",
        });
    }
    let roc = roc_curve(positive, negative)?;
    Ok(fpr_at(&roc, level))
}

fn fpr_at(roc: &RocCurve, level: f64) -> f64 {
    // TPR is non-decreasing and ends at 1, so the point exists.
    let i = roc.tpr.partition_point(|&t| t < level);
    roc.fpr[i.min(roc.fpr.len() - 1)]
}

/// The OOD metrics reported in the literature, for one in-/out-of-distribution pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OodSummary {
    /// Area under the ROC curve (in-distribution positive).
    pub auroc: f64,
    /// Average precision, in-distribution positive.
    pub aupr_in: f64,
    /// Average precision, out-of-distribution positive (negated scores).
    pub aupr_out: f64,
    /// FPR on out-of-distribution data at 85 % TPR on in-distribution data.
    pub fpr_at_85_tpr: f64,
    /// FPR on out-of-distribution data at 95 % TPR on in-distribution data.
    pub fpr_at_95_tpr: f64,
}

/// Which per-example quantity is used to separate in- from out-of-distribution examples.
///
/// Each is turned into an in-distribution score (higher = more in-distribution).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OodScore {
    /// Maximum predicted probability (Hendrycks & Gimpel 2017); score = `max_k p_k`.
    MaxProb,
    /// Predictive entropy; score = `-H(p)`.
    Entropy,
    /// Mutual information (needs Monte Carlo samples); score = `-MI`.
    MutualInformation,
}

impl OodScore {
    /// In-distribution scores of every example of a prediction.
    ///
    /// # Errors
    /// [`MetricsError::MissingMutualInformation`] for
    /// [`OodScore::MutualInformation`] on a prediction without MC samples.
    pub fn scores(self, pred: &crate::Predictive) -> Result<Vec<f64>> {
        match self {
            OodScore::MaxProb => Ok(max_prob(pred.probabilities())),
            OodScore::Entropy => Ok(pred.entropy().iter().map(|h| -h).collect()),
            OodScore::MutualInformation => pred
                .mutual_information()
                .map(|mi| mi.iter().map(|m| -m).collect())
                .ok_or(MetricsError::MissingMutualInformation),
        }
    }

    /// In-distribution scores from a single (deterministic) prediction.
    ///
    /// # Errors
    /// [`MetricsError::MissingMutualInformation`] for [`OodScore::MutualInformation`].
    pub fn scores_from_probabilities(self, probs: &Probabilities) -> Result<Vec<f64>> {
        match self {
            OodScore::MaxProb => Ok(max_prob(probs)),
            OodScore::Entropy => Ok(predictive_entropy(probs).into_iter().map(|h| -h).collect()),
            OodScore::MutualInformation => Err(MetricsError::MissingMutualInformation),
        }
    }
}

fn max_prob(probs: &Probabilities) -> Vec<f64> {
    probs
        .as_slice()
        .par_chunks(probs.classes())
        .with_min_len(ROWS_PER_TASK)
        .map(|r| f64::from(argmax(r).1))
        .collect()
}

impl OodSummary {
    /// All metrics from in-distribution scores (positive class) and out-of-distribution scores,
    /// higher meaning more in-distribution.
    ///
    /// # Errors
    /// As [`roc_curve`].
    pub fn from_scores(in_scores: &[f64], out_scores: &[f64]) -> Result<Self> {
        let roc = roc_curve(in_scores, out_scores)?;
        let neg_in: Vec<f64> = in_scores.iter().map(|s| -s).collect();
        let neg_out: Vec<f64> = out_scores.iter().map(|s| -s).collect();
        Ok(Self {
            auroc: auroc(in_scores, out_scores)?,
            aupr_in: average_precision(in_scores, out_scores)?,
            aupr_out: average_precision(&neg_out, &neg_in)?,
            fpr_at_85_tpr: fpr_at(&roc, 0.85),
            fpr_at_95_tpr: fpr_at(&roc, 0.95),
        })
    }

    /// All metrics from two predictions (e.g. MC predictive on the test set and on an OOD set).
    ///
    /// # Errors
    /// As [`OodScore::scores`] and [`OodSummary::from_scores`].
    pub fn from_predictive(
        in_dist: &crate::Predictive,
        out_dist: &crate::Predictive,
        score: OodScore,
    ) -> Result<Self> {
        Self::from_scores(&score.scores(in_dist)?, &score.scores(out_dist)?)
    }

    /// All metrics from two deterministic predictions. [`OodScore::MutualInformation`] needs MC
    /// samples and yields [`MetricsError::MissingMutualInformation`] here.
    ///
    /// # Errors
    /// As [`OodSummary::from_predictive`].
    pub fn from_probabilities(
        in_dist: &Probabilities,
        out_dist: &Probabilities,
        score: OodScore,
    ) -> Result<Self> {
        Self::from_scores(
            &score.scores_from_probabilities(in_dist)?,
            &score.scores_from_probabilities(out_dist)?,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_and_reversed_separation() {
        let s = OodSummary::from_scores(&[3.0, 4.0], &[1.0, 2.0]).unwrap();
        assert_eq!(s.auroc, 1.0);
        assert_eq!(s.aupr_in, 1.0);
        assert_eq!(s.aupr_out, 1.0);
        assert_eq!(s.fpr_at_95_tpr, 0.0);
        let s = OodSummary::from_scores(&[1.0, 2.0], &[3.0, 4.0]).unwrap();
        assert_eq!(s.auroc, 0.0);
        assert_eq!(s.fpr_at_95_tpr, 1.0);
    }

    #[test]
    fn all_tied_is_one_half() {
        assert_eq!(auroc(&[1.0; 3], &[1.0; 5]).unwrap(), 0.5);
        // One threshold: precision 3/8 at recall 1.
        assert_eq!(average_precision(&[1.0; 3], &[1.0; 5]).unwrap(), 3.0 / 8.0);
        let roc = roc_curve(&[1.0; 3], &[1.0; 5]).unwrap();
        assert_eq!(roc.tpr, vec![0.0, 1.0]);
        assert_eq!(roc.thresholds, vec![f64::INFINITY, 1.0]);
    }

    #[test]
    fn errors() {
        assert!(matches!(
            auroc(&[], &[1.0]),
            Err(MetricsError::SingleClass {
                in_count: 0,
                out_count: 1
            })
        ));
        assert!(matches!(
            auroc(&[1.0], &[f64::NAN]),
            Err(MetricsError::NonFinite { row: 0, .. })
        ));
        assert!(matches!(
            fpr_at_tpr(&[1.0], &[0.0], 1.5),
            Err(MetricsError::InvalidParameter { .. })
        ));
        let p = Probabilities::new(vec![1.0, 0.0], 1, 2).unwrap();
        assert!(matches!(
            OodSummary::from_probabilities(&p, &p, OodScore::MutualInformation),
            Err(MetricsError::MissingMutualInformation)
        ));
    }
}
