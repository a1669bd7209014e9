//! Rust errors as Python exceptions, as Python users expect them: an argument of the wrong
//! type (not an array, a dtype that holds no numbers) is a `TypeError`, a bad value a
//! `ValueError`, a missing file a `FileNotFoundError`, anything else a `RuntimeError`; the
//! message is the Rust one.

use pyo3::PyErr;
use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyTypeError, PyValueError};

/// A `ValueError` with `msg`.
pub fn value_error(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

/// A `TypeError` with `msg`: the argument is not of a type the call takes.
pub fn type_error(msg: impl Into<String>) -> PyErr {
    PyTypeError::new_err(msg.into())
}

/// A `RuntimeError` with the full chain of `e`'s messages.
pub fn runtime_error(e: &(dyn std::error::Error + 'static)) -> PyErr {
    PyRuntimeError::new_err(chain(e))
}

/// `e`'s message followed by its sources' (each once: transparent wrappers repeat theirs).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let m = s.to_string();
        if !msg.contains(&m) {
            msg.push_str(": ");
            msg.push_str(&m);
        }
        source = s.source();
    }
    msg
}

/// Input errors of the libraries: always the caller's values.
pub fn input_error(e: impl std::error::Error + 'static) -> PyErr {
    value_error(chain(&e))
}

/// An error of the model or pipeline layers: a missing file is `FileNotFoundError`, a
/// request the inputs cannot satisfy (shapes, configs, corrupt files) `ValueError`, the
/// rest `RuntimeError`.
pub fn pipeline_error(e: swbnn_ops::Error) -> PyErr {
    use swbnn_ops::Error as E;
    let msg = chain(&e);
    if let Some(io) = io_source(&e)
        && io.kind() == std::io::ErrorKind::NotFound
    {
        return PyFileNotFoundError::new_err(msg);
    }
    match e {
        E::Train(_) | E::Record(_) | E::Plot(_) | E::Io { .. } | E::Json(_) => {
            PyRuntimeError::new_err(msg)
        }
        _ => PyValueError::new_err(msg),
    }
}

/// The first `std::io::Error` in `e`'s source chain.
fn io_source<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        cur = c.source();
    }
    None
}
