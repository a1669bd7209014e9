//! Prints one JSON line with a model's parameter counts, without running (or allocating) it.
//!
//! `cargo run --release -p bnn-models --example summary -- --arch resnet50 --kind bayesian --classes 1000`

use bnn_models::{Arch, Kind, ModelConfig};
use clap::Parser;

#[derive(Parser)]
struct Args {
    /// Architecture: mlp, lenet5, resnet18, resnet20, resnet50, resnet101, wrn28-10, vit-b16, vit-tiny.
    #[arg(long)]
    arch: Arch,
    /// deterministic, bayesian or shared.
    #[arg(long)]
    kind: Kind,
    /// Number of classes.
    #[arg(long, default_value_t = 10)]
    classes: usize,
    /// Input channels.
    #[arg(long, default_value_t = 3)]
    in_channels: usize,
    /// Input side in pixels (default: 224 for the ImageNet models, 32 otherwise).
    #[arg(long)]
    image_size: Option<usize>,
    /// Codebook size for the shared kind.
    #[arg(long, default_value_t = 2000)]
    codebook: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse();
    let size = a.image_size.unwrap_or(match a.arch {
        Arch::Resnet18 | Arch::Resnet50 | Arch::Resnet101 | Arch::VitB16 => 224,
        Arch::Mlp | Arch::Lenet5 => 28,
        _ => 32,
    });
    let device = bnn_layers::test_device();
    let config = ModelConfig::for_input(a.arch, a.kind, a.classes, a.in_channels, size)
        .with_codebook_len(a.codebook);
    let c = config.counts(&device)?;
    let bayesian_weights = match a.kind {
        Kind::Deterministic => 0,
        Kind::Bayesian => c.bayes_weights + c.bayes_biases,
        Kind::Shared => c.shared_weights + c.bayes_biases,
    };
    println!(
        "{}",
        serde_json::json!({
            "arch": a.arch.name(),
            "kind": a.kind.name(),
            "classes": a.classes,
            "in_channels": a.in_channels,
            "image_size": size,
            "parameters": c.trainable,
            "bayesian_weights": bayesian_weights,
        })
    );
    Ok(())
}
