//! `cargo xtask fuzz <target> --iterations N`: mutation fuzzing, on stable Rust, of every reader
//! of untrusted bytes: the `.swb` reader plus the model built from it, the `.swb` decoder's
//! work, the IDX, CIFAR and SVHN-MAT readers, the `.npy` reader, the `.npz` reader (zip layer
//! and arrays), the PNG/JPEG readers of image folders, and a model directory's `config.json`
//! and checkpoint.
//!
//! Each iteration takes one of the target's valid seed inputs, applies one to four mutations
//! (bit flips, interesting bytes, truncation, splices from other seeds, inserted and deleted
//! ranges, length fields blown up in every width and byte order including the `.swb` format's
//! variable integers, numbers in JSON text replaced by extreme ones) and, for formats with checksums,
//! recomputes the checksum half the time so the mutation reaches the decoder behind it. The
//! target runs under `catch_unwind` and a counting allocator: a panic anywhere (even one a
//! reader catches itself) is counted and its input saved, and the peak heap growth of every
//! execution is compared with the target's documented bound. The decode-cost target also
//! bounds each execution's decode work (deterministic work units, not time).
//!
//! Modules: [`alloc`] (the counting allocator), [`mutate`](mod@mutate) (RNG and mutator),
//! [`targets`].

mod alloc;
mod mutate;
mod targets;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::Result;
use clap::ValueEnum;

pub use alloc::CountingAlloc;
use alloc::{LIVE, PEAK};
use mutate::{Rng, mutate};
use targets::{
    CheckpointTarget, CifarTarget, IdxTarget, ImageTarget, MatTarget, NpyTarget, NpzTarget,
    SwbCostTarget, SwbTarget,
};

/// What to fuzz.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// `.swb` bytes, then the weight-shared model built from them.
    Swb,
    /// `.swb` bytes with range-coded indices: decode work within [`COST_PER_BYTE`] per byte.
    SwbCost,
    /// IDX image and label files, raw and gzip (MNIST, Fashion-MNIST).
    Idx,
    /// CIFAR-10 and CIFAR-100 binary files.
    Cifar,
    /// SVHN MATLAB files, plain and compressed.
    SvhnMat,
    /// `.npy` arrays (the GMM tool's input).
    Npy,
    /// `.npz` files (`--dataset npz:FILE`): the zip layer and the `.npy` arrays in it.
    Npz,
    /// PNG and JPEG images of class folders (`--dataset folder:DIR`) and ImageNet-style
    /// folders.
    Image,
    /// A model directory: `config.json`, the checkpoint's `state.json`, `model.bpk`,
    /// `optimizer.bpk`, loaded as `--resume` and `swbnn eval` load them.
    Checkpoint,
    /// Every target in turn.
    All,
}

impl Target {
    const EACH: [Target; 9] = [
        Target::Swb,
        Target::SwbCost,
        Target::Idx,
        Target::Cifar,
        Target::SvhnMat,
        Target::Npy,
        Target::Npz,
        Target::Image,
        Target::Checkpoint,
    ];

    fn name(self) -> &'static str {
        match self {
            Target::Swb => "swb",
            Target::SwbCost => "swb-cost",
            Target::Idx => "idx",
            Target::Cifar => "cifar",
            Target::SvhnMat => "svhn-mat",
            Target::Npy => "npy",
            Target::Npz => "npz",
            Target::Image => "image",
            Target::Checkpoint => "checkpoint",
            Target::All => "all",
        }
    }
}

/// Peak heap growth allowed for one execution: [`BOUND_FACTOR`] times the input's bytes plus
/// [`BOUND_SLACK`] (the model built from a valid `.swb` or checkpoint, buffers of the
/// decompressors and the file system).
pub const BOUND_FACTOR: usize = 16;
/// See [`BOUND_FACTOR`].
pub const BOUND_SLACK: usize = 8 << 20;

/// Decode work (`swshare::format::decode_work`) allowed per input byte by the decode-cost
/// target: the range coder's budget per byte, which also covers the plain and Huffman
/// indices (one unit per symbol, at least one bit each).
pub const COST_PER_BYTE: u64 = swshare::format::adaptive::WORK_PER_BYTE;

/// One target: its seeds, an optional checksum fix-up, and the code under test.
pub(crate) trait Fuzzee {
    /// Valid inputs, each with a role (which file it stands for).
    fn seeds(&self) -> &[Vec<u8>];
    /// Makes a mutated input pass the format's own checksum, if it has one.
    fn fix(&self, _role: usize, _input: &mut Vec<u8>) {}
    /// Runs the readers on `input` in `role`; `Ok(true)` when accepted, `Ok(false)` when
    /// refused with an error.
    fn run(&mut self, role: usize, input: &[u8]) -> Result<bool>;
    /// The work the last [`run`](Self::run) spent and the most it may spend on `input`, for
    /// targets that bound it.
    fn cost(&self, _input: &[u8]) -> Option<(u64, u64)> {
        None
    }
}

/// What one target's run measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// The target.
    pub target: &'static str,
    /// Executions.
    pub executions: u64,
    /// Inputs the readers accepted.
    pub accepted: u64,
    /// Panics, caught by the harness or inside a reader.
    pub panics: u64,
    /// Executions whose peak heap growth passed the bound.
    pub over_bound: u64,
    /// Largest peak heap growth of one execution, bytes.
    pub max_peak_bytes: usize,
    /// Largest `peak / input length` over executions with more than [`BOUND_SLACK`] of peak.
    pub max_peak_ratio: f64,
    /// Decode-cost target: executions whose decode work passed its bound (also counted in
    /// `over_bound`).
    pub over_cost: u64,
    /// Decode-cost target: largest decode work per input byte.
    pub max_work_per_byte: f64,
    /// Executions per second.
    pub per_second: f64,
    /// Seconds.
    pub seconds: f64,
    /// The first panic message, if any.
    pub first_panic: Option<String>,
}

static PANICS: AtomicUsize = AtomicUsize::new(0);
static FIRST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Fuzzes `target` for `iterations` executions from `seed`; inputs that panic or pass the
/// bound are saved under `save_dir`.
pub fn run(target: Target, iterations: u64, seed: u64, save_dir: &Path) -> Result<Vec<Report>> {
    let targets: Vec<Target> = match target {
        Target::All => Target::EACH.to_vec(),
        t => vec![t],
    };
    // Count every panic, caught or not, and keep the first message instead of printing them.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        PANICS.fetch_add(1, Ordering::Relaxed);
        let mut first = FIRST_PANIC.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some(info.to_string());
        }
    }));
    let result = targets
        .into_iter()
        .map(|t| fuzz_one(t, iterations, seed, save_dir))
        .collect();
    std::panic::set_hook(previous);
    result
}

fn fuzz_one(target: Target, iterations: u64, seed: u64, save_dir: &Path) -> Result<Report> {
    let work = tempfile::Builder::new()
        .prefix("swbnn-fuzz-")
        .tempdir_in(if Path::new("/dev/shm").is_dir() {
            Path::new("/dev/shm")
        } else {
            Path::new("/tmp")
        })
        .or_else(|_| tempfile::tempdir())?;
    let mut fuzzee: Box<dyn Fuzzee> = match target {
        Target::Swb => Box::new(SwbTarget::new()?),
        Target::SwbCost => Box::new(SwbCostTarget::new()?),
        Target::Idx => Box::new(IdxTarget::new(work.path())),
        Target::Cifar => Box::new(CifarTarget::new(work.path())),
        Target::SvhnMat => Box::new(MatTarget::new(work.path())),
        Target::Npy => Box::new(NpyTarget::new()?),
        Target::Npz => Box::new(NpzTarget::new(work.path())),
        Target::Image => Box::new(ImageTarget::new(work.path())?),
        Target::Checkpoint => Box::new(CheckpointTarget::new(work.path())?),
        Target::All => unreachable!("expanded by run"),
    };
    let seeds: Vec<Vec<u8>> = fuzzee.seeds().to_vec();
    // The seeds must pass, or the fuzzer would only ever test the first error path.
    for (role, s) in seeds.iter().enumerate() {
        anyhow::ensure!(
            fuzzee.run(role, s)?,
            "{}: seed {role} is refused",
            target.name()
        );
    }
    let panics_before = PANICS.load(Ordering::Relaxed);
    *FIRST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let mut rng = Rng::new(seed ^ (target as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    let mut report = Report {
        target: target.name(),
        executions: 0,
        accepted: 0,
        panics: 0,
        over_bound: 0,
        max_peak_bytes: 0,
        max_peak_ratio: 0.0,
        over_cost: 0,
        max_work_per_byte: 0.0,
        per_second: 0.0,
        seconds: 0.0,
        first_panic: None,
    };
    let started = Instant::now();
    for i in 0..iterations {
        let role = rng.below(seeds.len());
        let mut input = seeds[role].clone();
        mutate(&mut rng, &mut input, &seeds);
        if rng.chance(2) {
            fuzzee.fix(role, &mut input);
        }
        let before_panics = PANICS.load(Ordering::Relaxed);
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let outcome = catch_unwind(AssertUnwindSafe(|| fuzzee.run(role, &input)));
        let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
        report.executions += 1;
        let panicked = PANICS.load(Ordering::Relaxed) > before_panics || outcome.is_err();
        if matches!(outcome, Ok(Ok(true))) {
            report.accepted += 1;
        }
        if let Ok(Err(e)) = &outcome
            && e.downcast_ref::<HarnessError>().is_some()
        {
            return Err(anyhow::anyhow!("{}: harness failure: {e:#}", target.name()));
        }
        report.max_peak_bytes = report.max_peak_bytes.max(peak);
        if peak > BOUND_SLACK {
            let ratio = peak as f64 / input.len().max(1) as f64;
            report.max_peak_ratio = report.max_peak_ratio.max(ratio);
        }
        let over_memory = peak > BOUND_FACTOR * input.len() + BOUND_SLACK;
        let over_cost = match fuzzee.cost(&input) {
            Some((work, bound)) => {
                let per_byte = work as f64 / input.len().max(1) as f64;
                report.max_work_per_byte = report.max_work_per_byte.max(per_byte);
                work > bound
            }
            None => false,
        };
        if over_cost {
            report.over_cost += 1;
        }
        if over_memory || over_cost {
            report.over_bound += 1;
        }
        if panicked || over_memory || over_cost {
            let dir = save_dir.join(target.name());
            std::fs::create_dir_all(&dir)?;
            let kind = if panicked {
                "panic"
            } else if over_memory {
                "memory"
            } else {
                "cost"
            };
            std::fs::write(dir.join(format!("{kind}-{i}-role{role}.bin")), &input)?;
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    report.per_second = report.executions as f64 / report.seconds.max(1e-9);
    report.panics = (PANICS.load(Ordering::Relaxed) - panics_before) as u64;
    report.first_panic = FIRST_PANIC
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(report)
}

/// A failure of the harness itself (not of the code under test): stops the run.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct HarnessError(String);

pub(crate) fn harness<T, E: std::fmt::Display>(r: std::result::Result<T, E>) -> Result<T> {
    r.map_err(|e| HarnessError(e.to_string()).into())
}
