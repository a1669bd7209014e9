//! Closed-form linear algebra for symmetric 2x2 matrices (no allocation, no iteration).

use nalgebra::{Matrix2, Vector2};

use crate::Gauss2dError;

/// Relative tolerance of the symmetry check: `|c01 - c10| <= SYMMETRY_REL_TOL * max|c_ij|`.
pub const SYMMETRY_REL_TOL: f64 = 1e-9;

/// Relative tolerance of the positive semi-definiteness check: an eigenvalue `l` with
/// `l >= -PSD_REL_TOL * max|eigenvalue|` counts as zero (rounding), anything below is an error.
pub const PSD_REL_TOL: f64 = 1e-9;

/// Eigen-decomposition of a symmetric 2x2 matrix `[[a, b], [b, d]]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SymEig {
    /// Largest eigenvalue.
    pub l_max: f64,
    /// Smallest eigenvalue.
    pub l_min: f64,
    /// Unit eigenvector of `l_max`; the one of `l_min` is `(-v.y, v.x)`.
    pub v_max: Vector2<f64>,
}

/// Eigenvalues as in LAPACK `dlaev2`: the small eigenvalue is computed from the determinant
/// so that it keeps its relative accuracy when the matrix is nearly singular.
pub(crate) fn sym_eig(a: f64, b: f64, d: f64) -> SymEig {
    let half_diff = 0.5 * (a - d);
    let r = half_diff.hypot(b);
    let m = 0.5 * a + 0.5 * d;
    let (l_max, l_min) = if m > 0.0 {
        let l_max = m + r;
        let (big, small) = if a.abs() >= d.abs() { (a, d) } else { (d, a) };
        (l_max, (big / l_max) * small - (b / l_max) * b)
    } else {
        (m + r, m - r)
    };
    // Eigenvector of l_max built from the non-cancelling branch.
    let (vx, vy) = if half_diff >= 0.0 {
        (half_diff + r, b)
    } else {
        (b, r - half_diff)
    };
    let n = vx.hypot(vy);
    let v_max = if n > 0.0 {
        Vector2::new(vx / n, vy / n)
    } else {
        Vector2::new(1.0, 0.0)
    };
    SymEig {
        l_max,
        l_min: l_min.min(l_max),
        v_max,
    }
}

/// Checks that all four entries are finite; `field` names the input in the error.
pub(crate) fn check_finite_matrix(
    m: &Matrix2<f64>,
    field: &'static str,
) -> Result<(), Gauss2dError> {
    for i in 0..2 {
        for j in 0..2 {
            let value = m[(i, j)];
            if !value.is_finite() {
                return Err(Gauss2dError::NonFinite {
                    field,
                    index: 2 * i + j,
                    value,
                });
            }
        }
    }
    Ok(())
}

/// Checks symmetry within [`SYMMETRY_REL_TOL`] and returns the symmetrised entries `(a, b, d)`.
pub(crate) fn check_symmetric(m: &Matrix2<f64>) -> Result<(f64, f64, f64), Gauss2dError> {
    let (upper, lower) = (m[(0, 1)], m[(1, 0)]);
    let scale = m.amax();
    let diff = (upper - lower).abs();
    if diff > SYMMETRY_REL_TOL * scale {
        return Err(Gauss2dError::NotSymmetric {
            upper,
            lower,
            rel_diff: diff / scale,
        });
    }
    Ok((m[(0, 0)], 0.5 * upper + 0.5 * lower, m[(1, 1)]))
}

/// Makes a numerically almost symmetric matrix exactly symmetric.
#[inline]
pub(crate) fn symmetrize(m: &Matrix2<f64>) -> Matrix2<f64> {
    let off = 0.5 * m[(0, 1)] + 0.5 * m[(1, 0)];
    Matrix2::new(m[(0, 0)], off, off, m[(1, 1)])
}

/// Closed-form square root of a symmetric PSD matrix, without validation:
/// `sqrt(M) = (M + s I) / t`, `s = sqrt(det M)`, `t = sqrt(tr M + 2 s)`.
/// Tiny negative determinants from rounding are clamped to 0; the zero matrix maps to itself.
#[inline]
pub(crate) fn sqrtm_psd_unchecked(m: &Matrix2<f64>) -> Matrix2<f64> {
    let (a, b, d) = (m[(0, 0)], 0.5 * m[(0, 1)] + 0.5 * m[(1, 0)], m[(1, 1)]);
    let s = (a * d - b * b).max(0.0).sqrt();
    let t = (a + d + 2.0 * s).max(0.0).sqrt();
    if t == 0.0 {
        return Matrix2::zeros();
    }
    Matrix2::new((a + s) / t, b / t, b / t, (d + s) / t)
}

/// Square root of a symmetric positive semi-definite 2x2 matrix in closed form,
/// `sqrt(M) = (M + s I) / t` with `s = sqrt(det M)` and `t = sqrt(tr M + 2 s)`.
///
/// The input is validated: finite entries, symmetric within [`SYMMETRY_REL_TOL`] (then
/// symmetrised), no eigenvalue below `-PSD_REL_TOL * max|eigenvalue|`. Singular PSD inputs are
/// accepted (the zero matrix maps to itself). The result is symmetric PSD.
///
/// ```
/// use gauss2d::{sqrtm_spd, Matrix2};
/// let m = Matrix2::new(4.0, 0.0, 0.0, 9.0);
/// let r = sqrtm_spd(&m).unwrap();
/// assert!((r - Matrix2::new(2.0, 0.0, 0.0, 3.0)).norm() < 1e-12);
/// ```
pub fn sqrtm_spd(m: &Matrix2<f64>) -> Result<Matrix2<f64>, Gauss2dError> {
    check_finite_matrix(m, "matrix")?;
    let (a, b, d) = check_symmetric(m)?;
    let eig = sym_eig(a, b, d);
    let tolerance = PSD_REL_TOL * eig.l_max.abs().max(eig.l_min.abs());
    if eig.l_min < -tolerance {
        return Err(Gauss2dError::NotPositiveSemiDefinite {
            min_eigenvalue: eig.l_min,
            max_eigenvalue: eig.l_max,
            tolerance,
        });
    }
    Ok(sqrtm_psd_unchecked(&Matrix2::new(a, b, b, d)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eig_diagonal_and_rotated() {
        let e = sym_eig(1.0, 0.0, 1e-10);
        assert_eq!(e.l_max, 1.0);
        assert!((e.l_min - 1e-10).abs() < 1e-24);
        let e = sym_eig(2.0, 1.0, 2.0);
        assert!((e.l_max - 3.0).abs() < 1e-15 && (e.l_min - 1.0).abs() < 1e-15);
        let s = std::f64::consts::FRAC_1_SQRT_2;
        assert!((e.v_max - Vector2::new(s, s)).norm() < 1e-15);
        let e = sym_eig(1.0, 0.0, 1.0);
        assert_eq!(e.v_max, Vector2::new(1.0, 0.0));
    }

    #[test]
    fn sqrtm_rejects_bad_input() {
        assert!(matches!(
            sqrtm_spd(&Matrix2::new(1.0, 0.0, 0.0, -1.0)),
            Err(Gauss2dError::NotPositiveSemiDefinite { .. })
        ));
        assert!(matches!(
            sqrtm_spd(&Matrix2::new(1.0, 0.5, 0.2, 1.0)),
            Err(Gauss2dError::NotSymmetric { .. })
        ));
        assert!(matches!(
            sqrtm_spd(&Matrix2::new(f64::NAN, 0.0, 0.0, 1.0)),
            Err(Gauss2dError::NonFinite { index: 0, .. })
        ));
        assert_eq!(sqrtm_spd(&Matrix2::zeros()).unwrap(), Matrix2::zeros());
    }
}
