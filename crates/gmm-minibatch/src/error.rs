//! Error type of the crate.

/// Everything that can go wrong when fitting or scoring.
#[derive(Debug, thiserror::Error)]
pub enum GmmError {
    /// No points were given.
    #[error("empty input: at least one point is required")]
    EmptyInput,
    /// `k == 0` was requested.
    #[error("k = 0 components requested")]
    ZeroComponents,
    /// A point coordinate is NaN or infinite.
    #[error("point {index} has a non-finite coordinate {axis} = {value}")]
    NonFinitePoint {
        /// Index of the (first) offending point.
        index: usize,
        /// 0 = mu, 1 = sigma.
        axis: usize,
        /// The value.
        value: f32,
    },
    /// `weights.len() != points.len()`.
    #[error("weights have length {weights} but there are {points} points")]
    WeightLength {
        /// Length of the weights.
        weights: usize,
        /// Number of points.
        points: usize,
    },
    /// A weight is negative, NaN or infinite.
    #[error("weight {index} = {value} is not a finite non-negative number")]
    BadWeight {
        /// Index of the (first) offending weight.
        index: usize,
        /// The value.
        value: f32,
    },
    /// All weights are zero.
    #[error("all weights are zero")]
    ZeroTotalWeight,
    /// More points than the `u32` indices used internally can address.
    #[error("{0} points is more than the supported 4294967295")]
    TooManyPoints(usize),
    /// An invalid configuration value.
    #[error("invalid config: {0}")]
    Config(String),
    /// Components/weights given to `GmmFit::from_components` are inconsistent.
    #[error("invalid mixture: {0}")]
    InvalidMixture(String),
    /// Building a component failed.
    #[error("component {index}: {source}")]
    Component {
        /// Component index.
        index: usize,
        /// The error from `gauss2d`.
        #[source]
        source: gauss2d::Gauss2dError,
    },
}
