//! A model on corrupted test sets ([`evaluate_corruptions`]) and its posterior's statistics
//! ([`weight_stats`]), as `swbnn eval` and a reproduction's corruption table report them.

use std::path::Path;
use std::sync::Arc;

use bnn_data::{Corrupted, Corruption, Dataset, NormStats};
use bnn_layers::export_posterior;
use bnn_metrics::WeightStats;
use bnn_models::Network;
use bnn_train::evaluate_tempered;
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::data::eval_loader;
use crate::predictions::save_predictions_npy;

/// A model's metrics on a corrupted test set at its fitted temperature.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CalibratedShift {
    /// The temperature, fitted on the (clean) validation split.
    pub temperature: f64,
    /// Mean negative log-likelihood.
    pub nll: f64,
    /// ECE, 15 bins.
    pub ece: f64,
    /// Mean confidence.
    pub mean_confidence: f64,
}

/// One method on one corrupted test set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorruptionRow {
    /// The method's name (method name (`deterministic`, `bbb`, `2dgbnn`, ...)), or what else was evaluated (`swbnn eval`: `model`;
    /// `swbnn plot` of a model file: its label).
    pub method: String,
    /// The corruption (kind and severity).
    pub corruption: Corruption,
    /// Accuracy.
    pub accuracy: f64,
    /// Mean negative log-likelihood.
    pub nll: f64,
    /// ECE, 15 bins.
    pub ece: f64,
    /// Mean confidence.
    pub mean_confidence: f64,
    /// The metrics at the model's fitted temperature, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrated: Option<CalibratedShift>,
}

/// Seed of the corruptions' random choices (noise fields, rotation senses): fixed, so every
/// method and every run sees the same corrupted images.
pub const CORRUPTION_SEED: u64 = 0x00c0_7707;

/// Evaluates `model` on each corruption of `test` (normalised with `stats`) with `samples` MC
/// samples; with a `temperature`, each row also holds the metrics at it (from the same
/// forward passes).
#[allow(clippy::too_many_arguments)]
pub fn evaluate_corruptions(
    model: &Network,
    method: &str,
    test: &Arc<dyn Dataset>,
    stats: NormStats,
    corruptions: &[Corruption],
    samples: usize,
    workers: usize,
    temperature: Option<f64>,
) -> Result<Vec<CorruptionRow>, Error> {
    evaluate_corruptions_into(
        model,
        method,
        test,
        stats,
        corruptions,
        samples,
        workers,
        temperature,
        None,
    )
}

/// The temperatures of an evaluation: 1 (the raw predictive), then the fitted one if any.
pub fn temperatures(temperature: Option<f64>) -> Vec<f64> {
    std::iter::once(1.0).chain(temperature).collect()
}

/// [`evaluate_corruptions`], with `keep` also writing each corrupted set's (raw) predictions
/// as NumPy arrays into the folder `keep` (prefix `<kind>-<severity>`, see
/// [`save_predictions_npy`]).
#[allow(clippy::too_many_arguments)]
pub fn evaluate_corruptions_into(
    model: &Network,
    method: &str,
    test: &Arc<dyn Dataset>,
    stats: NormStats,
    corruptions: &[Corruption],
    samples: usize,
    workers: usize,
    temperature: Option<f64>,
    keep: Option<&Path>,
) -> Result<Vec<CorruptionRow>, Error> {
    if let Some(d) = keep {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    corruptions
        .iter()
        .map(|&c| {
            let data: Arc<dyn Dataset> = Arc::new(Corrupted::new(test.clone(), c, CORRUPTION_SEED));
            let loader = eval_loader(stats.clone(), data, 256, workers)?;
            let mut evs =
                evaluate_tempered(model, &loader, None, samples, &temperatures(temperature))?
                    .into_iter();
            let (ev, pred, _) = evs.next().ok_or_else(no_evaluation)?;
            if let Some(d) = keep {
                let prefix = c.to_string().replace(':', "-");
                save_predictions_npy(d, &prefix, &pred)?;
            }
            let calibrated = temperature
                .zip(evs.next())
                .map(|(t, (cal, _, _))| CalibratedShift {
                    temperature: t,
                    nll: cal.summary.nll,
                    ece: cal.summary.ece,
                    mean_confidence: cal.summary.mean_confidence,
                });
            Ok(CorruptionRow {
                method: method.to_string(),
                corruption: c,
                accuracy: ev.summary.accuracy,
                nll: ev.summary.nll,
                ece: ev.summary.ece,
                mean_confidence: ev.summary.mean_confidence,
                calibrated,
            })
        })
        .collect()
}

/// Per-tensor posterior statistics of a Bayesian or shared model (empty for a deterministic
/// one).
pub fn weight_stats(model: &Network) -> Result<Vec<WeightStats>, Error> {
    export_posterior(model)
        .into_iter()
        .filter(|t| t.role == bnn_layers::ParamRole::Weight)
        .map(|t| Ok(WeightStats::compute(t.path, &t.mu, &t.sigma)?))
        .collect()
}

/// The error of an evaluation that returned no result at temperature 1 (a broken invariant of
/// [`evaluate_tempered`], reported rather than panicking).
pub fn no_evaluation() -> Error {
    Error::Usage("an evaluation at temperature 1 was asked for but not made".into())
}
