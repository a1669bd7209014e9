//! Encoding a model into the file's bytes and back, section by section as
//! `docs/swb-format.md` describes them, over the primitives of [`wire`](super::wire).
//!
//! Every read is bounds-checked against the payload, so a corrupted length can never trigger
//! an allocation beyond the file's size: it runs out of bytes and becomes an error naming the
//! section and the byte offset.

use super::adaptive::{AdaptiveParams, AdaptiveStream, ContextKind};
use super::checksum::{self, CHECKSUM_LEN};
use super::error::FormatError;
use super::header::{self, CALIBRATION_VERSION, FORMAT_VERSION, HEADER_LEN};
use super::huffman::HuffmanStream;
use super::index::{self, IndexContext, IndexSection, IndexWidth};
use super::kind::FileKind;
use super::model::{self, EllipseEntry, FullBnnData, LayerShape, NamedTensor, SharedModelData};
use super::quant::QuantizedU8;
use super::wire::{self, Reader};
use super::{FileSizes, ModelMeta, SaveOptions};
use crate::fate::OutlierCause;
use bnn_metrics::ConformalCalibration;

fn corrupt(section: &'static str, detail: impl Into<String>) -> FormatError {
    FormatError::Corrupt {
        section,
        detail: detail.into(),
    }
}

/// Meta section: the architecture text, then the layers (path, shape).
fn put_meta(out: &mut Vec<u8>, arch: &str, layers: &[LayerShape]) {
    wire::put_bytes(out, arch.as_bytes());
    wire::put_len(out, layers.len());
    for l in layers {
        wire::put_bytes(out, l.path.as_bytes());
        wire::put_shape(out, &l.shape);
    }
}

fn read_meta(r: &mut Reader<'_>) -> Result<(String, Vec<LayerShape>), FormatError> {
    r.section("meta");
    let arch = r.text("architecture")?;
    // A layer takes at least two bytes (empty path, no dimensions).
    let n = r.len("layer count", 2)?;
    let layers = (0..n)
        .map(|_| {
            Ok(LayerShape {
                path: r.text("layer path")?,
                shape: r.shape("layer shape")?,
            })
        })
        .collect::<Result<_, FormatError>>()?;
    Ok((arch, layers))
}

/// Two `f32` sequences (codebook, full-BNN weights).
fn put_pair(out: &mut Vec<u8>, mu: &[f32], rho: &[f32]) {
    wire::put_f32s(out, mu);
    wire::put_f32s(out, rho);
}

fn read_pair(r: &mut Reader<'_>, what: &str) -> Result<(Vec<f32>, Vec<f32>), FormatError> {
    let mu = r.f32s(&format!("{what} means"))?;
    let rho = r.f32s(&format!("{what} rhos"))?;
    Ok((mu, rho))
}

const INDEX_PLAIN: u64 = 0;
const INDEX_HUFFMAN: u64 = 1;
const INDEX_ADAPTIVE: u64 = 2;

fn put_index(out: &mut Vec<u8>, index: &IndexSection) {
    match index {
        IndexSection::Plain(bytes) => {
            wire::put_varint(out, INDEX_PLAIN);
            wire::put_bytes(out, bytes);
        }
        IndexSection::Huffman(h) => {
            wire::put_varint(out, INDEX_HUFFMAN);
            wire::put_bytes(out, &h.lengths);
            wire::put_bytes(out, &h.bits);
        }
        IndexSection::Adaptive(a) => {
            wire::put_varint(out, INDEX_ADAPTIVE);
            match a.params.context {
                ContextKind::Layer => wire::put_varint(out, 0),
                ContextKind::LayerPrevMu { bins } => {
                    wire::put_varint(out, 1);
                    out.push(bins);
                }
            }
            wire::put_varint(out, u64::from(a.params.backoff));
            wire::put_varint(out, u64::from(a.params.rebuild));
            wire::put_bytes(out, &a.bytes);
        }
    }
}

fn read_index(r: &mut Reader<'_>) -> Result<IndexSection, FormatError> {
    r.section("index");
    Ok(match u64::from(r.tag("index coder", 3)?) {
        INDEX_PLAIN => IndexSection::Plain(r.bytes("plain index")?.to_vec()),
        INDEX_HUFFMAN => IndexSection::Huffman(HuffmanStream {
            lengths: r.bytes("Huffman code lengths")?.to_vec(),
            bits: r.bytes("Huffman bits")?.to_vec(),
        }),
        _ => {
            let context = match r.tag("context kind", 2)? {
                0 => ContextKind::Layer,
                _ => ContextKind::LayerPrevMu {
                    bins: r.u8("context bins")?,
                },
            };
            let params = AdaptiveParams {
                context,
                backoff: r.u16("back-off strength")?,
                rebuild: r.u16("rebuild period")?,
            };
            IndexSection::Adaptive(AdaptiveStream {
                params,
                bytes: r.bytes("range coder words")?.to_vec(),
            })
        }
    })
}

/// Alphas section: per ellipse weight its components (varints) and alphas (`f32`).
fn put_ellipses(out: &mut Vec<u8>, ellipses: &[EllipseEntry]) {
    wire::put_len(out, ellipses.len());
    for e in ellipses {
        wire::put_len(out, e.components.len());
        for &c in &e.components {
            wire::put_varint(out, u64::from(c));
        }
        wire::put_f32s(out, &e.alphas);
    }
}

fn read_ellipses(r: &mut Reader<'_>) -> Result<Vec<EllipseEntry>, FormatError> {
    r.section("alphas");
    // An entry takes at least two bytes (two empty sequences).
    let n = r.len("ellipse count", 2)?;
    (0..n)
        .map(|_| {
            let m = r.len("component count", 1)?;
            let components = (0..m)
                .map(|_| r.u32("component"))
                .collect::<Result<_, _>>()?;
            Ok(EllipseEntry {
                components,
                alphas: r.f32s("alphas")?,
            })
        })
        .collect()
}

const OUTLIERS_F32: u64 = 0;
const OUTLIERS_U8: u64 = 1;

fn put_quantized(out: &mut Vec<u8>, q: &QuantizedU8) {
    wire::put_f32(out, q.lo);
    wire::put_f32(out, q.hi);
    wire::put_bytes(out, &q.codes);
}

fn read_quantized(r: &mut Reader<'_>, what: &str) -> Result<QuantizedU8, FormatError> {
    let lo = r.f32(what)?;
    let hi = r.f32(what)?;
    let q = QuantizedU8 {
        lo,
        hi,
        codes: r.bytes(what)?.to_vec(),
    };
    q.check().map_err(|e| r.error(format!("{what}: {e}")))?;
    Ok(q)
}

/// Outlier section: the values (tag 0: two `f32` sequences; tag 1: two 8-bit quantised
/// vectors), then the causes packed two bits each.
fn put_outliers(out: &mut Vec<u8>, model: &SharedModelData, int8: bool) -> Result<(), FormatError> {
    if int8 {
        let quant = |v: &[f32], name: &str| {
            QuantizedU8::quantize(v).map_err(|e| FormatError::InvalidModel(format!("{name}: {e}")))
        };
        let mu = quant(&model.outlier_mu, "outlier_mu")?;
        let rho = quant(&model.outlier_rho, "outlier_rho")?;
        wire::put_varint(out, OUTLIERS_U8);
        put_quantized(out, &mu);
        put_quantized(out, &rho);
    } else {
        wire::put_varint(out, OUTLIERS_F32);
        put_pair(out, &model.outlier_mu, &model.outlier_rho);
    }
    wire::put_bytes(out, &pack_causes(&model.outlier_causes));
    Ok(())
}

/// The outliers' `(mu, rho)` and packed causes.
type Outliers = (Vec<f32>, Vec<f32>, Vec<u8>);

fn read_outliers(r: &mut Reader<'_>) -> Result<Outliers, FormatError> {
    r.section("outliers");
    let (mu, rho) = match u64::from(r.tag("outlier values", 2)?) {
        OUTLIERS_F32 => read_pair(r, "outlier")?,
        _ => {
            let mu = read_quantized(r, "8-bit outlier means")?;
            let rho = read_quantized(r, "8-bit outlier rhos")?;
            (mu.dequantize(), rho.dequantize())
        }
    };
    Ok((mu, rho, r.bytes("outlier causes")?.to_vec()))
}

/// Unshared section: per tensor its path, shape and `f32` values.
fn put_unshared(out: &mut Vec<u8>, unshared: &[NamedTensor]) {
    wire::put_len(out, unshared.len());
    for t in unshared {
        wire::put_bytes(out, t.path.as_bytes());
        wire::put_shape(out, &t.shape);
        wire::put_f32s(out, &t.data);
    }
}

fn read_unshared(r: &mut Reader<'_>) -> Result<Vec<NamedTensor>, FormatError> {
    r.section("unshared");
    // A tensor takes at least three bytes (three empty sequences).
    let n = r.len("tensor count", 3)?;
    (0..n)
        .map(|_| {
            Ok(NamedTensor {
                path: r.text("tensor path")?,
                shape: r.shape("tensor shape")?,
                data: r.f32s("tensor values")?,
            })
        })
        .collect()
}

/// Bit 0 of the calibration tag: a temperature follows.
const CALIBRATION_TEMPERATURE: u32 = 1;
/// Bit 1 of the calibration tag: a conformal calibration follows (after the temperature).
const CALIBRATION_CONFORMAL: u32 = 2;
const CONFORMAL_APS: u64 = 0;
const CONFORMAL_NORMALIZED_INTERVAL: u64 = 1;

/// Calibration section (format version 3): a tag whose bit 0 says a temperature `f64` follows
/// and bit 1 a conformal calibration (tag 0: none; 1: a temperature, as files before conformal
/// calibration wrote; 2: a conformal calibration; 3: both). The conformal calibration is its
/// method (varint: 0 APS, 1 normalised interval), its level `f64` and calibration count
/// (varint), then for APS its temperature and threshold (`f64` each), for intervals the count
/// of thresholds (varint) and the thresholds (`f64` each).
pub(crate) fn put_calibration(
    out: &mut Vec<u8>,
    temperature: Option<f64>,
    conformal: Option<&ConformalCalibration>,
) {
    let mut tag = 0;
    if temperature.is_some() {
        tag |= CALIBRATION_TEMPERATURE;
    }
    if conformal.is_some() {
        tag |= CALIBRATION_CONFORMAL;
    }
    wire::put_varint(out, u64::from(tag));
    if let Some(t) = temperature {
        out.extend_from_slice(&t.to_le_bytes());
    }
    let Some(c) = conformal else { return };
    let method = match c {
        ConformalCalibration::Aps { .. } => CONFORMAL_APS,
        ConformalCalibration::NormalizedInterval { .. } => CONFORMAL_NORMALIZED_INTERVAL,
    };
    wire::put_varint(out, method);
    out.extend_from_slice(&c.level().to_le_bytes());
    wire::put_varint(out, c.n() as u64);
    match c {
        ConformalCalibration::Aps {
            temperature, qhat, ..
        } => {
            out.extend_from_slice(&temperature.to_le_bytes());
            out.extend_from_slice(&qhat.to_le_bytes());
        }
        ConformalCalibration::NormalizedInterval { qhat, .. } => {
            wire::put_len(out, qhat.len());
            for q in qhat {
                out.extend_from_slice(&q.to_le_bytes());
            }
        }
    }
}

/// A file's calibration section: the temperature and the conformal calibration, each checked
/// ([`bnn_metrics::validate_temperature`], [`ConformalCalibration::validate`]).
pub(crate) type StoredCalibration = (Option<f64>, Option<ConformalCalibration>);

/// Reads the calibration section ([`put_calibration`]).
pub(crate) fn read_calibration(r: &mut Reader<'_>) -> Result<StoredCalibration, FormatError> {
    r.section("calibration");
    let tag = r.tag(
        "calibration",
        (CALIBRATION_TEMPERATURE | CALIBRATION_CONFORMAL) + 1,
    )?;
    let temperature = if tag & CALIBRATION_TEMPERATURE != 0 {
        let start = r.offset();
        let t = r.f64("temperature")?;
        model::validate_temperature(Some(t)).map_err(|e| r.error_at(start, e))?;
        Some(t)
    } else {
        None
    };
    if tag & CALIBRATION_CONFORMAL == 0 {
        return Ok((temperature, None));
    }
    let start = r.offset();
    let method = r.varint("conformal method", CONFORMAL_NORMALIZED_INTERVAL)?;
    let level = r.f64("conformal level")?;
    let n = r.varint("conformal calibration count", u64::MAX)?;
    let n = usize::try_from(n).map_err(|_| r.error_at(start, "calibration count overflows"))?;
    let conformal = if method == CONFORMAL_APS {
        ConformalCalibration::Aps {
            temperature: r.f64("conformal temperature")?,
            qhat: r.f64("conformal threshold")?,
            level,
            n,
        }
    } else {
        let count = r.len("conformal threshold count", 8)?;
        let qhat = (0..count)
            .map(|_| r.f64("conformal threshold"))
            .collect::<Result<Vec<f64>, FormatError>>()?;
        ConformalCalibration::NormalizedInterval { level, qhat, n }
    };
    conformal
        .validate()
        .map_err(|e| r.error_at(start, format!("conformal calibration: {e}")))?;
    Ok((temperature, Some(conformal)))
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

/// Wraps `payload` in the header of a format `version` file and the checksum.
fn frame(kind: FileKind, version: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len() + CHECKSUM_LEN);
    header::write(&mut out, kind, version, payload.len() as u64);
    out.extend_from_slice(payload);
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
    encode_shared_with(model, opts, false, true, FORMAT_VERSION)
}

/// The bytes of `model` without validating it first (tests of files that break invariants).
#[cfg(test)]
pub(crate) fn encode_shared_unchecked(model: &SharedModelData) -> Vec<u8> {
    encode_shared_with(model, &SaveOptions::default(), false, false, FORMAT_VERSION)
        .unwrap()
        .0
}

/// The bytes the version 2 writer produced (tests of old files): no calibration section.
#[cfg(test)]
pub(crate) fn encode_shared_v2(model: &SharedModelData, opts: &SaveOptions) -> Vec<u8> {
    encode_shared_with(model, opts, false, true, 2).unwrap().0
}

/// The bytes the version 1 writer produced with a Huffman index (tests of old files).
#[cfg(test)]
pub(crate) fn encode_shared_v1_huffman(model: &SharedModelData) -> Vec<u8> {
    let opts = SaveOptions {
        entropy_index: true,
        int8_outliers: false,
    };
    encode_shared_with(model, &opts, true, true, 1).unwrap().0
}

/// Encodes `model` in the layout of format `version` (below [`CALIBRATION_VERSION`] only in
/// tests of old files, and only for a model without a temperature).
fn encode_shared_with(
    model: &SharedModelData,
    opts: &SaveOptions,
    huffman: bool,
    validate: bool,
    version: u16,
) -> Result<(Vec<u8>, FileSizes), FormatError> {
    if validate {
        model.validate().map_err(FormatError::InvalidModel)?;
    }
    if version < CALIBRATION_VERSION && (model.temperature.is_some() || model.conformal.is_some()) {
        return Err(FormatError::InvalidModel(format!(
            "a format version {version} file cannot hold a temperature"
        )));
    }
    let k = model.codebook_len();
    IndexWidth::for_codebook(k).map_err(FormatError::InvalidModel)?;
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

    let mut payload = Vec::new();
    let mut mark = 0;
    let mut size = |payload: &Vec<u8>| {
        let n = (payload.len() - mark) as u64;
        mark = payload.len();
        n
    };
    put_meta(&mut payload, &model.arch, &model.layers);
    let meta = size(&payload);
    put_pair(&mut payload, &model.codebook_mu, &model.codebook_rho);
    let codebook = size(&payload);
    put_index(&mut payload, &index);
    let index = size(&payload);
    put_ellipses(&mut payload, &model.ellipses);
    let alphas = size(&payload);
    put_outliers(&mut payload, model, opts.int8_outliers)?;
    let outliers = size(&payload);
    put_unshared(&mut payload, &model.unshared);
    let unshared = size(&payload);
    if version >= CALIBRATION_VERSION {
        put_calibration(&mut payload, model.temperature, model.conformal.as_ref());
    }
    let calibration = size(&payload);
    let bytes = frame(FileKind::Shared, version, &payload);
    let sizes = FileSizes {
        header: meta + calibration + (HEADER_LEN + CHECKSUM_LEN) as u64,
        codebook,
        index,
        alphas,
        outliers,
        unshared,
        total: bytes.len() as u64,
    };
    Ok((bytes, sizes))
}

/// Decodes a shared model from a whole file's bytes; `check` sees the architecture, layers
/// and codebook length before the index is decoded and may refuse the file.
pub(crate) fn decode_shared(
    bytes: &[u8],
    check: &mut dyn FnMut(&ModelMeta<'_>) -> Result<(), String>,
) -> Result<SharedModelData, FormatError> {
    decode_shared_at(bytes, check).map(|(model, _)| model)
}

/// [`decode_shared`], also returning where the calibration section starts (or would start, in a
/// file before version 3) in the payload.
fn decode_shared_at(
    bytes: &[u8],
    check: &mut dyn FnMut(&ModelMeta<'_>) -> Result<(), String>,
) -> Result<(SharedModelData, usize), FormatError> {
    let (version, payload) = unframe(bytes, FileKind::Shared)?;
    let mut r = Reader::new(payload, HEADER_LEN);
    let (arch, layers) = read_meta(&mut r)?;
    let n = model::total_weights(&layers).map_err(|e| corrupt("meta", e))?;
    let layer_sizes = layer_sizes(&layers).map_err(|e| corrupt("meta", e))?;
    r.section("codebook");
    let (codebook_mu, codebook_rho) = read_pair(&mut r, "codebook")?;
    if codebook_rho.len() != codebook_mu.len() {
        return Err(corrupt(
            "codebook",
            format!(
                "{} means but {} rhos",
                codebook_mu.len(),
                codebook_rho.len()
            ),
        ));
    }
    let k = codebook_mu.len();
    IndexWidth::for_codebook(k).map_err(|e| corrupt("codebook", e))?;
    check(&ModelMeta {
        arch: &arch,
        layers: &layers,
        codebook_len: k,
    })
    .map_err(FormatError::Rejected)?;
    let ctx = IndexContext {
        codebook_mu: &codebook_mu,
        layer_sizes: &layer_sizes,
    };
    let index_section = read_index(&mut r)?;
    let symbols =
        index::decode(&index_section, &ctx, n, version).map_err(|e| corrupt("index", e))?;
    drop(index_section);
    let ellipses = read_ellipses(&mut r)?;
    let (outlier_mu, outlier_rho, causes) = read_outliers(&mut r)?;
    let unshared = read_unshared(&mut r)?;
    let calibration_at = r.offset() - HEADER_LEN;
    let (temperature, conformal) = if version >= CALIBRATION_VERSION {
        read_calibration(&mut r)?
    } else {
        (None, None)
    };
    r.finish()?;

    let marker = index::outlier_marker(k);
    let n_outliers = symbols.iter().filter(|&&s| s == marker).count();
    let outlier_causes = unpack_causes(&causes, n_outliers)?;
    let fates =
        index::from_symbols(&symbols, k, &outlier_causes).map_err(|e| corrupt("index", e))?;
    let model = SharedModelData {
        arch,
        codebook_mu,
        codebook_rho,
        layers,
        fates,
        ellipses,
        outlier_mu,
        outlier_rho,
        outlier_causes,
        unshared,
        temperature,
        conformal,
    };
    model.validate().map_err(|e| corrupt("model", e))?;
    Ok((model, calibration_at))
}

/// Encodes a full BNN (every weight's own `mu` and `rho`).
pub(crate) fn encode_full(
    arch: &str,
    layers: &[LayerShape],
    mu: &[f32],
    rho: &[f32],
    unshared: &[NamedTensor],
    temperature: Option<f64>,
) -> Result<Vec<u8>, FormatError> {
    encode_full_at(arch, layers, mu, rho, unshared, temperature, FORMAT_VERSION)
}

/// The bytes the version 2 writer produced for a full BNN (tests of old files).
#[cfg(test)]
pub(crate) fn encode_full_v2(data: &FullBnnData) -> Vec<u8> {
    encode_full_at(
        &data.arch,
        &data.layers,
        &data.mu,
        &data.rho,
        &data.unshared,
        None,
        2,
    )
    .unwrap()
}

fn encode_full_at(
    arch: &str,
    layers: &[LayerShape],
    mu: &[f32],
    rho: &[f32],
    unshared: &[NamedTensor],
    temperature: Option<f64>,
    version: u16,
) -> Result<Vec<u8>, FormatError> {
    model::validate_full(layers, mu, rho, unshared).map_err(FormatError::InvalidModel)?;
    model::validate_temperature(temperature).map_err(FormatError::InvalidModel)?;
    let mut payload = Vec::new();
    put_meta(&mut payload, arch, layers);
    put_pair(&mut payload, mu, rho);
    put_unshared(&mut payload, unshared);
    if version >= CALIBRATION_VERSION {
        put_calibration(&mut payload, temperature, None);
    }
    Ok(frame(FileKind::FullBnn, version, &payload))
}

/// Decodes a full BNN from a whole file's bytes.
pub(crate) fn decode_full(bytes: &[u8]) -> Result<FullBnnData, FormatError> {
    decode_full_at(bytes).map(|(data, _)| data)
}

/// [`decode_full`], also returning where the calibration section starts in the payload.
fn decode_full_at(bytes: &[u8]) -> Result<(FullBnnData, usize), FormatError> {
    let (version, payload) = unframe(bytes, FileKind::FullBnn)?;
    let mut r = Reader::new(payload, HEADER_LEN);
    let (arch, layers) = read_meta(&mut r)?;
    r.section("weights");
    let (mu, rho) = read_pair(&mut r, "weight")?;
    let unshared = read_unshared(&mut r)?;
    let calibration_at = r.offset() - HEADER_LEN;
    let (temperature, conformal) = if version >= CALIBRATION_VERSION {
        read_calibration(&mut r)?
    } else {
        (None, None)
    };
    r.finish()?;
    let data = FullBnnData {
        arch,
        layers,
        mu,
        rho,
        unshared,
        temperature,
        conformal,
    };
    data.validate().map_err(|e| corrupt("model", e))?;
    Ok((data, calibration_at))
}

/// The bytes of a `.swb` or full-BNN file of any readable version with its calibration
/// section replaced by `temperature` and `conformal` (`None` removes one), as a current-version
/// file: the file is decoded and checked whole first, and every section before the
/// calibration keeps its bytes (a version 1 file's Huffman index among them).
pub(crate) fn with_calibration(
    bytes: &[u8],
    temperature: Option<f64>,
    conformal: Option<&ConformalCalibration>,
) -> Result<Vec<u8>, FormatError> {
    model::validate_temperature(temperature).map_err(FormatError::InvalidModel)?;
    model::validate_conformal(conformal).map_err(FormatError::InvalidModel)?;
    let calibration_at = match file_kind(bytes) {
        FileKind::Shared => decode_shared_at(bytes, &mut |_| Ok(()))?.1,
        FileKind::FullBnn => decode_full_at(bytes)?.1,
    };
    let mut payload = bytes[HEADER_LEN..HEADER_LEN + calibration_at].to_vec();
    put_calibration(&mut payload, temperature, conformal);
    Ok(frame(file_kind(bytes), FORMAT_VERSION, &payload))
}

/// A `.swb` or full-BNN file's calibration section, after decoding and checking the whole
/// file.
pub(crate) fn calibration_of(bytes: &[u8]) -> Result<StoredCalibration, FormatError> {
    Ok(match file_kind(bytes) {
        FileKind::Shared => {
            let m = decode_shared(bytes, &mut |_| Ok(()))?;
            (m.temperature, m.conformal)
        }
        FileKind::FullBnn => {
            let m = decode_full(bytes)?;
            (m.temperature, m.conformal)
        }
    })
}

/// The kind a file's bytes claim (the reader checks the claim).
fn file_kind(bytes: &[u8]) -> FileKind {
    match bytes.get(MAGIC_AND_VERSION) {
        Some(1) => FileKind::FullBnn,
        _ => FileKind::Shared,
    }
}

/// Offset of the kind byte: after the magic and the version.
const MAGIC_AND_VERSION: usize = super::MAGIC.len() + 2;
