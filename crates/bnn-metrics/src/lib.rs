//! Uncertainty and calibration metrics for (Bayesian) classifiers, on plain slices.
//!
//! No deep-learning framework needed: predictions are row-major `[n, classes]` `f32` buffers.
//!
//! * [`Probabilities`]: validated probability matrix (shape, finite, non-negative, rows sum
//!   to 1 within [`ROW_SUM_TOLERANCE`]), or built from logits by a stable softmax.
//! * Labels: any primitive integer slice (`&[u32]`, `&[i64]`, `&[usize]`, ...; see [`Label`]);
//!   negative or `>= classes` values are errors.
//! * Classification / calibration: [`accuracy`], [`nll`] (clamped at [`NLL_EPSILON`]), [`brier`],
//!   [`ece`] / [`mce`] with 15 equal-width `(lo, hi]` bins by default, [`reliability_diagram`],
//!   and [`EvalSummary`] for all of them in one pass.
//! * Uncertainty: [`predictive_entropy`], [`mutual_information`], and the Monte Carlo
//!   accumulator [`McPredictive`] that averages *probabilities* over `N_s`
//!   ([`DEFAULT_MC_SAMPLES`] = 30) stochastic forward passes.
//! * Post-hoc calibration: [`fit_temperature`] fits temperature scaling by NLL on held-out
//!   Monte-Carlo logits ([`McLogits`]), applied to each sample before the average.
//! * Out-of-distribution detection (in-distribution = positive class): [`auroc`],
//!   [`average_precision`], [`fpr_at_tpr`], [`roc_curve`], and [`OodSummary`] with the score
//!   chosen by [`OodScore`]. Ties are handled as scikit-learn does.
//! * Regression: [`McRegression`] keeps `S` Monte Carlo samples of a Gaussian head
//!   (mean and standard deviation per output) and builds the mixture [`RegressionPredictive`]
//!   (mean, aleatoric / epistemic / total variance, CDF, quantiles, central intervals);
//!   metrics [`rmse`], [`gaussian_nll`], closed-form [`crps`], [`interval_coverage`], [`pit`],
//!   [`pit_calibration_error`], [`regression_reliability`], and [`RegressionSummary`].
//! * Split-conformal calibration on a held-out split: randomised Adaptive Prediction Sets
//!   ([`ApsCalibration`]) for classification and normalised-residual intervals
//!   ([`NormalizedIntervalCalibration`]) for regression, with [`conformal_quantile`] at
//!   `k = ceil((n + 1) level)`.
//! * Aside from the metrics, [`mod@file`] reads a user-given file within a bound; the model
//!   readers of the crates above share it (it says why it lives here).
//!
//! All sums are accumulated in `f64`; results are deterministic (per-row work may run in
//! parallel with rayon, reductions are sequential). Bad input returns a [`MetricsError`], never
//! panics.
//!
//! ```
//! use bnn_metrics::{EvalSummary, McPredictive, OodScore, OodSummary, Predictive, Probabilities};
//!
//! // Two MC samples of logits for 3 examples, 2 classes.
//! let mut mc = McPredictive::new(3, 2)?;
//! mc.push_logits(&[2.0, 0.0, 0.0, 1.0, 3.0, 0.0])?;
//! mc.push_logits(&[1.0, 0.0, 0.5, 0.0, 2.5, 0.0])?;
//! let pred = mc.finish()?;
//!
//! let summary = EvalSummary::compute(pred.probabilities(), &[0u32, 1, 0])?;
//! assert_eq!(summary.n, 3);
//! assert!((0.0..=1.0).contains(&summary.ece));
//!
//! // OOD: a flat prediction should look less in-distribution than confident ones.
//! let ood = Predictive::from_probabilities(Probabilities::new(vec![0.5, 0.5], 1, 2)?);
//! let s = OodSummary::from_predictive(&pred, &ood, OodScore::Entropy)?;
//! assert_eq!(s.auroc, 1.0);
//! # Ok::<(), bnn_metrics::MetricsError>(())
//! ```
#![warn(missing_docs)]

mod calibration;
mod classification;
mod conformal;
mod error;
pub mod file;
mod mc;
mod normal;
mod number;
mod ood;
mod probabilities;
mod regression;
mod summary;
mod temperature;
mod uncertainty;
mod weights;

pub use calibration::{
    DEFAULT_N_BINS, ReliabilityBin, ReliabilityDiagram, ece, ece_with_bins, mce, mce_with_bins,
    reliability_diagram,
};
pub use classification::{NLL_EPSILON, accuracy, brier, mean_confidence, nll};
pub use conformal::{
    ApsCalibration, ConformalCalibration, ConformalIntervalSummary, ConformalSetSummary,
    NormalizedIntervalCalibration, conformal_min_n, conformal_quantile,
};
pub use error::{MetricsError, Result};
pub use mc::{DEFAULT_MC_SAMPLES, McPredictive, Predictive, mutual_information};
pub use normal::{normal_cdf, normal_pdf};
pub use number::Short;
pub use ood::{OodScore, OodSummary, RocCurve, auroc, average_precision, fpr_at_tpr, roc_curve};
pub use probabilities::{Label, Probabilities, ROW_SUM_TOLERANCE};
pub use regression::{
    CoveragePoint, DEFAULT_INTERVAL_LEVELS, DEFAULT_RELIABILITY_LEVELS, IntervalCoverage,
    McRegression, RegressionPredictive, RegressionSummary, crps, gaussian_nll, interval_coverage,
    pit, pit_calibration_error, regression_reliability, rmse,
};
pub use summary::EvalSummary;
pub use temperature::{
    McLogits, TEMPERATURE_RANGE, TemperatureFit, fit_temperature, validate_temperature,
};
pub use uncertainty::{entropy, predictive_entropy};
pub use weights::{SIGMA_MOVEMENT_EDGES, SigmaMovement, WeightStats};

/// Compiles and runs the README example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
