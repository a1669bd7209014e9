//! Errors of this crate.

/// What can go wrong while training or evaluating.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The loss became NaN or infinite; training stopped.
    #[error(
        "the loss became {value} at epoch {epoch}, step {step}; training stopped (the checkpoint of the previous epoch is kept)"
    )]
    NonFiniteLoss {
        /// Epoch of the bad step.
        epoch: usize,
        /// Step within the epoch.
        step: usize,
        /// The loss value.
        value: f32,
    },
    /// A parameter became NaN or infinite during an epoch; training stopped before the
    /// epoch's checkpoint, so the last checkpoint on disk holds only finite values.
    #[error(
        "parameter {path} holds a non-finite value after epoch {epoch}; training stopped and the checkpoint of the previous epoch is kept"
    )]
    NonFiniteParameters {
        /// The epoch (0-based) after which the parameter was checked.
        epoch: usize,
        /// The parameter's path.
        path: String,
    },
    /// A checkpoint belongs to another run; nothing was changed.
    #[error(
        "cannot resume the checkpoint in {dir}: {what}; nothing was changed (train into another directory, or remove this one to start over)"
    )]
    ResumeMismatch {
        /// The checkpoint directory.
        dir: String,
        /// The first difference.
        what: String,
    },
    /// Data loading failed.
    #[error(transparent)]
    Data(#[from] bnn_data::DataError),
    /// A metric could not be computed.
    #[error(transparent)]
    Metrics(#[from] bnn_metrics::MetricsError),
    /// A checkpoint could not be written or read.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// Invalid settings.
    #[error("invalid training configuration: {0}")]
    Config(String),
    /// A training setting is out of range.
    #[error("training setting {field} = {} is out of range: {expected}", bnn_metrics::Short(*.value))]
    InvalidSetting {
        /// The field, e.g. `lr_rho`.
        field: &'static str,
        /// Its value.
        value: f64,
        /// What it must be.
        expected: &'static str,
    },
    /// A model could not be built.
    #[error(transparent)]
    Model(#[from] bnn_models::ModelError),
    /// The devices of a data-parallel run are unusable.
    #[error("data-parallel devices: {0}")]
    Devices(Box<crate::DevicesError>),
    /// A file of a model directory (or another file the library reads) could not be read or
    /// written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A JSON file that cannot be parsed or written.
    #[error("{path}: {reason}")]
    Json {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A model directory that a resumed run cannot continue; nothing was changed.
    #[error("{0}")]
    Resume(String),
}

impl From<crate::DevicesError> for TrainError {
    fn from(e: crate::DevicesError) -> Self {
        // Boxed: the largest cause, which would make every `Result` of the crate larger.
        TrainError::Devices(Box::new(e))
    }
}

impl TrainError {
    /// An I/O error with its path.
    pub fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        TrainError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}
