//! CubeCL's persistent caches across processes, on `wgpu`: Monte-Carlo inference of a Bayesian
//! LeNet-5 run twice, in two processes sharing one fresh cache directory; the second must run
//! no autotune search, and (with the `vulkan` feature's SPIR-V compiler, the one whose kernels
//! CubeCL keeps) compile no kernel. Then a damaged cache file must cost a recompile, not a
//! crash. Without a wgpu adapter the test says so and passes.
//!
//! Each process is this test binary again, running only `mc_inference_in_a_child_process`,
//! which does nothing unless `SWBNN_GPU_CACHE_CHILD` is set.
//!
//! `SWBNN_GPU_CACHE_ARCH` picks the network (default `lenet5`; CI runs `mlp`, whose fewer
//! kernels keep the four processes within minutes on lavapipe), and `SWBNN_REQUIRE_WGPU=1`
//! turns a missing adapter into a failure (CI, where lavapipe is installed).
#![cfg(feature = "wgpu")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bnn_layers::gpu_cache::{KERNEL_LOG_ENV, kernel_counts, settle_kernel_log};
use bnn_layers::{KernelCounts, device_by_name, gpu_cache, set_sampling};
use bnn_models::{Arch, Kind, ModelConfig};
use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::activation::softmax;

const CHILD_ENV: &str = "SWBNN_GPU_CACHE_CHILD";
const ARCH_ENV: &str = "SWBNN_GPU_CACHE_ARCH";
const REQUIRE_ENV: &str = "SWBNN_REQUIRE_WGPU";

/// The network of `SWBNN_GPU_CACHE_ARCH` (LeNet-5 when unset).
fn arch() -> Arch {
    std::env::var(ARCH_ENV).map_or(Arch::Lenet5, |name| {
        name.parse()
            .unwrap_or_else(|e| panic!("{ARCH_ENV}={name}: {e}"))
    })
}
const MC_SAMPLES: usize = 3;
const BATCH: usize = 8;

/// The child's work: Monte-Carlo inference of a Bayesian LeNet-5 (or [`arch`]) on the wgpu device, caches
/// from `SWBNN_CACHE_DIR`, compiles and tunes logged into `SWBNN_KERNEL_LOG`.
#[test]
fn mc_inference_in_a_child_process() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let cache = gpu_cache();
    let device = match device_by_name("wgpu") {
        Ok(d) => d,
        Err(e) => {
            println!("CHILD unavailable: {e}");
            return;
        }
    };
    let started = Instant::now();
    let model = ModelConfig::for_input(arch(), Kind::Bayesian, 10, 1, 28)
        .init(&device)
        .unwrap();
    let model = set_sampling(model, true);
    let x = Tensor::<4>::random([BATCH, 1, 28, 28], Distribution::Normal(0.0, 1.0), &device);
    let mut mean = Tensor::<2>::zeros([BATCH, 10], &device);
    for _ in 0..MC_SAMPLES {
        mean = mean + softmax(model.forward(x.clone()), 1);
    }
    let probs: Vec<f32> = (mean / MC_SAMPLES as f32)
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    let total: f32 = probs.iter().sum();
    assert!((total - BATCH as f32).abs() < 1e-3, "{total}");
    let work = started.elapsed();
    if let Some(log) = &cache.kernel_log {
        settle_kernel_log(log, Duration::from_secs(5));
    }
    println!(
        "CHILD ok in {:.2} s; {}",
        work.as_secs_f64(),
        cache.describe()
    );
}

struct Run {
    counts: KernelCounts,
    wall: Duration,
    stderr: String,
}

/// Runs the child in a fresh process with the caches in `cache` and the kernel log in `log`;
/// `None` when the child found no wgpu adapter.
fn child(cache: &Path, log: &Path) -> Option<Run> {
    let started = Instant::now();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "mc_inference_in_a_child_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .env("SWBNN_CACHE_DIR", cache)
        .env(KERNEL_LOG_ENV, log)
        .env_remove("CUBECL_AUTOTUNE_CACHE")
        .env_remove("CUBECL_ENVIRONMENT")
        .output()
        .unwrap();
    let wall = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if let Some(line) = stdout.lines().find(|l| l.contains("CHILD unavailable")) {
        assert!(
            std::env::var_os(REQUIRE_ENV).is_none(),
            "{REQUIRE_ENV} is set but the child found no wgpu adapter: {line}\n{stderr}"
        );
        eprintln!("skipped: no wgpu adapter here ({line})");
        return None;
    }
    assert!(
        out.status.success() && stdout.contains("CHILD ok"),
        "child failed: {}\n{stdout}\n{stderr}",
        out.status
    );
    Some(Run {
        counts: kernel_counts(log).unwrap(),
        wall,
        stderr,
    })
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("swbnn-gpu-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_second_process_reuses_the_kernels_and_the_autotune_results() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let dir = scratch();
    let cache = dir.join("cache");
    let Some(first) = child(&cache, &dir.join("log-1")) else {
        return;
    };
    let second = child(&cache, &dir.join("log-2")).unwrap();
    let database = cache.join("default.db");
    assert!(
        database.is_file(),
        "no cache database in {}",
        cache.display()
    );

    // A damaged cache file: garbage, then a sound header over garbage pages.
    std::fs::write(&database, b"garbage, not a database").unwrap();
    let garbage = child(&cache, &dir.join("log-3")).unwrap();
    assert!(
        garbage.stderr.contains("warning: the GPU kernel cache"),
        "{}",
        garbage.stderr
    );
    let mut page = std::fs::read(&database).unwrap_or_default();
    page.resize(8192, 0);
    for (i, b) in page.iter_mut().enumerate().skip(100) {
        *b = (i * 7 + 13) as u8;
    }
    std::fs::write(&database, &page).unwrap();
    let _ = std::fs::remove_file(cache.join("default.db-wal"));
    let scrambled = child(&cache, &dir.join("log-4")).unwrap();

    for (name, run) in [
        ("first", &first),
        ("second", &second),
        ("garbage file", &garbage),
        ("scrambled pages", &scrambled),
    ] {
        eprintln!(
            "{name}: {} kernels compiled, {} autotune searches, {:.2} s",
            run.counts.compiled,
            run.counts.autotuned,
            run.wall.as_secs_f64()
        );
    }
    assert!(
        first.counts.compiled > 0,
        "the first process compiled nothing"
    );
    // Without a search in the first process the second's zero would prove nothing.
    assert!(
        first.counts.autotuned > 0,
        "the first process tuned nothing"
    );
    assert_eq!(second.counts.autotuned, 0, "the second process tuned again");
    if cfg!(feature = "vulkan") {
        assert_eq!(
            second.counts.compiled, 0,
            "the second process compiled again"
        );
    }
    assert!(garbage.counts.compiled > 0);
    let _ = std::fs::remove_dir_all(&dir);
}
