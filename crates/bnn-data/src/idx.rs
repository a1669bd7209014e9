//! IDX files (MNIST, Fashion-MNIST), gzip-compressed or raw.
//!
//! Format (LeCun et al.): a big-endian magic `0x0000TTNN` (`TT` = element type, `0x08` for
//! unsigned bytes; `NN` = number of dimensions), then `NN` big-endian `u32` sizes, then the
//! data. Images use magic 2051 (`[N, rows, cols]`), labels 2049 (`[N]`).

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::dataset::{InMemoryDataset, Split};
use crate::error::{DataError, Result};

/// Magic number of an IDX file of `u8` images `[N, rows, cols]`.
pub const IDX_IMAGES_MAGIC: u32 = 0x0000_0803;
/// Magic number of an IDX file of `u8` labels `[N]`.
pub const IDX_LABELS_MAGIC: u32 = 0x0000_0801;

/// A decoded IDX array of unsigned bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxArray {
    /// The magic number read from the file.
    pub magic: u32,
    /// The sizes of each dimension.
    pub dims: Vec<usize>,
    /// The elements, row-major.
    pub data: Vec<u8>,
}

/// Largest IDX array this reader accepts, in data bytes (2 GiB; MNIST's training images take
/// 47 MB). A header that declares more is refused before anything is inflated.
pub const MAX_IDX_BYTES: usize = 1 << 31;

/// The header of an IDX file: magic, dimensions, header length and data length. `bytes` may
/// be just a prefix of the file: only the header is read.
fn parse_header(bytes: &[u8], path: &Path) -> Result<(u32, Vec<usize>, usize, usize)> {
    if bytes.len() < 4 {
        return Err(DataError::format(
            path,
            format!("IDX file too short for a header ({} bytes)", bytes.len()),
        ));
    }
    let magic = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err(DataError::format(
            path,
            format!("bad IDX magic {magic:#010x}: the first two bytes must be zero"),
        ));
    }
    if bytes[2] != 0x08 {
        return Err(DataError::format(
            path,
            format!(
                "IDX element type {:#04x} is not supported (only 0x08, unsigned byte)",
                bytes[2]
            ),
        ));
    }
    let ndim = bytes[3] as usize;
    if ndim == 0 {
        return Err(DataError::format(path, "IDX file declares zero dimensions"));
    }
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        return Err(DataError::format(
            path,
            format!(
                "IDX file truncated inside its header ({} bytes)",
                bytes.len()
            ),
        ));
    }
    let dims: Vec<usize> = (0..ndim)
        .map(|d| {
            let o = 4 + 4 * d;
            u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
        })
        .collect();
    let expected = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= MAX_IDX_BYTES)
        .ok_or_else(|| {
            DataError::format(
                path,
                format!(
                    "IDX dimensions {dims:?} declare more than {MAX_IDX_BYTES} bytes \
                     (the largest array this reader accepts)"
                ),
            )
        })?;
    Ok((magic, dims, header, expected))
}

/// Parses IDX bytes; `path` is only used in error messages.
pub fn parse_idx(bytes: &[u8], path: &Path) -> Result<IdxArray> {
    let (magic, dims, header, expected) = parse_header(bytes, path)?;
    check_length(bytes.len() - header, expected, &dims, path)?;
    Ok(IdxArray {
        magic,
        dims,
        data: bytes[header..].to_vec(),
    })
}

fn check_length(have: usize, expected: usize, dims: &[usize], path: &Path) -> Result<()> {
    if have == expected {
        return Ok(());
    }
    let what = if have < expected {
        "truncated"
    } else {
        "has trailing bytes"
    };
    Err(DataError::format(
        path,
        format!("IDX file {what}: dimensions {dims:?} need {expected} data bytes, found {have}"),
    ))
}

/// Inflates a gzip IDX file no further than its header's counts allow (plus one byte, to tell
/// trailing data), so a small file cannot expand to gigabytes before its error.
fn inflate_idx(raw: &[u8], path: &Path) -> Result<IdxArray> {
    let gz_err =
        |e: std::io::Error| DataError::format(path, format!("corrupt or truncated gzip data: {e}"));
    let mut reader = flate2::read::MultiGzDecoder::new(raw);
    let mut head = Vec::with_capacity(4 + 4 * 255);
    (&mut reader)
        .take(4)
        .read_to_end(&mut head)
        .map_err(gz_err)?;
    if head.len() == 4 {
        let dims = u64::from(head[3]) * 4;
        (&mut reader)
            .take(dims)
            .read_to_end(&mut head)
            .map_err(gz_err)?;
    }
    let (magic, dims, header, expected) = parse_header(&head, path)?;
    // Grows with what actually arrives, so a lying header costs no more than the data.
    let mut data = Vec::with_capacity(expected.min(raw.len().saturating_mul(4)));
    reader
        .take(expected as u64 + 1)
        .read_to_end(&mut data)
        .map_err(gz_err)?;
    debug_assert_eq!(head.len(), header);
    check_length(data.len(), expected, &dims, path)?;
    Ok(IdxArray { magic, dims, data })
}

/// Reads an IDX file (gzip or raw). A gzip file is inflated only up to the size its header
/// declares.
pub fn read_idx(path: impl AsRef<Path>) -> Result<IdxArray> {
    let path = path.as_ref();
    let raw = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    if raw.len() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b {
        inflate_idx(&raw, path)
    } else {
        parse_idx(&raw, path)
    }
}

/// Loads an image file (magic 2051) and a label file (magic 2049) into a data set of
/// `[1, rows, cols]` grey images; every label must be `< classes`.
pub fn load_idx_pair(
    images: impl AsRef<Path>,
    labels: impl AsRef<Path>,
    classes: usize,
) -> Result<InMemoryDataset> {
    let (images, labels) = (images.as_ref(), labels.as_ref());
    let img = read_idx(images)?;
    if img.magic != IDX_IMAGES_MAGIC {
        return Err(DataError::format(
            images,
            format!(
                "magic {} is not that of an IDX image file ({IDX_IMAGES_MAGIC})",
                img.magic
            ),
        ));
    }
    let lab = read_idx(labels)?;
    if lab.magic != IDX_LABELS_MAGIC {
        return Err(DataError::format(
            labels,
            format!(
                "magic {} is not that of an IDX label file ({IDX_LABELS_MAGIC})",
                lab.magic
            ),
        ));
    }
    let (n, rows, cols) = (img.dims[0], img.dims[1], img.dims[2]);
    if lab.dims[0] != n {
        return Err(DataError::format(
            labels,
            format!(
                "{} labels for {n} images in {}",
                lab.dims[0],
                images.display()
            ),
        ));
    }
    if let Some((i, &l)) = lab
        .data
        .iter()
        .enumerate()
        .find(|&(_, &l)| l as usize >= classes)
    {
        return Err(DataError::format(
            labels,
            format!("label {l} of sample {i} is not below {classes}"),
        ));
    }
    let labels_u32 = lab.data.iter().map(|&l| l as u32).collect();
    InMemoryDataset::new(img.data, labels_u32, (1, rows, cols), classes)
}

/// Finds `stem` in `dir` under its usual spellings: `stem`, `stem.gz`, and the variant with
/// `.` instead of the last `-` (`train-images.idx3-ubyte`) that some mirrors use.
pub(crate) fn find_idx_file(dir: &Path, stem: &str) -> Option<PathBuf> {
    let dotted = match stem.rfind("-idx") {
        Some(p) => format!("{}.{}", &stem[..p], &stem[p + 1..]),
        None => stem.to_string(),
    };
    [
        stem.to_string(),
        format!("{stem}.gz"),
        dotted.clone(),
        format!("{dotted}.gz"),
    ]
    .into_iter()
    .map(|name| dir.join(name))
    .find(|p| p.is_file())
}

/// The standard MNIST / Fashion-MNIST file stems for a split: `(images, labels)`.
pub fn idx_file_stems(split: Split) -> (&'static str, &'static str) {
    match split {
        Split::Train => ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
        Split::Test => ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
    }
}

/// Loads MNIST or Fashion-MNIST from a folder holding the four standard files
/// (`train-images-idx3-ubyte[.gz]`, `train-labels-idx1-ubyte[.gz]`, `t10k-…`).
pub fn load_idx_dir(dir: impl AsRef<Path>, split: Split) -> Result<InMemoryDataset> {
    let dir = dir.as_ref();
    let (img_stem, lab_stem) = idx_file_stems(split);
    let find = |stem: &str| {
        find_idx_file(dir, stem).ok_or_else(|| {
            DataError::io(
                dir.join(format!("{stem}[.gz]")),
                std::io::Error::new(std::io::ErrorKind::NotFound, "IDX file not found"),
            )
        })
    };
    let images = find(img_stem)?;
    let labels = find(lab_stem)?;
    load_idx_pair(images, labels, 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(magic: u32, dims: &[u32]) -> Vec<u8> {
        let mut v = magic.to_be_bytes().to_vec();
        for d in dims {
            v.extend_from_slice(&d.to_be_bytes());
        }
        v
    }

    #[test]
    fn parses_a_small_array() {
        let mut bytes = header(IDX_IMAGES_MAGIC, &[2, 1, 3]);
        bytes.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        let a = parse_idx(&bytes, Path::new("x")).unwrap();
        assert_eq!(a.dims, vec![2, 1, 3]);
        assert_eq!(a.data, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn rejects_bad_type_and_short_headers() {
        let bytes = header(0x0000_0d03, &[1, 1, 1]);
        assert!(parse_idx(&bytes, Path::new("x")).is_err());
        assert!(parse_idx(&[0, 0, 8], Path::new("x")).is_err());
        assert!(parse_idx(&[0, 0, 8, 3, 0, 0], Path::new("x")).is_err());
    }

    /// A header that declares more than the cap is refused before anything is inflated; one
    /// with trailing data is refused with the file's name (the memory bound is checked in
    /// `tests/gzip_bomb.rs`, under a counting allocator).
    #[test]
    fn oversized_and_trailing_gzip_data_are_refused() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t10k-images-idx3-ubyte.gz");
        let gz = |bytes: &[u8]| {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(bytes).unwrap();
            gz.finish().unwrap()
        };
        let mut bytes = header(IDX_IMAGES_MAGIC, &[2, 1, 3]);
        bytes.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        std::fs::write(&path, gz(&bytes)).unwrap();
        assert_eq!(read_idx(&path).unwrap().data, vec![1, 2, 3, 4, 5, 6]);
        bytes.push(7);
        std::fs::write(&path, gz(&bytes)).unwrap();
        let err = read_idx(&path).unwrap_err().to_string();
        assert!(
            err.contains("trailing bytes") && err.contains("t10k-images"),
            "{err}"
        );
        std::fs::write(&path, gz(&header(IDX_IMAGES_MAGIC, &[60000, 65536, 65536]))).unwrap();
        let err = read_idx(&path).unwrap_err().to_string();
        assert!(err.contains("declare more than"), "{err}");
        std::fs::write(&path, &gz(&bytes)[..20]).unwrap();
        assert!(read_idx(&path).is_err());
    }

    #[test]
    fn dotted_names_are_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("train-images.idx3-ubyte"), b"").unwrap();
        let found = find_idx_file(dir.path(), "train-images-idx3-ubyte").unwrap();
        assert!(found.ends_with("train-images.idx3-ubyte"));
    }
}
