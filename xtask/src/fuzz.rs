//! `cargo xtask fuzz <target> --iterations N`: mutation fuzzing, on stable Rust, of every reader
//! of untrusted bytes: the `.swb` reader plus the model built from it, the IDX, CIFAR and
//! SVHN-MAT readers, the `.npy` reader, and a model directory's `config.json` and checkpoint.
//!
//! Each iteration takes one of the target's valid seed inputs, applies one to four mutations
//! (bit flips, interesting bytes, truncation, splices from other seeds, inserted and deleted
//! ranges, length fields blown up in every width and byte order including bincode's variable
//! integers, numbers in JSON text replaced by extreme ones) and, for formats with checksums,
//! recomputes the checksum half the time so the mutation reaches the decoder behind it. The
//! target runs under `catch_unwind` and a counting allocator: a panic anywhere (even one a
//! reader catches itself) is counted and its input saved, and the peak heap growth of every
//! execution is compared with the target's documented bound.

use std::alloc::{GlobalAlloc, Layout};
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
use bnn_models::{Arch, Kind, ModelConfig};
use bnn_train::{Checkpointer, Silent, TrainConfig, load_model, train};
use burn::prelude::*;
use clap::ValueEnum;
use swshare::format::{SaveOptions, SharedModelData};
use swshare::{OutlierCause, WeightFate};

/// xtask's global allocator: mimalloc, with the live and peak heap bytes counted.
pub struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { mimalloc::MiMalloc.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grow = new_size - layout.size();
                let now = LIVE.fetch_add(grow, Ordering::Relaxed) + grow;
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

/// What to fuzz.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// `.swb` bytes, then the weight-shared model built from them.
    Swb,
    /// IDX image and label files, raw and gzip (MNIST, Fashion-MNIST).
    Idx,
    /// CIFAR-10 and CIFAR-100 binary files.
    Cifar,
    /// SVHN MATLAB files, plain and compressed.
    SvhnMat,
    /// `.npy` arrays (the GMM tool's input).
    Npy,
    /// A model directory: `config.json`, the checkpoint's `state.json`, `model.bpk`,
    /// `optimizer.bpk`, loaded as `--resume` and `swbnn eval` load them.
    Checkpoint,
    /// Every target in turn.
    All,
}

impl Target {
    const EACH: [Target; 6] = [
        Target::Swb,
        Target::Idx,
        Target::Cifar,
        Target::SvhnMat,
        Target::Npy,
        Target::Checkpoint,
    ];

    fn name(self) -> &'static str {
        match self {
            Target::Swb => "swb",
            Target::Idx => "idx",
            Target::Cifar => "cifar",
            Target::SvhnMat => "svhn-mat",
            Target::Npy => "npy",
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

/// xorshift64*: small, seedable, fast.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

const INTERESTING: [u64; 14] = [
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 32,
    1 << 40,
    i64::MAX as u64,
    u64::MAX,
];

/// Applies one to four mutations to `input`; `pool` gives splice material.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>, pool: &[Vec<u8>]) {
    for _ in 0..1 + rng.below(4) {
        let len = input.len();
        match rng.below(10) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = [0u8, 1, 0x7f, 0x80, 0xff, 0xfb, 0xfc, 0xfd][rng.below(8)];
            }
            2 => input.truncate(rng.below(len + 1)),
            3 => {
                // Splice: a chunk of another seed (or this input) over a random position.
                let src = &pool[rng.below(pool.len())];
                if !src.is_empty() {
                    let from = rng.below(src.len());
                    let n = 1 + rng.below((src.len() - from).min(256));
                    let at = rng.below(len + 1);
                    let chunk = src[from..from + n].to_vec();
                    if rng.chance(2) {
                        input.splice(at..at, chunk);
                    } else {
                        let end = (at + n).min(len);
                        input.splice(at..end, chunk);
                    }
                }
            }
            4 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(32);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                input.splice(at..at, bytes);
            }
            5 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(64));
                input.drain(at..at + n);
            }
            6 if len > 0 => {
                // A length field blown up: 2, 4 or 8 bytes, either byte order.
                let value = INTERESTING[rng.below(INTERESTING.len())]
                    .wrapping_add(rng.below(3) as u64)
                    .wrapping_sub(1);
                let width = [2usize, 4, 8][rng.below(3)];
                let bytes = if rng.chance(2) {
                    value.to_le_bytes()[..width].to_vec()
                } else {
                    value.to_be_bytes()[8 - width..].to_vec()
                };
                let at = rng.below(len);
                let end = (at + width).min(len);
                input.splice(at..end, bytes);
            }
            7 if len > 0 => {
                // bincode's variable integer: 251 + u16, 252 + u32, 253 + u64.
                let value = INTERESTING[rng.below(INTERESTING.len())];
                let mut bytes = vec![253u8];
                bytes.extend_from_slice(&value.to_le_bytes());
                let at = rng.below(len);
                let end = (at + 1).min(len);
                input.splice(at..end, bytes);
            }
            8 if len > 0 => {
                // Repeat a range (makes lengths and contents disagree).
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(128));
                let chunk = input[at..at + n].to_vec();
                input.splice(at..at, chunk);
            }
            9 => json_number(rng, input),
            _ => {}
        }
    }
}

/// Replaces one number of JSON text by an extreme one (a no-op on other bytes).
fn json_number(rng: &mut Rng, input: &mut Vec<u8>) {
    let starts: Vec<usize> = (0..input.len())
        .filter(|&i| input[i].is_ascii_digit() && (i == 0 || !input[i - 1].is_ascii_digit()))
        .collect();
    if starts.is_empty() {
        return;
    }
    let at = starts[rng.below(starts.len())];
    let end = (at..input.len())
        .find(|&i| !(input[i].is_ascii_digit() || matches!(input[i], b'.' | b'e' | b'-')))
        .unwrap_or(input.len());
    let replacement = [
        "0",
        "-1",
        "4294967296",
        "18446744073709551615",
        "1e308",
        "1e999",
        "-0",
        "65535",
        "1000000000",
        "0.5",
    ][rng.below(10)];
    input.splice(at..end, replacement.bytes());
}

/// One target: its seeds, an optional checksum fix-up, and the code under test.
trait Fuzzee {
    /// Valid inputs, each with a role (which file it stands for).
    fn seeds(&self) -> &[Vec<u8>];
    /// Makes a mutated input pass the format's own checksum, if it has one.
    fn fix(&self, _role: usize, _input: &mut Vec<u8>) {}
    /// Runs the readers on `input` in `role`; `Ok(true)` when accepted, `Ok(false)` when
    /// refused with an error.
    fn run(&mut self, role: usize, input: &[u8]) -> Result<bool>;
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
        Target::Idx => Box::new(IdxTarget::new(work.path())),
        Target::Cifar => Box::new(CifarTarget::new(work.path())),
        Target::SvhnMat => Box::new(MatTarget::new(work.path())),
        Target::Npy => Box::new(NpyTarget::new()?),
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
        let over = peak > BOUND_FACTOR * input.len() + BOUND_SLACK;
        if over {
            report.over_bound += 1;
        }
        if panicked || over {
            let dir = save_dir.join(target.name());
            std::fs::create_dir_all(&dir)?;
            let kind = if panicked { "panic" } else { "memory" };
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
struct HarnessError(String);

fn harness<T, E: std::fmt::Display>(r: std::result::Result<T, E>) -> Result<T> {
    r.map_err(|e| HarnessError(e.to_string()).into())
}

// ---- .swb -------------------------------------------------------------------------------

/// Roles 0 to 3 are whole files (one per [`SaveOptions`]); role 4 is the architecture JSON
/// alone, put into an otherwise valid file, so architectures reach the model builder.
struct SwbTarget {
    seeds: Vec<Vec<u8>>,
    data: SharedModelData,
    device: Device,
}

/// A tiny shared MLP file with every fate: shared, ellipse and outlier weights.
fn swb_seed(device: &Device) -> Result<SharedModelData> {
    let config =
        ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 4, 1, 4).with_mlp_hidden(vec![6]);
    let mut data = swshare::burn_edges::uniform_swb(&config, device)?;
    let mut arch: serde_json::Value = serde_json::from_str(&data.arch)?;
    arch["codebook_len"] = 3.into();
    data.arch = arch.to_string();
    data.codebook_mu = vec![-0.1, 0.0, 0.1];
    data.codebook_rho = vec![-5.0, -4.0, -3.0];
    let causes = [
        OutlierCause::MeanThreshold,
        OutlierCause::Gradient,
        OutlierCause::SmallCluster,
    ];
    let mut n_ellipse = 0;
    for (i, fate) in data.fates.iter_mut().enumerate() {
        *fate = if i % 7 == 3 {
            let c = causes[i % 3];
            data.outlier_mu.push(0.01 * i as f32);
            data.outlier_rho.push(-4.0);
            data.outlier_causes.push(c);
            WeightFate::Outlier(c)
        } else if i % 11 == 5 {
            data.ellipses.push(swshare::format::EllipseEntry {
                components: vec![0, 2],
                alphas: vec![0.25, 0.75],
            });
            n_ellipse += 1;
            WeightFate::Ellipse(n_ellipse - 1)
        } else {
            WeightFate::Shared((i % 3) as u32)
        };
    }
    for t in &mut data.unshared {
        for (j, v) in t.data.iter_mut().enumerate() {
            *v = 0.01 * j as f32 - 3.0 * (t.path.ends_with("rho") as u8 as f32);
        }
    }
    Ok(data)
}

impl SwbTarget {
    fn new() -> Result<Self> {
        let device = bnn_layers::device_by_name("flex")?;
        let data = swb_seed(&device)?;
        let mut seeds: Vec<Vec<u8>> = SaveOptions::ALL
            .iter()
            .map(|o| swshare::format::to_bytes(&data, o))
            .collect::<Result<_, _>>()?;
        seeds.push(data.arch.clone().into_bytes());
        Ok(Self {
            seeds,
            data,
            device,
        })
    }
}

impl Fuzzee for SwbTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn fix(&self, role: usize, input: &mut Vec<u8>) {
        if role == 4 {
            return;
        }
        // Header: 7 magic, 2 version, 1 kind, 8 payload length; CRC-32 last.
        let header = swshare::format::HEADER_LEN;
        let crc_len = swshare::format::CHECKSUM_LEN;
        if input.len() < header + crc_len {
            return;
        }
        let payload = (input.len() - header - crc_len) as u64;
        input[header - 8..header].copy_from_slice(&payload.to_le_bytes());
        let body = input.len() - crc_len;
        let crc = crc32fast::hash(&input[..body]);
        input[body..].copy_from_slice(&crc.to_le_bytes());
    }

    fn run(&mut self, role: usize, input: &[u8]) -> Result<bool> {
        let bytes;
        let input = if role == 4 {
            let Ok(arch) = std::str::from_utf8(input) else {
                return Ok(false);
            };
            let data = SharedModelData {
                arch: arch.to_string(),
                ..self.data.clone()
            };
            bytes = harness(swshare::format::to_bytes(&data, &SaveOptions::default()))?;
            &bytes[..]
        } else {
            input
        };
        let Ok(data) = swshare::format::from_bytes(input) else {
            return Ok(false);
        };
        Ok(swshare::burn_edges::from_swb(&data, &self.device).is_ok())
    }
}

// ---- IDX --------------------------------------------------------------------------------

struct IdxTarget {
    seeds: Vec<Vec<u8>>,
    dir: PathBuf,
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

impl IdxTarget {
    fn new(dir: &Path) -> Self {
        let mut images = 0x0000_0803u32.to_be_bytes().to_vec();
        for d in [3u32, 5, 5] {
            images.extend_from_slice(&d.to_be_bytes());
        }
        images.extend((0..75).map(|i| (i * 7 % 256) as u8));
        let mut labels = 0x0000_0801u32.to_be_bytes().to_vec();
        labels.extend_from_slice(&3u32.to_be_bytes());
        labels.extend([1, 9, 0]);
        // Roles: raw images, raw labels, gzip images, gzip labels.
        let seeds = vec![images.clone(), labels.clone(), gzip(&images), gzip(&labels)];
        Self {
            seeds,
            dir: dir.to_path_buf(),
        }
    }
}

impl Fuzzee for IdxTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, role: usize, input: &[u8]) -> Result<bool> {
        let (images, labels) = (self.dir.join("images"), self.dir.join("labels"));
        let is_images = role.is_multiple_of(2);
        harness(std::fs::write(
            if is_images { &images } else { &labels },
            input,
        ))?;
        harness(std::fs::write(
            if is_images { &labels } else { &images },
            &self.seeds[if is_images { 1 } else { 0 }],
        ))?;
        Ok(bnn_data::load_idx_pair(&images, &labels, 10).is_ok())
    }
}

// ---- CIFAR ------------------------------------------------------------------------------

struct CifarTarget {
    seeds: Vec<Vec<u8>>,
    path: PathBuf,
}

impl CifarTarget {
    fn new(dir: &Path) -> Self {
        let record = |labels: &[u8], i: usize| {
            let mut r = labels.to_vec();
            r.extend((0..bnn_data::CIFAR_IMAGE_BYTES).map(|k| ((i * 31 + k) % 256) as u8));
            r
        };
        let c10: Vec<u8> = (0..3).flat_map(|i| record(&[i as u8 * 3], i)).collect();
        let c100: Vec<u8> = (0..2)
            .flat_map(|i| record(&[i as u8 * 7, 40 + i as u8], i))
            .collect();
        Self {
            seeds: vec![c10, c100],
            path: dir.join("batch.bin"),
        }
    }
}

impl Fuzzee for CifarTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, role: usize, input: &[u8]) -> Result<bool> {
        harness(std::fs::write(&self.path, input))?;
        let (mut pixels, mut labels) = (Vec::new(), Vec::new());
        let (label_bytes, at, classes) = if role == 0 { (1, 0, 10) } else { (2, 1, 100) };
        Ok(bnn_data::read_cifar_file(
            &self.path,
            label_bytes,
            at,
            classes,
            &mut pixels,
            &mut labels,
        )
        .is_ok())
    }
}

// ---- SVHN MAT ---------------------------------------------------------------------------

struct MatTarget {
    seeds: Vec<Vec<u8>>,
    path: PathBuf,
}

fn mat_element(ty: u32, data: &[u8]) -> Vec<u8> {
    let mut v = ty.to_le_bytes().to_vec();
    v.extend((data.len() as u32).to_le_bytes());
    v.extend_from_slice(data);
    while !v.len().is_multiple_of(8) {
        v.push(0);
    }
    v
}

fn mat_matrix(name: &str, class: u8, dims: &[u32], storage: u32, data: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut flags = u32::from(class).to_le_bytes().to_vec();
    flags.extend([0u8; 4]);
    body.extend(mat_element(6, &flags));
    let dims: Vec<u8> = dims
        .iter()
        .flat_map(|d| (*d as i32).to_le_bytes())
        .collect();
    body.extend(mat_element(5, &dims));
    let mut small = (((name.len() as u32) << 16) | 1).to_le_bytes().to_vec();
    let mut padded = name.as_bytes().to_vec();
    padded.resize(4, 0);
    small.extend(padded);
    body.extend(small);
    body.extend(mat_element(storage, data));
    mat_element(14, &body)
}

fn mat_file(elements: &[Vec<u8>]) -> Vec<u8> {
    let mut header = b"MATLAB 5.0 MAT-file, written by cargo xtask fuzz".to_vec();
    header.resize(116, b' ');
    header.extend([0u8; 8]);
    header.extend(0x0100u16.to_le_bytes());
    header.extend(b"IM");
    for e in elements {
        header.extend(e);
    }
    header
}

fn mat_compressed(element: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(element).expect("writing to memory");
    let z = enc.finish().expect("writing to memory");
    let mut v = 15u32.to_le_bytes().to_vec();
    v.extend((z.len() as u32).to_le_bytes());
    v.extend(z);
    v
}

impl MatTarget {
    fn new(dir: &Path) -> Self {
        let n = 3;
        let x: Vec<u8> = (0..4 * 4 * 3 * n).map(|i| (i * 13 % 256) as u8).collect();
        let x = mat_matrix("X", 9, &[4, 4, 3, n as u32], 2, &x);
        let y_u8 = mat_matrix("y", 6, &[n as u32, 1], 2, &[1, 10, 5]);
        let y_f64: Vec<u8> = [1.0f64, 10.0, 5.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let y_f64 = mat_matrix("y", 6, &[n as u32, 1], 9, &y_f64);
        let seeds = vec![
            mat_file(&[x.clone(), y_f64.clone()]),
            mat_file(&[mat_compressed(&x), mat_compressed(&y_u8)]),
        ];
        Self {
            seeds,
            path: dir.join("test_32x32.mat"),
        }
    }
}

impl Fuzzee for MatTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, _role: usize, input: &[u8]) -> Result<bool> {
        harness(std::fs::write(&self.path, input))?;
        Ok(bnn_data::load_svhn_mat(&self.path).is_ok())
    }
}

// ---- .npy -------------------------------------------------------------------------------

struct NpyTarget {
    seeds: Vec<Vec<u8>>,
}

impl NpyTarget {
    fn new() -> Result<Self> {
        let data: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
        let seeds = [&[6usize, 2][..], &[12], &[2, 3, 2]]
            .iter()
            .map(|shape| gmm_minibatch::npy::encode_f32(shape, &data))
            .collect::<Result<_, _>>()?;
        Ok(Self { seeds })
    }
}

impl Fuzzee for NpyTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, _role: usize, input: &[u8]) -> Result<bool> {
        Ok(gmm_minibatch::npy::parse_f32(input).is_ok())
    }
}

// ---- model directory and checkpoint -----------------------------------------------------

/// The files of a checkpointed model directory, in role order.
const CHECKPOINT_FILES: [&str; 5] = [
    "config.json",
    "state.json",
    "checkpoints/epoch-1/model.bpk",
    "checkpoints/epoch-1/optimizer.bpk",
    "model.bpk",
];

struct CheckpointTarget {
    seeds: Vec<Vec<u8>>,
    work: PathBuf,
    loader: DataLoader,
    train_config: TrainConfig,
    device: Device,
}

fn tiny_loader() -> Result<DataLoader> {
    let pixels: Vec<u8> = (0..32 * 16).map(|i| ((i * 37) % 251) as u8).collect();
    let labels: Vec<u32> = (0..32).map(|i| i % 4).collect();
    let data = InMemoryDataset::new(pixels, labels, (1, 4, 4), 4)?;
    let config = LoaderConfig {
        batch_size: 16,
        shuffle: true,
        drop_last: false,
        seed: 0,
        workers: 0,
        prefetch: 1,
    };
    Ok(DataLoader::new(data, Compose::new(), config)?)
}

impl CheckpointTarget {
    fn new(dir: &Path) -> Result<Self> {
        let device = bnn_layers::device_by_name("flex")?.autodiff();
        let seed_dir = dir.join("seed");
        let config =
            ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 4, 1, 4).with_mlp_hidden(vec![6]);
        let mut train_config = TrainConfig::bayes_by_backprop(1);
        train_config.batch_size = 16;
        let loader = tiny_loader()?;
        {
            let ck = Checkpointer::new(&seed_dir)?;
            std::fs::write(
                seed_dir.join("config.json"),
                serde_json::to_vec_pretty(&config)?,
            )?;
            train(
                config.init(&device)?,
                &loader,
                &train_config,
                Some(&ck),
                &mut Silent,
            )?;
        }
        let seeds = CHECKPOINT_FILES
            .iter()
            .map(|f| std::fs::read(seed_dir.join(f)).with_context(|| f.to_string()))
            .collect::<Result<_>>()?;
        Ok(Self {
            seeds,
            work: dir.join("work"),
            loader,
            train_config,
            device,
        })
    }

    /// The CRC-32 that `state.json` records for the epoch file of `role`, replaced by the
    /// mutated file's, so the mutation reaches burn's decoders.
    fn state_with_crc(&self, role: usize, input: &[u8]) -> Option<Vec<u8>> {
        let key = match role {
            2 => "model_crc32",
            3 => "optimizer_crc32",
            _ => return None,
        };
        let mut state: serde_json::Value = serde_json::from_slice(&self.seeds[1]).ok()?;
        state["commit"][key] = crc32fast::hash(input).into();
        serde_json::to_vec(&state).ok()
    }
}

impl Fuzzee for CheckpointTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn fix(&self, role: usize, input: &mut Vec<u8>) {
        // Marks the input: the state written in `run` then records its checksum.
        if role == 2 || role == 3 {
            input.push(0xC5);
            input.push(0x5C);
        }
    }

    fn run(&mut self, role: usize, input: &[u8]) -> Result<bool> {
        let (input, fixed) = match input {
            [rest @ .., 0xC5, 0x5C] if role == 2 || role == 3 => (rest, true),
            other => (other, false),
        };
        if self.work.exists() {
            harness(std::fs::remove_dir_all(&self.work))?;
        }
        harness(std::fs::create_dir_all(
            self.work.join("checkpoints/epoch-1"),
        ))?;
        for (r, name) in CHECKPOINT_FILES.iter().enumerate() {
            let bytes: &[u8] = if r == role { input } else { &self.seeds[r] };
            harness(std::fs::write(self.work.join(name), bytes))?;
        }
        if fixed && let Some(state) = self.state_with_crc(role, input) {
            harness(std::fs::write(self.work.join("state.json"), state))?;
        }
        // As `swbnn train --resume` and `swbnn eval DIR` read a directory.
        let Ok(text) = std::fs::read_to_string(self.work.join("config.json")) else {
            return Ok(false);
        };
        let Ok(config) = serde_json::from_str::<ModelConfig>(&text) else {
            return Ok(false);
        };
        let Ok(model) = config.init(&self.device) else {
            return Ok(false);
        };
        let evaluated = load_model(&self.work.join("model.bpk"), model.clone()).is_ok();
        let Ok(ck) = Checkpointer::new(&self.work) else {
            return Ok(false);
        };
        let resumed = train(
            model,
            &self.loader,
            &self.train_config,
            Some(&ck),
            &mut Silent,
        )
        .is_ok();
        Ok(evaluated && resumed)
    }
}
