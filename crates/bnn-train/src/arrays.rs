//! Monte Carlo prediction on images held in memory as `f32` arrays (`[n, C, H, W]`, already
//! normalised), for callers without a data set or loader: the Python package's
//! `Model.predict`, `evaluate` and `fit_temperature`. Batches of [`ARRAY_BATCH`] images, as
//! `swbnn eval` batches, so that a seed gives the same weight samples and predictions.

use bnn_layers::{count_params, set_sampling};
use bnn_metrics::{McPredictive, MetricsError, Predictive, Probabilities};
use bnn_models::Network;
use burn::module::Module;
use burn::prelude::*;
use burn::tensor::TensorData;

use crate::to_vec;

/// Images per forward pass: `swbnn eval`'s batch size.
pub const ARRAY_BATCH: usize = 256;

/// Monte Carlo predictions of `net` on `[n, C, H, W]` images: `samples` stochastic passes
/// (one mean pass for a deterministic model or `samples == 1`) in batches of
/// [`ARRAY_BATCH`], probabilities averaged as `bnn_train::predict` does. `seed`, when given,
/// seeds the device first. Also returns each pass's probabilities when `keep` is set.
/// `temperature`, when given, divides each pass's logits before its softmax
/// (`bnn_train::predict_tempered`); `None` leaves them as they are. A shape with a zero or
/// one that does not describe `images` is an error; `C, H, W` must be the model's input
/// (`ModelConfig::in_channels`, `image_size`), which the caller checks against its config.
#[allow(clippy::too_many_arguments)]
pub fn predict_arrays(
    net: &Network,
    images: &[f32],
    shape: [usize; 4],
    samples: usize,
    seed: Option<u64>,
    keep: bool,
    temperature: Option<f64>,
    device: &Device,
) -> Result<(Predictive, Vec<Probabilities>), MetricsError> {
    let mut acc: Option<McPredictive> = None;
    let mut kept = Vec::new();
    let n = shape[0];
    for_each_pass(
        net,
        images,
        shape,
        samples,
        seed,
        device,
        |mut logits, classes| {
            if let Some(t) = temperature {
                let inv = 1.0 / t;
                logits
                    .iter_mut()
                    .for_each(|z| *z = (f64::from(*z) * inv) as f32);
            }
            let mc = match acc.as_mut() {
                Some(mc) => mc,
                None => acc.insert(McPredictive::new(n, classes)?),
            };
            if keep {
                kept.push(Probabilities::from_logits(logits.clone(), n, classes)?);
            }
            mc.push_logits(&logits)
        },
    )?;
    let pred = acc
        .ok_or(MetricsError::Empty { what: "images" })?
        .finish()?;
    Ok((pred, kept))
}

/// Every pass's logits of `net` on `[n, C, H, W]` images, `[passes, n, classes]` (passes as in
/// [`predict_arrays`]), and the number of classes.
pub fn logits_of_arrays(
    net: &Network,
    images: &[f32],
    shape: [usize; 4],
    samples: usize,
    seed: Option<u64>,
    device: &Device,
) -> Result<(Vec<f32>, usize, usize), MetricsError> {
    let (mut all, mut passes, mut classes) = (Vec::new(), 0, 0);
    for_each_pass(net, images, shape, samples, seed, device, |logits, c| {
        all.extend_from_slice(&logits);
        passes += 1;
        classes = c;
        Ok(())
    })?;
    Ok((all, passes, classes))
}

/// Runs the passes of [`predict_arrays`] and hands each pass's `[n, classes]` logits to `f`.
fn for_each_pass(
    net: &Network,
    images: &[f32],
    shape: [usize; 4],
    samples: usize,
    seed: Option<u64>,
    device: &Device,
    mut f: impl FnMut(Vec<f32>, usize) -> Result<(), MetricsError>,
) -> Result<(), MetricsError> {
    let valid = net.valid();
    let counts = count_params(&valid);
    let stochastic = samples > 1 && counts.bayes_weights + counts.shared_weights > 0;
    let valid = set_sampling(valid, stochastic);
    let passes = if stochastic { samples } else { 1 };
    if let Some(s) = seed {
        device.seed(s);
    }
    let [n, c, h, w] = shape;
    let per_image = c.saturating_mul(h).saturating_mul(w);
    if n == 0 || per_image == 0 {
        return Err(MetricsError::Empty {
            what: "images (every dimension of [n, C, H, W] must be at least 1)",
        });
    }
    if images.len() != n.saturating_mul(per_image) {
        return Err(MetricsError::LengthMismatch {
            what: "images: values for [n, C, H, W]",
            expected: n.saturating_mul(per_image),
            got: images.len(),
        });
    }
    for _ in 0..passes {
        let mut logits_all = Vec::new();
        let mut classes = 0;
        for chunk in images.chunks(ARRAY_BATCH * per_image) {
            let b = chunk.len() / per_image;
            let x = Tensor::<4>::from_data(TensorData::new(chunk.to_vec(), [b, c, h, w]), device);
            let logits = valid.forward(x);
            classes = logits.dims()[1];
            logits_all.extend(to_vec(logits));
        }
        f(logits_all, classes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_models::{Arch, Kind, ModelConfig};

    /// One sample, or a deterministic network, is one mean pass; `keep` returns each pass's
    /// probabilities. The seeded repeat is `tests/arrays.rs`.
    #[test]
    fn one_sample_or_a_deterministic_net_is_one_mean_pass() {
        // Initialising a network draws from the device's random stream, which the tests that
        // repeat a seeded run share.
        let _rng = bnn_layers::lock_device_rng();
        let device = bnn_layers::test_device();
        let shape = [5, 1, 4, 4];
        let images: Vec<f32> = (0..5 * 16).map(|i| (i % 7) as f32 / 7.0).collect();
        for (kind, samples) in [(Kind::Bayesian, 1), (Kind::Deterministic, 4)] {
            let net = ModelConfig::for_input(Arch::Mlp, kind, 3, 1, 4)
                .init(&device)
                .unwrap();
            let (pred, kept) =
                predict_arrays(&net, &images, shape, samples, None, true, None, &device).unwrap();
            assert_eq!((kept.len(), pred.probabilities().n()), (1, 5));
            let (logits, passes, classes) =
                logits_of_arrays(&net, &images, shape, samples, None, &device).unwrap();
            assert_eq!((passes, classes, logits.len()), (1, 3, 5 * 3));
        }
        // A shape that does not describe the buffer is an error, not a panic or a short read.
        let net = ModelConfig::for_input(Arch::Mlp, Kind::Deterministic, 3, 1, 4)
            .init(&device)
            .unwrap();
        for bad in [[5, 0, 4, 4], [0, 1, 4, 4], [6, 1, 4, 4]] {
            let e = logits_of_arrays(&net, &images, bad, 1, None, &device).unwrap_err();
            assert!(e.to_string().contains("images"), "{bad:?}: {e}");
        }
    }
}
