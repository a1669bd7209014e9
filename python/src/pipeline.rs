//! `swbnn.train`, `swbnn.compress` and `swbnn.evaluate`: the command line's coarse steps as
//! calls over the same library functions (`bnn_train`, `swshare::compress`, `swbnn::data`).
//! Results come back as JSON text that the Python wrappers parse.

use std::path::{Path, PathBuf};

use bnn_data::{DatasetId, Split};
use bnn_layers::Estimator;
use bnn_models::{Arch, Kind, ModelConfig};
use bnn_train::{
    Checkpointer, EpochStats, Observer, StepInfo, TrainConfig, evaluate as mc_evaluate,
    evaluate_tempered,
};
use pyo3::prelude::*;
use swbnn::Error;
use swbnn::data::{
    EvalData, check_input, check_trained_on, eval_loader, open_eval_data, open_verified,
    train_loader, trained_on, training_split,
};
use swbnn::setup::ValidationSplit;
use swbnn::store::ModelDir;
use swshare::compress::{CompressConfig, compress as run_compress};

use crate::errors::pipeline_error;
use crate::model::{EVAL_BATCH, cpu, load_any, stored_temperature};

/// Loader threads, as the command line uses.
const WORKERS: usize = 2;

/// Progress lines on stderr, only when asked for.
struct Progress {
    on: bool,
}

impl Observer for Progress {
    fn on_step(&mut self, info: &StepInfo) {
        if self.on && (info.step + 1).is_multiple_of(50) {
            eprintln!(
                "epoch {} step {}/{}: loss {:.4} ({:.0} img/s)",
                info.epoch + 1,
                info.step + 1,
                info.steps,
                info.loss,
                info.images_per_s
            );
        }
    }

    fn on_epoch(&mut self, s: &EpochStats) {
        if self.on {
            eprintln!(
                "epoch {}: loss {:.4} nll {:.4} kl {:.1} train acc {:.4} ({:.0} img/s, {:.0} s)",
                s.epoch + 1,
                s.loss,
                s.nll,
                s.kl,
                s.accuracy,
                s.images_per_s,
                s.seconds
            );
        }
    }
}

fn usage(msg: String) -> Error {
    Error::Usage(msg)
}

fn dataset_id(name: &str) -> Result<DatasetId, Error> {
    Ok(name.parse::<DatasetId>()?)
}

/// Trains a deterministic or Bayes-by-Backprop model into `out` (`model.bpk`, `config.json`,
/// a checkpoint every epoch) as `swbnn train` does; returns the epoch history as JSON text.
#[pyfunction]
#[pyo3(signature = (
    dataset, arch, kind, out, *, epochs = 5, seed = 0, data = None, subset = None,
    estimator = "reparam", resume = false, progress = false
))]
#[allow(clippy::too_many_arguments)]
pub fn train_json(
    py: Python<'_>,
    dataset: &str,
    arch: &str,
    kind: &str,
    out: PathBuf,
    epochs: usize,
    seed: u64,
    data: Option<PathBuf>,
    subset: Option<usize>,
    estimator: &str,
    resume: bool,
    progress: bool,
) -> PyResult<String> {
    let estimator = estimator.to_string();
    let (arch_name, kind_name) = (arch.to_string(), kind.to_string());
    let dataset = dataset.to_string();
    py.detach(|| {
        train_impl(
            &dataset,
            &arch_name,
            &kind_name,
            &out,
            epochs,
            seed,
            data.as_deref(),
            subset,
            &estimator,
            resume,
            progress,
        )
    })
    .map_err(pipeline_error)
}

#[allow(clippy::too_many_arguments)]
fn train_impl(
    dataset: &str,
    arch: &str,
    kind: &str,
    out: &Path,
    epochs: usize,
    seed: u64,
    data: Option<&Path>,
    n: Option<usize>,
    estimator: &str,
    resume: bool,
    progress: bool,
) -> Result<String, Error> {
    let id = dataset_id(dataset)?;
    let arch: Arch = arch.parse()?;
    let bayesian = match kind {
        "deterministic" => false,
        "bayesian" => true,
        other => {
            return Err(usage(format!(
                "kind must be \"deterministic\" or \"bayesian\", got {other:?}"
            )));
        }
    };
    if epochs == 0 {
        return Err(usage("epochs must be at least 1".into()));
    }
    if n == Some(0) {
        return Err(usage("subset must be at least 1".into()));
    }
    if resume {
        // As the command line: resume a checkpoint or fail naming what is missing.
        swbnn::checks::resumable_checkpoint(out)?;
    }
    let device = cpu().map_err(|e| usage(e.to_string()))?;
    let ad = device.autodiff();
    // As the command line's default: the standard validation split is held out.
    let opened = open_verified(id, Split::Train, data)?;
    let record = trained_on(id, &opened, None, ValidationSplit::standard())?;
    let (train_data, _) = training_split(opened.data, ValidationSplit::standard(), n)?;
    let (c, h, _) = train_data.shape();
    let mut config = ModelConfig::for_input(arch, Kind::Deterministic, train_data.classes(), c, h);
    config.trained_on = Some(record);
    config.bayes.estimator = Estimator::from_name(estimator).ok_or_else(|| {
        usage(format!(
            "unknown estimator {estimator} (reparam, local-reparam, flipout)"
        ))
    })?;
    let mut tc = if bayesian {
        config = config.with_kind(Kind::Bayesian);
        TrainConfig::bayes_by_backprop(epochs)
    } else {
        TrainConfig::deterministic(epochs)
    };
    tc.seed = seed;
    ad.seed(seed);
    let model = config.init(&ad)?;
    let loader = train_loader(id, train_data, tc.batch_size, seed, WORKERS)?;
    let ck = Checkpointer::new(out)?.with_run(serde_json::json!({
        "dataset": id.name(),
        "subset": n,
        "validation": ValidationSplit::standard(),
    }));
    let state = if resume {
        ck.check(&model, &loader, &tc)?
    } else {
        ck.state()?
    };
    if !resume && (state.is_some() || ck.model_path().exists()) {
        return Err(usage(format!(
            "{} already holds a model; pass resume=True to continue it",
            out.display()
        )));
    }
    let model_dir = ModelDir::new(out);
    if resume {
        model_dir.check_resume(&config)?;
    }
    if !(resume && model_dir.config_path().exists()) {
        model_dir.write_config(&config)?;
    }
    let (_, history) = bnn_train::train(
        model,
        &loader,
        &tc,
        Some(&ck),
        &mut Progress { on: progress },
    )?;
    serde_json::to_string(&history).map_err(Error::json)
}

/// Runs the method's stages 1-3 on a trained Bayesian model directory and writes `out`
/// (`.swb`), as `swbnn compress` does; returns the compression report as JSON text.
#[pyfunction]
#[pyo3(signature = (
    model, dataset, out, *, k = None, config = None, epochs = None, data = None,
    subset = None, force = false, progress = false
))]
#[allow(clippy::too_many_arguments)]
pub fn compress_json(
    py: Python<'_>,
    model: PathBuf,
    dataset: &str,
    out: PathBuf,
    k: Option<usize>,
    config: Option<String>,
    epochs: Option<usize>,
    data: Option<PathBuf>,
    subset: Option<usize>,
    force: bool,
    progress: bool,
) -> PyResult<String> {
    let dataset = dataset.to_string();
    py.detach(|| {
        compress_impl(
            &model,
            &dataset,
            &out,
            k,
            config.as_deref(),
            epochs,
            data.as_deref(),
            subset,
            force,
            progress,
        )
    })
    .map_err(pipeline_error)
}

#[allow(clippy::too_many_arguments)]
fn compress_impl(
    model_dir: &Path,
    dataset: &str,
    out: &Path,
    k: Option<usize>,
    config: Option<&str>,
    epochs: Option<usize>,
    data: Option<&Path>,
    n: Option<usize>,
    force: bool,
    progress: bool,
) -> Result<String, Error> {
    let id = dataset_id(dataset)?;
    let out = &swbnn::checks::output_target("out", out, Some(force), &[model_dir])?;
    let device = cpu().map_err(|e| usage(e.to_string()))?;
    let ad = device.autodiff();
    let (bayes, bayes_config) = ModelDir::new(model_dir).load(&ad)?;
    let mut cfg = match config {
        Some(text) => CompressConfig::from_json(text)?,
        None => swbnn::presets::command_line_compress(),
    };
    if let Some(k) = k {
        cfg.sharing.gmm.k = k;
    }
    if let Some(e) = epochs {
        cfg.retrain.epochs = e;
    }
    let opened = open_verified(id, Split::Train, data)?;
    check_trained_on(model_dir, &bayes_config, id, &opened);
    let full = opened.data;
    check_input(&bayes_config, full.as_ref(), "training data", true)?;
    // As the command line's default: the standard validation split is held out.
    let (train_data, validation) = training_split(full, ValidationSplit::standard(), n)?;
    let loader = train_loader(
        id,
        train_data,
        cfg.retrain.batch_size,
        cfg.retrain.seed,
        WORKERS,
    )?;
    // Stage 3's stop rule reads the validation split.
    let validation = eval_loader(id.norm_stats(), validation, EVAL_BATCH, WORKERS)?;
    let compressed = run_compress(
        &bayes,
        &bayes_config,
        &loader,
        Some(&validation),
        &cfg,
        None,
        &mut Progress { on: progress },
    )?;
    compressed.save(out)?;
    serde_json::to_string(&compressed.report).map_err(Error::json)
}

/// Evaluates a model file or directory on a data set's test split (and an OOD set), as
/// `swbnn eval` does; returns `bnn_train::Evaluation` as JSON text. At `temperature`, or with
/// `calibrated` at the model's stored one (an error when it has none), each sample's logits
/// are divided by it first.
#[pyfunction]
#[pyo3(signature = (
    model, dataset, *, samples = 30, seed = 0, ood = None, ood_dir = None, data = None,
    subset = None, temperature = None, calibrated = false
))]
#[allow(clippy::too_many_arguments)]
pub fn evaluate_json(
    py: Python<'_>,
    model: PathBuf,
    dataset: &str,
    samples: usize,
    seed: u64,
    ood: Option<String>,
    ood_dir: Option<PathBuf>,
    data: Option<PathBuf>,
    subset: Option<usize>,
    temperature: Option<f64>,
    calibrated: bool,
) -> PyResult<String> {
    let dataset = dataset.to_string();
    py.detach(|| {
        evaluate_impl(
            &model,
            &dataset,
            samples,
            seed,
            ood.as_deref(),
            ood_dir.as_deref(),
            data.as_deref(),
            subset,
            Scaling::of(temperature, calibrated)?,
        )
    })
    .map_err(pipeline_error)
}

/// Which temperature an evaluation applies.
#[derive(Debug, Clone, Copy)]
enum Scaling {
    /// None: the raw predictive.
    Raw,
    /// This one.
    Given(f64),
    /// The model's stored one.
    Stored,
}

impl Scaling {
    fn of(temperature: Option<f64>, calibrated: bool) -> Result<Self, Error> {
        match (temperature, calibrated) {
            (Some(_), true) => Err(usage(
                "give temperature or calibrated=True, not both".into(),
            )),
            (Some(t), false) => {
                bnn_metrics::validate_temperature(t)
                    .map_err(|e| usage(format!("temperature: {e}")))?;
                Ok(Self::Given(t))
            }
            (None, true) => Ok(Self::Stored),
            (None, false) => Ok(Self::Raw),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn evaluate_impl(
    model: &Path,
    dataset: &str,
    samples: usize,
    seed: u64,
    ood: Option<&str>,
    ood_dir: Option<&Path>,
    data: Option<&Path>,
    n: Option<usize>,
    scaling: Scaling,
) -> Result<String, Error> {
    let id = dataset_id(dataset)?;
    if samples == 0 {
        return Err(usage("samples must be at least 1".into()));
    }
    if ood_dir.is_some() && ood.is_none() {
        return Err(usage("ood_dir needs ood (the OOD data set's name)".into()));
    }
    let device = cpu().map_err(|e| usage(e.to_string()))?;
    let (net, net_config, source) = load_any(model, &device)?;
    let temperature = match scaling {
        Scaling::Raw => None,
        Scaling::Given(t) => Some(t),
        Scaling::Stored => Some(stored_temperature(model, &source)?.ok_or_else(|| {
            usage(format!(
                "{} holds no fitted temperature; fit one on validation data with \
                 `swbnn calibrate {} --dataset ...` or Model.fit_temperature(..., store=True)",
                model.display(),
                model.display()
            ))
        })?),
    };
    let EvalData {
        test: test_data,
        ood: ood_data,
    } = open_eval_data(
        model,
        &net_config,
        id,
        data,
        ood.map(dataset_id).transpose()?,
        ood_dir,
        n,
    )?;
    let stats = id.norm_stats();
    let test = eval_loader(stats, test_data, EVAL_BATCH, WORKERS)?;
    let ood_loader = match ood_data {
        Some(d) => Some(eval_loader(stats, d, EVAL_BATCH, WORKERS)?),
        None => None,
    };
    let _rng = bnn_layers::lock_device_rng();
    device.seed(seed);
    let ev = match temperature {
        None => mc_evaluate(&net, &test, ood_loader.as_ref(), samples)?,
        Some(t) => evaluate_tempered(&net, &test, ood_loader.as_ref(), samples, &[t])?
            .pop()
            .map(|(ev, _, _)| ev)
            .ok_or_else(|| usage("no evaluation at the temperature".into()))?,
    };
    serde_json::to_string(&ev).map_err(Error::json)
}
