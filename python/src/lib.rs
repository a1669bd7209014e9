//! Python bindings of swbnn (the `swbnn._native` extension module): the fast 2-D GMM, the
//! sharing plan, `.swb` models, training, compression and the uncertainty metrics on NumPy
//! arrays, on the CPU (flex) backend. The `swbnn` Python package wraps these functions; see
//! the crate README.
//!
//! Every long call releases the GIL. Bad input raises `ValueError` with the Rust message.
#![warn(missing_docs)]
// `swbnn_ops::Error` (the command line's error type, > 128 bytes) is returned once per Python
// call and turned into an exception; boxing it would only add conversions.
#![allow(clippy::result_large_err)]

mod arrays;
mod errors;
mod gmm;
mod metrics;
mod model;
mod pipeline;
mod plan;
mod swb;

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<gmm::Mixture>()?;
    m.add_function(wrap_pyfunction!(gmm::fit, m)?)?;
    m.add_function(wrap_pyfunction!(plan::plan, m)?)?;
    m.add_function(wrap_pyfunction!(swb::swb_save, m)?)?;
    m.add_function(wrap_pyfunction!(swb::swb_load, m)?)?;
    m.add_class::<model::Model>()?;
    m.add_function(wrap_pyfunction!(model::load, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::train_json, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::compress_json, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::compress_auto_json, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::evaluate_json, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::calibrate_json, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::defaults_json, m)?)?;
    for f in [
        wrap_pyfunction!(metrics::ece, m)?,
        wrap_pyfunction!(metrics::regression_json, m)?,
        wrap_pyfunction!(metrics::conformal_intervals, m)?,
        wrap_pyfunction!(metrics::mce, m)?,
        wrap_pyfunction!(metrics::nll, m)?,
        wrap_pyfunction!(metrics::brier, m)?,
        wrap_pyfunction!(metrics::accuracy, m)?,
        wrap_pyfunction!(metrics::entropy, m)?,
        wrap_pyfunction!(metrics::mutual_information, m)?,
        wrap_pyfunction!(metrics::auroc, m)?,
        wrap_pyfunction!(metrics::aupr, m)?,
        wrap_pyfunction!(metrics::fpr_at_tpr, m)?,
    ] {
        m.add_function(f)?;
    }
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
