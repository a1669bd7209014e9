//! The validated [`Probabilities`] matrix and the numerically stable softmax that builds it.

use rayon::prelude::*;

use crate::error::{MetricsError, Result};

/// Default absolute tolerance on `|sum(row) - 1|` accepted by [`Probabilities::new`].
///
/// Generous enough for `f32` (and even half-precision) softmax outputs over thousands of classes.
pub const ROW_SUM_TOLERANCE: f64 = 1e-3;

/// Rows per rayon task: large enough that scheduling overhead is negligible.
pub(crate) const ROWS_PER_TASK: usize = 256;

/// A row-major `[n, classes]` matrix of class probabilities, validated on construction.
///
/// Invariants (checked by [`Probabilities::new`]): `data.len() == n * classes`, `n >= 1`,
/// `classes >= 1`, every entry finite and `>= 0`, every row sums to 1 within a tolerance
/// ([`ROW_SUM_TOLERANCE`] by default). Rows are *not* renormalised: metrics use the values as given.
#[derive(Debug, Clone, PartialEq)]
pub struct Probabilities {
    data: Vec<f32>,
    n: usize,
    classes: usize,
}

fn check_shape(what: &'static str, len: usize, n: usize, classes: usize) -> Result<()> {
    if n == 0 {
        return Err(MetricsError::Empty { what });
    }
    if classes == 0 {
        return Err(MetricsError::Empty {
            what: "number of classes",
        });
    }
    let expected = n.saturating_mul(classes);
    if len != expected {
        return Err(MetricsError::Shape {
            what,
            len,
            rows: n,
            classes,
            expected,
        });
    }
    Ok(())
}

impl Probabilities {
    /// Validates a row-major `[n, classes]` buffer with the default [`ROW_SUM_TOLERANCE`].
    ///
    /// # Errors
    /// [`MetricsError::Shape`], [`MetricsError::Empty`], [`MetricsError::NonFinite`],
    /// [`MetricsError::NegativeProbability`] or [`MetricsError::RowSum`] (the first offending
    /// row is reported).
    pub fn new(data: Vec<f32>, n: usize, classes: usize) -> Result<Self> {
        Self::with_tolerance(data, n, classes, ROW_SUM_TOLERANCE)
    }

    /// Like [`Probabilities::new`] with a custom absolute row-sum tolerance.
    ///
    /// # Errors
    /// As [`Probabilities::new`], plus [`MetricsError::InvalidParameter`] if `tolerance` is
    /// negative or not finite.
    pub fn with_tolerance(
        data: Vec<f32>,
        n: usize,
        classes: usize,
        tolerance: f64,
    ) -> Result<Self> {
        if !(tolerance.is_finite() && tolerance >= 0.0) {
            return Err(MetricsError::InvalidParameter {
                name: "tolerance",
                value: tolerance,
                reason: "must be finite and >= 0",
            });
        }
        check_shape("probabilities", data.len(), n, classes)?;
        // Each row is checked independently; `find_first` keeps the reported row deterministic.
        let bad = data
            .par_chunks(classes)
            .enumerate()
            .with_min_len(ROWS_PER_TASK)
            .find_map_first(|(row, p)| check_row(row, p, tolerance).err());
        match bad {
            Some(e) => Err(e),
            None => Ok(Self { data, n, classes }),
        }
    }

    /// Softmax of row-major `[n, classes]` logits, computed in place (no extra buffer).
    ///
    /// Stable: each row is shifted by its maximum before exponentiating, and the arithmetic is
    /// done in `f64` before rounding back to `f32`.
    ///
    /// # Errors
    /// [`MetricsError::Shape`], [`MetricsError::Empty`] or [`MetricsError::NonFinite`].
    pub fn from_logits(mut logits: Vec<f32>, n: usize, classes: usize) -> Result<Self> {
        check_shape("logits", logits.len(), n, classes)?;
        check_finite("logits", &logits, classes)?;
        logits
            .par_chunks_mut(classes)
            .with_min_len(ROWS_PER_TASK)
            .for_each(|row| {
                // One exponential per entry: store exp(x - max), then scale by 1 / sum.
                let m = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                let mut sum = 0.0f64;
                for x in row.iter_mut() {
                    let e = (f64::from(*x) - f64::from(m)).exp();
                    sum += e;
                    *x = e as f32;
                }
                let inv = 1.0 / sum;
                for x in row.iter_mut() {
                    *x = (f64::from(*x) * inv) as f32;
                }
            });
        Ok(Self {
            data: logits,
            n,
            classes,
        })
    }

    /// Number of examples (rows).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of classes (columns).
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// The row-major buffer.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    /// The probabilities of example `i`, or `None` if `i >= n`.
    pub fn row(&self, i: usize) -> Option<&[f32]> {
        (i < self.n).then(|| &self.data[i * self.classes..(i + 1) * self.classes])
    }

    /// Iterator over rows.
    pub fn rows(&self) -> std::slice::ChunksExact<'_, f32> {
        self.data.chunks_exact(self.classes)
    }

    /// Gives the buffer back.
    pub fn into_vec(self) -> Vec<f32> {
        self.data
    }

    /// Builds without validation; callers guarantee the invariants.
    pub(crate) fn from_trusted(data: Vec<f32>, n: usize, classes: usize) -> Self {
        debug_assert_eq!(data.len(), n * classes);
        Self { data, n, classes }
    }
}

fn check_row(row: usize, p: &[f32], tolerance: f64) -> Result<()> {
    // Branch-free scan so that the common (valid) case vectorises; the loop below only runs to
    // name the offending entry. `v >= 0 && v <= MAX` is false for NaN, infinities, negatives.
    let all_valid = p
        .iter()
        .fold(true, |ok, &v| ok & (0.0..=f32::MAX).contains(&v));
    if !all_valid {
        for (col, &v) in p.iter().enumerate() {
            let v = f64::from(v);
            if !v.is_finite() {
                return Err(MetricsError::NonFinite {
                    what: "probabilities",
                    row,
                    col,
                    value: v,
                });
            }
            if v < 0.0 {
                return Err(MetricsError::NegativeProbability { row, col, value: v });
            }
        }
    }
    let sum = lane_sum(p);
    if (sum - 1.0).abs() > tolerance {
        return Err(MetricsError::RowSum {
            row,
            sum,
            tolerance,
        });
    }
    Ok(())
}

/// Sum of a row in `f64` using 8 independent accumulators (vectorisable; the order is fixed, so
/// the result is deterministic).
pub(crate) fn lane_sum(p: &[f32]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let chunks = p.chunks_exact(8);
    let rest = chunks.remainder();
    for ch in chunks {
        for (l, &v) in lanes.iter_mut().zip(ch) {
            *l += f64::from(v);
        }
    }
    lanes.iter().sum::<f64>() + rest.iter().map(|&v| f64::from(v)).sum::<f64>()
}

/// Rejects NaN/inf in a row-major buffer, reporting the first offender.
pub(crate) fn check_finite(what: &'static str, data: &[f32], classes: usize) -> Result<()> {
    let bad = data
        .par_chunks(classes)
        .enumerate()
        .with_min_len(ROWS_PER_TASK)
        .find_map_first(|(row, r)| {
            r.iter()
                .position(|v| !v.is_finite())
                .map(|col| MetricsError::NonFinite {
                    what,
                    row,
                    col,
                    value: f64::from(r[col]),
                })
        });
    bad.map_or(Ok(()), Err)
}

/// A class label type: any primitive integer. Negative values are reported as out of range.
///
/// Lets callers pass `&[u8]`, `&[u32]`, `&[i64]` (burn's integer tensors), `&[usize]`, ...
/// without lossy casts.
pub trait Label: Copy + Send + Sync {
    /// The label as a class index, or `None` if negative or not representable as `usize`.
    fn index(self) -> Option<usize>;
    /// The label widened to `i128`, for error messages.
    fn wide(self) -> i128;
}

macro_rules! impl_label {
    ($($t:ty),*) => {$(
        impl Label for $t {
            #[inline]
            fn index(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
            #[inline]
            fn wide(self) -> i128 {
                self as i128
            }
        }
    )*};
}
impl_label!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

/// Converts labels to indices, checking count and range.
pub(crate) fn check_labels<L: Label>(labels: &[L], n: usize, classes: usize) -> Result<Vec<usize>> {
    if labels.len() != n {
        return Err(MetricsError::LengthMismatch {
            what: "labels vs probability rows",
            expected: n,
            got: labels.len(),
        });
    }
    labels
        .iter()
        .enumerate()
        .map(|(index, &l)| match l.index() {
            Some(k) if k < classes => Ok(k),
            _ => Err(MetricsError::LabelOutOfRange {
                index,
                label: l.wide(),
                classes,
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_inputs() {
        assert!(matches!(
            Probabilities::new(vec![0.5, 0.5, 1.0], 2, 2),
            Err(MetricsError::Shape { len: 3, .. })
        ));
        assert!(matches!(
            Probabilities::new(vec![], 0, 2),
            Err(MetricsError::Empty { .. })
        ));
        assert!(matches!(
            Probabilities::new(vec![0.5, 0.5, f32::NAN, 1.0], 2, 2),
            Err(MetricsError::NonFinite { row: 1, col: 0, .. })
        ));
        assert!(matches!(
            Probabilities::new(vec![1.5, -0.5], 1, 2),
            Err(MetricsError::NegativeProbability { row: 0, col: 1, .. })
        ));
        assert!(matches!(
            Probabilities::new(vec![0.5, 0.5, 0.6, 0.6], 2, 2),
            Err(MetricsError::RowSum { row: 1, .. })
        ));
        assert!(Probabilities::with_tolerance(vec![0.5, 0.6], 1, 2, 0.2).is_ok());
        assert!(matches!(
            Probabilities::from_logits(vec![0.0, f32::INFINITY], 1, 2),
            Err(MetricsError::NonFinite { what: "logits", .. })
        ));
    }

    #[test]
    fn softmax_is_stable_for_huge_logits() {
        let p = Probabilities::from_logits(vec![1000.0, 1000.0, -1000.0, 0.0], 2, 2).unwrap();
        assert_eq!(p.row(0).unwrap(), &[0.5, 0.5]);
        assert_eq!(p.row(1).unwrap(), &[0.0, 1.0]);
        assert!(p.row(2).is_none());
    }

    #[test]
    fn labels_are_checked() {
        assert_eq!(check_labels(&[1i64, 0], 2, 2).unwrap(), vec![1, 0]);
        assert!(matches!(
            check_labels(&[-1i64, 0], 2, 2),
            Err(MetricsError::LabelOutOfRange {
                index: 0,
                label: -1,
                ..
            })
        ));
        assert!(matches!(
            check_labels(&[0u32, 2], 2, 2),
            Err(MetricsError::LabelOutOfRange { index: 1, .. })
        ));
        assert!(matches!(
            check_labels(&[0u32], 2, 2),
            Err(MetricsError::LengthMismatch { .. })
        ));
    }
}
