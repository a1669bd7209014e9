//! `cargo xtask wheel`: the Python package as a wheel that `pip install` takes on other Linux
//! x86-64 machines without a Rust toolchain.
//!
//! maturin builds it and zig links it against glibc 2.17's symbol versions (manylinux2014),
//! so the wheel runs on any distribution with glibc >= 2.17 whatever glibc the build machine
//! has. maturin's own audit checks the tag against the symbols the extension links; a wheel
//! that needs a newer glibc is refused, not mislabelled.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The manylinux tag built (PEP 599's name for glibc 2.17, x86-64).
pub const MANYLINUX: &str = "manylinux2014";

/// What `cargo xtask wheel` was asked for.
pub struct WheelRequest {
    /// The Cargo profile (`release` for users, `dev` for a quick build).
    pub profile: String,
    /// Link with the system's linker for this machine's glibc (no zig, no cross-compilation,
    /// so the host build's dependencies are reused), tagged by maturin's audit of the symbols.
    pub local: bool,
    /// Where the wheel goes.
    pub out: PathBuf,
}

/// Builds the wheel and returns its path.
pub fn build(root: &Path, req: &WheelRequest) -> Result<PathBuf> {
    let maturin = find_tool("maturin").context(
        "maturin was not found on PATH: pip install maturin ziglang (maturin builds the \
         wheel, zig links it for an old glibc)",
    )?;
    // `cargo rustc --profile test`, which maturin runs, builds a test harness, not a library.
    if req.profile == "test" {
        bail!("--profile test builds a test harness, not an extension: use dev or release");
    }
    std::fs::create_dir_all(&req.out)
        .with_context(|| format!("creating the output folder {}", req.out.display()))?;
    let started = std::time::SystemTime::now();
    let link: &[&str] = if req.local {
        &[]
    } else {
        &["--zig", "--compatibility", MANYLINUX]
    };
    let status = Command::new(&maturin)
        .current_dir(root)
        .args(["build", "--manifest-path", "python/Cargo.toml", "--profile"])
        .arg(&req.profile)
        .args(link)
        .args(["--auditwheel", "check"])
        .arg("--out")
        .arg(&req.out)
        .status()
        .with_context(|| format!("running {}", maturin.display()))?;
    if !status.success() {
        bail!(
            "maturin build failed ({status}); if it says zig is missing: pip install ziglang \
             into the environment maturin runs from"
        );
    }
    // maturin names the file after the package, version and tags; the one it just wrote is
    // the folder's newest.
    let wheel = match newest(&req.out)? {
        Some((modified, w)) if modified >= started => w,
        _ => bail!(
            "maturin reported success but wrote no wheel into {}",
            req.out.display()
        ),
    };
    let name = wheel
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A local wheel carries this machine's tag; a wheel to share, manylinux2014's.
    let tagged = name.contains("manylinux_2_17") || name.contains(MANYLINUX);
    if !(req.local || tagged) {
        bail!("{name} is not tagged {MANYLINUX} (manylinux_2_17)");
    }
    Ok(wheel)
}

/// `name` on `PATH`.
fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The `.whl` files in `dir`.
fn wheels_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = entry?.path();
        if p.extension().is_some_and(|e| e == "whl") {
            out.push(p);
        }
    }
    Ok(out)
}

/// The most recently modified wheel in `dir`.
fn newest(dir: &Path) -> Result<Option<(std::time::SystemTime, PathBuf)>> {
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for w in wheels_in(dir)? {
        let t = std::fs::metadata(&w)
            .and_then(|m| m.modified())
            .with_context(|| format!("reading {}", w.display()))?;
        if best.as_ref().is_none_or(|(bt, _)| t > *bt) {
            best = Some((t, w));
        }
    }
    Ok(best)
}
