//! The compact `.swb` model file: a weight-shared Bayesian model in one versioned,
//! checksummed file.
//!
//! The format is specified byte by byte in `docs/swb-format.md` (in the repository); the
//! encoder and decoder here follow that text section by section over hand-written,
//! bounds-checked primitives, and files written by earlier versions are kept as test
//! fixtures.
//!
//! # Layout (format version 3)
//!
//! | part | bytes | content |
//! |---|---|---|
//! | header | 18 | [`MAGIC`] `SWBNN\0\x01`, version `u16` LE, kind `u8` (0 shared, 1 full BNN), payload length `u64` LE |
//! | meta | var. | architecture JSON text, layer paths and shapes |
//! | codebook | var. | `K` means and `K` rhos, `f32` |
//! | index | var. | one symbol per weight: plain `u8`/`u16`, context-adaptive range coding ([`adaptive`], version 2) or canonical Huffman ([`huffman`], version 1) ([`index`]) |
//! | alphas | var. | per ellipse weight: 1..=5 distinct codebook indices and their alphas (`f32`, summing to 1) |
//! | outliers | var. | outlier `mu` and `rho` as `f32` or 8-bit ([`quant`]), causes packed 2 bits each |
//! | unshared | var. | every other parameter tensor: path, shape, `f32` data |
//! | calibration | 1 or more | the fitted temperature and the conformal calibration, if any (version 3; [`with_calibration`]) |
//! | checksum | 4 | CRC-32 of everything before it, `u32` LE |
//!
//! Integers and lengths inside the sections are variable-length (one byte below 251, else a
//! tag byte 251/252/253 and a `u16`/`u32`/`u64`), floats are little-endian IEEE 754. In
//! [`FileSizes`] the `header` part counts the fixed header, the meta and calibration sections
//! and the checksum.
//!
//! The index reserves symbol `K` for `Ellipse` and `K + 1` for `Outlier` fates, so its plain
//! width is one byte when `K + 2 <= 256` and two bytes up to `K + 2 <= 65536` (see
//! [`IndexWidth`]).
//!
//! **Versions.** Version 3 adds the calibration section: the temperature that post-hoc
//! calibration fitted on held-out data ([`SharedModelData::temperature`], `None` when none was
//! fitted) and, since conformal calibration, the split-conformal calibration
//! ([`SharedModelData::conformal`]; tags 2 and 3 of the section, which files without one never
//! hold), which [`with_calibration`] and [`set_calibration`] replace in an existing file.
//! Version 2 differs from version 1 only in the index section: it may hold the adaptive
//! range-coded variant, and the writer no longer produces Huffman indices. Readers load
//! versions [`OLDEST_READABLE_VERSION`]`..=`[`FORMAT_VERSION`] (so version 1 and 2 files still
//! load, with no temperature) and refuse others with [`FormatError::UnsupportedVersion`], which
//! names both.
//!
//! Readers reject, with a specific [`FormatError`]: other magic bytes, unsupported versions,
//! the other file kind, truncated or over-long files, checksum mismatches, and sections whose
//! lengths or values are inconsistent (naming the section and the byte offset). Decoding
//! never allocates more than the file's size allows, and its work is bounded by the file's
//! size before it starts ([`adaptive::max_decode_work`], [`decode_work`]).
//! [`from_bytes_checked`] and [`load_checked`] let a caller check the architecture against
//! the layers before the index is decoded.
//!
//! # Example
//!
//! ```
//! use swshare::format::{self, LayerShape, SaveOptions, SharedModelData};
//! use swshare::{OutlierCause, WeightFate};
//!
//! let model = SharedModelData {
//!     arch: r#"{"name":"tiny"}"#.into(),
//!     codebook_mu: vec![-0.1, 0.1],
//!     codebook_rho: vec![-5.0, -4.0],
//!     layers: vec![LayerShape { path: "fc.weight".into(), shape: vec![3] }],
//!     fates: vec![
//!         WeightFate::Shared(1),
//!         WeightFate::Outlier(OutlierCause::MeanThreshold),
//!         WeightFate::Shared(0),
//!     ],
//!     ellipses: vec![],
//!     outlier_mu: vec![0.7],
//!     outlier_rho: vec![-3.0],
//!     outlier_causes: vec![OutlierCause::MeanThreshold],
//!     unshared: vec![],
//!     temperature: Some(1.5),
//!     conformal: None,
//! };
//! let opts = SaveOptions { entropy_index: true, int8_outliers: false };
//! let bytes = format::to_bytes(&model, &opts).unwrap();
//! assert_eq!(format::encoded_sizes(&model, &opts).unwrap().total, bytes.len() as u64);
//! assert_eq!(format::from_bytes(&bytes).unwrap(), model);
//! ```

pub mod adaptive;
mod checksum;
mod codec;
mod error;
mod header;
pub mod huffman;
pub mod index;
mod io;
mod kind;
mod model;
pub mod qbnn;
pub mod quant;
mod wire;

use serde::{Deserialize, Serialize};

pub use adaptive::decode_work;
pub use checksum::CHECKSUM_LEN;
#[cfg(test)]
pub(crate) use codec::encode_shared_unchecked;
pub use error::{FormatError, SwbError};
pub use header::{FORMAT_VERSION, HEADER_LEN, MAGIC, OLDEST_READABLE_VERSION};
pub use index::IndexWidth;
pub use io::{
    MAX_FILE_LEN, file_error, load, load_checked, load_full_bnn, save, save_full_bnn,
    set_calibration, set_temperature, write_atomic,
};
pub use kind::FileKind;
pub use model::{EllipseEntry, FullBnnData, LayerShape, NamedTensor, SharedModelData};

/// Optional encodings beyond the paper's plain layout (both off by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaveOptions {
    /// Entropy-code the index (context-adaptive range coder, [`adaptive`]) instead of storing
    /// it at fixed width (lossless).
    pub entropy_index: bool,
    /// Store outlier `mu` and `rho` with 8 bits each (lossy, bound in [`quant`]).
    pub int8_outliers: bool,
}

impl SaveOptions {
    /// All four option combinations, plain first.
    pub const ALL: [SaveOptions; 4] = [
        SaveOptions {
            entropy_index: false,
            int8_outliers: false,
        },
        SaveOptions {
            entropy_index: true,
            int8_outliers: false,
        },
        SaveOptions {
            entropy_index: false,
            int8_outliers: true,
        },
        SaveOptions {
            entropy_index: true,
            int8_outliers: true,
        },
    ];
}

/// Size in bytes of each part of a `.swb` file; the parts add up to `total`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSizes {
    /// Fixed header, meta section (architecture, layer shapes) and checksum.
    pub header: u64,
    /// Codebook section.
    pub codebook: u64,
    /// Index section.
    pub index: u64,
    /// Ellipse (alpha-blend) section.
    pub alphas: u64,
    /// Outlier section.
    pub outliers: u64,
    /// Unshared parameters section.
    pub unshared: u64,
    /// Whole file.
    pub total: u64,
}

/// Encodes `model` into the bytes of a `.swb` file.
pub fn to_bytes(model: &SharedModelData, opts: &SaveOptions) -> Result<Vec<u8>, FormatError> {
    codec::encode_shared(model, opts).map(|(bytes, _)| bytes)
}

/// What a `.swb` file says about its model before the index: read first, so a caller can
/// refuse a file whose architecture does not match its layers before any decoding work.
#[derive(Debug, Clone, Copy)]
pub struct ModelMeta<'a> {
    /// The architecture text.
    pub arch: &'a str,
    /// The shareable weight tensors.
    pub layers: &'a [LayerShape],
    /// Number of codebook entries `K`.
    pub codebook_len: usize,
}

/// Decodes the bytes of a `.swb` file.
pub fn from_bytes(bytes: &[u8]) -> Result<SharedModelData, FormatError> {
    codec::decode_shared(bytes, &mut |_| Ok(()))
}

/// Decodes the bytes of a `.swb` file, calling `check` on its [`ModelMeta`] before the index
/// is decoded; an error from `check` becomes [`FormatError::Rejected`].
pub fn from_bytes_checked(
    bytes: &[u8],
    mut check: impl FnMut(&ModelMeta<'_>) -> Result<(), String>,
) -> Result<SharedModelData, FormatError> {
    codec::decode_shared(bytes, &mut check)
}

/// The sizes [`save`] would report, without touching the file system.
pub fn encoded_sizes(
    model: &SharedModelData,
    opts: &SaveOptions,
) -> Result<FileSizes, FormatError> {
    codec::encode_shared(model, opts).map(|(_, sizes)| sizes)
}

/// Encodes a full BNN, with its fitted calibration temperature if any, into the bytes
/// [`save_full_bnn`] writes.
pub fn full_bnn_to_bytes(
    arch: &str,
    layers: &[LayerShape],
    mu: &[f32],
    rho: &[f32],
    unshared: &[NamedTensor],
    temperature: Option<f64>,
) -> Result<Vec<u8>, FormatError> {
    codec::encode_full(arch, layers, mu, rho, unshared, temperature)
}

/// The bytes of a `.swb` or full-BNN file (any readable version) with its calibration
/// temperature replaced by `temperature` (`None` removes it) and its conformal calibration
/// kept, written as a current-version file. The file is decoded and checked whole first; every
/// section before the calibration keeps its bytes, so the model is unchanged. A temperature
/// outside [`bnn_metrics::TEMPERATURE_RANGE`] or not finite is [`FormatError::InvalidModel`].
pub fn with_temperature(bytes: &[u8], temperature: Option<f64>) -> Result<Vec<u8>, FormatError> {
    let (_, conformal) = codec::calibration_of(bytes)?;
    codec::with_calibration(bytes, temperature, conformal.as_ref())
}

/// [`with_temperature`], replacing the conformal calibration as well (`None` removes it); one
/// that fails [`bnn_metrics::ConformalCalibration::validate`] is
/// [`FormatError::InvalidModel`].
pub fn with_calibration(
    bytes: &[u8],
    temperature: Option<f64>,
    conformal: Option<&bnn_metrics::ConformalCalibration>,
) -> Result<Vec<u8>, FormatError> {
    codec::with_calibration(bytes, temperature, conformal)
}

/// Decodes the bytes of a full-BNN file.
pub fn full_bnn_from_bytes(bytes: &[u8]) -> Result<FullBnnData, FormatError> {
    codec::decode_full(bytes)
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;
