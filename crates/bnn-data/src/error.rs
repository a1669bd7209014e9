//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong while finding, reading, transforming or batching data.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// An I/O error while touching a file or folder.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file exists but its content does not follow its format.
    #[error("{path}: {reason}")]
    Format {
        /// The offending file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An image could not be decoded.
    #[error("{path}: cannot decode image: {reason}")]
    Decode {
        /// The offending image file.
        path: PathBuf,
        /// The decoder's message.
        reason: String,
    },
    /// A sample index past the end of a data set.
    #[error("index {index} out of range for a data set of {len} samples")]
    IndexOutOfRange {
        /// The requested index.
        index: usize,
        /// The data set's length.
        len: usize,
    },
    /// A parameter outside its valid range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A corruption severity outside `1..=MAX_SEVERITY`.
    #[error("corruption `{kind}`: severity {severity} is outside 1..={max}", max = crate::corruption_kind::MAX_SEVERITY)]
    Severity {
        /// The corruption kind asked for.
        kind: crate::corruption_kind::CorruptionKind,
        /// The severity asked for.
        severity: u8,
    },
    /// Samples in one batch, or an image and a transform, disagree on shape.
    #[error("shape mismatch at sample {index}: expected {expected:?}, got {got:?}")]
    ShapeMismatch {
        /// Data set index of the offending sample.
        index: usize,
        /// The shape of the batch's first sample (or what the transform needs).
        expected: (usize, usize, usize),
        /// The shape found.
        got: (usize, usize, usize),
    },
    /// A download failed (network, HTTP status or file system).
    #[error("download of {url} failed: {reason}")]
    Download {
        /// The URL tried.
        url: String,
        /// Why it failed.
        reason: String,
    },
    /// A downloaded file's digest differs from the published one.
    #[error("checksum mismatch for {url}: expected {algorithm} {expected}, got {actual}")]
    Checksum {
        /// The URL downloaded.
        url: String,
        /// `md5` or `sha256`.
        algorithm: &'static str,
        /// The published digest.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// A data set was found nowhere and could not be fetched; the message lists every remedy.
    #[error("data set `{dataset}` not found.\nSearched:\n{searched}\nRemedies:\n{remedies}")]
    NotFound {
        /// The data set's name.
        dataset: String,
        /// The folders searched, one per line.
        searched: String,
        /// What the user can do, one per line.
        remedies: String,
    },
    /// One cell (or one row) of a text table such as a CSV file is wrong: the message names
    /// the file, the 1-based line and the column.
    #[error("{path}: line {line}, column `{column}`: {reason}")]
    Cell {
        /// The offending file.
        path: PathBuf,
        /// The 1-based line of the file the row starts on (the header is line 1).
        line: u64,
        /// The column's name from the header (or `#k` for a field past the header's end).
        column: String,
        /// What is wrong with the cell.
        reason: String,
    },
    /// A worker thread of the batch loader panicked or vanished.
    #[error("loader worker failed: {0}")]
    Worker(String),
}

/// Shorthand for `Result<T, DataError>`.
pub type Result<T> = std::result::Result<T, DataError>;

impl DataError {
    /// An [`DataError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DataError::Io {
            path: path.into(),
            source,
        }
    }

    /// A [`DataError::Format`] for `path`.
    pub fn format(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        DataError::Format {
            path: path.into(),
            reason: reason.into(),
        }
    }
}
