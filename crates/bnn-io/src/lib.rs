//! The workspace's one file layer, burn-free and below every other crate.
//!
//! - [`write_atomic`] / [`write_atomic_with`]: a file written under a temporary name beside
//!   its target, flushed (`fsync`), renamed into place, and the directory flushed, so readers
//!   see the old file or the whole new one, never part of one. [`Replace::Never`] makes the
//!   final step a no-replace rename: a file that appeared at the target while the output was
//!   being made is never replaced, and the write fails with [`Error::Exists`] naming it.
//!   [`Replace::Always`] replaces whatever is there, whole (the last writer wins), keeping the
//!   replaced file's permissions and, where this process may set it, its owner.
//! - [`publish_link`]: an existing file published under another name the same way (a hard
//!   link, so that a large file is not on disk twice).
//! - [`write_dir_atomic`]: a directory filled under a temporary name beside its target, then
//!   moved into place with the same two choices; an old directory is removed only after the
//!   new one is in place.
//! - [`remove_stale_temps`]: the temporaries killed writers left beside a target, removed
//!   (every write above calls it); only names of this crate's scheme
//!   ([`temp_prefix`]: `.<name>.tmp-<pid>-<random>`) whose process is gone.
//! - [`temp_dir_beside`] and [`rename_into_place`]: a staging directory beside a target and
//!   the one-step move of its entries (an archive unpacked, then moved into place).
//! - [`bounded`]: reading a user-given file with a size bound.

#![warn(missing_docs)]

pub mod bounded;
mod dir;
mod error;
mod temp;
mod write;

pub use bounded::{BoundedFile, check_regular, check_regular_within, read_bounded};
pub use dir::{rename_into_place, temp_dir_beside, write_dir_atomic};
pub use error::{Error, Result};
pub use temp::{TEMP_RANDOM_CHARS, remove_stale_temps, temp_prefix};
pub use write::{publish_link, write_atomic, write_atomic_with};

use std::path::Path;

/// What a write does when something is at its target by the time it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replace {
    /// Never replace: a file at the target, one that appeared while the output was being
    /// written included, makes the write fail with [`Error::Exists`] and stays as it is.
    Never,
    /// Replace what is at the target, whole: of two concurrent writers the last one wins.
    Always,
}

impl Replace {
    /// [`Replace::Always`] for a user's `--force`, else [`Replace::Never`].
    pub fn from_force(force: bool) -> Self {
        if force {
            Replace::Always
        } else {
            Replace::Never
        }
    }
}

/// The directory `path` lies in (`.` for a bare file name).
pub(crate) fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Flushes a directory's entries, so that a rename in it survives a power cut (best effort:
/// not every platform opens directories, and the data itself is already on disk).
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}
