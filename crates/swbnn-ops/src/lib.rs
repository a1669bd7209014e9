//! The one-model operations of `swbnn` as a library, without the command line or the
//! experiment harness: train ([`commands::train`]), compress ([`commands::compress`]),
//! evaluate ([`commands::eval`]), calibrate ([`commands::calibrate`]), export
//! ([`commands::export`]), load any model file ([`load::load_model`]) and warm the GPU caches
//! ([`warmup`]), each one request type checked in full before any data is read or anything
//! written, on a preset data set or your own (`folder:DIR`, `npz:FILE`, [`data`]).
//!
//! ```no_run
//! use swbnn_ops::commands::{self, CompressRequest, EvalRequest, TrainKind, TrainRequest};
//!
//! let device = bnn_layers::device_by_name("flex")?;
//! let data: bnn_data::DataSource = "npz:my-data.npz".parse()?;
//! let det = TrainRequest::new(data.clone(), "lenet5".parse()?, TrainKind::Deterministic, "det".into());
//! commands::train(&det, &device, &mut bnn_train::Silent)?;
//! let bnn = TrainRequest {
//!     from: Some("det".into()),
//!     ..TrainRequest::new(data.clone(), "lenet5".parse()?, TrainKind::Bayesian, "bnn".into())
//! };
//! commands::train(&bnn, &device, &mut bnn_train::Silent)?;
//! let request = CompressRequest::new("bnn".into(), data.clone(), "model.swb".into());
//! commands::compress(&request, &device, &mut bnn_train::Silent)?;
//! let eval = commands::eval(&EvalRequest::new("model.swb".into(), data), &device)?;
//! if let Some(ev) = &eval.evaluation {
//!     println!("accuracy {:.4}", ev.summary.accuracy);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod calibration;
pub mod checks;
pub mod commands;
pub mod corruptions;
pub mod data;
pub mod defaults;
pub mod limits;
pub mod load;
pub mod predictions;
pub mod qbnn;
pub mod run_record;
pub mod search;
mod split;
pub mod table;
#[doc(hidden)]
pub mod testing;
pub mod warmup;

use std::path::Path;

pub use split::ValidationSplit;

/// Errors of the one-model operations and of the harness above them.
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
    Model(#[from] bnn_models::ModelError),
    /// Converting layers.
    #[error(transparent)]
    Layer(#[from] bnn_layers::LayerError),
    /// A PyTorch import or export (boxed: the largest of the sources).
    #[error(transparent)]
    Interop(Box<bnn_interop::InteropError>),
    /// The weight-sharing stages.
    #[error(transparent)]
    Swshare(#[from] swshare::SwshareError),
    /// The weight-sharing burn edges.
    #[error(transparent)]
    Edge(#[from] swshare::burn_edges::EdgeError),
    /// The 2DGBNN pipeline.
    #[error(transparent)]
    Compress(#[from] swshare::compress::CompressError),
    /// SNR pruning (the equal-size baseline) failed.
    #[error(transparent)]
    Prune(#[from] swshare::snr_prune::PruneError),
    /// A model file.
    #[error(transparent)]
    File(#[from] swshare::SwbError),
    /// Drawing a figure (a `bnn_plot::PlotError`, boxed so that the operations do not depend
    /// on plotting).
    #[error(transparent)]
    Plot(Box<dyn std::error::Error + Send + Sync>),
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
    /// A model file's bytes that cannot be encoded or decoded.
    #[error(transparent)]
    Format(#[from] swshare::FormatError),
    /// A data set that does not fit the model (image shape or number of classes).
    #[error("the {what} has {found}, the model takes {expected}")]
    DataMismatch {
        /// Which data set (e.g. "test set").
        what: String,
        /// What the data has.
        found: String,
        /// What the model takes.
        expected: String,
    },
    /// A request the given inputs cannot satisfy; the message names the file, flag or layer.
    #[error("{0}")]
    Usage(String),
    /// A sharing-plan file that cannot be decoded or is inconsistent.
    #[error("{path}: not a valid sharing plan: {source}")]
    Plan {
        /// The file.
        path: String,
        /// The cause.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A sharing plan that cannot be encoded.
    #[error("encoding the sharing plan: {0}")]
    PlanEncode(bincode::error::EncodeError),
    /// A stage's kept predictions that cannot be decoded or are inconsistent.
    #[error("{path}: not a valid predictions file: {source}")]
    Predictions {
        /// The file.
        path: String,
        /// The cause.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A NumPy (`.npy`) file of predictions that cannot be written.
    #[error(transparent)]
    Npy(#[from] gmm_minibatch::npy::NpyError),
    /// Predictions that cannot be encoded.
    #[error("encoding predictions: {0}")]
    PredictionsEncode(bincode::error::EncodeError),
    /// A burn record (model or optimiser state) that cannot be serialised.
    #[error("serialising a model record: {0}")]
    Record(#[from] burn::store::RecordError),
    /// A run directory without the checkpoint of a stage that a table or baseline builds on.
    #[error("{dir}: no checkpoint of stage `{stage}` to build on")]
    MissingStage {
        /// The stage's directory.
        dir: String,
        /// The stage (e.g. "bbb").
        stage: String,
    },
    /// The main experiment's results without a method's row that a table builds on.
    #[error("the main experiment gave no `{method}` row")]
    MissingRow {
        /// The method (e.g. "2dgbnn").
        method: String,
    },
    /// A tensor of a quantised (`.qbnn`) model that does not fit the model's parameters.
    #[error("qbnn: tensor `{tensor}`: {problem}")]
    QbnnTensor {
        /// The tensor's parameter path.
        tensor: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl From<bnn_interop::InteropError> for Error {
    fn from(e: bnn_interop::InteropError) -> Self {
        Error::Interop(Box::new(e))
    }
}

impl Error {
    /// A sharing-plan error with its path.
    pub fn plan(path: &Path, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Plan {
            path: path.display().to_string(),
            source: Box::new(source),
        }
    }

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
