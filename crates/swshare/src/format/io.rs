//! Reading and atomically writing model files.
//!
//! A file is written to `<name>.tmp-<pid>` in the target's directory, flushed to disk
//! (`fsync`) and then renamed over the target, so readers see either the old file or the
//! complete new one, never a partial write. On failure the temporary file is removed and the
//! old file is left untouched.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

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

/// Replaces the calibration temperature of the `.swb` or full-BNN file at `path`
/// ([`with_temperature`](super::with_temperature)), atomically: the file is rewritten as a
/// current-version file with the same model, or left untouched on error.
pub fn set_temperature(path: impl AsRef<Path>, temperature: Option<f64>) -> Result<(), SwbError> {
    let path = path.as_ref();
    let bytes =
        codec::with_temperature(&read(path)?, temperature).map_err(|e| format_err(path, e))?;
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

/// The temporary name used while writing `path`: `<name>.tmp-<pid>` in the same directory.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp-{}", std::process::id()));
    path.with_file_name(name)
}

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename). A file it replaces
/// keeps its permissions and, where this process may set it, its owner; a symbolic link at
/// `path` is replaced, not followed (resolve it first to write through it).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), SwbError> {
    if path.file_name().is_none() {
        return Err(SwbError::Io {
            path: path.to_path_buf(),
            action: "write (path has no file name)",
            source: std::io::ErrorKind::InvalidInput.into(),
        });
    }
    remove_stale_temps(path);
    let tmp = temp_path(path);
    let mut file = File::create(&tmp).map_err(io_err(&tmp, "create temporary file"))?;
    let written = file
        .write_all(bytes)
        .map_err(io_err(&tmp, "write temporary file"))
        .and_then(|()| file.sync_all().map_err(io_err(&tmp, "sync temporary file")));
    let written = written.and_then(|()| {
        keep_metadata(&file, path).map_err(io_err(&tmp, "set permissions of temporary file"))
    });
    drop(file);
    let result = written
        .and_then(|()| fs::rename(&tmp, path).map_err(io_err(path, "rename temporary file onto")));
    if result.is_err() {
        // Best effort: the original error is the one worth reporting.
        let _ = fs::remove_file(&tmp);
        return result;
    }
    sync_dir(path);
    Ok(())
}

/// Gives the temporary `file` the permissions and, where this process may (root, or the same
/// owner), the owner of the file `replaced` it will replace, if there is one.
fn keep_metadata(file: &File, replaced: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Ok(old) = fs::metadata(replaced) else {
        return Ok(());
    };
    file.set_permissions(old.permissions())?;
    // Best effort: only root can give a file away; callers check that the target is writable.
    let _ = std::os::unix::fs::fchown(file, Some(old.uid()), Some(old.gid()));
    Ok(())
}

/// Removes the temporary files (`<name>.tmp-<pid>`) of `path` that writers killed before
/// their rename left behind: those whose process is gone (on Linux, where `/proc` tells;
/// elsewhere none is removed). Best effort.
pub fn remove_stale_temps(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{}.tmp-", name.to_string_lossy());
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = file.strip_prefix(&prefix) else {
            continue;
        };
        let gone = pid.parse::<u32>().is_ok_and(|pid| {
            pid != std::process::id()
                && Path::new("/proc/self").exists()
                && !Path::new("/proc").join(pid.to_string()).exists()
        });
        if gone {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Flushes the directory entry of the rename (best effort: not every platform can open a
/// directory, and the data itself is already on disk).
fn sync_dir(path: &Path) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}
