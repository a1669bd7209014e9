//! The clap types of `swbnn import` and `swbnn export`; each builds the library's request.

use std::path::PathBuf;

use bnn_data::DatasetId;
use bnn_interop::{BAYESIAN_TORCH_PRIOR, ExportAs, ImportRequest};
use bnn_models::Arch;
use bnn_models::resnet::Shortcut;
use bnn_models::torch_names::Convention;
use swbnn::commands::ExportRequest;

/// `swbnn import`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The PyTorch state dict: .pt / .pth (`torch.save(model.state_dict())`) or .safetensors.
    pub source: PathBuf,
    /// The architecture the state dict is of.
    #[arg(long)]
    pub arch: Arch,
    /// The data set the model is for: sets the classes, input channels and image size.
    #[arg(long)]
    pub dataset: DatasetId,
    /// The names of the state dict; default: told from its keys.
    #[arg(long)]
    pub convention: Option<Convention>,
    /// ResNet shortcuts where the shape changes: projection (option B, 1x1 conv + batch norm)
    /// or zero-pad (option A, parameter-free: bayesian-torch's resnet20).
    #[arg(long, default_value = "projection", value_parser = bnn_interop::parse_shortcut)]
    pub shortcut: Shortcut,
    /// Width of the ResNets' first stage (default: the architecture's own, 16 or 64).
    #[arg(long)]
    pub width: Option<usize>,
    /// Image side the model takes (default: the data set's).
    #[arg(long)]
    pub image_size: Option<usize>,
    /// For a .pt checkpoint holding more than the state dict: the key of the state dict
    /// (e.g. `state_dict`).
    #[arg(long)]
    pub top_level_key: Option<String>,
    /// Prior mean the model was trained with, recorded in import.json (bayesian-torch's
    /// default: 0; the file does not hold it).
    #[arg(long, default_value_t = BAYESIAN_TORCH_PRIOR.0)]
    pub prior_mu: f64,
    /// Prior standard deviation the model was trained with, recorded in import.json
    /// (bayesian-torch's default: 1).
    #[arg(long, default_value_t = BAYESIAN_TORCH_PRIOR.1)]
    pub prior_sigma: f64,
    /// Output model directory (config.json, model.bpk, import.json).
    #[arg(long)]
    pub out: PathBuf,
    /// Replace a model already in --out.
    #[arg(long)]
    pub force: bool,
}

impl ImportArgs {
    /// The library's request.
    pub fn request(&self) -> ImportRequest {
        ImportRequest {
            source: self.source.clone(),
            arch: self.arch,
            dataset: self.dataset,
            convention: self.convention,
            shortcut: self.shortcut,
            width: self.width,
            image_size: self.image_size,
            top_level_key: self.top_level_key.clone(),
            prior_mu: self.prior_mu,
            prior_sigma: self.prior_sigma,
            out: self.out.clone(),
            force: self.force,
        }
    }
}

/// `swbnn export`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// A .swb file or a model directory (model.bpk and config.json).
    pub model: PathBuf,
    /// The names to write: bayesian-torch, blitz or torchbnn (the full BNN), plain or
    /// torchvision (the mean network), or shared (a .swb model's codebook, indices, outliers
    /// and ellipses, for interop/torch/swbnn_shared.py).
    #[arg(long, value_parser = parse_export_as)]
    pub convention: ExportAs,
    /// Output .safetensors file, or `-` for standard output (a stream, written as it is;
    /// any other non-regular file is refused).
    #[arg(long)]
    pub out: PathBuf,
    /// Replace an existing --out.
    #[arg(long)]
    pub force: bool,
}

impl ExportArgs {
    /// The library's request.
    pub fn request(&self) -> ExportRequest {
        ExportRequest {
            model: self.model.clone(),
            convention: self.convention,
            out: self.out.clone(),
            force: self.force,
        }
    }
}

fn parse_export_as(s: &str) -> Result<ExportAs, String> {
    s.parse()
}
