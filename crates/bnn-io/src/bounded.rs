//! Reading a user-given file with a bound: the one helper every model and data reader of the
//! workspace uses (`.swb`, `.qbnn`, `model.bpk`, `state.json`, `config.json`, state dicts).
//! `bnn_metrics::file` re-exports it, for the readers that used it from there.
//!
//! A path is checked before it is opened: it must be a regular file (symbolic links followed),
//! since opening a FIFO blocks until a writer comes and a device such as `/dev/zero` never
//! ends; and its size must be within the format's bound. The read itself is limited to one
//! byte more than the bound, so a file whose size the metadata understates (one growing while
//! it is read, a `/proc` file) cannot exhaust memory either.
//!
//! Errors are [`std::io::Error`]s whose message says what is wrong without the path, for the
//! caller to name the file as it names its other I/O errors ("is a FIFO, not a regular
//! file"; "holds 5000 bytes, more than the 4096 a .swb file may hold").

use std::fs::{File, Metadata};
use std::io::{self, ErrorKind, Read};
use std::path::Path;

/// What a path that is not a regular file is, in words: "a directory", "a FIFO", ...
fn kind_of(meta: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// The metadata of `path` (symbolic links followed) if it is a regular file; otherwise an
/// error saying what it is (kind [`ErrorKind::IsADirectory`] for a directory,
/// [`ErrorKind::InvalidInput`] for a FIFO, socket or device, the system's error, e.g.
/// [`ErrorKind::NotFound`], when there is nothing to look at). Nothing is opened, so a FIFO
/// does not block.
pub fn check_regular(path: &Path) -> io::Result<Metadata> {
    let meta = std::fs::metadata(path)?;
    if meta.is_file() {
        return Ok(meta);
    }
    let kind = if meta.is_dir() {
        ErrorKind::IsADirectory
    } else {
        ErrorKind::InvalidInput
    };
    Err(io::Error::new(
        kind,
        format!("is {}, not a regular file", kind_of(&meta)),
    ))
}

/// The error of a file longer than its format's `bound`.
fn too_large(len: u64, bound: u64, what: &str) -> io::Error {
    io::Error::new(
        ErrorKind::FileTooLarge,
        format!("holds {len} bytes, more than the {bound} a {what} file may hold"),
    )
}

/// [`check_regular`], and the file's size at most `bound` bytes (`what` names the format in
/// the error, e.g. `".swb"`). Returns the size. For readers that hand the path to another
/// library which opens it itself.
pub fn check_regular_within(path: &Path, bound: u64, what: &str) -> io::Result<u64> {
    let len = check_regular(path)?.len();
    if len > bound {
        return Err(too_large(len, bound, what));
    }
    Ok(len)
}

/// A regular file opened for reading at most `bound` bytes ([`BoundedFile::open`]).
#[derive(Debug)]
pub struct BoundedFile {
    reader: io::Take<File>,
    len: u64,
    bound: u64,
    what: String,
    read: u64,
}

impl BoundedFile {
    /// Opens `path` after [`check_regular_within`]: a regular file of at most `bound` bytes
    /// (`what` names the format in errors).
    pub fn open(path: &Path, bound: u64, what: &str) -> io::Result<Self> {
        let len = check_regular_within(path, bound, what)?;
        let file = File::open(path)?;
        Ok(Self {
            // One byte past the bound: enough to tell a file that grew beyond it.
            reader: file.take(bound.saturating_add(1)),
            len,
            bound,
            what: what.to_string(),
            read: 0,
        })
    }

    /// The file's size when it was opened (its metadata's; the read may find otherwise).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file was empty when it was opened.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first `n` bytes still unread (fewer at the end of the file): e.g. a magic number to
    /// check before the rest is read.
    pub fn read_head(&mut self, n: usize) -> io::Result<Vec<u8>> {
        let mut head = Vec::with_capacity(n);
        (&mut self.reader).take(n as u64).read_to_end(&mut head)?;
        self.read += head.len() as u64;
        Ok(head)
    }

    /// Appends the rest of the file to `buf` and returns it; a file that turns out longer than
    /// the bound is an error ([`ErrorKind::FileTooLarge`]).
    pub fn read_rest(mut self, mut buf: Vec<u8>) -> io::Result<Vec<u8>> {
        // The metadata's size, within the bound, is the likely length: reserve it once.
        let expected = self.len.saturating_sub(self.read);
        buf.reserve(usize::try_from(expected).unwrap_or(0));
        let n = self.reader.read_to_end(&mut buf)? as u64;
        let total = self.read + n;
        if total > self.bound {
            return Err(too_large(total, self.bound, &self.what));
        }
        Ok(buf)
    }
}

/// The bytes of the regular file `path`, at most `bound` of them (`what` names the format in
/// errors): [`BoundedFile::open`] and [`BoundedFile::read_rest`].
pub fn read_bounded(path: &Path, bound: u64, what: &str) -> io::Result<Vec<u8>> {
    BoundedFile::open(path, bound, what)?.read_rest(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let ok = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mkfifo {}", path.display());
    }

    #[test]
    fn a_regular_file_within_its_bound_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_bounded(&path, 10, "test").unwrap(), b"0123456789");
        let mut f = BoundedFile::open(&path, 10, "test").unwrap();
        assert_eq!((f.len(), f.is_empty()), (10, false));
        assert_eq!(f.read_head(4).unwrap(), b"0123");
        assert_eq!(f.read_rest(b"0123".to_vec()).unwrap(), b"0123456789");
        // Through a symbolic link as well.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert_eq!(read_bounded(&link, 10, "test").unwrap().len(), 10);
    }

    #[test]
    fn a_file_over_its_bound_is_refused_naming_both_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [7u8; 100]).unwrap();
        let err = read_bounded(&path, 64, ".swb").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::FileTooLarge);
        assert_eq!(
            err.to_string(),
            "holds 100 bytes, more than the 64 a .swb file may hold"
        );
        assert!(check_regular_within(&path, 99, "x").is_err());
        assert_eq!(check_regular_within(&path, 100, "x").unwrap(), 100);
    }

    /// `/proc` files report a size of 0 and hold more: the read itself stops at the bound.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_file_longer_than_its_metadata_says_is_still_bounded() {
        let path = Path::new("/proc/self/status");
        assert_eq!(std::fs::metadata(path).unwrap().len(), 0);
        let err = read_bounded(path, 16, "status").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::FileTooLarge, "{err}");
        assert!(err.to_string().starts_with("holds 17 bytes"), "{err}");
    }

    #[test]
    fn directories_fifos_and_devices_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_bounded(dir.path(), 1 << 30, "test").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::IsADirectory);
        assert_eq!(err.to_string(), "is a directory, not a regular file");
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        // Opening it would block until a writer came: the check comes first.
        let err = read_bounded(&fifo, 1 << 30, "test").unwrap_err();
        assert_eq!(err.to_string(), "is a FIFO, not a regular file");
        let err = read_bounded(Path::new("/dev/zero"), 1 << 30, "test").unwrap_err();
        assert_eq!(err.to_string(), "is a character device, not a regular file");
        let err = read_bounded(&dir.path().join("missing"), 1, "test").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
    }
}
