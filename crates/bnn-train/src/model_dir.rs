//! A directory holding one model: its architecture ([`CONFIG_FILE`]) and weights
//! ([`WEIGHTS_FILE`]), or a 2DGBNN model ([`SWB_FILE`]), and a fitted temperature
//! ([`CALIBRATION_FILE`]). `swbnn train` and `swbnn import` write one; every stage directory of a
//! reproduction run is one; a [`Checkpointer`](crate::Checkpointer) publishes its
//! [`WEIGHTS_FILE`]. This module alone knows those names.

use std::path::{Path, PathBuf};

use bnn_models::{ModelConfig, Network};
use burn::module::Module;
use burn::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{MAX_JSON_BYTES, TrainError, load_model, write_atomic};

/// A model directory's architecture (a [`ModelConfig`] as JSON).
pub const CONFIG_FILE: &str = "config.json";
/// A model directory's weights (burn's record of the [`Network`]).
pub const WEIGHTS_FILE: &str = "model.bpk";
/// A model directory's 2DGBNN model, as a user loads it (a `.swb` file; see the `swshare`
/// crate).
pub const SWB_FILE: &str = "model.swb";
/// A model directory's quantised Bayesian network (a `.qbnn` file; see the `swshare` crate).
pub const QBNN_FILE: &str = "model.qbnn";
/// A model directory's fitted temperature and how it was fitted (for the models whose file
/// has no calibration section of its own).
pub const CALIBRATION_FILE: &str = "calibration.json";

/// A directory holding one model: its architecture ([`CONFIG_FILE`]) and weights
/// ([`WEIGHTS_FILE`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelDir {
    dir: PathBuf,
}

impl ModelDir {
    /// The model directory `dir` (nothing is read or created).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The architecture's file.
    pub fn config_path(&self) -> PathBuf {
        self.dir.join(CONFIG_FILE)
    }

    /// The weights' file.
    pub fn weights_path(&self) -> PathBuf {
        self.dir.join(WEIGHTS_FILE)
    }

    /// The 2DGBNN model's file ([`SWB_FILE`]).
    pub fn swb_path(&self) -> PathBuf {
        self.dir.join(SWB_FILE)
    }

    /// The fitted temperature's file ([`CALIBRATION_FILE`]).
    pub fn calibration_path(&self) -> PathBuf {
        self.dir.join(CALIBRATION_FILE)
    }

    /// Whether the directory holds an architecture and weights.
    pub fn has_weights(&self) -> bool {
        self.config_path().is_file() && self.weights_path().is_file()
    }

    /// The architecture.
    pub fn read_config(&self) -> Result<ModelConfig, TrainError> {
        read_json(&self.config_path())
    }

    /// Writes the architecture, creating the directory.
    pub fn write_config(&self, config: &ModelConfig) -> Result<(), TrainError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| TrainError::io(&self.dir, e))?;
        write_json(&self.config_path(), config)
    }

    /// The resume check of a model directory: the architecture a run resuming it trains must be
    /// the one its [`CONFIG_FILE`] holds (none there: nothing to check). The error names the
    /// directory and both models; nothing is written.
    pub fn check_resume(&self, config: &ModelConfig) -> Result<(), TrainError> {
        if !self.config_path().exists() {
            return Ok(());
        }
        let mut old = self.read_config()?;
        // A config written before the record existed resumes on any data, as it did.
        if old.trained_on.is_none() {
            old.trained_on.clone_from(&config.trained_on);
        }
        if let (Some(was), Some(is)) = (&old.trained_on, &config.trained_on)
            && was != is
        {
            return Err(TrainError::Resume(format!(
                "cannot resume {}: it trained on {} ({} validation images, files {:?}), this run \
                 reads {} ({} validation images, files {:?}); nothing was changed",
                self.dir.display(),
                was.dataset,
                was.validation,
                was.files.keys().collect::<Vec<_>>(),
                is.dataset,
                is.validation,
                is.files.keys().collect::<Vec<_>>()
            )));
        }
        if old != *config {
            return Err(TrainError::Resume(format!(
                "cannot resume {}: its config.json is for another model ({} {:?}, estimator \
                 {:?}), this run asks for {} {:?}, estimator {:?}; nothing was changed",
                self.dir.display(),
                old.arch,
                old.kind,
                old.bayes.estimator,
                config.arch,
                config.kind,
                config.bayes.estimator
            )));
        }
        Ok(())
    }

    /// Writes `model` and its architecture `config`, each atomically, creating the directory.
    pub fn save(&self, model: &Network, config: &ModelConfig) -> Result<(), TrainError> {
        let bytes =
            model
                .clone()
                .into_record()
                .into_bytes()
                .map_err(|e| TrainError::Checkpoint {
                    path: self.weights_path().display().to_string(),
                    reason: format!("serialising the model record: {e}"),
                })?;
        self.write_config(config)?;
        write_atomic(&self.weights_path(), &bytes)
    }

    /// The model of the architecture and weights, on `device`.
    pub fn load(&self, device: &Device) -> Result<(Network, ModelConfig), TrainError> {
        let config = self.read_config()?;
        let model = load_model(&self.weights_path(), config.init(device)?)?;
        Ok((model, config))
    }
}

/// Reads a JSON file, naming it in the error: a regular file (a directory, FIFO or device is
/// an error saying which) of at most [`MAX_JSON_BYTES`].
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, TrainError> {
    let bytes =
        bnn_io::read_bounded(path, MAX_JSON_BYTES, "JSON").map_err(|e| TrainError::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| TrainError::Json {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// Writes `value` as pretty JSON, atomically.
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), TrainError> {
    let json = serde_json::to_vec_pretty(value).map_err(|e| TrainError::Json {
        path: path.display().to_string(),
        reason: format!("writing JSON: {e}"),
    })?;
    write_atomic(path, &json)
}
