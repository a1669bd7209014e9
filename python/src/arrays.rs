//! NumPy arrays in and out: every input is checked (type, dtype, dimensions, emptiness)
//! before a slice of it is borrowed, and a failed check names the argument: a `TypeError` for
//! what is not an array or holds no numbers of the kind asked, a `ValueError` for a wrong
//! shape or an empty array. Other numeric dtypes (float64, integers) and non-contiguous arrays are converted
//! once; a float array is never taken as integer labels.

use numpy::{
    Element, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArray,
    PyUntypedArrayMethods, dtype,
};
use pyo3::prelude::*;

use crate::errors::{type_error, value_error};

/// A checked, read-only view of a NumPy array of `T`.
pub struct Input<'py, T: Element> {
    array: PyReadonlyArrayDyn<'py, T>,
}

impl<'py, T: Element> Input<'py, T> {
    /// Checks `obj` (the argument `name`): a non-empty NumPy array of dtype `T` (or one
    /// converted to it, see the module docs) with `ndim` dimensions (any number when `None`).
    pub fn new(obj: &Bound<'py, PyAny>, name: &str, ndim: Option<usize>) -> PyResult<Self> {
        let py = obj.py();
        let untyped = obj.cast::<PyUntypedArray>().map_err(|_| {
            let ty = obj
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "?".into());
            type_error(format!(
                "{name} must be a numpy.ndarray, got {ty}; convert it with numpy.asarray"
            ))
        })?;
        let want = dtype::<T>(py);
        let got = untyped.dtype();
        if !got.is_equiv_to(&want) {
            // What NumPy users pass is converted once, as scikit-learn does: any float or
            // integer array where floats are taken (NumPy's default float64 above all), any
            // integer array where integers are. A float array is never truncated to labels.
            let convertible = matches!(
                (want.kind(), got.kind()),
                (b'f', b'f' | b'i' | b'u') | (b'i', b'i' | b'u')
            );
            if !convertible {
                return Err(type_error(format!(
                    "{name} must have dtype {want}, got {got}; convert it with {name}.astype(numpy.{want})"
                )));
            }
            let converted = obj.call_method1("astype", (want,))?;
            return Self::new(&converted, name, ndim);
        }
        if let Some(d) = ndim
            && untyped.ndim() != d
        {
            return Err(value_error(format!(
                "{name} must have {d} dimension{}, got shape {:?}",
                if d == 1 { "" } else { "s" },
                untyped.shape()
            )));
        }
        if untyped.shape().contains(&0) {
            return Err(value_error(format!(
                "{name} is empty (shape {:?})",
                untyped.shape()
            )));
        }
        if !untyped.is_c_contiguous() {
            // A slice or a transpose: copied once into C order, as NumPy users expect.
            let numpy = py.import("numpy")?;
            let copied = numpy.call_method1("ascontiguousarray", (obj,))?;
            return Self::new(&copied, name, ndim);
        }
        let array = untyped
            .cast::<PyArrayDyn<T>>()
            .map_err(|e| value_error(format!("{name}: {e}")))?
            .try_readonly()
            .map_err(|e| value_error(format!("{name}: {e}")))?;
        Ok(Self { array })
    }

    /// The array's shape.
    pub fn shape(&self) -> &[usize] {
        self.array.shape()
    }

    /// The values in row-major order.
    pub fn slice(&self) -> PyResult<&[T]> {
        self.array
            .as_slice()
            .map_err(|e| value_error(format!("array not contiguous: {e}")))
    }
}

/// `obj` as an optional input: `None` stays `None`.
pub fn optional<'py, T: Element>(
    obj: Option<&Bound<'py, PyAny>>,
    name: &str,
    ndim: Option<usize>,
) -> PyResult<Option<Input<'py, T>>> {
    match obj {
        Some(o) if !o.is_none() => Ok(Some(Input::new(o, name, ndim)?)),
        _ => Ok(None),
    }
}

/// A new NumPy array of `shape` owning `data` (no copy).
pub fn output<'py, T: Element>(
    py: Python<'py>,
    data: Vec<T>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    use numpy::IntoPyArray;
    data.into_pyarray(py).reshape(shape.to_vec())
}
