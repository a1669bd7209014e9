//! The timing table: training seconds per epoch of each method (from the stages' checkpoint
//! histories) and Monte-Carlo inference speed (images/s at the setup's sample count, measured
//! here on the backend the run uses).

use std::time::Instant;

use bnn_models::Network;
use bnn_train::{EpochStats, predict, predict_ensemble};
use burn::prelude::*;
use serde::{Deserialize, Serialize};

use super::{TablesConfig, load_stage_model};
use crate::Error;
use crate::data::{ExperimentData, eval_loader, subset_at_most};
use crate::method::Method;
use crate::results::Outcome;
use crate::setup::Setup;
use crate::store::{self, StageDir};

/// How inference speed is measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimingConfig {
    /// Test images per measurement (a stratified subset, fixed seed; the whole test set when
    /// it is smaller).
    pub images: usize,
    /// Measurements per model; the table gives their median, minimum and maximum.
    pub repeats: usize,
    /// Batch size of the measurement (the paper's inference used 1024 on a GPU).
    pub batch_size: usize,
}

impl Default for TimingConfig {
    fn default() -> Self {
        Self {
            images: 512,
            repeats: 3,
            batch_size: 256,
        }
    }
}

impl TimingConfig {
    /// Range checks.
    pub fn validate(&self) -> Result<(), Error> {
        if self.images == 0 || self.repeats == 0 || self.batch_size == 0 {
            return Err(Error::Usage(format!(
                "tables.timing: images ({}), repeats ({}) and batch_size ({}) must be >= 1",
                self.images, self.repeats, self.batch_size
            )));
        }
        Ok(())
    }
}

/// One method's timings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimingRow {
    /// Deterministic, the ensemble, BBB or 2DGBNN.
    pub method: Method,
    /// Training epochs recorded (for the ensemble, every member's).
    pub epochs: usize,
    /// Mean seconds per training epoch.
    pub seconds_per_epoch: f64,
    /// Mean training images/s.
    pub train_images_per_s: f64,
    /// Seconds outside the epochs (2DGBNN: gradient pass, stages 1-2 and building the shared
    /// model).
    pub other_seconds: f64,
    /// Forward passes per image in the measured prediction (MC samples, members, or 1).
    pub passes: usize,
    /// Images in each measurement.
    pub images: usize,
    /// Median images/s of the prediction over the repeats.
    pub images_per_s: f64,
    /// Slowest measurement, images/s.
    pub images_per_s_min: f64,
    /// Fastest measurement, images/s.
    pub images_per_s_max: f64,
}

/// The whole epochs of stage `name` (per-epoch times are of whole epochs: a stopping rule's
/// last one may be partial).
fn history(setup: &Setup, name: &str) -> Result<Vec<EpochStats>, Error> {
    StageDir::existing(store::stage_path(&setup.out_dir, name)).history()
}

fn epoch_stats(epochs: &[EpochStats]) -> (usize, f64, f64) {
    let n = epochs.len();
    let d = n.max(1) as f64;
    (
        n,
        epochs.iter().map(|e| e.seconds).sum::<f64>() / d,
        epochs.iter().map(|e| e.images_per_s).sum::<f64>() / d,
    )
}

/// Times `f` (one prediction of `images` images) `repeats` times after one warm-up run;
/// returns images/s as (median, min, max).
fn speed(
    images: usize,
    repeats: usize,
    mut f: impl FnMut() -> Result<(), Error>,
) -> Result<(f64, f64, f64), Error> {
    f()?;
    let mut v = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let t = Instant::now();
        f()?;
        v.push(images as f64 / t.elapsed().as_secs_f64().max(1e-9));
    }
    v.sort_by(f64::total_cmp);
    Ok((v[v.len() / 2], v[0], v[v.len() - 1]))
}

/// The timing rows of the main experiment's models (and of the ensemble's `members`, when
/// that table was made), measured on `device`.
pub(crate) fn measure(
    setup: &Setup,
    cfg: &TablesConfig,
    data: &ExperimentData,
    main: &Outcome,
    members: Option<usize>,
    device: &Device,
) -> Result<Vec<TimingRow>, Error> {
    let t = &cfg.timing;
    let images = subset_at_most(data.test.clone(), Some(t.images), 5)?;
    let n = images.len();
    let loader = eval_loader(data.stats.clone(), images, t.batch_size, setup.workers)?;
    let det = load_stage_model(setup, Method::Deterministic.name(), device)?.0;
    let bbb = load_stage_model(setup, Method::Bbb.name(), device)?.0;
    let gbnn = store::load_swb(
        &store::ModelDir::new(store::stage_path(&setup.out_dir, Method::Gbnn2d.name())),
        device,
    )?
    .0;
    let samples = setup.samples;
    let mut rows = Vec::new();
    let mut single = |method: Method,
                      model: &Network,
                      passes: usize,
                      epochs: Vec<EpochStats>,
                      other: f64|
     -> Result<(), Error> {
        let (median, min, max) = speed(n, t.repeats, || {
            predict(model, &loader, samples)?;
            Ok(())
        })?;
        let (e, s, ips) = epoch_stats(&epochs);
        rows.push(TimingRow {
            method,
            epochs: e,
            seconds_per_epoch: s,
            train_images_per_s: ips,
            other_seconds: other,
            passes,
            images: n,
            images_per_s: median,
            images_per_s_min: min,
            images_per_s_max: max,
        });
        Ok(())
    };
    let det_history = history(setup, Method::Deterministic.name())?;
    single(Method::Deterministic, &det, 1, det_history.clone(), 0.0)?;
    let bbb_history = history(setup, Method::Bbb.name())?;
    single(Method::Bbb, &bbb, samples, bbb_history, 0.0)?;
    let gbnn_history = history(setup, Method::Gbnn2d.name())?;
    let gbnn_train: f64 = gbnn_history.iter().map(|e| e.seconds).sum();
    let gbnn_row = super::main_row(main, Method::Gbnn2d)?;
    single(
        Method::Gbnn2d,
        &gbnn,
        samples,
        gbnn_history,
        (gbnn_row.train_seconds - gbnn_train).max(0.0),
    )?;
    if let Some(m) = members {
        let mut nets = vec![det];
        let mut epochs = det_history;
        for i in 1..m {
            let name = format!("ensemble-{i}");
            nets.push(load_stage_model(setup, &name, device)?.0);
            epochs.extend(history(setup, &name)?);
        }
        let (median, min, max) = speed(n, t.repeats, || {
            predict_ensemble(&nets, &loader)?;
            Ok(())
        })?;
        let (e, s, ips) = epoch_stats(&epochs);
        rows.insert(
            1,
            TimingRow {
                method: Method::Ensemble,
                epochs: e,
                seconds_per_epoch: s,
                train_images_per_s: ips,
                other_seconds: 0.0,
                passes: m,
                images: n,
                images_per_s: median,
                images_per_s_min: min,
                images_per_s_max: max,
            },
        );
    }
    Ok(rows)
}
