//! `swbnn warmup`: run a model once at the shapes of later runs, so that CubeCL's persistent
//! caches (see [`mod@bnn_layers::gpu_cache`]) hold its compiled kernels and autotune results before
//! the runs that matter.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bnn_layers::gpu_cache::{GpuCache, KernelCounts, gpu_cache_with_kernel_log, settle_kernel_log};
use bnn_layers::{device_by_name, is_gpu_name, kernel_counts};
use bnn_models::{Arch, Kind, ModelConfig, Network};
use burn::optim::{AdamConfig, GradientsParams};
use burn::prelude::*;
use burn::tensor::Distribution;
use serde::Serialize;

use crate::Error;
use crate::commands::TrainKind;
use crate::load::load_model;

/// The largest `--batch-size`: a batch of 1,024 ImageNet-sized images is 600 MB of input.
pub const MAX_WARMUP_BATCH: usize = 1024;

/// A warm-up: what [`run`] builds and runs (the `swbnn warmup` flags build this). Either
/// `model` or `arch` is given.
#[derive(Debug, Clone)]
pub struct WarmupRequest {
    /// The model to warm up for: a .swb or .qbnn file, or a directory with model.bpk and
    /// config.json. Its weights do not matter, only its layers and input shape.
    pub model: Option<PathBuf>,
    /// Or an architecture, built with fresh weights: mlp, lenet5, resnet18, resnet20,
    /// resnet50, resnet101, wrn28-10, vit-b16 or vit-tiny.
    pub arch: Option<Arch>,
    /// With --arch: a deterministic or a Bayesian network.
    pub kind: TrainKind,
    /// With --arch: the number of classes.
    pub classes: usize,
    /// With --arch: input channels (1 for MNIST-like data, 3 for colour images).
    pub channels: usize,
    /// With --arch: the input images' side in pixels.
    pub image_size: usize,
    /// Images per batch: the batch size of the runs to warm up for (kernels are compiled and
    /// tuned per shape). At most 1024.
    pub batch_size: usize,
    /// Monte-Carlo samples: stochastic forward passes of the batch (one pass for a
    /// deterministic network).
    pub mc_samples: usize,
    /// Also run one training step (forward, backward, Adam update) at the batch size, for the
    /// kernels `swbnn train` needs.
    pub train: bool,
}

impl WarmupRequest {
    /// Checks every field: a batch of 1 to [`MAX_WARMUP_BATCH`] images, samples as
    /// [`check_samples`](crate::limits::check_samples) allows, and at least one class, channel
    /// and pixel.
    pub fn check(&self) -> Result<(), Error> {
        if !(1..=MAX_WARMUP_BATCH).contains(&self.batch_size) {
            return Err(Error::Usage(format!(
                "--batch-size {}: 1 to {MAX_WARMUP_BATCH}",
                self.batch_size
            )));
        }
        crate::limits::check_samples(self.mc_samples, 0, "").map_err(Error::Usage)?;
        for (flag, v) in [
            ("--classes", self.classes),
            ("--channels", self.channels),
            ("--image-size", self.image_size),
        ] {
            if v == 0 {
                return Err(Error::Usage(format!("{flag} 0: at least 1")));
            }
        }
        Ok(())
    }
}

/// What `swbnn warmup` did.
#[derive(Debug, Clone, Serialize)]
pub struct WarmupReport {
    /// The backend warmed up.
    pub backend: String,
    /// Whether the backend has anything to cache (a GPU backend).
    pub gpu: bool,
    /// One line on where the caches are.
    pub cache: String,
    /// The cache directory, if anything is kept.
    pub cache_dir: Option<PathBuf>,
    /// Kernels compiled and autotune searches run by this warm-up (0 and 0 when the caches
    /// already held everything).
    pub counts: Option<KernelCounts>,
    /// Forward passes run.
    pub passes: usize,
    /// Whether a training step ran.
    pub trained: bool,
    /// Wall time of the work, from opening the device, in seconds.
    pub seconds: f64,
}

impl WarmupReport {
    /// The lines `swbnn warmup` prints.
    pub fn lines(&self) -> Vec<String> {
        if !self.gpu {
            return vec![format!(
                "backend {}: nothing to cache (CubeCL's kernel caches are for the GPU backends, \
                 wgpu and cuda)",
                self.backend
            )];
        }
        let mut lines = vec![self.cache.clone()];
        let work = format!(
            "{} forward pass{}{}",
            self.passes,
            if self.passes == 1 { "" } else { "es" },
            if self.trained {
                " and one training step"
            } else {
                ""
            }
        );
        match self.counts {
            Some(c) => lines.push(format!(
                "{work} on {} in {:.1} s: {} kernels compiled, {} autotune searches",
                self.backend, self.seconds, c.compiled, c.autotuned
            )),
            None => lines.push(format!(
                "{work} on {} in {:.1} s (no kernel counts: the kernel log could not be written)",
                self.backend, self.seconds
            )),
        }
        lines
    }
}

/// Runs `swbnn warmup` on the backend named `backend`: sets up the caches (with a kernel log,
/// to count what was compiled), opens the device, runs the passes and the optional training
/// step, and reports. On a CPU backend there is nothing to cache: nothing runs.
///
/// Must run before anything else opens a GPU device in the process: the caches and the kernel
/// log are set up once per process.
pub fn run(args: &WarmupRequest, backend: &str) -> Result<WarmupReport, Error> {
    args.check()?;
    if !is_gpu_name(backend) {
        // Still an error for a name that is no backend at all.
        device_by_name(backend)?;
        return Ok(WarmupReport {
            backend: backend.to_string(),
            gpu: false,
            cache: "nothing to cache".to_string(),
            cache_dir: None,
            counts: None,
            passes: 0,
            trained: false,
            seconds: 0.0,
        });
    }
    let log = tempfile::Builder::new()
        .prefix("swbnn-kernel-log-")
        .tempdir()
        .map_err(|source| Error::Io {
            path: std::env::temp_dir().display().to_string(),
            source,
        })?;
    let cache: &GpuCache = gpu_cache_with_kernel_log(log.path());
    let started = Instant::now();
    let device = device_by_name(backend)?;
    let (net, config) = match (&args.model, args.arch) {
        (Some(path), _) => {
            let loaded = load_model(path, &device)?;
            (loaded.net, loaded.config)
        }
        (None, Some(arch)) => {
            let kind = match args.kind {
                TrainKind::Deterministic => Kind::Deterministic,
                TrainKind::Bayesian => Kind::Bayesian,
            };
            let config =
                ModelConfig::for_input(arch, kind, args.classes, args.channels, args.image_size);
            (config.init(&device)?, config)
        }
        (None, None) => return Err(Error::Usage("give --model FILE or --arch".to_string())),
    };
    let shape = [
        args.batch_size,
        config.in_channels,
        config.image_size,
        config.image_size,
    ];
    let passes = if config.kind == Kind::Deterministic {
        1
    } else {
        args.mc_samples
    };
    forward_passes(&net, shape, passes)?;
    if args.train {
        train_step(&config, shape, &device)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let counts = cache.kernel_log.as_deref().and_then(|dir| {
        settle_kernel_log(dir, Duration::from_secs(5));
        kernel_counts(dir).ok()
    });
    Ok(WarmupReport {
        backend: backend.to_string(),
        gpu: true,
        cache: cache.describe(),
        cache_dir: cache.dir.clone(),
        counts,
        passes,
        trained: args.train,
        seconds,
    })
}

/// Monte-Carlo inference with `passes` samples on one batch of random images of `shape`, run
/// by evaluation's own code ([`bnn_train::predict`]): the kernels it compiles are the ones
/// `swbnn eval` and `cargo xtask reproduce` launch at this batch size.
fn forward_passes(net: &Network, shape: [usize; 4], passes: usize) -> Result<(), Error> {
    let [n, c, h, w] = shape;
    // Fixed pseudo-random pixels: the values do not matter, the shapes do.
    let pixels: Vec<u8> = (0..n * c * h * w)
        .map(|i| (i.wrapping_mul(2_654_435_761) % 251) as u8)
        .collect();
    let labels: Vec<u32> = (0..n as u32).map(|i| i % 2).collect();
    let data = bnn_data::InMemoryDataset::new(pixels, labels, (c, h, w), 2)?;
    let stats = bnn_data::NormStats::new(vec![0.5; c], vec![0.25; c])?;
    let loader = crate::data::eval_loader(stats, std::sync::Arc::new(data), n, 1)?;
    // Evaluation puts the batches on the network's device, the one opened for the warm-up.
    bnn_train::predict(net, &loader, passes)?;
    Ok(())
}

/// One training step of a fresh network of `config` on a random batch: cross-entropy (plus the
/// KL of a Bayesian network), backward, one Adam update, and the loss read back.
fn train_step(config: &ModelConfig, shape: [usize; 4], device: &Device) -> Result<(), Error> {
    let device = device.clone().autodiff();
    let net = config.init(&device)?;
    let x = Tensor::<4>::random(shape, Distribution::Normal(0.0, 1.0), &device);
    let labels = Tensor::<1, Int>::from_data(
        TensorData::new(
            (0..shape[0])
                .map(|i| (i % config.classes) as i64)
                .collect::<Vec<_>>(),
            [shape[0]],
        ),
        &device,
    );
    let logits = net.forward(x);
    let loss = burn::nn::loss::CrossEntropyLossConfig::new()
        .init(&device)
        .forward(logits, labels);
    let loss = match bnn_layers::kl_divergence(&net, &bnn_layers::Prior::default()) {
        Some(kl) => loss + kl / 60_000.0,
        None => loss,
    };
    let grads = GradientsParams::from_grads(loss.backward(), &net);
    let mut optim = AdamConfig::new().init();
    let _updated = optim.step(1e-3, net, grads);
    // Wait for the update to run: its kernels are what this step is for.
    device
        .sync()
        .map_err(|e| Error::Usage(format!("the training step failed on the device: {e:?}")))?;
    Ok(())
}
