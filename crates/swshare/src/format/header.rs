//! The fixed 18-byte file header: magic, format version, model kind and payload length.
//!
//! It is written by hand (not by bincode) so a reader can tell "not our file", "newer
//! version" and "truncated" apart before it trusts any other byte.

use super::error::FormatError;
use super::kind::FileKind;

/// Magic bytes at the start of every file written by this module.
pub const MAGIC: [u8; 7] = *b"SWBNN\0\x01";
/// The format version this code writes.
///
/// Version 3 added the calibration section (a fitted temperature) after the unshared one;
/// version 2 the context-adaptive range-coded index ([`adaptive`](super::adaptive)). Each
/// layout is otherwise its predecessor's, so files of versions 1 and 2 still load (with no
/// temperature).
pub const FORMAT_VERSION: u16 = 3;
/// The first format version with the calibration section.
pub const CALIBRATION_VERSION: u16 = 3;
/// The oldest format version this code reads.
pub const OLDEST_READABLE_VERSION: u16 = 1;
/// Length of the fixed header in bytes.
pub const HEADER_LEN: usize = MAGIC.len() + 2 + 1 + 8;

/// Appends the header of a format `version` file with a payload of `payload_len` bytes.
pub(crate) fn write(out: &mut Vec<u8>, kind: FileKind, version: u16, payload_len: u64) {
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.push(kind.to_byte());
    out.extend_from_slice(&payload_len.to_le_bytes());
}

/// Parses the header at the start of `bytes`, checks that it is of kind `expected`, and
/// returns the format version and the payload length it announces.
pub(crate) fn read(bytes: &[u8], expected: FileKind) -> Result<(u16, u64), FormatError> {
    let truncated = || FormatError::Truncated {
        expected: HEADER_LEN as u64,
        found: bytes.len() as u64,
    };
    let magic_len = MAGIC.len().min(bytes.len());
    if bytes[..magic_len] != MAGIC[..magic_len] {
        return Err(FormatError::BadMagic {
            found: bytes[..magic_len].to_vec(),
            expected: MAGIC.to_vec(),
        });
    }
    // Check the version as soon as it is there: a newer layout may differ after it.
    let version = bytes.get(7..9).ok_or_else(truncated)?;
    let version = u16::from_le_bytes([version[0], version[1]]);
    if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(FormatError::UnsupportedVersion {
            found: version,
            oldest: OLDEST_READABLE_VERSION,
            newest: FORMAT_VERSION,
        });
    }
    let byte = *bytes.get(9).ok_or_else(truncated)?;
    let found = FileKind::from_byte(byte).ok_or(FormatError::UnknownKind(byte))?;
    if found != expected {
        return Err(FormatError::WrongKind { found, expected });
    }
    let len: [u8; 8] = bytes
        .get(10..HEADER_LEN)
        .ok_or_else(truncated)?
        .try_into()
        .expect("slice of length 8");
    Ok((version, u64::from_le_bytes(len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let mut out = Vec::new();
        write(&mut out, FileKind::FullBnn, FORMAT_VERSION, 12345);
        assert_eq!(out.len(), HEADER_LEN);
        assert_eq!(
            read(&out, FileKind::FullBnn).unwrap(),
            (FORMAT_VERSION, 12345)
        );
        assert!(matches!(
            read(&out, FileKind::Shared),
            Err(FormatError::WrongKind {
                found: FileKind::FullBnn,
                ..
            })
        ));
    }

    #[test]
    fn short_prefix_of_magic_is_truncated_not_bad_magic() {
        let mut out = Vec::new();
        write(&mut out, FileKind::Shared, FORMAT_VERSION, 0);
        for n in 0..HEADER_LEN {
            assert!(matches!(
                read(&out[..n], FileKind::Shared),
                Err(FormatError::Truncated { .. })
            ));
        }
        assert!(matches!(
            read(b"PK\x03", FileKind::Shared),
            Err(FormatError::BadMagic { .. })
        ));
    }
}
