//! Split-conformal calibration: prediction sets (classification) and intervals (regression)
//! with a finite-sample coverage guarantee, fitted on a held-out calibration split only.
//!
//! Split conformal prediction (Vovk, Gammerman & Shafer, "Algorithmic Learning in a Random
//! World", 2005; Angelopoulos & Bates 2021, "A gentle introduction to conformal prediction and
//! distribution-free uncertainty quantification", section 1): compute a non-conformity score
//! `s_i` on each of `n` calibration points, and take as threshold `qhat` the `k`-th smallest
//! score, `k = ceil((n + 1) level)` ([`conformal_quantile`]). If the calibration and test
//! points are exchangeable, a test point's score is `<= qhat` with probability at least
//! `level`, and (without ties among the scores) at most `level + 1/(n + 1)`, whatever the
//! model. Conditionally on the calibration set, the coverage is `Beta(k, n + 1 - k)`
//! distributed.
//!
//! * Classification: Adaptive Prediction Sets ([`ApsCalibration`]), randomised so that
//!   coverage is exact even with tied probabilities.
//! * Regression: intervals `mean +- qhat std` from residuals normalised by the predictive
//!   standard deviation, one `qhat` per target ([`NormalizedIntervalCalibration`]).
//!
//! The guarantee is marginal (on average over calibration and test draws), not per example.

use serde::{Deserialize, Serialize};

use crate::error::{MetricsError, Result};
use crate::probabilities::{Label, Probabilities, check_labels};
use crate::regression::{RegressionPredictive, check_level};

/// Relative distance to an integer below which `(n + 1) level` and `1 / (1 - level)` count as
/// that integer, so that decimal levels behave as in exact arithmetic (`5 * 0.8` is 4, not 5,
/// even if the `f64` product rounds up).
const INTEGER_TOLERANCE: f64 = 1e-12;

fn ceil_tolerant(x: f64) -> f64 {
    let r = x.round();
    if (x - r).abs() <= INTEGER_TOLERANCE * x.abs().max(1.0) {
        r
    } else {
        x.ceil()
    }
}

/// The smallest calibration set for `level`: `ceil(1 / (1 - level))` (10 for 0.9, 20 for 0.95).
///
/// # Errors
/// [`MetricsError::InvalidParameter`] unless `0 < level < 1`.
pub fn conformal_min_n(level: f64) -> Result<usize> {
    check_level(level)?;
    // At most about 9e15 for the largest level below 1, so the cast is exact.
    Ok(ceil_tolerant(1.0 / (1.0 - level)) as usize)
}

/// The 1-based rank `k = ceil((n + 1) level)` of the conformal quantile among `n` scores, after
/// checking the level and that `n >= ceil(1 / (1 - level))` and `k <= n`.
fn conformal_rank(level: f64, n: usize) -> Result<usize> {
    let needed = conformal_min_n(level)?;
    let too_few = MetricsError::TooFewCalibrationPoints { level, n, needed };
    if n < needed {
        return Err(too_few);
    }
    let k = ceil_tolerant((n as f64 + 1.0) * level) as usize;
    if k > n || k == 0 {
        return Err(too_few);
    }
    Ok(k)
}

/// The split-conformal quantile of calibration `scores` at `level`: the `k`-th smallest score,
/// `k = ceil((n + 1) level)` (Angelopoulos & Bates 2021, section 1).
///
/// ```
/// use bnn_metrics::conformal_quantile;
/// // n = 10, level 0.9: k = ceil(9.9) = 10, the largest score.
/// let scores = [0.3, 0.1, 0.9, 0.5, 0.2, 0.8, 0.4, 0.7, 0.6, 1.0];
/// assert_eq!(conformal_quantile(&scores, 0.9)?, 1.0);
/// // level 0.5: k = ceil(5.5) = 6.
/// assert_eq!(conformal_quantile(&scores, 0.5)?, 0.6);
/// # Ok::<(), bnn_metrics::MetricsError>(())
/// ```
///
/// # Errors
/// [`MetricsError::InvalidParameter`] unless `0 < level < 1`,
/// [`MetricsError::TooFewCalibrationPoints`] if `n < ceil(1 / (1 - level))` (or `k > n`),
/// [`MetricsError::NonFinite`] for a NaN or infinite score.
pub fn conformal_quantile(scores: &[f64], level: f64) -> Result<f64> {
    let k = conformal_rank(level, scores.len())?;
    if let Some(row) = scores.iter().position(|s| !s.is_finite()) {
        return Err(MetricsError::NonFinite {
            what: "conformal scores",
            row,
            col: 0,
            value: scores[row],
        });
    }
    let mut sorted = scores.to_vec();
    let (_, kth, _) = sorted.select_nth_unstable_by(k - 1, f64::total_cmp);
    Ok(*kth)
}

/// Stream of the uniforms of [`ApsCalibration::fit`].
const FIT_STREAM: u64 = 0;
/// Stream of the uniforms of [`ApsCalibration::sets`] and [`ApsCalibration::evaluate`].
const SET_STREAM: u64 = 1;

fn splitmix64(mut z: u64) -> u64 {
    // Steele, Lea & Flood 2014 (SplitMix64 finaliser, as in Vigna's splitmix64.c).
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The uniform `u` in `(0, 1)` of example `index` for `seed` and `stream`: the top 53 bits of
/// `splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ index)`, plus one half, times `2^-53`.
pub(crate) fn uniform(seed: u64, stream: u64, index: usize) -> f64 {
    let h = splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ index as u64);
    ((h >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
}

fn uniforms(seed: u64, stream: u64, n: usize) -> Vec<f64> {
    (0..n).map(|i| uniform(seed, stream, i)).collect()
}

fn check_uniforms(u: &[f64], n: usize) -> Result<()> {
    if u.len() != n {
        return Err(MetricsError::LengthMismatch {
            what: "APS uniforms vs probability rows",
            expected: n,
            got: u.len(),
        });
    }
    match u.iter().position(|v| !(0.0..=1.0).contains(v)) {
        Some(at) => Err(MetricsError::InvalidParameter {
            name: "APS uniform",
            value: u[at],
            reason: "must lie in [0, 1]",
        }),
        None => Ok(()),
    }
}

/// Walks the classes of `row` in descending probability (ties by class index), calling
/// `visit(class, value)` with `value = sum_{i<j} pi_(i) + u pi_(j)` until it returns `false`.
/// The values are non-decreasing in the rank.
fn walk_ranked(
    row: &[f32],
    u: f64,
    order: &mut Vec<usize>,
    mut visit: impl FnMut(usize, f64) -> bool,
) {
    order.clear();
    order.extend(0..row.len());
    order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    let mut cum = 0.0f64;
    for &k in order.iter() {
        let p = f64::from(row[k]);
        if !visit(k, cum + u * p) {
            return;
        }
        cum += p;
    }
}

/// The randomised APS score of `label`: `sum_{j<r} pi_(j) + u pi_(r)` for its rank `r`.
fn aps_score(row: &[f32], label: usize, u: f64, order: &mut Vec<usize>) -> f64 {
    let mut score = f64::NAN;
    walk_ranked(row, u, order, |k, value| {
        if k == label {
            score = value;
            false
        } else {
            true
        }
    });
    score
}

/// The randomised APS set of `row`: the classes whose value is `<= qhat`, in rank order.
fn aps_set(row: &[f32], u: f64, qhat: f64, order: &mut Vec<usize>) -> Vec<usize> {
    let mut set = Vec::new();
    walk_ranked(row, u, order, |k, value| {
        let inside = value <= qhat;
        if inside {
            set.push(k);
        }
        inside
    });
    set
}

/// Coverage and size of conformal prediction sets on a test split.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConformalSetSummary {
    /// The nominal coverage level.
    pub level: f64,
    /// Fraction of test examples whose true class is in its set.
    pub coverage: f64,
    /// Mean number of classes per set.
    pub mean_set_size: f64,
    /// Number of test examples.
    pub n: usize,
}

/// Coverage and width of conformal intervals on a test split.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConformalIntervalSummary {
    /// The nominal coverage level.
    pub level: f64,
    /// Fraction of test outputs inside their interval (bounds included), over every example
    /// and target (the mean over targets of the per-target coverage).
    pub coverage: f64,
    /// Mean interval width over every example and target.
    pub mean_width: f64,
    /// Number of test examples.
    pub n: usize,
}

/// Adaptive Prediction Sets (Romano, Sesia & Candès 2020, "Classification with valid and
/// adaptive coverage", NeurIPS), randomised version, calibrated by split conformal.
///
/// For an example with class probabilities sorted descending `pi_(1) >= pi_(2) >= ...` (ties
/// broken by class index) and a uniform `u` in `(0, 1)`, the value of rank `j` is
/// `V_j = sum_{i<j} pi_(i) + u pi_(j)`; the calibration score is `V_r` for the true class's
/// rank `r`, `qhat` is their [`conformal_quantile`], and the set of a test example holds the
/// classes with `V_j <= qhat`. The true class is in the set exactly when its score is
/// `<= qhat`, so coverage lies between `level` and `level + 1/(n + 1)` in expectation; the
/// randomisation makes the scores continuous, so this holds even with tied probabilities.
/// A set **may be empty** (when `u pi_(1) > qhat`): that is part of what makes coverage exact,
/// not conservative; use `u = 1` ([`ApsCalibration::fit_with_uniforms`] and
/// [`ApsCalibration::sets_with_uniforms`]) for the non-randomised, conservative APS, whose sets
/// are never empty.
///
/// `u` is deterministic: for example `i`, it is a splitmix64 hash of `(seed, stream, i)`
/// mapped into `(0, 1)`, with stream 0 for [`ApsCalibration::fit`] and stream 1 for
/// [`ApsCalibration::sets`] and [`ApsCalibration::evaluate`], so the same seed gives the same
/// sets and the calibration and test uniforms are never the same numbers.
///
/// ```
/// use bnn_metrics::{ApsCalibration, Probabilities};
/// // 10 calibration examples, all with the same probabilities; true class 0 (most probable).
/// let row = [0.6f32, 0.3, 0.1];
/// let probs = Probabilities::new(row.repeat(10), 10, 3)?;
/// let aps = ApsCalibration::fit(&probs, &[0u8; 10], 0.9, 7)?;
/// // Every score is u * 0.6 < 0.6, so qhat < 0.6: sets hold class 0 at most.
/// assert!(aps.qhat < 0.6);
/// let sets = aps.sets(&Probabilities::new(row.to_vec(), 1, 3)?, 7)?;
/// assert!(sets[0].is_empty() || sets[0] == vec![0]);
/// # Ok::<(), bnn_metrics::MetricsError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ApsCalibration {
    /// The nominal coverage level, in `(0, 1)`.
    pub level: f64,
    /// The conformal threshold on the APS values.
    pub qhat: f64,
    /// Number of calibration examples it was fitted on.
    pub n: usize,
}

impl ApsCalibration {
    /// Fits `qhat` on a calibration split, with seeded uniforms (see the type's docs).
    ///
    /// # Errors
    /// [`MetricsError::InvalidParameter`] unless `0 < level < 1`,
    /// [`MetricsError::TooFewCalibrationPoints`] if `n < ceil(1 / (1 - level))`,
    /// [`MetricsError::LengthMismatch`] or [`MetricsError::LabelOutOfRange`] for bad labels.
    pub fn fit<L: Label>(
        probs: &Probabilities,
        labels: &[L],
        level: f64,
        seed: u64,
    ) -> Result<Self> {
        Self::fit_with_uniforms(probs, labels, level, &uniforms(seed, FIT_STREAM, probs.n()))
    }

    /// Fits `qhat` with the caller's uniforms `u` (one per example, in `[0, 1]`; all ones give
    /// the non-randomised APS).
    ///
    /// # Errors
    /// As [`ApsCalibration::fit`], plus [`MetricsError::LengthMismatch`] or
    /// [`MetricsError::InvalidParameter`] for bad uniforms.
    pub fn fit_with_uniforms<L: Label>(
        probs: &Probabilities,
        labels: &[L],
        level: f64,
        u: &[f64],
    ) -> Result<Self> {
        check_level(level)?;
        let labels = check_labels(labels, probs.n(), probs.classes())?;
        check_uniforms(u, probs.n())?;
        let mut order = Vec::with_capacity(probs.classes());
        let scores: Vec<f64> = probs
            .rows()
            .zip(&labels)
            .zip(u)
            .map(|((row, &y), &u)| aps_score(row, y, u, &mut order))
            .collect();
        Ok(Self {
            level,
            qhat: conformal_quantile(&scores, level)?,
            n: probs.n(),
        })
    }

    fn check(&self) -> Result<()> {
        check_level(self.level)?;
        if !self.qhat.is_finite() {
            return Err(MetricsError::InvalidParameter {
                name: "qhat",
                value: self.qhat,
                reason: "must be finite",
            });
        }
        Ok(())
    }

    /// The prediction set of every example of `probs`, classes in descending probability; a
    /// set may be empty. Uniforms from `seed` (stream 1, see the type's docs).
    ///
    /// # Errors
    /// [`MetricsError::InvalidParameter`] for a level outside `(0, 1)` or a non-finite `qhat`
    /// (a hand-built or deserialised calibration).
    pub fn sets(&self, probs: &Probabilities, seed: u64) -> Result<Vec<Vec<usize>>> {
        self.sets_with_uniforms(probs, &uniforms(seed, SET_STREAM, probs.n()))
    }

    /// The prediction sets with the caller's uniforms `u` (one per example, in `[0, 1]`).
    ///
    /// # Errors
    /// As [`ApsCalibration::sets`], plus [`MetricsError::LengthMismatch`] or
    /// [`MetricsError::InvalidParameter`] for bad uniforms.
    pub fn sets_with_uniforms(&self, probs: &Probabilities, u: &[f64]) -> Result<Vec<Vec<usize>>> {
        self.check()?;
        check_uniforms(u, probs.n())?;
        let mut order = Vec::with_capacity(probs.classes());
        Ok(probs
            .rows()
            .zip(u)
            .map(|(row, &u)| aps_set(row, u, self.qhat, &mut order))
            .collect())
    }

    /// Coverage and mean set size on a labelled test split (uniforms from `seed`, stream 1,
    /// the same as [`ApsCalibration::sets`]).
    ///
    /// # Errors
    /// As [`ApsCalibration::sets`], plus [`MetricsError::LengthMismatch`] or
    /// [`MetricsError::LabelOutOfRange`] for bad labels.
    pub fn evaluate<L: Label>(
        &self,
        probs: &Probabilities,
        labels: &[L],
        seed: u64,
    ) -> Result<ConformalSetSummary> {
        let labels = check_labels(labels, probs.n(), probs.classes())?;
        let sets = self.sets(probs, seed)?;
        let n = sets.len();
        let covered = sets
            .iter()
            .zip(&labels)
            .filter(|(s, y)| s.contains(y))
            .count();
        let size: usize = sets.iter().map(Vec::len).sum();
        Ok(ConformalSetSummary {
            level: self.level,
            coverage: covered as f64 / n as f64,
            mean_set_size: size as f64 / n as f64,
            n,
        })
    }
}

/// Split-conformal intervals from residuals normalised by the predictive standard deviation
/// (the "normalised" or locally weighted non-conformity score; Papadopoulos, Vovk & Gammerman
/// 2008; Lei et al. 2018, "Distribution-free predictive inference for regression", section
/// 5.2), with the mixture predictive's mean and standard deviation
/// ([`RegressionPredictive::mean`], [`RegressionPredictive::std`]).
///
/// Per target column `t`, the calibration scores are `|y_it - mean_it| / std_it` and `qhat_t`
/// is their [`conformal_quantile`]; the interval of a test output is
/// `mean_it +- qhat_t std_it`. Each target's intervals cover with probability at least
/// `level` (and about at most `level + 1/(n + 1)`), whatever the model.
///
/// ```
/// use bnn_metrics::{NormalizedIntervalCalibration, RegressionPredictive};
/// // 10 calibration points with std 1: residuals 0.1, 0.2, ..., 1.0.
/// let pred = RegressionPredictive::from_gaussian(&[0.0; 10], &[1.0; 10], 10, 1)?;
/// let y: Vec<f32> = (1..=10).map(|k| k as f32 / 10.0).collect();
/// let cal = NormalizedIntervalCalibration::fit(&pred, &y, 0.9)?;
/// assert_eq!(cal.qhat, vec![1.0f32 as f64]); // k = ceil(11 * 0.9) = 10: the largest score
/// # Ok::<(), bnn_metrics::MetricsError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormalizedIntervalCalibration {
    /// The nominal coverage level, in `(0, 1)`.
    pub level: f64,
    /// The threshold on `|y - mean| / std`, one per target.
    pub qhat: Vec<f64>,
    /// Number of calibration examples it was fitted on.
    pub n: usize,
}

impl NormalizedIntervalCalibration {
    /// Fits one `qhat` per target on a calibration split (`y`: row-major `[n, targets]`).
    ///
    /// To calibrate an arbitrary mean and standard deviation (a deterministic network, an
    /// ensemble), build the predictive with [`RegressionPredictive::from_gaussian`], which
    /// rejects standard deviations `<= 0` and non-finite values.
    ///
    /// # Errors
    /// [`MetricsError::InvalidParameter`] unless `0 < level < 1`,
    /// [`MetricsError::TooFewCalibrationPoints`] if `n < ceil(1 / (1 - level))`,
    /// [`MetricsError::Shape`] or [`MetricsError::NonFinite`] for bad targets.
    pub fn fit(pred: &RegressionPredictive, y: &[f32], level: f64) -> Result<Self> {
        check_level(level)?;
        check_targets(pred, y)?;
        let (n, t) = (pred.n(), pred.targets());
        let (mean, std) = (pred.mean(), pred.std());
        let qhat = (0..t)
            .map(|col| {
                let scores: Vec<f64> = (0..n)
                    .map(|i| {
                        let c = i * t + col;
                        (f64::from(y[c]) - mean[c]).abs() / std[c]
                    })
                    .collect();
                conformal_quantile(&scores, level)
            })
            .collect::<Result<Vec<f64>>>()?;
        Ok(Self { level, qhat, n })
    }

    fn check(&self, pred: &RegressionPredictive) -> Result<()> {
        check_level(self.level)?;
        if self.qhat.len() != pred.targets() {
            return Err(MetricsError::LengthMismatch {
                what: "conformal thresholds vs regression targets",
                expected: self.qhat.len(),
                got: pred.targets(),
            });
        }
        match self.qhat.iter().find(|q| !(q.is_finite() && **q >= 0.0)) {
            Some(&q) => Err(MetricsError::InvalidParameter {
                name: "qhat",
                value: q,
                reason: "must be finite and >= 0",
            }),
            None => Ok(()),
        }
    }

    /// The interval `(mean - qhat_t std, mean + qhat_t std)` of every output, row-major
    /// `[n, targets]`.
    ///
    /// # Errors
    /// [`MetricsError::LengthMismatch`] if `pred` has another number of targets than the
    /// calibration; [`MetricsError::InvalidParameter`] for a bad level or `qhat` (hand-built or
    /// deserialised).
    pub fn intervals(&self, pred: &RegressionPredictive) -> Result<Vec<(f64, f64)>> {
        self.check(pred)?;
        let t = pred.targets();
        Ok(pred
            .mean()
            .iter()
            .zip(pred.std())
            .enumerate()
            .map(|(c, (&m, s))| {
                let half = self.qhat[c % t] * s;
                (m - half, m + half)
            })
            .collect())
    }

    /// Coverage and mean width on a test split (`y`: row-major `[n, targets]`).
    ///
    /// # Errors
    /// As [`NormalizedIntervalCalibration::intervals`], plus [`MetricsError::Shape`] or
    /// [`MetricsError::NonFinite`] for bad targets.
    pub fn evaluate(
        &self,
        pred: &RegressionPredictive,
        y: &[f32],
    ) -> Result<ConformalIntervalSummary> {
        check_targets(pred, y)?;
        let intervals = self.intervals(pred)?;
        let total = intervals.len() as f64;
        let covered = intervals
            .iter()
            .zip(y)
            .filter(|&(&(lo, hi), &v)| (lo..=hi).contains(&f64::from(v)))
            .count();
        let width: f64 = intervals.iter().map(|(lo, hi)| hi - lo).sum();
        Ok(ConformalIntervalSummary {
            level: self.level,
            coverage: covered as f64 / total,
            mean_width: width / total,
            n: pred.n(),
        })
    }
}

/// A fitted split-conformal calibration as a model stores it: what a test-time prediction needs
/// to give sets or intervals with the calibrated coverage.
///
/// A classifier's sets are computed on the Monte-Carlo predictive at `temperature` (the
/// temperature fitted on the same validation split just before, or 1): temperature scaling and
/// conformal calibration compose, temperature first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case", deny_unknown_fields)]
pub enum ConformalCalibration {
    /// Classification: randomised Adaptive Prediction Sets ([`ApsCalibration`]).
    Aps {
        /// The temperature the predictive's logits are divided by before the scores.
        temperature: f64,
        /// The nominal coverage level, in `(0, 1)`.
        level: f64,
        /// The conformal threshold on the APS values, in `[0, 1]`.
        qhat: f64,
        /// Number of calibration examples.
        n: usize,
    },
    /// Regression: normalised-residual intervals ([`NormalizedIntervalCalibration`]).
    NormalizedInterval {
        /// The nominal coverage level, in `(0, 1)`.
        level: f64,
        /// The threshold on `|y - mean| / std`, one per target.
        qhat: Vec<f64>,
        /// Number of calibration examples.
        n: usize,
    },
}

impl ConformalCalibration {
    /// The APS calibration `aps`, fitted on the predictive at `temperature`.
    pub fn aps(aps: ApsCalibration, temperature: f64) -> Self {
        ConformalCalibration::Aps {
            temperature,
            level: aps.level,
            qhat: aps.qhat,
            n: aps.n,
        }
    }

    /// The normalised-interval calibration `cal`.
    pub fn intervals(cal: NormalizedIntervalCalibration) -> Self {
        ConformalCalibration::NormalizedInterval {
            level: cal.level,
            qhat: cal.qhat,
            n: cal.n,
        }
    }

    /// The nominal coverage level.
    pub fn level(&self) -> f64 {
        match self {
            ConformalCalibration::Aps { level, .. }
            | ConformalCalibration::NormalizedInterval { level, .. } => *level,
        }
    }

    /// Number of calibration examples it was fitted on.
    pub fn n(&self) -> usize {
        match self {
            ConformalCalibration::Aps { n, .. }
            | ConformalCalibration::NormalizedInterval { n, .. } => *n,
        }
    }

    /// The method's name as files and reports write it: `"aps"` or `"normalized_interval"`.
    pub fn method(&self) -> &'static str {
        match self {
            ConformalCalibration::Aps { .. } => "aps",
            ConformalCalibration::NormalizedInterval { .. } => "normalized_interval",
        }
    }

    /// The APS calibration and its temperature; `None` for a regression calibration.
    pub fn as_aps(&self) -> Option<(ApsCalibration, f64)> {
        match *self {
            ConformalCalibration::Aps {
                temperature,
                level,
                qhat,
                n,
            } => Some((ApsCalibration { level, qhat, n }, temperature)),
            ConformalCalibration::NormalizedInterval { .. } => None,
        }
    }

    /// The normalised-interval calibration; `None` for a classification calibration.
    pub fn as_intervals(&self) -> Option<NormalizedIntervalCalibration> {
        match self {
            ConformalCalibration::NormalizedInterval { level, qhat, n } => {
                Some(NormalizedIntervalCalibration {
                    level: *level,
                    qhat: qhat.clone(),
                    n: *n,
                })
            }
            ConformalCalibration::Aps { .. } => None,
        }
    }

    /// Checks what a stored calibration must hold: a level in `(0, 1)`, at least
    /// [`conformal_min_n`] calibration examples, an APS threshold in `[0, 1]` and a valid
    /// temperature ([`crate::validate_temperature`]), interval thresholds finite, `>= 0`, at
    /// least one.
    ///
    /// # Errors
    /// [`MetricsError::InvalidParameter`] or [`MetricsError::TooFewCalibrationPoints`] naming
    /// the value.
    pub fn validate(&self) -> Result<()> {
        let level = self.level();
        let needed = conformal_min_n(level)?;
        if self.n() < needed {
            return Err(MetricsError::TooFewCalibrationPoints {
                level,
                n: self.n(),
                needed,
            });
        }
        let bad_qhat = |q: f64, reason| MetricsError::InvalidParameter {
            name: "qhat",
            value: q,
            reason,
        };
        match self {
            ConformalCalibration::Aps {
                temperature, qhat, ..
            } => {
                crate::validate_temperature(*temperature)?;
                if !(0.0..=1.0).contains(qhat) {
                    return Err(bad_qhat(*qhat, "must lie in [0, 1]"));
                }
            }
            ConformalCalibration::NormalizedInterval { qhat, .. } => {
                if qhat.is_empty() {
                    return Err(bad_qhat(f64::NAN, "needs one threshold per target"));
                }
                if let Some(&q) = qhat.iter().find(|q| !(q.is_finite() && **q >= 0.0)) {
                    return Err(bad_qhat(q, "must be finite and >= 0"));
                }
            }
        }
        Ok(())
    }
}

fn check_targets(pred: &RegressionPredictive, y: &[f32]) -> Result<()> {
    pred.check_y(y)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probs(rows: &[[f32; 3]]) -> Probabilities {
        Probabilities::new(rows.concat(), rows.len(), 3).unwrap()
    }

    #[test]
    fn a_stored_calibration_is_checked_whole() {
        let aps = ConformalCalibration::aps(
            ApsCalibration {
                level: 0.9,
                qhat: 0.93,
                n: 500,
            },
            1.25,
        );
        aps.validate().unwrap();
        assert_eq!((aps.level(), aps.n(), aps.method()), (0.9, 500, "aps"));
        assert_eq!(aps.as_aps().unwrap().1, 1.25);
        assert!(aps.as_intervals().is_none());
        let json = serde_json::to_string(&aps).unwrap();
        assert!(json.contains(r#""method":"aps""#), "{json}");
        assert_eq!(
            serde_json::from_str::<ConformalCalibration>(&json).unwrap(),
            aps
        );
        let with = |f: &dyn Fn(&mut ConformalCalibration)| {
            let mut c = aps.clone();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        let set = |t: f64, l: f64, q: f64, m: usize| {
            move |c: &mut ConformalCalibration| {
                *c = ConformalCalibration::Aps {
                    temperature: t,
                    level: l,
                    qhat: q,
                    n: m,
                }
            }
        };
        assert!(with(&set(1.0, 1.0, 0.5, 500)).contains("level"));
        assert!(with(&set(1.0, 0.9, 0.5, 9)).contains("n = 9"));
        assert!(with(&set(1.0, 0.9, 1.5, 500)).contains("qhat"));
        assert!(with(&set(1.0, 0.9, f64::NAN, 500)).contains("qhat"));
        assert!(with(&set(0.0, 0.9, 0.5, 500)).contains("temperature"));
        let iv = ConformalCalibration::intervals(NormalizedIntervalCalibration {
            level: 0.95,
            qhat: vec![1.9, 2.1],
            n: 40,
        });
        iv.validate().unwrap();
        assert_eq!(iv.method(), "normalized_interval");
        assert_eq!(iv.as_intervals().unwrap().qhat, vec![1.9, 2.1]);
        let bad = ConformalCalibration::NormalizedInterval {
            level: 0.95,
            qhat: vec![-1.0],
            n: 40,
        };
        assert!(bad.validate().unwrap_err().to_string().contains("qhat"));
        let empty = ConformalCalibration::NormalizedInterval {
            level: 0.95,
            qhat: vec![],
            n: 40,
        };
        assert!(empty.validate().is_err());
    }

    #[test]
    fn quantile_rank_is_ceil_n_plus_one_times_level() {
        let scores: Vec<f64> = [7, 3, 10, 1, 5, 9, 2, 8, 4, 6]
            .iter()
            .map(|&k| f64::from(k))
            .collect();
        // n = 10: k = ceil(11 * 0.9) = 10, ceil(11 * 0.5) = 6, ceil(11 * 0.1) = 2.
        assert_eq!(conformal_quantile(&scores, 0.9).unwrap(), 10.0);
        assert_eq!(conformal_quantile(&scores, 0.5).unwrap(), 6.0);
        assert_eq!(conformal_quantile(&scores, 0.1).unwrap(), 2.0);
        assert_eq!(conformal_rank(0.9, 10).unwrap(), 10);
        assert_eq!(conformal_rank(0.9, 500).unwrap(), 451); // ceil(450.9)
        assert_eq!(conformal_rank(0.75, 4).unwrap(), 4); // ceil(3.75)
        assert_eq!(conformal_rank(0.8, 9).unwrap(), 8); // 10 * 0.8 = 8 exactly
        // 25 * 0.56 = 14.000000000000002 in f64, but 14 in decimal arithmetic.
        assert_eq!(25.0 * 0.56, 14.000000000000002);
        assert_eq!(conformal_rank(0.56, 24).unwrap(), 14);
        // Minimum sizes: ceil(1 / (1 - level)).
        assert_eq!(conformal_min_n(0.9).unwrap(), 10);
        assert_eq!(conformal_min_n(0.95).unwrap(), 20);
        assert_eq!(conformal_min_n(0.5).unwrap(), 2);
        assert_eq!(conformal_min_n(0.8).unwrap(), 5);
        let e = conformal_quantile(&scores[..9], 0.9).unwrap_err();
        assert_eq!(
            e,
            MetricsError::TooFewCalibrationPoints {
                level: 0.9,
                n: 9,
                needed: 10
            }
        );
        let text = e.to_string();
        assert!(text.contains("0.9") && text.contains("n = 9") && text.contains("10"));
        assert!(conformal_quantile(&[], 0.5).is_err());
        assert!(matches!(
            conformal_quantile(&[1.0, f64::NAN], 0.5),
            Err(MetricsError::NonFinite { row: 1, .. })
        ));
    }

    #[test]
    fn aps_scores_and_sets_by_hand() {
        let mut order = Vec::new();
        // Sorted: class 1 (0.5), class 2 (0.3), class 0 (0.2).
        let row = [0.2f32, 0.5, 0.3];
        let close = |a: f64, b: f64| (a - b).abs() < 1e-7;
        assert!(close(aps_score(&row, 1, 0.5, &mut order), 0.25));
        assert!(close(aps_score(&row, 2, 0.5, &mut order), 0.5 + 0.5 * 0.3));
        assert!(close(aps_score(&row, 0, 1.0, &mut order), 1.0));
        // Ties broken by class index: classes 0 and 2 tie at 0.4, class 0 ranks first.
        let tied = [0.4f32, 0.2, 0.4];
        assert!(close(aps_score(&tied, 0, 0.5, &mut order), 0.2));
        assert!(close(aps_score(&tied, 2, 0.5, &mut order), 0.4 + 0.2));
        assert!(close(aps_score(&tied, 1, 0.5, &mut order), 0.8 + 0.1));

        // Calibration: 10 examples of `row` with u = 0.5; labels give scores 0.25 (class 1)
        // x 7, 0.65 (class 2) x 2, 0.9 (class 0) x 1; level 0.9 takes the 10th, 0.9; level 0.8
        // (k = ceil(8.8) = 9) takes the 9th, 0.65.
        let cal = probs(&[row; 10]);
        let labels = [1u8, 1, 2, 1, 1, 0, 1, 2, 1, 1];
        let u = [0.5; 10];
        let a = ApsCalibration::fit_with_uniforms(&cal, &labels, 0.9, &u).unwrap();
        assert!(close(a.qhat, 0.9));
        assert_eq!((a.level, a.n), (0.9, 10));
        let b = ApsCalibration::fit_with_uniforms(&cal, &labels, 0.8, &u).unwrap();
        assert!(close(b.qhat, 0.65));

        // Sets at qhat = 0.65 (b): values V = 0.25, 0.65, 0.9 with u = 0.5 -> {1, 2};
        // u = 1: V = 0.5, 0.8 -> {1}; u = 0.1: V = 0.05, 0.53, 0.82 -> {1, 2}.
        let test = probs(&[row, row, row]);
        let sets = b.sets_with_uniforms(&test, &[0.5, 1.0, 0.1]).unwrap();
        assert_eq!(sets, vec![vec![1, 2], vec![1], vec![1, 2]]);
        // An empty set: qhat = 0.2 < u * 0.5 = 0.25.
        let tight = ApsCalibration {
            level: 0.5,
            qhat: 0.2,
            n: 10,
        };
        let sets = tight.sets_with_uniforms(&test, &[0.5, 0.3, 1.0]).unwrap();
        assert_eq!(sets, vec![vec![], vec![1], vec![]]);
        // Ties: with qhat 0.65 and u = 0.5 the tied row gives V = 0.2, 0.6, 0.9 -> {0, 2}.
        let sets = b.sets_with_uniforms(&probs(&[tied]), &[0.5]).unwrap();
        assert_eq!(sets, vec![vec![0, 2]]);
    }

    #[test]
    fn seeded_uniforms_are_deterministic_and_in_the_open_interval() {
        let u: Vec<f64> = (0..10_000).map(|i| uniform(42, SET_STREAM, i)).collect();
        assert!(u.iter().all(|&v| v > 0.0 && v < 1.0));
        let mean = u.iter().sum::<f64>() / u.len() as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        assert_eq!(uniform(42, SET_STREAM, 7), u[7]);
        assert_ne!(uniform(42, FIT_STREAM, 7), u[7]);
        assert_ne!(uniform(43, SET_STREAM, 7), u[7]);

        let rows: Vec<[f32; 3]> = (0..50)
            .map(|i| {
                let a = 0.2 + 0.01 * i as f32;
                [a, 0.5 * (1.0 - a), 0.5 * (1.0 - a)]
            })
            .collect();
        let p = probs(&rows);
        let labels: Vec<u32> = (0..50).map(|i| i % 3).collect();
        let a = ApsCalibration::fit(&p, &labels, 0.9, 1).unwrap();
        assert_eq!(a, ApsCalibration::fit(&p, &labels, 0.9, 1).unwrap());
        assert_eq!(a.sets(&p, 5).unwrap(), a.sets(&p, 5).unwrap());
        assert_ne!(a.sets(&p, 5).unwrap(), a.sets(&p, 6).unwrap());
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<ApsCalibration>(&json).unwrap(), a);
        let s = a.evaluate(&p, &labels, 5).unwrap();
        let sets = a.sets(&p, 5).unwrap();
        let size = sets.iter().map(Vec::len).sum::<usize>() as f64 / 50.0;
        assert_eq!((s.n, s.level, s.mean_set_size), (50, 0.9, size));
    }

    #[test]
    fn normalized_intervals_by_hand() {
        // Two targets, n = 10; target 0 has std 1 and residuals 0.5 k, target 1 std 2 and
        // residuals -k / 4 (normalised: k / 8); k = 1..10.
        let n = 10;
        let mean = vec![1.0f32; 2 * n];
        let std: Vec<f32> = (0..2 * n)
            .map(|c| if c % 2 == 0 { 1.0 } else { 2.0 })
            .collect();
        let y: Vec<f32> = (0..2 * n)
            .map(|c| {
                let k = (c / 2 + 1) as f32;
                if c % 2 == 0 {
                    1.0 + 0.5 * k
                } else {
                    1.0 - k / 4.0
                }
            })
            .collect();
        let pred = RegressionPredictive::from_gaussian(&mean, &std, n, 2).unwrap();
        // level 0.5: k = ceil(5.5) = 6 -> qhat = (3.0, 0.75).
        let cal = NormalizedIntervalCalibration::fit(&pred, &y, 0.5).unwrap();
        assert_eq!(cal.qhat, vec![3.0, 0.75]);
        assert_eq!(cal.n, 10);
        let iv = cal.intervals(&pred).unwrap();
        assert_eq!(iv[0], (-2.0, 4.0));
        assert_eq!(iv[1], (-0.5, 2.5));
        // On the calibration data itself: 6 of 10 inside per target; widths 6 and 3.
        let s = cal.evaluate(&pred, &y).unwrap();
        assert_eq!(
            (s.coverage, s.mean_width, s.n, s.level),
            (0.6, 4.5, 10, 0.5)
        );
        let json = serde_json::to_string(&cal).unwrap();
        assert_eq!(
            serde_json::from_str::<NormalizedIntervalCalibration>(&json).unwrap(),
            cal
        );
    }

    /// splitmix64 stream and Box-Muller normals for the simulations.
    struct Rng(u64);

    impl Rng {
        fn uniform(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(1);
            ((splitmix64(self.0) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }

        fn normal(&mut self) -> f64 {
            let (a, b) = (self.uniform(), self.uniform());
            (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()
        }
    }

    const REPS: usize = 200;
    const N_CAL: usize = 500;
    const N_TEST: usize = 2000;
    const LEVEL: f64 = 0.9;

    /// The band the mean coverage over `REPS` repetitions must fall in: given the calibration
    /// set, coverage is Beta(k, n + 1 - k), k = ceil((n + 1) level), mean in
    /// [level, level + 1/(n + 1)); each repetition adds binomial noise from `N_TEST` test points.
    fn coverage_band() -> (f64, f64) {
        let n = N_CAL as f64;
        let k = ((n + 1.0) * LEVEL).ceil();
        let mean = k / (n + 1.0);
        let var_beta = k * (n + 1.0 - k) / ((n + 1.0) * (n + 1.0) * (n + 2.0));
        let var = var_beta + mean * (1.0 - mean) / N_TEST as f64;
        let se = (var / REPS as f64).sqrt();
        (LEVEL - 4.0 * se, LEVEL + 1.0 / (n + 1.0) + 4.0 * se)
    }

    /// A 4-class problem: true logits (2x, x, 0, -x) with x ~ N(0, 1). The model is wrong:
    /// for x > 0 it predicts softmax(0.3 * logits + (0, 0, 1, 0)), for x <= 0 the uniform
    /// distribution (all classes tied).
    fn classification_draw(rng: &mut Rng, n: usize) -> (Probabilities, Vec<u8>) {
        let mut logits = Vec::with_capacity(4 * n);
        let mut labels = Vec::with_capacity(n);
        for _ in 0..n {
            let x = rng.normal();
            let z = [2.0 * x, x, 0.0, -x];
            let m = z.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
            let e: Vec<f64> = z.iter().map(|v| (v - m).exp()).collect();
            let total: f64 = e.iter().sum();
            let mut r = rng.uniform() * total;
            let mut label = 3u8;
            for (k, &ek) in e.iter().enumerate() {
                if r < ek {
                    label = k as u8;
                    break;
                }
                r -= ek;
            }
            labels.push(label);
            if x > 0.0 {
                logits.extend(
                    z.iter()
                        .zip([0.0, 0.0, 1.0, 0.0])
                        .map(|(v, b)| (0.3 * v + b) as f32),
                );
            } else {
                logits.extend([0.0f32; 4]);
            }
        }
        (Probabilities::from_logits(logits, n, 4).unwrap(), labels)
    }

    #[test]
    fn aps_coverage_over_repeated_draws_is_exact() {
        let (lo, hi) = coverage_band();
        let mut rng = Rng(2024);
        let (mut sum, mut naive_sum) = (0.0, 0.0);
        for rep in 0..REPS {
            let (cal_p, cal_y) = classification_draw(&mut rng, N_CAL);
            let (test_p, test_y) = classification_draw(&mut rng, N_TEST);
            let aps = ApsCalibration::fit(&cal_p, &cal_y, LEVEL, rep as u64).unwrap();
            sum += aps.evaluate(&test_p, &test_y, rep as u64).unwrap().coverage;
            // Without calibration (trusting the model: qhat = level), coverage is off.
            let naive = ApsCalibration { qhat: LEVEL, ..aps };
            naive_sum += naive
                .evaluate(&test_p, &test_y, rep as u64)
                .unwrap()
                .coverage;
        }
        let (mean, naive) = (sum / REPS as f64, naive_sum / REPS as f64);
        assert!(
            lo <= mean && mean <= hi,
            "APS coverage {mean} outside [{lo}, {hi}]"
        );
        assert!(
            !(lo..=hi).contains(&naive),
            "naive coverage {naive} is already valid"
        );
    }

    /// y = x + (0.2 + |x|) e with x, e ~ N(0, 1); the model says N(0.8 x, 0.5^2).
    fn regression_draw(rng: &mut Rng, n: usize) -> (RegressionPredictive, Vec<f32>) {
        let (mut mean, mut y) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let x = rng.normal();
            y.push((x + (0.2 + x.abs()) * rng.normal()) as f32);
            mean.push((0.8 * x) as f32);
        }
        let pred = RegressionPredictive::from_gaussian(&mean, &vec![0.5; n], n, 1).unwrap();
        (pred, y)
    }

    #[test]
    fn normalized_interval_coverage_over_repeated_draws_is_exact() {
        let (lo, hi) = coverage_band();
        let mut rng = Rng(77);
        let (mut sum, mut naive_sum) = (0.0, 0.0);
        for _ in 0..REPS {
            let (cal_p, cal_y) = regression_draw(&mut rng, N_CAL);
            let (test_p, test_y) = regression_draw(&mut rng, N_TEST);
            let cal = NormalizedIntervalCalibration::fit(&cal_p, &cal_y, LEVEL).unwrap();
            sum += cal.evaluate(&test_p, &test_y).unwrap().coverage;
            // The model's own 90% interval: mean +- 1.645 std.
            naive_sum += crate::interval_coverage(&test_p, &test_y, LEVEL)
                .unwrap()
                .coverage;
        }
        let (mean, naive) = (sum / REPS as f64, naive_sum / REPS as f64);
        assert!(
            lo <= mean && mean <= hi,
            "interval coverage {mean} outside [{lo}, {hi}]"
        );
        assert!(
            !(lo..=hi).contains(&naive),
            "naive coverage {naive} is already valid"
        );
    }

    #[test]
    fn bad_input_is_an_error() {
        let row = [0.2f32, 0.5, 0.3];
        let p = probs(&[row; 20]);
        let labels = [0u8; 20];
        let pred = RegressionPredictive::from_gaussian(&[0.0; 20], &[1.0; 20], 20, 1).unwrap();
        let y = [0.5f32; 20];
        for level in [0.0, 1.0, 1.5, -0.5, f64::NAN, f64::INFINITY] {
            for e in [
                ApsCalibration::fit(&p, &labels, level, 0).unwrap_err(),
                NormalizedIntervalCalibration::fit(&pred, &y, level).unwrap_err(),
                conformal_quantile(&[0.0; 20], level).unwrap_err(),
            ] {
                assert!(
                    matches!(e, MetricsError::InvalidParameter { name: "level", .. }),
                    "{level}: {e}"
                );
            }
            let a = ApsCalibration {
                level,
                qhat: 0.5,
                n: 20,
            };
            assert!(a.sets(&p, 0).is_err());
        }
        // n too small: 0.95 needs 20; 19 examples.
        let p19 = probs(&[row; 19]);
        assert!(matches!(
            ApsCalibration::fit(&p19, &[0u8; 19], 0.95, 0),
            Err(MetricsError::TooFewCalibrationPoints {
                n: 19,
                needed: 20,
                ..
            })
        ));
        assert!(ApsCalibration::fit(&p, &labels, 0.95, 0).is_ok());
        let pred19 = RegressionPredictive::from_gaussian(&[0.0; 19], &[1.0; 19], 19, 1).unwrap();
        assert!(matches!(
            NormalizedIntervalCalibration::fit(&pred19, &[0.0; 19], 0.95),
            Err(MetricsError::TooFewCalibrationPoints { n: 19, .. })
        ));
        // Mismatched lengths.
        assert!(matches!(
            ApsCalibration::fit(&p, &labels[..19], 0.9, 0),
            Err(MetricsError::LengthMismatch { .. })
        ));
        assert!(matches!(
            ApsCalibration::fit_with_uniforms(&p, &labels, 0.9, &[0.5; 19]),
            Err(MetricsError::LengthMismatch { .. })
        ));
        assert!(matches!(
            ApsCalibration::fit_with_uniforms(&p, &labels, 0.9, &[1.5; 20]),
            Err(MetricsError::InvalidParameter { .. })
        ));
        assert!(matches!(
            ApsCalibration::fit(&p, &[3u8; 20], 0.9, 0),
            Err(MetricsError::LabelOutOfRange { .. })
        ));
        let aps = ApsCalibration::fit(&p, &labels, 0.9, 0).unwrap();
        assert!(matches!(
            aps.evaluate(&p, &labels[..5], 0),
            Err(MetricsError::LengthMismatch { .. })
        ));
        assert!(matches!(
            aps.sets_with_uniforms(&p, &[0.5; 3]),
            Err(MetricsError::LengthMismatch { .. })
        ));
        let broken = ApsCalibration {
            qhat: f64::NAN,
            ..aps
        };
        assert!(broken.sets(&p, 0).is_err());
        assert!(matches!(
            NormalizedIntervalCalibration::fit(&pred, &y[..19], 0.9),
            Err(MetricsError::Shape { .. })
        ));
        let cal = NormalizedIntervalCalibration::fit(&pred, &y, 0.9).unwrap();
        let two = RegressionPredictive::from_gaussian(&[0.0; 4], &[1.0; 4], 2, 2).unwrap();
        assert!(matches!(
            cal.intervals(&two),
            Err(MetricsError::LengthMismatch { .. })
        ));
        assert!(matches!(
            cal.evaluate(&pred, &y[..3]),
            Err(MetricsError::Shape { .. })
        ));
        let bad_q = NormalizedIntervalCalibration {
            qhat: vec![-1.0],
            ..cal.clone()
        };
        assert!(bad_q.intervals(&pred).is_err());
        // NaN targets.
        let mut nan = y;
        nan[4] = f32::NAN;
        assert!(matches!(
            NormalizedIntervalCalibration::fit(&pred, &nan, 0.9),
            Err(MetricsError::NonFinite { row: 4, .. })
        ));
        assert!(matches!(
            cal.evaluate(&pred, &nan),
            Err(MetricsError::NonFinite { row: 4, .. })
        ));
        // Standard deviations <= 0 or non-finite never make it into a predictive.
        for s in [0.0f32, -1.0, f32::NAN, f32::INFINITY] {
            let mut std = [1.0f32; 20];
            std[3] = s;
            assert!(RegressionPredictive::from_gaussian(&[0.0; 20], &std, 20, 1).is_err());
        }
    }
}
