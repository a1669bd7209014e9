//! Raw `.swb` reading and writing for models built outside the Rust pipeline (`swbnn.torch`):
//! a `SharedModelData` as JSON text in, `swshare::format::save` out, and back.

use std::path::PathBuf;

use pyo3::prelude::*;
use swshare::format::{self, SaveOptions, SharedModelData};

use crate::errors::{chain, runtime_error, value_error};

/// Writes `data_json` (a `SharedModelData` as JSON) as a `.swb` file at `path`; returns the
/// file's part sizes as JSON. Invalid content is a `ValueError`.
#[pyfunction]
#[pyo3(signature = (path, data_json, entropy_index=true, int8_outliers=false))]
pub fn swb_save(
    py: Python<'_>,
    path: PathBuf,
    data_json: &str,
    entropy_index: bool,
    int8_outliers: bool,
) -> PyResult<String> {
    let data: SharedModelData = serde_json::from_str(data_json)
        .map_err(|e| value_error(format!("not a .swb model description: {e}")))?;
    let opts = SaveOptions {
        entropy_index,
        int8_outliers,
    };
    let sizes = py
        .detach(|| format::save(&path, &data, &opts))
        .map_err(|e| value_error(chain(&e)))?;
    serde_json::to_string(&sizes).map_err(|e| runtime_error(&e))
}

/// Reads the `.swb` file at `path` as a `SharedModelData` in JSON.
#[pyfunction]
pub fn swb_load(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    if !path.exists() {
        return Err(pyo3::exceptions::PyFileNotFoundError::new_err(format!(
            "{}: no such file",
            path.display()
        )));
    }
    let data = py
        .detach(|| format::load(&path))
        .map_err(|e| value_error(chain(&e)))?;
    serde_json::to_string(&data).map_err(|e| runtime_error(&e))
}
