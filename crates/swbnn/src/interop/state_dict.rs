//! A PyTorch state dict on the host: read from `.pt` / `.pth` (burn-store's `PytorchStore`) or
//! `.safetensors` (`SafetensorsStore`), written as `.safetensors`.

use std::collections::BTreeMap;
use std::path::Path;

use burn::tensor::DType;
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
}

impl HostTensor {
    /// A float tensor.
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> Self {
        Self {
            shape,
            values: Values::F32(data),
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

/// Reads a state dict from a `.safetensors` file, or else a PyTorch `.pt` / `.pth` file
/// (`torch.save(model.state_dict())`; with `top_level_key`, the dict under that key of a
/// checkpoint, e.g. `state_dict`). Every tensor is read; unsupported dtypes (bool, complex)
/// are errors naming the key.
pub fn read_state_dict(
    path: &Path,
    top_level_key: Option<&str>,
) -> Result<StateDict, InteropError> {
    let err = |e: String| InteropError::Read {
        path: path.display().to_string(),
        reason: e,
    };
    if !path.is_file() {
        return Err(err("no such file".into()));
    }
    let safetensors = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("safetensors"));
    let tensors = if safetensors {
        if top_level_key.is_some() {
            return Err(err(
                "a .safetensors file has no nested dicts; leave out the top-level key".into(),
            ));
        }
        let mut store = SafetensorsStore::from_file(path);
        store
            .get_all_tensors()
            .map_err(|e| err(e.to_string()))?
            .clone()
    } else {
        let mut store = PytorchStore::from_file(path).map_indices_contiguous(false);
        if let Some(k) = top_level_key {
            store = store.with_top_level_key(k);
        }
        store
            .get_all_tensors()
            .map_err(|e| err(e.to_string()))?
            .clone()
    };
    let mut out = StateDict::new();
    for (key, t) in tensors {
        let data = burn_store::bridge::to_data(&t).map_err(|e| err(format!("{key}: {e}")))?;
        let shape = data.shape().to_vec();
        let values = match data.dtype() {
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
        out.insert(key, HostTensor { shape, values });
    }
    Ok(out)
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
    safetensors::serialize(views, metadata).map_err(|e| InteropError::Write(e.to_string()))
}
