//! The paper's experiment for one data set and architecture: deterministic training, Bayes by
//! Backprop, and 2DGBNN ([`swshare::compress::compress`]), each evaluated with Monte-Carlo
//! sampling, and the table in the paper's columns; over several seeds with [`run_seeds`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bnn_data::DataLoader;
use bnn_data::{Corrupted, Corruption, Dataset, DatasetId, NormStats};
use bnn_layers::{bayes_from_deterministic, count_params, export_posterior};
use bnn_metrics::WeightStats;
use bnn_models::{Arch, BayesOptions, Kind, ModelConfig, Network};
use bnn_train::{
    Checkpointer, Evaluation, Observer, TrainConfig, UncertaintyDiagnostics,
    evaluate_with_predictions, train, write_atomic,
};
use burn::module::Module;
use burn::prelude::*;
use serde::{Deserialize, Serialize};
use swshare::CompressionReport;
use swshare::burn_edges::full_bnn_data;
use swshare::compress::{CompressConfig, compress};
use swshare::format::full_bnn_to_bytes;
use swshare::retrain_stop::RetrainStop;

use crate::Error;
use crate::data::{ExperimentData, eval_loader, train_loader};

/// Everything an experiment needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// Data set.
    pub dataset: DatasetId,
    /// Architecture.
    pub arch: Arch,
    /// Where the data are (else the usual search order).
    pub data_dir: Option<PathBuf>,
    /// Out-of-distribution set: kind and directory.
    pub ood: Option<(DatasetId, PathBuf)>,
    /// Training examples used (stratified subset), all if `None`.
    pub train_subset: Option<usize>,
    /// Test examples used, all if `None`.
    pub test_subset: Option<usize>,
    /// Deterministic training.
    pub deterministic: TrainConfig,
    /// Bayes-by-Backprop training (stage 1 pre-training of 2DGBNN).
    pub bbb: TrainConfig,
    /// Start Bayes by Backprop from the deterministic weights (the paper's "with pre-trained").
    pub bbb_from_deterministic: bool,
    /// The Bayesian layers: estimator, sigma initialisation, empirical-prior centres.
    pub bayes: BayesOptions,
    /// 2DGBNN: stages 1-2 (`compress.sharing`) and the stage-3 retraining
    /// (`compress.retrain`).
    pub compress: CompressConfig,
    /// Monte-Carlo samples at evaluation (paper: 30).
    pub samples: usize,
    /// Corruptions of the test set to evaluate every method on (empty: none).
    #[serde(default)]
    pub corruptions: Vec<Corruption>,
    /// Data-loading threads.
    pub workers: usize,
    /// Output directory (models and tables).
    pub out_dir: PathBuf,
    /// Continue an interrupted run in `out_dir`: stages whose checkpoints and rows are there
    /// are not trained or evaluated again. Without it, old stage checkpoints are removed first.
    #[serde(default)]
    pub resume: bool,
}

impl Setup {
    /// The setup of seed number `i` of a multi-seed run: every stage's seed shifted by
    /// `1000 * i` (the data subset stays the same), output in `out_dir/seed-<i>`.
    pub fn for_seed(&self, i: u64) -> Setup {
        let mut s = self.clone();
        let shift = 1000 * i;
        s.deterministic.seed += shift;
        s.bbb.seed += shift;
        s.compress.retrain.seed += shift;
        s.compress.sharing.gmm.seed += shift;
        s.out_dir = self.out_dir.join(format!("seed-{i}"));
        s
    }
}

/// Per-stage state under `out_dir/stages/<stage>/`: the training checkpoint (model, history and
/// the model's `config.json`, so `swbnn eval` and `swbnn compress` take the directory) and,
/// once evaluated, the stage's table row. A long run that stops (power, a crash, Ctrl-C)
/// continues from there with `resume`.
pub(crate) struct Stage {
    pub(crate) dir: PathBuf,
    pub(crate) checkpointer: Checkpointer,
    resume: bool,
    /// The cached results describe a shorter run than this one (see [`Stage::training`]).
    stale: bool,
}

impl Stage {
    pub(crate) fn new(setup: &Setup, name: &str) -> Result<Self, Error> {
        let dir = stages_dir(&setup.out_dir).join(name);
        Ok(Self {
            checkpointer: Checkpointer::new(&dir)?.with_run(serde_json::json!({
                "dataset": setup.dataset.name(),
                "train_subset": setup.train_subset,
            })),
            dir,
            resume: setup.resume,
            stale: false,
        })
    }

    /// The stage trains for `epochs` in this run: a row or corruption rows cached by an earlier
    /// run whose checkpoint has fewer epochs describe the shorter run's model, so they are
    /// evaluated again once the stage has trained on. A checkpoint a stopping rule ended
    /// ([`bnn_train::CheckpointState::stopped`]) is finished when this run has such a rule too
    /// (`stops_early`): the rule stops it again at once. Call it before training.
    pub(crate) fn training(mut self, epochs: usize, stops_early: bool) -> Result<Self, Error> {
        self.stale = match self.checkpointer.state()? {
            None => epochs > 0,
            Some(s) => s.complete_epochs() < epochs && !(s.stopped && stops_early),
        };
        Ok(self)
    }

    fn row_path(&self) -> PathBuf {
        self.dir.join("row.json")
    }

    /// Writes the model's architecture beside its checkpoint.
    pub(crate) fn write_config(&self, config: &ModelConfig) -> Result<(), Error> {
        let json = serde_json::to_vec_pretty(config).map_err(Error::json)?;
        Ok(write_atomic(&self.dir.join("config.json"), &json)?)
    }

    /// Seconds an earlier run spent on this stage's checkpointed epochs (when resuming).
    pub(crate) fn resumed_seconds(&self) -> Result<f64, Error> {
        Ok(match self.checkpointer.state()? {
            Some(s) if self.resume => s.history.iter().map(|e| e.seconds).sum(),
            _ => 0.0,
        })
    }

    /// Trains `model` with this stage's checkpointer. Returns the model and the stage's
    /// training seconds, including the epochs an earlier run checkpointed when resuming.
    pub(crate) fn train(
        &self,
        model: Network,
        config: &ModelConfig,
        loader: &bnn_data::DataLoader,
        train_config: &TrainConfig,
        progress: &mut dyn Progress,
    ) -> Result<(Network, f64), Error> {
        // A checkpoint of another setup is refused before config.json is rewritten.
        self.checkpointer.check(&model, loader, train_config)?;
        self.write_config(config)?;
        let resumed = self.resumed_seconds()?;
        let started = Instant::now();
        let (model, _) = train(
            model,
            loader,
            train_config,
            Some(&self.checkpointer),
            progress,
        )?;
        Ok((model, resumed + started.elapsed().as_secs_f64()))
    }

    /// The row evaluated by an earlier run, when resuming (and it describes the model this run
    /// ends with, see [`Stage::training`]).
    pub(crate) fn cached_row(&self) -> Result<Option<Row>, Error> {
        let path = self.row_path();
        if !self.resume || !path.exists() || self.stale {
            return Ok(None);
        }
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::parse(&path, e))
    }

    pub(crate) fn save_row(&self, row: &Row) -> Result<(), Error> {
        let json = serde_json::to_vec_pretty(row).map_err(Error::json)?;
        Ok(write_atomic(&self.row_path(), &json)?)
    }

    /// The stage's corruption rows: cached by an earlier run (when resuming, the cache holds
    /// exactly `setup.corruptions` and describes this run's model), else `eval()` (then cached).
    fn corruptions(
        &self,
        setup: &Setup,
        eval: impl FnOnce() -> Result<Vec<CorruptionRow>, Error>,
    ) -> Result<Vec<CorruptionRow>, Error> {
        if setup.corruptions.is_empty() {
            return Ok(Vec::new());
        }
        let path = self.dir.join("corruptions.json");
        if self.resume && path.exists() && !self.stale {
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            let rows: Vec<CorruptionRow> =
                serde_json::from_slice(&bytes).map_err(|e| Error::parse(&path, e))?;
            let cached: Vec<Corruption> = rows.iter().map(|r| r.corruption).collect();
            if cached == setup.corruptions {
                return Ok(rows);
            }
        }
        let rows = eval()?;
        let json = serde_json::to_vec_pretty(&rows).map_err(Error::json)?;
        write_atomic(&path, &json)?;
        Ok(rows)
    }

    /// The cached row, or `eval()` (then cached).
    pub(crate) fn row(&self, eval: impl FnOnce() -> Result<Row, Error>) -> Result<Row, Error> {
        if let Some(row) = self.cached_row()? {
            return Ok(row);
        }
        let row = eval()?;
        self.save_row(&row)?;
        Ok(row)
    }
}

pub(crate) fn stages_dir(out_dir: &Path) -> PathBuf {
    out_dir.join("stages")
}

/// One row of the results table (`table.json` is a list of these).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Architecture name.
    pub arch: String,
    /// `deterministic`, `bbb` or `2dgbnn`.
    pub method: String,
    /// Top-1 accuracy (fraction).
    pub accuracy: f64,
    /// Mean negative log-likelihood.
    pub nll: f64,
    /// Expected calibration error, 15 bins.
    pub ece: f64,
    /// Mean confidence on the test set (above the accuracy: over-confident).
    pub mean_confidence: f64,
    /// Outlier weights (2DGBNN).
    pub outliers: Option<usize>,
    /// Ellipse weights (2DGBNN).
    pub ellipses: Option<usize>,
    /// Shared Gaussians after merging (2DGBNN).
    pub gaussians: Option<usize>,
    /// Trainable parameters.
    pub parameters: usize,
    /// `1 - parameters / parameters(BBB)`, the paper's compression ratio.
    pub compression_ratio: Option<f64>,
    /// Size of the saved model file in bytes.
    pub model_bytes: u64,
    /// OOD AUROC with the max-probability score, if an OOD set was given.
    pub ood_auroc: Option<f64>,
    /// OOD AUROC with the predictive-entropy score.
    pub ood_auroc_entropy: Option<f64>,
    /// Seconds spent training this row's own stage.
    pub train_seconds: f64,
    /// Entropy and mutual information on the test and OOD sets.
    pub uncertainty: UncertaintyDiagnostics,
    /// Posterior statistics per weight tensor (Bayesian rows).
    pub weights: Vec<WeightStats>,
}

/// What the experiment reports along the way.
pub trait Progress: Observer {
    /// A stage starts.
    fn stage(&mut self, _name: &str) {}
    /// A row is ready.
    fn row(&mut self, _row: &Row) {}
}

/// The results of [`run`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    /// Table rows: deterministic, bbb, 2dgbnn.
    pub rows: Vec<Row>,
    /// The 2DGBNN compression report.
    pub report: CompressionReport,
    /// Every method on every corruption of [`Setup::corruptions`].
    #[serde(default)]
    pub corruptions: Vec<CorruptionRow>,
}

/// One method on one corrupted test set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorruptionRow {
    /// `deterministic`, `bbb` or `2dgbnn`.
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
}

/// Seed of the corruptions' random choices (noise fields, rotation senses): fixed, so every
/// method and every run sees the same corrupted images.
pub const CORRUPTION_SEED: u64 = 0x00c0_7707;

/// Evaluates `model` on each corruption of `test` (normalised with `stats`) with `samples` MC
/// samples.
pub fn evaluate_corruptions(
    model: &Network,
    method: &str,
    test: &Arc<dyn Dataset>,
    stats: NormStats,
    corruptions: &[Corruption],
    samples: usize,
    workers: usize,
) -> Result<Vec<CorruptionRow>, Error> {
    evaluate_corruptions_into(
        model,
        method,
        test,
        stats,
        corruptions,
        samples,
        workers,
        None,
    )
}

/// [`evaluate_corruptions`], with `keep` also writing each corrupted set's predictions as
/// NumPy arrays into `<keep>/corruptions/` (prefix `<kind>-<severity>`, see
/// [`crate::run_dir::save_predictions_npy`]).
#[allow(clippy::too_many_arguments)]
pub fn evaluate_corruptions_into(
    model: &Network,
    method: &str,
    test: &Arc<dyn Dataset>,
    stats: NormStats,
    corruptions: &[Corruption],
    samples: usize,
    workers: usize,
    keep: Option<&Path>,
) -> Result<Vec<CorruptionRow>, Error> {
    let dir = keep.map(|k| k.join("corruptions"));
    if let Some(d) = &dir {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    corruptions
        .iter()
        .map(|&c| {
            let data: Arc<dyn Dataset> = Arc::new(Corrupted::new(test.clone(), c, CORRUPTION_SEED));
            let loader = eval_loader(stats, data, 256, workers)?;
            let (ev, pred, _) = evaluate_with_predictions(model, &loader, None, samples)?;
            if let Some(d) = &dir {
                let prefix = c.to_string().replace(':', "-");
                crate::run_dir::save_predictions_npy(d, &prefix, &pred)?;
            }
            Ok(CorruptionRow {
                method: method.to_string(),
                corruption: c,
                accuracy: ev.summary.accuracy,
                nll: ev.summary.nll,
                ece: ev.summary.ece,
                mean_confidence: ev.summary.mean_confidence,
            })
        })
        .collect()
}

/// The mean over seeds of each (method, corruption) pair's metrics.
pub fn mean_corruptions(rows: &[CorruptionRow]) -> Vec<CorruptionRow> {
    let mut out: Vec<(CorruptionRow, usize)> = Vec::new();
    for r in rows {
        match out
            .iter_mut()
            .find(|(m, _)| m.method == r.method && m.corruption == r.corruption)
        {
            Some((m, n)) => {
                m.accuracy += r.accuracy;
                m.nll += r.nll;
                m.ece += r.ece;
                m.mean_confidence += r.mean_confidence;
                *n += 1;
            }
            None => out.push((r.clone(), 1)),
        }
    }
    out.into_iter()
        .map(|(mut m, n)| {
            let n = n as f64;
            m.accuracy /= n;
            m.nll /= n;
            m.ece /= n;
            m.mean_confidence /= n;
            m
        })
        .collect()
}

/// The corruption rows as a Markdown table: one line per corruption, accuracy / NLL / ECE of
/// each method side by side.
pub fn markdown_corruptions(rows: &[CorruptionRow]) -> String {
    let mut methods: Vec<&str> = Vec::new();
    let mut corruptions: Vec<Corruption> = Vec::new();
    for r in rows {
        if !methods.contains(&r.method.as_str()) {
            methods.push(&r.method);
        }
        if !corruptions.contains(&r.corruption) {
            corruptions.push(r.corruption);
        }
    }
    let mut s = String::from("| Corruption |");
    for m in &methods {
        s.push_str(&format!(" {m} acc | {m} NLL | {m} ECE |"));
    }
    s.push_str("\n|---|");
    s.push_str(&"---|---|---|".repeat(methods.len()));
    s.push('\n');
    for c in corruptions {
        s.push_str(&format!("| {c} |"));
        for m in &methods {
            match rows.iter().find(|r| r.corruption == c && r.method == *m) {
                Some(r) => s.push_str(&format!(
                    " {:.2}% | {:.3} | {:.4} |",
                    100.0 * r.accuracy,
                    r.nll,
                    r.ece
                )),
                None => s.push_str(" - | - | - |"),
            }
        }
        s.push('\n');
    }
    s
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

/// [`evaluate`], keeping the predictions in the stage's directory
/// ([`crate::run_dir::save_predictions`]): the report's figures reuse them instead of a second
/// Monte Carlo pass over the saved model.
fn evaluate_and_keep(
    stage: &Stage,
    model: &Network,
    test: &DataLoader,
    ood: Option<&DataLoader>,
    samples: usize,
) -> Result<Evaluation, Error> {
    let (ev, test_pred, ood_pred) = evaluate_with_predictions(model, test, ood, samples)?;
    crate::run_dir::save_predictions(&stage.dir, samples, &test_pred, ood_pred.as_ref())?;
    Ok(ev)
}

pub(crate) fn row(
    arch: Arch,
    method: &str,
    ev: Evaluation,
    parameters: usize,
    bytes: u64,
    seconds: f64,
    weights: Vec<WeightStats>,
) -> Row {
    Row {
        arch: arch.name().to_string(),
        method: method.to_string(),
        accuracy: ev.summary.accuracy,
        nll: ev.summary.nll,
        ece: ev.summary.ece,
        mean_confidence: ev.summary.mean_confidence,
        outliers: None,
        ellipses: None,
        gaussians: None,
        parameters,
        compression_ratio: None,
        model_bytes: bytes,
        ood_auroc: ev.ood_max_prob.as_ref().map(|o| o.auroc),
        ood_auroc_entropy: ev.ood_entropy.as_ref().map(|o| o.auroc),
        train_seconds: seconds,
        uncertainty: ev.uncertainty,
        weights,
    }
}

impl Row {
    /// The row with the 2DGBNN plan's counts (outliers, ellipses, Gaussians, compression).
    pub(crate) fn with_plan(mut self, report: &CompressionReport) -> Row {
        self.outliers = Some(report.outliers);
        self.ellipses = Some(report.ellipse_weights);
        self.gaussians = Some(report.gaussians_after_merge);
        self.compression_ratio = Some(report.compression_ratio);
        self
    }
}

pub(crate) fn record_bytes(model: &Network) -> Result<u64, Error> {
    let bytes = model.clone().into_record().into_bytes()?;
    Ok(bytes.len() as u64)
}

/// Runs the three methods and returns the table rows. Models are saved under `out_dir`.
pub fn run(setup: &Setup, device: &Device, progress: &mut dyn Progress) -> Result<Outcome, Error> {
    std::fs::create_dir_all(&setup.out_dir).map_err(|e| Error::io(&setup.out_dir, e))?;
    let stages = stages_dir(&setup.out_dir);
    if !setup.resume && stages.exists() {
        std::fs::remove_dir_all(&stages).map_err(|e| Error::io(&stages, e))?;
    }
    let data = ExperimentData::open(setup)?;
    let (train_data, test_data, stats) = (data.train.clone(), data.test.clone(), data.stats);
    let (c, h, _) = test_data.shape();
    let classes = test_data.classes();
    let workers = setup.workers;
    let (test, ood_loader) = (data.test_loader, data.ood_loader);
    let ad = device.clone().autodiff();
    let mut config = ModelConfig::for_input(setup.arch, Kind::Deterministic, classes, c, h);
    config.bayes = setup.bayes.clone();

    // Deterministic.
    progress.stage("deterministic");
    let stage = Stage::new(setup, "deterministic")?.training(setup.deterministic.epochs, false)?;
    let loader = train_loader(
        setup.dataset,
        train_data.clone(),
        setup.deterministic.batch_size,
        setup.deterministic.seed,
        workers,
    )?;
    ad.seed(setup.deterministic.seed);
    let (det, det_seconds) = stage.train(
        config.init(&ad)?,
        &config,
        &loader,
        &setup.deterministic,
        progress,
    )?;
    let det_row = stage.row(|| {
        let ev = evaluate_and_keep(&stage, &det, &test, ood_loader.as_ref(), 1)?;
        Ok(row(
            setup.arch,
            "deterministic",
            ev,
            count_params(&det).trainable,
            record_bytes(&det)?,
            det_seconds,
            Vec::new(),
        ))
    })?;
    progress.row(&det_row);
    let mut corruptions = stage.corruptions(setup, || {
        evaluate_corruptions_into(
            &det,
            "deterministic",
            &test_data,
            stats,
            &setup.corruptions,
            1,
            workers,
            Some(&stage.dir),
        )
    })?;

    // Bayes by Backprop.
    progress.stage("bbb");
    let stage = Stage::new(setup, "bbb")?.training(setup.bbb.epochs, false)?;
    let bayes_config = config.clone().with_kind(Kind::Bayesian);
    ad.seed(setup.bbb.seed);
    let mut bayes = bayes_config.init(&ad)?;
    if setup.bbb_from_deterministic {
        bayes = bayes_from_deterministic(&det, bayes)?.0;
    }
    let loader = train_loader(
        setup.dataset,
        train_data.clone(),
        setup.bbb.batch_size,
        setup.bbb.seed,
        workers,
    )?;
    let (bayes, bbb_seconds) = stage.train(bayes, &bayes_config, &loader, &setup.bbb, progress)?;
    let bbb_params = count_params(&bayes).trainable;
    let bbb_row = stage.row(|| {
        // Seeded, so the numbers do not depend on whether training ran or was resumed.
        ad.seed(setup.bbb.seed);
        let ev = evaluate_and_keep(&stage, &bayes, &test, ood_loader.as_ref(), setup.samples)?;
        let full = full_bnn_data(&bayes, &bayes_config)?;
        let full_bytes = full_bnn_to_bytes(
            &full.arch,
            &full.layers,
            &full.mu,
            &full.rho,
            &full.unshared,
        )?
        .len() as u64;
        Ok(row(
            setup.arch,
            "bbb",
            ev,
            bbb_params,
            full_bytes,
            bbb_seconds,
            weight_stats(&bayes)?,
        ))
    })?;
    progress.row(&bbb_row);
    corruptions.extend(stage.corruptions(setup, || {
        evaluate_corruptions_into(
            &bayes,
            "bbb",
            &test_data,
            stats,
            &setup.corruptions,
            setup.samples,
            workers,
            Some(&stage.dir),
        )
    })?);

    // 2DGBNN: stages 1-2 on the trained BNN, then retraining, in one library call.
    progress.stage("2dgbnn");
    let stage = Stage::new(setup, "2dgbnn")?.training(
        setup.compress.retrain.epochs,
        setup.compress.retrain_stop != RetrainStop::Epochs,
    )?;
    let resumed = stage.resumed_seconds()?;
    let loader = train_loader(
        setup.dataset,
        train_data,
        setup.compress.retrain.batch_size,
        setup.compress.retrain.seed,
        workers,
    )?;
    let started = Instant::now();
    let compressed = compress(
        &bayes,
        &bayes_config,
        &loader,
        &setup.compress,
        Some(&stage.checkpointer),
        progress,
    )?;
    let gbnn_seconds = resumed + started.elapsed().as_secs_f64();
    // The stage directory holds the model as a `.swb` (what `swbnn eval` loads); a copy sits
    // beside the tables under the architecture's name.
    // Evaluated as a user loads it: decoded from its file (`int8_outliers` is lossy).
    let (sizes, shared) = compressed.save_and_reload(stage.dir.join("model.swb"), &ad)?;
    // The plan keeps what the `.swb` file drops (the Gaussians' covariances, the fates before
    // retraining): the weights figure draws it (`swbnn plot weights`, the report).
    crate::run_dir::save_plan(&stage.dir, &compressed.plan)?;
    compressed.save(
        setup
            .out_dir
            .join(format!("{}-2dgbnn.swb", setup.arch.name())),
    )?;
    let report = compressed.report.clone();
    let params = count_params(&shared).trainable;
    let r = stage.row(|| {
        ad.seed(setup.compress.retrain.seed);
        let ev = evaluate_and_keep(&stage, &shared, &test, ood_loader.as_ref(), setup.samples)?;
        Ok(row(
            setup.arch,
            "2dgbnn",
            ev,
            params,
            sizes.total,
            gbnn_seconds,
            weight_stats(&shared)?,
        )
        .with_plan(&report))
    })?;
    progress.row(&r);
    corruptions.extend(stage.corruptions(setup, || {
        evaluate_corruptions_into(
            &shared,
            "2dgbnn",
            &test_data,
            stats,
            &setup.corruptions,
            setup.samples,
            workers,
            Some(&stage.dir),
        )
    })?);
    Ok(Outcome {
        rows: vec![det_row, bbb_row, r],
        report,
        corruptions,
    })
}

/// The rows as a Markdown table in the paper's columns.
pub fn markdown(rows: &[Row]) -> String {
    let opt = |v: Option<usize>| v.map_or("-".to_string(), |v| v.to_string());
    let mut s = String::from(
        "| Architecture | Method | Accuracy | NLL | ECE | Confidence | #Outliers | #Ellipses | #Gaussians | #Parameters(M) / Compression | Model bytes | OOD AUROC (max-prob / entropy) | Train s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let ratio = r
            .compression_ratio
            .map_or("-".to_string(), |c| format!("{:.1}%", 100.0 * c));
        let ood = match (r.ood_auroc, r.ood_auroc_entropy) {
            (Some(a), Some(b)) => format!("{a:.3} / {b:.3}"),
            _ => "-".into(),
        };
        s.push_str(&format!(
            "| {} | {} | {:.2}% | {:.3} | {:.4} | {:.4} | {} | {} | {} | {:.4}M / {} | {} | {} | {:.0} |\n",
            r.arch,
            r.method,
            100.0 * r.accuracy,
            r.nll,
            r.ece,
            r.mean_confidence,
            opt(r.outliers),
            opt(r.ellipses),
            opt(r.gaussians),
            r.parameters as f64 / 1e6,
            ratio,
            r.model_bytes,
            ood,
            r.train_seconds
        ));
    }
    s
}

/// Writes `table.md`, `table.json` and `report.json` into `dir`, each atomically.
pub fn write_tables(dir: &Path, outcome: &Outcome) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let json = serde_json::to_string_pretty(&outcome.rows).map_err(Error::json)?;
    let report = serde_json::to_string_pretty(&outcome.report).map_err(Error::json)?;
    for (name, body) in [
        ("table.md", markdown(&outcome.rows)),
        ("table.json", json),
        ("report.json", report),
    ] {
        write_atomic(&dir.join(name), body.as_bytes())?;
    }
    if !outcome.corruptions.is_empty() {
        let json = serde_json::to_string_pretty(&outcome.corruptions).map_err(Error::json)?;
        write_atomic(&dir.join("corruptions.json"), json.as_bytes())?;
        write_atomic(
            &dir.join("corruptions.md"),
            markdown_corruptions(&outcome.corruptions).as_bytes(),
        )?;
    }
    Ok(())
}

/// Mean and sample standard deviation of one metric over seeds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanSd {
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (`n - 1`; 0 for one value).
    pub sd: f64,
}

impl MeanSd {
    /// Of `values` (`None` if empty).
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let sd = if values.len() > 1 {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        Some(Self { mean, sd })
    }
}

/// One method's metrics over seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedSummary {
    /// Architecture name.
    pub arch: String,
    /// Method.
    pub method: String,
    /// Seeds aggregated.
    pub seeds: usize,
    /// Accuracy.
    pub accuracy: MeanSd,
    /// NLL.
    pub nll: MeanSd,
    /// ECE.
    pub ece: MeanSd,
    /// Mean confidence.
    pub mean_confidence: MeanSd,
    /// OOD AUROC, max-probability score.
    pub ood_auroc: Option<MeanSd>,
    /// OOD AUROC, entropy score.
    pub ood_auroc_entropy: Option<MeanSd>,
    /// Trainable parameters (of the first seed; they differ only for 2DGBNN).
    pub parameters: usize,
    /// Compression ratio (mean).
    pub compression_ratio: Option<f64>,
    /// Model bytes (mean).
    pub model_bytes: f64,
}

/// Aggregates per-seed rows (`runs[seed][row]`, rows in the same method order) into one
/// summary per method.
pub fn summarise(runs: &[Vec<Row>]) -> Vec<SeedSummary> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(i, r0)| {
            let rows: Vec<&Row> = runs.iter().filter_map(|r| r.get(i)).collect();
            let of = |f: &dyn Fn(&Row) -> f64| {
                MeanSd::of(&rows.iter().map(|r| f(r)).collect::<Vec<_>>())
                    .unwrap_or(MeanSd { mean: 0.0, sd: 0.0 })
            };
            let opt = |f: &dyn Fn(&Row) -> Option<f64>| {
                let v: Option<Vec<f64>> = rows.iter().map(|r| f(r)).collect();
                v.and_then(|v| MeanSd::of(&v))
            };
            SeedSummary {
                arch: r0.arch.clone(),
                method: r0.method.clone(),
                seeds: rows.len(),
                accuracy: of(&|r| r.accuracy),
                nll: of(&|r| r.nll),
                ece: of(&|r| r.ece),
                mean_confidence: of(&|r| r.mean_confidence),
                ood_auroc: opt(&|r| r.ood_auroc),
                ood_auroc_entropy: opt(&|r| r.ood_auroc_entropy),
                parameters: r0.parameters,
                compression_ratio: opt(&|r| r.compression_ratio).map(|m| m.mean),
                model_bytes: of(&|r| r.model_bytes as f64).mean,
            }
        })
        .collect()
}

/// The per-method summaries as a Markdown table (mean ± sd over seeds).
pub fn markdown_seeds(summaries: &[SeedSummary]) -> String {
    let pm = |m: &MeanSd, d: usize| format!("{:.d$} ± {:.d$}", m.mean, m.sd);
    let mut s = String::from(
        "| Architecture | Method | Seeds | Accuracy | NLL | ECE | Confidence | OOD AUROC (max-prob) | OOD AUROC (entropy) | #Parameters / Compression | Model bytes |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in summaries {
        let acc = MeanSd {
            mean: 100.0 * r.accuracy.mean,
            sd: 100.0 * r.accuracy.sd,
        };
        let opt = |m: &Option<MeanSd>| m.as_ref().map_or("-".into(), |m| pm(m, 3));
        let ratio = r
            .compression_ratio
            .map_or("-".to_string(), |c| format!("{:.1}%", 100.0 * c));
        s.push_str(&format!(
            "| {} | {} | {} | {}% | {} | {} | {} | {} | {} | {} / {} | {:.0} |\n",
            r.arch,
            r.method,
            r.seeds,
            pm(&acc, 2),
            pm(&r.nll, 3),
            pm(&r.ece, 4),
            pm(&r.mean_confidence, 4),
            opt(&r.ood_auroc),
            opt(&r.ood_auroc_entropy),
            r.parameters,
            ratio,
            r.model_bytes,
        ));
    }
    s
}

/// Runs [`run`] for seeds `0..seeds` (each in `out_dir/seed-<i>`, see [`Setup::for_seed`]) and
/// writes each seed's tables there, then `table.md` (mean ± sd) and `table.json` (per-seed
/// rows and summaries) into `out_dir`. Resumes per seed with `setup.resume`.
pub fn run_seeds(
    setup: &Setup,
    seeds: usize,
    device: &Device,
    progress: &mut dyn Progress,
) -> Result<(Vec<SeedSummary>, Vec<Outcome>), Error> {
    let mut outcomes = Vec::with_capacity(seeds);
    for i in 0..seeds as u64 {
        progress.stage(&format!("seed {} of {seeds}", i + 1));
        let s = setup.for_seed(i);
        let outcome = run(&s, device, progress)?;
        write_tables(&s.out_dir, &outcome)?;
        outcomes.push(outcome);
    }
    let runs: Vec<Vec<Row>> = outcomes.iter().map(|o| o.rows.clone()).collect();
    let summaries = summarise(&runs);
    if !setup.corruptions.is_empty() {
        let all: Vec<CorruptionRow> = outcomes
            .iter()
            .flat_map(|o| o.corruptions.iter().cloned())
            .collect();
        let means = mean_corruptions(&all);
        let json = serde_json::to_string_pretty(&serde_json::json!({
            "means": means,
            "seeds": outcomes.iter().map(|o| &o.corruptions).collect::<Vec<_>>(),
        }))
        .map_err(Error::json)?;
        write_atomic(&setup.out_dir.join("corruptions.json"), json.as_bytes())?;
        write_atomic(
            &setup.out_dir.join("corruptions.md"),
            markdown_corruptions(&means).as_bytes(),
        )?;
    }
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "summaries": summaries,
        "seeds": runs,
    }))
    .map_err(Error::json)?;
    write_atomic(
        &setup.out_dir.join("table.md"),
        markdown_seeds(&summaries).as_bytes(),
    )?;
    write_atomic(&setup.out_dir.join("table.json"), json.as_bytes())?;
    Ok((summaries, outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_sd() {
        let m = MeanSd::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!((m.mean - 2.5).abs() < 1e-12);
        assert!((m.sd - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(MeanSd::of(&[7.0]).unwrap().sd, 0.0);
        assert!(MeanSd::of(&[]).is_none());
    }
}
