//! Checks of a command's arguments that run before any work starts: output paths that can be
//! written, and `--resume` targets that hold something to resume. A command that would fail
//! at its end (after hours of training) fails at its start instead, naming the flag and path.

use std::path::Path;

use bnn_train::Checkpointer;

use crate::Error;
use crate::store::SETUP_FILE;

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
/// be created, or a path whose nearest existing ancestor is such a directory.
pub fn output_dir(flag: &str, path: &Path) -> Result<(), Error> {
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
