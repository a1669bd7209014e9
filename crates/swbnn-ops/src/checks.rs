//! Checks of a command's arguments that run before any work starts: output paths that can be
//! written, and `--resume` targets that hold something to resume. A command that would fail
//! at its end (after hours of training) fails at its start instead, naming the flag and path.
//!
//! Outputs are replaced by a temporary file and a rename, so the path a command writes must
//! be the one the user means: [`output_target`] resolves symbolic links to the file they name
//! (the temporary then lies beside that file), refuses special files (a FIFO or a device would
//! be replaced by a regular file), files the user may not write, and any of the command's own
//! inputs, compared by device and inode, not by name. The writers keep the permissions and the
//! owner of a file they replace.

use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use bnn_train::Checkpointer;

use crate::Error;
use crate::run_record::SETUP_FILE;

/// The directory a command writes `path` into (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Whether files can be created in the directory `dir`: one unnamed temporary file is made
/// there and dropped (permission bits alone do not tell: a read-only mount or `/proc`).
fn can_create_in(flag: &str, path: &Path, dir: &Path) -> Result<(), Error> {
    tempfile::tempfile_in(dir).map(drop).map_err(|e| {
        Error::Usage(format!(
            "{flag} {}: cannot write in {} ({e})",
            path.display(),
            dir.display()
        ))
    })
}

/// An output file the command will write: not a directory, in an existing directory where
/// files can be created.
pub fn output_file(flag: &str, path: &Path) -> Result<(), Error> {
    if path.is_dir() {
        return Err(Error::Usage(format!(
            "{flag} {} is a directory; give a file name",
            path.display()
        )));
    }
    let dir = parent(path);
    if !dir.is_dir() {
        let what = if dir.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        return Err(Error::Usage(format!(
            "{flag} {}: {} {what}",
            path.display(),
            dir.display()
        )));
    }
    can_create_in(flag, path, dir)
}

/// An output directory the command creates if missing: an existing directory where files can
/// be created, or a path whose nearest existing ancestor is such a directory; never a system
/// directory or the home directory itself.
pub fn output_dir(flag: &str, path: &Path) -> Result<(), Error> {
    not_system_dir(flag, path)?;
    let mut existing = path;
    while !existing.exists() {
        let up = parent(existing);
        // `.` of a removed working directory: nothing above it to try.
        if up == existing {
            break;
        }
        existing = up;
    }
    if !existing.is_dir() {
        return Err(Error::Usage(format!(
            "{flag} {}: {} is not a directory",
            path.display(),
            existing.display()
        )));
    }
    can_create_in(flag, path, existing)
}

/// Symbolic links followed before a path is refused as a loop (Linux's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// `path` with every symbolic link at its end followed: the file a write to `path` means,
/// which need not exist yet (a dangling link names the file it would create).
pub fn resolve_links(flag: &str, path: &Path) -> Result<PathBuf, Error> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&current).map_err(|e| {
                    Error::Usage(format!("{flag} {}: reading the link: {e}", path.display()))
                })?;
                current = parent(&current).join(target);
            }
            _ => return Ok(current),
        }
    }
    Err(Error::Usage(format!(
        "{flag} {}: more than {MAX_LINKS} symbolic links (a loop?)",
        path.display()
    )))
}

/// What a file that is not a regular one is, for messages.
fn special_kind(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// `(device, inode)`: the identity of a file whatever its name.
fn identity(meta: &Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// Whether the existing file `target` is `input` or, for an input directory, lies in it or is
/// a hard link of one of its files.
fn is_input(target: &Path, target_meta: &Metadata, input: &Path) -> bool {
    let Ok(input_meta) = std::fs::metadata(input) else {
        return false;
    };
    if identity(&input_meta) == identity(target_meta) {
        return true;
    }
    if !input_meta.is_dir() {
        return false;
    }
    let inside = match (target.canonicalize(), input.canonicalize()) {
        (Ok(t), Ok(i)) => t.starts_with(i),
        _ => false,
    };
    inside
        || std::fs::read_dir(input).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                e.metadata()
                    .is_ok_and(|m| identity(&m) == identity(target_meta))
            })
        })
}

/// The file a command writes for `path` (`--out`, or the model `calibrate` stores into):
/// symbolic links followed ([`resolve_links`]). Refused: a directory or special file (a FIFO,
/// a device, a socket); an existing file unless `force` is `Some(true)` (`None`: the command
/// has no `--force`, and never replaces a file); one the user may not write; one
/// of `inputs` (the same file by device and inode, or a file of an input directory); a file in
/// a directory where nothing can be created. Every check runs before any work starts.
pub fn output_target(
    flag: &str,
    path: &Path,
    force: Option<bool>,
    inputs: &[&Path],
) -> Result<PathBuf, Error> {
    let target = resolve_links(flag, path)?;
    let shown = || {
        if target == path {
            path.display().to_string()
        } else {
            format!("{} (a link to {})", path.display(), target.display())
        }
    };
    let meta = match std::fs::metadata(&target) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::Usage(format!("{flag} {}: {e}", shown()))),
    };
    if let Some(meta) = &meta {
        if let Some(kind) = special_kind(meta) {
            let advice = if meta.is_dir() {
                "give a file name"
            } else {
                "it would be replaced by a regular file; give a regular file"
            };
            return Err(Error::Usage(format!(
                "{flag} {} is {kind}; {advice}",
                shown()
            )));
        }
        if let Some(input) = inputs.iter().find(|i| is_input(&target, meta, i)) {
            return Err(Error::Usage(format!(
                "{flag} {} is {}, an input of this command; it is never replaced: give another \
                 file",
                shown(),
                if std::fs::metadata(input).is_ok_and(|m| m.is_dir()) {
                    format!("a file of {}", input.display())
                } else {
                    format!("the same file as {}", input.display())
                }
            )));
        }
        match force {
            Some(true) => {}
            Some(false) => {
                return Err(Error::Usage(format!(
                    "{flag} {} already exists; pass --force (force=True in Python) to replace it",
                    shown()
                )));
            }
            None => {
                return Err(Error::Usage(format!(
                    "{flag} {} already exists; it is never replaced",
                    shown()
                )));
            }
        }
        // Opening for writing, without truncating, asks the kernel itself (mode bits alone do
        // not tell: ACLs, read-only mounts, another owner).
        std::fs::OpenOptions::new()
            .write(true)
            .open(&target)
            .map_err(|e| {
                Error::Usage(format!(
                    "{flag} {}: this user may not write it ({e}); it is left as it is",
                    shown()
                ))
            })?;
    }
    output_file(flag, &target)?;
    Ok(target)
}

/// Directories no command writes its outputs into: the file system's root and the system's
/// own top-level directories.
const SYSTEM_DIRS: [&str; 17] = [
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/proc",
    "/run", "/sbin", "/srv", "/sys", "/usr", "/var",
];

/// Trees whose files are the kernel's or devices, not data.
const SYSTEM_TREES: [&str; 3] = ["/dev", "/proc", "/sys"];

/// Refuses an output directory that is a system directory ([`SYSTEM_DIRS`], anything under
/// `/dev`, `/proc` or `/sys`) or the user's home directory itself: a command writes its model
/// files and checkpoints straight into `--out`.
fn not_system_dir(flag: &str, path: &Path) -> Result<(), Error> {
    // The nearest existing ancestor, canonical, with the rest of the path on it.
    let mut existing = path;
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(up)) => {
                rest.push(name.to_os_string());
                existing = if up.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    up
                };
            }
            _ => break,
        }
    }
    let Ok(mut full) = existing.canonicalize() else {
        return Ok(());
    };
    full.extend(rest.iter().rev());
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .and_then(|h| h.canonicalize().ok());
    let system = SYSTEM_DIRS.iter().any(|d| full == Path::new(d))
        || SYSTEM_TREES.iter().any(|d| full.starts_with(d))
        || home.as_deref() == Some(full.as_path());
    if system {
        return Err(Error::Usage(format!(
            "{flag} {}: {} is a system or home directory; give a directory of its own for the \
             outputs",
            path.display(),
            full.display()
        )));
    }
    Ok(())
}

/// `--resume` of a training directory: it must hold a checkpoint (its `state.json`). A
/// missing or empty directory is an error naming what is missing, never a fresh start.
pub fn resumable_checkpoint(dir: &Path) -> Result<(), Error> {
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "--resume: {} does not exist, so there is no run to continue; leave out --resume \
             to start one",
            dir.display()
        )));
    }
    let state = dir.join(Checkpointer::STATE_FILE);
    if !state.is_file() {
        return Err(Error::Usage(format!(
            "--resume: {} is missing, so {} holds no checkpoint to continue (a run killed in \
             its first epoch commits none); leave out --resume to start afresh",
            state.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// `reproduce --resume` of a run directory: the run must have been started (its
/// [`SETUP_FILE`] is there). Within it, a stage the interrupted run never reached starts
/// from its first epoch: that is continuing the run. A missing or empty directory is an error
/// naming what is missing.
pub fn resumable_run(dir: &Path) -> Result<(), Error> {
    let setup = dir.join(SETUP_FILE);
    if !setup.is_file() {
        let why = if dir.is_dir() {
            format!("{} is missing", setup.display())
        } else {
            format!("{} does not exist", dir.display())
        };
        return Err(Error::Usage(format!(
            "--resume: {why}, so there is no run to continue; leave out --resume to start one"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_must_be_writable_before_any_work() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        output_file("--out", &t.join("m.swb")).unwrap();
        output_dir("--out", &t.join("a/b/c")).unwrap();
        output_dir("--out", t).unwrap();
        let file = t.join("file");
        std::fs::write(&file, b"x").unwrap();
        for (e, needle) in [
            (output_file("--out", t), "is a directory"),
            (output_file("--out", &t.join("no/m.swb")), "does not exist"),
            (output_file("--out", &file.join("m.swb")), "not a directory"),
            (output_file("--out", Path::new("/proc/x.swb")), "/proc"),
            (output_dir("--out", &file.join("d")), "not a directory"),
            (output_dir("--out", Path::new("/proc/x/y")), "/proc"),
        ] {
            let e = e.unwrap_err().to_string();
            assert!(e.contains("--out") && e.contains(needle), "{e}");
        }
        assert_eq!(std::fs::read_dir(t).unwrap().count(), 1, "no probe is left");
    }

    #[test]
    fn resume_needs_what_it_resumes() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let missing = t.join("missing");
        for e in [resumable_checkpoint(&missing), resumable_run(&missing)] {
            let e = e.unwrap_err().to_string();
            assert!(e.contains("does not exist") && e.contains("missing"), "{e}");
        }
        let e = resumable_checkpoint(t).unwrap_err().to_string();
        assert!(e.contains("state.json is missing"), "{e}");
        let e = resumable_run(t).unwrap_err().to_string();
        assert!(e.contains("setup.json is missing"), "{e}");
        std::fs::write(t.join("state.json"), b"{}").unwrap();
        std::fs::write(t.join("setup.json"), b"{}").unwrap();
        resumable_checkpoint(t).unwrap();
        resumable_run(t).unwrap();
    }
}

/// Largest side `--image-size` resizes a folder's images to (the train request checks it): the
/// models' own bound, [`bnn_models::MAX_IMAGE_SIZE`].
pub use bnn_models::MAX_IMAGE_SIZE;

/// Most memory a run is planned to take on any machine, 1 TiB: the bound where the memory
/// free cannot be read (no `/proc/meminfo`), and beyond what any machine this runs on has.
pub const MAX_RUN_BYTES: u64 = 1 << 40;

/// A size in bytes for a message: `629.1 MB`, `2.5 GB`.
pub fn human_bytes(n: u64) -> String {
    let n = n as f64;
    match n {
        n if n >= 1e9 => format!("{:.1} GB", n / 1e9),
        n if n >= 1e6 => format!("{:.1} MB", n / 1e6),
        n => format!("{:.0} kB", n / 1e3),
    }
}

/// The memory this process may still take, and what bounds it: the least of the machine's
/// available memory (`MemAvailable`), the address space left under this process's limit
/// (`prlimit --as`, `ulimit -v`), and [`MAX_RUN_BYTES`].
pub fn memory_available() -> (u64, String) {
    match bnn_data::memory_left() {
        Some((bytes, bound)) if bytes < MAX_RUN_BYTES => (bytes, bound),
        _ => (
            MAX_RUN_BYTES,
            format!("the cap of {}", human_bytes(MAX_RUN_BYTES)),
        ),
    }
}

/// What a run needs in memory, part by part (`(what, bytes)`), checked against
/// [`memory_available`] before it is allocated.
#[derive(Debug, Clone, Default)]
pub struct MemoryEstimate {
    /// The parts: e.g. `("the 600 training images", 629_145_600)`.
    pub parts: Vec<(String, u64)>,
}

impl MemoryEstimate {
    /// Adds a part.
    pub fn add(&mut self, what: impl Into<String>, bytes: u64) -> &mut Self {
        self.parts.push((what.into(), bytes));
        self
    }

    /// The sum of the parts.
    pub fn total(&self) -> u64 {
        self.parts
            .iter()
            .fold(0u64, |sum, (_, b)| sum.saturating_add(*b))
    }

    /// `Err` naming the estimate, its parts and the memory there is, when the total exceeds
    /// `available` bytes (`bound` says what bounds them); `doing` is what needs it, e.g.
    /// "training".
    pub fn check_against(&self, doing: &str, available: u64, bound: &str) -> Result<(), Error> {
        if self.total() <= available {
            return Ok(());
        }
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|(what, b)| format!("{what} {}", human_bytes(*b)))
            .collect();
        Err(Error::Usage(format!(
            "{doing} would need about {} of memory ({}), and {} is {bound}: use a smaller \
             --image-size, a smaller architecture or fewer images (--subset)",
            human_bytes(self.total()),
            parts.join(", "),
            human_bytes(available)
        )))
    }

    /// [`MemoryEstimate::check_against`] this process's [`memory_available`].
    pub fn check(&self, doing: &str) -> Result<(), Error> {
        let (available, bound) = memory_available();
        self.check_against(doing, available, &bound)
    }
}

#[cfg(test)]
mod memory_tests {
    use super::*;

    #[test]
    fn the_memory_left_is_bounded_by_the_cap() {
        let (free, _) = memory_available();
        assert!(free > 0 && free <= MAX_RUN_BYTES);
    }

    #[test]
    fn an_estimate_beyond_the_memory_is_refused_with_its_parts() {
        let mut e = MemoryEstimate::default();
        e.add("the images", 600 << 20)
            .add("the model", 2_000_000_000);
        e.check_against("training", 3_000_000_000, "free").unwrap();
        let err = e
            .check_against("training", 1 << 30, "free")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("2.6 GB")
                && err.contains("the images 629.1 MB")
                && err.contains("1.1 GB is free"),
            "{err}"
        );
    }
}
