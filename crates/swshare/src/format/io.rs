//! Reading and atomically writing model files.
//!
//! Files are written through [`bnn_io`]: to a temporary file beside the target, flushed to
//! disk (`fsync`) and then renamed over it, so readers see either the old file or the
//! complete new one, never a partial write. On failure the temporary file is removed and the
//! old file is left untouched.

use bnn_metrics::ConformalCalibration;
use std::path::Path;

use super::codec;
use super::error::{FormatError, SwbError};
use super::header::MAGIC;
use super::model::{FullBnnData, LayerShape, NamedTensor, SharedModelData};
use super::{FileSizes, ModelMeta, SaveOptions};

/// Writes `model` to `path` as a `.swb` file and returns the size of each part.
pub fn save(
    path: impl AsRef<Path>,
    model: &SharedModelData,
    opts: &SaveOptions,
) -> Result<FileSizes, SwbError> {
    let path = path.as_ref();
    let (bytes, sizes) = codec::encode_shared(model, opts).map_err(|e| format_err(path, e))?;
    write_atomic(path, &bytes)?;
    Ok(sizes)
}

/// Reads a `.swb` file written by [`save`].
pub fn load(path: impl AsRef<Path>) -> Result<SharedModelData, SwbError> {
    let path = path.as_ref();
    codec::decode_shared(&read(path)?, &mut |_| Ok(())).map_err(|e| format_err(path, e))
}

/// Reads a `.swb` file like [`load`], calling `check` on its [`ModelMeta`] before the index
/// is decoded (see [`from_bytes_checked`](super::from_bytes_checked)).
pub fn load_checked(
    path: impl AsRef<Path>,
    mut check: impl FnMut(&ModelMeta<'_>) -> Result<(), String>,
) -> Result<SharedModelData, SwbError> {
    let path = path.as_ref();
    codec::decode_shared(&read(path)?, &mut check).map_err(|e| format_err(path, e))
}

/// Writes a plain full-BNN file (every weight's `mu` and `rho` as `f32`, same header and
/// checksum scheme as `.swb`, and the fitted calibration temperature if any) as the size
/// baseline; returns the file's length in bytes.
pub fn save_full_bnn(
    path: impl AsRef<Path>,
    arch: &str,
    layers: &[LayerShape],
    mu: &[f32],
    rho: &[f32],
    unshared: &[NamedTensor],
    temperature: Option<f64>,
) -> Result<u64, SwbError> {
    let path = path.as_ref();
    let bytes = codec::encode_full(arch, layers, mu, rho, unshared, temperature)
        .map_err(|e| format_err(path, e))?;
    write_atomic(path, &bytes)?;
    Ok(bytes.len() as u64)
}

/// Reads a file written by [`save_full_bnn`].
pub fn load_full_bnn(path: impl AsRef<Path>) -> Result<FullBnnData, SwbError> {
    let path = path.as_ref();
    codec::decode_full(&read(path)?).map_err(|e| format_err(path, e))
}

/// Replaces the calibration temperature of the `.swb` or full-BNN file at `path`, keeping its
/// conformal calibration ([`set_calibration`]).
pub fn set_temperature(path: impl AsRef<Path>, temperature: Option<f64>) -> Result<(), SwbError> {
    let path = path.as_ref();
    let bytes = read(path)?;
    let (_, conformal) = codec::calibration_of(&bytes).map_err(|e| format_err(path, e))?;
    let bytes = codec::with_calibration(&bytes, temperature, conformal.as_ref())
        .map_err(|e| format_err(path, e))?;
    write_atomic(path, &bytes)
}

/// Replaces the calibration section (the temperature and the conformal calibration; `None`
/// removes one) of the `.swb` or full-BNN file at `path` ([`with_calibration`](super::with_calibration)),
/// atomically: the file is rewritten as a current-version file with the same model, or left
/// untouched on error.
pub fn set_calibration(
    path: impl AsRef<Path>,
    temperature: Option<f64>,
    conformal: Option<&ConformalCalibration>,
) -> Result<(), SwbError> {
    let path = path.as_ref();
    let bytes = codec::with_calibration(&read(path)?, temperature, conformal)
        .map_err(|e| format_err(path, e))?;
    write_atomic(path, &bytes)
}

fn format_err(path: &Path, source: FormatError) -> SwbError {
    SwbError::Format {
        path: path.to_path_buf(),
        source,
    }
}

fn io_err(path: &Path, action: &'static str) -> impl FnOnce(std::io::Error) -> SwbError {
    let path = path.to_path_buf();
    move |source| SwbError::Io {
        path,
        action,
        source,
    }
}

/// The largest `.swb` or full-BNN file the readers take: 8 GiB. A full-BNN file of a billion
/// weights (`mu` and `rho` as `f32`) takes 8 GB, and the largest models here have under 40
/// million; a shared file is smaller still. A larger file is refused before it is read, and
/// no read goes past this bound (a device such as `/dev/zero` is refused before that).
pub const MAX_FILE_LEN: u64 = 8 << 30;

fn read(path: &Path) -> Result<Vec<u8>, SwbError> {
    read_magic_file(path, MAX_FILE_LEN, &MAGIC, ".swb")
}

/// The bytes of the file at `path` that must start with `magic`: a regular file (a directory,
/// FIFO or device is an error saying which, and nothing is opened) of at most `bound` bytes
/// (`what` names the format in that error). A file with other first bytes is refused before
/// the rest is read; a shorter one than the magic is left to the decoder (truncated).
pub(crate) fn read_magic_file(
    path: &Path,
    bound: u64,
    magic: &[u8],
    what: &str,
) -> Result<Vec<u8>, SwbError> {
    let mut file =
        bnn_metrics::file::BoundedFile::open(path, bound, what).map_err(io_err(path, "read"))?;
    let head = file.read_head(magic.len()).map_err(io_err(path, "read"))?;
    if !magic.starts_with(&head) {
        return Err(format_err(
            path,
            FormatError::BadMagic {
                found: head,
                expected: magic.to_vec(),
            },
        ));
    }
    file.read_rest(head).map_err(io_err(path, "read"))
}

/// Writes `bytes` to `path` atomically, replacing what is there ([`bnn_io::write_atomic`]
/// with [`bnn_io::Replace::Always`]: temporary file beside it, fsync, rename). A file it
/// replaces keeps its permissions and, where this process may set it, its owner; a symbolic
/// link at `path` is replaced, not followed (resolve it first to write through it).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), SwbError> {
    bnn_io::write_atomic(path, bytes, bnn_io::Replace::Always).map_err(file_error)
}

/// A [`bnn_io::Error`] as this crate's error, naming the same path.
pub fn file_error(e: bnn_io::Error) -> SwbError {
    let path = e.path().to_path_buf();
    match e {
        bnn_io::Error::Io { action, source, .. } => SwbError::Io {
            path,
            action,
            source,
        },
        bnn_io::Error::Exists { .. } => SwbError::Io {
            path,
            action: "write it (it already exists; pass --force to replace it)",
            source: std::io::ErrorKind::AlreadyExists.into(),
        },
        other => SwbError::Io {
            path,
            action: "write (path has no file name)",
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, other.to_string()),
        },
    }
}
