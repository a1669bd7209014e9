//! Minimal, robust reader/writer for NumPy `.npy` files holding little-endian float arrays.
//!
//! Reads format versions 1.0, 2.0 and 3.0 with dtype `<f4` (or `<f8`, converted to `f32`),
//! C order, any rank. Writes version 1.0 `<f4`, `<f8` or `<i8`, atomically (temporary file +
//! rename).
//!
//! ```
//! use gmm_minibatch::npy;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("p.npy");
//! npy::write_points(&path, &[[1.0, 2.0], [3.0, 4.0]]).unwrap();
//! assert_eq!(npy::read_points(&path).unwrap(), vec![[1.0, 2.0], [3.0, 4.0]]);
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Errors of the `.npy` reader/writer; each names the file (or `<bytes>` for in-memory input).
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// Underlying I/O failure.
    #[error("{path}: i/o error: {source}")]
    Io {
        /// File involved.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with `\x93NUMPY`.
    #[error("{path}: not a .npy file (bad magic)")]
    BadMagic {
        /// File involved.
        path: PathBuf,
    },
    /// Unknown format version.
    #[error("{path}: unsupported .npy version {major}.{minor}")]
    UnsupportedVersion {
        /// File involved.
        path: PathBuf,
        /// Major version byte.
        major: u8,
        /// Minor version byte.
        minor: u8,
    },
    /// The header dictionary could not be parsed.
    #[error("{path}: bad header: {reason}")]
    BadHeader {
        /// File involved.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// dtype other than little-endian f4/f8.
    #[error("{path}: unsupported dtype {descr:?} (expected '<f4' or '<f8')")]
    UnsupportedDtype {
        /// File involved.
        path: PathBuf,
        /// The `descr` entry found.
        descr: String,
    },
    /// Fortran-ordered data.
    #[error("{path}: fortran_order=True is not supported")]
    FortranOrder {
        /// File involved.
        path: PathBuf,
    },
    /// Shape does not match what the caller expects.
    #[error("{path}: bad shape {shape:?}: {expected}")]
    BadShape {
        /// File involved.
        path: PathBuf,
        /// Shape found.
        shape: Vec<usize>,
        /// Expected shape, in words.
        expected: String,
    },
    /// Fewer (or more) data bytes than the shape requires.
    #[error("{path}: data has {got} bytes, shape {shape:?} needs {expected}")]
    Truncated {
        /// File involved.
        path: PathBuf,
        /// Shape from the header.
        shape: Vec<usize>,
        /// Bytes required.
        expected: u64,
        /// Bytes present.
        got: u64,
    },
}

/// A dense C-order float array read from a `.npy` file.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyArray {
    /// Shape (empty for a scalar).
    pub shape: Vec<usize>,
    /// Row-major data, `shape.iter().product()` values.
    pub data: Vec<f32>,
}

struct Header {
    shape: Vec<usize>,
    item: usize,
}

/// Reads any-rank `<f4`/`<f8` array from `path` (f8 is converted to f32).
pub fn read_f32(path: impl AsRef<Path>) -> Result<NpyArray, NpyError> {
    let path = path.as_ref();
    let io = |source| NpyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::io::BufReader::new(std::fs::File::open(path).map_err(io)?);
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io)?;
    parse_f32_at(&bytes, path)
}

/// Parses the bytes of a `.npy` file (see [`read_f32`]).
pub fn parse_f32(bytes: &[u8]) -> Result<NpyArray, NpyError> {
    parse_f32_at(bytes, Path::new("<bytes>"))
}

fn parse_f32_at(bytes: &[u8], path: &Path) -> Result<NpyArray, NpyError> {
    let (header, offset) = parse_header(bytes, path)?;
    let count = header
        .shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| NpyError::BadHeader {
            path: path.to_path_buf(),
            reason: format!("shape {:?} overflows", header.shape),
        })?;
    let expected = (count as u64)
        .checked_mul(header.item as u64)
        .ok_or_else(|| NpyError::BadHeader {
            path: path.to_path_buf(),
            reason: format!("shape {:?} overflows", header.shape),
        })?;
    let got = (bytes.len() - offset) as u64;
    if got != expected {
        return Err(NpyError::Truncated {
            path: path.to_path_buf(),
            shape: header.shape,
            expected,
            got,
        });
    }
    let body = &bytes[offset..];
    let data = if header.item == 4 {
        body.chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    } else {
        body.chunks_exact(8)
            .map(|b| {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                f64::from_le_bytes(a) as f32
            })
            .collect()
    };
    Ok(NpyArray {
        shape: header.shape,
        data,
    })
}

/// Start and length of the header text, from the first 10 or 12 bytes.
fn preamble(bytes: &[u8], path: &Path) -> Result<(usize, usize), NpyError> {
    let bad = |reason: &str| NpyError::BadHeader {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    if bytes.len() < 8 || &bytes[..6] != MAGIC {
        return Err(NpyError::BadMagic {
            path: path.to_path_buf(),
        });
    }
    let (major, minor) = (bytes[6], bytes[7]);
    match major {
        1 => {
            if bytes.len() < 10 {
                return Err(bad("file ends inside the header length"));
            }
            Ok((10, u16::from_le_bytes([bytes[8], bytes[9]]) as usize))
        }
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(bad("file ends inside the header length"));
            }
            let l = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            Ok((12, l as usize))
        }
        _ => Err(NpyError::UnsupportedVersion {
            path: path.to_path_buf(),
            major,
            minor,
        }),
    }
}

fn parse_header(bytes: &[u8], path: &Path) -> Result<(Header, usize), NpyError> {
    let p = || path.to_path_buf();
    let bad = |reason: &str| NpyError::BadHeader {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    let (start, len) = preamble(bytes, path)?;
    let end = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| bad("file ends inside the header"))?;
    let text = std::str::from_utf8(&bytes[start..end]).map_err(|_| bad("header is not UTF-8"))?;
    let descr = dict_value(text, "descr").ok_or_else(|| bad("missing 'descr'"))?;
    let descr = descr
        .trim()
        .trim_matches(|c| c == '\'' || c == '"')
        .to_string();
    let item = match descr.as_str() {
        "<f4" => 4,
        "<f8" => 8,
        _ => return Err(NpyError::UnsupportedDtype { path: p(), descr }),
    };
    let fortran =
        dict_value(text, "fortran_order").ok_or_else(|| bad("missing 'fortran_order'"))?;
    match fortran.trim() {
        "False" => {}
        "True" => return Err(NpyError::FortranOrder { path: p() }),
        other => return Err(bad(&format!("fortran_order = {other:?}"))),
    }
    let shape_text = dict_value(text, "shape").ok_or_else(|| bad("missing 'shape'"))?;
    let inner = shape_text
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| bad("shape is not a tuple"))?;
    let mut shape = Vec::new();
    for part in inner.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let d = part
            .trim_end_matches('L')
            .parse::<usize>()
            .map_err(|_| bad(&format!("bad dimension {part:?}")))?;
        shape.push(d);
    }
    Ok((Header { shape, item }, end))
}

/// Value text of `'key': value` in the header dict (up to the next top-level comma or `}`).
fn dict_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let pat1 = format!("'{key}'");
    let pat2 = format!("\"{key}\"");
    let pos = text.find(&pat1).or_else(|| text.find(&pat2))? + pat1.len();
    let rest = text[pos..].trim_start().strip_prefix(':')?;
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(&rest[..i]),
            _ => {}
        }
    }
    None
}

/// Reads an `[N, 2]` array of points (column 0 = mu, column 1 = sigma). Streams the file
/// into the result (no second copy of it in memory).
pub fn read_points(path: impl AsRef<Path>) -> Result<Vec<[f32; 2]>, NpyError> {
    let path = path.as_ref();
    let io = |source| NpyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let file_len = file.metadata().map_err(io)?.len();
    let mut file = std::io::BufReader::with_capacity(1 << 20, file);
    // Preamble, then the header text.
    let mut head = vec![0u8; file_len.min(12) as usize];
    file.read_exact(&mut head).map_err(io)?;
    let (start, len) = preamble(&head, path)?;
    let end = start + len;
    if (end as u64) > file_len {
        return Err(NpyError::BadHeader {
            path: path.to_path_buf(),
            reason: "file ends inside the header".into(),
        });
    }
    let have = head.len();
    head.resize(end.max(have), 0);
    if end > have {
        file.read_exact(&mut head[have..]).map_err(io)?;
    }
    let (header, offset) = parse_header(&head, path)?;
    if header.shape.len() != 2 || header.shape[1] != 2 {
        return Err(NpyError::BadShape {
            path: path.to_path_buf(),
            shape: header.shape,
            expected: "[N, 2]".into(),
        });
    }
    let n = header.shape[0];
    let expected = (n as u64)
        .checked_mul(2 * header.item as u64)
        .ok_or_else(|| NpyError::BadHeader {
            path: path.to_path_buf(),
            reason: format!("shape {:?} overflows", header.shape),
        })?;
    let got = file_len - offset as u64;
    if got != expected {
        return Err(NpyError::Truncated {
            path: path.to_path_buf(),
            shape: header.shape,
            expected,
            got,
        });
    }
    // Whatever of the data the header read took (none unless the file ends there).
    let row = 2 * header.item;
    let mut buf = head.split_off(offset);
    let mut out = Vec::with_capacity(n);
    let block = (1 << 20) / row * row;
    while out.len() < n {
        let want = ((n - out.len()) * row).min(block);
        let have = buf.len();
        buf.resize(want.max(have), 0);
        file.read_exact(&mut buf[have..]).map_err(io)?;
        if header.item == 4 {
            out.extend(buf.chunks_exact(8).map(|b| {
                [
                    f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                    f32::from_le_bytes([b[4], b[5], b[6], b[7]]),
                ]
            }));
        } else {
            let f = |b: &[u8]| {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                f64::from_le_bytes(a) as f32
            };
            out.extend(buf.chunks_exact(16).map(|b| [f(&b[..8]), f(&b[8..])]));
        }
        buf.clear();
    }
    Ok(out)
}

/// An element type the writer stores: its NumPy `descr` and its little-endian bytes.
pub trait Element: Copy + sealed::Sealed {
    /// NumPy's type string, e.g. `<f4`.
    const DESCR: &'static str;
    /// Appends the value's little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i64 {}
}

impl Element for f32 {
    const DESCR: &'static str = "<f4";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Element for f64 {
    const DESCR: &'static str = "<f8";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Element for i64 {
    const DESCR: &'static str = "<i8";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// Encodes a `<f4` C-order array as `.npy` (version 1.0) bytes.
///
/// Panics never; returns `BadShape` if `shape` does not match `data.len()`.
pub fn encode_f32(shape: &[usize], data: &[f32]) -> Result<Vec<u8>, NpyError> {
    encode(shape, data)
}

/// Encodes a C-order array of `<f4`, `<f8` or `<i8` values as `.npy` (version 1.0) bytes.
///
/// Panics never; returns `BadShape` if `shape` does not match `data.len()`.
pub fn encode<T: Element>(shape: &[usize], data: &[T]) -> Result<Vec<u8>, NpyError> {
    let count: Option<usize> = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if count != Some(data.len()) {
        return Err(NpyError::BadShape {
            path: PathBuf::from("<bytes>"),
            shape: shape.to_vec(),
            expected: format!("{} values", data.len()),
        });
    }
    let dims = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {dims}, }}",
        T::DESCR
    );
    // Pad so that magic + version + len + header + '\n' is a multiple of 64.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    if header.len() > u16::MAX as usize {
        return Err(NpyError::BadShape {
            path: PathBuf::from("<bytes>"),
            shape: shape.to_vec(),
            expected: "a header shorter than 65535 bytes".into(),
        });
    }
    let mut out = Vec::with_capacity(10 + header.len() + std::mem::size_of_val(data));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &v in data {
        v.put(&mut out);
    }
    Ok(out)
}

/// Writes a `<f4` array atomically (temporary file in the same directory, then rename).
pub fn write_f32(path: impl AsRef<Path>, shape: &[usize], data: &[f32]) -> Result<(), NpyError> {
    write(path, shape, data)
}

/// Writes a `<f4`, `<f8` or `<i8` array atomically (temporary file in the same directory, then
/// rename).
pub fn write<T: Element>(
    path: impl AsRef<Path>,
    shape: &[usize],
    data: &[T],
) -> Result<(), NpyError> {
    let path = path.as_ref();
    let bytes = encode(shape, data).map_err(|e| match e {
        NpyError::BadShape {
            shape, expected, ..
        } => NpyError::BadShape {
            path: path.to_path_buf(),
            shape,
            expected,
        },
        other => other,
    })?;
    // A replaced file keeps its permissions; the path named is the target's.
    bnn_io::write_atomic(path, &bytes, bnn_io::Replace::Always).map_err(|e| NpyError::Io {
        path: path.to_path_buf(),
        source: match e {
            bnn_io::Error::Io { source, .. } => source,
            other => std::io::Error::other(other.to_string()),
        },
    })
}

/// Writes points as an `[N, 2]` `<f4` array (atomically).
pub fn write_points(path: impl AsRef<Path>, points: &[[f32; 2]]) -> Result<(), NpyError> {
    let flat: Vec<f32> = points.iter().flat_map(|p| [p[0], p[1]]).collect();
    write_f32(path, &[points.len(), 2], &flat)
}

#[cfg(test)]
mod tests {
    /// The header names each element type and the payload is its little-endian bytes.
    #[test]
    fn encodes_f64_and_i64() {
        let b = super::encode(&[2], &[1.5f64, -2.0]).unwrap();
        let text = String::from_utf8_lossy(&b[10..b.len() - 16]).to_string();
        assert!(
            text.contains("'descr': '<f8'") && text.contains("(2,)"),
            "{text}"
        );
        assert_eq!(&b[b.len() - 16..b.len() - 8], &1.5f64.to_le_bytes());
        assert_eq!(b.len() % 64, 16);
        let b = super::encode(&[1, 1], &[-3i64]).unwrap();
        assert!(String::from_utf8_lossy(&b).contains("'<i8'"));
        assert_eq!(&b[b.len() - 8..], &(-3i64).to_le_bytes());
        assert!(super::encode(&[3], &[1i64]).is_err());
    }

    use super::*;

    #[test]
    fn round_trip_bytes() {
        let data: Vec<f32> = (0..6).map(|i| i as f32 * 0.5).collect();
        let bytes = encode_f32(&[3, 2], &data).unwrap();
        assert_eq!((bytes.len() - 4 * 6) % 64, 0);
        let arr = parse_f32(&bytes).unwrap();
        assert_eq!(arr.shape, vec![3, 2]);
        assert_eq!(arr.data, data);
        let one_d = parse_f32(&encode_f32(&[6], &data).unwrap()).unwrap();
        assert_eq!(one_d.shape, vec![6]);
    }

    /// Replaces the first occurrence of `from` by the same-length `to`.
    fn replace(buf: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
        let mut out = buf.to_vec();
        let i = buf.windows(from.len()).position(|w| w == from).unwrap();
        out[i..i + to.len()].copy_from_slice(to);
        out
    }

    #[test]
    fn errors() {
        let good = encode_f32(&[2, 2], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!(matches!(
            parse_f32(b"NOTNPY.."),
            Err(NpyError::BadMagic { .. })
        ));
        assert!(matches!(
            parse_f32(&good[..good.len() - 1]),
            Err(NpyError::Truncated { got: 15, .. })
        ));
        let mut v9 = good.clone();
        v9[6] = 9;
        assert!(matches!(
            parse_f32(&v9),
            Err(NpyError::UnsupportedVersion { major: 9, .. })
        ));
        assert!(matches!(
            parse_f32(&replace(&good, b"<f4", b">f4")),
            Err(NpyError::UnsupportedDtype { .. })
        ));
        assert!(matches!(
            parse_f32(&replace(&good, b"False", b"True ")),
            Err(NpyError::FortranOrder { .. })
        ));
        assert!(matches!(
            parse_f32(&good[..9]),
            Err(NpyError::BadHeader { .. })
        ));
    }

    #[test]
    fn reads_f8_version2() {
        // Hand-built v2.0 file with an f8 payload.
        let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2), }\n";
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&[2, 0]);
        b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(&1.5f64.to_le_bytes());
        b.extend_from_slice(&(-2.0f64).to_le_bytes());
        let arr = parse_f32(&b).unwrap();
        assert_eq!(arr.data, vec![1.5, -2.0]);
    }

    #[test]
    fn points_file_round_trip_and_shape_check() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        let pts = vec![[0.25f32, 1e-3], [-1.0, 2.0], [f32::MIN_POSITIVE, 7.0]];
        write_points(&p, &pts).unwrap();
        assert_eq!(read_points(&p).unwrap(), pts);
        write_f32(&p, &[3], &[1.0, 2.0, 3.0]).unwrap();
        assert!(matches!(read_points(&p), Err(NpyError::BadShape { .. })));
        assert!(matches!(
            write_f32(&p, &[4], &[1.0]),
            Err(NpyError::BadShape { .. })
        ));
        assert!(matches!(
            read_points(dir.path().join("missing.npy")),
            Err(NpyError::Io { .. })
        ));
        // Streaming reader: many blocks, truncation, f8 payloads, bad magic.
        let many: Vec<[f32; 2]> = (0..300_000).map(|i| [i as f32, -(i as f32)]).collect();
        write_points(&p, &many).unwrap();
        assert_eq!(read_points(&p).unwrap(), many);
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 4]).unwrap();
        assert!(matches!(read_points(&p), Err(NpyError::Truncated { .. })));
        let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }\n";
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&[2, 0]);
        b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        for v in [1.5f64, -2.0, 3.25, 4.0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        std::fs::write(&p, &b).unwrap();
        assert_eq!(read_points(&p).unwrap(), vec![[1.5, -2.0], [3.25, 4.0]]);
        std::fs::write(&p, b"\x93NUMP").unwrap();
        assert!(matches!(read_points(&p), Err(NpyError::BadMagic { .. })));
        std::fs::write(&p, &b[..20]).unwrap();
        assert!(matches!(read_points(&p), Err(NpyError::BadHeader { .. })));
    }

    /// A shape whose element count fits but whose byte count does not (found by
    /// `cargo xtask fuzz npy`): an error, where it used to overflow a multiplication.
    #[test]
    fn a_shape_beyond_u64_bytes_is_an_error() {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }";
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        assert!(matches!(parse_f32(&b), Err(NpyError::BadHeader { .. })));
    }
}
