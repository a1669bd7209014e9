//! Error type of the crate.

use thiserror::Error;

/// Everything that can go wrong in this crate. Every variant carries the offending values.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Gauss2dError {
    /// A mean, covariance, weight or parameter entry is NaN or infinite.
    #[error("non-finite value in {field}[{index}]: {value}")]
    NonFinite {
        /// Which input (`"mean"`, `"cov"`, ...).
        field: &'static str,
        /// Flat index of the offending entry (row-major for matrices).
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// The covariance is not symmetric within the relative tolerance [`crate::SYMMETRY_REL_TOL`].
    #[error(
        "covariance not symmetric: cov[0][1] = {upper}, cov[1][0] = {lower} (relative difference {rel_diff:e})"
    )]
    NotSymmetric {
        /// Entry (0, 1).
        upper: f64,
        /// Entry (1, 0).
        lower: f64,
        /// `|upper - lower| / max |entry|`.
        rel_diff: f64,
    },
    /// The covariance has an eigenvalue below the negative tolerance (see [`crate::CovFloor`]).
    #[error(
        "matrix not positive semi-definite: eigenvalues {min_eigenvalue:e} and {max_eigenvalue:e} (tolerance {tolerance:e})"
    )]
    NotPositiveSemiDefinite {
        /// Smallest eigenvalue.
        min_eigenvalue: f64,
        /// Largest eigenvalue.
        max_eigenvalue: f64,
        /// Allowed negative slack: eigenvalues `>= -tolerance` count as zero.
        tolerance: f64,
    },
    /// The covariance floor is not a finite positive number.
    #[error("invalid covariance floor {min_eigenvalue}: must be finite and > 0")]
    InvalidFloor {
        /// The rejected floor.
        min_eigenvalue: f64,
    },
    /// Mixture/merge weights are unusable.
    #[error("invalid weights: {reason} (index {index:?}, value {value})")]
    InvalidWeights {
        /// What is wrong.
        reason: &'static str,
        /// Index of the offending weight, if a single weight is at fault.
        index: Option<usize>,
        /// The offending weight, or the total weight.
        value: f64,
    },
    /// An operation needs at least one input Gaussian.
    #[error("empty input: {what} needs at least one Gaussian")]
    EmptyInput {
        /// The operation.
        what: &'static str,
    },
    /// A probability outside its allowed range.
    #[error("probability {p} outside [0, 1)")]
    InvalidProbability {
        /// The offending probability.
        p: f64,
    },
    /// A standard deviation that is not finite and strictly positive.
    #[error("invalid standard deviation {which} = {value}: must be finite and > 0")]
    InvalidStdDev {
        /// Which argument (`"sigma_q"` or `"sigma_p"`).
        which: &'static str,
        /// The offending value.
        value: f64,
    },
    /// An iterative algorithm did not reach its tolerance.
    #[error(
        "{what} did not converge after {iterations} iterations (residual {residual:e}, tolerance {tol:e})"
    )]
    NoConvergence {
        /// The algorithm.
        what: &'static str,
        /// Iterations performed.
        iterations: usize,
        /// Last relative change.
        residual: f64,
        /// Requested tolerance.
        tol: f64,
    },
    /// Invalid options of an iterative algorithm.
    #[error("invalid option {name} = {value}")]
    InvalidOption {
        /// Option name.
        name: &'static str,
        /// Offending value.
        value: f64,
    },
}
