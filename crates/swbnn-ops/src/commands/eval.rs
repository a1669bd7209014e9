//! `swbnn eval`: accuracy, NLL, ECE and OOD AUROC of any model file on a test split, and the
//! coverage and size of its conformal prediction sets when it holds a conformal calibration.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bnn_data::DataSource;
use bnn_train::{Evaluation, evaluate_tempered};
use burn::prelude::*;

use super::require;
use crate::Error;
use crate::corruptions::CorruptionRow;
use crate::corruptions::{evaluate_corruptions, weight_stats};
use crate::data::{EvalData, eval_loader, model_norm, open_eval_data};
use crate::load::load_model;
use bnn_metrics::{ConformalSetSummary, WeightStats};

/// Which temperature an evaluation also reports, beside the raw predictive.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Scaling {
    /// None: the raw predictive only.
    #[default]
    Raw,
    /// This temperature (0.05 to 20).
    Given(f64),
    /// The model's fitted one (`swbnn calibrate`); a model without one is an error.
    Stored,
}

/// What `swbnn eval` does: every field a flag of the command.
#[derive(Debug, Clone)]
pub struct EvalRequest {
    /// A `.swb` or `.qbnn` file, or a model directory.
    pub model: PathBuf,
    /// The data set whose test split is evaluated.
    pub dataset: DataSource,
    /// An out-of-distribution data set.
    pub ood: Option<DataSource>,
    /// The preset OOD set's folder.
    pub ood_dir: Option<PathBuf>,
    /// Monte-Carlo samples (1 to [`crate::limits::MAX_SAMPLES`]).
    pub samples: usize,
    /// The folder of a preset data set (used alone).
    pub data_dir: Option<PathBuf>,
    /// A stratified subset of the test set (and of the OOD set).
    pub subset: Option<usize>,
    /// Seed of the Monte-Carlo weight samples.
    pub seed: u64,
    /// Also evaluate the 15 corrupted test sets.
    pub corruptions: bool,
    /// The temperature also reported.
    pub scaling: Scaling,
    /// Loader threads.
    pub workers: usize,
}

impl EvalRequest {
    /// A request with the command line's defaults: 30 samples, seed 0.
    pub fn new(model: PathBuf, dataset: DataSource) -> Self {
        EvalRequest {
            model,
            dataset,
            ood: None,
            ood_dir: None,
            samples: 30,
            data_dir: None,
            subset: None,
            seed: 0,
            corruptions: false,
            scaling: Scaling::Raw,
            workers: 2,
        }
    }

    /// Checks the settings that need no file.
    pub fn check(&self) -> Result<(), Error> {
        crate::limits::check_samples(self.samples, 0, "").map_err(Error::Usage)?;
        require(self.subset != Some(0), || {
            "subset must be at least 1".into()
        })?;
        require(self.ood_dir.is_none() || self.ood.is_some(), || {
            "an OOD folder (--ood-dir) needs the OOD data set (--ood)".into()
        })?;
        if let Scaling::Given(t) = self.scaling {
            bnn_metrics::validate_temperature(t)
                .map_err(|e| Error::Usage(format!("temperature: {e}")))?;
        }
        Ok(())
    }
}

/// An evaluation's results.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EvalOutcome {
    /// The raw predictive's metrics.
    pub evaluation: Evaluation,
    /// The temperature asked for and the metrics at it.
    pub calibrated: Option<(f64, Evaluation)>,
    /// The fitted temperature the model holds, whether or not it was applied.
    pub stored_temperature: Option<f64>,
    /// The model's conformal prediction sets on the test split (`swbnn calibrate
    /// --conformal`): the level, the coverage and the mean set size; `None` for a model
    /// without a conformal calibration.
    pub conformal: Option<ConformalEvaluation>,
    /// Statistics of the posterior's weights, by layer.
    pub weights: Vec<WeightStats>,
    /// The corrupted test sets' rows (empty unless asked for).
    pub corruptions: Vec<CorruptionRow>,
    /// The OOD set's folder and the SHA-256 of each file it was read from, by name.
    pub ood_source: Option<(PathBuf, BTreeMap<String, String>)>,
}

/// A stored conformal calibration applied to a test split.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ConformalEvaluation {
    /// The method: `"aps"` (adaptive prediction sets).
    pub method: &'static str,
    /// The temperature the sets were computed at (the conformal calibration's own).
    pub temperature: f64,
    /// Validation images the calibration was fitted on.
    pub calibration_images: usize,
    /// The target level, the empirical coverage, the mean set size and the test images.
    #[serde(flatten)]
    pub summary: ConformalSetSummary,
}

/// Runs `request` on `device`. The same request and seed give the same numbers, whichever
/// caller (the device's generator is held for the whole evaluation).
pub fn eval(request: &EvalRequest, device: &Device) -> Result<EvalOutcome, Error> {
    let r = request;
    r.check()?;
    let loaded = load_model(&r.model, device)?;
    let stored = loaded.stored_temperature(&r.model)?;
    // The stored sets' calibration, its temperature and its method's name.
    let aps = match loaded.stored_conformal(&r.model)? {
        Some(c) => {
            let (aps, t) = c.as_aps().ok_or_else(|| {
                Error::Usage(format!(
                    "{} holds a regression conformal calibration ({}), but is a classifier",
                    r.model.display(),
                    c.method()
                ))
            })?;
            Some((aps, t, c.method()))
        }
        None => None,
    };
    let temperature = match r.scaling {
        Scaling::Raw => None,
        Scaling::Given(t) => Some(t),
        Scaling::Stored => Some(stored.ok_or_else(|| {
            Error::Usage(format!(
                "{} holds no fitted temperature; fit one on the validation split with \
                 `swbnn calibrate {} --dataset ...` (or give one with --temperature)",
                r.model.display(),
                r.model.display()
            ))
        })?),
    };
    let EvalData {
        test,
        ood,
        ood_source,
    } = open_eval_data(
        &r.model,
        &loaded.config,
        &r.dataset,
        r.data_dir.as_deref(),
        r.ood.as_ref(),
        r.ood_dir.as_deref(),
        r.subset,
    )?;
    // Each corrupted copy is the test set again.
    let copies = if r.corruptions {
        1 + bnn_data::Corruption::all().len()
    } else {
        1
    };
    let images = copies * test.len() + ood.as_ref().map_or(0, |d| d.len());
    crate::limits::check_samples(r.samples, images, "the test, corrupted and OOD images")
        .map_err(Error::Usage)?;
    let stats = model_norm(&loaded.config, &r.dataset)?;
    let test_loader = eval_loader(stats.clone(), test.clone(), 256, r.workers)?;
    let ood_loader = match ood {
        Some(d) => Some(eval_loader(stats.clone(), d, 256, r.workers)?),
        None => None,
    };
    let _rng = bnn_layers::lock_device_rng();
    device.seed(r.seed);
    // Raw, then the temperature asked for, then the conformal calibration's own.
    let temperatures: Vec<f64> = std::iter::once(1.0)
        .chain(temperature)
        .chain(aps.map(|(_, t, _)| t))
        .collect();
    let mut evs = evaluate_tempered(
        &loaded.net,
        &test_loader,
        ood_loader.as_ref(),
        r.samples,
        &temperatures,
    )
    .map_err(|e| Error::Usage(format!("evaluating {}: {e}", r.model.display())))?
    .into_iter();
    let evaluation = evs
        .next()
        .ok_or_else(|| Error::Usage("no evaluation at temperature 1".into()))?
        .0;
    let calibrated = match temperature {
        Some(t) => evs.next().map(|(ev, _, _)| (t, ev)),
        None => None,
    };
    let conformal = match (aps, evs.next()) {
        (Some((aps, t, method)), Some((_, pred, _))) => Some(ConformalEvaluation {
            method,
            temperature: t,
            calibration_images: aps.n,
            summary: aps
                .evaluate(pred.predictive.probabilities(), &pred.labels, r.seed)
                .map_err(|e| {
                    Error::Usage(format!("the conformal sets of {}: {e}", r.model.display()))
                })?,
        }),
        _ => None,
    };
    let corruptions = match r.corruptions {
        true => evaluate_corruptions(
            &loaded.net,
            "model",
            &test,
            stats,
            &bnn_data::Corruption::all(),
            r.samples,
            r.workers,
            temperature,
        )?,
        false => Vec::new(),
    };
    Ok(EvalOutcome {
        evaluation,
        calibrated,
        stored_temperature: stored,
        conformal,
        weights: weight_stats(&loaded.net)?,
        corruptions,
        ood_source,
    })
}
