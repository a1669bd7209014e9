//! The logical content of a `.swb` file, independent of how it is encoded.

use bnn_metrics::ConformalCalibration;
use serde::{Deserialize, Serialize};

use crate::fate::{OutlierCause, WeightFate};

use crate::plan::{ALPHA_SUM_TOL, MAX_BLEND};

/// One shareable Bayesian weight tensor: its path in the model and its shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerShape {
    /// Parameter path, e.g. `"layer1.0.conv1.weight"`.
    pub path: String,
    /// Tensor shape; its weights are stored row-major.
    pub shape: Vec<usize>,
}

/// The distribution of one ellipse weight: an alpha-blend of several codebook entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EllipseEntry {
    /// Codebook indices, 1 to [`MAX_BLEND`] of them, each `< K`.
    pub components: Vec<u32>,
    /// Blend weight of each component (same length as `components`).
    pub alphas: Vec<f32>,
}

/// A parameter tensor that is not weight-shared (biases, norm parameters, ...), stored as is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedTensor {
    /// Parameter path; Bayesian biases are stored as two tensors `path.mu` and `path.rho`.
    pub path: String,
    /// Tensor shape; `data.len()` is the product of its entries.
    pub shape: Vec<usize>,
    /// Values, row-major.
    pub data: Vec<f32>,
}

/// A weight-shared Bayesian model: everything a `.swb` file stores.
///
/// Invariants (checked by [`validate`](Self::validate) on save and after load): a
/// `temperature`, if any, is finite and within [`bnn_metrics::TEMPERATURE_RANGE`];
/// `codebook_mu` and `codebook_rho` have the same length `K` and finite values; the layer
/// shapes hold `fates.len()` weights in total; `Shared(k)` has `k < K`; the `j`-th `Ellipse`
/// fate in weight order is `Ellipse(j)` and `ellipses` has one entry per ellipse fate, each
/// with 1 to [`MAX_BLEND`] distinct components `< K` and as many finite, non-negative alphas
/// summing to 1 within [`ALPHA_SUM_TOL`]; the three outlier vectors have one entry per
/// `Outlier` fate, in weight order, the values finite, and `outlier_causes[i]` equals the
/// cause carried by the `i`-th outlier fate; no two unshared tensors share a path, and each
/// holds as many values as its shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedModelData {
    /// Architecture config as JSON text; opaque to the file format.
    pub arch: String,
    /// Means `mu_k` of the K shared Gaussians.
    pub codebook_mu: Vec<f32>,
    /// Trainable `rho_k` of the K shared Gaussians (`sigma = softplus(rho)`).
    pub codebook_rho: Vec<f32>,
    /// The shareable Bayesian weight tensors, in the stable weight order.
    pub layers: Vec<LayerShape>,
    /// One fate per shareable weight (layer order, row-major).
    pub fates: Vec<WeightFate>,
    /// Blend of each ellipse weight, in the order of the `Ellipse` fates.
    pub ellipses: Vec<EllipseEntry>,
    /// Own mean of each outlier weight, in the order of the `Outlier` fates.
    pub outlier_mu: Vec<f32>,
    /// Own `rho` of each outlier weight, in the order of the `Outlier` fates.
    pub outlier_rho: Vec<f32>,
    /// Why each outlier weight is an outlier, in the order of the `Outlier` fates.
    pub outlier_causes: Vec<OutlierCause>,
    /// All parameters that are not shareable weights.
    pub unshared: Vec<NamedTensor>,
    /// The temperature fitted by post-hoc calibration (each Monte-Carlo sample's logits are
    /// divided by it before the softmax), `None` when none was fitted: the model's own
    /// predictive, as `T = 1`. Files before format version 3 hold none.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// The split-conformal calibration fitted on held-out data (`swbnn calibrate
    /// --conformal`), `None` when none was fitted.
    #[serde(default)]
    pub conformal: Option<ConformalCalibration>,
}

/// A plain (not shared) Bayesian model: every weight keeps its own `(mu, rho)`.
///
/// Only used as the size baseline for `.swb` files, see [`save_full_bnn`](super::save_full_bnn).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FullBnnData {
    /// Architecture config as JSON text.
    pub arch: String,
    /// The Bayesian weight tensors, in the stable weight order.
    pub layers: Vec<LayerShape>,
    /// Mean of every weight (layer order, row-major).
    pub mu: Vec<f32>,
    /// `rho` of every weight (layer order, row-major).
    pub rho: Vec<f32>,
    /// All other parameters.
    pub unshared: Vec<NamedTensor>,
    /// The fitted calibration temperature, as [`SharedModelData::temperature`].
    #[serde(default)]
    pub temperature: Option<f64>,
    /// The conformal calibration, as [`SharedModelData::conformal`].
    #[serde(default)]
    pub conformal: Option<ConformalCalibration>,
}

/// Total weight count of `layers`, or a description of the first shape that overflows `usize`.
pub(crate) fn total_weights(layers: &[LayerShape]) -> Result<usize, String> {
    layers.iter().try_fold(0usize, |acc, l| {
        shape_len(&l.shape)
            .and_then(|n| acc.checked_add(n))
            .ok_or_else(|| format!("weight count overflows at layer {:?}", l.path))
    })
}

/// Number of elements of a shape, `None` on overflow.
pub(crate) fn shape_len(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// The first non-finite value of `values`, as an error naming `what`.
fn check_finite(what: &str, values: &[f32]) -> Result<(), String> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(format!("{what}[{i}] is {}", values[i])),
        None => Ok(()),
    }
}

/// Checks a stored conformal calibration ([`ConformalCalibration::validate`]).
pub(crate) fn validate_conformal(conformal: Option<&ConformalCalibration>) -> Result<(), String> {
    conformal.map_or(Ok(()), |c| {
        c.validate()
            .map_err(|e| format!("conformal calibration: {e}"))
    })
}

/// Checks a stored calibration temperature ([`bnn_metrics::validate_temperature`]: finite and
/// within the range a fit returns).
pub(crate) fn validate_temperature(temperature: Option<f64>) -> Result<(), String> {
    match temperature {
        Some(t) => bnn_metrics::validate_temperature(t)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        None => Ok(()),
    }
}

/// Checks that every unshared tensor's data matches its shape and that no path repeats.
pub(crate) fn validate_unshared(unshared: &[NamedTensor]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for t in unshared {
        if !seen.insert(t.path.as_str()) {
            return Err(format!("unshared tensor {:?} is stored twice", t.path));
        }
        if shape_len(&t.shape) != Some(t.data.len()) {
            return Err(format!(
                "unshared tensor {:?} has shape {:?} but {} values",
                t.path,
                t.shape,
                t.data.len()
            ));
        }
    }
    Ok(())
}

impl SharedModelData {
    /// Number of codebook entries `K`.
    pub fn codebook_len(&self) -> usize {
        self.codebook_mu.len()
    }

    /// Checks the invariants listed on the type; the message names the first violation.
    pub fn validate(&self) -> Result<(), String> {
        let k = self.codebook_mu.len();
        if self.codebook_rho.len() != k {
            return Err(format!(
                "codebook has {k} means but {} rhos",
                self.codebook_rho.len()
            ));
        }
        check_finite("codebook_mu", &self.codebook_mu)?;
        check_finite("codebook_rho", &self.codebook_rho)?;
        let n = total_weights(&self.layers)?;
        if n != self.fates.len() {
            return Err(format!(
                "layer shapes hold {n} weights but there are {} fates",
                self.fates.len()
            ));
        }
        let (mut n_ellipse, mut n_outlier) = (0usize, 0usize);
        for (i, fate) in self.fates.iter().enumerate() {
            match *fate {
                WeightFate::Shared(c) if c as usize >= k => {
                    return Err(format!("weight {i} shares component {c} but K = {k}"));
                }
                WeightFate::Shared(_) => {}
                WeightFate::Ellipse(j) => {
                    if j as usize != n_ellipse {
                        return Err(format!(
                            "weight {i} is Ellipse({j}) but is ellipse number {n_ellipse} \
                             (ellipses must be numbered in weight order)"
                        ));
                    }
                    n_ellipse += 1;
                }
                WeightFate::Outlier(cause) => {
                    if self.outlier_causes.get(n_outlier) != Some(&cause) {
                        return Err(format!(
                            "weight {i} is outlier number {n_outlier} with cause {cause:?} but \
                             outlier_causes[{n_outlier}] is {:?}",
                            self.outlier_causes.get(n_outlier)
                        ));
                    }
                    n_outlier += 1;
                }
            }
        }
        if self.ellipses.len() != n_ellipse {
            return Err(format!(
                "{n_ellipse} ellipse fates but {} ellipse entries",
                self.ellipses.len()
            ));
        }
        for (j, e) in self.ellipses.iter().enumerate() {
            if e.components.is_empty() || e.components.len() > MAX_BLEND {
                return Err(format!(
                    "ellipse {j} has {} components (allowed 1..={MAX_BLEND})",
                    e.components.len()
                ));
            }
            if e.alphas.len() != e.components.len() {
                return Err(format!(
                    "ellipse {j} has {} components but {} alphas",
                    e.components.len(),
                    e.alphas.len()
                ));
            }
            if let Some(&c) = e.components.iter().find(|&&c| c as usize >= k) {
                return Err(format!("ellipse {j} uses component {c} but K = {k}"));
            }
            for (a, &c) in e.components.iter().enumerate() {
                if e.components[a + 1..].contains(&c) {
                    return Err(format!("ellipse {j} uses component {c} twice"));
                }
            }
            if let Some(a) = e.alphas.iter().find(|a| !a.is_finite() || **a < 0.0) {
                return Err(format!(
                    "ellipse {j} has alpha {a} (alphas are finite and >= 0)"
                ));
            }
            let sum: f32 = e.alphas.iter().sum();
            if (sum - 1.0).abs() > ALPHA_SUM_TOL {
                return Err(format!(
                    "ellipse {j} has alphas summing to {sum}, not 1 within {ALPHA_SUM_TOL}"
                ));
            }
        }
        check_finite("outlier_mu", &self.outlier_mu)?;
        check_finite("outlier_rho", &self.outlier_rho)?;
        for (name, len) in [
            ("outlier_mu", self.outlier_mu.len()),
            ("outlier_rho", self.outlier_rho.len()),
            ("outlier_causes", self.outlier_causes.len()),
        ] {
            if len != n_outlier {
                return Err(format!(
                    "{n_outlier} outlier fates but {name} has {len} entries"
                ));
            }
        }
        validate_unshared(&self.unshared)?;
        validate_temperature(self.temperature)?;
        validate_conformal(self.conformal.as_ref())
    }
}

impl FullBnnData {
    /// Checks that `mu` and `rho` hold one value per weight of `layers` and that every unshared
    /// tensor matches its shape.
    pub fn validate(&self) -> Result<(), String> {
        validate_full(&self.layers, &self.mu, &self.rho, &self.unshared)?;
        validate_temperature(self.temperature)?;
        validate_conformal(self.conformal.as_ref())
    }
}

/// [`FullBnnData::validate`] over borrowed parts.
pub(crate) fn validate_full(
    layers: &[LayerShape],
    mu: &[f32],
    rho: &[f32],
    unshared: &[NamedTensor],
) -> Result<(), String> {
    let n = total_weights(layers)?;
    if mu.len() != n || rho.len() != n {
        return Err(format!(
            "layer shapes hold {n} weights but mu has {} and rho {} values",
            mu.len(),
            rho.len()
        ));
    }
    validate_unshared(unshared)
}
