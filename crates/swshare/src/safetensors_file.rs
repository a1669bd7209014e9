//! A `.safetensors` file whose bytes depend only on what it holds.
//!
//! `safetensors::serialize` writes the header's `__metadata__` object in the order of the
//! `HashMap` it is given, and every new `HashMap` iterates in another order: two runs with the
//! same seed wrote files that read back the same but differed in their bytes (and checksums)
//! once a file had two metadata entries. [`serialize`] writes the header again with every
//! object's keys in sorted order, keeping its length, so the tensor data does not move.

use std::collections::{BTreeMap, HashMap};

use safetensors::tensor::View;

/// The bytes of the 8-byte little-endian header length that opens a file.
const LENGTH_BYTES: usize = 8;

/// Why [`serialize`] wrote no file.
#[derive(Debug, thiserror::Error)]
pub enum SafetensorsFileError {
    /// `safetensors::serialize` refused the tensors (one that does not fit its shape and type).
    #[error("safetensors: {0}")]
    Serialize(#[from] safetensors::SafeTensorError),
    /// The header as written could not be rewritten at its length (not expected: the same
    /// JSON in another key order has the same length).
    #[error("the header: {0}")]
    Header(String),
}

/// `safetensors::serialize(data, metadata)` with the header's keys (the metadata entries and
/// the tensor names) in sorted order, the same bytes on every call with the same contents.
/// Any reader of the format reads it as it reads `safetensors::serialize`'s output.
///
/// # Errors
/// [`SafetensorsFileError`].
pub fn serialize<S, V, I>(
    data: I,
    metadata: Option<HashMap<String, String>>,
) -> Result<Vec<u8>, SafetensorsFileError>
where
    S: AsRef<str> + Ord + std::fmt::Display,
    V: View,
    I: IntoIterator<Item = (S, V)>,
{
    let mut bytes = safetensors::serialize(data, metadata)?;
    let length = header_length(&bytes)?;
    let header = &bytes[LENGTH_BYTES..LENGTH_BYTES + length];
    // Every top-level value (`__metadata__` and each tensor's entry) is an object of
    // non-objects; BTreeMaps at both levels sort the keys whatever serde_json's features
    // (`preserve_order` would keep the HashMap's order in a `Value`).
    type Header = BTreeMap<String, BTreeMap<String, serde_json::Value>>;
    let parsed: Header = serde_json::from_slice(header)
        .map_err(|e| SafetensorsFileError::Header(format!("as written: {e}")))?;
    let mut rewritten = serde_json::to_vec(&parsed)
        .map_err(|e| SafetensorsFileError::Header(format!("rewritten: {e}")))?;
    if rewritten.len() > length {
        return Err(SafetensorsFileError::Header(format!(
            "rewritten, it has {} bytes, as written {length}",
            rewritten.len()
        )));
    }
    // safetensors pads the header with spaces to keep the data aligned; so does the rewrite.
    rewritten.resize(length, b' ');
    bytes[LENGTH_BYTES..LENGTH_BYTES + length].copy_from_slice(&rewritten);
    Ok(bytes)
}

fn header_length(bytes: &[u8]) -> Result<usize, SafetensorsFileError> {
    let bad = |what: &str| SafetensorsFileError::Header(what.to_string());
    let head: [u8; LENGTH_BYTES] = bytes
        .get(..LENGTH_BYTES)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| bad("as written, the file has no header length"))?;
    usize::try_from(u64::from_le_bytes(head))
        .ok()
        .filter(|&n| n <= bytes.len() - LENGTH_BYTES)
        .ok_or_else(|| bad("as written, its length exceeds the file"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::{Dtype, SafeTensors, tensor::TensorView};

    fn file(values: &[u8]) -> Result<Vec<u8>, SafetensorsFileError> {
        // A new map each time, as each writer makes one: each iterates in its own order.
        let metadata: HashMap<String, String> = (0..8)
            .map(|i| (format!("key{i}"), format!("value {i}")))
            .collect();
        let tensors = vec![
            (
                "b".to_string(),
                TensorView::new(Dtype::F32, vec![2], &values[..8]).unwrap(),
            ),
            (
                "a".to_string(),
                TensorView::new(Dtype::U8, vec![3], &values[8..11]).unwrap(),
            ),
        ];
        serialize(tensors, Some(metadata))
    }

    #[test]
    fn the_same_contents_give_the_same_bytes_and_read_back() {
        let values: Vec<u8> = (0..11).collect();
        let first = file(&values).unwrap();
        for call in 1..20 {
            assert_eq!(file(&values).unwrap(), first, "call {call}");
        }
        let read = SafeTensors::deserialize(&first).unwrap();
        let a = read.tensor("a").unwrap();
        assert_eq!(
            (a.dtype(), a.shape(), a.data()),
            (Dtype::U8, &[3][..], &values[8..11])
        );
        let b = read.tensor("b").unwrap();
        assert_eq!(
            (b.dtype(), b.shape(), b.data()),
            (Dtype::F32, &[2][..], &values[..8])
        );
        let (_, meta) = SafeTensors::read_metadata(&first).unwrap();
        let meta = meta.metadata().clone().unwrap();
        assert_eq!(meta.len(), 8);
        assert_eq!(meta["key5"], "value 5");
        // The header stays at its length, a multiple of 8, so the data stays aligned.
        let length = u64::from_le_bytes(first[..8].try_into().unwrap()) as usize;
        assert_eq!(length % 8, 0);
        let header = std::str::from_utf8(&first[8..8 + length]).unwrap();
        let keys: Vec<usize> = (0..8)
            .map(|i| header.find(&format!("\"key{i}\"")).unwrap())
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{header}");
    }

    #[test]
    fn a_tensor_that_does_not_fit_its_shape_is_an_error() {
        struct Bad;
        impl View for Bad {
            fn dtype(&self) -> Dtype {
                Dtype::F32
            }
            fn shape(&self) -> &[usize] {
                &[4]
            }
            fn data(&self) -> std::borrow::Cow<'_, [u8]> {
                std::borrow::Cow::Borrowed(&[0; 3])
            }
            fn data_len(&self) -> usize {
                3
            }
        }
        assert!(matches!(
            serialize(vec![("x", Bad)], None),
            Err(SafetensorsFileError::Serialize(_))
        ));
    }
}
