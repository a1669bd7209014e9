//! PyTorch interop: a PyTorch state dict (`.pt`, `.pth`, `.safetensors`) into a network of
//! [`bnn_models`] ([`read_state_dict`], [`import_state_dict`]; [`import`] does the whole of
//! `swbnn import` and writes a model directory), and a network back as `.safetensors` that
//! PyTorch's `load_state_dict` takes ([`export_state_dict`], [`write_export`]). Names follow
//! [`bnn_models::torch_names`].
//!
//! ```no_run
//! use bnn_interop::{ExportAs, import_state_dict, read_state_dict, write_export};
//! use bnn_models::torch_names::Convention;
//! use bnn_models::{Arch, Kind, ModelConfig};
//!
//! let device = bnn_layers::device_by_name("flex")?;
//! let dict = read_state_dict("model.pt".as_ref(), None)?;
//! let config = ModelConfig::for_input(Arch::Lenet5, Kind::Bayesian, 10, 1, 28);
//! let (net, config, convention) = import_state_dict(&dict, &config, None, &device)?;
//! println!("read {} tensors under {convention} names", dict.len());
//! let mean = ExportAs::Convention(Convention::Plain);
//! write_export(&net, &config, mean, "mean.safetensors".as_ref(), false)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod export;
mod import;
mod state_dict;

use std::path::{Path, PathBuf};

use bnn_data::DatasetId;
use bnn_models::resnet::Shortcut;
use bnn_models::torch_names::Convention;
use bnn_models::{Arch, Kind, ModelConfig, Network};
use burn::prelude::*;

pub use export::{ExportAs, SHARED_FORMAT, bayes_twin, export_state_dict, fixed_noise};
pub use import::{
    BAYESIAN_TORCH_PRIOR, ImportRecord, import_state_dict, import_state_dict_into, write_model_dir,
};
pub use state_dict::{
    HostTensor, MAX_STATE_DICT_BYTES, StateDict, Values, read_state_dict, safetensors_bytes,
};

/// Errors of import and export; each names the file or the keys concerned.
#[derive(Debug, thiserror::Error)]
pub enum InteropError {
    /// The source file could not be read as a state dict.
    #[error("reading {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The keys fit no convention, or several.
    #[error(
        "cannot tell the naming convention from the keys; pass --convention (bayesian-torch, blitz, torchbnn, plain, torchvision)"
    )]
    UnknownConvention,
    /// The state dict and the model do not match one to one.
    #[error("{}", unmatched_message(.convention, .arch, .missing, .unexpected, .shapes))]
    Unmatched {
        /// The convention read.
        convention: Convention,
        /// The architecture.
        arch: String,
        /// Keys the model needs that the file lacks (with the parameter each is for).
        missing: Vec<String>,
        /// Keys of the file that no parameter takes.
        unexpected: Vec<String>,
        /// Keys whose shape differs from the parameter's.
        shapes: Vec<String>,
    },
    /// Tensors whose dtype or values the model cannot take (one line each, naming the key).
    #[error(
        "the state dict holds values no model can take; nothing was written:\n  {}",
        .0.join("\n  ")
    )]
    BadValues(Vec<String>),
    /// The arguments of an import.
    #[error("import: {0}")]
    Import(String),
    /// A model could not be exported as asked.
    #[error("export: {0}")]
    Export(String),
    /// Writing the output.
    #[error("writing: {0}")]
    Write(String),
    /// Writing one output file.
    #[error("writing {path}: {reason}")]
    WriteFile {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// Building the model.
    #[error(transparent)]
    Model(#[from] bnn_models::ModelError),
    /// Copying tensors into the model.
    #[error(transparent)]
    Layer(#[from] bnn_layers::LayerError),
    /// Writing a file.
    #[error(transparent)]
    Train(#[from] bnn_train::TrainError),
    /// Writing an output through the file layer (one that appeared at `--out` meanwhile
    /// included).
    #[error("writing {0}")]
    File(#[from] bnn_io::Error),
}

fn unmatched_message(
    convention: &Convention,
    arch: &str,
    missing: &[String],
    unexpected: &[String],
    shapes: &[String],
) -> String {
    let mut s = format!(
        "the state dict does not match {arch} under {convention}'s names; nothing was written"
    );
    let mut list = |title: &str, keys: &[String]| {
        if !keys.is_empty() {
            s.push_str(&format!("\n{title} ({}):", keys.len()));
            for k in keys {
                s.push_str(&format!("\n  {k}"));
            }
        }
    };
    list("keys the model needs that the file lacks", missing);
    list("keys of the file that no parameter takes", unexpected);
    list("keys of another shape", shapes);
    s
}

/// An import: what [`import`] reads, how it maps it and where it writes. The `swbnn import`
/// flags and any other caller build this.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    /// The PyTorch state dict: .pt / .pth (`torch.save(model.state_dict())`) or .safetensors.
    pub source: PathBuf,
    /// The architecture the state dict is of.
    pub arch: Arch,
    /// The data set the model is for: sets the classes, input channels and image size.
    pub dataset: DatasetId,
    /// The names of the state dict; default: told from its keys.
    pub convention: Option<Convention>,
    /// ResNet shortcuts where the shape changes: projection (option B, 1x1 conv + batch norm)
    /// or zero-pad (option A, parameter-free: bayesian-torch's resnet20).
    pub shortcut: Shortcut,
    /// Width of the ResNets' first stage (default: the architecture's own, 16 or 64).
    pub width: Option<usize>,
    /// Image side the model takes (default: the data set's).
    pub image_size: Option<usize>,
    /// For a .pt checkpoint holding more than the state dict: the key of the state dict
    /// (e.g. `state_dict`).
    pub top_level_key: Option<String>,
    /// Prior mean the model was trained with, recorded in import.json (bayesian-torch's
    /// default: 0; the file does not hold it).
    pub prior_mu: f64,
    /// Prior standard deviation the model was trained with, recorded in import.json
    /// (bayesian-torch's default: 1).
    pub prior_sigma: f64,
    /// Output model directory (config.json, model.bpk, import.json).
    pub out: PathBuf,
    /// Replace a model already in --out.
    pub force: bool,
}

/// A ResNet shortcut by its name: `projection` (or `b`) or `zero-pad` (or `a`).
pub fn parse_shortcut(s: &str) -> Result<Shortcut, String> {
    match s {
        "projection" | "b" | "B" => Ok(Shortcut::Projection),
        "zero-pad" | "a" | "A" => Ok(Shortcut::ZeroPad),
        _ => Err(format!("unknown shortcut {s:?} (projection or zero-pad)")),
    }
}

/// The configuration `args` describe, before the convention sets its kind.
pub fn import_config(args: &ImportRequest) -> ModelConfig {
    let (c, h, _) = args.dataset.shape();
    let mut config = ModelConfig::for_input(
        args.arch,
        Kind::Bayesian,
        args.dataset.classes(),
        c,
        args.image_size.unwrap_or(h),
    );
    config.shortcut = (args.shortcut != Shortcut::Projection).then_some(args.shortcut);
    config.width = args.width;
    config
}

/// Runs an import (`swbnn import`): reads, maps and writes the model directory. Returns what
/// it recorded.
pub fn import(args: &ImportRequest, device: &Device) -> Result<ImportRecord, InteropError> {
    if !(args.prior_sigma.is_finite() && args.prior_sigma > 0.0 && args.prior_mu.is_finite()) {
        return Err(InteropError::Import(format!(
            "--prior-mu {} --prior-sigma {}: the mean must be finite and the sigma finite and > 0",
            args.prior_mu, args.prior_sigma
        )));
    }
    // An option the architecture ignores (`--width` of a LeNet-5) is refused, not recorded.
    let config = import_config(args);
    config
        .check_arch_options()
        .map_err(|e| InteropError::Import(format!("--arch {}: {e}", args.arch)))?;
    let source = read_state_dict(&args.source, args.top_level_key.as_deref())?;
    let (model, config, convention) = import_state_dict(&source, &config, args.convention, device)?;
    let record = ImportRecord {
        source: args
            .source
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        convention,
        prior_mu: args.prior_mu,
        prior_sigma: args.prior_sigma,
        tensors: source.len(),
    };
    write_model_dir(&args.out, &model, &config, &record, args.force)?;
    Ok(record)
}

/// Writes `model` (of `config`) to `out` as `.safetensors` (atomically; an existing file only
/// with `force`, checked before the work and again by the final no-replace rename, so that a
/// file that appeared meanwhile is not replaced either). Returns the number of tensors written.
pub fn write_export(
    model: &Network,
    config: &ModelConfig,
    as_: ExportAs,
    out: &Path,
    force: bool,
) -> Result<usize, InteropError> {
    if out.exists() && !force {
        return Err(InteropError::Write(format!(
            "{} already exists; pass --force to replace it",
            out.display()
        )));
    }
    let (bytes, tensors) = export_bytes(model, config, as_)?;
    bnn_io::write_atomic(out, &bytes, bnn_io::Replace::from_force(force))?;
    Ok(tensors)
}

/// `model` (of `config`) as the bytes of a `.safetensors` file, and the number of tensors:
/// what [`write_export`] writes, for a stream (`swbnn export --out -`).
pub fn export_bytes(
    model: &Network,
    config: &ModelConfig,
    as_: ExportAs,
) -> Result<(Vec<u8>, usize), InteropError> {
    let (dict, meta) = export_state_dict(model, config, as_)?;
    Ok((safetensors_bytes(&dict, Some(meta))?, dict.len()))
}

/// An error of writing `shown` (through [`bnn_train::write_atomic`], whose errors read
/// "checkpoint <path>": here it is an export or import, and `shown` the file the user asked
/// for rather than a temporary one).
fn write_error(shown: &Path, e: bnn_train::TrainError) -> InteropError {
    let reason = match e {
        bnn_train::TrainError::Checkpoint { reason, .. } => reason,
        other => other.to_string(),
    };
    InteropError::WriteFile {
        path: shown.display().to_string(),
        reason,
    }
}
