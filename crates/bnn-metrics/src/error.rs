//! Error type shared by every metric.

use thiserror::Error;

/// Everything that can be wrong with the input of a metric.
///
/// Bad input never panics: every public function validates and returns one of these.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MetricsError {
    /// A flat buffer does not hold `rows * classes` values.
    #[error(
        "{what}: buffer has {len} values, expected {rows} rows x {classes} classes = {expected}"
    )]
    Shape {
        /// Which input was wrong.
        what: &'static str,
        /// Length of the buffer that was passed.
        len: usize,
        /// Declared number of rows.
        rows: usize,
        /// Declared number of classes.
        classes: usize,
        /// `rows * classes` (saturating).
        expected: usize,
    },
    /// Two inputs that must describe the same examples disagree in size.
    #[error("{what}: expected {expected}, got {got}")]
    LengthMismatch {
        /// Which pair of inputs disagrees.
        what: &'static str,
        /// The size implied by the first input.
        expected: usize,
        /// The size of the offending input.
        got: usize,
    },
    /// An input has no examples (or no classes) where at least one is needed.
    #[error("empty input: {what}")]
    Empty {
        /// Which input was empty.
        what: &'static str,
    },
    /// A value is NaN or infinite.
    #[error("{what}: non-finite value {value} at row {row}, column {col}")]
    NonFinite {
        /// Which input holds the value.
        what: &'static str,
        /// Row (example) index.
        row: usize,
        /// Column (class) index; 0 for one-dimensional inputs.
        col: usize,
        /// The offending value.
        value: f64,
    },
    /// A probability is negative.
    #[error("probabilities: negative value {} at row {row}, column {col}", crate::Short(*.value))]
    NegativeProbability {
        /// Row (example) index.
        row: usize,
        /// Column (class) index.
        col: usize,
        /// The offending value.
        value: f64,
    },
    /// A row of probabilities does not sum to one within the tolerance.
    #[error("probabilities: row {row} sums to {sum}, not 1 (tolerance {tolerance})")]
    RowSum {
        /// Row (example) index.
        row: usize,
        /// The row's sum (computed in `f64`).
        sum: f64,
        /// The tolerance that was applied.
        tolerance: f64,
    },
    /// A label is negative or not smaller than the number of classes.
    #[error("label {label} at index {index} is out of range for {classes} classes")]
    LabelOutOfRange {
        /// Position of the label in the label slice.
        index: usize,
        /// The label, widened to `i128` so that negative values can be shown.
        label: i128,
        /// Number of classes.
        classes: usize,
    },
    /// An OOD metric got scores of only one class (in-distribution or out-of-distribution).
    #[error(
        "OOD metrics need both classes: {in_count} in-distribution and {out_count} out-of-distribution scores"
    )]
    SingleClass {
        /// Number of in-distribution (positive) scores.
        in_count: usize,
        /// Number of out-of-distribution (negative) scores.
        out_count: usize,
    },
    /// A parameter (bin count, TPR level, tolerance, ...) is outside its valid range.
    #[error("invalid parameter {name} = {}: {reason}", crate::Short(*.value))]
    InvalidParameter {
        /// Name of the parameter.
        name: &'static str,
        /// Its value.
        value: f64,
        /// What is allowed.
        reason: &'static str,
    },
    /// [`crate::OodScore::MutualInformation`] was asked of a prediction made without MC samples.
    #[error(
        "mutual information is unavailable: the prediction was not built from Monte Carlo samples"
    )]
    MissingMutualInformation,
    /// A value that must be strictly positive (a standard deviation) is zero or negative.
    #[error("{what}: value {} at row {row}, column {col} must be > 0", crate::Short(*.value))]
    NonPositive {
        /// Which input holds the value.
        what: &'static str,
        /// Row (example) index.
        row: usize,
        /// Column (target) index.
        col: usize,
        /// The offending value.
        value: f64,
    },
    /// A per-example query (a CDF, a quantile, an interval) named an example or target that
    /// does not exist.
    #[error("{what}: index {index} is out of range for {len}")]
    IndexOutOfRange {
        /// Which index was wrong (example or target).
        what: &'static str,
        /// The index that was passed.
        index: usize,
        /// The number of examples or targets.
        len: usize,
    },
    /// A split-conformal fit at `level` has too few calibration points: it needs
    /// `n >= ceil(1 / (1 - level))`, so that the conformal quantile (the
    /// `ceil((n + 1) * level)`-th smallest score) exists.
    #[error(
        "conformal level {} needs at least {needed} calibration points, got n = {n}",
        crate::Short(*.level)
    )]
    TooFewCalibrationPoints {
        /// The requested coverage level.
        level: f64,
        /// Number of calibration points given.
        n: usize,
        /// The minimum number for this level.
        needed: usize,
    },
}

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, MetricsError>;
