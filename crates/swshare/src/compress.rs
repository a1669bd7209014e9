//! The whole method as one call: a trained Bayesian model in; the retrained weight-shared model,
//! its plan, its compression report and its `.swb` content out.
//!
//! ```text
//! Bayesian model --mean_mu_gradients--> WeightTable --build_plan--> SharingPlan   (stages 1-2)
//! SharingPlan + Bayesian model --build_shared_model--> shared model
//! shared model --train (ELBO, CompressConfig::retrain)--> shared model             (stage 3)
//! shared model + plan --to_swb--> SharedModelData (+ file sizes in the report)
//! ```
//!
//! The command line (`swbnn compress`) and the experiment (`cargo xtask reproduce`) both call
//! [`compress`]; each stage has exactly one config, inside [`CompressConfig`].

use std::path::Path;
use std::time::Instant;

use bnn_data::DataLoader;
use bnn_layers::{BayesTensor, SharedKl, export_bayes};
use bnn_models::{Architecture, Classifier, Kind};
use bnn_train::{Checkpointer, EpochStats, Observer, TrainConfig, TrainError, train};
use burn::module::Module;
use serde::{Deserialize, Serialize};

use crate::burn_edges::{
    EdgeError, from_swb, initial_swb, shared_model_from_initial, table_from_tensors, to_swb,
};
use crate::config::merge_json;
use crate::format::{self, FileSizes, SaveOptions, SharedModelData, SwbError};
use crate::retrain_stop::{RetrainStop, StopRule};
use crate::{CompressionReport, SharingPlan, SwshareConfig, SwshareError, WeightTable, build_plan};

/// Stage-3 epochs of the paper's appendix table (`E = 200`); presets and the command line set
/// their own.
pub const PAPER_RETRAIN_EPOCHS: usize = 200;

/// Every setting of the method, one field per stage; save it beside a result to repeat it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompressConfig {
    /// Stages 1-2: outliers, GMM, cluster-size reduction, ellipses, merging.
    pub sharing: SwshareConfig,
    /// Stage 3: retraining of the shared model, and the seed of the gradient pass of stage 1.
    /// Default [`TrainConfig::retrain`] with [`PAPER_RETRAIN_EPOCHS`].
    pub retrain: TrainConfig,
    /// When stage 3 ends: after `retrain.epochs` (default, the paper's), or once the shared
    /// model is as confident as the source BNN ([`RetrainStop::ConfidenceRecovered`], the
    /// presets' choice).
    pub retrain_stop: RetrainStop,
    /// How the `.swb` file is encoded. Default: the entropy-coded index (lossless), `f32`
    /// outliers.
    pub save: SaveOptions,
}

impl Default for CompressConfig {
    fn default() -> Self {
        Self {
            sharing: SwshareConfig::default(),
            retrain: TrainConfig::retrain(PAPER_RETRAIN_EPOCHS),
            retrain_stop: RetrainStop::Epochs,
            save: SaveOptions {
                entropy_index: true,
                int8_outliers: false,
            },
        }
    }
}

impl CompressConfig {
    /// Checks every stage's config.
    pub fn validate(&self) -> Result<(), CompressError> {
        self.sharing.validate()?;
        self.retrain.validate()?;
        self.retrain_stop.validate()?;
        Ok(())
    }

    /// Parses a JSON configuration and validates it. The file is merged into the defaults by
    /// [`crate::config::merge_json`]: missing sections and fields take their defaults
    /// (`{"retrain": {"lr": 1e-3}}` changes the stage-3 rate alone), an optimizer of another
    /// kind replaces the default one; unknown fields are errors.
    pub fn from_json(s: &str) -> Result<Self, CompressError> {
        let bad = |e| SwshareError::config("<json>", e, "not a valid compression config");
        let patch: serde_json::Value = serde_json::from_str(s).map_err(bad)?;
        let mut merged = serde_json::to_value(Self::default()).map_err(bad)?;
        merge_json(&mut merged, patch);
        let cfg: Self = serde_json::from_value(merged).map_err(bad)?;
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Why [`compress`] failed.
#[derive(Debug, thiserror::Error)]
pub enum CompressError {
    /// The input model is not Bayesian.
    #[error(
        "the model to compress must be Bayesian (trained with --kind bayesian); this one is {0:?}"
    )]
    NotBayesian(Kind),
    /// A config value is out of range, or a stage failed.
    #[error(transparent)]
    Swshare(#[from] SwshareError),
    /// Building or converting a model failed.
    #[error(transparent)]
    Edge(#[from] EdgeError),
    /// The gradient pass or the retraining failed.
    #[error(transparent)]
    Train(#[from] TrainError),
    /// Encoding the model file failed.
    #[error(transparent)]
    File(#[from] SwbError),
}

/// The result of [`compress`].
#[derive(Debug)]
pub struct Compressed<A: Architecture = bnn_models::ModelConfig> {
    /// The retrained weight-shared model, on the autodiff device it was trained on.
    pub model: Classifier<A::Body>,
    /// Its architecture (kind [`Kind::Shared`], the codebook's length).
    pub config: A,
    /// The sharing plan (fates, codebook, ellipse blends).
    pub plan: SharingPlan,
    /// What the stages did, with timings and the file's sizes by part.
    pub report: CompressionReport,
    /// Stage-3 training history, one entry per epoch.
    pub history: Vec<EpochStats>,
    /// The `.swb` content of the retrained model.
    pub file: SharedModelData,
    /// The encoding [`Compressed::save`] uses.
    pub save_options: SaveOptions,
    /// Seconds of stages 1-2 (gradient pass, plan, building the shared model).
    pub plan_seconds: f64,
}

impl<A: Architecture> Compressed<A> {
    /// Writes the `.swb` file atomically; returns the size of each part.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<FileSizes, SwbError> {
        format::save(path, &self.file, &self.save_options)
    }

    /// [`Compressed::save`], then the model read back from the file onto `device`: what a user
    /// of the file gets. The default encoding is lossless; `int8_outliers` is not, so a result
    /// reported beside the file's size must come from this model, not [`Compressed::model`].
    pub fn save_and_reload(
        &self,
        path: impl AsRef<Path>,
        device: &burn::prelude::Device,
    ) -> Result<(FileSizes, Classifier<A::Body>), CompressError> {
        let sizes = self.save(&path)?;
        let (model, _) = from_swb::<A>(&format::load(&path)?, device)?;
        Ok((sizes, model))
    }
}

/// Re-exported from [`crate::burn_edges`], where the model and the file meet.
pub use crate::burn_edges::shared_config;

/// Runs the whole method on a trained Bayesian model (on an autodiff device):
/// 1. the mean `d loss / d mu` over `cfg.sharing.outliers.grad_batches` mini-batches of `data`
///    (skipped when the gradient criterion is off), with the device seeded by
///    `cfg.retrain.seed`, so the plan is a function of the model and the config alone;
/// 2. stages 1-2 ([`build_plan`]) and the shared model ([`crate::burn_edges::build_shared_model`]);
/// 3. retraining on `data` with `cfg.retrain` (checkpointed by `checkpointer`, which also
///    resumes an interrupted run), ended early by `cfg.retrain_stop`, whose probe is drawn
///    from `validation` (images never trained on; required by
///    [`RetrainStop::ConfidenceRecovered`], unused by [`RetrainStop::Epochs`]);
/// 4. the `.swb` content and its sizes (in `report.file_sizes`).
///
/// [`prepare`] (steps 1-2) and [`retrain`] (steps 3-4) are the same two halves, for a caller
/// that wants the file's size before it pays for stage 3.
pub fn compress<A: Architecture>(
    bayes: &Classifier<A::Body>,
    bayes_config: &A,
    data: &DataLoader,
    validation: Option<&DataLoader>,
    cfg: &CompressConfig,
    checkpointer: Option<&Checkpointer>,
    observer: &mut dyn Observer<A::Body>,
) -> Result<Compressed<A>, CompressError> {
    let prepared = prepare(bayes, bayes_config, data, cfg)?;
    retrain(
        prepared,
        bayes,
        data,
        validation,
        cfg,
        checkpointer,
        observer,
    )
}

/// Stages 1-2 of [`compress`] and the shared model they build, before stage 3.
#[derive(Debug)]
pub struct Prepared<A: Architecture = bnn_models::ModelConfig> {
    /// The shared model before retraining, on the source's device.
    pub shared: Classifier<A::Body>,
    /// Its architecture (kind [`Kind::Shared`], the codebook's length).
    pub config: A,
    /// The sharing plan (fates, codebook, ellipse blends).
    pub plan: SharingPlan,
    /// What stages 1-2 did (no stage-3 trace or file sizes yet).
    pub report: CompressionReport,
    /// Seconds of stages 1-2 (gradient pass, plan, building the shared model).
    pub plan_seconds: f64,
    table: WeightTable,
    initial: SharedModelData,
}

impl<A: Architecture> Prepared<A> {
    /// The sizes of the `.swb` file this plan gives under `save`. Stage 3 changes the
    /// values the file holds, never how many nor how they are indexed, so these are the
    /// retrained model's sizes too.
    pub fn file_sizes(&self, save: &SaveOptions) -> Result<FileSizes, SwbError> {
        memory_sizes(&self.initial, save)
    }
}

/// The sizes of `file` encoded with `save`, an error naming no path (nothing is on disk).
fn memory_sizes(file: &SharedModelData, save: &SaveOptions) -> Result<FileSizes, SwbError> {
    format::encoded_sizes(file, save).map_err(|source| SwbError::Format {
        path: "<memory>".into(),
        source,
    })
}

/// Steps 1-2 of [`compress`]: the gradient pass, the plan and the shared model, seeded by
/// `cfg.retrain.seed` as there.
pub fn prepare<A: Architecture>(
    bayes: &Classifier<A::Body>,
    bayes_config: &A,
    data: &DataLoader,
    cfg: &CompressConfig,
) -> Result<Prepared<A>, CompressError> {
    let started = Instant::now();
    let weights = gradient_pass(bayes, bayes_config, data, cfg)?;
    let mut p = prepare_from(&weights, bayes, bayes_config, cfg)?;
    p.plan_seconds = started.elapsed().as_secs_f64();
    Ok(p)
}

/// Step 1 of [`compress`]: every shareable tensor's `(mu, sigma)` with its mean
/// `d loss / d mu` over `cfg.sharing.outliers.grad_batches` mini-batches of `data` (without
/// gradients when the gradient criterion is off), the device seeded by `cfg.retrain.seed`.
/// The result depends on `cfg` only through that seed, the prior, the batch count and whether
/// the criterion is on, so settings that differ elsewhere (K, the sharing space) can share it
/// ([`prepare_from`]).
pub fn gradient_pass<A: Architecture>(
    bayes: &Classifier<A::Body>,
    bayes_config: &A,
    data: &DataLoader,
    cfg: &CompressConfig,
) -> Result<Vec<BayesTensor>, CompressError> {
    cfg.validate()?;
    if bayes_config.kind() != Kind::Bayesian {
        return Err(CompressError::NotBayesian(bayes_config.kind()));
    }
    let device = bayes.devices().first().cloned().unwrap_or_default();
    // The gradient pass samples weights: seeding makes the plan repeatable (and a resumed
    // retraining continues the model the first run built).
    device.seed(cfg.retrain.seed);
    Ok(if cfg.sharing.outliers.grad_top_fraction > 0.0 {
        bnn_train::mean_mu_gradients(
            bayes,
            data,
            &cfg.retrain.prior,
            cfg.sharing.outliers.grad_batches,
        )?
    } else {
        export_bayes(bayes, None)
    })
}

/// Step 2 of [`compress`] on the tensors of [`gradient_pass`]: the plan and the shared model.
pub fn prepare_from<A: Architecture>(
    weights: &[BayesTensor],
    bayes: &Classifier<A::Body>,
    bayes_config: &A,
    cfg: &CompressConfig,
) -> Result<Prepared<A>, CompressError> {
    cfg.validate()?;
    if bayes_config.kind() != Kind::Bayesian {
        return Err(CompressError::NotBayesian(bayes_config.kind()));
    }
    let started = Instant::now();
    let device = bayes.devices().first().cloned().unwrap_or_default();
    let table = table_from_tensors(weights)?;
    let (plan, report) = build_plan(&table, &cfg.sharing)?;
    // What the file would hold now: the shared model is built from it, and its sizes are the
    // retrained file's (`Prepared::file_sizes`).
    let initial = initial_swb(bayes_config, bayes, &table, &plan)?;
    let shared = shared_model_from_initial::<A>(&initial, bayes, &device)?;
    let config = shared_config(bayes_config, plan.k());
    Ok(Prepared {
        shared,
        config,
        plan,
        report,
        plan_seconds: started.elapsed().as_secs_f64(),
        table,
        initial,
    })
}

/// Steps 3-4 of [`compress`] on what [`prepare`] built from `bayes` with the same `cfg`:
/// stage 3 (the stop rule's source is `bayes`), then the `.swb` content and its sizes.
pub fn retrain<A: Architecture>(
    prepared: Prepared<A>,
    bayes: &Classifier<A::Body>,
    data: &DataLoader,
    validation: Option<&DataLoader>,
    cfg: &CompressConfig,
    checkpointer: Option<&Checkpointer>,
    observer: &mut dyn Observer<A::Body>,
) -> Result<Compressed<A>, CompressError> {
    cfg.validate()?;
    let Prepared {
        shared,
        config,
        plan,
        mut report,
        plan_seconds,
        table,
        ..
    } = prepared;
    let mut stop = StopRule::new(
        cfg.retrain_stop,
        bayes,
        validation,
        cfg.retrain.seed,
        observer,
    )?;
    let (model, history) = train(shared, data, &cfg.retrain, checkpointer, &mut stop)?;
    report.retrain_stop = stop.into_trace();
    report.inlier_kl_weight = Some(match cfg.retrain.shared_kl {
        // The inliers' summed KL divided by their count.
        SharedKl::Mixture => 1.0 / (report.plain_shared + report.ellipse_weights).max(1) as f64,
        SharedKl::PerWeight | SharedKl::Codebook => 1.0,
    });
    let file = to_swb(&model.valid(), &config, &table, &plan)?;
    let sizes = memory_sizes(&file, &cfg.save)?;
    report.file_sizes = Some(sizes);
    Ok(Compressed {
        model,
        config,
        plan,
        report,
        history,
        file,
        save_options: cfg.save,
        plan_seconds,
    })
}

/// The stage-3-only baseline: the Bayesian model itself retrained with stage 3's settings
/// (`cfg.retrain`: optimiser, rates, batch size, seed) for `steps` optimiser steps, without any
/// sharing. Beside [`compress`] it tells what the retraining does on its own, so `steps` is
/// what 2DGBNN's stage 3 took ([`stage3_steps`]): the confidence rule cannot end this one, as
/// the model is as confident as itself before its first step. Returns the model and its
/// history (the last epoch partial when `steps` ends inside one).
pub fn retrain_without_sharing<A: Architecture>(
    bayes: &Classifier<A::Body>,
    bayes_config: &A,
    data: &DataLoader,
    cfg: &CompressConfig,
    steps: usize,
    checkpointer: Option<&Checkpointer>,
    observer: &mut dyn Observer<A::Body>,
) -> Result<UnsharedRetrain<A>, CompressError> {
    cfg.validate()?;
    if bayes_config.kind() != Kind::Bayesian {
        return Err(CompressError::NotBayesian(bayes_config.kind()));
    }
    let device = bayes.devices().first().cloned().unwrap_or_default();
    device.seed(cfg.retrain.seed);
    let mut stop = StopAtStep {
        steps,
        inner: observer,
    };
    let (model, history) = train(bayes.clone(), data, &cfg.retrain, checkpointer, &mut stop)?;
    Ok(UnsharedRetrain { model, history })
}

/// Optimiser steps of a stage-3 history: whole epochs of `steps_per_epoch`, and the steps of
/// a last epoch a stop rule ended.
pub fn stage3_steps(history: &[EpochStats], steps_per_epoch: usize) -> usize {
    history
        .iter()
        .map(|e| e.partial_steps.unwrap_or(steps_per_epoch))
        .sum()
}

/// Ends training after `steps` optimiser steps; everything else goes to `inner`.
struct StopAtStep<'a, B: bnn_models::ClassifierBody> {
    steps: usize,
    inner: &'a mut dyn Observer<B>,
}

impl<B: bnn_models::ClassifierBody> Observer<B> for StopAtStep<'_, B> {
    fn on_step(&mut self, info: &bnn_train::StepInfo) {
        self.inner.on_step(info);
    }

    fn project(
        &mut self,
        model: bnn_models::Classifier<B>,
    ) -> Result<bnn_models::Classifier<B>, TrainError> {
        self.inner.project(model)
    }

    fn on_epoch(&mut self, stats: &EpochStats) {
        self.inner.on_epoch(stats);
    }

    fn stop_checks_per_epoch(&self) -> usize {
        // Asked before every step (training clamps this to the steps of an epoch).
        usize::MAX
    }

    fn should_stop(
        &mut self,
        _model: &Classifier<B>,
        at: bnn_train::Progress,
    ) -> Result<bool, TrainError> {
        Ok(at.epoch * at.steps + at.step >= self.steps)
    }
}

/// The result of [`retrain_without_sharing`].
#[derive(Debug)]
pub struct UnsharedRetrain<A: Architecture = bnn_models::ModelConfig> {
    /// The retrained Bayesian model, on the autodiff device it was trained on.
    pub model: Classifier<A::Body>,
    /// Training history, one entry per epoch.
    pub history: Vec<EpochStats>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A partial `retrain` section keeps the other stage-3 defaults; it used to be refused
    /// ("missing field `batch_size`"), so a config could not change the rates alone.
    #[test]
    fn partial_sections_take_the_defaults() {
        let cfg = CompressConfig::from_json(
            r#"{"retrain": {"lr": 0.5, "optimizer": {"sgd": {"momentum": 0.9, "nesterov": false}}},
                "sharing": {"refine": {"n_min": 20}}}"#,
        )
        .unwrap();
        let want = TrainConfig {
            lr: 0.5,
            optimizer: bnn_train::OptimizerKind::Sgd {
                momentum: 0.9,
                nesterov: false,
            },
            ..TrainConfig::retrain(PAPER_RETRAIN_EPOCHS)
        };
        assert_eq!(cfg.retrain, want);
        assert_eq!(cfg.sharing.refine.n_min, 20);
        assert_eq!(cfg.sharing.gmm, SwshareConfig::default().gmm);
        for bad in [
            r#"{"retrain": {"lr": -1}}"#,
            r#"{"retrain": {"rate": 1}}"#,
            r#"{"retrain": {"epochs": "many"}}"#,
            r#"[1, 2]"#,
        ] {
            assert!(CompressConfig::from_json(bad).is_err(), "{bad}");
        }
    }
}
