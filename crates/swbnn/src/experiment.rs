//! The paper's experiment for one data set and architecture: deterministic training, Bayes by
//! Backprop, and 2DGBNN (outliers, GMM, refinement, retraining), each evaluated with
//! Monte-Carlo sampling, and the table in the paper's columns.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bnn_data::{Dataset, DatasetId, Split};
use bnn_layers::{Estimator, bayes_from_deterministic, count_params, export_bayes};
use bnn_train::{
    Checkpointer, Evaluation, Observer, TrainConfig, evaluate, mean_mu_gradients, train,
    write_atomic,
};
use burn::module::Module;
use burn::prelude::*;
use models::{Arch, Kind, ModelConfig, Network};
use serde::{Deserialize, Serialize};
use swshare::burn_edges::{build_shared_model, full_bnn_data, table_from_tensors, to_swb};
use swshare::format::{SaveOptions, full_bnn_to_bytes, to_bytes};
use swshare::{CompressionReport, SwshareConfig, build_plan};

use crate::Error;
use crate::data::{eval_loader, norm_stats, open_ood, open_split, subset, train_loader};

/// Everything an experiment needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// 2DGBNN stage-3 retraining.
    pub retrain: TrainConfig,
    /// Stages 1-2 of weight sharing.
    pub swshare: SwshareConfig,
    /// Estimator of the Bayesian layers.
    pub estimator: Estimator,
    /// Monte-Carlo samples at evaluation (paper: 30).
    pub samples: usize,
    /// Data-loading threads.
    pub workers: usize,
    /// Output directory (models and tables).
    pub out_dir: PathBuf,
    /// Continue an interrupted run in `out_dir`: stages whose checkpoints and rows are there
    /// are not trained or evaluated again. Without it, old stage checkpoints are removed first.
    #[serde(default)]
    pub resume: bool,
}

/// Per-stage state under `out_dir/stages/<stage>/`: the training checkpoint (model and history)
/// and, once evaluated, the stage's table row. A long run that stops (power, a crash, Ctrl-C)
/// continues from there with `resume`.
struct Stage {
    dir: PathBuf,
    checkpointer: Checkpointer,
    resume: bool,
}

impl Stage {
    fn new(setup: &Setup, name: &str) -> Result<Self, Error> {
        let dir = stages_dir(&setup.out_dir).join(name);
        Ok(Self {
            checkpointer: Checkpointer::new(&dir)?,
            dir,
            resume: setup.resume,
        })
    }

    fn row_path(&self) -> PathBuf {
        self.dir.join("row.json")
    }

    /// Trains `model` with this stage's checkpointer. Returns the model and the stage's
    /// training seconds, including the epochs an earlier run checkpointed when resuming.
    fn train(
        &self,
        model: Network,
        loader: &bnn_data::DataLoader,
        config: &TrainConfig,
        progress: &mut dyn Progress,
    ) -> Result<(Network, f64), Error> {
        let resumed = match self.checkpointer.state()? {
            Some(s) if self.resume => s.history.iter().map(|e| e.seconds).sum(),
            _ => 0.0,
        };
        let started = Instant::now();
        let (model, _) = train(model, loader, config, Some(&self.checkpointer), progress)?;
        Ok((model, resumed + started.elapsed().as_secs_f64()))
    }

    /// The row evaluated by an earlier run, when resuming.
    fn cached_row(&self) -> Result<Option<Row>, Error> {
        let path = self.row_path();
        if !self.resume || !path.exists() {
            return Ok(None);
        }
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::Other(format!("{}: {e}", path.display())))
    }

    fn save_row(&self, row: &Row) -> Result<(), Error> {
        let json = serde_json::to_vec_pretty(row).map_err(|e| Error::Other(e.to_string()))?;
        Ok(write_atomic(&self.row_path(), &json)?)
    }

    /// The cached row, or `eval()` (then cached).
    fn row(&self, eval: impl FnOnce() -> Result<Row, Error>) -> Result<Row, Error> {
        if let Some(row) = self.cached_row()? {
            return Ok(row);
        }
        let row = eval()?;
        self.save_row(&row)?;
        Ok(row)
    }
}

fn stages_dir(out_dir: &Path) -> PathBuf {
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
}

fn row(
    arch: Arch,
    method: &str,
    ev: &Evaluation,
    parameters: usize,
    bytes: u64,
    seconds: f64,
) -> Row {
    Row {
        arch: arch.name().to_string(),
        method: method.to_string(),
        accuracy: ev.summary.accuracy,
        nll: ev.summary.nll,
        ece: ev.summary.ece,
        outliers: None,
        ellipses: None,
        gaussians: None,
        parameters,
        compression_ratio: None,
        model_bytes: bytes,
        ood_auroc: ev.ood_max_prob.as_ref().map(|o| o.auroc),
        ood_auroc_entropy: ev.ood_entropy.as_ref().map(|o| o.auroc),
        train_seconds: seconds,
    }
}

fn record_bytes(model: &Network) -> Result<u64, Error> {
    let bytes = model
        .clone()
        .into_record()
        .into_bytes()
        .map_err(|e| Error::Other(format!("serialising the model: {e:?}")))?;
    Ok(bytes.len() as u64)
}

/// Runs the three methods and returns the table rows. Models are saved under `out_dir`.
pub fn run(setup: &Setup, device: &Device, progress: &mut dyn Progress) -> Result<Outcome, Error> {
    std::fs::create_dir_all(&setup.out_dir).map_err(|e| Error::io(&setup.out_dir, e))?;
    let stages = stages_dir(&setup.out_dir);
    if !setup.resume && stages.exists() {
        std::fs::remove_dir_all(&stages).map_err(|e| Error::io(&stages, e))?;
    }
    let train_data = subset(
        open_split(setup.dataset, Split::Train, setup.data_dir.as_deref())?,
        setup.train_subset,
        1,
    )?;
    let test_data = subset(
        open_split(setup.dataset, Split::Test, setup.data_dir.as_deref())?,
        setup.test_subset,
        2,
    )?;
    let (c, h, _) = test_data.shape();
    let classes = test_data.classes();
    let stats = norm_stats(setup.dataset);
    let workers = setup.workers;
    let test = eval_loader(stats, test_data, 256, workers)?;
    let ood_loader = match &setup.ood {
        Some((id, dir)) => {
            let data: Arc<dyn Dataset> = subset(open_ood(*id, dir)?, setup.test_subset, 3)?;
            // OOD inputs go through the in-distribution normalisation, as a deployed model would.
            Some(eval_loader(stats, data, 256, workers)?)
        }
        None => None,
    };
    let ad = device.clone().autodiff();
    let mut config = ModelConfig::for_input(setup.arch, Kind::Deterministic, classes, c, h);
    config.bayes.estimator = setup.estimator;

    // Deterministic.
    progress.stage("deterministic");
    let stage = Stage::new(setup, "deterministic")?;
    let loader = train_loader(
        setup.dataset,
        train_data.clone(),
        setup.deterministic.batch_size,
        setup.deterministic.seed,
        workers,
    )?;
    ad.seed(setup.deterministic.seed);
    let (det, det_seconds) =
        stage.train(config.init(&ad)?, &loader, &setup.deterministic, progress)?;
    let det_row = stage.row(|| {
        let ev = evaluate(&det, &test, ood_loader.as_ref(), 1)?;
        Ok(row(
            setup.arch,
            "deterministic",
            &ev,
            count_params(&det).trainable,
            record_bytes(&det)?,
            det_seconds,
        ))
    })?;
    progress.row(&det_row);

    // Bayes by Backprop.
    progress.stage("bbb");
    let stage = Stage::new(setup, "bbb")?;
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
    let (bayes, bbb_seconds) = stage.train(bayes, &loader, &setup.bbb, progress)?;
    let bbb_params = count_params(&bayes).trainable;
    let bbb_row = stage.row(|| {
        let ev = evaluate(&bayes, &test, ood_loader.as_ref(), setup.samples)?;
        let full = full_bnn_data(&bayes, &bayes_config)?;
        let full_bytes = full_bnn_to_bytes(
            &full.arch,
            &full.layers,
            &full.mu,
            &full.rho,
            &full.unshared,
        )
        .map_err(|e| Error::Other(e.to_string()))?
        .len() as u64;
        Ok(row(
            setup.arch,
            "bbb",
            &ev,
            bbb_params,
            full_bytes,
            bbb_seconds,
        ))
    })?;
    progress.row(&bbb_row);

    // 2DGBNN: stages 1-2 on the trained BNN, then retraining.
    progress.stage("2dgbnn: outliers, GMM, refinement");
    let stage = Stage::new(setup, "2dgbnn")?;
    let started = Instant::now();
    // The gradient pass samples weights: a fixed seed makes the plan a function of the BBB
    // model alone, so a resumed run rebuilds the same shared model.
    ad.seed(setup.retrain.seed);
    let tensors = if setup.swshare.outliers.grad_top_fraction > 0.0 {
        mean_mu_gradients(
            &bayes,
            &loader,
            &setup.bbb.prior,
            setup.swshare.outliers.grad_batches,
        )?
    } else {
        export_bayes(&bayes, None)
    };
    let table = table_from_tensors(&tensors)?;
    let (plan, mut report) = build_plan(&table, &setup.swshare)?;
    // Kept for the weights figure (`swbnn plot weights`, the report).
    crate::run_dir::save_plan(&setup.out_dir, &plan)?;
    let shared = build_shared_model(&bayes_config, &bayes, &table, &plan, &ad)?;
    let stages_seconds = started.elapsed().as_secs_f64();
    progress.stage("2dgbnn: retraining");
    let loader = train_loader(
        setup.dataset,
        train_data,
        setup.retrain.batch_size,
        setup.retrain.seed,
        workers,
    )?;
    let (shared, retrain_seconds) = stage.train(shared, &loader, &setup.retrain, progress)?;
    let gbnn_seconds = stages_seconds + retrain_seconds;
    let shared_config = bayes_config
        .clone()
        .with_kind(Kind::Shared)
        .with_codebook_len(plan.k());
    let data = to_swb(&shared.valid(), &shared_config, &table, &plan)?;
    // The entropy-coded index is lossless; int8 outliers are not, so they stay off.
    let options = SaveOptions {
        entropy_index: true,
        int8_outliers: false,
    };
    let path = setup
        .out_dir
        .join(format!("{}-2dgbnn.swb", setup.arch.name()));
    let sizes =
        swshare::format::save(&path, &data, &options).map_err(|e| Error::Other(e.to_string()))?;
    let bytes = to_bytes(&data, &options)
        .map_err(|e| Error::Other(e.to_string()))?
        .len() as u64;
    let params = count_params(&shared).trainable;
    report.file_sizes = Some(sizes.into());
    let r = stage.row(|| {
        let ev = evaluate(&shared, &test, ood_loader.as_ref(), setup.samples)?;
        let mut r = row(setup.arch, "2dgbnn", &ev, params, bytes, gbnn_seconds);
        r.outliers = Some(report.outliers);
        r.ellipses = Some(report.ellipse_weights);
        r.gaussians = Some(report.gaussians_after_merge);
        r.compression_ratio = Some(1.0 - params as f64 / bbb_params.max(1) as f64);
        Ok(r)
    })?;
    progress.row(&r);
    Ok(Outcome {
        rows: vec![det_row, bbb_row, r],
        report,
    })
}

/// The rows as a Markdown table in the paper's columns.
pub fn markdown(rows: &[Row]) -> String {
    let opt = |v: Option<usize>| v.map_or("-".to_string(), |v| v.to_string());
    let mut s = String::from(
        "| Architecture | Method | Accuracy | NLL | ECE | #Outliers | #Ellipses | #Gaussians | #Parameters(M) / Compression | Model bytes | OOD AUROC (max-prob / entropy) | Train s |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
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
            "| {} | {} | {:.2}% | {:.3} | {:.4} | {} | {} | {} | {:.4}M / {} | {} | {} | {:.0} |\n",
            r.arch,
            r.method,
            100.0 * r.accuracy,
            r.nll,
            r.ece,
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
    let json =
        serde_json::to_string_pretty(&outcome.rows).map_err(|e| Error::Other(e.to_string()))?;
    let report =
        serde_json::to_string_pretty(&outcome.report).map_err(|e| Error::Other(e.to_string()))?;
    for (name, body) in [
        ("table.md", markdown(&outcome.rows)),
        ("table.json", json),
        ("report.json", report),
    ] {
        bnn_train::write_atomic(&dir.join(name), body.as_bytes())?;
    }
    Ok(())
}
