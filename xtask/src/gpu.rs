//! `cargo xtask build-cuda` and `cargo xtask gpu-kit`: the `cuda` backend built without
//! network access, and everything a GPU machine with PyTorch but no Rust needs to test and
//! measure us in one call.
//!
//! The offline route: cubecl-cuda 0.11.3 always depends on cubecl-llvm, whose build script
//! downloads LLVM 23. The `cuda-nvrtc` feature makes NVRTC (CUDA C++) compile every kernel,
//! so the LLVM compiler is never run, and `xtask/cuda-offline/cubecl-llvm` (a stand-in with
//! the few types cubecl-cuda names) replaces it through
//! `--config patch.crates-io.cubecl-llvm.path=...`. The patch changes `Cargo.lock` while cargo
//! runs; the file is put back afterwards. Builds go to `target/cuda-offline/`.
//!
//! The kit (`target/gpu-kit/`): `kit.tar.xz` (stripped binaries of xtask and of bnn-layers'
//! unit tests, which hold the GPU route's tests, with wgpu and CUDA; the CUDA headers NVRTC
//! includes; a Fashion-MNIST subset; the PyTorch peer) and `run.sh`, which runs the tests, the
//! benchmarks interleaved with PyTorch's and a short reproduction, and collects everything
//! under `$OUT`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

/// The stand-in for cubecl-llvm, relative to the repository root.
const STAND_IN: &str = "xtask/cuda-offline/cubecl-llvm";

/// What `run` on a GPU machine may carry in all; the kit must stay below it.
const KIT_LIMIT_BYTES: u64 = 64 << 20;

/// CUDA version cudarc's build script assumes when no `nvcc` says otherwise (CUDA 13.0: the
/// driver API it binds exists in every 13.x driver; older drivers need the matching value).
const DEFAULT_CUDA_VERSION: &str = "13000";

/// One cargo invocation on the offline CUDA route.
struct OfflineCargo<'a> {
    root: &'a Path,
    target_dir: PathBuf,
}

impl<'a> OfflineCargo<'a> {
    fn new(root: &'a Path) -> Self {
        OfflineCargo {
            root,
            target_dir: root.join("target/cuda-offline"),
        }
    }

    /// `cargo <args>` with the stand-in patched in and the CUDA version set; `Cargo.lock` is
    /// restored afterwards whatever happens. Cargo's messages go to our stderr when `show`.
    fn run(&self, args: &[&str], show: bool) -> Result<std::process::Output> {
        let lock = self.root.join("Cargo.lock");
        let saved = std::fs::read(&lock).with_context(|| format!("reading {}", lock.display()))?;
        let patch = format!(
            "patch.crates-io.cubecl-llvm.path={:?}",
            self.root.join(STAND_IN).display().to_string()
        );
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.current_dir(self.root)
            .args(args)
            .arg("--config")
            .arg(&patch)
            .env("CARGO_TARGET_DIR", &self.target_dir);
        if show {
            cmd.stderr(std::process::Stdio::inherit());
        }
        if std::env::var_os("CUDARC_CUDA_VERSION").is_none() && !has_nvcc() {
            cmd.env("CUDARC_CUDA_VERSION", DEFAULT_CUDA_VERSION);
        }
        let output = cmd.output();
        restore(&lock, &saved)?;
        output.with_context(|| format!("running cargo {}", args.join(" ")))
    }

    /// `cargo build`/`test --no-run` whose artifacts are returned as (target name, kind,
    /// executable path).
    fn build(&self, args: &[&str]) -> Result<Vec<(String, String, PathBuf)>> {
        let mut all = args.to_vec();
        all.push("--message-format=json-render-diagnostics");
        let out = self.run(&all, true)?;
        ensure!(
            out.status.success(),
            "cargo {} failed (its errors are above)",
            args.join(" ")
        );
        let mut found = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if msg["reason"] != "compiler-artifact" {
                continue;
            }
            if let Some(exe) = msg["executable"].as_str() {
                let name = msg["target"]["name"].as_str().unwrap_or("").to_string();
                let kind = msg["target"]["kind"][0].as_str().unwrap_or("").to_string();
                let test = msg["profile"]["test"].as_bool().unwrap_or(false);
                let kind = if test { format!("{kind}-test") } else { kind };
                found.push((name, kind, PathBuf::from(exe)));
            }
        }
        Ok(found)
    }

    /// Checks the route's promises: no `llvm-sys` in the graph, and `binary` links no LLVM.
    fn check(&self, features: &str, binary: &Path) -> Result<()> {
        let tree = self.run(
            &[
                "tree",
                "-p",
                "xtask",
                "--features",
                features,
                "-e",
                "all",
                "-i",
                "llvm-sys",
            ],
            false,
        )?;
        let stdout = String::from_utf8_lossy(&tree.stdout);
        let stderr = String::from_utf8_lossy(&tree.stderr);
        // `cargo tree -i` fails with "did not match any packages" for a crate not in the graph.
        let absent = if tree.status.success() {
            stdout.trim().is_empty()
        } else {
            ensure!(
                stderr.contains("did not match any packages"),
                "cargo tree failed: {stderr}"
            );
            true
        };
        ensure!(
            absent,
            "llvm-sys is still in the dependency graph:\n{stdout}"
        );
        let ldd = Command::new("ldd")
            .arg(binary)
            .output()
            .context("running ldd")?;
        let libs = String::from_utf8_lossy(&ldd.stdout);
        ensure!(
            !libs.to_lowercase().contains("llvm"),
            "{} links LLVM:\n{libs}",
            binary.display()
        );
        eprintln!(
            "checked: no llvm-sys in the graph, and {} links no LLVM",
            binary.display()
        );
        Ok(())
    }
}

fn has_nvcc() -> bool {
    Command::new("nvcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Puts `bytes` back at `path` (through the project's atomic write) if they changed.
fn restore(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(path).is_ok_and(|now| now == bytes) {
        return Ok(());
    }
    swshare::format::write_atomic(path, bytes)
        .with_context(|| format!("restoring {}", path.display()))
}

/// `cargo xtask build-cuda`: `swbnn` and `xtask` with the `cuda` backend (NVRTC) and, with
/// `wgpu`, the wgpu backend too; then the checks of [`OfflineCargo::check`].
pub fn build_cuda(root: &Path, release: bool, wgpu: bool) -> Result<()> {
    let cargo = OfflineCargo::new(root);
    let mut features = String::from("swbnn/cuda-nvrtc,xtask/cuda-nvrtc");
    if wgpu {
        features.push_str(",swbnn/wgpu,xtask/wgpu");
    }
    let mut args = vec![
        "build",
        "-p",
        "swbnn",
        "-p",
        "xtask",
        "--features",
        &features,
    ];
    if release {
        args.push("--release");
    }
    let artifacts = cargo.build(&args)?;
    let swbnn = artifacts
        .iter()
        .find(|(name, kind, _)| name == "swbnn" && kind == "bin")
        .map(|(_, _, p)| p.clone())
        .context("cargo built no swbnn binary")?;
    cargo.check(&features, &swbnn)?;
    println!("{}", swbnn.display());
    Ok(())
}

/// Where `gpu-kit` finds its inputs.
pub struct KitInputs {
    /// A folder holding `cuda_fp16.h` and `mma.h` (a CUDA toolkit's `include/`, or the
    /// `nvidia/cu13/include` of the nvidia-cuda-runtime, -crt and -cccl wheels).
    pub cuda_include: Option<PathBuf>,
    /// Fashion-MNIST's folder (found by the data locator when absent).
    pub data: Option<PathBuf>,
    /// Training images in the kit's Fashion-MNIST subset.
    pub train_images: usize,
    /// Test images in it.
    pub test_images: usize,
}

/// `cargo xtask gpu-kit`: builds the binaries, stages them with the headers, data and peer,
/// packs `target/gpu-kit/kit.tar.xz` and copies `run.sh` beside it.
pub fn gpu_kit(root: &Path, inputs: &KitInputs) -> Result<PathBuf> {
    let include = match &inputs.cuda_include {
        Some(dir) => Some(checked_include(dir)?),
        None => default_include(),
    };
    let locator = match &inputs.data {
        Some(d) => bnn_data::Locator::only(d),
        None => bnn_data::Locator::from_env(None),
    };
    let fashion = bnn_data::DatasetId::FashionMnist;
    let (train_dir, test_dir) = locator
        .locate(fashion, bnn_data::Split::Train)
        .and_then(|dir| {
            locator
                .locate(fashion, bnn_data::Split::Test)
                .map(|test| (dir, test))
        })
        .context("Fashion-MNIST for the kit's short reproduction (give its folder with --data)")?;
    let kit = root.join("target/gpu-kit");
    let stage = kit.join("stage");
    if stage.exists() {
        std::fs::remove_dir_all(&stage)?;
    }
    std::fs::create_dir_all(stage.join("bin"))?;

    let cargo = OfflineCargo::new(root);
    let features = "bnn-layers/wgpu,bnn-layers/cuda-nvrtc,xtask/wgpu,xtask/cuda-nvrtc";
    let artifacts = cargo.build(&[
        "test",
        "--no-run",
        "-p",
        "bnn-layers",
        "-p",
        "xtask",
        "--features",
        features,
    ])?;
    let pick = |name: &str, kind: &str| {
        artifacts
            .iter()
            .find(|(n, k, _)| n == name && k == kind)
            .map(|(_, _, p)| p.clone())
            .with_context(|| format!("cargo built no {kind} {name}"))
    };
    let xtask = pick("xtask", "bin")?;
    cargo.check(features, &xtask)?;
    strip_into(&xtask, &stage.join("bin/xtask"))?;
    strip_into(
        &pick("bnn_layers", "lib-test")?,
        &stage.join("bin/bnn-layers-lib-tests"),
    )?;
    // bnn-layers' integration tests (`tests/layers.rs`) stay out: with them the kit was
    // 69 MiB, over what a GPU call carries. The GPU route's own tests are in the lib tests.

    if let Some(include) = &include {
        copy_dir(include, &stage.join("cuda/include"))?;
    } else {
        eprintln!(
            "no CUDA headers given or found: run.sh will look for the GPU machine's own \
             (CUDA_PATH, /usr/local/cuda, PyTorch's nvidia wheels)"
        );
    }
    let fm = stage.join("data/fashion-mnist");
    std::fs::create_dir_all(&fm)?;
    for (dir, name, n) in [
        (&train_dir, "train-images-idx3-ubyte", inputs.train_images),
        (&train_dir, "train-labels-idx1-ubyte", inputs.train_images),
        (&test_dir, "t10k-images-idx3-ubyte", inputs.test_images),
        (&test_dir, "t10k-labels-idx1-ubyte", inputs.test_images),
    ] {
        idx_head(dir, name, n, &fm.join(format!("{name}.gz")))?;
    }
    std::fs::create_dir_all(stage.join("peers"))?;
    for peer in ["torch_gpu_bench.py", "torch_train_step.py"] {
        std::fs::copy(
            root.join("benches/peers").join(peer),
            stage.join("peers").join(peer),
        )
        .with_context(|| format!("copying the peer {peer}"))?;
    }

    let archive = kit.join("kit.tar.xz");
    let tmp = kit.join("kit.tar.xz.tmp");
    let status = Command::new("tar")
        .env("XZ_OPT", "-9 -T0")
        .arg("-cJf")
        .arg(&tmp)
        .arg("-C")
        .arg(&stage)
        .arg(".")
        .status()
        .context("running tar")?;
    ensure!(status.success(), "tar failed");
    std::fs::rename(&tmp, &archive)?;
    std::fs::copy(root.join("xtask/gpu-kit/run.sh"), kit.join("run.sh"))?;
    std::fs::remove_dir_all(&stage)?;
    let size = std::fs::metadata(&archive)?.len() + std::fs::metadata(kit.join("run.sh"))?.len();
    ensure!(
        size <= KIT_LIMIT_BYTES,
        "the kit is {:.1} MiB, over the {} MiB a GPU call carries",
        size as f64 / 1048576.0,
        KIT_LIMIT_BYTES >> 20
    );
    eprintln!(
        "kit: {} ({:.1} MiB); on the GPU machine: bash target/gpu-kit/run.sh",
        archive.display(),
        size as f64 / 1048576.0
    );
    Ok(kit)
}

fn checked_include(dir: &Path) -> Result<PathBuf> {
    for header in ["cuda_fp16.h", "mma.h"] {
        ensure!(
            dir.join(header).is_file(),
            "--cuda-include {}: no {header} there",
            dir.display()
        );
    }
    Ok(dir.to_path_buf())
}

fn default_include() -> Option<PathBuf> {
    let base = std::env::var_os("CUDA_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/local/cuda"));
    checked_include(&base.join("include")).ok()
}

/// `strip --strip-debug` of `from` into `to` (debug info is most of a binary's size).
fn strip_into(from: &Path, to: &Path) -> Result<()> {
    let status = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(to)
        .arg(from)
        .status()
        .context("running strip")?;
    ensure!(status.success(), "strip {} failed", from.display());
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// The first `n` records of the IDX file `name` (or `name.gz`) in `dir`, written gzipped to
/// `to` with its count set to `n`.
fn idx_head(dir: &Path, name: &str, n: usize, to: &Path) -> Result<()> {
    let plain = dir.join(name);
    let gz = dir.join(format!("{name}.gz"));
    let mut bytes = Vec::new();
    if gz.is_file() {
        flate2::read::MultiGzDecoder::new(std::fs::File::open(&gz)?)
            .read_to_end(&mut bytes)
            .with_context(|| format!("reading {}", gz.display()))?;
    } else {
        bytes = std::fs::read(&plain).with_context(|| format!("reading {}", plain.display()))?;
    }
    ensure!(bytes.len() >= 8, "{name}: not an IDX file");
    let dims = bytes[3] as usize;
    let header = 4 + 4 * dims;
    ensure!(
        dims >= 1 && bytes.len() >= header,
        "{name}: not an IDX file"
    );
    let dim = |i: usize| {
        u32::from_be_bytes(bytes[4 + 4 * i..8 + 4 * i].try_into().expect("4 bytes")) as usize
    };
    let count = dim(0);
    if n > count {
        bail!("{name} holds {count} records, the kit asked for {n}");
    }
    let end = (1..dims)
        .map(dim)
        .try_fold(n, |acc, d| acc.checked_mul(d))
        .and_then(|b| b.checked_add(header))
        .filter(|&end| end <= bytes.len())
        .with_context(|| format!("{name}: shorter than its first {n} records"))?;
    let mut out = bytes[..header].to_vec();
    out[4..8].copy_from_slice(&(n as u32).to_be_bytes());
    out.extend_from_slice(&bytes[header..end]);
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(&out)?;
    std::fs::write(to, enc.finish()?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gzipped IDX file of `n` images of 2x3 bytes, image i filled with i.
    fn write_images(dir: &Path, name: &str, n: u8) {
        let mut bytes = vec![0, 0, 8, 3];
        for d in [u32::from(n), 2, 3] {
            bytes.extend_from_slice(&d.to_be_bytes());
        }
        for i in 0..n {
            bytes.extend_from_slice(&[i; 6]);
        }
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&bytes).unwrap();
        std::fs::write(dir.join(format!("{name}.gz")), enc.finish().unwrap()).unwrap();
    }

    #[test]
    fn the_kit_subset_is_the_first_records_of_a_valid_idx_file() {
        let dir = tempfile::tempdir().unwrap();
        write_images(dir.path(), "train-images-idx3-ubyte", 5);
        let to = dir.path().join("head.gz");
        idx_head(dir.path(), "train-images-idx3-ubyte", 3, &to).unwrap();
        let head = bnn_data::read_idx(&to).unwrap();
        assert_eq!(head.dims, vec![3, 2, 3]);
        assert_eq!(head.data, [[0u8; 6], [1; 6], [2; 6]].concat());
        let err = idx_head(dir.path(), "train-images-idx3-ubyte", 6, &to).unwrap_err();
        assert!(err.to_string().contains("holds 5 records"), "{err}");
        // A file cut short: its header promises more records than it holds.
        let mut bytes = vec![0, 0, 8, 3];
        for d in [9u32, 2, 3] {
            bytes.extend_from_slice(&d.to_be_bytes());
        }
        bytes.extend_from_slice(&[7; 6 * 4]);
        std::fs::write(dir.path().join("short"), &bytes).unwrap();
        let err = idx_head(dir.path(), "short", 5, &to).unwrap_err();
        assert!(err.to_string().contains("shorter than"), "{err}");
    }
}
