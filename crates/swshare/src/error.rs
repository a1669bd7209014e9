//! The crate's error type.

use thiserror::Error;

use crate::plan::PlanError;
use crate::table::TableError;

/// Everything that can go wrong while building or using a sharing plan.
#[derive(Debug, Error)]
pub enum SwshareError {
    /// The weight table is invalid.
    #[error("invalid weight table: {0}")]
    Table(#[from] TableError),
    /// A configuration value is out of range.
    #[error("invalid config `{field}` = {value}: {why}")]
    Config {
        /// Dotted field path, e.g. `refine.ellipse.k`.
        field: &'static str,
        /// The offending value, formatted.
        value: String,
        /// What is allowed.
        why: &'static str,
    },
    /// Fewer inlier weights than GMM components.
    #[error("the GMM needs at least K = {k} inlier weights, got {inliers}")]
    TooFewInliers {
        /// Requested number of components.
        k: usize,
        /// Inliers available after outlier detection.
        inliers: usize,
    },
    /// Every component was smaller than `n_min`, so nothing is left to share.
    #[error("all {k} GMM components have fewer than n_min = {n_min} members")]
    NoComponentLeft {
        /// Components before the cluster-size reduction.
        k: usize,
        /// The threshold.
        n_min: usize,
    },
    /// The GMM fit failed.
    #[error("GMM fit failed: {0}")]
    Gmm(#[from] gmm_minibatch::GmmError),
    /// A 2-D Gaussian operation failed (context says which).
    #[error("{context}: {source}")]
    Gauss {
        /// What was being computed (component indices included).
        context: String,
        /// The underlying error.
        source: gauss2d::Gauss2dError,
    },
    /// A plan is inconsistent.
    #[error("invalid plan: {0}")]
    Plan(#[from] PlanError),
    /// Stage functions were called in an order they do not support.
    #[error("stage order: {0}")]
    StageOrder(&'static str),
    /// A plan does not fit the table or parameters it is used with.
    #[error("plan/input mismatch: {what}: plan has {plan}, input has {input}")]
    Mismatch {
        /// What disagrees.
        what: &'static str,
        /// The plan's number.
        plan: usize,
        /// The input's number.
        input: usize,
    },
}

impl SwshareError {
    pub(crate) fn config(
        field: &'static str,
        value: impl std::fmt::Display,
        why: &'static str,
    ) -> Self {
        Self::Config {
            field,
            value: value.to_string(),
            why,
        }
    }
}
