//! Per-epoch checkpoints: the model's record (burnpack) and the training history, written
//! atomically so a crash never leaves a half-written file.

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::store::ModuleRecord;
use burn::tensor::Bytes;
use models::Network;
use serde::{Deserialize, Serialize};

use crate::{EpochStats, TrainError};

/// What a checkpoint records besides the weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointState {
    /// Last completed epoch.
    pub epoch: usize,
    /// Statistics of every completed epoch.
    pub history: Vec<EpochStats>,
}

/// Saves and restores training state in a directory (`model.bpk`, `state.json`).
///
/// The optimiser's moments are not saved: a resumed run restarts them (documented limitation).
#[derive(Debug, Clone)]
pub struct Checkpointer {
    dir: PathBuf,
}

fn ck_err(path: &Path, reason: impl ToString) -> TrainError {
    TrainError::Checkpoint {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(ck_err(path, e));
    }
    Ok(())
}

impl Checkpointer {
    /// A checkpointer writing into `dir` (created if missing).
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, TrainError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|e| ck_err(&dir, e))?;
        Ok(Self { dir })
    }

    /// The model file.
    pub fn model_path(&self) -> PathBuf {
        self.dir.join("model.bpk")
    }

    fn state_path(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    /// Saves the model and the history after `epoch`.
    pub fn save(
        &self,
        model: &Network,
        epoch: usize,
        history: &[EpochStats],
    ) -> Result<(), TrainError> {
        let path = self.model_path();
        let bytes = model
            .clone()
            .into_record()
            .into_bytes()
            .map_err(|e| ck_err(&path, format!("{e:?}")))?;
        write_atomic(&path, &bytes)?;
        let state = CheckpointState {
            epoch,
            history: history.to_vec(),
        };
        let json = serde_json::to_vec_pretty(&state).map_err(|e| ck_err(&self.state_path(), e))?;
        // The state is written last: a state file always names a complete model file.
        write_atomic(&self.state_path(), &json)
    }

    /// The last checkpoint's state (epoch and history), if any.
    pub fn state(&self) -> Result<Option<CheckpointState>, TrainError> {
        let state_path = self.state_path();
        if !state_path.exists() {
            return Ok(None);
        }
        let state = serde_json::from_slice(
            &std::fs::read(&state_path).map_err(|e| ck_err(&state_path, e))?,
        )
        .map_err(|e| ck_err(&state_path, e))?;
        Ok(Some(state))
    }

    /// Loads the last checkpoint into `model` (built with the same configuration), if any.
    pub fn resume(&self, model: Network) -> Result<Option<(Network, CheckpointState)>, TrainError> {
        let Some(state) = self.state()? else {
            return Ok(None);
        };
        let model = load_model(&self.model_path(), model)?;
        Ok(Some((model, state)))
    }
}

/// Loads a model record file written by [`Checkpointer::save`] into `model`.
pub fn load_model(path: &Path, model: Network) -> Result<Network, TrainError> {
    let bytes = std::fs::read(path).map_err(|e| ck_err(path, e))?;
    let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(bytes))
        .map_err(|e| ck_err(path, format!("corrupt model file: {e:?}")))?;
    model
        .try_load_record(record)
        .map_err(|e| ck_err(path, format!("does not match the model: {e:?}")))
}
