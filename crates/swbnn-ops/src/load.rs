//! One loader for every kind of model file the commands and the Python package take: a model
//! directory (`swbnn train`, `swbnn import`), a `.swb` file (shared or full BNN), a `.qbnn`
//! file, and a reproduction's stage directory holding `model.swb` or `model.qbnn`.

use std::path::Path;

use bnn_models::{ModelConfig, Network};
use burn::prelude::*;
use swshare::format::{self, FormatError, SharedModelData};

use crate::Error;
use crate::calibration::ModelFile;
use bnn_train::ModelDir;

/// What a model was loaded from.
pub enum LoadedFrom {
    /// A `.swb` file of a weight-shared model, with its content.
    Shared {
        /// The file's content.
        data: Box<SharedModelData>,
        /// The file's size in bytes.
        bytes: u64,
    },
    /// A full-BNN `.swb` file (every weight's own `(mu, rho)`).
    FullBnn {
        /// The file's size in bytes.
        bytes: u64,
        /// The fitted temperature the file holds, if any.
        temperature: Option<f64>,
    },
    /// A `.qbnn` file (a quantised BNN).
    Qbnn,
    /// A directory with `model.bpk` and `config.json`.
    Directory,
}

/// A model ready to run, with its configuration and where it came from.
pub struct LoadedModel {
    /// The network.
    pub net: Network,
    /// Its configuration (architecture, kind, input, what it was trained on).
    pub config: ModelConfig,
    /// The file kind it was read from.
    pub from: LoadedFrom,
}

impl LoadedModel {
    /// The fitted temperature stored with the model at `path` (`swbnn calibrate`): in the
    /// file, or in a model directory's `calibration.json`.
    pub fn stored_temperature(&self, path: &Path) -> Result<Option<f64>, Error> {
        match &self.from {
            LoadedFrom::Shared { data, .. } => Ok(data.temperature),
            LoadedFrom::FullBnn { temperature, .. } => Ok(*temperature),
            LoadedFrom::Qbnn | LoadedFrom::Directory => ModelFile::at(path).temperature(),
        }
    }

    /// The conformal calibration stored with the model at `path` (`swbnn calibrate
    /// --conformal`), if any.
    pub fn stored_conformal(
        &self,
        path: &Path,
    ) -> Result<Option<bnn_metrics::ConformalCalibration>, Error> {
        match &self.from {
            LoadedFrom::Shared { data, .. } => Ok(data.conformal.clone()),
            LoadedFrom::FullBnn { .. } => {
                Ok(format::load_full_bnn(ModelFile::at(path).path())?.conformal)
            }
            LoadedFrom::Qbnn | LoadedFrom::Directory => ModelFile::at(path).conformal(),
        }
    }
}

/// Loads the model at `path` onto `device`: any kind the module docs list. Parameters that
/// are not finite or beyond [`bnn_train::MAX_PARAM_MAGNITUDE`] are refused, naming the
/// parameter and the file.
pub fn load_model(path: &Path, device: &Device) -> Result<LoadedModel, Error> {
    let file = match ModelFile::at(path) {
        ModelFile::Dir(_) => {
            let (net, config) = ModelDir::new(path).load(device)?;
            return Ok(LoadedModel {
                net,
                config,
                from: LoadedFrom::Directory,
            });
        }
        ModelFile::Qbnn(file) => {
            let data = format::qbnn::load(&file)?;
            let (net, config) = crate::qbnn::from_qbnn(&data, device).map_err(|e| {
                Error::Usage(format!("building the model of {}: {e}", file.display()))
            })?;
            return Ok(LoadedModel {
                net,
                config,
                from: LoadedFrom::Qbnn,
            });
        }
        ModelFile::Swb(file) => file,
    };
    let bytes = std::fs::metadata(&file)
        .map_err(|e| Error::io(&file, e))?
        .len();
    // The same validation as `inspect`; the architecture is checked before the index.
    let loaded = match swshare::burn_edges::load_swb::<ModelConfig>(&file, device) {
        Ok((data, _)) => {
            let (net, config) = swshare::burn_edges::from_swb(&data, device).map_err(|e| {
                Error::Usage(format!("building the model of {}: {e}", file.display()))
            })?;
            LoadedModel {
                net,
                config,
                from: LoadedFrom::Shared {
                    data: Box::new(data),
                    bytes,
                },
            }
        }
        Err(e) => {
            let format_error = match &e {
                swshare::burn_edges::EdgeError::Format(f) => f.format_error(),
                _ => None,
            };
            let in_model_dir = file
                .parent()
                .is_some_and(|d| ModelDir::new(d).config_path().is_file());
            match format_error {
                Some(FormatError::WrongKind { .. }) => {
                    let (net, config, temperature) = load_full_bnn(&file, device)?;
                    LoadedModel {
                        net,
                        config,
                        from: LoadedFrom::FullBnn { bytes, temperature },
                    }
                }
                Some(FormatError::BadMagic { .. }) if in_model_dir => {
                    return Err(Error::Usage(format!(
                        "{} is not a .swb file; for a model trained with `swbnn train`, pass \
                         its directory",
                        file.display()
                    )));
                }
                _ => return Err(e.into()),
            }
        }
    };
    if let Some(param) = bnn_train::first_non_finite(&loaded.net) {
        return Err(Error::Usage(format!(
            "{}: parameter {param} holds a non-finite value (NaN or infinity)",
            file.display()
        )));
    }
    if let Some(out) = bnn_train::first_out_of_range(&loaded.net) {
        return Err(Error::Usage(format!("{}: {out}", file.display())));
    }
    Ok(loaded)
}

/// A Bayesian network from a full-BNN file: every weight's `(mu, rho)` and the other
/// parameters by path; a parameter the file does not set is an error. Also returns the
/// file's temperature.
fn load_full_bnn(
    path: &Path,
    device: &Device,
) -> Result<(Network, ModelConfig, Option<f64>), Error> {
    let data = format::load_full_bnn(path)?;
    let config: ModelConfig =
        serde_json::from_str(&data.arch).map_err(|e| Error::parse(path, e))?;
    let mut tensors = Vec::new();
    let mut at = 0;
    for l in &data.layers {
        let n: usize = l.shape.iter().product();
        for (suffix, values) in [("_mu", &data.mu), ("_rho", &data.rho)] {
            let values = values.get(at..at + n).ok_or_else(|| {
                Error::Usage(format!(
                    "{}: layer {} runs past the file's weights",
                    path.display(),
                    l.path
                ))
            })?;
            tensors.push(bnn_layers::NamedTensor {
                path: format!("{}{suffix}", l.path),
                shape: l.shape.clone(),
                data: values.to_vec(),
            });
        }
        at += n;
    }
    tensors.extend(data.unshared.iter().map(|t| bnn_layers::NamedTensor {
        path: t.path.clone(),
        shape: t.shape.clone(),
        data: t.data.clone(),
    }));
    let (net, set) = bnn_layers::import_params(config.init(device)?, &tensors)?;
    if set != tensors.len() {
        return Err(Error::Usage(format!(
            "{}: {} of the file's {} tensors match no parameter of its architecture",
            path.display(),
            tensors.len() - set,
            tensors.len()
        )));
    }
    Ok((net, config, data.temperature))
}

/// A `.swb` content's weights by fate, codebook size and layers: what `swbnn inspect` and
/// Python's `Model.info()` show.
pub fn sharing_stats(data: &SharedModelData) -> serde_json::Value {
    use swshare::{OutlierCause, WeightFate};
    let (mut shared, mut ellipse, mut mean, mut grad, mut small) = (0, 0, 0, 0, 0);
    for f in &data.fates {
        match f {
            WeightFate::Shared(_) => shared += 1,
            WeightFate::Ellipse(_) => ellipse += 1,
            WeightFate::Outlier(OutlierCause::MeanThreshold) => mean += 1,
            WeightFate::Outlier(OutlierCause::Gradient) => grad += 1,
            WeightFate::Outlier(OutlierCause::SmallCluster) => small += 1,
        }
    }
    serde_json::json!({
        "gaussians": data.codebook_mu.len(),
        "shareable_weights": data.fates.len(),
        "plain_shared": shared,
        "ellipse_weights": ellipse,
        "outliers": {"mean_threshold": mean, "gradient": grad, "small_cluster": small},
        "unshared_values": data.unshared.iter().map(|t| t.data.len()).sum::<usize>(),
        "layers": data.layers.len(),
    })
}
