//! Errors of the `.swb` reader and writer.

use std::path::PathBuf;

use super::kind::FileKind;

/// What is wrong with a model or with the bytes of a model file (no path attached).
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The file does not start with the `.swb` magic bytes.
    #[error("not a .swb file: magic bytes are {found:02x?}, expected {expected:02x?}")]
    BadMagic {
        /// The first bytes of the file (at most the magic's length).
        found: Vec<u8>,
        /// The magic this reader expects.
        expected: Vec<u8>,
    },
    /// The file's format version is not one this reader understands.
    #[error(
        "unsupported .swb format version {found} (this reader supports versions {oldest} to {newest})"
    )]
    UnsupportedVersion {
        /// Version stored in the file.
        found: u16,
        /// Oldest version this reader supports.
        oldest: u16,
        /// Newest version this reader supports (the one it writes).
        newest: u16,
    },
    /// The file holds another kind of model (e.g. a full BNN where a shared one was expected).
    #[error("file holds a {found} model, expected a {expected} model")]
    WrongKind {
        /// Kind stored in the file.
        found: FileKind,
        /// Kind the caller asked for.
        expected: FileKind,
    },
    /// The file's kind byte is unknown.
    #[error("unknown model kind byte {0}")]
    UnknownKind(u8),
    /// The file is shorter than its header says.
    #[error("file is truncated: expected {expected} bytes, found {found}")]
    Truncated {
        /// Length the header promises (or the minimum readable length).
        expected: u64,
        /// Actual length.
        found: u64,
    },
    /// The file is longer than its header says.
    #[error("file has {extra} unexpected trailing bytes after the checksum")]
    TrailingBytes {
        /// Number of bytes after the end promised by the header.
        extra: u64,
    },
    /// The stored checksum does not match the content: the file is corrupted.
    #[error("checksum mismatch: stored crc32 {stored:#010x}, content has {computed:#010x}")]
    ChecksumMismatch {
        /// CRC-32 stored at the end of the file.
        stored: u32,
        /// CRC-32 of the bytes before it.
        computed: u32,
    },
    /// A section could not be decoded or holds inconsistent data.
    #[error("corrupt {section} section: {detail}")]
    Corrupt {
        /// Which section (`"meta"`, `"codebook"`, `"index"`, ...).
        section: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// The model to write (or the decoded model) breaks an invariant of the format.
    #[error("invalid model: {0}")]
    InvalidModel(String),
    /// The caller's check of the architecture, layers and codebook length, run before the
    /// index is decoded ([`from_bytes_checked`](super::from_bytes_checked)), refused the file.
    #[error("{0}")]
    Rejected(String),
}

/// An error of [`save`](super::save), [`load`](super::load) and the other file functions: an
/// I/O or format error together with the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum SwbError {
    /// Reading, writing, syncing or renaming a file failed.
    #[error("{}: cannot {action}: {source}", path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// What was being done (`"read"`, `"create temporary file"`, ...).
        action: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The model or the file content is invalid.
    #[error("{}: {source}", path.display())]
    Format {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: FormatError,
    },
}

impl SwbError {
    /// The format error inside, if this is one (handy for matching in callers and tests).
    pub fn format_error(&self) -> Option<&FormatError> {
        match self {
            SwbError::Format { source, .. } => Some(source),
            SwbError::Io { .. } => None,
        }
    }
}
