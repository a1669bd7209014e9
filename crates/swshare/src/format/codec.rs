//! Encoding a model into the file's bytes and back (sections via serde + bincode 2).
//!
//! Strings are stored as byte sequences and decoded through serde's sequence path, whose
//! pre-allocation is capped, so a corrupted length prefix can never trigger a huge
//! allocation: it runs out of bytes and becomes an error.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::checksum::{self, CHECKSUM_LEN};
use super::error::FormatError;
use super::header::{self, FileKind, HEADER_LEN};
use super::index::{self, IndexContext, IndexSection, IndexWidth};
use super::model::{self, EllipseEntry, FullBnnData, LayerShape, NamedTensor, SharedModelData};
use super::quant::QuantizedU8;
use super::{FileSizes, SaveOptions};
use crate::fate::OutlierCause;

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

#[derive(Serialize, Deserialize)]
struct RawLayer {
    path: Vec<u8>,
    shape: Vec<u64>,
}

#[derive(Serialize, Deserialize)]
struct MetaSection {
    arch: Vec<u8>,
    layers: Vec<RawLayer>,
}

#[derive(Serialize, Deserialize)]
struct F32Pair {
    mu: Vec<f32>,
    rho: Vec<f32>,
}

#[derive(Serialize, Deserialize)]
enum OutlierValues {
    F32(F32Pair),
    U8 { mu: QuantizedU8, rho: QuantizedU8 },
}

#[derive(Serialize, Deserialize)]
struct OutlierSection {
    values: OutlierValues,
    /// Two bits per outlier, four per byte, first outlier in the low bits.
    causes: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct RawTensor {
    path: Vec<u8>,
    shape: Vec<u64>,
    data: Vec<f32>,
}

/// Appends `value` to `out`, returning the number of bytes written.
fn put<T: Serialize>(
    out: &mut Vec<u8>,
    section: &'static str,
    value: &T,
) -> Result<u64, FormatError> {
    bincode::serde::encode_into_std_write(value, out, config())
        .map(|n| n as u64)
        .map_err(|source| FormatError::Encode { section, source })
}

/// Reads sections one after the other from the payload.
struct Reader<'a> {
    payload: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn next<T: DeserializeOwned>(&mut self, section: &'static str) -> Result<T, FormatError> {
        let (value, used) = bincode::serde::decode_from_slice(&self.payload[self.pos..], config())
            .map_err(|e| corrupt(section, describe(&e)))?;
        self.pos += used;
        Ok(value)
    }

    fn finish(self) -> Result<(), FormatError> {
        let left = self.payload.len() - self.pos;
        if left == 0 {
            Ok(())
        } else {
            Err(corrupt(
                "payload",
                format!("{left} unread bytes after the last section"),
            ))
        }
    }
}

/// A decoding error in words, without bincode's internal type names.
fn describe(e: &bincode::error::DecodeError) -> String {
    use bincode::error::DecodeError as E;
    match e {
        E::UnexpectedEnd { additional } => {
            format!("the section ends {additional} byte(s) early")
        }
        E::LimitExceeded => "a length exceeds the decoder's limit".into(),
        E::InvalidIntegerType { .. } | E::NonZeroTypeIsZero { .. } => {
            "an integer is not validly encoded".into()
        }
        E::UnexpectedVariant { found, .. } => format!("unknown variant tag {found}"),
        E::Utf8 { .. } | E::InvalidCharEncoding(_) => "text is not UTF-8".into(),
        E::InvalidBooleanValue(b) => format!("byte {b} is not a boolean"),
        E::ArrayLengthMismatch { required, found } => {
            format!("an array has {found} entries where {required} are required")
        }
        E::OutsideUsizeRange(v) => format!("a length of {v} does not fit in memory"),
        E::Io { additional, .. } => format!("the section ends {additional} byte(s) early"),
        _ => "undecodable bytes".into(),
    }
}

fn corrupt(section: &'static str, detail: impl Into<String>) -> FormatError {
    FormatError::Corrupt {
        section,
        detail: detail.into(),
    }
}

fn string(section: &'static str, bytes: Vec<u8>) -> Result<String, FormatError> {
    String::from_utf8(bytes).map_err(|e| corrupt(section, format!("text is not UTF-8: {e}")))
}

fn shape_to_raw(shape: &[usize]) -> Vec<u64> {
    shape.iter().map(|&d| d as u64).collect()
}

fn shape_from_raw(section: &'static str, shape: Vec<u64>) -> Result<Vec<usize>, FormatError> {
    shape
        .into_iter()
        .map(|d| {
            usize::try_from(d).map_err(|_| corrupt(section, format!("dimension {d} too large")))
        })
        .collect()
}

fn meta_to_raw(arch: &str, layers: &[LayerShape]) -> MetaSection {
    MetaSection {
        arch: arch.as_bytes().to_vec(),
        layers: layers
            .iter()
            .map(|l| RawLayer {
                path: l.path.as_bytes().to_vec(),
                shape: shape_to_raw(&l.shape),
            })
            .collect(),
    }
}

fn meta_from_raw(meta: MetaSection) -> Result<(String, Vec<LayerShape>), FormatError> {
    let layers = meta
        .layers
        .into_iter()
        .map(|l| {
            Ok(LayerShape {
                path: string("meta", l.path)?,
                shape: shape_from_raw("meta", l.shape)?,
            })
        })
        .collect::<Result<_, FormatError>>()?;
    Ok((string("meta", meta.arch)?, layers))
}

fn unshared_to_raw(unshared: &[NamedTensor]) -> Vec<RawTensor> {
    unshared
        .iter()
        .map(|t| RawTensor {
            path: t.path.as_bytes().to_vec(),
            shape: shape_to_raw(&t.shape),
            data: t.data.clone(),
        })
        .collect()
}

fn unshared_from_raw(raw: Vec<RawTensor>) -> Result<Vec<NamedTensor>, FormatError> {
    raw.into_iter()
        .map(|t| {
            Ok(NamedTensor {
                path: string("unshared", t.path)?,
                shape: shape_from_raw("unshared", t.shape)?,
                data: t.data,
            })
        })
        .collect()
}

fn cause_to_bits(c: OutlierCause) -> u8 {
    match c {
        OutlierCause::MeanThreshold => 0,
        OutlierCause::Gradient => 1,
        OutlierCause::SmallCluster => 2,
    }
}

fn pack_causes(causes: &[OutlierCause]) -> Vec<u8> {
    causes
        .chunks(4)
        .map(|chunk| {
            chunk
                .iter()
                .enumerate()
                .fold(0u8, |acc, (i, &c)| acc | (cause_to_bits(c) << (2 * i)))
        })
        .collect()
}

fn unpack_causes(packed: &[u8], n: usize) -> Result<Vec<OutlierCause>, FormatError> {
    if packed.len() != n.div_ceil(4) {
        return Err(corrupt(
            "outliers",
            format!("{} cause bytes for {n} outliers", packed.len()),
        ));
    }
    (0..n)
        .map(|i| match (packed[i / 4] >> (2 * (i % 4))) & 3 {
            0 => Ok(OutlierCause::MeanThreshold),
            1 => Ok(OutlierCause::Gradient),
            2 => Ok(OutlierCause::SmallCluster),
            b => Err(corrupt(
                "outliers",
                format!("outlier {i} has cause code {b}"),
            )),
        })
        .collect()
}

/// Number of weights of each layer.
fn layer_sizes(layers: &[LayerShape]) -> Result<Vec<usize>, String> {
    layers
        .iter()
        .map(|l| {
            model::shape_len(&l.shape)
                .ok_or_else(|| format!("weight count of layer {:?} overflows", l.path))
        })
        .collect()
}

/// Wraps `payload` in header and checksum.
fn frame(kind: FileKind, payload: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len() + CHECKSUM_LEN);
    header::write(&mut out, kind, payload.len() as u64);
    out.extend_from_slice(&payload);
    checksum::append(&mut out);
    out
}

/// Checks header, length and checksum; returns the format version and the payload.
fn unframe(bytes: &[u8], kind: FileKind) -> Result<(u16, &[u8]), FormatError> {
    let (version, payload_len) = header::read(bytes, kind)?;
    let found = bytes.len() as u64;
    let expected = payload_len
        .checked_add((HEADER_LEN + CHECKSUM_LEN) as u64)
        .ok_or(FormatError::Truncated {
            expected: u64::MAX,
            found,
        })?;
    if found < expected {
        return Err(FormatError::Truncated { expected, found });
    }
    if found > expected {
        return Err(FormatError::TrailingBytes {
            extra: found - expected,
        });
    }
    checksum::verify(bytes)?;
    Ok((version, &bytes[HEADER_LEN..bytes.len() - CHECKSUM_LEN]))
}

/// Encodes a shared model, returning the bytes and the size of each part.
pub(crate) fn encode_shared(
    model: &SharedModelData,
    opts: &SaveOptions,
) -> Result<(Vec<u8>, FileSizes), FormatError> {
    encode_shared_with(model, opts, false)
}

/// The bytes the version 1 writer produced with a Huffman index (tests of old files).
#[cfg(test)]
pub(crate) fn encode_shared_v1_huffman(model: &SharedModelData) -> Vec<u8> {
    let opts = SaveOptions {
        entropy_index: true,
        int8_outliers: false,
    };
    let mut bytes = encode_shared_with(model, &opts, true).unwrap().0;
    bytes[super::MAGIC.len()..super::MAGIC.len() + 2].copy_from_slice(&1u16.to_le_bytes());
    let n = bytes.len() - CHECKSUM_LEN;
    bytes.truncate(n);
    checksum::append(&mut bytes);
    bytes
}

fn encode_shared_with(
    model: &SharedModelData,
    opts: &SaveOptions,
    huffman: bool,
) -> Result<(Vec<u8>, FileSizes), FormatError> {
    model.validate().map_err(FormatError::InvalidModel)?;
    let k = model.codebook_len();
    IndexWidth::for_codebook(k).map_err(FormatError::InvalidModel)?;

    let codebook = F32Pair {
        mu: model.codebook_mu.clone(),
        rho: model.codebook_rho.clone(),
    };
    let symbols = index::to_symbols(&model.fates, k);
    let layer_sizes = layer_sizes(&model.layers).map_err(FormatError::InvalidModel)?;
    let ctx = IndexContext {
        codebook_mu: &model.codebook_mu,
        layer_sizes: &layer_sizes,
    };
    let index = if huffman {
        super::huffman::encode(&symbols, k + 2).map(IndexSection::Huffman)
    } else {
        index::encode(&symbols, &ctx, opts.entropy_index)
    }
    .map_err(FormatError::InvalidModel)?;
    let values = if opts.int8_outliers {
        let quant = |v: &[f32], name: &str| {
            QuantizedU8::quantize(v).map_err(|e| FormatError::InvalidModel(format!("{name}: {e}")))
        };
        OutlierValues::U8 {
            mu: quant(&model.outlier_mu, "outlier_mu")?,
            rho: quant(&model.outlier_rho, "outlier_rho")?,
        }
    } else {
        OutlierValues::F32(F32Pair {
            mu: model.outlier_mu.clone(),
            rho: model.outlier_rho.clone(),
        })
    };
    let outliers = OutlierSection {
        values,
        causes: pack_causes(&model.outlier_causes),
    };

    let mut payload = Vec::new();
    let meta = put(
        &mut payload,
        "meta",
        &meta_to_raw(&model.arch, &model.layers),
    )?;
    let codebook = put(&mut payload, "codebook", &codebook)?;
    let index = put(&mut payload, "index", &index)?;
    let alphas = put(&mut payload, "alphas", &model.ellipses)?;
    let outliers = put(&mut payload, "outliers", &outliers)?;
    let unshared = put(&mut payload, "unshared", &unshared_to_raw(&model.unshared))?;
    let bytes = frame(FileKind::Shared, payload);
    let sizes = FileSizes {
        header: meta + (HEADER_LEN + CHECKSUM_LEN) as u64,
        codebook,
        index,
        alphas,
        outliers,
        unshared,
        total: bytes.len() as u64,
    };
    Ok((bytes, sizes))
}

/// Decodes a shared model from a whole file's bytes.
pub(crate) fn decode_shared(bytes: &[u8]) -> Result<SharedModelData, FormatError> {
    let (version, payload) = unframe(bytes, FileKind::Shared)?;
    let mut r = Reader { payload, pos: 0 };
    let (arch, layers) = meta_from_raw(r.next("meta")?)?;
    let n = model::total_weights(&layers).map_err(|e| corrupt("meta", e))?;
    let layer_sizes = layer_sizes(&layers).map_err(|e| corrupt("meta", e))?;
    let codebook: F32Pair = r.next("codebook")?;
    if codebook.rho.len() != codebook.mu.len() {
        return Err(corrupt(
            "codebook",
            format!(
                "{} means but {} rhos",
                codebook.mu.len(),
                codebook.rho.len()
            ),
        ));
    }
    let k = codebook.mu.len();
    IndexWidth::for_codebook(k).map_err(|e| corrupt("codebook", e))?;
    let ctx = IndexContext {
        codebook_mu: &codebook.mu,
        layer_sizes: &layer_sizes,
    };
    let symbols = index::decode(&r.next::<IndexSection>("index")?, &ctx, n, version)
        .map_err(|e| corrupt("index", e))?;
    let ellipses: Vec<EllipseEntry> = r.next("alphas")?;
    let outliers: OutlierSection = r.next("outliers")?;
    let unshared = unshared_from_raw(r.next("unshared")?)?;
    r.finish()?;

    let marker = index::outlier_marker(k);
    let n_outliers = symbols.iter().filter(|&&s| s == marker).count();
    let outlier_causes = unpack_causes(&outliers.causes, n_outliers)?;
    let fates =
        index::from_symbols(&symbols, k, &outlier_causes).map_err(|e| corrupt("index", e))?;
    let (outlier_mu, outlier_rho) = match outliers.values {
        OutlierValues::F32(p) => (p.mu, p.rho),
        OutlierValues::U8 { mu, rho } => {
            mu.check().map_err(|e| corrupt("outliers", e))?;
            rho.check().map_err(|e| corrupt("outliers", e))?;
            (mu.dequantize(), rho.dequantize())
        }
    };
    let model = SharedModelData {
        arch,
        codebook_mu: codebook.mu,
        codebook_rho: codebook.rho,
        layers,
        fates,
        ellipses,
        outlier_mu,
        outlier_rho,
        outlier_causes,
        unshared,
    };
    model.validate().map_err(|e| corrupt("model", e))?;
    Ok(model)
}

/// Encodes a full BNN (every weight's own `mu` and `rho`).
pub(crate) fn encode_full(
    arch: &str,
    layers: &[LayerShape],
    mu: &[f32],
    rho: &[f32],
    unshared: &[NamedTensor],
) -> Result<Vec<u8>, FormatError> {
    model::validate_full(layers, mu, rho, unshared).map_err(FormatError::InvalidModel)?;
    let mut payload = Vec::new();
    put(&mut payload, "meta", &meta_to_raw(arch, layers))?;
    let weights = F32Pair {
        mu: mu.to_vec(),
        rho: rho.to_vec(),
    };
    put(&mut payload, "weights", &weights)?;
    put(&mut payload, "unshared", &unshared_to_raw(unshared))?;
    Ok(frame(FileKind::FullBnn, payload))
}

/// Decodes a full BNN from a whole file's bytes.
pub(crate) fn decode_full(bytes: &[u8]) -> Result<FullBnnData, FormatError> {
    let (_version, payload) = unframe(bytes, FileKind::FullBnn)?;
    let mut r = Reader { payload, pos: 0 };
    let (arch, layers) = meta_from_raw(r.next("meta")?)?;
    let weights: F32Pair = r.next("weights")?;
    let unshared = unshared_from_raw(r.next("unshared")?)?;
    r.finish()?;
    let data = FullBnnData {
        arch,
        layers,
        mu: weights.mu,
        rho: weights.rho,
        unshared,
    };
    data.validate().map_err(|e| corrupt("model", e))?;
    Ok(data)
}
