//! The one temporary-name scheme: `.<name>.tmp-<pid>-<random>` beside the target `<name>`,
//! and the clean-up of the temporaries that killed writers left.
//!
//! The name carries the writer's process id, so that a later writer can tell a temporary whose
//! writer is gone (a killed run's leftover, removed) from one still being written by a live
//! process (kept); the random part lets threads of one process, and processes of one PID in
//! other PID namespaces, write beside the same target without meeting.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::parent;

/// Random characters after the process id in a temporary's name: 62^6, about 5.7e10 names,
/// so that two writers of one target in one process practically never draw the same one (and
/// one that does draws again: the temporary is created exclusively).
pub const TEMP_RANDOM_CHARS: usize = 6;

/// Most digits of a process id in a temporary's name (a `u32` has ten).
const MAX_PID_DIGITS: usize = 10;

/// The start of the temporary names of `name` written by this process:
/// `.<name>.tmp-<pid>-` (a random part follows).
pub fn temp_prefix(name: &OsStr) -> OsString {
    let mut prefix = OsString::from(".");
    prefix.push(name);
    prefix.push(format!(".tmp-{}-", std::process::id()));
    prefix
}

/// A builder of this process's temporaries of `name` ([`temp_prefix`] and random characters).
pub(crate) fn builder(prefix: &OsStr) -> tempfile::Builder<'_, 'static> {
    let mut b = tempfile::Builder::new();
    b.prefix(prefix).rand_bytes(TEMP_RANDOM_CHARS);
    b
}

/// The file name of `path`, or [`Error::NoFileName`].
pub(crate) fn file_name(path: &Path) -> Result<&OsStr> {
    path.file_name().ok_or_else(|| Error::NoFileName {
        path: path.to_path_buf(),
    })
}

/// The process id in `entry` if it is a temporary name of `name` in this crate's scheme:
/// `.<name>.tmp-<pid>` (a writer before the random part was added) or
/// `.<name>.tmp-<pid>-<letters and digits>`.
fn temp_pid(entry: &[u8], name: &[u8]) -> Option<u32> {
    let rest = entry.strip_prefix(b".")?.strip_prefix(name)?;
    let rest = rest.strip_prefix(b".tmp-")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > MAX_PID_DIGITS {
        return None;
    }
    let (pid, tail) = rest.split_at(digits);
    let tail_ok = match tail.strip_prefix(b"-") {
        None => tail.is_empty(),
        Some(random) => !random.is_empty() && random.iter().all(u8::is_ascii_alphanumeric),
    };
    if !tail_ok {
        return None;
    }
    std::str::from_utf8(pid).ok()?.parse().ok()
}

/// Whether process `pid` is known to be gone: never this process, and only where `/proc`
/// tells (elsewhere no process is known gone, and nothing is removed).
fn gone(pid: u32) -> bool {
    pid != std::process::id()
        && Path::new("/proc/self").exists()
        && !Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes the temporaries of `path` (files or directories named by [`temp_prefix`]'s scheme
/// in `path`'s directory) whose writer is gone: what a killed writer left. A temporary of a
/// live process, this one's included, and any name outside the scheme are left alone. Best
/// effort: every write here calls it, and a failure to remove a leftover is no reason to fail
/// the write. Returns how many were removed.
pub fn remove_stale_temps(path: &Path) -> usize {
    let Some(name) = path.file_name() else {
        return 0;
    };
    let Ok(entries) = std::fs::read_dir(parent(path)) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let file = entry.file_name();
        if !temp_pid(file.as_bytes(), name.as_bytes()).is_some_and(gone) {
            continue;
        }
        let leftover = entry.path();
        // Not followed: a link is removed as a link.
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let done = if is_dir {
            std::fs::remove_dir_all(&leftover)
        } else {
            std::fs::remove_file(&leftover)
        };
        removed += usize::from(done.is_ok());
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_of_the_scheme_carry_a_pid() {
        let pid = |e: &str| temp_pid(e.as_bytes(), b"m.swb");
        assert_eq!(pid(".m.swb.tmp-42-aZ09xy"), Some(42));
        assert_eq!(pid(".m.swb.tmp-42"), Some(42));
        for other in [
            "m.swb",
            "m.swb.tmp-42",
            ".m.swb.tmp-",
            ".m.swb.tmp-42-",
            ".m.swb.tmp-42x",
            ".m.swb.tmp-42-a.b",
            ".m.swb.tmp--42",
            ".n.swb.tmp-42",
            ".m.swb.tmp-99999999999",
            ".m.swb.old-42",
        ] {
            assert_eq!(pid(other), None, "{other}");
        }
    }

    #[test]
    fn the_prefix_is_this_process_s() {
        let p = temp_prefix(OsStr::new("f.png"));
        assert_eq!(
            p,
            OsString::from(format!(".f.png.tmp-{}-", std::process::id()))
        );
    }
}
