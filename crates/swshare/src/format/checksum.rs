//! The trailing CRC-32 (IEEE, via `crc32fast`) over every byte before it.
//!
//! CRC-32 detects every single-bit flip and every burst of up to 32 bits; it guards against
//! storage and transfer damage, not against deliberate tampering.

use super::error::FormatError;

/// Length of the checksum in bytes.
pub const CHECKSUM_LEN: usize = 4;

/// Appends the little-endian CRC-32 of `out` to `out`.
pub(crate) fn append(out: &mut Vec<u8>) {
    let crc = crc32fast::hash(out);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Checks the CRC-32 stored in the last four bytes of `file` against the bytes before it.
///
/// The caller has already checked that `file` has at least [`CHECKSUM_LEN`] bytes.
pub(crate) fn verify(file: &[u8]) -> Result<(), FormatError> {
    let (content, stored) = file.split_at(file.len() - CHECKSUM_LEN);
    let stored = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
    let computed = crc32fast::hash(content);
    if stored == computed {
        Ok(())
    } else {
        Err(FormatError::ChecksumMismatch { stored, computed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_crc32_value() {
        // The standard CRC-32 check value of "123456789" is 0xCBF43926.
        let mut v = b"123456789".to_vec();
        append(&mut v);
        assert_eq!(&v[9..], &0xCBF4_3926u32.to_le_bytes());
        verify(&v).unwrap();
        v[0] ^= 1;
        assert!(matches!(
            verify(&v),
            Err(FormatError::ChecksumMismatch { .. })
        ));
    }
}
