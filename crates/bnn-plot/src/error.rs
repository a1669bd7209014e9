//! [`PlotError`]: everything that can stop a figure from being written.

use std::path::PathBuf;

/// Why a figure could not be drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The output path does not end in `.png` or `.svg`.
    #[error("{path}: unsupported figure format (the file name must end in .png or .svg)")]
    UnsupportedFormat {
        /// The path given.
        path: PathBuf,
    },
    /// The requested size is too small to lay the figure out, or too large.
    #[error(
        "figure size {width}x{height} px is out of range ({min_width}..={max} x {min_height}..={max})"
    )]
    BadSize {
        /// Width asked for.
        width: u32,
        /// Height asked for.
        height: u32,
        /// Smallest width this figure can be laid out in.
        min_width: u32,
        /// Smallest height this figure can be laid out in.
        min_height: u32,
        /// Largest side.
        max: u32,
    },
    /// The input data are inconsistent or empty.
    #[error("{what}: {why}")]
    BadInput {
        /// Which input.
        what: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// A metric the figure computes (ROC curve, AUROC) rejected its input.
    #[error("{what}: {source}")]
    Metrics {
        /// Which computation.
        what: &'static str,
        /// The cause.
        source: bnn_metrics::MetricsError,
    },
    /// plotters failed while drawing (a backend or font error).
    #[error("drawing failed: {0}")]
    Draw(String),
    /// The embedded font could not be registered.
    #[error("the embedded font could not be loaded")]
    Font,
    /// Encoding the PNG failed.
    #[error("{path}: encoding PNG: {source}")]
    Encode {
        /// The output path.
        path: PathBuf,
        /// The cause.
        source: image::ImageError,
    },
    /// Writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The path being written.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl<E: std::error::Error + Send + Sync> From<plotters::drawing::DrawingAreaErrorKind<E>>
    for PlotError
{
    fn from(e: plotters::drawing::DrawingAreaErrorKind<E>) -> Self {
        PlotError::Draw(e.to_string())
    }
}

impl PlotError {
    pub(crate) fn bad_input(what: &'static str, why: impl Into<String>) -> Self {
        PlotError::BadInput {
            what,
            why: why.into(),
        }
    }
}

/// `Result` with [`PlotError`].
pub type Result<T, E = PlotError> = std::result::Result<T, E>;
