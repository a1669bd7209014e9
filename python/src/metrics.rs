//! `swbnn.metrics`: `bnn-metrics` on NumPy arrays (probabilities `float32` `(n, classes)`,
//! labels `int64` `(n,)`, OOD scores `float64` `(n,)`).

use bnn_metrics::Probabilities;
use numpy::PyArrayDyn;
use pyo3::prelude::*;

use crate::arrays::{Input, output};
use crate::errors::{input_error, value_error};

/// Validated probabilities of a `(n, classes)` float32 array.
fn probabilities(obj: &Bound<'_, PyAny>) -> PyResult<Probabilities> {
    let p = Input::<f32>::new(obj, "probs", Some(2))?;
    let (n, c) = (p.shape()[0], p.shape()[1]);
    Probabilities::new(p.slice()?.to_vec(), n, c).map_err(input_error)
}

/// `(probabilities, labels)` of the classification metrics.
fn with_labels<'py>(
    probs: &Bound<'py, PyAny>,
    labels: &Bound<'py, PyAny>,
) -> PyResult<(Probabilities, Input<'py, i64>)> {
    Ok((
        probabilities(probs)?,
        Input::<i64>::new(labels, "labels", Some(1))?,
    ))
}

fn scores<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Input<'py, f64>> {
    Input::<f64>::new(obj, name, Some(1))
}

fn bins(n_bins: usize) -> PyResult<usize> {
    if n_bins == 0 {
        return Err(value_error("n_bins must be at least 1"));
    }
    Ok(n_bins)
}

/// Expected calibration error over `n_bins` equal-width `(lo, hi]` confidence bins.
#[pyfunction]
#[pyo3(signature = (probs, labels, n_bins = 15))]
pub fn ece(probs: &Bound<'_, PyAny>, labels: &Bound<'_, PyAny>, n_bins: usize) -> PyResult<f64> {
    let (p, l) = with_labels(probs, labels)?;
    bnn_metrics::ece_with_bins(&p, l.slice()?, bins(n_bins)?).map_err(input_error)
}

/// Maximum calibration error over `n_bins` equal-width bins.
#[pyfunction]
#[pyo3(signature = (probs, labels, n_bins = 15))]
pub fn mce(probs: &Bound<'_, PyAny>, labels: &Bound<'_, PyAny>, n_bins: usize) -> PyResult<f64> {
    let (p, l) = with_labels(probs, labels)?;
    bnn_metrics::mce_with_bins(&p, l.slice()?, bins(n_bins)?).map_err(input_error)
}

/// Mean negative log-likelihood of the labels (probabilities clamped at `NLL_EPSILON`).
#[pyfunction]
pub fn nll(probs: &Bound<'_, PyAny>, labels: &Bound<'_, PyAny>) -> PyResult<f64> {
    let (p, l) = with_labels(probs, labels)?;
    bnn_metrics::nll(&p, l.slice()?).map_err(input_error)
}

/// Mean Brier score (squared error summed over classes).
#[pyfunction]
pub fn brier(probs: &Bound<'_, PyAny>, labels: &Bound<'_, PyAny>) -> PyResult<f64> {
    let (p, l) = with_labels(probs, labels)?;
    bnn_metrics::brier(&p, l.slice()?).map_err(input_error)
}

/// Fraction of rows whose arg max is the label.
#[pyfunction]
pub fn accuracy(probs: &Bound<'_, PyAny>, labels: &Bound<'_, PyAny>) -> PyResult<f64> {
    let (p, l) = with_labels(probs, labels)?;
    bnn_metrics::accuracy(&p, l.slice()?).map_err(input_error)
}

/// Predictive entropy of every row (nats), `float64` `(n,)`.
#[pyfunction]
pub fn entropy<'py>(
    py: Python<'py>,
    probs: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    let p = probabilities(probs)?;
    let h = bnn_metrics::predictive_entropy(&p);
    let n = h.len();
    output(py, h, &[n])
}

/// Mutual information between prediction and weights per example (nats), from Monte Carlo
/// samples of probabilities, `float32` `(samples, n, classes)`.
#[pyfunction]
pub fn mutual_information<'py>(
    py: Python<'py>,
    samples: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    let s = Input::<f32>::new(samples, "samples", Some(3))?;
    let (ns, n, c) = (s.shape()[0], s.shape()[1], s.shape()[2]);
    let all = s.slice()?;
    let per: Vec<Probabilities> = (0..ns)
        .map(|i| Probabilities::new(all[i * n * c..(i + 1) * n * c].to_vec(), n, c))
        .collect::<Result<_, _>>()
        .map_err(input_error)?;
    let mi = py
        .detach(|| bnn_metrics::mutual_information(&per))
        .map_err(input_error)?;
    output(py, mi, &[n])
}

/// Area under the ROC curve with the in-distribution scores as the positive class
/// (scikit-learn's `roc_auc_score`).
#[pyfunction]
pub fn auroc(in_scores: &Bound<'_, PyAny>, out_scores: &Bound<'_, PyAny>) -> PyResult<f64> {
    let (a, b) = (
        scores(in_scores, "in_scores")?,
        scores(out_scores, "out_scores")?,
    );
    bnn_metrics::auroc(a.slice()?, b.slice()?).map_err(input_error)
}

/// Average precision with the in-distribution scores as the positive class (AUPR-in,
/// scikit-learn's `average_precision_score`).
#[pyfunction]
pub fn aupr(in_scores: &Bound<'_, PyAny>, out_scores: &Bound<'_, PyAny>) -> PyResult<f64> {
    let (a, b) = (
        scores(in_scores, "in_scores")?,
        scores(out_scores, "out_scores")?,
    );
    bnn_metrics::average_precision(a.slice()?, b.slice()?).map_err(input_error)
}

/// False positive rate at the first threshold whose true positive rate is at least `level`
/// (FPR@95 by default).
#[pyfunction]
#[pyo3(signature = (in_scores, out_scores, level = 0.95))]
pub fn fpr_at_tpr(
    in_scores: &Bound<'_, PyAny>,
    out_scores: &Bound<'_, PyAny>,
    level: f64,
) -> PyResult<f64> {
    let (a, b) = (
        scores(in_scores, "in_scores")?,
        scores(out_scores, "out_scores")?,
    );
    bnn_metrics::fpr_at_tpr(a.slice()?, b.slice()?, level).map_err(input_error)
}

/// The Monte Carlo mixture of `means` and `stds` (`float32` `(samples, n, targets)`, or
/// `(n, targets)` for one Gaussian per output) with its `targets` (`(n, targets)`, or `(n,)`
/// for one target), each shape checked against the others.
fn regression_predictive<'py>(
    means: &Bound<'py, PyAny>,
    stds: &Bound<'py, PyAny>,
    targets: &Bound<'py, PyAny>,
) -> PyResult<(bnn_metrics::RegressionPredictive, Input<'py, f32>)> {
    let m = Input::<f32>::new(means, "means", None)?;
    let s = Input::<f32>::new(stds, "stds", None)?;
    let y = Input::<f32>::new(targets, "targets", None)?;
    let (samples, n, t) = match *m.shape() {
        [n, t] => (1, n, t),
        [samples, n, t] => (samples, n, t),
        ref other => {
            return Err(value_error(format!(
                "means has shape {other:?}: (samples, n, targets) or (n, targets)"
            )));
        }
    };
    if m.shape() != s.shape() {
        return Err(value_error(format!(
            "means has shape {:?} and stds {:?}: one std per mean",
            m.shape(),
            s.shape()
        )));
    }
    if !(y.shape() == [n, t] || (t == 1 && y.shape() == [n])) {
        return Err(value_error(format!(
            "targets has shape {:?}; the predictive is of {n} rows and {t} targets",
            y.shape()
        )));
    }
    let mut mc = bnn_metrics::McRegression::new(n, t).map_err(input_error)?;
    let (ms, ss) = (m.slice()?, s.slice()?);
    for k in 0..samples {
        let cells = k * n * t..(k + 1) * n * t;
        mc.push(&ms[cells.clone()], &ss[cells])
            .map_err(input_error)?;
    }
    Ok((mc.finish().map_err(input_error)?, y))
}

/// The regression metrics of a Monte Carlo predictive (`bnn_metrics::RegressionSummary`) as
/// JSON text ([`regression_predictive`]'s arrays), with the coverage and width of conformal
/// intervals `mean ± qhat_t std` when `conformal_qhat` (one threshold per target, from
/// [`conformal_intervals`]) is given.
#[pyfunction]
#[pyo3(signature = (means, stds, targets, conformal_qhat = None, level = 0.9))]
pub fn regression_json(
    means: &Bound<'_, PyAny>,
    stds: &Bound<'_, PyAny>,
    targets: &Bound<'_, PyAny>,
    conformal_qhat: Option<Vec<f64>>,
    level: f64,
) -> PyResult<String> {
    let (pred, y) = regression_predictive(means, stds, targets)?;
    let summary =
        bnn_metrics::RegressionSummary::compute(&pred, y.slice()?).map_err(input_error)?;
    let mut v = serde_json::to_value(&summary).map_err(|e| value_error(e.to_string()))?;
    if let Some(qhat) = conformal_qhat {
        let cal = bnn_metrics::NormalizedIntervalCalibration { level, qhat, n: 0 };
        let c = cal.evaluate(&pred, y.slice()?).map_err(input_error)?;
        v["conformal"] = serde_json::to_value(c).map_err(|e| value_error(e.to_string()))?;
    }
    Ok(v.to_string())
}

/// Fits split-conformal normalised intervals at `level` on calibration data (the arrays of
/// [`regression_predictive`]): one threshold per target on `|y - mean| / std` of the mixture.
#[pyfunction]
#[pyo3(signature = (means, stds, targets, level = 0.9))]
pub fn conformal_intervals(
    means: &Bound<'_, PyAny>,
    stds: &Bound<'_, PyAny>,
    targets: &Bound<'_, PyAny>,
    level: f64,
) -> PyResult<Vec<f64>> {
    let (pred, y) = regression_predictive(means, stds, targets)?;
    let cal = bnn_metrics::NormalizedIntervalCalibration::fit(&pred, y.slice()?, level)
        .map_err(input_error)?;
    Ok(cal.qhat)
}
