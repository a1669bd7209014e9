//! Per-epoch checkpoints, committed atomically, from which training resumes exactly.
//!
//! A checkpoint directory holds:
//!
//! - `checkpoints/epoch-<k>/` (or `epoch-<k>-step-<s>/` where an observer stopped training
//!   inside epoch `k`): `model.bpk` (the model's record) and `optimizer.bpk` (the optimiser's
//!   moments and step counts), written under a temporary name, synced, then renamed whole;
//! - `state.json`, the commit: the last epoch trained (with the running sums of a stopped
//!   epoch's part), the history, the epoch directory and
//!   the CRC-32 of its files, and what the run was (training settings, data size, parameter
//!   shapes, the caller's description). It is renamed over the old one last, so a checkpoint is
//!   always one complete epoch directory; a kill at any point leaves the previous one;
//! - `model.bpk`: the committed model, published after the commit (a hard link to the
//!   checkpoint's file, renamed into place) for `swbnn eval` and the other readers of a model
//!   directory.
//!
//! The random state needs no saving: the data order is a function of `(seed, epoch)` and the
//! device generator is re-seeded from `(seed, epoch, step)` before every step (see
//! [`train`](crate::train)). A resumed run is therefore bit-identical to an uninterrupted one
//! on the same backend and thread count: every parameter tensor and the history (timings
//! aside) are the same bits. The record files are not byte-identical: burn gives every
//! parameter a random id when a model is built and a record stores the ids, so two identical
//! runs write `model.bpk` files that differ in the ids' bytes alone (the tests compare the
//! tensors and the history).
//!
//! A directory holding `model.bpk` but no `state.json` lost its commit (it is renamed before
//! the model is published): it is refused, never trained over as if it were empty.
//!
//! Opening a directory takes a lock (two processes never train into one directory) and
//! removes what killed runs left: `*.tmp-<pid>` files and directories, and epoch directories
//! no commit names.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bnn_data::DataLoader;
use bnn_metrics::file::{BoundedFile, read_bounded};
use bnn_models::{Classifier, ClassifierBody};
use burn::module::Module;
use burn::optim::{ModuleOptimizer, OptimizerRecord};
use burn::store::ModuleRecord;
use burn::tensor::Bytes;
use serde::{Deserialize, Serialize};

use crate::{EpochStats, TrainConfig, TrainError};

const STATE: &str = "state.json";
const MODEL: &str = crate::WEIGHTS_FILE;
const OPTIMIZER: &str = "optimizer.bpk";
const CHECKPOINTS: &str = "checkpoints";
const LOCK: &str = ".lock";

/// The largest burn record file (`model.bpk`, `optimizer.bpk`) the readers take: 16 GiB, the
/// optimiser record of a Bayesian model of a billion weights (Adam's two `f32` moments for
/// each `mu` and `rho`); the largest models here have under 40 million weights. A larger file
/// is refused before it is read, and no read goes past the bound.
pub const MAX_RECORD_BYTES: u64 = 16 << 30;

/// The largest JSON file the readers take: 64 MiB. `state.json`, the largest, grows by one
/// history entry (under 1 KB) per epoch; a model directory's `config.json` and a run
/// directory's tables (swbnn reads them within this bound too) are far smaller.
pub const MAX_JSON_BYTES: u64 = 64 << 20;

/// What a checkpoint records besides the weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointState {
    /// Last epoch trained: completed, or stopped inside when the last history entry is partial
    /// ([`EpochStats::partial_steps`]).
    pub epoch: usize,
    /// Statistics of every epoch trained, the last one partial when training stopped inside it
    /// ([`EpochStats::partial_steps`]).
    pub history: Vec<EpochStats>,
    /// The committed files and the run they belong to (absent in checkpoints of older
    /// versions, which held no optimiser state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    commit: Option<Commit>,
    /// Training ended at this checkpoint before its last epoch: the observer's
    /// [`Observer::should_stop`](crate::Observer::should_stop) said so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
    /// The running sums of `epoch` where the observer stopped training inside it (the step,
    /// time and KL are the last history entry's), so that a run without the stop continues it
    /// exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) partial: Option<PartialEpoch>,
}

/// The sums the statistics of an epoch that training left early are made of (means cannot be
/// turned back into sums bit for bit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct PartialEpoch {
    /// Sum over the steps of loss times examples.
    pub(crate) loss_sum: f64,
    /// Sum of the examples' NLL.
    pub(crate) nll_sum: f64,
    /// Examples classified correctly.
    pub(crate) correct: usize,
    /// Sum of the squared errors of a regression network's means (absent, 0, in checkpoints
    /// written before regression).
    #[serde(default)]
    pub(crate) squared_error: f64,
    /// Examples seen.
    pub(crate) seen: usize,
}

impl CheckpointState {
    /// Epochs trained to their end (a stop inside an epoch leaves it out).
    pub fn complete_epochs(&self) -> usize {
        self.history
            .iter()
            .filter(|e| e.partial_steps.is_none())
            .count()
    }

    /// The epochs the run that wrote this checkpoint was asked for (`None` in checkpoints of
    /// older versions): a resumed run with more extends it.
    pub fn planned_epochs(&self) -> Option<usize> {
        self.commit.as_ref().map(|c| c.run.config.epochs)
    }

    /// Whether resuming from this checkpoint continues the run exactly (optimiser state
    /// included). Checkpoints written before optimiser states were saved resume with fresh
    /// optimiser moments.
    pub fn is_exact(&self) -> bool {
        self.commit.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Commit {
    /// The epoch directory, relative to the checkpoint directory.
    files: String,
    model_crc32: u32,
    optimizer_crc32: u32,
    run: Run,
}

/// What a checkpoint must share with a run that resumes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Run {
    /// Every training setting; `epochs` may differ (a run may be extended).
    config: TrainConfig,
    /// Training examples and batches per epoch.
    examples: usize,
    batches: usize,
    /// Path and shape of every parameter: the architecture and kind.
    parameters: Vec<(String, Vec<usize>)>,
    /// The caller's description ([`Checkpointer::with_run`]).
    described: Option<serde_json::Value>,
    /// Replicas of a data-parallel run (absent: 1, as in checkpoints from before it existed).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    world_size: usize,
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// Saves and restores training state in a directory: one directory per committed epoch
/// (model, optimiser state) and `state.json`, renamed last, as the commit point.
#[derive(Debug, Clone)]
pub struct Checkpointer {
    dir: PathBuf,
    run: Option<serde_json::Value>,
    world_size: usize,
    _lock: Option<Arc<File>>,
}

/// Further attempts, 50 ms apart, to take a checkpoint directory's lock (one second in all).
const LOCK_RETRIES: usize = 20;

fn ck_err(path: &Path, reason: impl ToString) -> TrainError {
    TrainError::Checkpoint {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// A [`bnn_io::Error`] as a [`TrainError::Checkpoint`] naming the same path.
fn file_err(e: bnn_io::Error) -> TrainError {
    let path = e.path().to_path_buf();
    match e {
        bnn_io::Error::Io { action, source, .. } => {
            ck_err(&path, format!("cannot {action}: {source}"))
        }
        other => ck_err(&path, other),
    }
}

/// Writes `bytes` to `path` atomically, replacing what is there ([`bnn_io::write_atomic`] with
/// [`bnn_io::Replace::Always`]: a temporary file beside it, fsync, rename). A file it replaces
/// keeps its permissions and, where this process may set it, its owner; a symbolic link at
/// `path` is replaced, not followed (resolve it first to write through it). Temporary files
/// of `path` that killed writers left (their process gone, where `/proc` tells) are removed
/// first.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    bnn_io::write_atomic(path, bytes, bnn_io::Replace::Always).map_err(file_err)
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

use crate::model_dir::crc32;

/// Runs a decoder of another crate, turning a panic on malformed bytes into an error.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "the decoder panicked".into())
    })
}

impl Checkpointer {
    /// A checkpointer writing into `dir` (created if missing). It locks the directory against
    /// other processes and removes what killed runs left there (stale temporary files).
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, TrainError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| ck_err(&dir, e))?;
        let lock_path = dir.join(LOCK);
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| ck_err(&lock_path, e))?;
        // A lock released a moment ago can still be held for a few milliseconds by a child
        // this process forked (the lock belongs to the open file, which a child shares until
        // its exec closes it): retried briefly, where another training run holds it for good.
        let mut tries = 0;
        let lock = loop {
            match lock.try_lock() {
                Ok(()) => break Some(Arc::new(lock)),
                Err(fs::TryLockError::WouldBlock) if tries < LOCK_RETRIES => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(ck_err(
                        &dir,
                        "another process is training in this directory",
                    ));
                }
                // A file system without locks: go on unlocked.
                Err(fs::TryLockError::Error(_)) => break None,
            }
        };
        let ck = Self {
            dir,
            run: None,
            world_size: 1,
            _lock: lock,
        };
        ck.clean()?;
        Ok(ck)
    }

    /// Describes the run beyond the model and the training settings (e.g. the data set's
    /// name): resuming a checkpoint saved with another description is refused.
    pub fn with_run(mut self, run: serde_json::Value) -> Self {
        self.run = Some(run);
        self
    }

    /// The number of data-parallel replicas that [`check`](Self::check) assumes (1 by
    /// default); training reads it from its [`DataParallel`](crate::DataParallel) instead.
    pub fn with_world_size(mut self, world_size: usize) -> Self {
        self.world_size = world_size;
        self
    }

    /// The name of the commit file in a checkpoint directory: without it there is no
    /// checkpoint to resume.
    pub const STATE_FILE: &'static str = STATE;

    /// The published model file (the last committed epoch's model).
    pub fn model_path(&self) -> PathBuf {
        self.dir.join(MODEL)
    }

    fn state_path(&self) -> PathBuf {
        self.dir.join(STATE)
    }

    /// Removes temporary files of killed runs, epoch directories no commit names, and
    /// republishes the committed model if a kill came between the commit and its publication.
    fn clean(&self) -> Result<(), TrainError> {
        let state = self.state().ok().flatten();
        // Epoch directories are only removed when the commit names one that is there: a
        // damaged state file never costs the checkpoint it should have named.
        let committed = state
            .as_ref()
            .and_then(|s| s.commit.as_ref())
            .map(|c| self.dir.join(&c.files))
            .filter(|d| d.join(MODEL).is_file());
        for dir in [self.dir.clone(), self.dir.join(CHECKPOINTS)] {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                let stale_epoch = dir.ends_with(CHECKPOINTS)
                    && name.starts_with("epoch-")
                    && committed.as_ref().is_some_and(|c| c != &path);
                if name.contains(".tmp-") || stale_epoch {
                    let removed = if path.is_dir() {
                        fs::remove_dir_all(&path)
                    } else {
                        fs::remove_file(&path)
                    };
                    removed.map_err(|e| ck_err(&path, e))?;
                }
            }
        }
        if let (Some(files), Some(commit)) =
            (committed, state.as_ref().and_then(|s| s.commit.as_ref()))
        {
            let crc_of = |p: &Path| fs::read(p).ok().map(|b| crc32(&b));
            let want = Some(commit.model_crc32);
            if crc_of(&self.model_path()) != want && crc_of(&files.join(MODEL)) == want {
                self.publish(&files.join(MODEL), commit.model_crc32)?;
            }
        }
        Ok(())
    }

    /// Makes `model` the published `model.bpk`: a hard link to the checkpoint's file, renamed
    /// into place, so that a large model is not on disk twice (a ResNet-50 BBB model is 180 MB).
    /// Every writer here replaces files by rename, never in place, and a resume checks the
    /// checkpoint's CRC-32, so a tool that did write the published file in place would be
    /// caught, not trained from. Where the file system refuses links, the file is copied.
    /// Its checksum file ([`WEIGHTS_CHECKSUM_FILE`](crate::WEIGHTS_CHECKSUM_FILE)) follows,
    /// from `crc`, the commit's CRC-32 of the file.
    fn publish(&self, model: &Path, crc: u32) -> Result<(), TrainError> {
        crate::model_dir::remove_weights_checksum(&self.model_path())?;
        bnn_io::publish_link(model, &self.model_path(), bnn_io::Replace::Always)
            .map_err(file_err)?;
        crate::model_dir::write_weights_checksum(&self.model_path(), crc)
    }

    /// Records that training ended at the last committed checkpoint before its last epoch
    /// ([`CheckpointState::stopped`]); nothing to record without a checkpoint.
    pub fn mark_stopped(&self) -> Result<(), TrainError> {
        let Some(mut state) = self.state()? else {
            return Ok(());
        };
        if !state.stopped {
            state.stopped = true;
            let json =
                serde_json::to_vec_pretty(&state).map_err(|e| ck_err(&self.state_path(), e))?;
            write_atomic(&self.state_path(), &json)?;
        }
        Ok(())
    }

    /// The last committed checkpoint's state (epoch and history), if any.
    pub fn state(&self) -> Result<Option<CheckpointState>, TrainError> {
        let path = self.state_path();
        let bytes = match read_bounded(&path, MAX_JSON_BYTES, "JSON") {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ck_err(&path, e)),
        };
        let state: CheckpointState =
            serde_json::from_slice(&bytes).map_err(|e| ck_err(&path, e))?;
        // Checked: an epoch of usize::MAX in a damaged file must be an error, not an overflow.
        if state.epoch.checked_add(1) != Some(state.history.len()) {
            return Err(ck_err(
                &path,
                format!(
                    "records epoch {} (0-based) but {} epochs of history",
                    state.epoch,
                    state.history.len()
                ),
            ));
        }
        let partial_entries = state
            .history
            .iter()
            .filter(|e| e.partial_steps.is_some())
            .count();
        let last_partial = state.history.last().and_then(|e| e.partial_steps);
        let consistent = match state.partial {
            Some(_) => partial_entries == 1 && last_partial.is_some(),
            None => partial_entries == 0,
        };
        if !consistent {
            return Err(ck_err(
                &path,
                "its partial epoch and its history disagree (only the last epoch may be partial)",
            ));
        }
        if let Some(c) = &state.commit {
            let rel = Path::new(&c.files);
            let inside = rel
                .components()
                .all(|p| matches!(p, std::path::Component::Normal(_)));
            if !inside || !rel.starts_with(CHECKPOINTS) {
                return Err(ck_err(
                    &path,
                    format!("names {:?}, outside its checkpoints", c.files),
                ));
            }
        }
        Ok(Some(state))
    }

    /// Whether training `model` on `data` with `config` may resume from this directory:
    /// `Ok(None)` when there is no checkpoint, `Ok(Some(state))` when there is one of the same
    /// run, and [`TrainError::ResumeMismatch`] naming the first difference (architecture or
    /// kind, any training setting but `epochs`, the number of examples, the description given
    /// with [`with_run`](Self::with_run)) otherwise. Reads only; call it before writing
    /// anything else into the directory.
    pub fn check<B: ClassifierBody>(
        &self,
        model: &Classifier<B>,
        data: &DataLoader,
        config: &TrainConfig,
    ) -> Result<Option<CheckpointState>, TrainError> {
        self.check_run(&self.run_of(model, data, config, self.world_size))
    }

    pub(crate) fn run_of<B: ClassifierBody>(
        &self,
        model: &Classifier<B>,
        data: &DataLoader,
        config: &TrainConfig,
        world_size: usize,
    ) -> Run {
        Run {
            config: config.clone(),
            examples: data.dataset().len(),
            batches: data.num_batches(),
            parameters: model.param_shapes(),
            described: self.run.clone(),
            world_size,
        }
    }

    fn check_run(&self, run: &Run) -> Result<Option<CheckpointState>, TrainError> {
        let Some(state) = self.state()? else {
            if self.model_path().exists() {
                return Err(ck_err(
                    &self.state_path(),
                    format!(
                        "is missing, but {MODEL} is there: the checkpoint lost its commit and cannot be resumed; nothing was changed (remove the directory to start over)"
                    ),
                ));
            }
            return Ok(None);
        };
        let mismatch = |what: String| TrainError::ResumeMismatch {
            dir: self.dir.display().to_string(),
            what,
        };
        let Some(commit) = &state.commit else {
            // An older checkpoint: only the architecture can be checked, when loading.
            return Ok(Some(state));
        };
        let saved = &commit.run;
        if saved.parameters != run.parameters {
            let first = saved
                .parameters
                .iter()
                .zip(&run.parameters)
                .find(|(a, b)| a != b)
                .map(|(a, b)| format!("{} {:?} there, {} {:?} here", a.0, a.1, b.0, b.1))
                .unwrap_or_else(|| {
                    format!(
                        "{} parameter tensors there, {} here",
                        saved.parameters.len(),
                        run.parameters.len()
                    )
                });
            return Err(mismatch(format!(
                "the architecture or kind differs ({first})"
            )));
        }
        if saved.described != run.described {
            let show = |v: &Option<serde_json::Value>| {
                v.as_ref().map_or("nothing".into(), |v| v.to_string())
            };
            return Err(mismatch(format!(
                "it was started for {}, this run is for {}",
                show(&saved.described),
                show(&run.described)
            )));
        }
        if saved.world_size != run.world_size {
            return Err(mismatch(format!(
                "it was trained by {} data-parallel replicas, this run has {} (their noise streams differ)",
                saved.world_size, run.world_size
            )));
        }
        if saved.examples != run.examples || saved.batches != run.batches {
            return Err(mismatch(format!(
                "it was trained on {} examples in {} batches, this run has {} in {}",
                saved.examples, saved.batches, run.examples, run.batches
            )));
        }
        let settings = |c: &TrainConfig| {
            let mut v = serde_json::to_value(c).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.remove("epochs");
            }
            v
        };
        let (a, b) = (settings(&saved.config), settings(&run.config));
        if a != b {
            let first = a
                .as_object()
                .zip(b.as_object())
                .and_then(|(a, b)| {
                    a.iter()
                        .find(|(k, v)| b.get(*k) != Some(*v))
                        .map(|(k, v)| format!("{k} = {v} there, {} here", b[k]))
                })
                .unwrap_or_default();
            return Err(mismatch(format!("a training setting differs: {first}")));
        }
        Ok(Some(state))
    }

    /// Saves the model and the optimiser after `epoch` (or inside it, with `partial`) and
    /// commits them (see the module docs). Returns the model's record bytes.
    pub(crate) fn save<B: ClassifierBody>(
        &self,
        model: &Classifier<B>,
        optim: &ModuleOptimizer,
        run: &Run,
        epoch: usize,
        history: &[EpochStats],
        partial: Option<PartialEpoch>,
    ) -> Result<Vec<u8>, TrainError> {
        let root = self.dir.join(CHECKPOINTS);
        fs::create_dir_all(&root).map_err(|e| ck_err(&root, e))?;
        let name = match history.last().and_then(|e| e.partial_steps) {
            None => format!("epoch-{}", epoch + 1),
            Some(step) => format!("epoch-{}-step-{step}", epoch + 1),
        };
        let target = root.join(&name);
        let model_bytes = model
            .clone()
            .into_record()
            .into_bytes()
            .map_err(|e| ck_err(&target.join(MODEL), format!("{e:?}")))?;
        let optim_bytes = optim
            .into_bytes()
            .map_err(|e| ck_err(&target.join(OPTIMIZER), format!("{e:?}")))?;
        // An epoch directory of this name is one no commit names (a resumed run starts after
        // the committed epoch): a leftover of a killed run, replaced.
        bnn_io::write_dir_atomic(&target, bnn_io::Replace::Always, |tmp| {
            for (file, bytes) in [(MODEL, &model_bytes), (OPTIMIZER, &optim_bytes)] {
                write_synced(&tmp.join(file), bytes)
                    .map_err(|e| bnn_io::Error::io(target.join(file), "write", e))?;
            }
            Ok(())
        })
        .map_err(file_err)?;
        let state = CheckpointState {
            epoch,
            history: history.to_vec(),
            commit: Some(Commit {
                files: format!("{CHECKPOINTS}/{name}"),
                model_crc32: crc32(&model_bytes),
                optimizer_crc32: crc32(&optim_bytes),
                run: run.clone(),
            }),
            // A stop inside an epoch is recorded with its checkpoint, in one write.
            stopped: partial.is_some(),
            partial,
        };
        let json = serde_json::to_vec_pretty(&state).map_err(|e| ck_err(&self.state_path(), e))?;
        write_atomic(&self.state_path(), &json)?;
        self.publish(&target.join(MODEL), crc32(&model_bytes))?;
        // Older epochs are superseded by the commit.
        if let Ok(entries) = fs::read_dir(&root) {
            for entry in entries.flatten() {
                if entry.path() != target
                    && entry.file_name().to_string_lossy().starts_with("epoch-")
                {
                    let _ = fs::remove_dir_all(entry.path());
                }
            }
        }
        Ok(model_bytes.to_vec())
    }

    /// `model` with the parameters of `record` (bytes [`save`](Self::save) returned): what a
    /// resumed run would load. Training returns this rather than the model in memory, whose
    /// tensors may be laid out otherwise, so that later stages (a gradient pass, a GMM) see
    /// the same bits whether training ran in this process or was resumed.
    pub(crate) fn reload<B: ClassifierBody>(
        &self,
        model: Classifier<B>,
        record: Vec<u8>,
    ) -> Result<Classifier<B>, TrainError> {
        decode_model(&self.model_path(), record, model)
    }

    /// Loads the committed checkpoint into `model` and `optim` (built with the run's
    /// configuration) after checking that it belongs to `run`.
    pub(crate) fn resume<B: ClassifierBody>(
        &self,
        model: Classifier<B>,
        optim: ModuleOptimizer,
        run: &Run,
    ) -> Result<Option<(Classifier<B>, ModuleOptimizer, CheckpointState)>, TrainError> {
        let Some(state) = self.check_run(run)? else {
            return Ok(None);
        };
        let Some(commit) = &state.commit else {
            let model = load_model(&self.model_path(), model)?;
            return Ok(Some((model, optim, state)));
        };
        let files = self.dir.join(&commit.files);
        let read = |name: &str, crc: u32| {
            let path = files.join(name);
            let bytes = read_bounded(&path, MAX_RECORD_BYTES, "burn record")
                .map_err(|e| ck_err(&path, e))?;
            if crc32(&bytes) != crc {
                return Err(ck_err(
                    &path,
                    format!(
                        "does not match the checksum {STATE} records: the checkpoint is damaged"
                    ),
                ));
            }
            Ok((path, bytes))
        };
        let (path, bytes) = read(MODEL, commit.model_crc32)?;
        let model = decode_model(&path, bytes, model)?;
        let (path, bytes) = read(OPTIMIZER, commit.optimizer_crc32)?;
        check_optimizer_record(&bytes, &model)
            .map_err(|e| ck_err(&path, format!("corrupt optimiser state: {e}")))?;
        let record = OptimizerRecord::from_bytes(Bytes::from_bytes_vec(bytes))
            .map_err(|e| ck_err(&path, format!("corrupt optimiser state: {e:?}")))?;
        let optim = guarded(|| optim.load_record(record))
            .map_err(|e| ck_err(&path, format!("corrupt optimiser state: {e}")))?;
        Ok(Some((model, optim, state)))
    }
}

/// Every parameter's id with its shape.
struct ParamIds(std::collections::HashMap<u64, Vec<usize>>);

impl burn::module::ModuleVisitor for ParamIds {
    fn visit_float<const D: usize>(
        &mut self,
        param: &burn::module::Param<burn::prelude::Tensor<D>>,
    ) {
        self.0.insert(param.id.val(), param.lazy_shape().to_vec());
    }
}

/// Checks an optimiser record against the model it belongs to before burn reads it (burn's
/// loader panics on some malformed records): every state tensor is an `f32` of its parameter's
/// shape, named after and carrying the id of a parameter of `model`, and every scalar and path
/// belongs to one, with the parameter's rank where it records one.
fn check_optimizer_record<B: ClassifierBody>(
    bytes: &[u8],
    model: &Classifier<B>,
) -> Result<(), String> {
    let mut ids = ParamIds(Default::default());
    model.visit(&mut ids);
    let ids = ids.0;
    let reader = burn_pack::Reader::from_bytes(Bytes::from_bytes_vec(bytes.to_vec()))
        .map_err(|e| format!("{e:?}"))?;
    let owner = |key: &str| -> Result<(u64, &Vec<usize>), String> {
        let id = key
            .split('.')
            .next()
            .and_then(|id| id.parse::<u64>().ok())
            .ok_or_else(|| format!("entry {key:?} names no parameter"))?;
        let shape = ids
            .get(&id)
            .ok_or_else(|| format!("entry {key:?} is for parameter {id}, which the model lacks"))?;
        Ok((id, shape))
    };
    for (key, value) in reader.scalars() {
        let (_, shape) = owner(key)?;
        if key.ends_with(".__rank") && u64::try_from(*value).ok() != Some(shape.len() as u64) {
            return Err(format!(
                "{key} is {value:?}, the parameter has rank {}",
                shape.len()
            ));
        }
    }
    for key in reader.metadata().keys() {
        owner(&format!("{key}."))?;
    }
    for t in reader.into_tensors().map_err(|e| format!("{e:?}"))? {
        let (id, shape) = owner(&t.name)?;
        if t.param_id != Some(id) {
            return Err(format!("tensor {} carries id {:?}", t.name, t.param_id));
        }
        if t.dtype != burn_pack::DType::F32 || t.shape.as_slice() != shape.as_slice() {
            return Err(format!(
                "tensor {} is {:?} {:?}, the parameter is f32 {shape:?}",
                t.name, t.dtype, t.shape
            ));
        }
    }
    Ok(())
}

fn decode_model<B: ClassifierBody>(
    path: &Path,
    bytes: Vec<u8>,
    model: Classifier<B>,
) -> Result<Classifier<B>, TrainError> {
    let record = guarded(|| ModuleRecord::from_bytes(Bytes::from_bytes_vec(bytes)))
        .map_err(|e| ck_err(path, format!("corrupt model file: {e}")))?
        .map_err(|e| ck_err(path, format!("corrupt model file: {e:?}")))?;
    guarded(|| model.try_load_record(record))
        .map_err(|e| ck_err(path, format!("corrupt model file: {e}")))?
        .map_err(|e| ck_err(path, format!("does not match the model: {e:?}")))
}

/// Loads a model record file (a checkpoint's `model.bpk`) into `model`, refusing one with a
/// NaN or infinite parameter or one beyond [`MAX_PARAM_MAGNITUDE`](crate::MAX_PARAM_MAGNITUDE)
/// (the error names the file and the parameter).
///
/// The file must be a regular file (a directory, FIFO or device is an error saying which)
/// and hold at least the bytes `model`'s parameters take as `f32` and at most
/// [`MAX_RECORD_BYTES`], which is checked before anything is read into memory: a short,
/// foreign or endless file is an error, not a huge allocation.
pub fn load_model<B: ClassifierBody>(
    path: &Path,
    model: Classifier<B>,
) -> Result<Classifier<B>, TrainError> {
    let need: u64 = model
        .param_shapes()
        .iter()
        .map(|(_, s)| s.iter().map(|&d| d as u64).product::<u64>())
        .sum::<u64>()
        .saturating_mul(4);
    let file =
        BoundedFile::open(path, MAX_RECORD_BYTES, "model record").map_err(|e| ck_err(path, e))?;
    let len = file.len();
    if len < need {
        return Err(ck_err(
            path,
            format!(
                "holds {len} bytes, fewer than the {need} its architecture's parameters need (see config.json beside it)"
            ),
        ));
    }
    let bytes = file.read_rest(Vec::new()).map_err(|e| ck_err(path, e))?;
    crate::model_dir::check_weights_checksum(path, &bytes)?;
    let model = decode_model(path, bytes, model)?;
    // Training never commits a non-finite parameter: one here is damage, named here rather
    // than as a NaN in some later output.
    if let Some(param) = crate::first_non_finite(&model) {
        return Err(ck_err(
            path,
            format!("parameter {param} holds a non-finite value (NaN or infinity)"),
        ));
    }
    if let Some(out) = crate::first_out_of_range(&model) {
        return Err(ck_err(path, out));
    }
    Ok(model)
}
