//! `swbnn eval`: accuracy, NLL, ECE and OOD AUROC of any classifier file on a test split; RMSE,
//! Gaussian NLL, CRPS, interval coverage and PIT calibration error of a regression network's;
//! and the coverage and size of its conformal prediction sets (or intervals) when it holds a
//! conformal calibration.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bnn_data::DataSource;
use bnn_train::{Evaluation, evaluate_tempered};
use burn::prelude::*;

use super::require;
use crate::Error;
use crate::corruptions::CorruptionRow;
use crate::corruptions::{evaluate_corruptions, weight_stats};
use crate::data::{EvalData, eval_loader, model_norm, open_eval_data, subset};
use crate::load::{LoadedModel, load_model};
use crate::table::{open_model_table, predict_rows};
use bnn_metrics::{
    ConformalCalibration, ConformalIntervalSummary, ConformalSetSummary, CoveragePoint,
    DEFAULT_RELIABILITY_LEVELS, RegressionSummary, WeightStats, regression_reliability,
};

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
    /// A classifier's metrics of the raw predictive (`None` for a regression network: see
    /// `regression`).
    pub evaluation: Option<Evaluation>,
    /// A regression network's metrics, in the user's units (`None` for a classifier).
    pub regression: Option<RegressionEvaluation>,
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

/// A regression network's metrics on a test split.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RegressionEvaluation {
    /// The target columns, in the order of the model's outputs.
    pub target_names: Vec<String>,
    /// RMSE, Gaussian NLL of the Monte-Carlo mixture, CRPS, coverage and width of the central
    /// 50/90/95 % intervals, PIT calibration error, the mean aleatoric and epistemic variances.
    #[serde(flatten)]
    pub summary: RegressionSummary,
    /// Observed coverage of the central intervals at the nominal levels 0.05, 0.10, ..., 0.95
    /// (the reliability figure's points).
    pub reliability: Vec<CoveragePoint>,
}

/// A stored conformal calibration applied to a test split.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum ConformalEvaluation {
    /// A classifier's prediction sets.
    Sets {
        /// The method: `"aps"` (adaptive prediction sets).
        method: &'static str,
        /// The temperature the sets were computed at (the conformal calibration's own).
        temperature: f64,
        /// Validation images the calibration was fitted on.
        calibration_images: usize,
        /// The target level, the empirical coverage, the mean set size and the test images.
        #[serde(flatten)]
        summary: ConformalSetSummary,
    },
    /// A regression network's intervals.
    Intervals {
        /// The method: `"normalized_interval"` (residuals normalised by the predictive
        /// standard deviation).
        method: &'static str,
        /// Validation rows the calibration was fitted on.
        calibration_images: usize,
        /// The target level, the empirical coverage, the mean width (user's units) and the
        /// test rows.
        #[serde(flatten)]
        summary: ConformalIntervalSummary,
    },
}

impl ConformalEvaluation {
    /// The nominal level.
    pub fn level(&self) -> f64 {
        match self {
            ConformalEvaluation::Sets { summary, .. } => summary.level,
            ConformalEvaluation::Intervals { summary, .. } => summary.level,
        }
    }

    /// The empirical coverage on the test split.
    pub fn coverage(&self) -> f64 {
        match self {
            ConformalEvaluation::Sets { summary, .. } => summary.coverage,
            ConformalEvaluation::Intervals { summary, .. } => summary.coverage,
        }
    }
}

/// Runs `request` on `device`. The same request and seed give the same numbers, whichever
/// caller (the device's generator is held for the whole evaluation).
pub fn eval(request: &EvalRequest, device: &Device) -> Result<EvalOutcome, Error> {
    let r = request;
    r.check()?;
    let loaded = load_model(&r.model, device)?;
    if loaded.config.head().is_regression() {
        return eval_regression(r, loaded, device);
    }
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
        (Some((aps, t, method)), Some((_, pred, _))) => Some(ConformalEvaluation::Sets {
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
        evaluation: Some(evaluation),
        regression: None,
        calibrated,
        stored_temperature: stored,
        conformal,
        weights: weight_stats(&loaded.net)?,
        corruptions,
        ood_source,
    })
}

/// [`eval`] of a regression network: its test rows (the source's test split) standardised
/// with the model's record, the Monte-Carlo mixture predictive brought back to the user's
/// units, its metrics, and the coverage and width of its conformal intervals when it holds a
/// conformal calibration.
fn eval_regression(
    r: &EvalRequest,
    loaded: LoadedModel,
    device: &Device,
) -> Result<EvalOutcome, Error> {
    let config = &loaded.config;
    let tabular = config.tabular.as_ref().ok_or_else(|| {
        Error::Usage(format!(
            "{} is a regression network without its input record",
            r.model.display()
        ))
    })?;
    require(r.ood.is_none(), || {
        "--ood scores out-of-distribution images for a classifier; a regression network's \
         uncertainty is in its predictive spread"
            .into()
    })?;
    require(!r.corruptions, || {
        "--corruptions are image corruptions; the model is a regression network on a table".into()
    })?;
    require(r.scaling == Scaling::Raw, || {
        "a regression network has no temperature (--calibrated, --temperature): its \
         calibration is conformal (`swbnn calibrate --conformal LEVEL`)"
            .into()
    })?;
    let intervals = match loaded.stored_conformal(&r.model)? {
        Some(c) => Some(c.as_intervals().ok_or_else(|| {
            Error::Usage(format!(
                "{} holds a classifier's conformal calibration ({}), but is a regression network",
                r.model.display(),
                c.method()
            ))
        })?),
        None => None,
    };
    let table = open_model_table(&r.model, config, &r.dataset, "test data")?;
    let test = table.test.ok_or_else(|| {
        Error::Usage(format!(
            "{} has no test split to evaluate on (give csv:TRAIN.csv,test=TEST.csv, or a .npz \
             with x_test and y_test)",
            r.dataset
        ))
    })?;
    let test = subset(test, r.subset, 2, "the test set")?;
    let pred = predict_rows(
        &loaded.net,
        tabular,
        test.as_ref(),
        r.samples,
        r.seed,
        r.workers,
        device,
    )
    .map_err(|e| Error::Usage(format!("evaluating {}: {e}", r.model.display())))?;
    let summary = RegressionSummary::compute(&pred.predictive, &pred.targets)?;
    let reliability =
        regression_reliability(&pred.predictive, &pred.targets, &DEFAULT_RELIABILITY_LEVELS)?;
    let conformal = match intervals {
        Some(cal) => Some(ConformalEvaluation::Intervals {
            method: ConformalCalibration::intervals(cal.clone()).method(),
            calibration_images: cal.n,
            summary: cal.evaluate(&pred.predictive, &pred.targets).map_err(|e| {
                Error::Usage(format!(
                    "the conformal intervals of {}: {e}",
                    r.model.display()
                ))
            })?,
        }),
        None => None,
    };
    Ok(EvalOutcome {
        evaluation: None,
        regression: Some(RegressionEvaluation {
            target_names: tabular.target_names.clone(),
            summary,
            reliability,
        }),
        calibrated: None,
        stored_temperature: None,
        conformal,
        weights: weight_stats(&loaded.net)?,
        corruptions: Vec::new(),
        ood_source: None,
    })
}
