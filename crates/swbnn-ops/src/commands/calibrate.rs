//! `swbnn calibrate`: a model's temperature, fitted by NLL on images it never trained on, and
//! (with `conformal`) split-conformal prediction sets fitted after it on the same images,
//! stored with it.

use std::path::PathBuf;

use bnn_data::{DataSource, Split};
use burn::prelude::*;

use super::within;
use crate::Error;
use crate::calibration::{
    Calibration, ModelFile, check_conformal_level, check_conformal_split, check_split_held_out,
    fit_with_conformal, recorded_split, split_for, validation_split,
};
use crate::checks;
use crate::data::training_split;
use crate::data::{
    check_input, check_trained_on, eval_loader, model_images, model_norm, open_source,
};
use crate::load::load_model;
use crate::split::ValidationSplit;
use crate::table::{open_model_table, predict_rows};
use bnn_metrics::{ConformalCalibration, NormalizedIntervalCalibration};

/// What `swbnn calibrate` does: every field a flag of the command.
#[derive(Debug, Clone)]
pub struct CalibrateRequest {
    /// A `.swb` or `.qbnn` file, or a model directory; rewritten with the temperature.
    pub model: PathBuf,
    /// The data set it was trained on (the validation split is held out of its training
    /// split).
    pub dataset: DataSource,
    /// The folder of a preset data set (used alone).
    pub data_dir: Option<PathBuf>,
    /// The validation split's size; default: the model's record (else the run's, else 5,000).
    pub validation: Option<usize>,
    /// The validation split's seed; default as `validation`.
    pub validation_seed: Option<u64>,
    /// Monte-Carlo samples per image.
    pub samples: usize,
    /// Seed of the Monte-Carlo weight samples.
    pub seed: u64,
    /// Loader threads.
    pub workers: usize,
    /// Also fit split-conformal prediction sets at this coverage level (in `(0, 1)`), after
    /// the temperature and on the same validation split.
    pub conformal: Option<f64>,
}

impl CalibrateRequest {
    /// A request with the command line's defaults: 30 samples, seed 0, the model's split.
    pub fn new(model: PathBuf, dataset: DataSource) -> Self {
        CalibrateRequest {
            model,
            dataset,
            data_dir: None,
            validation: None,
            validation_seed: None,
            samples: 30,
            seed: 0,
            workers: 2,
            conformal: None,
        }
    }
}

/// A fitted temperature, the split it was fitted on, and the run directory whose split that
/// is (a model of a reproduction).
#[derive(Debug, Clone)]
pub struct CalibrateOutcome {
    /// The fit.
    pub fit: Calibration,
    /// The validation split.
    pub split: ValidationSplit,
    /// The run the model belongs to, if any.
    pub run_dir: Option<PathBuf>,
    /// Where the temperature was stored.
    pub stored_in: PathBuf,
}

/// Runs `request` on `device`: fits the temperature and stores it with the model (in a
/// `.swb` or `.qbnn` file, or as `calibration.json` in a model directory).
pub fn calibrate(request: &CalibrateRequest, device: &Device) -> Result<CalibrateOutcome, Error> {
    let r = request;
    crate::limits::check_samples(r.samples, 0, "").map_err(Error::Usage)?;
    if let Some(level) = r.conformal {
        // The level alone first; the split's size once the split is known.
        check_conformal_level(level)?;
    }
    // The model is rewritten in place: through a link to the file it names, only when this
    // user may write it.
    let model = match ModelFile::at(&r.model) {
        ModelFile::Dir(_) => r.model.clone(),
        file => checks::output_target("the model", file.path(), Some(true), &[])?,
    };
    let file = ModelFile::at(&model);
    let loaded = load_model(&model, device)?;
    let config = &loaded.config;
    if config.head().is_regression() && r.conformal.is_none() {
        return Err(Error::Usage(format!(
            "{} is a regression network: it has no temperature to fit; its calibration is \
             conformal (--conformal LEVEL, e.g. 0.9)",
            model.display()
        )));
    }
    // The split the model records it held out, unless one is given (then checked).
    let recorded = recorded_split(config);
    let (split, run_dir) = split_for(
        &model,
        &r.dataset,
        r.validation.or(recorded.map(|s| s.size)),
        r.validation_seed.or(recorded.map(|s| s.seed)),
    )?;
    check_split_held_out(&model, config, split, !config.head().is_regression())?;
    if let Some(level) = r.conformal {
        check_conformal_split(level, split)?;
    }
    if let (Some(tabular), Some(level)) = (&config.tabular, r.conformal) {
        let fit = calibrate_regression(r, &loaded, tabular, split, level, device)?;
        file.store(&fit).map_err(within(format_args!(
            "storing the calibration in {}",
            model.display()
        )))?;
        return Ok(CalibrateOutcome {
            fit,
            split,
            run_dir,
            stored_in: file.path().to_path_buf(),
        });
    }
    let opened = open_source(
        &r.dataset,
        Split::Train,
        r.data_dir.as_deref(),
        model_images(config),
    )?;
    check_trained_on(&model, config, &r.dataset, &opened);
    let held_out = validation_split(opened.data, split).map_err(within(format_args!(
        "the validation split of {} images",
        split.size
    )))?;
    check_input(config, held_out.as_ref(), "validation data", true)?;
    crate::limits::check_samples(r.samples, held_out.len(), "the validation images")
        .map_err(Error::Usage)?;
    let loader = eval_loader(model_norm(config, &r.dataset)?, held_out, 256, r.workers)?;
    let _rng = bnn_layers::lock_device_rng();
    device.seed(r.seed);
    let fit = fit_with_conformal(&loaded.net, &loader, r.samples, r.conformal, r.seed).map_err(
        within(format_args!(
            "fitting the calibration of {}",
            model.display()
        )),
    )?;
    file.store(&fit).map_err(within(format_args!(
        "storing the calibration in {}",
        model.display()
    )))?;
    Ok(CalibrateOutcome {
        fit,
        split,
        run_dir,
        stored_in: file.path().to_path_buf(),
    })
}

/// Conformal intervals of a regression network at `level`, fitted on the validation rows of
/// `split` (held out of the training rows as training held them out, standardised with the
/// model's record): residuals normalised by the Monte-Carlo predictive's standard deviation,
/// in the user's units ([`bnn_metrics::NormalizedIntervalCalibration`]). There is no
/// temperature (the record holds 1); `nll_before` and `nll_after` are both the validation
/// Gaussian NLL.
fn calibrate_regression(
    r: &CalibrateRequest,
    loaded: &crate::load::LoadedModel,
    tabular: &bnn_models::TabularInput,
    split: ValidationSplit,
    level: f64,
    device: &Device,
) -> Result<Calibration, Error> {
    let table = open_model_table(&r.model, &loaded.config, &r.dataset, "the data set")?;
    let (_, held_out) = training_split(table.train.data.clone(), split, None).map_err(within(
        format_args!("the validation split of {} rows", split.size),
    ))?;
    let pred = predict_rows(
        &loaded.net,
        tabular,
        held_out.as_ref(),
        r.samples,
        r.seed,
        r.workers,
        device,
    )?;
    let cal = NormalizedIntervalCalibration::fit(&pred.predictive, &pred.targets, level)?;
    let nll = bnn_metrics::gaussian_nll(&pred.predictive, &pred.targets)?;
    Ok(Calibration {
        temperature: 1.0,
        nll_before: nll,
        nll_after: nll,
        at_bound: false,
        images: pred.predictive.n(),
        samples: pred.predictive.n_samples(),
        conformal: Some(ConformalCalibration::intervals(cal)),
    })
}
