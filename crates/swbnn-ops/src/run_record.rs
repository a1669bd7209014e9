//! What a one-model operation reads of the reproduction run a model belongs to: the run's
//! data set and validation split, from the run's [`SETUP_FILE`]. The run's layout is the
//! harness's (`swbnn_harness::store`); only this file's name and these two fields are shared.

use std::path::Path;

use bnn_data::DataSource;
use serde::Deserialize;

use crate::Error;
use crate::split::ValidationSplit;

/// The file that marks a directory as a reproduction run; `cargo xtask reproduce` writes it
/// before any stage.
pub const SETUP_FILE: &str = "setup.json";

/// The fields of a run's [`SETUP_FILE`] that the one-model operations read (the others are
/// the harness's and ignored here).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RunRecord {
    /// The run's data set.
    pub dataset: DataSource,
    /// The run's validation split; absent in a setup written before validation splits existed
    /// (none was held out).
    #[serde(default = "ValidationSplit::none")]
    pub validation: ValidationSplit,
}

/// The run record of the run directory `dir` (its [`SETUP_FILE`]).
pub fn read_run_record(dir: &Path) -> Result<RunRecord, Error> {
    Ok(bnn_train::read_json(&dir.join(SETUP_FILE))?)
}
