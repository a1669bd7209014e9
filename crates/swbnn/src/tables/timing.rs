//! The timing table: training seconds per epoch of each method (from the stages' checkpoint
//! histories) and Monte-Carlo inference speed (images/s at the setup's sample count, measured
//! here on the backend the run uses).

use std::time::Instant;

use bnn_models::Network;
use bnn_train::{Checkpointer, EpochStats, predict, predict_ensemble};
use burn::prelude::*;
use serde::{Deserialize, Serialize};
use swshare::burn_edges::from_swb;

use super::{TablesConfig, load_stage_model};
use crate::Error;
use crate::data::{ExperimentData, eval_loader, subset_at_most};
use crate::experiment::{Outcome, Setup, stages_dir};

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
    /// `deterministic`, `ensemble`, `bbb` or `2dgbnn`.
    pub method: String,
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

fn history(setup: &Setup, stage: &str) -> Result<Vec<EpochStats>, Error> {
    let dir = stages_dir(&setup.out_dir).join(stage);
    Ok(Checkpointer::new(dir)?
        .state()?
        // Per-epoch times are of whole epochs: a stopping rule's last one may be partial.
        .map(|s| {
            s.history
                .into_iter()
                .filter(|e| e.partial_steps.is_none())
                .collect()
        })
        .unwrap_or_default())
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
    let loader = eval_loader(data.stats, images, t.batch_size, setup.workers)?;
    let det = load_stage_model(setup, "deterministic", device)?.0;
    let bbb = load_stage_model(setup, "bbb", device)?.0;
    let swb = stages_dir(&setup.out_dir).join("2dgbnn").join("model.swb");
    let gbnn = from_swb(&swshare::format::load(&swb)?, device)?.0;
    let samples = setup.samples;
    let mut rows = Vec::new();
    let mut single = |method: &str,
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
            method: method.into(),
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
    single(
        "deterministic",
        &det,
        1,
        history(setup, "deterministic")?,
        0.0,
    )?;
    single("bbb", &bbb, samples, history(setup, "bbb")?, 0.0)?;
    let gbnn_train: f64 = history(setup, "2dgbnn")?.iter().map(|e| e.seconds).sum();
    let gbnn_row = super::main_row(main, "2dgbnn")?;
    single(
        "2dgbnn",
        &gbnn,
        samples,
        history(setup, "2dgbnn")?,
        (gbnn_row.train_seconds - gbnn_train).max(0.0),
    )?;
    if let Some(m) = members {
        let mut nets = vec![det];
        let mut epochs = history(setup, "deterministic")?;
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
                method: "ensemble".into(),
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
