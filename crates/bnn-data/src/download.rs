//! Verified downloads and archive extraction.
//!
//! A file is streamed to a temporary name in its destination folder while its digest is
//! computed; only when the digest matches the published one is it renamed into place, so an
//! interrupted or tampered download never looks like a complete data set.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::time::Duration;

use md5::Md5;
use sha2::{Digest, Sha256};

use crate::error::{DataError, Result};

/// A published digest of a file, lower-case hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checksum {
    /// MD5 (what MNIST, CIFAR and SVHN publish).
    Md5(String),
    /// SHA-256.
    Sha256(String),
}

impl Checksum {
    /// `md5` or `sha256`.
    pub fn algorithm(&self) -> &'static str {
        match self {
            Checksum::Md5(_) => "md5",
            Checksum::Sha256(_) => "sha256",
        }
    }

    /// The expected hex digest.
    pub fn expected(&self) -> &str {
        match self {
            Checksum::Md5(h) | Checksum::Sha256(h) => h,
        }
    }
}

/// One file to fetch into a data set's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFile {
    /// The name it gets in the data set's folder.
    pub name: String,
    /// Where to get it, tried in order.
    pub urls: Vec<String>,
    /// The published digest.
    pub checksum: Checksum,
    /// `true` for a `.tar.gz` to unpack into the folder (and delete) once verified.
    pub extract: bool,
}

enum Hasher {
    Md5(Md5),
    Sha256(Sha256),
}

impl Hasher {
    fn new(c: &Checksum) -> Self {
        match c {
            Checksum::Md5(_) => Hasher::Md5(Md5::new()),
            Checksum::Sha256(_) => Hasher::Sha256(Sha256::new()),
        }
    }
    fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
        }
    }
    fn hex(self) -> String {
        let bytes: Vec<u8> = match self {
            Hasher::Md5(h) => h.finalize().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The hex digest of a file on disk.
pub fn file_digest(path: &Path, algorithm: &Checksum) -> Result<String> {
    let mut f = File::open(path).map_err(|e| DataError::io(path, e))?;
    let mut h = Hasher::new(algorithm);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(|e| DataError::io(path, e))?;
        if n == 0 {
            return Ok(h.hex());
        }
        h.update(&buf[..n]);
    }
}

/// A [`bnn_io::Error`] as this crate's error, naming the same path.
fn file_error(e: bnn_io::Error) -> DataError {
    let path = e.path().to_path_buf();
    match e {
        bnn_io::Error::Io { action, source, .. } => DataError::io(
            path,
            std::io::Error::new(source.kind(), format!("cannot {action}: {source}")),
        ),
        other => DataError::io(path, std::io::Error::other(other.to_string())),
    }
}

/// Downloads `url` to `dest`, verifying `checksum`; `dest` appears only if it matches.
pub fn download_verified(url: &str, dest: &Path, checksum: &Checksum) -> Result<()> {
    let dl_err = |reason: String| DataError::Download {
        url: url.to_string(),
        reason,
    };
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir).map_err(|e| DataError::io(dir, e))?;
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .build()
        .into();
    let response = agent.get(url).call().map_err(|e| dl_err(e.to_string()))?;
    let mut reader = response.into_body().into_reader();
    // The download's own error (a failed read, a wrong checksum), where it stopped the write.
    let mut failure = None;
    let written = bnn_io::write_atomic_with(dest, bnn_io::Replace::Always, |file| {
        let mut stop = |e: DataError| {
            failure = Some(e);
            std::io::Error::other("download failed")
        };
        let mut out = BufWriter::new(file);
        let mut hasher = Hasher::new(checksum);
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = reader
                .read(&mut buf)
                .map_err(|e| stop(dl_err(e.to_string())))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])?;
        }
        out.flush()?;
        let actual = hasher.hex();
        if !actual.eq_ignore_ascii_case(checksum.expected()) {
            return Err(stop(DataError::Checksum {
                url: url.to_string(),
                algorithm: checksum.algorithm(),
                expected: checksum.expected().to_string(),
                actual,
            }));
        }
        Ok(())
    });
    written.map_err(|e| failure.take().unwrap_or_else(|| file_error(e)))
}

/// Unpacks a `.tar.gz` into `dir` (entries that would leave `dir` are refused by `tar`).
///
/// Unpacks into a temporary folder in `dir` first and then moves the top-level entries into
/// place, so a half-extracted archive is never mistaken for a complete data set.
pub fn extract_tar_gz(archive: &Path, dir: &Path) -> Result<()> {
    let name = archive
        .file_name()
        .unwrap_or(std::ffi::OsStr::new("archive"));
    // Removed, with whatever the archive left in it, when dropped.
    let staging = bnn_io::temp_dir_beside(&dir.join(name)).map_err(file_error)?;
    let file = File::open(archive).map_err(|e| DataError::io(archive, e))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    tar.unpack(staging.path())
        .map_err(|e| DataError::format(archive, format!("cannot extract: {e}")))?;
    let entries =
        std::fs::read_dir(staging.path()).map_err(|e| DataError::io(staging.path(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| DataError::io(staging.path(), e))?;
        let target = dir.join(entry.file_name());
        // An older copy is replaced in one step, and removed once the new one is in place.
        bnn_io::rename_into_place(&entry.path(), &target, bnn_io::Replace::Always)
            .map_err(file_error)?;
    }
    Ok(())
}

/// Fetches every file of `files` into `dir`, trying each URL in turn; archives are
/// unpacked and removed. Files already present with the right digest are kept.
pub fn fetch_files(dir: &Path, files: &[RemoteFile]) -> Result<()> {
    for file in files {
        let dest = dir.join(&file.name);
        let present = dest.is_file()
            && file_digest(&dest, &file.checksum)?.eq_ignore_ascii_case(file.checksum.expected());
        if !present {
            if file.urls.is_empty() {
                return Err(DataError::Download {
                    url: String::new(),
                    reason: format!("no URL known for {}", file.name),
                });
            }
            let mut errors = Vec::new();
            for url in &file.urls {
                match download_verified(url, &dest, &file.checksum) {
                    Ok(()) => {
                        errors.clear();
                        break;
                    }
                    Err(e) => errors.push(e),
                }
            }
            match errors.len() {
                0 => {}
                1 => return Err(errors.pop().expect("one error")),
                _ => {
                    return Err(DataError::Download {
                        url: file.urls.join(", "),
                        reason: errors
                            .iter()
                            .map(|e| e.to_string())
                            .collect::<Vec<_>>()
                            .join("; "),
                    });
                }
            }
        }
        if file.extract {
            extract_tar_gz(&dest, dir)?;
            std::fs::remove_file(&dest).map_err(|e| DataError::io(&dest, e))?;
        }
    }
    Ok(())
}
