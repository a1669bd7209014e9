//! The clap type of `swbnn warmup`; it builds the library's request.

use std::path::PathBuf;

use bnn_models::Arch;
use swbnn_ops::commands::TrainKind;
use swbnn_ops::warmup::{MAX_WARMUP_BATCH, WarmupRequest};

/// Arguments of `swbnn warmup`.
#[derive(Debug, Clone, clap::Args)]
pub struct WarmupArgs {
    /// The model to warm up for: a .swb or .qbnn file, or a directory with model.bpk and
    /// config.json. Its weights do not matter, only its layers and input shape.
    #[arg(long, conflicts_with = "arch", required_unless_present = "arch")]
    pub model: Option<PathBuf>,
    /// Or an architecture, built with fresh weights: mlp, lenet5, resnet18, resnet20,
    /// resnet50, resnet101, wrn28-10, vit-b16 or vit-tiny.
    #[arg(long)]
    pub arch: Option<Arch>,
    /// With --arch: a deterministic or a Bayesian network.
    #[arg(long, value_parser = swbnn::args::train_kind(), default_value = "bayesian", requires = "arch")]
    pub kind: TrainKind,
    /// With --arch: the number of classes.
    #[arg(long, default_value_t = 10, value_parser = swbnn::args::positive, requires = "arch")]
    pub classes: usize,
    /// With --arch: input channels (1 for MNIST-like data, 3 for colour images).
    #[arg(long, default_value_t = 1, value_parser = swbnn::args::positive, requires = "arch")]
    pub channels: usize,
    /// With --arch: the input images' side in pixels.
    #[arg(long, default_value_t = 28, value_parser = swbnn::args::positive, requires = "arch")]
    pub image_size: usize,
    /// Images per batch: the batch size of the runs to warm up for (kernels are compiled and
    /// tuned per shape). At most 1024.
    #[arg(long, default_value_t = 128, value_parser = batch_size)]
    pub batch_size: usize,
    /// Monte-Carlo samples: stochastic forward passes of the batch (one pass for a
    /// deterministic network).
    #[arg(long, default_value_t = 2, value_parser = swbnn::args::samples)]
    pub mc_samples: usize,
    /// Also run one training step (forward, backward, Adam update) at the batch size, for the
    /// kernels `swbnn train` needs.
    #[arg(long)]
    pub train: bool,
}

fn batch_size(s: &str) -> Result<usize, String> {
    let n = swbnn::args::positive(s)?;
    if n > MAX_WARMUP_BATCH {
        return Err(format!("at most {MAX_WARMUP_BATCH}"));
    }
    Ok(n)
}

impl WarmupArgs {
    /// The library's request.
    pub fn request(&self) -> WarmupRequest {
        WarmupRequest {
            model: self.model.clone(),
            arch: self.arch,
            kind: self.kind,
            classes: self.classes,
            channels: self.channels,
            image_size: self.image_size,
            batch_size: self.batch_size,
            mc_samples: self.mc_samples,
            train: self.train,
        }
    }
}
