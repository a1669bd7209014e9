//! Errors of this crate.

/// What can go wrong when building a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// An unknown architecture or kind name.
    #[error("unknown {what} `{name}` (known: {known})")]
    UnknownName {
        /// What was looked up.
        what: &'static str,
        /// The name given.
        name: String,
        /// The valid names.
        known: String,
    },
    /// A configuration that cannot build a network.
    #[error("invalid model configuration: {0}")]
    InvalidConfig(String),
    /// A layer could not be built.
    #[error("layer `{path}`: {source}")]
    Layer {
        /// The layer's path.
        path: String,
        /// The cause.
        source: bnn_layers::LayerError,
    },
    /// The weight-sharing plan gave no sources for a layer.
    #[error("no sharing sources for layer `{0}`")]
    MissingSources(String),
}
