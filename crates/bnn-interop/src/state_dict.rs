//! A PyTorch state dict on the host: read from `.pt` / `.pth` (burn-store's `PytorchStore`) or
//! `.safetensors` (`SafetensorsStore`), written as `.safetensors`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use bnn_io::{check_regular_within, read_bounded};
use burn::tensor::DType;
use burn_store::pytorch_reader::{PickleValue, PytorchReader};
use burn_store::{ModuleStore, PytorchStore, SafetensorsStore};
use safetensors::{Dtype, tensor::TensorView};

use super::InteropError;

/// The values of one tensor.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Floating-point values (stored as `f32`; `f16`, `bf16` and `f64` sources are converted).
    F32(Vec<f32>),
    /// Integer values (`int64` in the file), e.g. batch norm's `num_batches_tracked`.
    I64(Vec<i64>),
}

/// One tensor of a state dict.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    /// Shape, PyTorch's layout.
    pub shape: Vec<usize>,
    /// Values, row-major.
    pub values: Values,
    /// The dtype the file stores the values in (`F32` or `I64` for tensors made here): what
    /// an error names when the tensor is not of the kind its key needs.
    pub dtype: DType,
}

impl HostTensor {
    /// A float tensor (dtype `F32`).
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> Self {
        Self {
            shape,
            values: Values::F32(data),
            dtype: DType::F32,
        }
    }

    /// An integer tensor (dtype `I64`).
    pub fn i64(shape: Vec<usize>, data: Vec<i64>) -> Self {
        Self {
            shape,
            values: Values::I64(data),
            dtype: DType::I64,
        }
    }

    /// The values as `f32` (integers converted).
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.values {
            Values::F32(v) => v.clone(),
            Values::I64(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }
}

/// A state dict: key to tensor, in key order.
pub type StateDict = BTreeMap<String, HostTensor>;

/// The largest state dict file [`read_state_dict`] takes: 16 GiB, a Bayesian model of a
/// billion weights (mean and `rho` of each) in `f64`; the largest models here have under 40
/// million weights. A larger file is refused before it is read.
pub const MAX_STATE_DICT_BYTES: u64 = 16 << 30;

/// Reads a state dict from a `.safetensors` file, or else a PyTorch `.pt` / `.pth` file
/// (`torch.save(model.state_dict())`; with `top_level_key`, the dict under that key of a
/// checkpoint, e.g. `state_dict`). Every tensor is read; unsupported dtypes (bool, complex)
/// are errors naming the key, and so are the entries of a `.pt` state dict that are not
/// tensors (an `int`, a `str`: nothing a model takes). The path must be a regular file of at
/// most [`MAX_STATE_DICT_BYTES`] (a directory, FIFO or device is an error saying which).
pub fn read_state_dict(
    path: &Path,
    top_level_key: Option<&str>,
) -> Result<StateDict, InteropError> {
    read_state_dict_within(path, top_level_key, MAX_STATE_DICT_BYTES)
}

/// [`read_state_dict`] with the file size bounded by `bound` (tests use a small one).
fn read_state_dict_within(
    path: &Path,
    top_level_key: Option<&str>,
    bound: u64,
) -> Result<StateDict, InteropError> {
    let err = |e: String| InteropError::Read {
        path: path.display().to_string(),
        reason: e,
    };
    let safetensors = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("safetensors"));
    let tensors = if safetensors {
        if top_level_key.is_some() {
            return Err(err(
                "a .safetensors file has no nested dicts; leave out the top-level key".into(),
            ));
        }
        let bytes = read_bounded(path, bound, "state dict").map_err(|e| err(e.to_string()))?;
        let mut store = SafetensorsStore::from_bytes(Some(bytes));
        store
            .get_all_tensors()
            .map_err(|e| err(e.to_string()))?
            .clone()
    } else {
        // burn-store opens the file itself (a ZIP archive is read by parts), so the kind and
        // size are checked here first: a FIFO would block it, a device never end.
        check_regular_within(path, bound, "state dict").map_err(|e| err(e.to_string()))?;
        let mut store = PytorchStore::from_file(path).map_indices_contiguous(false);
        if let Some(k) = top_level_key {
            store = store.with_top_level_key(k);
        }
        let tensors = store
            .get_all_tensors()
            .map_err(|e| err(e.to_string()))?
            .clone();
        // burn-store keeps the tensors alone; what else the dict holds would vanish unseen.
        let dict =
            PytorchReader::read_pickle_data(path, top_level_key).map_err(|e| err(e.to_string()))?;
        let mut others = Vec::new();
        not_tensors(&dict, "", &tensors.keys().cloned().collect(), &mut others);
        if !others.is_empty() {
            others.sort();
            return Err(err(format!(
                "holds entries that are not tensors, which no model takes: {}",
                others.join(", ")
            )));
        }
        tensors
    };
    let mut out = StateDict::new();
    for (key, t) in tensors {
        let data = burn_store::bridge::to_data(&t).map_err(|e| err(format!("{key}: {e}")))?;
        let (shape, dtype) = (data.shape().to_vec(), data.dtype());
        let values = match dtype {
            DType::I64
            | DType::I32
            | DType::I16
            | DType::I8
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::U64 => Values::I64(
                data.convert::<i64>()
                    .try_into_vec::<i64>()
                    .map_err(|e| err(format!("{key}: {e:?}")))?,
            ),
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::Flex32 => Values::F32(
                data.convert::<f32>()
                    .try_into_vec::<f32>()
                    .map_err(|e| err(format!("{key}: {e:?}")))?,
            ),
            other => return Err(err(format!("{key}: unsupported dtype {other:?}"))),
        };
        out.insert(
            key,
            HostTensor {
                shape,
                values,
                dtype,
            },
        );
    }
    Ok(out)
}

/// The entries under `value` (at key `path`, dotted as burn-store names tensors) that are not
/// among `tensors`, each with its Python type: the leaves of the dict's tree, and empty dicts
/// and lists. PyTorch's own `_metadata` (the modules' versions, which `torch.save` keeps with
/// every state dict) is not an entry.
fn not_tensors(value: &PickleValue, path: &str, tensors: &BTreeSet<String>, out: &mut Vec<String>) {
    let join = |key: &str| match path {
        "" => key.to_string(),
        _ => format!("{path}.{key}"),
    };
    match value {
        PickleValue::Dict(d) if !d.is_empty() => {
            for (key, v) in d.iter().filter(|(k, _)| k.as_str() != "_metadata") {
                not_tensors(v, &join(key), tensors, out);
            }
        }
        PickleValue::List(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                not_tensors(v, &join(&i.to_string()), tensors, out);
            }
        }
        _ if tensors.contains(path) => {}
        other => {
            let kind = match other {
                PickleValue::None => "None".to_string(),
                PickleValue::Bool(_) => "bool".into(),
                PickleValue::Int(_) => "int".into(),
                PickleValue::Float(_) => "float".into(),
                PickleValue::String(_) => "str".into(),
                PickleValue::Bytes(_) => "bytes".into(),
                PickleValue::List(_) => "empty list".into(),
                PickleValue::Dict(_) => "empty dict".into(),
                PickleValue::Unsupported(name) => name.clone(),
            };
            out.push(format!("{path} ({kind})"));
        }
    }
}

/// The `.safetensors` bytes of `tensors` (`f32` and `int64`), with `metadata` in the header.
pub fn safetensors_bytes(
    tensors: &StateDict,
    metadata: Option<std::collections::HashMap<String, String>>,
) -> Result<Vec<u8>, InteropError> {
    let bytes: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(k, t)| {
            let (dtype, b) = match &t.values {
                Values::F32(v) => (Dtype::F32, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
                Values::I64(v) => (Dtype::I64, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            };
            (k.clone(), dtype, t.shape.clone(), b)
        })
        .collect();
    let views = bytes
        .iter()
        .map(|(k, dtype, shape, b)| {
            TensorView::new(*dtype, shape.clone(), b)
                .map(|v| (k.clone(), v))
                .map_err(|e| InteropError::Write(format!("{k}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    swshare::safetensors_file::serialize(views, metadata)
        .map_err(|e| InteropError::Write(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state dict beyond the bound is refused naming both sizes (here with a small bound;
    /// the real one is [`MAX_STATE_DICT_BYTES`]), for either reader.
    #[test]
    fn a_state_dict_beyond_the_bound_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let dict = StateDict::from([("w".to_string(), HostTensor::f32(vec![4], vec![0.5; 4]))]);
        let bytes = safetensors_bytes(&dict, None).unwrap();
        let n = bytes.len() as u64;
        for name in ["w.safetensors", "w.pt"] {
            let path = dir.path().join(name);
            std::fs::write(&path, &bytes).unwrap();
            let e = read_state_dict_within(&path, None, n - 1)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("holds {n} bytes, more than the {}", n - 1)),
                "{e}"
            );
        }
        let path = dir.path().join("w.safetensors");
        assert_eq!(read_state_dict_within(&path, None, n).unwrap(), dict);
    }
}
