//! The quantised-BNN file (`.qbnn`): the post-training quantisation baseline of Subedar et al.
//! (2021) as bayesian-torch's `bnn_to_qbnn` implements it, stored for real so its bytes can
//! be counted beside the `.swb` file.
//!
//! # Quantisation
//!
//! - **Means** ([`SymmetricI8`]): symmetric per-tensor int8, exactly bayesian-torch's
//!   `get_scale_and_zero_point` / `get_quantized_tensor` (IntelLabs/bayesian-torch, commit
//!   aa7e57b, `bayesian_torch/models/bnn_to_qbnn.py`): `scale = 2 * min(max|x|, 100) / 255`
//!   (0.1 if that is 0), zero point 0, `q = clamp(round_half_even(x / scale), -128, 127)`.
//! - **Standard deviations** ([`AffineBits`]) at `b` bits, `b` in 1..=8: per-tensor affine
//!   (min-max) codes `q` in `0..2^b`, restored as `lo + q * step`. bayesian-torch quantises
//!   sigma with the symmetric int8 scheme above; sigma is never negative, so that scheme spends
//!   half its codes on values that never occur, and at 2 bits or fewer it maps every sigma to
//!   0 or one other value (at 1 bit, all to 0: a deterministic network). The min-max grid keeps
//!   `b` bits of resolution between the smallest and largest sigma at every width; at 8 bits it
//!   is at least as fine as bayesian-torch's.
//! - Biases, batch-norm and every other tensor stay `f32` (bayesian-torch: "DO NOT QUANTIZE
//!   BIAS"), as [`QValues::F32`].
//! - Batch norm folded into the convolution before it is recorded in
//!   [`QbnnData::folded_norms`]: its tensors hold the identity apart from `beta`, the folded
//!   bias (bayesian-torch's `quantized_mu_bias`).
//!
//! # Layout (version 2)
//!
//! | part | bytes | content |
//! |---|---|---|
//! | header | 17 | [`QBNN_MAGIC`], version `u16` LE, payload length `u64` LE |
//! | payload | var. | the architecture JSON, `sigma_bits`, the tensors, the folded norms and (version 2) the calibration section of the `.swb` format (`docs/swb-format.md`) |
//! | checksum | 4 | CRC-32 of everything before it |
//!
//! Means take one byte per weight and sigmas `b / 8`, so with 4-bit sigmas the file is
//! 12 bits per weight plus scales, biases and norms.
//!
//! ```
//! use swshare::format::qbnn::{self, QTensor, QValues, QbnnData, SymmetricI8, AffineBits};
//!
//! let mu = [0.5f32, -0.25, 0.0, 0.125];
//! let sigma = [0.01f32, 0.02, 0.03, 0.04];
//! let data = QbnnData {
//!     arch: "{}".into(),
//!     sigma_bits: 4,
//!     tensors: vec![
//!         QTensor { path: "fc.weight_mu".into(), shape: vec![2, 2],
//!                   values: QValues::MeanI8(SymmetricI8::quantize(&mu).unwrap()) },
//!         QTensor { path: "fc.weight_rho".into(), shape: vec![2, 2],
//!                   values: QValues::SigmaBits(AffineBits::quantize(&sigma, 4).unwrap()) },
//!     ],
//!     folded_norms: vec![],
//!     temperature: None,
//!     conformal: None,
//! };
//! let bytes = qbnn::to_bytes(&data).unwrap();
//! assert_eq!(qbnn::from_bytes(&bytes).unwrap(), data);
//! let restored = data.tensors[0].values.dequantize();
//! assert!((restored[0] - 0.5).abs() <= 0.5 / 127.5);
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::checksum::{self, CHECKSUM_LEN};
use super::codec::{put_calibration, read_calibration};
use super::error::{FormatError, SwbError};
use super::io::{read_magic_file, write_atomic};
use super::wire::{self, Reader};

/// Magic bytes at the start of a `.qbnn` file.
pub const QBNN_MAGIC: [u8; 7] = *b"SWQBNN\x01";
/// The version this code writes. Version 2 added the calibration section (a fitted
/// temperature); version 1 files still load, with none.
pub const QBNN_VERSION: u16 = 2;
/// The largest `.qbnn` file [`load`] takes: 8 GiB, the bound of `.swb` files
/// ([`MAX_FILE_LEN`](super::MAX_FILE_LEN)) for the same reason: every value is stored in at
/// most the `f32` a full-BNN file spends on it.
pub const QBNN_MAX_FILE_LEN: u64 = 8 << 30;
/// The oldest version this code reads.
pub const QBNN_OLDEST_READABLE_VERSION: u16 = 1;
/// Length of the fixed header.
pub const QBNN_HEADER_LEN: usize = QBNN_MAGIC.len() + 2 + 8;

/// bayesian-torch's `upper_bound`: the largest `|x|` the int8 range covers.
const UPPER_BOUND: f32 = 100.0;
/// bayesian-torch's `target_range` (255 steps for int8).
const TARGET_RANGE: f32 = 255.0;
/// bayesian-torch's `default_scale`, used when a tensor is all zeros.
const DEFAULT_SCALE: f32 = 0.1;

fn invalid(detail: String) -> FormatError {
    FormatError::InvalidModel(detail)
}

fn corrupt(detail: impl Into<String>) -> FormatError {
    FormatError::Corrupt {
        section: "qbnn",
        detail: detail.into(),
    }
}

fn check_finite(values: &[f32], what: &str) -> Result<(), FormatError> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(invalid(format!(
            "{what}: value {i} is {} and cannot be quantised",
            values[i]
        ))),
        None => Ok(()),
    }
}

/// A tensor in symmetric per-tensor int8: `x ~ codes * scale` (bayesian-torch's scheme).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SymmetricI8 {
    /// The quantisation step.
    pub scale: f32,
    /// One code per value.
    pub codes: Vec<i8>,
}

impl SymmetricI8 {
    /// Quantises `values`; non-finite values are an error naming the first.
    pub fn quantize(values: &[f32]) -> Result<Self, FormatError> {
        check_finite(values, "int8 means")?;
        let max = values.iter().fold(0f32, |m, v| m.max(v.abs()));
        let mut scale = max.min(UPPER_BOUND) * 2.0 / TARGET_RANGE;
        if scale == 0.0 {
            scale = DEFAULT_SCALE;
        }
        let codes = values
            .iter()
            .map(|&x| (x / scale).round_ties_even().clamp(-128.0, 127.0) as i8)
            .collect();
        Ok(Self { scale, codes })
    }

    /// The restored values.
    pub fn dequantize(&self) -> Vec<f32> {
        self.codes
            .iter()
            .map(|&q| f32::from(q) * self.scale)
            .collect()
    }
}

/// A tensor in per-tensor affine `bits`-bit codes: `x ~ lo + q * step`, `q` in `0..2^bits`,
/// packed `bits` per code, first code in the lowest bits of the first byte.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AffineBits {
    /// Bits per code, 1..=8.
    pub bits: u8,
    /// The smallest value (code 0).
    pub lo: f32,
    /// The quantisation step, `(max - min) / (2^bits - 1)`.
    pub step: f32,
    /// Number of values.
    pub len: u64,
    /// The packed codes, `ceil(len * bits / 8)` bytes.
    pub packed: Vec<u8>,
}

impl AffineBits {
    /// Quantises `values` to `bits` bits; `bits` outside 1..=8 or non-finite values are
    /// errors.
    pub fn quantize(values: &[f32], bits: u8) -> Result<Self, FormatError> {
        if !(1..=8).contains(&bits) {
            return Err(invalid(format!("sigma bits must be in 1..=8, got {bits}")));
        }
        check_finite(values, "quantised sigmas")?;
        let lo = values.iter().copied().fold(f32::INFINITY, f32::min);
        let hi = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let levels = (1u32 << bits) - 1;
        let (lo, step) = if values.is_empty() {
            (0.0, 0.0)
        } else {
            (
                lo,
                ((f64::from(hi) - f64::from(lo)) / f64::from(levels)) as f32,
            )
        };
        let mut packed = vec![0u8; packed_len(values.len(), bits)];
        for (i, &x) in values.iter().enumerate() {
            let q = if step > 0.0 {
                ((f64::from(x) - f64::from(lo)) / f64::from(step))
                    .round()
                    .clamp(0.0, f64::from(levels)) as u32
            } else {
                0
            };
            put_bits(&mut packed, i * bits as usize, bits, q);
        }
        Ok(Self {
            bits,
            lo,
            step,
            len: values.len() as u64,
            packed,
        })
    }

    /// The restored values.
    pub fn dequantize(&self) -> Vec<f32> {
        (0..self.len as usize)
            .map(|i| {
                let q = get_bits(&self.packed, i * self.bits as usize, self.bits);
                (f64::from(self.lo) + f64::from(q) * f64::from(self.step)) as f32
            })
            .collect()
    }

    /// Half a step: the largest distance between a value in `[lo, hi]` and its restoration
    /// (plus `f32` rounding).
    pub fn error_bound(&self) -> f32 {
        self.step / 2.0
    }
}

fn packed_len(n: usize, bits: u8) -> usize {
    (n * bits as usize).div_ceil(8)
}

fn put_bits(out: &mut [u8], bit: usize, bits: u8, value: u32) {
    for b in 0..bits as usize {
        if value >> b & 1 == 1 {
            let at = bit + b;
            out[at / 8] |= 1 << (at % 8);
        }
    }
}

fn get_bits(bytes: &[u8], bit: usize, bits: u8) -> u32 {
    (0..bits as usize).fold(0, |v, b| {
        let at = bit + b;
        v | u32::from(bytes[at / 8] >> (at % 8) & 1) << b
    })
}

/// How one tensor is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum QValues {
    /// Full precision.
    F32(Vec<f32>),
    /// A weight mean in symmetric int8.
    MeanI8(SymmetricI8),
    /// A weight's standard deviations (`sigma = softplus(rho)`, not `rho`) in affine codes.
    SigmaBits(AffineBits),
}

impl QValues {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            QValues::F32(v) => v.len(),
            QValues::MeanI8(q) => q.codes.len(),
            QValues::SigmaBits(q) => q.len as usize,
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The restored values (for [`QValues::SigmaBits`], standard deviations).
    pub fn dequantize(&self) -> Vec<f32> {
        match self {
            QValues::F32(v) => v.clone(),
            QValues::MeanI8(q) => q.dequantize(),
            QValues::SigmaBits(q) => q.dequantize(),
        }
    }
}

/// One parameter tensor of the model, at its parameter path (e.g. `body.fc.weight_mu`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QTensor {
    /// Parameter path. A [`QValues::SigmaBits`] tensor sits at the `*_rho` path it restores.
    pub path: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Values.
    pub values: QValues,
}

/// A batch norm folded into the convolution before it: in the restored model it is the
/// identity (`gamma = 1`, running mean 0, running variance `1 - epsilon`) plus its `beta`,
/// which the file stores as the folded bias.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FoldedNorm {
    /// Path of the batch norm module (e.g. `body.layers.0.0.bn1`).
    pub path: String,
    /// Its epsilon.
    pub epsilon: f64,
}

/// The content of a `.qbnn` file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QbnnData {
    /// The architecture (the model configuration as JSON).
    pub arch: String,
    /// Bits of the quantised standard deviations.
    pub sigma_bits: u8,
    /// Every tensor the restored model needs, in the model's parameter order.
    pub tensors: Vec<QTensor>,
    /// Batch norms folded into their convolutions.
    pub folded_norms: Vec<FoldedNorm>,
    /// The fitted calibration temperature, as
    /// [`SharedModelData::temperature`](super::SharedModelData::temperature); version 1 files
    /// hold none.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// The conformal calibration, as
    /// [`SharedModelData::conformal`](super::SharedModelData::conformal); version 1 files
    /// hold none.
    #[serde(default)]
    pub conformal: Option<bnn_metrics::ConformalCalibration>,
}

const VALUES_F32: u32 = 0;
const VALUES_MEAN_I8: u32 = 1;
const VALUES_SIGMA_BITS: u32 = 2;

/// The payload of a `version` file, as `docs/swb-format.md` ("The `.qbnn` file") lays it out.
fn put_payload(out: &mut Vec<u8>, data: &QbnnData, version: u16) {
    wire::put_bytes(out, data.arch.as_bytes());
    out.push(data.sigma_bits);
    wire::put_len(out, data.tensors.len());
    for t in &data.tensors {
        wire::put_bytes(out, t.path.as_bytes());
        wire::put_shape(out, &t.shape);
        match &t.values {
            QValues::F32(v) => {
                wire::put_varint(out, VALUES_F32.into());
                wire::put_f32s(out, v);
            }
            QValues::MeanI8(q) => {
                wire::put_varint(out, VALUES_MEAN_I8.into());
                wire::put_f32(out, q.scale);
                wire::put_len(out, q.codes.len());
                out.extend(q.codes.iter().map(|&c| c as u8));
            }
            QValues::SigmaBits(q) => {
                wire::put_varint(out, VALUES_SIGMA_BITS.into());
                out.push(q.bits);
                wire::put_f32(out, q.lo);
                wire::put_f32(out, q.step);
                wire::put_varint(out, q.len);
                wire::put_bytes(out, &q.packed);
            }
        }
    }
    wire::put_len(out, data.folded_norms.len());
    for n in &data.folded_norms {
        wire::put_bytes(out, n.path.as_bytes());
        out.extend_from_slice(&n.epsilon.to_le_bytes());
    }
    if version >= 2 {
        put_calibration(out, data.temperature, data.conformal.as_ref());
    }
}

fn read_payload(r: &mut Reader<'_>, version: u16) -> Result<QbnnData, FormatError> {
    r.section("qbnn");
    let arch = r.text("architecture")?;
    let sigma_bits = r.u8("sigma bits")?;
    // A tensor takes at least four bytes (path, shape, tag, values).
    let n = r.len("tensor count", 4)?;
    let tensors = (0..n)
        .map(|_| {
            let path = r.text("tensor path")?;
            let shape = r.shape("tensor shape")?;
            let values = match r.tag("tensor values", 3)? {
                VALUES_F32 => QValues::F32(r.f32s("f32 values")?),
                VALUES_MEAN_I8 => QValues::MeanI8(SymmetricI8 {
                    scale: r.f32("int8 scale")?,
                    codes: r.bytes("int8 codes")?.iter().map(|&b| b as i8).collect(),
                }),
                _ => QValues::SigmaBits(AffineBits {
                    bits: r.u8("sigma code bits")?,
                    lo: r.f32("sigma grid start")?,
                    step: r.f32("sigma grid step")?,
                    len: r.varint("sigma count", u64::MAX)?,
                    packed: r.bytes("packed sigma codes")?.to_vec(),
                }),
            };
            Ok(QTensor {
                path,
                shape,
                values,
            })
        })
        .collect::<Result<Vec<_>, FormatError>>()?;
    // A folded norm takes at least nine bytes (path, epsilon).
    let n = r.len("folded norm count", 9)?;
    let folded_norms = (0..n)
        .map(|_| {
            Ok(FoldedNorm {
                path: r.text("norm path")?,
                epsilon: r.f64("norm epsilon")?,
            })
        })
        .collect::<Result<Vec<_>, FormatError>>()?;
    let (temperature, conformal) = if version >= 2 {
        read_calibration(r)?
    } else {
        (None, None)
    };
    Ok(QbnnData {
        arch,
        sigma_bits,
        tensors,
        folded_norms,
        temperature,
        conformal,
    })
}

fn check(data: &QbnnData) -> Result<(), FormatError> {
    if !(1..=8).contains(&data.sigma_bits) {
        return Err(invalid(format!(
            "sigma bits must be in 1..=8, got {}",
            data.sigma_bits
        )));
    }
    for t in &data.tensors {
        let n = t.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if n != Some(t.values.len()) {
            return Err(invalid(format!(
                "{}: shape {:?} holds {} values, the tensor has {}",
                t.path,
                t.shape,
                n.map_or("too many".to_string(), |n| n.to_string()),
                t.values.len()
            )));
        }
        match &t.values {
            QValues::SigmaBits(q) => {
                if q.bits != data.sigma_bits {
                    return Err(invalid(format!(
                        "{}: {}-bit sigmas in a file of {}-bit sigmas",
                        t.path, q.bits, data.sigma_bits
                    )));
                }
                let want = usize::try_from(q.len)
                    .ok()
                    .and_then(|n| n.checked_mul(usize::from(q.bits)))
                    .map(|b| b.div_ceil(8));
                if want != Some(q.packed.len()) {
                    return Err(invalid(format!(
                        "{}: {} packed bytes for {} codes of {} bits",
                        t.path,
                        q.packed.len(),
                        q.len,
                        q.bits
                    )));
                }
                if !(q.lo.is_finite() && q.step.is_finite() && q.step >= 0.0) {
                    return Err(invalid(format!(
                        "{}: sigma grid lo {} step {}",
                        t.path, q.lo, q.step
                    )));
                }
            }
            QValues::MeanI8(q) => {
                if !(q.scale.is_finite() && q.scale > 0.0) {
                    return Err(invalid(format!("{}: int8 scale {}", t.path, q.scale)));
                }
            }
            QValues::F32(_) => {}
        }
    }
    super::model::validate_temperature(data.temperature).map_err(invalid)?;
    super::model::validate_conformal(data.conformal.as_ref()).map_err(invalid)
}

/// Encodes `data` into the bytes of a `.qbnn` file.
pub fn to_bytes(data: &QbnnData) -> Result<Vec<u8>, FormatError> {
    to_bytes_at(data, QBNN_VERSION)
}

/// The bytes the version 1 writer produced (tests of old files).
#[cfg(test)]
pub(crate) fn to_bytes_v1(data: &QbnnData) -> Result<Vec<u8>, FormatError> {
    if data.temperature.is_some() || data.conformal.is_some() {
        return Err(invalid(
            "a version 1 .qbnn file holds no temperature".into(),
        ));
    }
    to_bytes_at(data, 1)
}

fn to_bytes_at(data: &QbnnData, version: u16) -> Result<Vec<u8>, FormatError> {
    check(data)?;
    let mut body = Vec::new();
    put_payload(&mut body, data, version);
    let mut out = Vec::with_capacity(QBNN_HEADER_LEN + body.len() + CHECKSUM_LEN);
    out.extend_from_slice(&QBNN_MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    checksum::append(&mut out);
    Ok(out)
}

/// Decodes the bytes of a `.qbnn` file: wrong magic, version, length or checksum and
/// inconsistent tensors are errors.
pub fn from_bytes(bytes: &[u8]) -> Result<QbnnData, FormatError> {
    let magic_len = QBNN_MAGIC.len().min(bytes.len());
    if bytes[..magic_len] != QBNN_MAGIC[..magic_len] {
        return Err(FormatError::BadMagic {
            found: bytes[..magic_len].to_vec(),
            expected: QBNN_MAGIC.to_vec(),
        });
    }
    if bytes.len() < QBNN_HEADER_LEN + CHECKSUM_LEN {
        return Err(FormatError::Truncated {
            expected: (QBNN_HEADER_LEN + CHECKSUM_LEN) as u64,
            found: bytes.len() as u64,
        });
    }
    let version = u16::from_le_bytes([bytes[7], bytes[8]]);
    if !(QBNN_OLDEST_READABLE_VERSION..=QBNN_VERSION).contains(&version) {
        return Err(FormatError::UnsupportedVersion {
            found: version,
            oldest: QBNN_OLDEST_READABLE_VERSION,
            newest: QBNN_VERSION,
        });
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[9..QBNN_HEADER_LEN]);
    let payload_len = u64::from_le_bytes(len);
    let expected = (QBNN_HEADER_LEN + CHECKSUM_LEN) as u64 + payload_len;
    match (bytes.len() as u64).cmp(&expected) {
        std::cmp::Ordering::Less => {
            return Err(FormatError::Truncated {
                expected,
                found: bytes.len() as u64,
            });
        }
        std::cmp::Ordering::Greater => {
            return Err(FormatError::TrailingBytes {
                extra: bytes.len() as u64 - expected,
            });
        }
        std::cmp::Ordering::Equal => {}
    }
    checksum::verify(bytes)?;
    let body = &bytes[QBNN_HEADER_LEN..bytes.len() - CHECKSUM_LEN];
    let mut r = Reader::new(body, QBNN_HEADER_LEN);
    let data = read_payload(&mut r, version)?;
    r.finish()?;
    check(&data).map_err(|e| corrupt(e.to_string()))?;
    Ok(data)
}

/// Writes `data` to `path` atomically; returns the file's length in bytes.
pub fn save(path: impl AsRef<Path>, data: &QbnnData) -> Result<u64, SwbError> {
    let path = path.as_ref();
    let bytes = to_bytes(data).map_err(|source| SwbError::Format {
        path: path.to_path_buf(),
        source,
    })?;
    write_atomic(path, &bytes)?;
    Ok(bytes.len() as u64)
}

/// Reads a file written by [`save`].
pub fn load(path: impl AsRef<Path>) -> Result<QbnnData, SwbError> {
    let path = path.as_ref();
    let bytes = read_magic_file(path, QBNN_MAX_FILE_LEN, &QBNN_MAGIC, ".qbnn")?;
    from_bytes(&bytes).map_err(|source| SwbError::Format {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_means_follow_bayesian_torch() {
        // max |x| = 127.5 / 128: scale = 2 * max / 255 = 1 / 128 exactly; half a step rounds
        // to even (0), 1.5 steps to 2, and the extremes (+-127.5 steps) to 127 (128 clamped)
        // and -128.
        let s = 1.0 / 128.0;
        let q =
            SymmetricI8::quantize(&[127.5 * s, -127.5 * s, 0.5 * s, 1.5 * s, 30.0 * s]).unwrap();
        assert_eq!(q.scale, s);
        assert_eq!(q.codes, [127, -128, 0, 2, 30]);
        // All zeros: bayesian-torch's default scale.
        assert_eq!(SymmetricI8::quantize(&[0.0; 3]).unwrap().scale, 0.1);
        // |x| above 100 is clamped to the int8 range.
        let q = SymmetricI8::quantize(&[500.0, 1.0]).unwrap();
        assert_eq!(q.codes[0], 127);
        assert!((q.scale - 200.0 / 255.0).abs() < 1e-6);
        assert!(SymmetricI8::quantize(&[f32::NAN]).is_err());
    }

    #[test]
    fn affine_codes_round_trip_within_half_a_step() {
        let values: Vec<f32> = (0..1000)
            .map(|i| 1e-3 + (i as f32 * 0.7).sin().abs() * 0.05)
            .collect();
        for bits in 1..=8u8 {
            let q = AffineBits::quantize(&values, bits).unwrap();
            assert_eq!(q.packed.len(), (1000 * bits as usize).div_ceil(8));
            let back = q.dequantize();
            let lo = values.iter().copied().fold(f32::INFINITY, f32::min);
            for (a, b) in values.iter().zip(&back) {
                assert!(
                    (a - b).abs() <= q.error_bound() * 1.0001 + 1e-7,
                    "{bits}: {a} {b}"
                );
                // Never below the smallest sigma: a quantised sigma stays positive.
                assert!(*b >= lo * 0.9999);
            }
        }
        // One bit: every value goes to the nearer end.
        let q = AffineBits::quantize(&[0.1, 0.2, 0.16, 0.14], 1).unwrap();
        let back = q.dequantize();
        assert_eq!(back[0], 0.1);
        assert!((back[1] - 0.2).abs() < 1e-7 && (back[2] - 0.2).abs() < 1e-7);
        assert_eq!(back[3], 0.1);
        // Constant tensors restore exactly.
        let q = AffineBits::quantize(&[0.3; 5], 2).unwrap();
        assert_eq!(q.dequantize(), vec![0.3; 5]);
        assert!(AffineBits::quantize(&[0.1], 0).is_err());
        assert!(AffineBits::quantize(&[0.1], 9).is_err());
    }

    fn sample() -> QbnnData {
        crate::format::fixtures::qbnn_sample(2)
    }

    #[test]
    fn file_round_trip_and_size() {
        let data = sample();
        let bytes = to_bytes(&data).unwrap();
        assert_eq!(from_bytes(&bytes).unwrap(), data);
        // 24 one-byte means and 6 bytes of 2-bit sigmas dominate the tensor data.
        assert!(bytes.len() < 24 + 6 + 8 + 200, "{}", bytes.len());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.qbnn");
        assert_eq!(save(&path, &data).unwrap(), bytes.len() as u64);
        assert_eq!(load(&path).unwrap(), data);
    }

    #[test]
    fn the_conformal_calibration_round_trips_and_a_bad_one_is_refused() {
        let mut data = sample();
        data.temperature = Some(1.25);
        data.conformal = Some(bnn_metrics::ConformalCalibration::Aps {
            temperature: 1.25,
            level: 0.9,
            qhat: 0.875,
            n: 5000,
        });
        assert_eq!(from_bytes(&to_bytes(&data).unwrap()).unwrap(), data);
        data.conformal = Some(bnn_metrics::ConformalCalibration::Aps {
            temperature: 1.25,
            level: 0.9,
            qhat: 0.875,
            n: 3,
        });
        let e = to_bytes(&data).unwrap_err().to_string();
        assert!(e.contains("conformal") && e.contains("n = 3"), "{e}");
    }

    #[test]
    fn the_temperature_round_trips_and_a_bad_one_is_refused() {
        let mut data = sample();
        data.temperature = Some(1.75);
        let bytes = to_bytes(&data).unwrap();
        assert_eq!(from_bytes(&bytes).unwrap().temperature, Some(1.75));
        for t in [f64::NAN, 0.0, -2.0, 1e6] {
            data.temperature = Some(t);
            let e = to_bytes(&data).unwrap_err().to_string();
            assert!(e.contains("temperature"), "{t}: {e}");
        }
        // A damaged temperature in a file: the calibration section is the payload's last
        // 9 bytes (tag, f64); the checksum is recomputed so that the value itself is refused.
        let mut bad = bytes.clone();
        let at = bad.len() - CHECKSUM_LEN - 8;
        bad[at..at + 8].copy_from_slice(&(-1.0f64).to_le_bytes());
        bad.truncate(bad.len() - CHECKSUM_LEN);
        checksum::append(&mut bad);
        let e = from_bytes(&bad).unwrap_err().to_string();
        assert!(
            e.contains("calibration") && e.contains("temperature"),
            "{e}"
        );
    }

    #[test]
    fn damaged_files_are_clear_errors() {
        let bytes = to_bytes(&sample()).unwrap();
        assert!(matches!(
            from_bytes(b"SWBNN\0\x01xx"),
            Err(FormatError::BadMagic { .. })
        ));
        assert!(matches!(
            from_bytes(&bytes[..bytes.len() - 1]),
            Err(FormatError::Truncated { .. })
        ));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            from_bytes(&longer),
            Err(FormatError::TrailingBytes { extra: 1 })
        ));
        let mut flipped = bytes.clone();
        flipped[QBNN_HEADER_LEN + 3] ^= 0x10;
        assert!(matches!(
            from_bytes(&flipped),
            Err(FormatError::ChecksumMismatch { .. })
        ));
        let mut newer = bytes.clone();
        newer[7] = 3;
        assert!(matches!(
            from_bytes(&newer),
            Err(FormatError::UnsupportedVersion {
                found: 3,
                oldest: QBNN_OLDEST_READABLE_VERSION,
                newest: QBNN_VERSION
            })
        ));
        let mut bad = sample();
        bad.tensors[0].shape = vec![5];
        assert!(matches!(to_bytes(&bad), Err(FormatError::InvalidModel(_))));
        let missing = load("/nonexistent/m.qbnn").unwrap_err().to_string();
        assert!(missing.contains("/nonexistent/m.qbnn"), "{missing}");
    }
}
