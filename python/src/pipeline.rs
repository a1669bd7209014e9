//! `swbnn.train`, `swbnn.compress` and `swbnn.evaluate`: the command line's commands, called
//! through the same library functions (`swbnn_ops::commands`). Results come back as JSON text that
//! the Python wrappers parse.

use std::path::PathBuf;

use bnn_data::DataSource;
use bnn_layers::Estimator;
use bnn_models::Arch;
use bnn_train::{EpochStats, Observer, StepInfo};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use swbnn_ops::Error;
use swbnn_ops::ValidationSplit;
use swbnn_ops::commands::{
    self, CalibrateRequest, CompressRequest, CompressSettings, EvalRequest, Scaling, TrainKind,
    TrainRequest,
};
use swbnn_ops::search::{Candidate, SearchConfig, SearchProgress, progress_line};

use crate::errors::pipeline_error;
use crate::model::cpu;

/// Progress events for the Python side's bars (`swbnn._progress.NativeBars`), only when a
/// callback was given: `callback(event, info)` with `"step"` (`epoch`, `step`, `steps`,
/// `loss`), `"epoch"` (`epoch`, `line`) and `"candidate"` (`line`).
struct Progress {
    callback: Option<Py<PyAny>>,
}

impl Progress {
    /// Calls the callback with `event` and the dict `fill` writes. A failing callback (a
    /// bar that cannot draw) is reported once on stderr by Python and never stops the work.
    fn send(&self, event: &str, fill: impl FnOnce(&Bound<'_, PyDict>) -> PyResult<()>) {
        let Some(cb) = &self.callback else { return };
        Python::attach(|py| {
            let info = PyDict::new(py);
            if let Err(e) = fill(&info).and_then(|()| cb.call1(py, (event, info)).map(drop)) {
                e.write_unraisable(py, Some(cb.bind(py)));
            }
        });
    }
}

impl Observer for Progress {
    fn on_step(&mut self, info: &StepInfo) {
        self.send("step", |d| {
            d.set_item("epoch", info.epoch)?;
            d.set_item("step", info.step + 1)?;
            d.set_item("steps", info.steps)?;
            d.set_item("loss", info.loss)
        });
    }

    fn on_epoch(&mut self, s: &EpochStats) {
        self.send("epoch", |d| {
            d.set_item("epoch", s.epoch)?;
            d.set_item("line", swbnn_ops::commands::epoch_line(s))
        });
    }
}

fn usage(msg: String) -> Error {
    Error::Usage(msg)
}

fn source(name: &str) -> Result<DataSource, Error> {
    Ok(name.parse::<DataSource>()?)
}

/// The validation split of `size` images (the standard one when `None`).
fn validation(size: Option<usize>) -> ValidationSplit {
    size.map_or(ValidationSplit::standard(), ValidationSplit::new)
}

/// Trains a deterministic or Bayes-by-Backprop model into `out` (`model.bpk`, `config.json`,
/// a checkpoint every epoch) as `swbnn train` does; returns the epoch history as JSON text.
#[pyfunction]
#[pyo3(signature = (
    dataset, arch, kind, out, *, epochs = 5, seed = 0, data = None, subset = None,
    estimator = "reparam", resume = false, progress = None, validation = None,
    image_size = None, from_model = None, targets = None, noise = None, mlp_hidden = None
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
    progress: Option<Py<PyAny>>,
    validation: Option<usize>,
    image_size: Option<usize>,
    from_model: Option<PathBuf>,
    targets: Option<Vec<String>>,
    noise: Option<String>,
    mlp_hidden: Option<Vec<usize>>,
) -> PyResult<String> {
    let request = (|| -> Result<TrainRequest, Error> {
        let noise = noise
            .map(|n| n.parse::<bnn_models::Noise>().map_err(usage))
            .transpose()?;
        let kind = match kind {
            "deterministic" => TrainKind::Deterministic,
            "bayesian" => TrainKind::Bayesian,
            other => {
                return Err(usage(format!(
                    "kind must be \"deterministic\" or \"bayesian\", got {other:?}"
                )));
            }
        };
        let estimator = Estimator::from_name(estimator).ok_or_else(|| {
            usage(format!(
                "unknown estimator {estimator} (reparam, local-reparam, flipout)"
            ))
        })?;
        Ok(TrainRequest {
            epochs,
            seed,
            data_dir: data,
            subset,
            estimator,
            resume,
            validation: self::validation(validation),
            image_size,
            from: from_model,
            targets: targets.unwrap_or_default(),
            noise,
            mlp_hidden,
            ..TrainRequest::new(source(dataset)?, arch.parse::<Arch>()?, kind, out)
        })
    })()
    .map_err(pipeline_error)?;
    py.detach(|| {
        let device = cpu().map_err(|e| usage(e.to_string()))?;
        let history = commands::train(&request, &device, &mut Progress { callback: progress })?;
        serde_json::to_string(&history).map_err(Error::json)
    })
    .map_err(pipeline_error)
}

/// Runs the method's stages 1-3 on a trained Bayesian model directory and writes `out`
/// (`.swb`), as `swbnn compress` does; returns the compression report as JSON text.
#[pyfunction]
#[pyo3(signature = (
    model, dataset, out, *, k = None, config = None, epochs = None, data = None,
    subset = None, force = false, progress = None, validation = None
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
    progress: Option<Py<PyAny>>,
    validation: Option<usize>,
) -> PyResult<String> {
    let request = compress_request(
        (model, dataset, out),
        k,
        config,
        epochs,
        data,
        subset,
        force,
        validation,
    )?;
    py.detach(|| {
        let device = cpu().map_err(|e| usage(e.to_string()))?;
        let report = commands::compress(&request, &device, &mut Progress { callback: progress })?;
        serde_json::to_string(&report).map_err(Error::json)
    })
    .map_err(pipeline_error)
}

/// The request of `swbnn compress` (with or without `--auto`) from the Python arguments.
#[allow(clippy::too_many_arguments)]
fn compress_request(
    (model, dataset, out): (PathBuf, &str, PathBuf),
    k: Option<usize>,
    config: Option<String>,
    epochs: Option<usize>,
    data: Option<PathBuf>,
    subset: Option<usize>,
    force: bool,
    validation: Option<usize>,
) -> PyResult<CompressRequest> {
    Ok(CompressRequest {
        force,
        settings: config.map_or(CompressSettings::Defaults, CompressSettings::Json),
        k,
        epochs,
        data_dir: data,
        subset,
        validation: self::validation(validation),
        ..CompressRequest::new(model, source(dataset).map_err(pipeline_error)?, out)
    })
}

/// `swbnn compress --auto`: searches sizes and methods on the validation split and writes
/// the smallest file within the margins to `out`, the search beside it; returns the search
/// report as JSON text. `search` is a `SearchConfig` as JSON (missing fields take the
/// defaults).
#[pyfunction]
#[pyo3(signature = (
    model, dataset, out, *, search = None, config = None, epochs = None, data = None,
    subset = None, force = false, progress = None, validation = None
))]
#[allow(clippy::too_many_arguments)]
pub fn compress_auto_json(
    py: Python<'_>,
    model: PathBuf,
    dataset: &str,
    out: PathBuf,
    search: Option<String>,
    config: Option<String>,
    epochs: Option<usize>,
    data: Option<PathBuf>,
    subset: Option<usize>,
    force: bool,
    progress: Option<Py<PyAny>>,
    validation: Option<usize>,
) -> PyResult<String> {
    let search: SearchConfig = match search {
        None => SearchConfig::default(),
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| usage(format!("search: not a valid search config: {e}")))
            .map_err(pipeline_error)?,
    };
    let request = compress_request(
        (model, dataset, out),
        None,
        config,
        epochs,
        data,
        subset,
        force,
        validation,
    )?;
    py.detach(|| {
        let device = cpu().map_err(|e| usage(e.to_string()))?;
        let mut p = SearchLines {
            steps: Progress { callback: progress },
        };
        let report = commands::compress_auto(&request, &search, &device, &mut p)?;
        serde_json::to_string(&report).map_err(Error::json)
    })
    .map_err(pipeline_error)
}

/// The search's progress events: each candidate's verdict, and the stage-3 steps.
struct SearchLines {
    steps: Progress,
}

impl SearchProgress for SearchLines {
    fn candidate(&mut self, c: &Candidate, best: Option<&Candidate>) {
        let line = progress_line(c, best);
        self.steps.send("candidate", |d| d.set_item("line", line));
    }

    fn steps(&mut self) -> &mut dyn Observer {
        &mut self.steps
    }
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
    let request = (|| -> Result<EvalRequest, Error> {
        let scaling = match (temperature, calibrated) {
            (Some(_), true) => {
                return Err(usage(
                    "give temperature or calibrated=True, not both".into(),
                ));
            }
            (Some(t), false) => Scaling::Given(t),
            (None, true) => Scaling::Stored,
            (None, false) => Scaling::Raw,
        };
        Ok(EvalRequest {
            ood: ood.as_deref().map(source).transpose()?,
            ood_dir,
            samples,
            seed,
            data_dir: data,
            subset,
            scaling,
            ..EvalRequest::new(model, source(dataset)?)
        })
    })()
    .map_err(pipeline_error)?;
    py.detach(|| {
        let device = cpu().map_err(|e| usage(e.to_string()))?;
        let out = commands::eval(&request, &device)?;
        // The metrics at the temperature asked for, else the raw ones; the conformal sets'
        // coverage and size under "conformal" when the model holds a conformal calibration.
        let mut v = match (out.regression, out.calibrated, out.evaluation) {
            (Some(reg), _, _) => serde_json::to_value(&reg).map_err(Error::json)?,
            (None, Some((_, ev)), _) | (None, None, Some(ev)) => {
                serde_json::to_value(&ev).map_err(Error::json)?
            }
            (None, None, None) => return Err(usage("the evaluation returned nothing".into())),
        };
        if let (Some(c), Some(map)) = (&out.conformal, v.as_object_mut()) {
            map.insert(
                "conformal".into(),
                serde_json::to_value(c).map_err(Error::json)?,
            );
        }
        serde_json::to_string(&v).map_err(Error::json)
    })
    .map_err(pipeline_error)
}

/// Fits a model's temperature (and, with `conformal`, conformal prediction sets at that level)
/// on the validation split it held out and stores it with the model, as `swbnn calibrate`
/// does; returns the fit as JSON text.
#[pyfunction]
#[pyo3(signature = (
    model, dataset, *, samples = 30, seed = 0, data = None, validation = None,
    validation_seed = None, conformal = None
))]
#[allow(clippy::too_many_arguments)]
pub fn calibrate_json(
    py: Python<'_>,
    model: PathBuf,
    dataset: &str,
    samples: usize,
    seed: u64,
    data: Option<PathBuf>,
    validation: Option<usize>,
    validation_seed: Option<u64>,
    conformal: Option<f64>,
) -> PyResult<String> {
    let request = CalibrateRequest {
        data_dir: data,
        validation,
        validation_seed,
        samples,
        seed,
        conformal,
        ..CalibrateRequest::new(model, source(dataset).map_err(pipeline_error)?)
    };
    py.detach(|| {
        let device = cpu().map_err(|e| usage(e.to_string()))?;
        let out = commands::calibrate(&request, &device)?;
        serde_json::to_string(&out.fit).map_err(Error::json)
    })
    .map_err(pipeline_error)
}

/// The defaults of the Rust pipeline that `swbnn.torch` retrains and plans with, as JSON, so
/// that the Python side never keeps copies of its own: `retrain` (stage 3's training settings,
/// `swshare::compress::CompressConfig::default().retrain`), `confidence_recovered` (the presets'
/// stop rule), `k` (the paper's K) and `outliers` (stage 1's thresholds).
#[pyfunction]
pub fn defaults_json() -> PyResult<String> {
    let c = swshare::compress::CompressConfig::default();
    let stop = swshare::retrain_stop::RetrainStop::confidence_recovered();
    let v = serde_json::json!({
        "retrain": c.retrain,
        "confidence_recovered": stop,
        "k": c.sharing.gmm.k,
        "outliers": c.sharing.outliers,
        "torch_tau_sd": swshare::config::TORCH_TAU_SD,
        "search": SearchConfig::default(),
        "min_validation_images": swbnn_ops::search::MIN_VALIDATION_IMAGES,
        "gaussian_min_std": bnn_models::MIN_STD,
    });
    Ok(v.to_string())
}
