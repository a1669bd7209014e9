//! `swbnn.load` and `swbnn.Model`: a `.swb` file, a full-BNN file or a model directory on
//! the CPU (flex) backend, with Monte Carlo prediction and evaluation as `swbnn eval` does
//! them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bnn_layers::count_params;
use bnn_metrics::{Predictive, Probabilities};
use bnn_models::{ModelConfig, Network};
use bnn_train::{Predictions, evaluation_of};
use burn::prelude::*;
use numpy::PyArrayDyn;
use pyo3::prelude::*;

use crate::arrays::{Input, optional, output};
use crate::errors::{pipeline_error, runtime_error, value_error};

/// The CPU (flex) device every call of the package runs on.
pub fn cpu() -> PyResult<Device> {
    bnn_layers::device_by_name("flex").map_err(|e| runtime_error(&e))
}

/// What a model was loaded from: the library's loader's answer.
pub use swbnn_ops::load::LoadedFrom as Source;

/// A loaded model.
#[pyclass(module = "swbnn._native", frozen)]
pub struct Model {
    net: Mutex<Network>,
    config: ModelConfig,
    path: PathBuf,
    source: Source,
    /// The fitted temperature stored with the model (`swbnn calibrate`), if any; replaced by
    /// [`Model::fit_temperature_json`] with `store`.
    temperature: Mutex<Option<f64>>,
}

/// Loads `path`: a `.swb` file (shared or full BNN), a `.qbnn` file, a directory holding
/// `model.swb` or `model.qbnn`, or a directory with `model.bpk` and `config.json` (`swbnn
/// train`), through the library's one loader.
pub fn load_any(
    path: &Path,
    device: &Device,
) -> Result<(Network, ModelConfig, Source), swbnn_ops::Error> {
    let m = swbnn_ops::load::load_model(path, device)?;
    Ok((m.net, m.config, m.from))
}

/// The fitted temperature stored with a model loaded from `path` as `source`: in the file, or
/// in a model directory's `calibration.json`.
pub fn stored_temperature(path: &Path, source: &Source) -> Result<Option<f64>, swbnn_ops::Error> {
    Ok(match source {
        Source::Shared { data, .. } => data.temperature,
        Source::FullBnn { temperature, .. } => *temperature,
        Source::Qbnn | Source::Directory => {
            swbnn_ops::calibration::ModelFile::at(path).temperature()?
        }
    })
}

impl Model {
    /// Checks `images` against the model's input: `float32`, `(n, C, H, W)`.
    fn images<'py>(
        &self,
        obj: &Bound<'py, PyAny>,
        name: &str,
    ) -> PyResult<(Input<'py, f32>, [usize; 4])> {
        let input = Input::<f32>::new(obj, name, Some(4))?;
        let s = input.shape();
        let want = [
            self.config.in_channels,
            self.config.image_size,
            self.config.image_size,
        ];
        if s[1..] != want {
            return Err(value_error(format!(
                "{name} has shape {s:?}; the model takes (n, {}, {}, {}) images",
                want[0], want[1], want[2]
            )));
        }
        let shape = [s[0], s[1], s[2], s[3]];
        Ok((input, shape))
    }

    /// `labels` (`int64`, `(n,)`) as class indices, checked against `n` images.
    fn labels(&self, obj: &Bound<'_, PyAny>, n: usize) -> PyResult<Vec<u32>> {
        let labels = Input::<i64>::new(obj, "labels", Some(1))?;
        let labels = labels.slice()?;
        if labels.len() != n {
            return Err(value_error(format!(
                "labels has {} values but images has {n} images",
                labels.len()
            )));
        }
        labels
            .iter()
            .enumerate()
            .map(|(i, &l)| {
                u32::try_from(l)
                    .map_err(|_| value_error(format!("labels[{i}] = {l} is not a class index")))
            })
            .collect()
    }

    /// Runs `f` on the model with the device's generator held, outside the GIL.
    fn with_net<R: Send, E: std::fmt::Display + Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Network, &Device) -> Result<R, E> + Send,
    ) -> PyResult<R> {
        let device = cpu()?;
        let net = self
            .net
            .lock()
            .map_err(|_| value_error("the model was poisoned by a failed call"))?;
        py.detach(|| {
            // The backend's generator is global: no other call may draw between the seed
            // and the last sample.
            let _rng = bnn_layers::lock_device_rng();
            f(&net, &device)
        })
        .map_err(|e| value_error(e.to_string()))
    }

    /// Checks `features` against a regression network's input (`float32`, `(n, d)` in the
    /// user's units) and standardises them with its record, as `swbnn eval` reads a table.
    fn features(&self, obj: &Bound<'_, PyAny>, name: &str) -> PyResult<(Vec<f32>, [usize; 2])> {
        let tabular = self.tabular()?;
        let input = Input::<f32>::new(obj, name, Some(2))?;
        let s = input.shape();
        if s[1] != tabular.features() {
            return Err(value_error(format!(
                "{name} has shape {s:?}; the model takes (n, {}) rows of {}",
                tabular.features(),
                tabular.feature_names.join(", ")
            )));
        }
        let shape = [s[0], s[1]];
        let mut values = input.slice()?.to_vec();
        if let Some(at) = values.iter().position(|v| !v.is_finite()) {
            return Err(value_error(format!(
                "{name}[{}, {}] = {} is not finite",
                at / shape[1],
                at % shape[1],
                values[at]
            )));
        }
        let scale =
            bnn_data::Standardizer::new(tabular.feature_mean.clone(), tabular.feature_std.clone())
                .map_err(|e| value_error(e.to_string()))?;
        scale
            .apply(&mut values)
            .map_err(|e| value_error(format!("{name}: {e}")))?;
        Ok((values, shape))
    }

    /// The regression network's input record; a classifier is a `ValueError`.
    fn tabular(&self) -> PyResult<&bnn_models::TabularInput> {
        self.config.tabular.as_ref().ok_or_else(|| {
            value_error(
                "the model is a classifier of images: use predict (class probabilities) and \
                 evaluate (accuracy, NLL, ECE)",
            )
        })
    }

    /// The Monte-Carlo mixture predictive of a regression network on `features` (the user's
    /// units), brought back to the user's units.
    fn run_regression(
        &self,
        py: Python<'_>,
        features: &Bound<'_, PyAny>,
        samples: usize,
        seed: u64,
    ) -> PyResult<bnn_metrics::RegressionPredictive> {
        let (values, shape) = self.features(features, "features")?;
        swbnn_ops::limits::check_samples(samples, shape[0], "the rows").map_err(value_error)?;
        let tabular = self.tabular()?;
        let scale = bnn_train::TargetScale {
            mean: &tabular.target_mean,
            std: &tabular.target_std,
        };
        self.with_net(py, |net, device| {
            bnn_train::predict_regression_arrays(
                net,
                &values,
                shape,
                samples,
                Some(seed),
                Some(scale),
                device,
            )
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        py: Python<'_>,
        images: &[f32],
        shape: [usize; 4],
        samples: usize,
        seed: Option<u64>,
        keep: bool,
        temperature: Option<f64>,
    ) -> PyResult<(Predictive, Vec<Probabilities>)> {
        // The library's limit and its words, as `swbnn eval --samples` meets them.
        swbnn_ops::limits::check_samples(samples, shape[0], "the images").map_err(value_error)?;
        self.with_net(py, |net, device| {
            bnn_train::predict_arrays(net, images, shape, samples, seed, keep, temperature, device)
        })
    }
}

/// `temperature` checked as `swbnn eval --temperature` checks it (finite, 0.05 to 20).
fn checked_temperature(temperature: Option<f64>) -> PyResult<Option<f64>> {
    temperature
        .map(|t| {
            bnn_metrics::validate_temperature(t)
                .map_err(|e| value_error(format!("temperature: {e}")))
        })
        .transpose()
}

#[pymethods]
impl Model {
    /// Predictive probabilities of `images` (`float32`, `(n, C, H, W)`, normalised as in
    /// training): the mean over `samples` Monte Carlo weight samples, `(n, classes)`, or
    /// every sample's, `(samples, n, classes)`, with `return_samples`. `temperature` divides
    /// each sample's logits before its softmax.
    #[pyo3(signature = (images, samples = 30, seed = 0, return_samples = false, temperature = None))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        images: &Bound<'py, PyAny>,
        samples: usize,
        seed: u64,
        return_samples: bool,
        temperature: Option<f64>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let temperature = checked_temperature(temperature)?;
        let (input, shape) = self.images(images, "images")?;
        let (pred, kept) = self.run(
            py,
            input.slice()?,
            shape,
            samples,
            Some(seed),
            return_samples,
            temperature,
        )?;
        let (n, classes) = (pred.probabilities().n(), pred.probabilities().classes());
        if return_samples {
            let s = kept.len();
            let all: Vec<f32> = kept.into_iter().flat_map(|p| p.into_vec()).collect();
            output(py, all, &[s, n, classes])
        } else {
            output(py, pred.into_probabilities().into_vec(), &[n, classes])
        }
    }

    /// Accuracy, NLL, ECE, MCE, Brier, entropy and mutual information on `(images, labels)`
    /// and, with `ood_images`, OOD detection: `bnn_train::Evaluation` as JSON text (the
    /// Python wrapper parses it). `temperature` divides each sample's logits, of the OOD images
    /// too.
    #[pyo3(signature = (images, labels, ood_images = None, samples = 30, seed = 0, temperature = None))]
    #[allow(clippy::too_many_arguments)]
    fn evaluate_json(
        &self,
        py: Python<'_>,
        images: &Bound<'_, PyAny>,
        labels: &Bound<'_, PyAny>,
        ood_images: Option<&Bound<'_, PyAny>>,
        samples: usize,
        seed: u64,
        temperature: Option<f64>,
    ) -> PyResult<String> {
        let temperature = checked_temperature(temperature)?;
        let (input, shape) = self.images(images, "images")?;
        let labels = self.labels(labels, shape[0])?;
        let ood = match optional::<f32>(ood_images, "ood_images", Some(4))? {
            Some(_) => Some(self.images(ood_images.expect("checked above"), "ood_images")?),
            None => None,
        };
        let (pred, _) = self.run(
            py,
            input.slice()?,
            shape,
            samples,
            Some(seed),
            false,
            temperature,
        )?;
        let ood_pred = match &ood {
            Some((o, s)) => Some(
                self.run(py, o.slice()?, *s, samples, None, false, temperature)?
                    .0,
            ),
            None => None,
        };
        let pred = Predictions {
            predictive: pred,
            labels,
        };
        let ev = evaluation_of(&pred, ood_pred.as_ref(), samples)
            .map_err(|e| value_error(crate::errors::chain(&e)))?;
        serde_json::to_string(&ev).map_err(|e| runtime_error(&e))
    }

    /// A regression network's predictive on `features` (`float32`, `(n, d)`, the user's
    /// units), over `samples` Monte Carlo weight samples: four `(n, targets)` arrays in the
    /// targets' units, the mean, the total standard deviation, and its aleatoric and epistemic
    /// parts (`std^2 = aleatoric^2 + epistemic^2`: the mean of the samples' variances and the
    /// variance of their means).
    #[pyo3(signature = (features, samples = 30, seed = 0))]
    #[allow(clippy::type_complexity)]
    fn predict_regression<'py>(
        &self,
        py: Python<'py>,
        features: &Bound<'py, PyAny>,
        samples: usize,
        seed: u64,
    ) -> PyResult<(
        Bound<'py, PyArrayDyn<f64>>,
        Bound<'py, PyArrayDyn<f64>>,
        Bound<'py, PyArrayDyn<f64>>,
        Bound<'py, PyArrayDyn<f64>>,
    )> {
        let pred = self.run_regression(py, features, samples, seed)?;
        let shape = [pred.n(), pred.targets()];
        let sqrt = |v: &[f64]| v.iter().map(|x| x.sqrt()).collect::<Vec<f64>>();
        Ok((
            output(py, pred.mean().to_vec(), &shape)?,
            output(py, pred.std(), &shape)?,
            output(py, sqrt(pred.aleatoric_variance()), &shape)?,
            output(py, sqrt(pred.epistemic_variance()), &shape)?,
        ))
    }

    /// A regression network's metrics on `(features, targets)` (`targets`: `float32`,
    /// `(n, targets)` or `(n,)` for one target, the user's units): RMSE, Gaussian NLL, CRPS,
    /// interval coverage, PIT calibration error (`bnn_metrics::RegressionSummary`) as JSON
    /// text.
    #[pyo3(signature = (features, targets, samples = 30, seed = 0))]
    fn evaluate_regression_json(
        &self,
        py: Python<'_>,
        features: &Bound<'_, PyAny>,
        targets: &Bound<'_, PyAny>,
        samples: usize,
        seed: u64,
    ) -> PyResult<String> {
        let t = self.tabular()?.targets();
        let y = Input::<f32>::new(targets, "targets", None)?;
        let pred = self.run_regression(py, features, samples, seed)?;
        let want = [pred.n(), t];
        let fits = y.shape() == want || (t == 1 && y.shape() == [pred.n()]);
        if !fits {
            return Err(value_error(format!(
                "targets has shape {:?}; features has {} rows of the model's {t} target(s): \
                 ({}, {t})",
                y.shape(),
                pred.n(),
                pred.n()
            )));
        }
        let summary = bnn_metrics::RegressionSummary::compute(&pred, y.slice()?)
            .map_err(|e| value_error(e.to_string()))?;
        serde_json::to_string(&summary).map_err(|e| runtime_error(&e))
    }

    /// Whether the model is a regression network (a Gaussian head) rather than a classifier.
    #[getter]
    fn is_regression(&self) -> bool {
        self.config.head().is_regression()
    }

    /// The temperature stored with the model (`swbnn calibrate`, or
    /// [`Model::fit_temperature_json`] with `store`); `None` when none was fitted.
    #[getter]
    fn temperature(&self) -> PyResult<Option<f64>> {
        self.temperature
            .lock()
            .map(|t| *t)
            .map_err(|_| value_error("the model was poisoned by a failed call"))
    }

    /// Fits the temperature that minimises the NLL of the Monte-Carlo predictive on held-out
    /// `(images, labels)` (validation data, never the test set), as `swbnn calibrate` does;
    /// with `store`, writes it into the model's file (`.swb`, full-BNN file, or
    /// `calibration.json` in a model directory, atomically) and makes it the model's
    /// [`temperature`](Model::temperature). The fit (`swbnn_ops::calibration::Calibration`) as
    /// JSON text.
    #[pyo3(signature = (images, labels, samples = 30, seed = 0, store = false))]
    fn fit_temperature_json(
        &self,
        py: Python<'_>,
        images: &Bound<'_, PyAny>,
        labels: &Bound<'_, PyAny>,
        samples: usize,
        seed: u64,
        store: bool,
    ) -> PyResult<String> {
        let (input, shape) = self.images(images, "images")?;
        swbnn_ops::limits::check_samples(samples, shape[0], "the images").map_err(value_error)?;
        let labels = self.labels(labels, shape[0])?;
        let images = input.slice()?;
        let calibration = self.with_net(py, move |net, device| {
            let (logits, passes, classes) =
                bnn_train::logits_of_arrays(net, images, shape, samples, Some(seed), device)?;
            let l = bnn_train::LogitSamples {
                logits,
                samples: passes,
                n: shape[0],
                classes,
                labels,
            };
            let mc = bnn_metrics::McLogits::new(&l.logits, l.samples, l.n, l.classes)?;
            let fit = bnn_metrics::fit_temperature(&mc, &l.labels)?;
            Ok::<_, bnn_metrics::MetricsError>(swbnn_ops::calibration::Calibration::of(&fit, &l))
        })?;
        if store {
            py.detach(|| swbnn_ops::calibration::ModelFile::at(&self.path).store(&calibration))
                .map_err(pipeline_error)?;
            *self
                .temperature
                .lock()
                .map_err(|_| value_error("the model was poisoned by a failed call"))? =
                Some(calibration.temperature);
        }
        serde_json::to_string(&calibration).map_err(|e| runtime_error(&e))
    }

    /// The model's architecture, parameter counts and, for a `.swb` file, its sharing
    /// statistics, as JSON text.
    fn info_json(&self) -> PyResult<String> {
        let net = self
            .net
            .lock()
            .map_err(|_| value_error("the model was poisoned by a failed call"))?;
        let counts = count_params(&*net);
        let mut v = serde_json::json!({
            "path": self.path.display().to_string(),
            "config": self.config,
            "normalization": self.config.normalization,
            "tabular": self.config.tabular,
            "head": self.config.head(),
            "parameters": counts,
            "temperature": *self
                .temperature
                .lock()
                .map_err(|_| value_error("the model was poisoned by a failed call"))?,
        });
        match &self.source {
            Source::Shared { data, bytes } => {
                v["source"] = "swb".into();
                v["file_bytes"] = (*bytes).into();
                v["sharing"] = swbnn_ops::load::sharing_stats(data);
            }
            Source::FullBnn { bytes, .. } => {
                v["source"] = "full-bnn".into();
                v["file_bytes"] = (*bytes).into();
            }
            Source::Qbnn => v["source"] = "qbnn".into(),
            Source::Directory => v["source"] = "directory".into(),
        }
        serde_json::to_string(&v).map_err(|e| runtime_error(&e))
    }

    /// Number of classes.
    #[getter]
    fn classes(&self) -> usize {
        self.config.classes
    }

    /// Input shape `(C, H, W)` (`(1, 1, d)` for a regression network on rows of `d`
    /// features).
    #[getter]
    fn input_shape(&self) -> (usize, usize, usize) {
        self.config.input_shape()
    }

    fn __repr__(&self) -> String {
        format!(
            "Model({:?}, {:?}, {} classes, input {:?})",
            self.path.display().to_string(),
            self.config.arch,
            self.config.classes,
            self.input_shape()
        )
    }
}

/// Loads a model (see [`load_any`]) onto the CPU.
#[pyfunction]
pub fn load(py: Python<'_>, path: PathBuf) -> PyResult<Model> {
    let device = cpu()?;
    let (net, config, source, temperature) = py
        .detach(|| {
            let (net, config, source) = load_any(&path, &device)?;
            let temperature = stored_temperature(&path, &source)?;
            Ok::<_, swbnn_ops::Error>((net, config, source, temperature))
        })
        .map_err(pipeline_error)?;
    Ok(Model {
        net: Mutex::new(net),
        config,
        path,
        source,
        temperature: Mutex::new(temperature),
    })
}
