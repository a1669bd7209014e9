//! The data term of the training loss, by the model's head: the cross-entropy of a
//! classifier's logits, or the Gaussian negative log-likelihood of a regression network's
//! mean and standard deviation.
//!
//! The Gaussian NLL of one example is that of its `T` targets together,
//! `sum_t [ln sigma_t + (y_t - mu_t)^2 / (2 sigma_t^2)] + (T / 2) ln(2 pi)` (the density of
//! `N(mu, diag(sigma^2))`), so that it is a negative log-likelihood as the cross-entropy is,
//! in the same units of nats per example; the batch's term is its mean over examples.

use bnn_data::Batch;
use bnn_models::{Classifier, ClassifierBody, Head};
use burn::prelude::*;
use burn::tensor::TensorData;

use crate::TrainError;
use crate::batch::{cross_entropy, to_tensors};

/// `ln(2 pi) / 2`.
const HALF_LN_TWO_PI: f64 = 0.918_938_533_204_672_8;

/// A batch's data term and what it tells of the fit.
pub struct DataTerm {
    /// The mean NLL per example (`[1]`, in the autodiff graph when the model is).
    pub nll: Tensor<1>,
    /// Correct arg-max predictions (classification; 0 for regression).
    pub correct: usize,
    /// Sum of the squared errors of the predictive means over examples and targets
    /// (regression, standardised units; 0 for classification).
    pub squared_error: f64,
}

/// Uploads a regression batch's targets, `[B, T]`.
pub fn targets_tensor(batch: &Batch, device: &Device) -> Tensor<2> {
    Tensor::from_data(
        TensorData::new(batch.targets.clone(), [batch.len(), batch.target_dim]),
        device,
    )
}

/// `ln N(y; mean, std^2)` of every cell, `[B, T]`.
pub fn gaussian_log_pdf(mean: Tensor<2>, std: Tensor<2>, targets: Tensor<2>) -> Tensor<2> {
    let z = (targets - mean) / std.clone();
    (std.log() + z.powf_scalar(2.0).mul_scalar(0.5))
        .add_scalar(HALF_LN_TWO_PI)
        .neg()
}

/// The mean Gaussian NLL per example (module docs) of `targets` under `N(mean, std^2)`,
/// all `[B, T]`.
pub fn gaussian_nll(mean: Tensor<2>, std: Tensor<2>, targets: Tensor<2>) -> Tensor<1> {
    let [b, _] = mean.dims();
    gaussian_log_pdf(mean, std, targets)
        .sum()
        .neg()
        .div_scalar(b.max(1) as f64)
}

/// Checks that batches of `target_dim` targets per example (0: class labels) fit a model
/// with `head`: the error says which side has what.
pub fn check_targets(head: Head, target_dim: usize) -> Result<(), TrainError> {
    match (head, target_dim) {
        (Head::Categorical, 0) => Ok(()),
        (Head::Categorical, t) => Err(TrainError::Config(format!(
            "a classifier is trained on labelled images; this data set has {t} regression \
             target(s) per example"
        ))),
        (Head::Gaussian { targets, .. }, 0) => Err(TrainError::Config(format!(
            "a regression network of {targets} target(s) is trained on rows with targets; this \
             data set holds labelled images"
        ))),
        (Head::Gaussian { targets, .. }, t) if t != targets => Err(TrainError::Config(format!(
            "a regression network of {targets} target(s) and a data set of {t} per example"
        ))),
        _ => Ok(()),
    }
}

/// The data term of `model` on `batch` (a non-empty batch whose targets fit the model's head,
/// [`check_targets`]), with weights drawn as the model is set to draw them.
pub fn data_term<B: ClassifierBody>(
    model: &Classifier<B>,
    batch: &Batch,
    device: &Device,
) -> Result<DataTerm, TrainError> {
    check_targets(model.head(), batch.target_dim)?;
    let (x, y) = to_tensors(batch, device);
    let outputs = model.forward(x);
    if batch.is_regression() {
        let (mean, std) = model
            .mean_std(outputs)
            .map_err(|e| TrainError::Config(e.to_string()))?;
        let targets = targets_tensor(batch, device);
        let squared_error = (targets.clone() - mean.clone().detach())
            .powf_scalar(2.0)
            .sum()
            .into_scalar::<f32>() as f64;
        Ok(DataTerm {
            nll: gaussian_nll(mean, std, targets),
            correct: 0,
            squared_error,
        })
    } else {
        let predicted = outputs.clone().argmax(1).reshape([batch.len()]);
        let correct = predicted.equal(y.clone()).int().sum().into_scalar::<i64>() as usize;
        Ok(DataTerm {
            nll: cross_entropy(outputs, y),
            correct,
            squared_error: 0.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the closed form, computed by hand: `y = 1, mu = 0, sigma = 2` gives
    /// `ln 2 + 1/8 + ln(2 pi)/2 = 1.7370857`; `y = 0, mu = 0, sigma = 1` gives
    /// `ln(2 pi)/2 = 0.9189385`. One example of both targets: their sum; two examples of one
    /// target each: their mean.
    #[test]
    fn gaussian_nll_against_the_closed_form() {
        let device = bnn_layers::test_device();
        let t = |v: [[f32; 2]; 1]| Tensor::<2>::from_floats(v, &device);
        let nll = gaussian_nll(t([[0.0, 0.0]]), t([[2.0, 1.0]]), t([[1.0, 0.0]]));
        let got = nll.into_scalar::<f32>() as f64;
        assert!((got - (1.737_085_7 + 0.918_938_5)).abs() < 1e-5, "{got}");
        let c = |v: [[f32; 1]; 2]| Tensor::<2>::from_floats(v, &device);
        let nll = gaussian_nll(c([[0.0], [0.0]]), c([[2.0], [1.0]]), c([[1.0], [0.0]]));
        let got = nll.into_scalar::<f32>() as f64;
        assert!(
            (got - (1.737_085_7 + 0.918_938_5) / 2.0).abs() < 1e-5,
            "{got}"
        );
    }

    #[test]
    fn targets_that_do_not_fit_the_head_are_named() {
        assert!(check_targets(Head::Categorical, 0).is_ok());
        assert!(check_targets(Head::gaussian(2), 2).is_ok());
        for (head, t, want) in [
            (Head::Categorical, 3, "3 regression target"),
            (Head::gaussian(2), 0, "labelled images"),
            (Head::gaussian(2), 3, "2 target(s) and a data set of 3"),
        ] {
            let e = check_targets(head, t).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
