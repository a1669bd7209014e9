//! Monte-Carlo prediction of a regression network: per pass, every example's Gaussian
//! `N(mean, std^2)` ([`bnn_models::Head`]); over `S` passes, their equally weighted mixture
//! ([`bnn_metrics::RegressionPredictive`]: the predictive mean, and its variance split into the
//! aleatoric part, the mean of the `std^2`, and the epistemic part, the variance of the means).
//!
//! The network predicts standardised targets; with a [`TargetScale`] every component is
//! brought back to the user's units, `mean' = offset + scale * mean` and `std' = scale * std`,
//! so that the metrics, the intervals and the conformal calibration are in those units.

use bnn_data::DataLoader;
use bnn_layers::{count_params, set_sampling};
use bnn_metrics::{McRegression, RegressionPredictive};
use bnn_models::{Classifier, ClassifierBody};
use burn::module::Module;
use burn::prelude::*;
use burn::tensor::TensorData;

use crate::TrainError;
use crate::batch::{to_tensors, to_vec};
use crate::likelihood::check_targets;

/// The map from a network's standardised targets to the user's units, per target: `y =
/// mean + std * z` (the training split's target mean and standard deviation).
#[derive(Debug, Clone, Copy)]
pub struct TargetScale<'a> {
    /// Added to every predictive mean.
    pub mean: &'a [f64],
    /// Multiplies every predictive mean and standard deviation (positive).
    pub std: &'a [f64],
}

/// A regression network's predictive on a data set, in data-set order.
#[derive(Debug, Clone)]
pub struct RegressionPredictions {
    /// The mixture predictive, `[n, targets]`.
    pub predictive: RegressionPredictive,
    /// The data set's targets, `[n, targets]` row-major, as the data set holds them.
    pub targets: Vec<f32>,
}

/// Runs `samples` stochastic passes (one mean pass if `samples <= 1` or the model has no
/// Bayesian weights) of the regression network `model` over the loader's data set in index
/// order and gathers the mixture predictive, rescaled by `scale` when given. The loader must
/// not drop its last batch; `model` may live on an autodiff device (it runs `model.valid()`).
pub fn predict_regression<B: ClassifierBody>(
    model: &Classifier<B>,
    loader: &DataLoader,
    samples: usize,
    scale: Option<TargetScale<'_>>,
) -> Result<RegressionPredictions, TrainError> {
    let head = model.head();
    check_targets(head, loader.dataset().target_dim())?;
    let (n, t) = (loader.dataset().len(), head.targets());
    if n == 0 {
        return Err(TrainError::Config("empty evaluation set".into()));
    }
    check_scale(scale, t)?;
    let mut targets = vec![0f32; n * t];
    let mut first = true;
    let predictive = passes(model, n, t, samples, scale, |net, device, means, stds| {
        for batch in loader.epoch(0) {
            let batch = batch?;
            let (x, _) = to_tensors(&batch, device);
            let (m, s) = mean_std_host(net, x)?;
            for (row, &i) in batch.indices.iter().enumerate() {
                means[i * t..(i + 1) * t].copy_from_slice(&m[row * t..(row + 1) * t]);
                stds[i * t..(i + 1) * t].copy_from_slice(&s[row * t..(row + 1) * t]);
                if first {
                    targets[i * t..(i + 1) * t]
                        .copy_from_slice(&batch.targets[row * t..(row + 1) * t]);
                }
            }
        }
        first = false;
        Ok(())
    })?;
    Ok(RegressionPredictions {
        predictive,
        targets,
    })
}

/// Rows per forward pass of [`predict_regression_arrays`].
pub const REGRESSION_ARRAY_BATCH: usize = 1024;

/// [`predict_regression`] on rows held in memory: `features` row-major `[n, d]`, already
/// standardised as the model's inputs are, in batches of [`REGRESSION_ARRAY_BATCH`]. `seed`,
/// when given, seeds the device first. `d` must be the model's input width, which the caller
/// checks against its configuration.
pub fn predict_regression_arrays<B: ClassifierBody>(
    model: &Classifier<B>,
    features: &[f32],
    shape: [usize; 2],
    samples: usize,
    seed: Option<u64>,
    scale: Option<TargetScale<'_>>,
    device: &Device,
) -> Result<RegressionPredictive, TrainError> {
    let [n, d] = shape;
    if n == 0 || d == 0 {
        return Err(TrainError::Config(
            "features: every dimension of [n, d] must be at least 1".into(),
        ));
    }
    if Some(features.len()) != n.checked_mul(d) {
        return Err(TrainError::Config(format!(
            "features: {} values do not describe [{n}, {d}]",
            features.len()
        )));
    }
    let t = model.head().targets();
    if t == 0 {
        return Err(TrainError::Config(
            "a classifier predicts class probabilities, not a mean and a standard deviation".into(),
        ));
    }
    check_scale(scale, t)?;
    if let Some(s) = seed {
        device.seed(s);
    }
    passes(model, n, t, samples, scale, |net, _, means, stds| {
        for start in (0..n).step_by(REGRESSION_ARRAY_BATCH) {
            let rows = REGRESSION_ARRAY_BATCH.min(n - start);
            let data = features[start * d..(start + rows) * d].to_vec();
            let x = Tensor::<4>::from_data(TensorData::new(data, [rows, 1, 1, d]), device);
            let (m, s) = mean_std_host(net, x)?;
            means[start * t..(start + rows) * t].copy_from_slice(&m);
            stds[start * t..(start + rows) * t].copy_from_slice(&s);
        }
        Ok(())
    })
}

/// A scale of one mean and one positive, finite std per target.
fn check_scale(scale: Option<TargetScale<'_>>, targets: usize) -> Result<(), TrainError> {
    let Some(s) = scale else { return Ok(()) };
    if s.mean.len() != targets || s.std.len() != targets {
        return Err(TrainError::Config(format!(
            "a target scale of {} means and {} stds for {targets} targets",
            s.mean.len(),
            s.std.len()
        )));
    }
    if s.mean.iter().any(|m| !m.is_finite()) || s.std.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return Err(TrainError::Config(
            "a target scale needs finite means and finite, positive stds".into(),
        ));
    }
    Ok(())
}

/// The network's mean and std on `x`, read back.
fn mean_std_host<B: ClassifierBody>(
    net: &Classifier<B>,
    x: Tensor<4>,
) -> Result<(Vec<f32>, Vec<f32>), TrainError> {
    let (m, s) = net
        .mean_std(net.forward(x))
        .map_err(|e| TrainError::Config(e.to_string()))?;
    Ok((to_vec(m), to_vec(s)))
}

/// The mixture of the passes: `fill(net, device, means, stds)` writes one pass's `[n, t]`
/// means and stds in data-set order.
fn passes<B: ClassifierBody>(
    model: &Classifier<B>,
    n: usize,
    t: usize,
    samples: usize,
    scale: Option<TargetScale<'_>>,
    mut fill: impl FnMut(&Classifier<B>, &Device, &mut [f32], &mut [f32]) -> Result<(), TrainError>,
) -> Result<RegressionPredictive, TrainError> {
    let valid = model.valid();
    let counts = count_params(&valid);
    let stochastic = samples > 1 && counts.bayes_weights + counts.shared_weights > 0;
    let net = set_sampling(valid, stochastic);
    let device = net.devices().first().cloned().unwrap_or_default();
    let mut mc = McRegression::new(n, t)?;
    let (mut means, mut stds) = (vec![0f32; n * t], vec![0f32; n * t]);
    for _ in 0..if stochastic { samples } else { 1 } {
        fill(&net, &device, &mut means, &mut stds)?;
        if let Some(s) = scale {
            for (k, (m, sd)) in means.iter_mut().zip(stds.iter_mut()).enumerate() {
                let j = k % t;
                *m = (s.mean[j] + s.std[j] * f64::from(*m)) as f32;
                *sd = (s.std[j] * f64::from(*sd)) as f32;
            }
        }
        mc.push(&means, &stds)?;
    }
    Ok(mc.finish()?)
}
