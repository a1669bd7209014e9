//! A PyTorch state dict into one of our models, by the names of
//! [`bnn_models::torch_names`]: all or nothing.

use std::collections::BTreeSet;
use std::path::Path;

use bnn_layers::{NamedTensor, import_params, inverse_softplus, softplus};
use bnn_models::torch_names::{Convention, Transform, extra_key, torch_key};
use bnn_models::{Kind, ModelConfig, Network};
use bnn_train::write_atomic;
use burn::prelude::*;
use serde::{Deserialize, Serialize};

use super::InteropError;
use super::state_dict::{HostTensor, StateDict};
use crate::store::ModelDir;

/// The prior of bayesian-torch's layers and models when none is given: `N(0, 1)` (its
/// `prior_mean = 0`, `prior_variance = 1`, used as the standard deviation). bayesian-torch does
/// not save the prior with the weights.
pub const BAYESIAN_TORCH_PRIOR: (f64, f64) = (0.0, 1.0);

/// What `swbnn import` records beside the model (`import.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportRecord {
    /// The source file's name.
    pub source: String,
    /// The naming convention read.
    pub convention: Convention,
    /// Prior mean the source model was trained with (not in the file; from the command line).
    pub prior_mu: f64,
    /// Prior standard deviation the source model was trained with.
    pub prior_sigma: f64,
    /// Tensors read.
    pub tensors: usize,
}

/// A value of PyTorch's layout in ours: transposed for a dense weight, `ln sigma` to `rho`.
fn to_ours(t: &HostTensor, transform: Transform) -> Vec<f32> {
    let mut v = t.to_f32();
    if transform.log_sigma {
        v = v
            .into_iter()
            .map(|ls| inverse_softplus(f64::from(ls).exp()) as f32)
            .collect();
    }
    if transform.transpose && t.shape.len() == 2 {
        v = transpose(&v, t.shape[0], t.shape[1]);
    }
    v
}

/// A value of our layout in PyTorch's: the inverse of [`to_ours`] (`shape` is ours).
pub(crate) fn to_torch(data: &[f32], shape: &[usize], transform: Transform) -> Vec<f32> {
    let mut v = data.to_vec();
    if transform.transpose && shape.len() == 2 {
        v = transpose(&v, shape[0], shape[1]);
    }
    if transform.log_sigma {
        v = v
            .into_iter()
            .map(|rho| softplus(f64::from(rho)).ln() as f32)
            .collect();
    }
    v
}

/// `[rows, cols]` row-major to `[cols, rows]` row-major.
fn transpose(v: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = v[r * cols + c];
        }
    }
    out
}

/// PyTorch's shape of our `shape`.
pub(crate) fn torch_shape(shape: &[usize], transform: Transform) -> Vec<usize> {
    if transform.transpose && shape.len() == 2 {
        vec![shape[1], shape[0]]
    } else {
        shape.to_vec()
    }
}

/// Builds the model of `config` (its kind set by the convention: Bayesian for bayesian-torch,
/// blitz and torchbnn, deterministic for plain and torchvision) from `source`.
///
/// `convention` `None` tells it from the keys ([`Convention::detect`]). Every parameter of the
/// model must have its key, of the right shape, and every key must be used (batch norm's
/// `num_batches_tracked` and blitz's sampler copies aside, which must then equal what they
/// copy): otherwise [`InteropError::Unmatched`] lists the keys on both sides and nothing is
/// built. Returns the model, its configuration and the convention read.
pub fn import_state_dict(
    source: &StateDict,
    config: &ModelConfig,
    convention: Option<Convention>,
    device: &Device,
) -> Result<(Network, ModelConfig, Convention), InteropError> {
    let convention = match convention {
        Some(c) => c,
        None => Convention::detect(source.keys().map(String::as_str))
            .ok_or(InteropError::UnknownConvention)?,
    };
    let kind = if convention.is_bayesian() {
        Kind::Bayesian
    } else {
        Kind::Deterministic
    };
    let config = config.clone().with_kind(kind);
    let model = config.init(device)?;
    let mut used = BTreeSet::new();
    let mut named = Vec::new();
    let (mut missing, mut shapes) = (Vec::new(), Vec::new());
    for (path, shape) in model.param_shapes() {
        let Some(tk) = torch_key(config.arch, convention, &path, shape.len())? else {
            missing.push(format!("{path} (no {convention} name)"));
            continue;
        };
        let Some(t) = source.get(&tk.key) else {
            missing.push(format!("{} (for {path}, {shape:?})", tk.key));
            continue;
        };
        used.insert(tk.key.clone());
        let want = torch_shape(&shape, tk.transform);
        if t.shape != want {
            shapes.push(format!(
                "{}: {:?} in the file, {want:?} expected (for {path})",
                tk.key, t.shape
            ));
            continue;
        }
        named.push(NamedTensor {
            path,
            shape,
            data: to_ours(t, tk.transform),
        });
    }
    let mut unexpected = Vec::new();
    for (key, t) in source {
        if used.contains(key) {
            continue;
        }
        match extra_key(convention, key, &|k| used.contains(k)) {
            Some(copy) if copy.is_empty() => {}
            Some(copy) => {
                if source.get(&copy) != Some(t) {
                    unexpected.push(format!("{key} (differs from {copy})"));
                }
            }
            None => unexpected.push(format!("{key} {:?}", t.shape)),
        }
    }
    if !missing.is_empty() || !unexpected.is_empty() || !shapes.is_empty() {
        return Err(InteropError::Unmatched {
            convention,
            arch: config.arch.name().to_string(),
            missing,
            unexpected,
            shapes,
        });
    }
    let expected = named.len();
    let (model, copied) = import_params(model, &named)?;
    if copied != expected {
        return Err(InteropError::Write(format!(
            "{copied} of {expected} tensors reached the model"
        )));
    }
    Ok((model, config, convention))
}

/// Writes `model` as a model directory (`config.json`, `model.bpk`, and `import.json` with
/// `record`) that `swbnn eval`, `compress` and `train --from` read. Each file is written
/// atomically; an existing `model.bpk` in `dir` is refused unless `force`.
pub fn write_model_dir(
    dir: &Path,
    model: &Network,
    config: &ModelConfig,
    record: &ImportRecord,
    force: bool,
) -> Result<(), InteropError> {
    let model_dir = ModelDir::new(dir);
    if model_dir.weights_path().exists() && !force {
        return Err(InteropError::Write(format!(
            "{} already holds a model; pass --force to replace it",
            dir.display()
        )));
    }
    let write = |e: crate::Error| InteropError::Write(e.to_string());
    std::fs::create_dir_all(dir).map_err(|e| write(crate::Error::io(dir, e)))?;
    let record =
        serde_json::to_string_pretty(record).map_err(|e| InteropError::Write(e.to_string()))?;
    write_atomic(&dir.join("import.json"), record.as_bytes())?;
    model_dir.save(model, config).map_err(write)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_and_log_sigma_invert_each_other() {
        let t = HostTensor::f32(vec![2, 3], vec![-5.0, -4.0, -3.0, -2.5, -2.0, -1.0]);
        let both = Transform {
            transpose: true,
            log_sigma: true,
        };
        let ours = to_ours(&t, both);
        // sigma = exp(-5) -> rho with softplus(rho) = exp(-5), at [0, 0] after the transpose.
        assert!((softplus(f64::from(ours[0])) - (-5f64).exp()).abs() < 1e-9);
        // [3, 2] ours: element (r=0, c=1) is torch's (1, 0) = -2.5.
        assert!((softplus(f64::from(ours[1])).ln() + 2.5).abs() < 1e-5);
        let back = to_torch(&ours, &[3, 2], both);
        for (a, b) in back.iter().zip(t.to_f32()) {
            assert!((a - b).abs() < 1e-5, "{a} {b}");
        }
        let plain = Transform {
            transpose: true,
            log_sigma: false,
        };
        assert_eq!(to_torch(&to_ours(&t, plain), &[3, 2], plain), t.to_f32());
    }
}
