//! The typed error of every operation here: each names the path concerned.

use std::path::{Path, PathBuf};

/// A result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of writing a file or directory; each names the path concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Something is at the target of a [`Replace::Never`](crate::Replace::Never) write (it may
    /// have appeared while the output was being made); it was left as it is.
    #[error("{} already exists; pass --force to replace it", path.display())]
    Exists {
        /// The target.
        path: PathBuf,
    },
    /// The path names no file (it ends in `..` or is a root).
    #[error("{}: not a path a file can be written to (it has no file name)", path.display())]
    NoFileName {
        /// The path.
        path: PathBuf,
    },
    /// Creating, writing, syncing or renaming failed.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        /// The file concerned: the target where the user gave one.
        path: PathBuf,
        /// What was being done (`"create temporary file"`, `"rename into place"`, ...).
        action: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// An [`Error::Io`] of `path` while doing `action`.
    pub fn io(path: impl AsRef<Path>, action: &'static str, source: std::io::Error) -> Self {
        Error::Io {
            path: path.as_ref().to_path_buf(),
            action,
            source,
        }
    }

    /// The path the error names.
    pub fn path(&self) -> &Path {
        match self {
            Error::Exists { path } | Error::NoFileName { path } | Error::Io { path, .. } => path,
        }
    }

    /// Whether the error is [`Error::Exists`]: a no-replace write found its target taken.
    pub fn is_exists(&self) -> bool {
        matches!(self, Error::Exists { .. })
    }
}

/// `|e| Error::io(path, action, e)`, for `map_err`.
pub(crate) fn io_at(path: &Path, action: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io {
        path,
        action,
        source,
    }
}
