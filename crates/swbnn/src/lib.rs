//! The `swbnn` command line's library: data loading with the paper's transforms, the
//! three-method experiment of the paper's tables ([`experiment::run`]) and its presets
//! ([`presets`], [`paper_presets`]), the baselines ([`baselines`]) and the paper's other
//! tables ([`tables`]), shared by the `swbnn` binary and `cargo xtask reproduce`.
#![warn(missing_docs)]

pub mod baselines;
pub mod data;
pub mod experiment;
pub mod paper_presets;
pub mod presets;
pub mod tables;

use std::path::Path;

/// Errors of the pipeline.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Data loading.
    #[error(transparent)]
    Data(#[from] bnn_data::DataError),
    /// Training or evaluation.
    #[error(transparent)]
    Train(#[from] bnn_train::TrainError),
    /// Building a model.
    #[error(transparent)]
    Model(#[from] models::ModelError),
    /// Converting layers.
    #[error(transparent)]
    Layer(#[from] bnn_layers::LayerError),
    /// The weight-sharing stages.
    #[error(transparent)]
    Swshare(#[from] swshare::SwshareError),
    /// The weight-sharing burn edges.
    #[error(transparent)]
    Edge(#[from] swshare::burn_edges::EdgeError),
    /// The 2DGBNN pipeline.
    #[error(transparent)]
    Compress(#[from] swshare::compress::CompressError),
    /// A model file.
    #[error(transparent)]
    File(#[from] swshare::SwbError),
    /// A metric.
    #[error(transparent)]
    Metrics(#[from] bnn_metrics::MetricsError),
    /// A JSON file that cannot be parsed.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// The cause.
        source: serde_json::Error,
    },
    /// Serialising results to JSON failed.
    #[error("writing JSON: {0}")]
    Json(serde_json::Error),
    /// A file system error.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// A JSON parse error with its path.
    pub fn parse(path: &Path, source: serde_json::Error) -> Self {
        Error::Parse {
            path: path.display().to_string(),
            source,
        }
    }

    /// A JSON serialisation error.
    pub fn json(source: serde_json::Error) -> Self {
        Error::Json(source)
    }

    /// An I/O error with its path.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.display().to_string(),
            source,
        }
    }
}
