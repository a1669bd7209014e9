//! A minimal reader for MATLAB 5 (Level 5, also written as "v7" with compression) MAT-files.
//!
//! It reads the top-level numeric arrays (`miMATRIX` elements, directly or inside zlib
//! `miCOMPRESSED` elements) of real `uint8`, `double` and the other numeric classes, which is
//! all the SVHN cropped-digit files contain. Cell, struct, char, sparse and complex arrays are
//! skipped or rejected; MAT v7.3 files (HDF5) are rejected with a clear message.
//! Reference: MathWorks, "MAT-File Format", section "Level 5 MAT-File Format".

use std::io::Read;
use std::path::Path;

use crate::error::{DataError, Result};

const MI_INT8: u32 = 1;
const MI_UINT8: u32 = 2;
const MI_INT16: u32 = 3;
const MI_UINT16: u32 = 4;
const MI_INT32: u32 = 5;
const MI_UINT32: u32 = 6;
const MI_SINGLE: u32 = 7;
const MI_DOUBLE: u32 = 9;
const MI_INT64: u32 = 12;
const MI_UINT64: u32 = 13;
const MI_MATRIX: u32 = 14;
const MI_COMPRESSED: u32 = 15;

/// The numeric values of one array, in MATLAB's column-major order.
#[derive(Debug, Clone, PartialEq)]
pub enum MatData {
    /// Stored as `miUINT8` (kept as bytes to spare memory on large image arrays).
    U8(Vec<u8>),
    /// Any other numeric storage type, widened to `f64`.
    F64(Vec<f64>),
}

impl MatData {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            MatData::U8(v) => v.len(),
            MatData::F64(v) => v.len(),
        }
    }

    /// `true` when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as `f64`.
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        match self {
            MatData::U8(v) => v.get(i).map(|&x| x as f64),
            MatData::F64(v) => v.get(i).copied(),
        }
    }
}

/// One top-level numeric array of a MAT-file.
#[derive(Debug, Clone, PartialEq)]
pub struct MatArray {
    /// The variable name.
    pub name: String,
    /// MATLAB class code (6 = double, 9 = uint8, …).
    pub class: u8,
    /// Dimensions, as MATLAB reports them (column-major).
    pub dims: Vec<usize>,
    /// The values, column-major.
    pub data: MatData,
}

/// Byte order of the file.
#[derive(Clone, Copy)]
enum Endian {
    Little,
    Big,
}

impl Endian {
    fn u32(self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        match self {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        }
    }
}

struct Parser<'p> {
    path: &'p Path,
    endian: Endian,
}

/// One data element: its type and payload.
struct Element<'a> {
    ty: u32,
    data: &'a [u8],
}

impl Parser<'_> {
    fn err(&self, reason: impl Into<String>) -> DataError {
        DataError::format(self.path, format!("MAT-file: {}", reason.into()))
    }

    /// Reads the element at `at`; returns it and the offset of the next one.
    fn element<'a>(&self, buf: &'a [u8], at: usize) -> Result<(Element<'a>, usize)> {
        if buf.len() < at + 8 {
            return Err(self.err(format!("truncated element tag at byte {at}")));
        }
        let first = self.endian.u32(&buf[at..]);
        if first >> 16 != 0 {
            // Small data element: type and size share the first word, data fits in 4 bytes.
            let (ty, n) = (first & 0xffff, (first >> 16) as usize);
            if n > 4 {
                return Err(self.err(format!("small element at byte {at} claims {n} bytes")));
            }
            return Ok((
                Element {
                    ty,
                    data: &buf[at + 4..at + 4 + n],
                },
                at + 8,
            ));
        }
        let n = self.endian.u32(&buf[at + 4..]) as usize;
        let start = at + 8;
        let end = start
            .checked_add(n)
            .filter(|&e| e <= buf.len())
            .ok_or_else(|| {
                self.err(format!(
                    "element at byte {at} claims {n} bytes, only {} remain (file truncated?)",
                    buf.len().saturating_sub(start)
                ))
            })?;
        // Uncompressed elements are padded to 8 bytes; compressed ones are not.
        let next = if first == MI_COMPRESSED {
            end
        } else {
            (start + n.div_ceil(8) * 8).min(buf.len())
        };
        Ok((
            Element {
                ty: first,
                data: &buf[start..end],
            },
            next,
        ))
    }

    fn numeric(&self, el: &Element, what: &str) -> Result<MatData> {
        let d = el.data;
        let width = match el.ty {
            MI_INT8 | MI_UINT8 => 1,
            MI_INT16 | MI_UINT16 => 2,
            MI_INT32 | MI_UINT32 | MI_SINGLE => 4,
            MI_DOUBLE | MI_INT64 | MI_UINT64 => 8,
            t => return Err(self.err(format!("{what}: unsupported data type {t}"))),
        };
        if !d.len().is_multiple_of(width) {
            return Err(self.err(format!(
                "{what}: {} bytes is not a whole number of {width}-byte values",
                d.len()
            )));
        }
        if el.ty == MI_UINT8 {
            return Ok(MatData::U8(d.to_vec()));
        }
        let le = matches!(self.endian, Endian::Little);
        let values = d
            .chunks_exact(width)
            .map(|c| {
                let mut b = [0u8; 8];
                if le {
                    b[..width].copy_from_slice(c);
                } else {
                    for (k, &x) in c.iter().rev().enumerate() {
                        b[k] = x;
                    }
                }
                // b now holds the value's little-endian bytes.
                match el.ty {
                    MI_INT8 => b[0] as i8 as f64,
                    MI_INT16 => i16::from_le_bytes([b[0], b[1]]) as f64,
                    MI_UINT16 => u16::from_le_bytes([b[0], b[1]]) as f64,
                    MI_INT32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                    MI_UINT32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                    MI_SINGLE => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                    MI_INT64 => i64::from_le_bytes(b) as f64,
                    MI_UINT64 => u64::from_le_bytes(b) as f64,
                    _ => f64::from_le_bytes(b),
                }
            })
            .collect();
        Ok(MatData::F64(values))
    }

    /// Parses the payload of an `miMATRIX`; `None` for arrays this reader skips.
    fn matrix(&self, data: &[u8]) -> Result<Option<MatArray>> {
        if data.is_empty() {
            return Ok(None);
        }
        let (flags, at) = self.element(data, 0)?;
        if flags.ty != MI_UINT32 || flags.data.len() < 8 {
            return Err(self.err("matrix without a valid array-flags sub-element"));
        }
        let word = self.endian.u32(flags.data);
        let class = (word & 0xff) as u8;
        let complex = word & 0x800 != 0;
        // Numeric classes: 6 double, 7 single, 8..=15 int8..uint64.
        if !(6..=15).contains(&class) {
            return Ok(None);
        }
        if complex {
            return Err(self.err("complex arrays are not supported"));
        }
        let (dims_el, at) = self.element(data, at)?;
        if dims_el.ty != MI_INT32
            || !dims_el.data.len().is_multiple_of(4)
            || dims_el.data.is_empty()
        {
            return Err(self.err("matrix without a valid dimensions sub-element"));
        }
        let dims: Vec<usize> = dims_el
            .data
            .chunks_exact(4)
            .map(|c| self.endian.u32(c) as usize)
            .collect();
        let (name_el, at) = self.element(data, at)?;
        let name = String::from_utf8_lossy(name_el.data).into_owned();
        let (real, _) = self.element(data, at)?;
        let values = self.numeric(&real, &format!("variable `{name}`"))?;
        let count = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| self.err(format!("variable `{name}`: dimensions overflow")))?;
        if values.len() != count {
            return Err(self.err(format!(
                "variable `{name}`: dimensions {dims:?} need {count} values, found {}",
                values.len()
            )));
        }
        Ok(Some(MatArray {
            name,
            class,
            dims,
            data: values,
        }))
    }

    /// Inflates a compressed element no further than the one element its first tag declares
    /// (padded to 8 bytes), so a small file cannot expand to gigabytes before its error.
    fn inflate(&self, data: &[u8], at: usize) -> Result<Vec<u8>> {
        let corrupt =
            |e: std::io::Error| self.err(format!("corrupt compressed element at byte {at}: {e}"));
        let mut reader = flate2::read::ZlibDecoder::new(data);
        let mut inflated = Vec::with_capacity(8);
        (&mut reader)
            .take(8)
            .read_to_end(&mut inflated)
            .map_err(corrupt)?;
        if inflated.len() < 8 {
            return Err(self.err(format!(
                "compressed element at byte {at} holds no complete element tag"
            )));
        }
        let first = self.endian.u32(&inflated);
        let declared = if first >> 16 != 0 {
            0
        } else {
            (self.endian.u32(&inflated[4..]) as usize).div_ceil(8) * 8
        };
        // Grows with what actually arrives; one byte past the element tells trailing data.
        reader
            .take(declared as u64 + 1)
            .read_to_end(&mut inflated)
            .map_err(corrupt)?;
        if inflated.len() > 8 + declared {
            return Err(self.err(format!(
                "compressed element at byte {at} holds more than the {declared} bytes its \
                 element declares"
            )));
        }
        Ok(inflated)
    }

    fn elements(&self, buf: &[u8], out: &mut Vec<MatArray>, depth: usize) -> Result<()> {
        let mut at = 0;
        while at < buf.len() {
            let (el, next) = self.element(buf, at)?;
            match el.ty {
                MI_MATRIX => out.extend(self.matrix(el.data)?),
                MI_COMPRESSED if depth == 0 => {
                    let inflated = self.inflate(el.data, at)?;
                    self.elements(&inflated, out, depth + 1)?;
                }
                t => {
                    return Err(self.err(format!(
                        "unexpected top-level element type {t} at byte {at}"
                    )));
                }
            }
            at = next;
        }
        Ok(())
    }
}

/// Parses the bytes of a MAT-file; `path` is only used in error messages.
pub fn parse_mat(bytes: &[u8], path: &Path) -> Result<Vec<MatArray>> {
    let bad = |r: &str| DataError::format(path, format!("MAT-file: {r}"));
    if bytes.len() < 128 {
        return Err(bad("shorter than the 128-byte header"));
    }
    let text = String::from_utf8_lossy(&bytes[..116]);
    if text.starts_with("MATLAB 7.3") || bytes.get(512..516) == Some(b"\x89HDF") {
        return Err(bad(
            "MATLAB v7.3 (HDF5) files are not supported; re-save with `save -v7` \
             (SVHN's published files are v5 and load directly)",
        ));
    }
    if !text.starts_with("MATLAB") {
        return Err(bad("header does not start with `MATLAB` (not a MAT-file)"));
    }
    let endian = match &bytes[126..128] {
        b"IM" => Endian::Little,
        b"MI" => Endian::Big,
        other => {
            return Err(bad(&format!(
                "bad endian indicator {other:?} (expected `IM` or `MI`)"
            )));
        }
    };
    let parser = Parser { path, endian };
    let mut arrays = Vec::new();
    parser.elements(&bytes[128..], &mut arrays, 0)?;
    Ok(arrays)
}

/// Reads the top-level numeric arrays of a MAT-file.
pub fn read_mat(path: impl AsRef<Path>) -> Result<Vec<MatArray>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    parse_mat(&bytes, path)
}
