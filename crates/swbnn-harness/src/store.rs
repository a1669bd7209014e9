//! The run directory, read and written here alone.
//!
//! ```text
//! <out>/
//!   setup.json                 the run's Setup (written before any stage)
//!   tables-setup.json          the setup a table run was made with (what --resume checks)
//!   table.md, table.json       the main table (a multi-seed run: mean ± sd and every seed)
//!   report.json                the 2DGBNN compression report
//!   corruptions.{json,md}      every method on every corruption (when asked for)
//!   validation.{json,md}       every method on the validation split (for choices; a
//!                              multi-seed run: mean ± sd and every seed)
//!   tables.{md,json}           the other tables (cargo xtask reproduce --tables)
//!   <arch>-2dgbnn.swb          a copy of the 2DGBNN model
//!   stages/<stage>/            one directory per stage (`deterministic`, `bbb`, `2dgbnn`, and
//!                              each table's own: `qbnn-sigma4`, `ensemble-1`, `gmm-k-50`, ...)
//!     config.json, model.bpk   the model directory (ModelDir): architecture and weights
//!     state.json, checkpoints/ its training checkpoint (bnn_train::Checkpointer)
//!     model.swb                the 2DGBNN model as a user loads it
//!     row.json                 the stage's evaluated row
//!     validation-row.json      its row on the validation split
//!     corruptions.json         its rows on the corrupted test sets
//!     predictions.bin, *.npy   its evaluation's predictions, for the figures and for NumPy
//!     sharing-plan.bin         the 2DGBNN sharing plan (fates, Gaussians)
//!     compress.json            a table variant's 2DGBNN configuration
//!     model.qbnn               a quantised BNN
//!   seed-<i>/                  a multi-seed run: one such tree per seed
//! ```
//!
//! [`ModelDir`] is a directory holding one model; [`StageDir`] a stage's directory with its
//! checkpoint and its cached results. Every file is written atomically (a temporary name, then
//! a rename), so a run killed at any point leaves each file whole or absent.

use std::path::{Path, PathBuf};

use bnn_data::Corruption;
use bnn_metrics::{MetricsError, Predictive, Probabilities};
use bnn_models::{ModelConfig, Network};
use bnn_train::{Checkpointer, EpochStats, Predictions, write_atomic};
use burn::prelude::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use swshare::SharingPlan;
use swshare::burn_edges::from_swb;

pub use bnn_train::{CONFIG_FILE, ModelDir, QBNN_FILE, SWB_FILE, WEIGHTS_FILE};
pub use swbnn_ops::predictions::save_predictions_npy;
pub use swbnn_ops::run_record::SETUP_FILE;

use crate::Error;
use crate::results::{CorruptionRow, Outcome, Row, SeedSummary, markdown, markdown_corruptions};
use crate::setup::{Setup, ValidationSplit};
use crate::validation::{self, ValidationRow};

/// The file that pins the setup of a table run, so `--resume` cannot mix two setups' stages.
pub const TABLES_SETUP_FILE: &str = "tables-setup.json";
/// The directory of the stages in a run directory.
pub const STAGES_DIR: &str = "stages";
/// A stage's evaluated row.
pub const ROW_FILE: &str = "row.json";
/// A stage's rows on the corrupted test sets (and, in a run directory, every method's).
pub const CORRUPTIONS_FILE: &str = "corruptions.json";
/// The corruption rows as Markdown.
pub const CORRUPTIONS_MD: &str = "corruptions.md";
/// Every method's metrics on the validation split (a multi-seed run: summaries and every
/// seed's rows), apart from the test rows.
pub const VALIDATION_JSON: &str = "validation.json";
/// The validation rows as Markdown.
pub const VALIDATION_MD: &str = "validation.md";
/// A stage's row on the validation split.
pub const VALIDATION_ROW_FILE: &str = "validation-row.json";
/// A stage's evaluation predictions (test and OOD sets).
pub const PREDICTIONS_FILE: &str = "predictions.bin";
/// The 2DGBNN sharing plan of a stage directory.
pub const PLAN_FILE: &str = "sharing-plan.bin";
/// The main table as Markdown.
pub const TABLE_MD: &str = "table.md";
/// The main table's rows (a multi-seed run: summaries and every seed's rows).
pub const TABLE_JSON: &str = "table.json";
/// The 2DGBNN compression report.
pub const REPORT_JSON: &str = "report.json";
/// The other tables' report (`cargo xtask reproduce --tables`).
pub const TABLES_MD: &str = "tables.md";
/// The other tables' rows.
pub const TABLES_JSON: &str = "tables.json";
/// A regression run's table over its seeds, in Markdown ([`crate::regression`]).
pub const REGRESSION_MD: &str = "regression.md";
/// A regression run's rows and summaries, in JSON.
pub const REGRESSION_JSON: &str = "regression.json";
/// A regression stage's row, cached in its stage directory.
pub const REGRESSION_ROW_FILE: &str = "regression-row.json";
/// A table variant's 2DGBNN configuration, in its stage directory.
pub const COMPRESS_CONFIG_FILE: &str = "compress.json";
/// The directory of a stage's predictions on the corrupted test sets.
pub const CORRUPTIONS_DIR: &str = "corruptions";

/// Largest predictions file read back: 1 GiB (ImageNet's 50,000 x 1,000 probabilities take
/// 200 MB), so a damaged length field cannot ask for more.
const PREDICTIONS_LIMIT: usize = 1 << 30;

/// The stages of the run directory `out_dir`.
pub fn stages_dir(out_dir: &Path) -> PathBuf {
    out_dir.join(STAGES_DIR)
}

/// The directory of stage `name` in the run directory `out_dir`.
pub fn stage_path(out_dir: &Path, name: &str) -> PathBuf {
    stages_dir(out_dir).join(name)
}

/// Clears the stages an earlier run left in `setup.out_dir` unless `setup.resume`: a run that
/// does not resume starts every stage afresh.
pub fn clear_stages_unless_resuming(setup: &Setup) -> Result<(), Error> {
    let stages = stages_dir(&setup.out_dir);
    if !setup.resume && stages.exists() {
        std::fs::remove_dir_all(&stages).map_err(|e| Error::io(&stages, e))?;
    }
    Ok(())
}

/// The directory of seed `i` of a multi-seed run in `out_dir`.
pub fn seed_dir(out_dir: &Path, i: u64) -> PathBuf {
    out_dir.join(format!("seed-{i}"))
}

impl Setup {
    /// The setup of seed `i` of a multi-seed run: seed number `self.seed + i`
    /// ([`Setup::with_seed`]: every stage's seed shifted by `1000 * i`; the data splits stay
    /// the same), output in [`seed_dir`] (`out_dir/seed-<i>`), where its own [`SETUP_FILE`]
    /// records the seed number.
    pub fn for_seed(&self, i: u64) -> Setup {
        let mut s = self.with_seed(self.seed.wrapping_add(i));
        s.out_dir = seed_dir(&self.out_dir, i);
        s
    }
}

/// Reads a JSON file, naming it in the error: a regular file (a directory, FIFO or device is
/// an error saying which) of at most [`bnn_train::MAX_JSON_BYTES`].
pub(crate) fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, Error> {
    Ok(bnn_train::read_json(path)?)
}

/// Writes `value` as pretty JSON, atomically.
pub(crate) fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), Error> {
    Ok(bnn_train::write_json(path, value)?)
}

/// Writes a text file atomically.
pub(crate) fn write_text(path: &Path, text: &str) -> Result<(), Error> {
    Ok(write_atomic(path, text.as_bytes())?)
}

/// Writes the run's setup into `out_dir` ([`SETUP_FILE`]), creating the directory.
pub fn write_setup(out_dir: &Path, setup: &Setup) -> Result<(), Error> {
    std::fs::create_dir_all(out_dir).map_err(|e| Error::io(out_dir, e))?;
    write_json(&out_dir.join(SETUP_FILE), setup)
}

/// The setup a run directory was made with ([`SETUP_FILE`]).
pub fn read_setup(dir: &Path) -> Result<Setup, Error> {
    read_json(&dir.join(SETUP_FILE))
}

/// The resume check of a run directory `dir` (nothing there: nothing to check): the run
/// resuming it must use the seed number and the validation split its [`SETUP_FILE`] records (a
/// file written before they were recorded: seed 0 and no split), else its stages would go on
/// with other seeds or train on other images. The error names the file and both values;
/// nothing is written.
pub fn check_resume(dir: &Path, setup: &Setup) -> Result<(), Error> {
    let path = dir.join(SETUP_FILE);
    if !path.is_file() {
        return Ok(());
    }
    let recorded: serde_json::Value = read_json(&path)?;
    let old = match recorded.get("validation") {
        None => ValidationSplit::none(),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| Error::parse(&path, e))?,
    };
    let old_seed = match recorded.get("seed") {
        None => 0,
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| Error::parse(&path, e))?,
    };
    if old_seed != setup.seed {
        return Err(Error::Usage(format!(
            "cannot resume {}: it was made with seed number {old_seed}, this run asks for {}; \
             pass --seed-offset {old_seed} to resume it as it was made, or leave out --resume \
             to start afresh; nothing was changed",
            path.display(),
            setup.seed
        )));
    }
    let old_held_out: Vec<u32> = match recorded.get("held_out_classes") {
        None => Vec::new(),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| Error::parse(&path, e))?,
    };
    if old_held_out != setup.held_out_classes {
        return Err(Error::Usage(format!(
            "cannot resume {}: it was made holding out the classes {old_held_out:?}, this run \
             holds out {:?}; the stages would go on with other classes. Resume it with the \
             classes it was made with, or leave out --resume to start afresh; nothing was \
             changed",
            path.display(),
            setup.held_out_classes
        )));
    }
    // A table's cached rows describe its targets, noise model and widths: another of any is
    // another experiment. Compared as `setup.json` writes them, where a default is absent (as
    // in a file written before these fields).
    let now = serde_json::to_value(setup).map_err(Error::json)?;
    for key in ["targets", "noise", "mlp_hidden"] {
        let (was, asked) = (recorded.get(key), now.get(key));
        if was != asked {
            let show = |v: Option<&serde_json::Value>| v.map_or("none".into(), |v| v.to_string());
            return Err(Error::Usage(format!(
                "cannot resume {}: it was made with {key} {}, this run asks for {}; its \
                 stages would go on as another model. Resume it as it was made, or leave out \
                 --resume to start afresh; nothing was changed",
                path.display(),
                show(was),
                show(asked)
            )));
        }
    }
    if old != setup.validation {
        let show = |v: ValidationSplit| match v.size {
            0 => "none".to_string(),
            n => format!("{n} examples (seed {})", v.seed),
        };
        return Err(Error::Usage(format!(
            "cannot resume {}: its validation split is {}, this run asks for {}; the stages would \
             go on training on other images. Pass --validation {} to resume it as it was made, \
             or leave out --resume to start afresh; nothing was changed",
            path.display(),
            show(old),
            show(setup.validation),
            old.size
        )));
    }
    Ok(())
}

/// Writes the main table of one run into `dir`: [`TABLE_MD`], [`TABLE_JSON`] and
/// [`REPORT_JSON`], and the corruption rows when there are some.
pub fn write_tables(dir: &Path, outcome: &Outcome) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    write_text(&dir.join(TABLE_MD), &markdown(&outcome.rows))?;
    write_json(&dir.join(TABLE_JSON), &outcome.rows)?;
    write_json(&dir.join(REPORT_JSON), &outcome.report)?;
    if !outcome.corruptions.is_empty() {
        write_json(&dir.join(CORRUPTIONS_FILE), &outcome.corruptions)?;
        write_text(
            &dir.join(CORRUPTIONS_MD),
            &markdown_corruptions(&outcome.corruptions),
        )?;
    }
    if !outcome.validation.is_empty() {
        write_json(&dir.join(VALIDATION_JSON), &outcome.validation)?;
        write_text(
            &dir.join(VALIDATION_MD),
            &validation::markdown(&outcome.validation),
        )?;
    }
    Ok(())
}

/// Writes the validation rows of a multi-seed run into `dir` ([`VALIDATION_JSON`]: the
/// summaries and every seed's rows; [`VALIDATION_MD`]: mean ± sd). Nothing without rows.
pub fn write_seed_validation(dir: &Path, runs: &[Vec<ValidationRow>]) -> Result<(), Error> {
    if runs.iter().all(Vec::is_empty) {
        return Ok(());
    }
    let summaries = validation::summarise(runs);
    write_json(
        &dir.join(VALIDATION_JSON),
        &SeedTables {
            summaries: &summaries,
            seeds: runs,
        },
    )?;
    write_text(
        &dir.join(VALIDATION_MD),
        &validation::markdown_seeds(&summaries),
    )
}

/// The main table of a multi-seed run, as [`TABLE_JSON`] holds it.
#[derive(Serialize, Deserialize)]
struct SeedTables<S, R> {
    summaries: S,
    seeds: R,
}

/// Writes the main table of a multi-seed run into `dir`: the summaries (`markdown`, and with
/// every seed's rows as [`TABLE_JSON`]).
pub fn write_seed_tables(
    dir: &Path,
    markdown: &str,
    summaries: &[SeedSummary],
    runs: &[Vec<Row>],
) -> Result<(), Error> {
    write_text(&dir.join(TABLE_MD), markdown)?;
    write_json(
        &dir.join(TABLE_JSON),
        &SeedTables {
            summaries,
            seeds: runs,
        },
    )
}

/// Writes the corruption rows of a multi-seed run into `dir`: the means (also as Markdown)
/// and every seed's rows.
pub fn write_seed_corruptions(
    dir: &Path,
    means: &[CorruptionRow],
    seeds: &[&Vec<CorruptionRow>],
) -> Result<(), Error> {
    write_json(
        &dir.join(CORRUPTIONS_FILE),
        &serde_json::json!({ "means": means, "seeds": seeds }),
    )?;
    write_text(&dir.join(CORRUPTIONS_MD), &markdown_corruptions(means))
}

/// The main table's rows in `dir` ([`TABLE_JSON`]): one run's rows, or a multi-seed run's
/// summaries.
pub enum StoredTable {
    /// One run's rows.
    Rows(Vec<Row>),
    /// The summaries over seeds.
    Seeds(Vec<SeedSummary>),
}

/// Reads the main table of `dir` ([`TABLE_JSON`]), as one run or a multi-seed run wrote it.
pub fn read_table(dir: &Path) -> Result<StoredTable, Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Table {
        Rows(Vec<Row>),
        Seeds { summaries: Vec<SeedSummary> },
    }
    Ok(match read_json(&dir.join(TABLE_JSON))? {
        Table::Rows(r) => StoredTable::Rows(r),
        Table::Seeds { summaries } => StoredTable::Seeds(summaries),
    })
}

/// The corruption rows of `dir` ([`CORRUPTIONS_FILE`]; a multi-seed run's means), `None`
/// when the run evaluated no corruptions.
pub fn read_corruptions(dir: &Path) -> Result<Option<Vec<CorruptionRow>>, Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Corruptions {
        Rows(Vec<CorruptionRow>),
        Seeds { means: Vec<CorruptionRow> },
    }
    let path = dir.join(CORRUPTIONS_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    Ok(Some(match read_json(&path)? {
        Corruptions::Rows(r) | Corruptions::Seeds { means: r } => r,
    }))
}

/// A stage's directory in a run directory: the stage's model ([`ModelDir`]) and training
/// checkpoint, and the results cached there ([`ROW_FILE`], [`CORRUPTIONS_FILE`],
/// [`PREDICTIONS_FILE`], [`PLAN_FILE`]). A long run that stops (power, a crash, Ctrl-C)
/// continues from there with [`Setup::resume`].
pub struct StageDir {
    model: ModelDir,
    /// The checkpointer of a stage opened to run ([`StageDir::open`]); it holds the
    /// directory's lock.
    checkpointer: Option<Checkpointer>,
    /// Cached results are used (a resumed run, or a reader).
    resume: bool,
    /// The cached results describe a shorter run than this one (see [`StageDir::training`]).
    stale: bool,
}

impl StageDir {
    /// Opens stage `name` of `setup`'s run directory to run it: creates the directory and its
    /// checkpointer (locking the directory). Cached results are used when `setup.resume`.
    pub fn open(setup: &Setup, name: &str) -> Result<Self, Error> {
        let dir = stage_path(&setup.out_dir, name);
        let mut run = serde_json::json!({
            "dataset": setup.dataset.to_string(),
            "train_subset": setup.train_subset,
        });
        // Named only when there is one, so a checkpoint made before validation splits, which
        // trained on the whole training split, still resumes (as that split, none).
        if !setup.validation.is_none() {
            run["validation"] = serde_json::json!(setup.validation);
        }
        let checkpointer = Checkpointer::new(&dir)?.with_run(run);
        Ok(Self {
            model: ModelDir::new(dir),
            checkpointer: Some(checkpointer),
            resume: setup.resume,
            stale: false,
        })
    }

    /// The stage directory `dir` of a finished or interrupted run, to read: opening it creates
    /// and locks nothing, and the cached results are what it holds. Reading its checkpoint
    /// ([`StageDir::history`], [`StageDir::trained_model`]) opens a checkpointer, which takes
    /// the directory's lock while it reads (and clears what killed writers left).
    pub fn existing(dir: impl Into<PathBuf>) -> Self {
        Self {
            model: ModelDir::new(dir),
            checkpointer: None,
            resume: true,
            stale: false,
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.model.path()
    }

    /// The stage's model directory.
    pub fn model(&self) -> &ModelDir {
        &self.model
    }

    /// The checkpointer of a stage opened to run.
    pub fn checkpointer(&self) -> Result<&Checkpointer, Error> {
        self.checkpointer.as_ref().ok_or_else(|| {
            Error::Usage(format!(
                "{}: opened to read, not to train",
                self.path().display()
            ))
        })
    }

    /// The stage trains for `epochs` in this run: a row or corruption rows cached by an earlier
    /// run whose checkpoint has fewer epochs describe the shorter run's model, so they are
    /// evaluated again once the stage has trained on. A checkpoint a stopping rule ended
    /// ([`bnn_train::CheckpointState::stopped`]) is finished when this run has such a rule too
    /// (`stops_early`): the rule stops it again at once. Call it before training.
    pub fn training(mut self, epochs: usize, stops_early: bool) -> Result<Self, Error> {
        self.stale = match self.checkpointer()?.state()? {
            None => epochs > 0,
            Some(s) => s.complete_epochs() < epochs && !(s.stopped && stops_early),
        };
        Ok(self)
    }

    /// Seconds an earlier run spent on this stage's checkpointed epochs (when resuming).
    pub fn resumed_seconds(&self) -> Result<f64, Error> {
        Ok(match self.checkpointer()?.state()? {
            Some(s) if self.resume => s.history.iter().map(|e| e.seconds).sum(),
            _ => 0.0,
        })
    }

    /// The whole epochs the stage's checkpoint records (a stopping rule's last one may be
    /// partial and is left out); empty without a checkpoint.
    pub fn history(&self) -> Result<Vec<EpochStats>, Error> {
        let state = match &self.checkpointer {
            Some(ck) => ck.state()?,
            None => Checkpointer::new(self.path())?.state()?,
        };
        Ok(state
            .map(|s| {
                s.history
                    .into_iter()
                    .filter(|e| e.partial_steps.is_none())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The model the stage's committed checkpoint holds, on `device`; an error naming the
    /// stage when it has none.
    pub fn trained_model(&self, device: &Device) -> Result<(Network, ModelConfig), Error> {
        let committed = match &self.checkpointer {
            Some(ck) => ck.state()?.is_some(),
            None => Checkpointer::new(self.path())?.state()?.is_some(),
        };
        if !committed || !self.model.weights_path().is_file() {
            return Err(Error::MissingStage {
                dir: self.path().display().to_string(),
                stage: self
                    .path()
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            });
        }
        Ok(self.model.load(device)?)
    }

    /// The row evaluated by an earlier run, when resuming (and it describes the model this run
    /// ends with, see [`StageDir::training`]).
    pub fn cached_row(&self) -> Result<Option<Row>, Error> {
        let path = self.path().join(ROW_FILE);
        if !self.resume || !path.exists() || self.stale {
            return Ok(None);
        }
        read_json(&path).map(Some)
    }

    /// Keeps the stage's row.
    pub fn save_row(&self, row: &Row) -> Result<(), Error> {
        write_json(&self.path().join(ROW_FILE), row)
    }

    /// The cached row, or `eval()` (then cached).
    pub fn row(&self, eval: impl FnOnce() -> Result<Row, Error>) -> Result<Row, Error> {
        if let Some(row) = self.cached_row()? {
            return Ok(row);
        }
        let row = eval()?;
        self.save_row(&row)?;
        Ok(row)
    }

    /// The stage's row on the validation split: cached by an earlier run (when resuming, and
    /// it describes this run's model), else `eval()` (then cached).
    pub fn validation_row(
        &self,
        eval: impl FnOnce() -> Result<ValidationRow, Error>,
    ) -> Result<ValidationRow, Error> {
        let path = self.path().join(VALIDATION_ROW_FILE);
        if self.resume && path.exists() && !self.stale {
            return read_json(&path);
        }
        let row = eval()?;
        write_json(&path, &row)?;
        Ok(row)
    }

    /// The stage's rows on the corruptions `wanted`: cached by an earlier run (when resuming,
    /// the cache holds exactly `wanted` and describes this run's model), else `eval()` (then
    /// cached). None asked for: none evaluated.
    pub fn corruptions(
        &self,
        wanted: &[Corruption],
        eval: impl FnOnce() -> Result<Vec<CorruptionRow>, Error>,
    ) -> Result<Vec<CorruptionRow>, Error> {
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let path = self.path().join(CORRUPTIONS_FILE);
        if self.resume && path.exists() && !self.stale {
            let rows: Vec<CorruptionRow> = read_json(&path)?;
            if rows.iter().map(|r| r.corruption).eq(wanted.iter().copied()) {
                return Ok(rows);
            }
        }
        let rows = eval()?;
        write_json(&path, &rows)?;
        Ok(rows)
    }

    /// Where the stage's predictions on the corrupted test sets go ([`CORRUPTIONS_DIR`]).
    pub fn corruption_predictions_dir(&self) -> PathBuf {
        self.path().join(CORRUPTIONS_DIR)
    }

    /// Keeps the stage's evaluation predictions (`samples` Monte Carlo samples)
    /// ([`PREDICTIONS_FILE`], bincode), so the report's figures show the table's own
    /// predictions instead of drawing new ones; and as NumPy arrays ([`save_predictions_npy`],
    /// prefixes `test` and `ood`).
    pub fn save_predictions(
        &self,
        samples: usize,
        test: &Predictions,
        ood: Option<&Predictions>,
    ) -> Result<(), Error> {
        let dir = self.path();
        let stored = StoredPredictions {
            samples,
            test: store(test),
            ood: ood.map(store),
        };
        let bytes = bincode::serde::encode_to_vec(&stored, bincode::config::standard())
            .map_err(Error::PredictionsEncode)?;
        save_predictions_npy(dir, "test", test)?;
        if let Some(ood) = ood {
            save_predictions_npy(dir, "ood", ood)?;
        }
        Ok(write_atomic(&dir.join(PREDICTIONS_FILE), &bytes)?)
    }

    /// The predictions [`StageDir::save_predictions`] kept, if there are some for `samples`
    /// samples: `Ok(None)` without a file or for another number of samples; an error naming
    /// the file when it is damaged.
    pub fn load_predictions(
        &self,
        samples: usize,
    ) -> Result<Option<(Predictions, Option<Predictions>)>, Error> {
        let path = self.path().join(PREDICTIONS_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&path, e)),
        };
        let bad = |e: Box<dyn std::error::Error + Send + Sync>| Error::Predictions {
            path: path.display().to_string(),
            source: e,
        };
        let config = bincode::config::standard().with_limit::<PREDICTIONS_LIMIT>();
        let (stored, used): (StoredPredictions, usize) =
            bincode::serde::decode_from_slice(&bytes, config).map_err(|e| bad(Box::new(e)))?;
        if used != bytes.len() {
            return Err(bad(format!("{} trailing bytes", bytes.len() - used).into()));
        }
        if stored.samples != samples {
            return Ok(None);
        }
        let test = restore(stored.test).map_err(|e| bad(Box::new(e)))?;
        let ood = stored
            .ood
            .map(restore)
            .transpose()
            .map_err(|e| bad(Box::new(e)))?;
        Ok(Some((test, ood)))
    }

    /// Keeps the sharing plan ([`PLAN_FILE`], bincode): it holds what the `.swb` file drops
    /// (the Gaussians' covariances, the fates before retraining), which the weights figure
    /// draws.
    pub fn save_plan(&self, plan: &SharingPlan) -> Result<(), Error> {
        let bytes = bincode::serde::encode_to_vec(plan, bincode::config::standard())
            .map_err(Error::PlanEncode)?;
        Ok(write_atomic(&self.path().join(PLAN_FILE), &bytes)?)
    }

    /// The plan [`StageDir::save_plan`] kept, validated.
    pub fn load_plan(&self) -> Result<SharingPlan, Error> {
        let path = self.path().join(PLAN_FILE);
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let (plan, _): (SharingPlan, usize) =
            bincode::serde::decode_from_slice(&bytes, bincode::config::standard())
                .map_err(|e| Error::plan(&path, e))?;
        plan.validate().map_err(|e| Error::plan(&path, e))?;
        Ok(plan)
    }
}

#[derive(Serialize, Deserialize)]
struct StoredPredictive {
    classes: usize,
    probabilities: Vec<f32>,
    entropy: Vec<f64>,
    mutual_information: Option<Vec<f64>>,
    n_samples: usize,
}

#[derive(Serialize, Deserialize)]
struct StoredPredictions {
    samples: usize,
    test: (Vec<u32>, StoredPredictive),
    ood: Option<(Vec<u32>, StoredPredictive)>,
}

fn store(p: &Predictions) -> (Vec<u32>, StoredPredictive) {
    let q = &p.predictive;
    (
        p.labels.clone(),
        StoredPredictive {
            classes: q.probabilities().classes(),
            probabilities: q.probabilities().as_slice().to_vec(),
            entropy: q.entropy().to_vec(),
            mutual_information: q.mutual_information().map(<[f64]>::to_vec),
            n_samples: q.n_samples(),
        },
    )
}

fn restore((labels, s): (Vec<u32>, StoredPredictive)) -> Result<Predictions, MetricsError> {
    let n = labels.len();
    let probabilities = Probabilities::new(s.probabilities, n, s.classes)?;
    let predictive =
        Predictive::from_parts(probabilities, s.entropy, s.mutual_information, s.n_samples)?;
    Ok(Predictions { predictive, labels })
}

/// The 2DGBNN model of `dir`'s [`SWB_FILE`], on `device`.
pub fn load_swb(dir: &ModelDir, device: &Device) -> Result<(Network, ModelConfig), Error> {
    Ok(from_swb(&swshare::format::load(dir.swb_path())?, device)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_metrics::McPredictive;

    fn predictions(samples: usize) -> Predictions {
        let mut mc = McPredictive::new(3, 2).unwrap();
        for s in 0..samples {
            let x = s as f32;
            mc.push_logits(&[x, 1.0, 0.0, x, 2.0, -x]).unwrap();
        }
        Predictions {
            predictive: mc.finish().unwrap(),
            labels: vec![0, 1, 1],
        }
    }

    #[test]
    fn kept_predictions_round_trip_for_their_number_of_samples_only() {
        let dir = tempfile::tempdir().unwrap();
        let stage = StageDir::existing(dir.path());
        assert!(stage.load_predictions(4).unwrap().is_none(), "no file");
        let (test, ood) = (predictions(4), predictions(4));
        stage.save_predictions(4, &test, Some(&ood)).unwrap();
        let (t, o) = stage.load_predictions(4).unwrap().unwrap();
        assert_eq!((t.predictive, t.labels), (test.predictive, test.labels));
        assert_eq!(o.unwrap().predictive, ood.predictive);
        assert!(stage.load_predictions(30).unwrap().is_none());

        let path = dir.path().join(PREDICTIONS_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.push(0);
        std::fs::write(&path, &bytes).unwrap();
        let e = stage.load_predictions(4).unwrap_err().to_string();
        assert!(
            e.contains("trailing") && e.contains(PREDICTIONS_FILE),
            "{e}"
        );
    }

    /// The kept predictions are also NumPy arrays: probabilities `<f4 [n, classes]`, labels
    /// `<i8 [n]`, entropy and mutual information `<f8 [n]`, for the test and the OOD set.
    #[test]
    fn kept_predictions_are_also_npy_arrays() {
        use gmm_minibatch::npy::read_f32;
        let dir = tempfile::tempdir().unwrap();
        let (test, ood) = (predictions(4), predictions(2));
        StageDir::existing(dir.path())
            .save_predictions(4, &test, Some(&ood))
            .unwrap();
        for (prefix, p) in [("test", &test), ("ood", &ood)] {
            let file = |w: &str| dir.path().join(format!("{prefix}-{w}.npy"));
            let probs = read_f32(file("probabilities")).unwrap();
            assert_eq!(probs.shape, vec![3, 2]);
            assert_eq!(probs.data, p.predictive.probabilities().as_slice());
            let entropy = read_f32(file("entropy")).unwrap();
            let want: Vec<f32> = p.predictive.entropy().iter().map(|&e| e as f32).collect();
            assert_eq!(entropy.data, want);
            let mi = read_f32(file("mutual-information")).unwrap();
            assert_eq!(mi.shape, vec![3]);
            let labels = std::fs::read(file("labels")).unwrap();
            assert!(String::from_utf8_lossy(&labels[..64]).contains("'<i8'"));
            let payload: Vec<i64> = labels[labels.len() - 24..]
                .chunks(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                .collect();
            assert_eq!(payload, vec![0, 1, 1]);
        }
    }

    /// A setup written into a run directory reads back as the same setup, and the resume
    /// check of a model directory refuses another architecture without writing anything.
    #[test]
    fn setup_round_trips_and_resume_refuses_another_model() {
        use bnn_models::{Arch, Kind};
        let dir = tempfile::tempdir().unwrap();
        let setup = crate::presets::setup(
            bnn_data::DatasetId::FashionMnist,
            Some(Arch::Lenet5),
            true,
            &crate::data::OodSearch::from_env(dir.path()),
            dir.path().join("run"),
        );
        write_setup(&setup.out_dir, &setup).unwrap();
        let back = read_setup(&setup.out_dir).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&setup).unwrap()
        );

        assert_eq!(back.validation, ValidationSplit::standard());

        let model = ModelDir::new(dir.path().join("model"));
        let lenet = ModelConfig::for_input(Arch::Lenet5, Kind::Bayesian, 10, 1, 28);
        model.check_resume(&lenet).unwrap();
        model.write_config(&lenet).unwrap();
        model.check_resume(&lenet).unwrap();
        let before = std::fs::read(model.config_path()).unwrap();
        let mlp = ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 10, 1, 28);
        let e = model.check_resume(&mlp).unwrap_err().to_string();
        assert!(
            e.contains("cannot resume") && e.contains("another model"),
            "{e}"
        );
        assert_eq!(std::fs::read(model.config_path()).unwrap(), before);

        // A config written before the data record resumes on any data; one with a record
        // resumes only on the same files.
        let record = |sha: &str| bnn_models::TrainedOn {
            dataset: "fashion-mnist".into(),
            shape: [1, 28, 28],
            validation: 5000,
            validation_seed: 4,
            files: [("train-images-idx3-ubyte.gz".to_string(), sha.to_string())].into(),
        };
        let mut recorded = lenet.clone();
        recorded.trained_on = Some(record("aa"));
        model.check_resume(&recorded).unwrap();
        model.write_config(&recorded).unwrap();
        model.check_resume(&recorded).unwrap();
        let mut other = lenet.clone();
        other.trained_on = Some(record("bb"));
        let e = model.check_resume(&other).unwrap_err().to_string();
        assert!(
            e.contains("cannot resume") && e.contains("trained on"),
            "{e}"
        );
    }

    /// A setup.json written before validation splits (no `validation` field) reads as none;
    /// resuming a run with another split than its setup.json records is refused, naming both,
    /// and the same split resumes.
    #[test]
    fn resume_with_another_validation_split_is_refused() {
        use bnn_models::Arch;
        let dir = tempfile::tempdir().unwrap();
        let mut setup = crate::presets::setup(
            bnn_data::DatasetId::FashionMnist,
            Some(Arch::Lenet5),
            true,
            &crate::data::OodSearch::from_env(dir.path()),
            dir.path().join("run"),
        );
        check_resume(&setup.out_dir, &setup).unwrap();
        write_setup(&setup.out_dir, &setup).unwrap();
        check_resume(&setup.out_dir, &setup).unwrap();
        let mut other = setup.clone();
        other.validation = ValidationSplit::new(1000);
        let e = check_resume(&setup.out_dir, &other)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot resume") && e.contains("5000 examples") && e.contains("1000"),
            "{e}"
        );
        other.validation = ValidationSplit {
            seed: 5,
            ..setup.validation
        };
        assert!(
            check_resume(&setup.out_dir, &other).is_err(),
            "another seed"
        );

        // An old setup.json: the same file without the field.
        let path = setup.out_dir.join(SETUP_FILE);
        let mut old: serde_json::Value = read_json(&path).unwrap();
        old.as_object_mut().unwrap().remove("validation");
        write_json(&path, &old).unwrap();
        assert_eq!(
            read_setup(&setup.out_dir).unwrap().validation,
            ValidationSplit::none()
        );
        let e = check_resume(&setup.out_dir, &setup)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("split is none") && e.contains("--validation 0"),
            "{e}"
        );
        setup.validation = ValidationSplit::none();
        check_resume(&setup.out_dir, &setup).unwrap();
    }

    /// Seed numbers: `with_seed` moves every stage's seed by 1000 per number, `for_seed` counts
    /// from the setup's own number, and a resume with another number is refused.
    #[test]
    fn seed_numbers_shift_every_stage_and_are_recorded() {
        use bnn_models::Arch;
        let dir = tempfile::tempdir().unwrap();
        let base = crate::presets::setup(
            bnn_data::DatasetId::FashionMnist,
            Some(Arch::Lenet5),
            true,
            &crate::data::OodSearch::from_env(dir.path()),
            dir.path().join("run"),
        );
        let seeds = |s: &Setup| {
            [
                s.deterministic.seed,
                s.bbb.seed,
                s.compress.retrain.seed,
                s.compress.sharing.gmm.seed,
            ]
        };
        assert_eq!(base.seed, 0);
        let six = base.with_seed(crate::setup::DEFAULT_SEED_OFFSET);
        assert_eq!(six.seed, 6);
        for (a, b) in seeds(&six).iter().zip(seeds(&base)) {
            assert_eq!(*a, b + 6000);
        }
        assert_eq!(seeds(&six.with_seed(0)), seeds(&base), "back to 0");
        let third = six.for_seed(2);
        assert_eq!(
            (third.seed, third.out_dir.clone()),
            (8, seed_dir(&six.out_dir, 2))
        );
        assert_eq!(seeds(&third), seeds(&base.with_seed(8)));
        assert_eq!(third.validation, base.validation, "the split stays");

        write_setup(&six.out_dir, &six).unwrap();
        assert_eq!(read_setup(&six.out_dir).unwrap().seed, 6);
        check_resume(&six.out_dir, &six).unwrap();
        let e = check_resume(&six.out_dir, &base).unwrap_err().to_string();
        assert!(
            e.contains("seed number 6") && e.contains("--seed-offset 6"),
            "{e}"
        );
    }

    /// A model directory's `config.json` (and so `model.bpk` after it) that is a directory, a
    /// FIFO or a device is named as what it is, without blocking or reading without end.
    #[test]
    fn model_dir_readers_name_what_is_not_a_regular_file() {
        use bnn_models::{Arch, Kind};
        let dir = tempfile::tempdir().unwrap();
        let model = ModelDir::new(dir.path().join("model"));
        let config = model.config_path();
        std::fs::create_dir_all(&config).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let read = |tx: std::sync::mpsc::Sender<String>, model: ModelDir| {
            std::thread::spawn(move || {
                let _ = tx.send(model.read_config().unwrap_err().to_string());
            });
        };
        read(tx.clone(), model.clone());
        let err = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert!(
            err.contains("config.json: is a directory, not a regular file"),
            "{err}"
        );
        std::fs::remove_dir(&config).unwrap();
        let made = std::process::Command::new("mkfifo").arg(&config).status();
        assert!(made.is_ok_and(|s| s.success()));
        read(tx.clone(), model.clone());
        let err = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("reading a FIFO blocked");
        assert!(
            err.contains("config.json: is a FIFO, not a regular file"),
            "{err}"
        );
        std::fs::remove_file(&config).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &config).unwrap();
        let err = model.read_config().unwrap_err().to_string();
        assert!(err.contains("is a character device"), "{err}");
        // The weights are checked the same way once the architecture is read.
        std::fs::remove_file(&config).unwrap();
        model
            .write_config(&ModelConfig::for_input(
                Arch::Mlp,
                Kind::Bayesian,
                10,
                1,
                28,
            ))
            .unwrap();
        std::fs::create_dir(model.weights_path()).unwrap();
        let err = model
            .load(&bnn_layers::test_device())
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(err.contains("model.bpk: is a directory"), "{err}");
    }

    /// A model in a run directory is calibrated on the run's validation split, read from the
    /// setup this module writes; flags that
    /// disagree with it, another data set, and a run that held nothing out are errors.
    #[test]
    fn a_model_in_a_run_uses_the_runs_split() {
        use crate::data::OodSearch;
        use bnn_data::DatasetId;
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("m.swb");
        assert_eq!(
            swbnn_ops::calibration::split_for(
                &outside,
                &DatasetId::FashionMnist.into(),
                None,
                None
            )
            .unwrap(),
            (ValidationSplit::standard(), None)
        );
        assert_eq!(
            swbnn_ops::calibration::split_for(
                &outside,
                &DatasetId::FashionMnist.into(),
                Some(300),
                Some(2)
            )
            .unwrap()
            .0,
            ValidationSplit { size: 300, seed: 2 }
        );
        let run = dir.path().join("run");
        let mut setup = crate::presets::setup(
            DatasetId::FashionMnist,
            None,
            true,
            &OodSearch::from_env(dir.path()),
            run.clone(),
        );
        setup.validation = ValidationSplit { size: 700, seed: 9 };
        crate::store::write_setup(&run, &setup).unwrap();
        let stage = run.join("stages").join("bbb");
        std::fs::create_dir_all(&stage).unwrap();
        let want = (setup.validation, Some(run.clone()));
        for model in [stage.clone(), run.join("lenet5-2dgbnn.swb")] {
            assert_eq!(
                swbnn_ops::calibration::split_for(
                    &model,
                    &DatasetId::FashionMnist.into(),
                    None,
                    None
                )
                .unwrap(),
                want
            );
        }
        assert_eq!(
            swbnn_ops::calibration::split_for(
                &stage,
                &DatasetId::FashionMnist.into(),
                Some(700),
                Some(9)
            )
            .unwrap(),
            want
        );
        for (size, seed, needle) in [
            (Some(5000), None, "--validation 5000"),
            (None, Some(4), "--validation-seed 4"),
        ] {
            let e = swbnn_ops::calibration::split_for(
                &stage,
                &DatasetId::FashionMnist.into(),
                size,
                seed,
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains(needle) && e.contains(SETUP_FILE), "{e}");
        }
        let e = swbnn_ops::calibration::split_for(&stage, &DatasetId::Mnist.into(), None, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("trained on"), "{e}");
        setup.validation = ValidationSplit::none();
        crate::store::write_setup(&run, &setup).unwrap();
        let e =
            swbnn_ops::calibration::split_for(&stage, &DatasetId::FashionMnist.into(), None, None)
                .unwrap_err()
                .to_string();
        assert!(e.contains("held out no validation split"), "{e}");
    }
}
