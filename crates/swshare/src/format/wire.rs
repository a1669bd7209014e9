//! The primitive encodings every section is built from (`docs/swb-format.md`, "Primitives").
//!
//! - `u8`, `i8`: one byte.
//! - `f32`, `f64`: IEEE 754 bits, little endian (4 and 8 bytes).
//! - varint (unsigned integers, lengths, variant tags): a value below 251 is one byte; else a
//!   tag byte and the value little endian: 251 + `u16`, 252 + `u32`, 253 + `u64`. This is the
//!   integer encoding of bincode 2's standard configuration, so files written by the earlier
//!   bincode-derived writer read unchanged. The writer always uses the shortest form; the
//!   reader refuses longer forms, tags 254 and 255, and values above the field's type.
//! - bytes and text: varint length, then the bytes (text is UTF-8).
//! - a sequence: varint count, then the elements.
//!
//! [`Reader`] checks every read against the bytes left, so a corrupted length becomes an
//! error naming the section and the file offset, never an allocation beyond the file's size.

use super::error::FormatError;

/// Largest value stored in one varint byte.
const ONE_BYTE_MAX: u8 = 250;
const TAG_U16: u8 = 251;
const TAG_U32: u8 = 252;
const TAG_U64: u8 = 253;

/// Appends `v` as a varint (shortest form).
pub(crate) fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v <= u64::from(ONE_BYTE_MAX) {
        out.push(v as u8);
    } else if let Ok(v) = u16::try_from(v) {
        out.push(TAG_U16);
        out.extend_from_slice(&v.to_le_bytes());
    } else if let Ok(v) = u32::try_from(v) {
        out.push(TAG_U32);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        out.push(TAG_U64);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Appends a length or count.
pub(crate) fn put_len(out: &mut Vec<u8>, n: usize) {
    put_varint(out, n as u64);
}

/// Appends bytes (or UTF-8 text) with their length.
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// Appends one `f32`.
pub(crate) fn put_f32(out: &mut Vec<u8>, v: f32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a sequence of `f32` with its count.
pub(crate) fn put_f32s(out: &mut Vec<u8>, values: &[f32]) {
    put_len(out, values.len());
    for &v in values {
        put_f32(out, v);
    }
}

/// Appends a shape: the count of dimensions, then each as a varint.
pub(crate) fn put_shape(out: &mut Vec<u8>, shape: &[usize]) {
    put_len(out, shape.len());
    for &d in shape {
        put_varint(out, d as u64);
    }
}

/// A bounds-checked cursor over a payload; errors name the current section and the byte
/// offset in the file.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// File offset of `bytes[0]`.
    base: usize,
    section: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `bytes`, which start at file offset `base`.
    pub(crate) fn new(bytes: &'a [u8], base: usize) -> Self {
        Self {
            bytes,
            pos: 0,
            base,
            section: "payload",
        }
    }

    /// Names the section the following reads belong to.
    pub(crate) fn section(&mut self, section: &'static str) {
        self.section = section;
    }

    /// Current position as a file offset.
    pub(crate) fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// An error in the current section at the current offset.
    pub(crate) fn error(&self, detail: impl std::fmt::Display) -> FormatError {
        self.error_at(self.offset(), detail)
    }

    /// An error in the current section at `offset`.
    pub(crate) fn error_at(&self, offset: usize, detail: impl std::fmt::Display) -> FormatError {
        FormatError::Corrupt {
            section: self.section,
            detail: format!("at byte {offset}: {detail}"),
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], FormatError> {
        if n > self.remaining() {
            return Err(self.error(format!(
                "{what} needs {n} bytes, the payload has {} left",
                self.remaining()
            )));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], FormatError> {
        Ok(self.take(N, what)?.try_into().expect("took N bytes"))
    }

    /// One byte.
    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, FormatError> {
        Ok(self.array::<1>(what)?[0])
    }

    /// One `f32`.
    pub(crate) fn f32(&mut self, what: &str) -> Result<f32, FormatError> {
        Ok(f32::from_le_bytes(self.array(what)?))
    }

    /// One `f64`.
    pub(crate) fn f64(&mut self, what: &str) -> Result<f64, FormatError> {
        Ok(f64::from_le_bytes(self.array(what)?))
    }

    /// A varint no larger than `max`.
    pub(crate) fn varint(&mut self, what: &str, max: u64) -> Result<u64, FormatError> {
        let start = self.offset();
        let tag = self.u8(what)?;
        let (v, min) = match tag {
            0..=ONE_BYTE_MAX => (u64::from(tag), 0),
            TAG_U16 => (
                u64::from(u16::from_le_bytes(self.array(what)?)),
                u64::from(ONE_BYTE_MAX) + 1,
            ),
            TAG_U32 => (
                u64::from(u32::from_le_bytes(self.array(what)?)),
                u64::from(u16::MAX) + 1,
            ),
            TAG_U64 => (
                u64::from_le_bytes(self.array(what)?),
                u64::from(u32::MAX) + 1,
            ),
            _ => {
                return Err(self.error_at(start, format!("{what}: invalid varint tag {tag}")));
            }
        };
        if v < min {
            return Err(self.error_at(
                start,
                format!("{what}: varint {v} is not in its shortest form"),
            ));
        }
        if v > max {
            return Err(self.error_at(start, format!("{what}: {v} exceeds {max}")));
        }
        Ok(v)
    }

    /// A `u16` varint.
    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, FormatError> {
        Ok(self.varint(what, u64::from(u16::MAX))? as u16)
    }

    /// A `u32` varint.
    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, FormatError> {
        Ok(self.varint(what, u64::from(u32::MAX))? as u32)
    }

    /// A variant tag below `variants`.
    pub(crate) fn tag(&mut self, what: &str, variants: u32) -> Result<u32, FormatError> {
        let start = self.offset();
        let t = self.u32(what)?;
        if t >= variants {
            return Err(self.error_at(start, format!("unknown {what} tag {t}")));
        }
        Ok(t)
    }

    /// A count of elements that take at least `min_elem_bytes` each; refused when the bytes
    /// left cannot hold them, before anything is allocated.
    pub(crate) fn len(&mut self, what: &str, min_elem_bytes: usize) -> Result<usize, FormatError> {
        let start = self.offset();
        let n = self.varint(what, u64::MAX)?;
        let fits = usize::try_from(n)
            .ok()
            .filter(|&n| n.saturating_mul(min_elem_bytes) <= self.remaining());
        fits.ok_or_else(|| {
            self.error_at(
                start,
                format!(
                    "{what}: length {n} does not fit in the {} bytes left",
                    self.remaining()
                ),
            )
        })
    }

    /// Bytes with their length.
    pub(crate) fn bytes(&mut self, what: &str) -> Result<&'a [u8], FormatError> {
        let n = self.len(what, 1)?;
        self.take(n, what)
    }

    /// UTF-8 text with its length.
    pub(crate) fn text(&mut self, what: &str) -> Result<String, FormatError> {
        let start = self.offset();
        let b = self.bytes(what)?;
        String::from_utf8(b.to_vec())
            .map_err(|e| self.error_at(start, format!("{what} is not UTF-8: {e}")))
    }

    /// A sequence of `f32` with its count.
    pub(crate) fn f32s(&mut self, what: &str) -> Result<Vec<f32>, FormatError> {
        let n = self.len(what, 4)?;
        let b = self.take(4 * n, what)?;
        Ok(b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// A shape (count of dimensions, each a varint that fits `usize`).
    pub(crate) fn shape(&mut self, what: &str) -> Result<Vec<usize>, FormatError> {
        let n = self.len(what, 1)?;
        (0..n)
            .map(|_| Ok(self.varint(what, usize::MAX as u64)? as usize))
            .collect()
    }

    /// Refuses bytes left after the last section.
    pub(crate) fn finish(self) -> Result<(), FormatError> {
        match self.remaining() {
            0 => Ok(()),
            left => Err(FormatError::Corrupt {
                section: "payload",
                detail: format!(
                    "at byte {}: {left} unread bytes after the last section",
                    self.offset()
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_boundaries_match_the_spec() {
        let cases: [(u64, &[u8]); 8] = [
            (0, &[0]),
            (250, &[250]),
            (251, &[251, 251, 0]),
            (65535, &[251, 255, 255]),
            (65536, &[252, 0, 0, 1, 0]),
            (u64::from(u32::MAX), &[252, 255, 255, 255, 255]),
            (1 << 32, &[253, 0, 0, 0, 0, 1, 0, 0, 0]),
            (u64::MAX, &[253, 255, 255, 255, 255, 255, 255, 255, 255]),
        ];
        for (v, bytes) in cases {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out, bytes, "{v}");
            let mut r = Reader::new(&out, 0);
            assert_eq!(r.varint("v", u64::MAX).unwrap(), v);
            r.finish().unwrap();
        }
    }

    #[test]
    fn long_forms_bad_tags_and_short_input_are_errors_with_offsets() {
        for bad in [
            &[251u8, 5, 0][..],
            &[252, 0, 1, 0, 0],
            &[253, 0, 0, 0, 0, 1, 0, 0, 0][..8],
            &[254],
            &[255],
            &[],
        ] {
            let mut r = Reader::new(bad, 100);
            r.section("meta");
            let err = r.varint("length", u64::MAX).unwrap_err().to_string();
            assert!(err.contains("corrupt meta section: at byte 10"), "{err}");
        }
        let mut r = Reader::new(&[251, 0, 1], 0);
        assert!(r.u8("x").is_ok());
        let mut r = Reader::new(&[252, 0, 0, 1, 0], 0);
        assert!(r.u16("tag").is_err());
        // A count the bytes left cannot hold is refused before allocating.
        let mut r = Reader::new(&[253, 0, 0, 0, 0, 0, 0, 0, 16, 1, 2], 0);
        assert!(
            r.f32s("values")
                .unwrap_err()
                .to_string()
                .contains("does not fit")
        );
    }

    #[test]
    fn bytes_text_and_floats_round_trip() {
        let mut out = Vec::new();
        put_bytes(&mut out, "µ-path".as_bytes());
        put_f32s(&mut out, &[1.5, -0.0, f32::MIN_POSITIVE]);
        put_shape(&mut out, &[3, 70000]);
        out.extend_from_slice(&2.5f64.to_le_bytes());
        let mut r = Reader::new(&out, 0);
        assert_eq!(r.text("path").unwrap(), "µ-path");
        assert_eq!(r.f32s("v").unwrap(), vec![1.5, -0.0, f32::MIN_POSITIVE]);
        assert_eq!(r.shape("s").unwrap(), vec![3, 70000]);
        assert_eq!(r.f64("e").unwrap(), 2.5);
        r.finish().unwrap();
        let mut r = Reader::new(&[2, 0xff, 0xfe], 0);
        assert!(r.text("t").unwrap_err().to_string().contains("UTF-8"));
    }
}
