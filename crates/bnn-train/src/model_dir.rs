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
/// The CRC-32 of a model directory's [`WEIGHTS_FILE`] (8 hex digits), written with it and
/// checked by every load, so that a flipped byte of the weights is an error naming the file
/// rather than a model that silently predicts otherwise. A directory written before the
/// checksum existed has none and loads unchecked.
pub const WEIGHTS_CHECKSUM_FILE: &str = "model.bpk.crc32";
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
        // The old checksum goes first: a save killed between the two writes then leaves
        // weights that load unchecked, not good weights that a stale checksum calls damaged.
        remove_weights_checksum(&self.weights_path())?;
        write_atomic(&self.weights_path(), &bytes)?;
        write_weights_checksum(&self.weights_path(), crc32(&bytes))
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

/// The CRC-32 of `bytes` (IEEE, as zip and PNG use).
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(bytes);
    h.finalize()
}

/// The checksum file of the record file `weights` (`model.bpk` -> `model.bpk.crc32`).
fn checksum_path(weights: &Path) -> PathBuf {
    let mut name = weights.as_os_str().to_os_string();
    name.push(".crc32");
    PathBuf::from(name)
}

/// Removes the checksum file of the record file `weights`, if there is one (before `weights`
/// is replaced).
pub(crate) fn remove_weights_checksum(weights: &Path) -> Result<(), TrainError> {
    let sum = checksum_path(weights);
    match std::fs::remove_file(&sum) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(TrainError::io(&sum, e)),
        _ => Ok(()),
    }
}

/// Writes `crc` as the checksum of the record file `weights` ([`WEIGHTS_CHECKSUM_FILE`]
/// beside a model directory's weights), atomically.
pub(crate) fn write_weights_checksum(weights: &Path, crc: u32) -> Result<(), TrainError> {
    write_atomic(&checksum_path(weights), format!("{crc:08x}\n").as_bytes())
}

/// Checks the record file `weights`, read as `bytes`, against its checksum file when it has
/// one: a mismatch or an unreadable checksum is an error naming both files.
pub(crate) fn check_weights_checksum(weights: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    let sum = checksum_path(weights);
    let text = match bnn_io::read_bounded(&sum, 64, "checksum") {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(TrainError::io(&sum, e)),
    };
    let bad = |reason: String| TrainError::Checkpoint {
        path: weights.display().to_string(),
        reason,
    };
    let want = std::str::from_utf8(&text)
        .ok()
        .and_then(|t| u32::from_str_radix(t.trim(), 16).ok())
        .ok_or_else(|| {
            bad(format!(
                "its checksum file {} is not 8 hex digits",
                sum.display()
            ))
        })?;
    let got = crc32(bytes);
    if got != want {
        return Err(bad(format!(
            "its CRC-32 is {got:08x}, not the {want:08x} that {} records: the file is damaged \
             (or a save was interrupted); nothing was loaded",
            sum.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flipped_byte_of_the_weights_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let weights = dir.path().join(WEIGHTS_FILE);
        let bytes = b"weights of a model".to_vec();
        std::fs::write(&weights, &bytes).unwrap();
        write_weights_checksum(&weights, crc32(&bytes)).unwrap();
        check_weights_checksum(&weights, &bytes).unwrap();
        let mut flipped = bytes.clone();
        flipped[3] ^= 0x10;
        let e = check_weights_checksum(&weights, &flipped)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("model.bpk") && e.contains(WEIGHTS_CHECKSUM_FILE) && e.contains("damaged"),
            "{e}"
        );
        std::fs::write(checksum_path(&weights), b"not hex").unwrap();
        let e = check_weights_checksum(&weights, &bytes)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not 8 hex digits"), "{e}");
        // A directory from before the checksum loads unchecked.
        std::fs::remove_file(checksum_path(&weights)).unwrap();
        check_weights_checksum(&weights, &flipped).unwrap();
    }
}
