//! `cargo xtask bench ...`: training-step and MC-inference throughput, one JSON line each.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
use bnn_layers::{Codebook, Estimator, WeightSource, device_by_name, set_sampling};
use bnn_models::{Arch, Kind, ModelConfig, ModelError, Network};
use bnn_train::{
    EpochStats, McBatching, Observer, StackedMc, TrainConfig, stacked_probability_sums, train,
};
use burn::module::Module;
use burn::prelude::*;
use burn::tensor::Distribution;
use clap::Subcommand;
use swshare::synth::{SynthSpec, synthetic_table};
use swshare::{SwshareConfig, build_plan};

/// The most untimed MC batches `mc-inference` runs while new kernels keep appearing.
const MAX_WARMUP: usize = 20;

/// Kernels compiled and autotune searches run so far in this process (every variant before
/// this one included), from the kernel log `log` (GPU backends); `None` without one.
fn kernels_so_far(log: Option<&Path>) -> Option<bnn_layers::KernelCounts> {
    let dir = log?;
    bnn_layers::gpu_cache::settle_kernel_log(dir, Duration::from_secs(2));
    bnn_layers::kernel_counts(dir).ok()
}

/// On a GPU backend, sets up CubeCL's caches with a kernel log in a fresh temporary
/// directory (kept as long as the returned guard), so the benchmarks can count what each part
/// compiled; `None` on a CPU backend. Must run before the device is opened.
fn kernel_log(backend: &str) -> Result<Option<tempfile::TempDir>> {
    if !bnn_layers::is_gpu_name(backend) {
        return Ok(None);
    }
    let dir = tempfile::Builder::new()
        .prefix("swbnn-bench-kernels-")
        .tempdir()?;
    let cache = bnn_layers::gpu_cache::gpu_cache_with_kernel_log(dir.path());
    eprintln!("{}", cache.describe());
    Ok(Some(dir))
}

/// `after - before` as JSON (`null` without counts).
fn counted(
    before: Option<bnn_layers::KernelCounts>,
    after: Option<bnn_layers::KernelCounts>,
) -> serde_json::Value {
    match (before, after) {
        (Some(b), Some(a)) => serde_json::json!(a.since(b)),
        _ => serde_json::Value::Null,
    }
}

/// The benchmarks.
#[derive(Subcommand)]
pub enum Which {
    /// Images per second of a full training step (forward, backward, optimiser) per kind and
    /// estimator, on random inputs (1x28x28 by default; `--input 3x32` for CIFAR-shaped ones).
    TrainStep {
        #[arg(long, default_value = "resnet20")]
        arch: Arch,
        #[arg(long, default_value_t = 128, value_parser = swbnn::args::positive)]
        batch: usize,
        /// Input shape, CHANNELSxSIZE.
        #[arg(long, default_value = "1x28", value_parser = parse_input)]
        input: Input,
        /// Measured steps (one extra warm-up epoch of the same length runs first).
        #[arg(long, default_value_t = 10, value_parser = swbnn::args::positive)]
        steps: usize,
        #[arg(long, default_value = "flex")]
        backend: String,
        /// Only this kind (deterministic, bayesian, shared).
        #[arg(long)]
        kind: Option<Kind>,
        /// Only this estimator (reparam, local-reparam, flipout).
        #[arg(long, value_parser = parse_estimator)]
        estimator: Option<Estimator>,
    },
    /// Images per second of Monte-Carlo inference with `samples` passes, per kind.
    McInference {
        #[arg(long, default_value = "resnet20")]
        arch: Arch,
        /// Monte Carlo samples (1 to 10,000).
        #[arg(long, default_value_t = 30, value_parser = swbnn::args::samples)]
        samples: usize,
        #[arg(long, default_value_t = 128, value_parser = swbnn::args::positive)]
        batch: usize,
        /// Input shape, CHANNELSxSIZE.
        #[arg(long, default_value = "1x28", value_parser = parse_input)]
        input: Input,
        /// Batches per measurement.
        #[arg(long, default_value_t = 2, value_parser = swbnn::args::positive)]
        batches: usize,
        /// Untimed MC batches first, each the timed computation itself (lazy initialisation,
        /// kernel compilation, autotuning, and on GPU backends the fusion of kernels, which
        /// settles only after some passes). On a GPU backend at least this many, and more
        /// until a batch compiles no new kernel (at most 20).
        #[arg(long, default_value_t = 1)]
        warmup: usize,
        #[arg(long, default_value = "flex")]
        backend: String,
        /// Only this kind (deterministic, bayesian, shared).
        #[arg(long)]
        kind: Option<Kind>,
        /// Only this estimator (reparam, local-reparam, flipout).
        #[arg(long, value_parser = parse_estimator)]
        estimator: Option<Estimator>,
        /// Weight samples per forward pass (Monte-Carlo stacking, `bnn_train::McBatching`);
        /// 1 runs one forward per sample. Default: the backend's, as evaluation chooses it (1 on
        /// CPU backends).
        #[arg(long, value_parser = swbnn::args::positive)]
        stack: Option<usize>,
    },
    /// Seconds of the 2DGBNN stages 1-2 (outliers, GMM, cluster reduction, ellipses, merging:
    /// `swshare::build_plan`) on a synthetic weight table; the defaults are ResNet-50-sized
    /// (25.5 million shareable weights in 54 layers, K = 6000 as the ImageNet preset).
    Stages {
        /// Shareable weights.
        #[arg(long, default_value_t = 25_500_000, value_parser = swbnn::args::positive)]
        weights: usize,
        /// Shareable layers.
        #[arg(long, default_value_t = 54, value_parser = swbnn::args::positive)]
        layers: usize,
        /// GMM components (at most `gmm_minibatch::MAX_K`, 32768).
        #[arg(long, default_value_t = 6000, value_parser = swbnn::args::positive)]
        k: usize,
    },
}

/// Input shape of the throughput benchmarks.
#[derive(Clone, Copy, Debug)]
pub struct Input {
    channels: usize,
    size: usize,
}

fn parse_input(s: &str) -> Result<Input, String> {
    let bad = || format!("input shape {s:?}: expected CHANNELSxSIZE, e.g. 3x32");
    let (c, n) = s.split_once('x').ok_or_else(bad)?;
    let (channels, size) = (c.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if !(1..=16).contains(&channels) || !(8..=512).contains(&size) {
        return Err(format!(
            "input shape {s:?}: channels must be 1-16 and size 8-512"
        ));
    }
    Ok(Input { channels, size })
}

const K: usize = 2000;

/// CPU time of every thread of this process so far, in seconds (`/proc/self/task/*/schedstat`;
/// 0 where that is not available). Beside wall-clock images/s, images per CPU-second compare
/// runs on a machine shared with other work, where a process gets only part of the cores.
fn cpu_seconds() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let ns: u64 = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum();
    ns as f64 * 1e-9
}

/// Records the process CPU time, and with a kernel log the kernels compiled so far, at the end
/// of every epoch (after its timing).
#[derive(Default)]
struct CpuClock<'a> {
    marks: Vec<f64>,
    log: Option<&'a Path>,
    start_kernels: Option<bnn_layers::KernelCounts>,
    kernels: Vec<Option<bnn_layers::KernelCounts>>,
}

impl Observer for CpuClock<'_> {
    fn on_epoch(&mut self, _stats: &EpochStats) {
        self.marks.push(cpu_seconds());
        self.kernels.push(kernels_so_far(self.log));
    }
}

impl CpuClock<'_> {
    /// CPU seconds of the last epoch.
    fn last_epoch(&self) -> f64 {
        match self.marks.as_slice() {
            [.., a, b] => b - a,
            _ => f64::NAN,
        }
    }
}

fn parse_estimator(name: &str) -> Result<Estimator, String> {
    Estimator::from_name(name).ok_or_else(|| format!("unknown estimator {name:?}"))
}

/// Whether a variant passes the `--kind` / `--estimator` filters.
fn selected(
    kind: Kind,
    est: Option<Estimator>,
    want_kind: Option<Kind>,
    want_est: Option<Estimator>,
) -> bool {
    want_kind.is_none_or(|k| k == kind) && want_est.is_none_or(|e| est.is_none_or(|x| x == e))
}

/// A shared model with every weight on one of `K` codebook entries (round robin), 2 % outliers.
fn shared_model(config: &ModelConfig, device: &Device) -> Result<Network, ModelError> {
    let mut share = |_: &str, shape: &[usize]| -> Result<Vec<WeightSource>, ModelError> {
        let n: usize = shape.iter().product();
        Ok((0..n)
            .map(|i| {
                if i.is_multiple_of(50) {
                    WeightSource::Outlier { mu: 0.3, rho: -6.0 }
                } else {
                    WeightSource::Codebook((i % K) as u32)
                }
            })
            .collect())
    };
    let mu: Vec<f32> = (0..K).map(|k| (k as f32 / K as f32 - 0.5) * 0.2).collect();
    let rho = vec![-6.0f32; K];
    let codebook = Codebook::new(&mu, &rho, device).map_err(|source| ModelError::Layer {
        path: "codebook".into(),
        source,
    })?;
    config
        .clone()
        .with_kind(Kind::Shared)
        .init_shared(device, &mut share, codebook)
}

fn variants(arch: Arch, input: Input) -> Vec<(Kind, Option<Estimator>, ModelConfig)> {
    let base = ModelConfig::for_input(arch, Kind::Deterministic, 10, input.channels, input.size);
    let mut v = vec![(Kind::Deterministic, None, base.clone())];
    for e in [
        Estimator::Reparameterization,
        Estimator::LocalReparameterization,
        Estimator::Flipout,
    ] {
        let mut c = base.clone().with_kind(Kind::Bayesian);
        c.bayes.estimator = e;
        v.push((Kind::Bayesian, Some(e), c.clone()));
        let mut s = c.with_kind(Kind::Shared);
        s.bayes.estimator = e;
        v.push((Kind::Shared, Some(e), s));
    }
    v
}

fn build(kind: Kind, config: &ModelConfig, device: &Device) -> Result<Network> {
    Ok(match kind {
        Kind::Shared => shared_model(config, device)?,
        _ => config.init(device)?,
    })
}

pub fn run(which: Which) -> Result<()> {
    match which {
        Which::TrainStep {
            arch,
            batch,
            input,
            steps,
            backend,
            kind: want_kind,
            estimator: want_est,
        } => {
            let log = kernel_log(&backend)?;
            let log = log.as_ref().map(|d| d.path());
            let device = device_by_name(&backend)?.autodiff();
            let n = batch * steps;
            let (c, hw) = (input.channels, input.size);
            let pixels: Vec<u8> = (0..n * c * hw * hw)
                .map(|i| (i * 2654435761usize % 251) as u8)
                .collect();
            let labels: Vec<u32> = (0..n as u32).map(|i| i % 10).collect();
            let data = InMemoryDataset::new(pixels, labels, (c, hw, hw), 10)?;
            let loader = DataLoader::new(
                data,
                Compose::new(),
                LoaderConfig {
                    batch_size: batch,
                    shuffle: true,
                    drop_last: true,
                    seed: 0,
                    workers: 1,
                    prefetch: 2,
                },
            )?;
            for (kind, est, config) in variants(arch, input) {
                if !selected(kind, est, want_kind, want_est) {
                    continue;
                }
                device.seed(0);
                let model = build(kind, &config, &device)?;
                // Adam for every kind, as the PyTorch peer: the ratio then measures the
                // Bayesian layers, not the optimiser.
                let tc = TrainConfig::bayes_by_backprop(2);
                let mut clock = CpuClock {
                    log,
                    start_kernels: kernels_so_far(log),
                    ..CpuClock::default()
                };
                let (_, history) = train(model, &loader, &tc, None, &mut clock)?;
                let measured = history.last().map(|h| h.images_per_s).unwrap_or(0.0);
                let warmup_s = history.first().map(|h| h.seconds).unwrap_or(f64::NAN);
                let steady_s = history.last().map(|h| h.seconds).unwrap_or(f64::NAN);
                let cpu_measured = n as f64 / clock.last_epoch();
                let kernels = |i: usize| clock.kernels.get(i).copied().flatten();
                println!(
                    "{}",
                    serde_json::json!({
                        "bench": "train-step", "arch": arch.name(), "batch": batch, "backend": backend,
                        "input": [c, hw, hw],
                        "kind": kind.name(), "estimator": est.map(|e| e.name()), "images_per_s": measured,
                        "cpu_images_per_s": cpu_measured,
                        // The first epoch is the warm-up (kernels compiled, autotuned), the
                        // second the timed one: `kernels_timed` should be zero.
                        "warmup_s": warmup_s, "steady_s": steady_s,
                        "kernels_warmup": counted(clock.start_kernels, kernels(0)),
                        "kernels_timed": counted(kernels(0), kernels(1)),
                    })
                );
            }
        }
        Which::McInference {
            arch,
            samples,
            batch,
            input,
            batches,
            warmup,
            backend,
            kind: want_kind,
            estimator: want_est,
            stack,
        } => {
            let log = kernel_log(&backend)?;
            let log = log.as_ref().map(|d| d.path());
            let device = device_by_name(&backend)?;
            let batching = stack.map_or(McBatching::Auto, McBatching::Stack);
            let stack =
                batching.stack_for(&device, batch, input.channels * input.size.pow(2), samples);
            let (c, hw) = (input.channels, input.size);
            let x =
                Tensor::<4>::random([batch, c, hw, hw], Distribution::Normal(0.0, 1.0), &device);
            for (kind, est, config) in variants(arch, input) {
                if est.is_some_and(|e| e != Estimator::Reparameterization && kind == Kind::Shared)
                    || !selected(kind, est, want_kind, want_est)
                {
                    continue;
                }
                let model = build(kind, &config, &device)?.valid();
                let model = set_sampling(model, kind != Kind::Deterministic);
                let stacked = StackedMc::new(&model, samples, stack)?;
                // The mean predictive of one batch stays on the device and is read back once,
                // as in evaluation (and the PyTorch peer).
                let mc_batch = || {
                    let probs = if stack > 1 {
                        stacked_probability_sums(&stacked.logits(x.clone()), batch, 1.0, false).0
                    } else {
                        let mut probs =
                            burn::tensor::activation::softmax(model.forward(x.clone()), 1);
                        for _ in 1..samples {
                            probs = probs
                                + burn::tensor::activation::softmax(model.forward(x.clone()), 1);
                        }
                        probs
                    };
                    let _ = (probs / samples as f64).into_data();
                };
                // Warm-up runs the timed computation itself: on a GPU backend every fused
                // kernel and autotune candidate is compiled on first use, and a warm-up of
                // plain forwards left the softmax-and-sum kernels to compile inside the timing.
                // With a kernel log it goes on until a batch compiles and tunes nothing new
                // (fusion settles only after some passes), at most MAX_WARMUP batches.
                let start_kernels = kernels_so_far(log);
                let warm_started = Instant::now();
                let mut warmup_batches = 0;
                let mut last = start_kernels;
                loop {
                    mc_batch();
                    warmup_batches += 1;
                    let now = kernels_so_far(log);
                    let settled = match (last, now) {
                        (Some(l), Some(n)) => n.since(l).is_zero(),
                        _ => true,
                    };
                    last = now;
                    if warmup_batches >= MAX_WARMUP || (warmup_batches >= warmup.max(1) && settled)
                    {
                        break;
                    }
                }
                let warmup_s = warm_started.elapsed().as_secs_f64();
                let (started, cpu_started) = (Instant::now(), cpu_seconds());
                for _ in 0..batches {
                    mc_batch();
                }
                let s = started.elapsed().as_secs_f64();
                let cpu = cpu_seconds() - cpu_started;
                let after = kernels_so_far(log);
                println!(
                    "{}",
                    serde_json::json!({
                        "bench": "mc-inference", "arch": arch.name(), "batch": batch, "samples": samples,
                        "backend": backend, "kind": kind.name(), "estimator": est.map(|e| e.name()),
                        "input": [c, hw, hw], "stack": stack,
                        "images_per_s": (batch * batches) as f64 / s,
                        "passes_per_s": (batch * batches * samples) as f64 / s,
                        "cpu_images_per_s": (batch * batches) as f64 / cpu,
                        "warmup_batches": warmup_batches, "warmup_s": warmup_s, "steady_s": s,
                        "kernels_warmup": counted(start_kernels, last),
                        "kernels_timed": counted(last, after),
                    })
                );
            }
        }
        Which::Stages { weights, layers, k } => {
            // Checked before the synthetic table (millions of weights) is generated.
            let mut cfg = SwshareConfig::default();
            cfg.gmm.k = k;
            cfg.validate()?;
            let started = Instant::now();
            let table = synthetic_table(&SynthSpec {
                n_shareable: weights,
                layers,
                ..Default::default()
            })?;
            let generate_s = started.elapsed().as_secs_f64();
            let (_, report) = build_plan(&table, &cfg)?;
            let t = &report.timings;
            println!(
                "{}",
                serde_json::json!({
                    "bench": "stages", "weights": weights, "layers": layers, "k": k,
                    "threads": rayon_threads(), "generate_s": generate_s,
                    "outliers_s": t.outliers_s, "gmm_s": t.gmm_s,
                    "small_clusters_s": t.small_clusters_s, "ellipse_s": t.ellipse_s,
                    "merge_s": t.merge_s, "total_s": t.total_s,
                    "outliers": report.outliers,
                    "components_before_merge": report.gaussians_before_merge,
                    "components": report.gaussians_after_merge,
                })
            );
        }
    }
    Ok(())
}

/// Threads of the global rayon pool (the stages' parallelism).
fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
