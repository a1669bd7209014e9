//! The paper's experiment for one data set and architecture: deterministic training, Bayes by
//! Backprop, and 2DGBNN ([`swshare::compress::compress`]), each evaluated with Monte-Carlo
//! sampling, and the table in the paper's columns; over several seeds with [`run_seeds`].
//!
//! [`run`] is a loop over [`Method::MAIN`]: each method trains (or resumes) in its stage
//! directory ([`StageDir`]), is evaluated once (the row is cached there), and then on the
//! setup's corruptions and on the validation split (its own rows, for choices). The 2DGBNN
//! stage is one function, `gbnn_stage`, which the tables' variants run too, so a row is
//! computed the same way wherever it is made.

use std::time::Instant;

use bnn_data::DataLoader;
use bnn_data::Dataset;
use bnn_layers::{bayes_from_deterministic, count_params};
use bnn_metrics::SigmaMovement;
use bnn_models::{Kind, ModelConfig, Network};
use bnn_train::{
    Evaluation, Observer, TrainConfig, evaluate_tempered, evaluation_of, predict, train,
};
use burn::module::Module;
use burn::prelude::*;
use swshare::burn_edges::full_bnn_data;
use swshare::compress::{
    CompressConfig, Compressed, compress, retrain_without_sharing, stage3_steps,
};
use swshare::format::full_bnn_to_bytes;
use swshare::retrain_stop::RetrainStop;
use swshare::snr_prune::{PruneTarget, prune_to, pruned_file, pruned_parameters, retrain_pruned};

pub use swbnn_ops::corruptions::{
    CORRUPTION_SEED, evaluate_corruptions, evaluate_corruptions_into, weight_stats,
};
use swbnn_ops::corruptions::{no_evaluation, temperatures};

use crate::Error;
use crate::calibration::StoredCalibration;
use crate::calibration::{self, Calibration};
use crate::data::{ExperimentData, train_loader};
use crate::method::Method;
use crate::results::{
    CorruptionRow, Outcome, Row, SeedSummary, markdown_seeds, mean_corruptions, summarise,
};
use crate::setup::Setup;
use crate::store::{self, StageDir};
use crate::validation::ValidationRow;

/// What the experiment reports along the way.
pub trait Progress: Observer {
    /// A stage starts.
    fn stage(&mut self, _name: &str) {}
    /// A row is ready.
    fn row(&mut self, _row: &Row) {}
}

/// Evaluates `model` with `samples` Monte Carlo samples, keeping the (raw) predictions in the
/// stage's directory ([`StageDir::save_predictions`]): the report's figures reuse them instead
/// of a second Monte Carlo pass over the saved model. With a `temperature`, also returns the
/// evaluation at it, from the same forward passes.
fn evaluate_and_keep(
    stage: &StageDir,
    model: &Network,
    data: &ExperimentData,
    samples: usize,
    temperature: Option<f64>,
) -> Result<(Evaluation, Option<Evaluation>), Error> {
    let mut evs = evaluate_tempered(
        model,
        &data.test_loader,
        data.ood_loader.as_ref(),
        samples,
        &temperatures(temperature),
    )?
    .into_iter();
    let (ev, test_pred, ood_pred) = evs.next().ok_or_else(no_evaluation)?;
    stage.save_predictions(samples, &test_pred, ood_pred.as_ref())?;
    Ok((ev, evs.next().map(|(cal, _, _)| cal)))
}

/// A row with its calibrated metrics when there is a temperature.
fn calibrated_row(row: Row, temperature: Option<f64>, calibrated: Option<Evaluation>) -> Row {
    match temperature.zip(calibrated) {
        Some((t, ev)) => row.with_calibrated(t, &ev),
        None => row,
    }
}

/// Salt of the device seed before a temperature fit, so the fit's weight samples differ from
/// the test evaluation's (both seeded from the method's [`evaluation_seed`]).
const CALIBRATION_SEED_SALT: u64 = 0xca1b_0000;

/// Fits `model`'s temperature on the validation split (`None` when the run holds none out),
/// with the device seeded from `seed`, and keeps it in `stage`'s directory
/// ([`crate::calibration::CALIBRATION_FILE`]). Returns the fitted temperature.
pub(crate) fn calibrate_stage(
    stage: &StageDir,
    model: &Network,
    validation: Option<&DataLoader>,
    samples: usize,
    device: &Device,
    seed: u64,
) -> Result<Option<Calibration>, Error> {
    let Some(validation) = validation else {
        return Ok(None);
    };
    if validation.dataset().is_empty() {
        return Ok(None);
    }
    device.seed(seed ^ CALIBRATION_SEED_SALT);
    let fit = calibration::fit(model, validation, samples)?;
    stage.model().write_calibration(&fit)?;
    Ok(Some(fit))
}

/// Bytes of the model's burn record (what a deterministic network's file takes).
pub(crate) fn record_bytes(model: &Network) -> Result<u64, Error> {
    let bytes = model.clone().into_record().into_bytes()?;
    Ok(bytes.len() as u64)
}

/// Trains `model` in `stage` (checkpointed there, resumed when the setup resumes). Returns the
/// model and the stage's training seconds, including the epochs an earlier run checkpointed.
pub(crate) fn train_stage(
    stage: &StageDir,
    model: Network,
    config: &ModelConfig,
    loader: &DataLoader,
    train_config: &TrainConfig,
    progress: &mut dyn Progress,
) -> Result<(Network, f64), Error> {
    let checkpointer = stage.checkpointer()?;
    // A checkpoint of another setup is refused before config.json is rewritten.
    checkpointer.check(&model, loader, train_config)?;
    stage.model().write_config(config)?;
    let resumed = stage.resumed_seconds()?;
    let started = Instant::now();
    let (model, _) = train(model, loader, train_config, Some(checkpointer), progress)?;
    Ok((model, resumed + started.elapsed().as_secs_f64()))
}

/// Opens the stage `name` of a 2DGBNN configuration `cfg` (its cached row holds when its
/// checkpoint has `cfg`'s retraining epochs, see [`StageDir::training`]).
pub(crate) fn open_gbnn_stage(
    setup: &Setup,
    name: &str,
    cfg: &CompressConfig,
) -> Result<StageDir, Error> {
    StageDir::open(setup, name)?
        .training(cfg.retrain.epochs, cfg.retrain_stop != RetrainStop::Epochs)
}

/// What [`gbnn_stage`] made.
pub(crate) struct GbnnStage {
    /// The stage's directory.
    pub(crate) stage: StageDir,
    /// The evaluated row (cached in the stage).
    pub(crate) row: Row,
    /// The model as read back from its `.swb` file: what a user of the file gets.
    pub(crate) model: Network,
    /// The result of the method, with its plan and report.
    pub(crate) compressed: Compressed,
}

/// The 2DGBNN stage of configuration `cfg`: the method on the Bayes-by-Backprop model `bayes`
/// (retraining checkpointed in `stage`, resumed from there), the model written as the stage's
/// `.swb` file and its sharing plan beside it, and the row of the model read back from the
/// file (`int8_outliers` is lossy), evaluated with the device seeded by `cfg.retrain.seed`, so
/// the row does not depend on whether the retraining ran here or was resumed. The main table
/// and every table variant make their 2DGBNN rows here.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gbnn_stage(
    setup: &Setup,
    stage: StageDir,
    cfg: &CompressConfig,
    bayes: &Network,
    bayes_config: &ModelConfig,
    data: &ExperimentData,
    device: &Device,
    progress: &mut dyn Progress,
) -> Result<GbnnStage, Error> {
    let resumed = stage.resumed_seconds()?;
    let loader = training_loader(setup, data, &cfg.retrain)?;
    let started = Instant::now();
    // Stage 3's stop rule reads the validation split (an error when the setup has none).
    let validation = (!data.validation.is_empty()).then_some(&data.validation_loader);
    let compressed = compress(
        bayes,
        bayes_config,
        &loader,
        validation,
        cfg,
        Some(stage.checkpointer()?),
        progress,
    )?;
    let seconds = resumed + started.elapsed().as_secs_f64();
    let (sizes, model) = compressed.save_and_reload(stage.model().swb_path(), device)?;
    stage.save_plan(&compressed.plan)?;
    let parameters = count_params(&model).trainable;
    let row = stage.row(|| {
        let fit = calibrate_stage(
            &stage,
            &model,
            calibration_split(data),
            setup.samples,
            device,
            cfg.retrain.seed,
        )?;
        let t = fit.map(|c| c.temperature);
        // The file a user gets carries the temperature; its size is the row's.
        let mut bytes = sizes.total;
        if t.is_some() {
            let swb = stage.model().swb_path();
            swshare::format::set_temperature(&swb, t)?;
            bytes = std::fs::metadata(&swb)
                .map_err(|e| Error::io(&swb, e))?
                .len();
        }
        device.seed(cfg.retrain.seed);
        let (ev, cal) = evaluate_and_keep(&stage, &model, data, setup.samples, t)?;
        let row = Row::new(
            setup.arch,
            Method::Gbnn2d,
            ev,
            parameters,
            bytes,
            seconds,
            weight_stats(&model)?,
        )
        .with_plan(&compressed.report);
        Ok(calibrated_row(row, t, cal))
    })?;
    // `save_and_reload` rewrote the file: it carries the stage's temperature again, whether
    // fitted just now or by the run whose row is cached.
    if let Some(c) = stage.model().read_calibration()? {
        swshare::format::set_temperature(stage.model().swb_path(), Some(c.temperature))?;
    }
    Ok(GbnnStage {
        stage,
        row,
        model,
        compressed,
    })
}

/// Bytes of the full BNN's file of `bayes` (every weight's `(mu, rho)`, the temperature `t`).
fn full_bnn_bytes(bayes: &Network, config: &ModelConfig, t: Option<f64>) -> Result<u64, Error> {
    let full = full_bnn_data(bayes, config)?;
    let bytes = full_bnn_to_bytes(
        &full.arch,
        &full.layers,
        &full.mu,
        &full.rho,
        &full.unshared,
        t,
    )?;
    Ok(bytes.len() as u64)
}

/// The sigma of every weight (not bias) of a Bayesian model, in visiting order.
fn weight_sigmas(model: &Network) -> Vec<f32> {
    bnn_layers::export_bayes(model, None)
        .into_iter()
        .filter(|t| t.role == bnn_layers::ParamRole::Weight)
        .flat_map(|t| t.sigma)
        .collect()
}

/// Name of the stage-3-only baseline's stage.
pub(crate) const UNSHARED_RETRAIN_STAGE: &str = "stage3-unshared";

/// The stage-3-only baseline's row: the Bayes-by-Backprop model `bayes` retrained with
/// 2DGBNN's stage-3 settings (`setup.compress.retrain`) for as many steps as the main 2DGBNN
/// stage's retraining took (read from its checkpoint), no sharing
/// ([`retrain_without_sharing`], checkpointed in its stage); then calibrated, evaluated and
/// sized (the full BNN's file) as the BBB row is, with the device seeded as 2DGBNN's row.
pub(crate) fn unshared_retrain_row(
    setup: &Setup,
    bayes: &Network,
    bayes_config: &ModelConfig,
    data: &ExperimentData,
    device: &Device,
    progress: &mut dyn Progress,
) -> Result<Row, Error> {
    let cfg = &setup.compress;
    let stage =
        StageDir::open(setup, UNSHARED_RETRAIN_STAGE)?.training(cfg.retrain.epochs, true)?;
    if let Some(r) = stage.cached_row()? {
        return Ok(r);
    }
    progress.stage(UNSHARED_RETRAIN_STAGE);
    let loader = training_loader(setup, data, &cfg.retrain)?;
    // The main 2DGBNN stage has finished: its checkpoint tells how far stage 3 went.
    let main = store::stage_path(&setup.out_dir, Method::Gbnn2d.name());
    let history = bnn_train::Checkpointer::new(main)?
        .state()?
        .ok_or_else(|| missing_stage(setup, Method::Gbnn2d))?
        .history;
    let steps = stage3_steps(&history, loader.num_batches());
    store::write_json(&stage.path().join(store::COMPRESS_CONFIG_FILE), cfg)?;
    let resumed = stage.resumed_seconds()?;
    let started = Instant::now();
    let out = retrain_without_sharing(
        bayes,
        bayes_config,
        &loader,
        cfg,
        steps,
        Some(stage.checkpointer()?),
        progress,
    )?;
    let seconds = resumed + started.elapsed().as_secs_f64();
    let model = out.model.valid();
    let row = stage.row(|| {
        let fit = calibrate_stage(
            &stage,
            &model,
            calibration_split(data),
            setup.samples,
            device,
            cfg.retrain.seed,
        )?;
        let t = fit.map(|c| c.temperature);
        device.seed(cfg.retrain.seed);
        let (ev, cal) = evaluate_and_keep(&stage, &model, data, setup.samples, t)?;
        let row = Row::new(
            setup.arch,
            Method::Bbb,
            ev,
            count_params(&model).trainable,
            full_bnn_bytes(&model, bayes_config, t)?,
            seconds,
            weight_stats(&model)?,
        );
        Ok(calibrated_row(row, t, cal))
    })?;
    progress.row(&row);
    Ok(row)
}

/// The SNR-pruning baselines' stages: down to 2DGBNN's trainable parameters, and down to its
/// file bytes.
pub(crate) const SNR_PRUNE_STAGES: [&str; 2] = ["snr-prune-params", "snr-prune-bytes"];

/// An SNR-pruning baseline's row ([`swshare::snr_prune`]): the Bayes-by-Backprop model `bayes`
/// pruned by `|mu| / sigma` down to `target` (2DGBNN's trainable parameters or file bytes),
/// retrained with 2DGBNN's stage-3 settings and stop rule, the pruned weights held at zero,
/// in the stage `stage` (checkpointed); then calibrated and evaluated as the BBB row is, with
/// the device seeded as 2DGBNN's row. Its bytes are the sparse file's without the
/// calibration temperature ([`swshare::snr_prune::pruned_file`]), its parameters what
/// pruning leaves trainable.
#[allow(clippy::too_many_arguments)]
pub(crate) fn snr_pruned_row(
    setup: &Setup,
    stage: &str,
    target: PruneTarget,
    bayes: &Network,
    bayes_config: &ModelConfig,
    data: &ExperimentData,
    device: &Device,
    progress: &mut dyn Progress,
) -> Result<Row, Error> {
    let cfg = &setup.compress;
    let name = stage;
    let stage = StageDir::open(setup, name)?.training(cfg.retrain.epochs, true)?;
    if let Some(r) = stage.cached_row()? {
        return Ok(r);
    }
    progress.stage(name);
    let loader = training_loader(setup, data, &cfg.retrain)?;
    let (pruned, mask) = prune_to(bayes, bayes_config, target)?;
    store::write_json(&stage.path().join(store::COMPRESS_CONFIG_FILE), cfg)?;
    let resumed = stage.resumed_seconds()?;
    let started = Instant::now();
    let (model, _) = retrain_pruned(
        pruned,
        &mask,
        bayes,
        bayes_config,
        &loader,
        calibration_split(data),
        cfg,
        Some(stage.checkpointer()?),
        progress,
    )?;
    let seconds = resumed + started.elapsed().as_secs_f64();
    let model = model.valid();
    let row = stage.row(|| {
        let fit = calibrate_stage(
            &stage,
            &model,
            calibration_split(data),
            setup.samples,
            device,
            cfg.retrain.seed,
        )?;
        let t = fit.map(|c| c.temperature);
        device.seed(cfg.retrain.seed);
        let (ev, cal) = evaluate_and_keep(&stage, &model, data, setup.samples, t)?;
        let row = Row::new(
            setup.arch,
            Method::Bbb,
            ev,
            pruned_parameters(&model, &mask),
            pruned_file(&model, bayes_config, &mask, None)?.len() as u64,
            seconds,
            weight_stats(&model)?,
        );
        Ok(calibrated_row(row, t, cal))
    })?;
    progress.row(&row);
    Ok(row)
}

/// One experiment's data, device and architectures, shared by its stages.
struct Experiment<'a> {
    setup: &'a Setup,
    data: ExperimentData,
    /// The autodiff device every stage trains on.
    device: Device,
    /// The deterministic architecture.
    config: ModelConfig,
    /// The Bayesian architecture.
    bayes_config: ModelConfig,
}

/// The training loader of a stage trained with `tc` (its batch size and seed): the setup's
/// training split with the data set's augmentation.
pub(crate) fn training_loader(
    setup: &Setup,
    data: &ExperimentData,
    tc: &TrainConfig,
) -> Result<DataLoader, Error> {
    train_loader(
        &setup.dataset,
        &data.stats,
        data.train.clone(),
        tc.batch_size,
        tc.seed,
        setup.workers,
    )
}

/// A trained stage: its directory, model and row.
type Trained = (StageDir, Network, Row);

impl Experiment<'_> {
    fn train_loader(&self, tc: &TrainConfig) -> Result<DataLoader, Error> {
        training_loader(self.setup, &self.data, tc)
    }

    fn deterministic(&self, progress: &mut dyn Progress) -> Result<Trained, Error> {
        let setup = self.setup;
        let tc = &setup.deterministic;
        let stage =
            StageDir::open(setup, Method::Deterministic.name())?.training(tc.epochs, false)?;
        let loader = self.train_loader(tc)?;
        self.device.seed(tc.seed);
        let model = self.config.init(&self.device)?;
        let (det, seconds) = train_stage(&stage, model, &self.config, &loader, tc, progress)?;
        let row = stage.row(|| {
            let fit = calibrate_stage(
                &stage,
                &det,
                calibration_split(&self.data),
                1,
                &self.device,
                evaluation_seed(setup, Method::Deterministic),
            )?;
            let t = fit.map(|c| c.temperature);
            let (ev, cal) = evaluate_and_keep(&stage, &det, &self.data, 1, t)?;
            let row = Row::new(
                setup.arch,
                Method::Deterministic,
                ev,
                count_params(&det).trainable,
                record_bytes(&det)?,
                seconds,
                Vec::new(),
            );
            Ok(calibrated_row(row, t, cal))
        })?;
        Ok((stage, det, row))
    }

    fn bbb(&self, det: Option<&Network>, progress: &mut dyn Progress) -> Result<Trained, Error> {
        let setup = self.setup;
        let tc = &setup.bbb;
        let stage = StageDir::open(setup, Method::Bbb.name())?.training(tc.epochs, false)?;
        self.device.seed(tc.seed);
        let mut bayes = self.bayes_config.init(&self.device)?;
        if setup.bbb_from_deterministic {
            let det = det.ok_or_else(|| missing_stage(setup, Method::Deterministic))?;
            bayes = bayes_from_deterministic(det, bayes)?.0;
        }
        let loader = self.train_loader(tc)?;
        // The initialisation is seeded: a resumed run measures from the same sigmas.
        let initial = weight_sigmas(&bayes);
        let (bayes, seconds) =
            train_stage(&stage, bayes, &self.bayes_config, &loader, tc, progress)?;
        let row = stage.row(|| {
            let fit = calibrate_stage(
                &stage,
                &bayes,
                calibration_split(&self.data),
                setup.samples,
                &self.device,
                evaluation_seed(setup, Method::Bbb),
            )?;
            let t = fit.map(|c| c.temperature);
            // Seeded, so the numbers do not depend on whether training ran or was resumed.
            self.device.seed(evaluation_seed(setup, Method::Bbb));
            let (ev, cal) = evaluate_and_keep(&stage, &bayes, &self.data, setup.samples, t)?;
            let full_bytes = full_bnn_bytes(&bayes, &self.bayes_config, t)?;
            let row = Row::new(
                setup.arch,
                Method::Bbb,
                ev,
                count_params(&bayes).trainable,
                full_bytes,
                seconds,
                weight_stats(&bayes)?,
            );
            let row = Row {
                sigma_movement: Some(SigmaMovement::between(&initial, &weight_sigmas(&bayes))?),
                ..row
            };
            Ok(calibrated_row(row, t, cal))
        })?;
        Ok((stage, bayes, row))
    }

    /// `method`'s row on the validation split against the validation OOD set, cached in its
    /// stage (`None` without a validation split). Evaluated with the device seeded as for the
    /// test row, so a resumed run gives the same numbers.
    fn validation(
        &self,
        stage: &StageDir,
        model: &Network,
        method: Method,
    ) -> Result<Option<ValidationRow>, Error> {
        if self.data.validation.is_empty() {
            return Ok(None);
        }
        let setup = self.setup;
        let row = stage.validation_row(|| {
            self.device.seed(evaluation_seed(setup, method));
            let samples = method.passes(setup.samples);
            // In `evaluate`'s order (validation, then the tile-shuffled set), so that its
            // numbers do not depend on whether half A follows.
            let pred = predict(model, &self.data.validation_loader, samples)?;
            let tiles = self
                .data
                .validation_ood_loader
                .as_ref()
                .map(|l| predict(model, l, samples))
                .transpose()?;
            let ev = evaluation_of(&pred, tiles.as_ref().map(|p| &p.predictive), samples)?;
            let half_a = match &self.data.ood_half_a_loader {
                Some(l) => {
                    let out = predict(model, l, samples)?;
                    Some(evaluation_of(&pred, Some(&out.predictive), samples)?)
                }
                None => None,
            };
            Ok(ValidationRow::new(method, &ev, half_a.as_ref()))
        })?;
        Ok(Some(row))
    }

    /// `method`'s rows on the setup's corruptions, cached in its stage.
    fn corruptions(
        &self,
        stage: &StageDir,
        model: &Network,
        method: Method,
    ) -> Result<Vec<CorruptionRow>, Error> {
        let setup = self.setup;
        stage.corruptions(&setup.corruptions, || {
            // Seeded, as the row: a run resumed after the row was kept draws the same noise.
            self.device.seed(evaluation_seed(setup, method));
            evaluate_corruptions_into(
                model,
                method.name(),
                &self.data.test,
                self.data.stats.clone(),
                &setup.corruptions,
                method.passes(setup.samples),
                setup.workers,
                calibration::ModelFile::at(stage.path()).temperature()?,
                Some(&stage.corruption_predictions_dir()),
            )
        })
    }
}

/// The seed of the device before a Monte Carlo evaluation of `method`'s model in a run of
/// `setup` (its training seed), so an evaluation gives the same numbers whether the model was
/// trained in this process or resumed from its checkpoint. The quantised BNN is Bayes by
/// Backprop's model; the ensemble's first member is the deterministic network.
pub(crate) fn evaluation_seed(setup: &Setup, method: Method) -> u64 {
    match method {
        Method::Deterministic | Method::Ensemble => setup.deterministic.seed,
        Method::Bbb | Method::Qbnn => setup.bbb.seed,
        Method::Gbnn2d => setup.compress.retrain.seed,
    }
}

/// The run's validation split, the data every temperature is fitted on (`None`: the run holds
/// none out, and its rows have no calibrated metrics).
pub(crate) fn calibration_split(data: &ExperimentData) -> Option<&DataLoader> {
    Some(&data.validation_loader).filter(|_| !data.validation.is_empty())
}

fn missing_stage(setup: &Setup, method: Method) -> Error {
    Error::MissingStage {
        dir: store::stage_path(&setup.out_dir, method.name())
            .display()
            .to_string(),
        stage: method.name().to_string(),
    }
}

/// Runs the three methods of [`Method::MAIN`] and returns the table rows. Models are saved
/// under `out_dir`.
pub fn run(setup: &Setup, device: &Device, progress: &mut dyn Progress) -> Result<Outcome, Error> {
    std::fs::create_dir_all(&setup.out_dir).map_err(|e| Error::io(&setup.out_dir, e))?;
    store::clear_stages_unless_resuming(setup)?;
    let data = ExperimentData::open(setup)?;
    // The run's `setup.json` records what it read, so that runs can be checked to have read
    // the same files.
    let recorded = Setup {
        data_sha256: data.data_sha256.clone(),
        ..setup.clone()
    };
    store::write_setup(&setup.out_dir, &recorded)?;
    let (c, h, _) = data.test.shape();
    // A user's test split numbers its classes by the labels it holds, so it may have fewer
    // than the training split (a preset's are the same).
    let classes = data.test.classes().max(data.train.classes());
    let mut config = ModelConfig::for_input(setup.arch, Kind::Deterministic, classes, c, h);
    if let Some(widths) = &setup.mlp_hidden {
        config = config.with_mlp_hidden(widths.clone());
    }
    config.bayes = setup.bayes.clone();
    config.trained_on = Some(data.trained_on.clone());
    // A user's data set has no published constants: its models record the normalisation
    // measured on the training examples, so that `swbnn eval` and the report read them as
    // trained (a preset's models keep the preset constants, as before).
    if setup.dataset.preset().is_none() {
        config.normalization = Some(crate::data::norm_record(&data.stats));
    }
    let exp = Experiment {
        setup,
        bayes_config: config.clone().with_kind(Kind::Bayesian),
        config,
        data,
        device: device.clone().autodiff(),
    };

    let mut det: Option<Network> = None;
    let mut bayes: Option<Network> = None;
    let mut report = None;
    let mut rows = Vec::with_capacity(Method::MAIN.len());
    let mut corruptions = Vec::new();
    let mut validation = Vec::new();
    for method in Method::MAIN {
        progress.stage(method.name());
        let (stage, model, row) = match method {
            Method::Deterministic => exp.deterministic(progress)?,
            Method::Bbb => exp.bbb(det.as_ref(), progress)?,
            Method::Gbnn2d => {
                let bbb = bayes
                    .as_ref()
                    .ok_or_else(|| missing_stage(setup, Method::Bbb))?;
                let stage = open_gbnn_stage(setup, method.name(), &setup.compress)?;
                let g = gbnn_stage(
                    setup,
                    stage,
                    &setup.compress,
                    bbb,
                    &exp.bayes_config,
                    &exp.data,
                    &exp.device,
                    progress,
                )?;
                // A copy of the model beside the tables, under the architecture's name, with
                // its temperature.
                let copy =
                    setup
                        .out_dir
                        .join(format!("{}-{}.swb", setup.arch.name(), method.name()));
                g.compressed.save(&copy)?;
                if let Some(c) = g.stage.model().read_calibration()? {
                    swshare::format::set_temperature(&copy, Some(c.temperature))?;
                }
                report = Some(g.compressed.report);
                (g.stage, g.model, g.row)
            }
            Method::Qbnn | Method::Ensemble => {
                return Err(Error::Usage(format!(
                    "`{method}` is a baseline of the tables, not a stage of the main experiment"
                )));
            }
        };
        progress.row(&row);
        corruptions.extend(exp.corruptions(&stage, &model, method)?);
        validation.extend(exp.validation(&stage, &model, method)?);
        rows.push(row);
        match method {
            Method::Deterministic => det = Some(model),
            Method::Bbb => bayes = Some(model),
            _ => {}
        }
    }
    Ok(Outcome {
        rows,
        report: report.ok_or_else(|| missing_stage(setup, Method::Gbnn2d))?,
        corruptions,
        validation,
    })
}

/// Runs [`run`] for seeds `0..seeds` (each in `out_dir/seed-<i>` with its own `setup.json`,
/// see [`Setup::for_seed`]) and writes each seed's tables (and validation rows) there, then
/// `table.md` (mean ± sd), `table.json` (per-seed rows and summaries) and the validation
/// summaries into `out_dir`. One seed runs in `out_dir` itself, with its own tables
/// there, as [`crate::tables::run_seeds`] does. Resumes per seed with `setup.resume`.
pub fn run_seeds(
    setup: &Setup,
    seeds: usize,
    device: &Device,
    progress: &mut dyn Progress,
) -> Result<(Vec<SeedSummary>, Vec<Outcome>), Error> {
    if seeds <= 1 {
        let outcome = run(setup, device, progress)?;
        store::write_tables(&setup.out_dir, &outcome)?;
        return Ok((
            summarise(std::slice::from_ref(&outcome.rows)),
            vec![outcome],
        ));
    }
    let mut outcomes = Vec::with_capacity(seeds);
    for i in 0..seeds as u64 {
        progress.stage(&format!("seed {} of {seeds}", i + 1));
        let s = setup.for_seed(i);
        // Each seed's directory records its own seed number.
        store::write_setup(&s.out_dir, &s)?;
        let outcome = run(&s, device, progress)?;
        store::write_tables(&s.out_dir, &outcome)?;
        outcomes.push(outcome);
    }
    let runs: Vec<Vec<Row>> = outcomes.iter().map(|o| o.rows.clone()).collect();
    let summaries = summarise(&runs);
    if !setup.corruptions.is_empty() {
        let all: Vec<CorruptionRow> = outcomes
            .iter()
            .flat_map(|o| o.corruptions.iter().cloned())
            .collect();
        let seeds: Vec<&Vec<CorruptionRow>> = outcomes.iter().map(|o| &o.corruptions).collect();
        store::write_seed_corruptions(&setup.out_dir, &mean_corruptions(&all), &seeds)?;
    }
    store::write_seed_tables(
        &setup.out_dir,
        &markdown_seeds(&summaries),
        &summaries,
        &runs,
    )?;
    let validation: Vec<Vec<ValidationRow>> =
        outcomes.iter().map(|o| o.validation.clone()).collect();
    store::write_seed_validation(&setup.out_dir, &validation)?;
    Ok((summaries, outcomes))
}
