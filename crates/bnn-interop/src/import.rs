//! A PyTorch state dict into one of our models, by the names of
//! [`bnn_models::torch_names`]: all or nothing.

use std::collections::BTreeSet;
use std::path::Path;

use bnn_layers::{NamedTensor, import_params, inverse_softplus, softplus};
use bnn_models::torch_names::{
    Convention, Transform, check_torch_names, extra_key, torch_key_renamed, torch_module,
};
use bnn_models::{Architecture, Classifier, Kind, ModelConfig, Network};
use bnn_train::{MAX_PARAM_MAGNITUDE, TrainError, write_atomic};
use burn::prelude::*;
use serde::{Deserialize, Serialize};

use super::state_dict::{HostTensor, StateDict, Values};
use super::{InteropError, write_error};
use bnn_train::{CONFIG_FILE, ModelDir, WEIGHTS_FILE};

/// What `swbnn import` records beside the model.
const IMPORT_FILE: &str = "import.json";

/// The files of a model directory that `swbnn import` writes.
const IMPORT_FILES: [&str; 3] = [IMPORT_FILE, CONFIG_FILE, WEIGHTS_FILE];

/// The dtypes a float tensor may have in a state dict (those the reader converts).
const FLOAT_DTYPES: &str = "F32, F64, F16 or BF16";

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

/// What is wrong with a tensor's values, if anything: one of the file (`raw`) or of ours
/// (`ours`, after the transform) that is not finite or beyond ±[`MAX_PARAM_MAGNITUDE`], the
/// bound loading a model checks; every later command would fail on it.
fn out_of_range(raw: &[f32], ours: &[f32]) -> Option<String> {
    let bad = |v: &[f32]| {
        v.iter()
            .position(|x| !x.is_finite() || x.abs() > MAX_PARAM_MAGNITUDE)
    };
    let need = format!("a model takes finite values within ±{MAX_PARAM_MAGNITUDE:e}");
    if let Some(i) = bad(raw) {
        return Some(format!("element {i} is {:e}; {need}", raw[i]));
    }
    // A log sigma that is finite in the file can overflow once it is a rho.
    let i = bad(ours)?;
    Some(format!(
        "a log sigma becomes rho = {:e} (element {i} of ours); {need}",
        ours[i]
    ))
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
/// blitz and torchbnn, deterministic for plain and torchvision) from `source`, by the zoo's
/// PyTorch names ([`bnn_models::torch_names::torch_key`]): [`import_state_dict_into`] with
/// them.
pub fn import_state_dict(
    source: &StateDict,
    config: &ModelConfig,
    convention: Option<Convention>,
    device: &Device,
) -> Result<(Network, ModelConfig, Convention), InteropError> {
    check_torch_names(config.arch)?;
    let arch = config.arch;
    import_state_dict_into(source, config, convention, device, &|convention, module| {
        torch_module(arch, convention, module)
    })
}

/// Builds the model of `config`, any [`Architecture`], from a PyTorch state dict, its kind set
/// by the convention (Bayesian for bayesian-torch, blitz and torchbnn, deterministic for plain
/// and torchvision). Each parameter `body.<module>.<name>` is read from the key
/// `rename(convention, <module>).<name in the convention>`
/// ([`bnn_models::torch_names::torch_key_renamed`]); `|_, m| m.to_string()` reads a PyTorch
/// module whose attributes are named as the burn model's fields.
///
/// `convention` `None` tells it from the keys ([`Convention::detect`]). Every parameter of the
/// model must have its key, of the right shape, and every key must be used (batch norm's
/// `num_batches_tracked` and blitz's sampler copies aside, which must then equal what they
/// copy): otherwise [`InteropError::Unmatched`] lists the keys on both sides and nothing is
/// built. Each parameter's tensor must then be of a float dtype (`num_batches_tracked` of an
/// integer one) and hold finite values within ±[`MAX_PARAM_MAGNITUDE`], as loading a model
/// checks: otherwise [`InteropError::BadValues`] names each such key. Returns the model, its
/// configuration and the convention read.
pub fn import_state_dict_into<A: Architecture>(
    source: &StateDict,
    config: &A,
    convention: Option<Convention>,
    device: &Device,
    rename: &dyn Fn(Convention, &str) -> String,
) -> Result<(Classifier<A::Body>, A, Convention), InteropError> {
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
    let config = config.to_kind(kind, 0);
    let model = config.init(device)?;
    let mut used = BTreeSet::new();
    let mut named = Vec::new();
    let (mut missing, mut shapes, mut bad) = (Vec::new(), Vec::new(), Vec::new());
    for (path, shape) in model.param_shapes() {
        let tk = torch_key_renamed(convention, &path, shape.len(), &|m| rename(convention, m))?;
        let Some(tk) = tk else {
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
        let Values::F32(raw) = &t.values else {
            bad.push(format!(
                "{}: dtype {:?} in the file, a float expected ({FLOAT_DTYPES}; for {path})",
                tk.key, t.dtype
            ));
            continue;
        };
        let data = to_ours(t, tk.transform);
        if let Some(problem) = out_of_range(raw, &data) {
            bad.push(format!("{}: {problem} (for {path})", tk.key));
            continue;
        }
        named.push(NamedTensor { path, shape, data });
    }
    let mut unexpected = Vec::new();
    for (key, t) in source {
        if used.contains(key) {
            continue;
        }
        match extra_key(convention, key, &|k| used.contains(k)) {
            Some(copy) if copy.is_empty() => {
                // Ignored, but of the kind its name says: a counter, or blitz's float noise.
                let counter = key.ends_with(".num_batches_tracked");
                match (&t.values, counter) {
                    (Values::I64(_), true) | (Values::F32(_), false) => {}
                    (_, true) => bad.push(format!(
                        "{key}: dtype {:?} in the file, an integer (I64) expected",
                        t.dtype
                    )),
                    (_, false) => bad.push(format!(
                        "{key}: dtype {:?} in the file, a float expected ({FLOAT_DTYPES})",
                        t.dtype
                    )),
                }
            }
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
            arch: architecture_name(&config),
            missing,
            unexpected,
            shapes,
        });
    }
    if !bad.is_empty() {
        return Err(InteropError::BadValues(bad));
    }
    let expected = named.len();
    let (model, copied) = import_params(model, &named)?;
    if copied != expected {
        return Err(InteropError::Write(format!(
            "{copied} of {expected} tensors reached the model"
        )));
    }
    // Loading's own range check (a `rho` above `MAX_RHO` too), so an import never writes a
    // model that loading refuses.
    if let Some(out) = bnn_train::first_out_of_range(&model) {
        return Err(InteropError::BadValues(vec![format!(
            "{out}: loading the model would refuse it"
        )]));
    }
    Ok((model, config, convention))
}

/// The name an error gives `config`'s architecture: the zoo's `arch`, else the type's name.
fn architecture_name<A: Architecture>(config: &A) -> String {
    match serde_json::to_value(config) {
        Ok(serde_json::Value::Object(map)) => match map.get("arch") {
            Some(serde_json::Value::String(name)) => name.clone(),
            _ => short_type_name::<A>(),
        },
        _ => short_type_name::<A>(),
    }
}

fn short_type_name<A>() -> String {
    let full = std::any::type_name::<A>();
    full.rsplit("::").next().unwrap_or(full).to_string()
}

/// Writes `model` as a model directory (`config.json`, `model.bpk`, and `import.json` with
/// `record`) that `swbnn eval`, `compress` and `train --from` read.
///
/// The directory appears whole or not at all: the files are written into a temporary sibling
/// directory in the same parent (`.<name>.tmp-<pid>-<random>`), which is then moved onto `dir`
/// ([`bnn_io::write_dir_atomic`]).
/// `dir` may be missing or empty; one holding a model is replaced only with `force`, and only
/// if it holds nothing but what an import writes; any other non-empty directory is refused.
pub fn write_model_dir(
    dir: &Path,
    model: &Network,
    config: &ModelConfig,
    record: &ImportRecord,
    force: bool,
) -> Result<(), InteropError> {
    let record =
        serde_json::to_string_pretty(record).map_err(|e| InteropError::Write(e.to_string()))?;
    write_dir_with(dir, force, |tmp| {
        // Errors name the file where it was to be, not in the temporary directory.
        write_atomic(&tmp.join(IMPORT_FILE), record.as_bytes())
            .map_err(|e| write_error(&dir.join(IMPORT_FILE), e))?;
        ModelDir::new(tmp).save(model, config).map_err(|e| {
            let file = match &e {
                TrainError::Checkpoint { path, .. } => Path::new(path).file_name(),
                _ => None,
            };
            write_error(&file.map_or_else(|| dir.to_path_buf(), |f| dir.join(f)), e)
        })
    })
}

/// Makes `dir` the directory that `write` fills, whole or not at all
/// ([`bnn_io::write_dir_atomic`]: a new temporary sibling, moved onto `dir`). On failure the
/// temporary directory is removed and `dir` is left as it was.
///
/// `dir` may be missing or an empty directory; if another writer makes it while `write` runs,
/// this one fails naming it (without `force`). One holding a model (`model.bpk`) is replaced
/// only with `force`, and only if it holds nothing but [`IMPORT_FILES`], so that `--force`
/// never deletes a training run's checkpoints or anything else: the new one takes its place in
/// one step, and the old one is removed after. Any other non-empty directory is refused,
/// naming what it holds.
fn write_dir_with(
    dir: &Path,
    force: bool,
    write: impl FnOnce(&Path) -> Result<(), InteropError>,
) -> Result<(), InteropError> {
    let io = |path: &Path, e: std::io::Error| InteropError::WriteFile {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    if dir.file_name().is_none() {
        return Err(InteropError::Write(format!(
            "{}: not a directory name to write to",
            dir.display()
        )));
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let replace = match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(io(dir, e)),
        Ok(m) if !m.is_dir() => {
            return Err(InteropError::Write(format!(
                "{} exists and is not a directory",
                dir.display()
            )));
        }
        Ok(_) => {
            let mut names = Vec::new();
            for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
                let entry = entry.map_err(|e| io(dir, e))?;
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
            names.sort();
            if names.iter().any(|n| n == WEIGHTS_FILE) && !force {
                return Err(InteropError::Write(format!(
                    "{} already holds a model; pass --force to replace it",
                    dir.display()
                )));
            }
            let others: Vec<&str> = names
                .iter()
                .map(String::as_str)
                .filter(|n| !IMPORT_FILES.contains(n))
                .collect();
            if !others.is_empty() {
                return Err(InteropError::Write(format!(
                    "{} holds files an import does not write ({}); import into a new or empty \
                     directory",
                    dir.display(),
                    others.join(", ")
                )));
            }
            !names.is_empty()
        }
    };
    std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    // A missing or empty directory is never replaced at the end, so that of two imports into
    // one new directory exactly one succeeds; one holding an import's files is replaced (with
    // a model in it only under `--force`, checked above).
    bnn_io::write_dir_atomic(dir, bnn_io::Replace::from_force(force || replace), write)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write that fails between files (a full disk) leaves no model directory, nor a
    /// temporary one; one that succeeds leaves the directory whole.
    #[test]
    fn the_model_directory_appears_whole_or_not_at_all() {
        let parent = tempfile::tempdir().unwrap();
        let out = parent.path().join("imported");
        let half = |dir: &Path| {
            std::fs::write(dir.join("import.json"), b"{}").unwrap();
            std::fs::write(dir.join(bnn_train::CONFIG_FILE), b"{}").unwrap();
            Err(InteropError::Write("No space left on device".into()))
        };
        let e = write_dir_with(&out, false, half).unwrap_err().to_string();
        assert!(e.contains("No space left"), "{e}");
        let left: Vec<_> = std::fs::read_dir(parent.path()).unwrap().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        // An existing empty directory: the same, and it stays (empty).
        std::fs::create_dir(&out).unwrap();
        write_dir_with(&out, false, half).unwrap_err();
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 1);
        // A whole write.
        let whole = |dir: &Path| {
            for f in ["import.json", "config.json", "model.bpk"] {
                std::fs::write(dir.join(f), f).unwrap();
            }
            Ok(())
        };
        write_dir_with(&out, false, whole).unwrap();
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 3);
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 1);
        // Replacing it (--force): a failure keeps the old model whole.
        std::fs::write(out.join("model.bpk"), b"old").unwrap();
        write_dir_with(&out, true, half).unwrap_err();
        assert_eq!(std::fs::read(out.join("model.bpk")).unwrap(), b"old");
        assert_eq!(
            std::fs::read(out.join("config.json")).unwrap(),
            b"config.json"
        );
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 1);
        write_dir_with(&out, true, whole).unwrap();
        assert_eq!(std::fs::read(out.join("model.bpk")).unwrap(), b"model.bpk");
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 1);
        // Without --force, refused; a directory holding anything else is refused as well.
        let e = write_dir_with(&out, false, whole).unwrap_err().to_string();
        assert!(e.contains("already holds a model"), "{e}");
        let other = parent.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("notes.txt"), b"mine").unwrap();
        for force in [false, true] {
            let e = write_dir_with(&other, force, whole)
                .unwrap_err()
                .to_string();
            assert!(e.contains("notes.txt"), "{e}");
        }
        assert_eq!(std::fs::read_dir(&other).unwrap().count(), 1);
    }

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
