//! Errors of this crate.

/// What can go wrong when building or converting layers.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LayerError {
    /// A list of per-weight values does not match the tensor it describes.
    #[error("{what}: expected {expected} values, got {got}")]
    LengthMismatch {
        /// What was being built.
        what: String,
        /// Expected count.
        expected: usize,
        /// Actual count.
        got: usize,
    },
    /// A codebook index is out of range.
    #[error("weight {weight}: codebook index {index} out of range (codebook has {len} entries)")]
    CodebookIndex {
        /// Position of the weight in its tensor (row-major).
        weight: usize,
        /// The offending index.
        index: u32,
        /// Codebook size.
        len: usize,
    },
    /// An ellipse weight blends an invalid number of components or has bad alphas.
    #[error("weight {weight}: invalid alpha-blend ({reason})")]
    InvalidBlend {
        /// Position of the weight in its tensor.
        weight: usize,
        /// Why it is invalid.
        reason: String,
    },
    /// A non-finite value where a finite one is needed.
    #[error("{what}: non-finite value at index {index}")]
    NonFinite {
        /// What was being built.
        what: String,
        /// Position of the value.
        index: usize,
    },
    /// Shapes of two tensors that must agree differ.
    #[error("{what}: shape {got:?} does not match {expected:?}")]
    ShapeMismatch {
        /// What was being converted.
        what: String,
        /// Expected shape.
        expected: Vec<usize>,
        /// Actual shape.
        got: Vec<usize>,
    },
    /// An unknown or not compiled-in backend name.
    #[error("backend `{name}` is not available (compiled in: {available})")]
    UnknownBackend {
        /// The requested name.
        name: String,
        /// Backends this build supports.
        available: String,
    },
    /// A compiled-in GPU backend that cannot run on this machine (no driver, no device, no
    /// NVRTC or CUDA headers).
    #[error("backend `{name}` cannot run here: {reason}")]
    BackendUnavailable {
        /// The requested name.
        name: String,
        /// What is missing.
        reason: String,
    },
    /// A Monte-Carlo stack size out of range ([`crate::set_mc_stack`]).
    #[error("Monte-Carlo stack of {stack} samples: must be 1 to {max}")]
    McStack {
        /// The requested stack.
        stack: usize,
        /// The largest stack.
        max: usize,
    },
}
