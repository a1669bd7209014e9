//! The validated 2-D Gaussian type [`Gaussian2`] and its covariance floor [`CovFloor`].

use nalgebra::{Matrix2, Vector2};
use serde::{Deserialize, Serialize};

use crate::Gauss2dError;
use crate::sym2::{PSD_REL_TOL, check_finite_matrix, check_symmetric, sym_eig};

/// `ln(2 pi)`.
const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// Regularisation of near-singular covariances: eigenvalues below `min_eigenvalue` are raised
/// to it (the eigenvectors are kept), so zero-variance or degenerate input (e.g. all points of a
/// cluster on a line) still yields a usable Gaussian with a finite precision and log-det.
///
/// The default is [`CovFloor::DEFAULT_MIN_EIGENVALUE`] = `1e-12` (absolute, in squared units of
/// the data). It also serves as absolute slack of the PSD check: an eigenvalue is rejected as
/// negative only if it is below `-max(PSD_REL_TOL * max|eigenvalue|, min_eigenvalue)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CovFloor {
    /// Smallest allowed covariance eigenvalue; must be finite and `> 0`.
    pub min_eigenvalue: f64,
}

impl CovFloor {
    /// The default floor, `1e-12`.
    pub const DEFAULT_MIN_EIGENVALUE: f64 = 1e-12;

    /// A floor with the given minimum eigenvalue (validated when used).
    pub const fn new(min_eigenvalue: f64) -> Self {
        Self { min_eigenvalue }
    }

    fn validate(&self) -> Result<(), Gauss2dError> {
        if self.min_eigenvalue.is_finite() && self.min_eigenvalue > 0.0 {
            Ok(())
        } else {
            Err(Gauss2dError::InvalidFloor {
                min_eigenvalue: self.min_eigenvalue,
            })
        }
    }
}

impl Default for CovFloor {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MIN_EIGENVALUE)
    }
}

/// A bivariate normal distribution `N(mean, cov)` with a validated, symmetric positive-definite
/// covariance and cached inverse (as eigen-decomposition) and log-determinant.
///
/// Construction validates (see [`Gaussian2::with_floor`]); afterwards every method is total.
/// Serialises as `{"mean": [m0, m1], "cov": [[c00, c01], [c10, c11]]}`; deserialisation
/// re-validates with the default [`CovFloor`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Gaussian2Repr", into = "Gaussian2Repr")]
pub struct Gaussian2 {
    mean: Vector2<f64>,
    /// Exactly symmetric, eigenvalues >= floor.
    cov: Matrix2<f64>,
    /// Unit eigenvector of the largest covariance eigenvalue; the other one is `(-y, x)`.
    axis: Vector2<f64>,
    /// Covariance eigenvalues `(largest, smallest)`.
    eig: [f64; 2],
    /// Reciprocal eigenvalues: the cached precision in eigen form.
    inv_eig: [f64; 2],
    log_det: f64,
    /// `-ln(2 pi) - log_det / 2`.
    log_norm: f64,
}

/// Plain serialised form of [`Gaussian2`] (row-major covariance).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Gaussian2Repr {
    /// Mean `[m0, m1]`.
    pub mean: [f64; 2],
    /// Covariance rows `[[c00, c01], [c10, c11]]`.
    pub cov: [[f64; 2]; 2],
}

impl From<Gaussian2> for Gaussian2Repr {
    fn from(g: Gaussian2) -> Self {
        let c = g.cov;
        Self {
            mean: [g.mean.x, g.mean.y],
            cov: [[c[(0, 0)], c[(0, 1)]], [c[(1, 0)], c[(1, 1)]]],
        }
    }
}

impl TryFrom<Gaussian2Repr> for Gaussian2 {
    type Error = Gauss2dError;
    fn try_from(r: Gaussian2Repr) -> Result<Self, Self::Error> {
        Gaussian2::new(
            Vector2::new(r.mean[0], r.mean[1]),
            Matrix2::new(r.cov[0][0], r.cov[0][1], r.cov[1][0], r.cov[1][1]),
        )
    }
}

impl Gaussian2 {
    /// Validates and builds `N(mean, cov)` with the default [`CovFloor`] (`1e-12`).
    pub fn new(mean: Vector2<f64>, cov: Matrix2<f64>) -> Result<Self, Gauss2dError> {
        Self::with_floor(mean, cov, CovFloor::default())
    }

    /// Validates and builds `N(mean, cov)`.
    ///
    /// * non-finite mean or covariance entry -> [`Gauss2dError::NonFinite`];
    /// * `|c01 - c10| > SYMMETRY_REL_TOL * max|c_ij|` -> [`Gauss2dError::NotSymmetric`]
    ///   (otherwise the off-diagonal is replaced by the average of the two entries);
    /// * an eigenvalue below `-max(PSD_REL_TOL * max|eigenvalue|, floor)` ->
    ///   [`Gauss2dError::NotPositiveSemiDefinite`];
    /// * eigenvalues below `floor.min_eigenvalue` (including zero and tiny negative ones) are
    ///   raised to it, keeping the eigenvectors, so the stored covariance can differ from the
    ///   input for near-singular input;
    /// * invalid floor -> [`Gauss2dError::InvalidFloor`].
    pub fn with_floor(
        mean: Vector2<f64>,
        cov: Matrix2<f64>,
        floor: CovFloor,
    ) -> Result<Self, Gauss2dError> {
        floor.validate()?;
        for (index, &value) in mean.iter().enumerate() {
            if !value.is_finite() {
                return Err(Gauss2dError::NonFinite {
                    field: "mean",
                    index,
                    value,
                });
            }
        }
        check_finite_matrix(&cov, "cov")?;
        let (a, b, d) = check_symmetric(&cov)?;
        let eig = sym_eig(a, b, d);
        let f = floor.min_eigenvalue;
        let tolerance = (PSD_REL_TOL * eig.l_max.abs().max(eig.l_min.abs())).max(f);
        if eig.l_min < -tolerance {
            return Err(Gauss2dError::NotPositiveSemiDefinite {
                min_eigenvalue: eig.l_min,
                max_eigenvalue: eig.l_max,
                tolerance,
            });
        }
        let (l1, l2) = (eig.l_max.max(f), eig.l_min.max(f));
        let (vx, vy) = (eig.v_max.x, eig.v_max.y);
        let cov = if l1 != eig.l_max || l2 != eig.l_min {
            // Rebuild from the floored spectrum: l1 v v^T + l2 w w^T with w = (-vy, vx).
            let off = (l1 - l2) * vx * vy;
            Matrix2::new(
                l1 * vx * vx + l2 * vy * vy,
                off,
                off,
                l1 * vy * vy + l2 * vx * vx,
            )
        } else {
            Matrix2::new(a, b, b, d)
        };
        let log_det = l1.ln() + l2.ln();
        let inv_eig = [1.0 / l1, 1.0 / l2];
        if !(log_det.is_finite() && inv_eig[1].is_finite() && l1.is_finite()) {
            // Only reachable for entries near f64::MAX or with a huge floor.
            return Err(Gauss2dError::NonFinite {
                field: "cov eigenvalues",
                index: 0,
                value: l1,
            });
        }
        Ok(Self {
            mean,
            cov,
            axis: eig.v_max,
            eig: [l1, l2],
            inv_eig,
            log_det,
            log_norm: -LN_2PI - 0.5 * log_det,
        })
    }

    /// Isotropic Gaussian `N(mean, var * I)`; `var` is validated like a covariance (default floor).
    pub fn isotropic(mean: Vector2<f64>, var: f64) -> Result<Self, Gauss2dError> {
        Self::new(mean, Matrix2::new(var, 0.0, 0.0, var))
    }

    /// Axis-aligned Gaussian `N(mean, diag(var_x, var_y))` (default floor).
    pub fn diagonal(mean: Vector2<f64>, var_x: f64, var_y: f64) -> Result<Self, Gauss2dError> {
        Self::new(mean, Matrix2::new(var_x, 0.0, 0.0, var_y))
    }

    /// Mean vector.
    #[inline]
    pub fn mean(&self) -> Vector2<f64> {
        self.mean
    }

    /// Covariance (exactly symmetric, floored; may differ from the constructor input, see
    /// [`Gaussian2::with_floor`]).
    #[inline]
    pub fn cov(&self) -> Matrix2<f64> {
        self.cov
    }

    /// Inverse covariance, assembled from the cached eigen-decomposition.
    #[inline]
    pub fn precision(&self) -> Matrix2<f64> {
        let (vx, vy) = (self.axis.x, self.axis.y);
        let [i1, i2] = self.inv_eig;
        let off = (i1 - i2) * vx * vy;
        Matrix2::new(
            i1 * vx * vx + i2 * vy * vy,
            off,
            off,
            i1 * vy * vy + i2 * vx * vx,
        )
    }

    /// Natural log of the covariance determinant (cached).
    #[inline]
    pub fn log_det(&self) -> f64 {
        self.log_det
    }

    /// Log of the normalising constant, `-ln(2 pi) - log_det / 2` (cached).
    #[inline]
    pub fn log_normalizer(&self) -> f64 {
        self.log_norm
    }

    /// Covariance eigenvalues `(largest, smallest)`, both `>=` the floor.
    #[inline]
    pub fn eigenvalues(&self) -> (f64, f64) {
        (self.eig[0], self.eig[1])
    }

    /// Unit eigenvector of the largest covariance eigenvalue (major axis of the ellipses).
    #[inline]
    pub fn major_axis(&self) -> Vector2<f64> {
        self.axis
    }

    /// Squared Mahalanobis distance `(x - m)^T S^{-1} (x - m)`; allocation-free, never negative
    /// (evaluated in the eigenbasis as a sum of two non-negative terms).
    #[inline]
    pub fn mahalanobis_sq(&self, x: &Vector2<f64>) -> f64 {
        let dx = x.x - self.mean.x;
        let dy = x.y - self.mean.y;
        let (vx, vy) = (self.axis.x, self.axis.y);
        let p = vx * dx + vy * dy;
        let q = vx * dy - vy * dx;
        p * p * self.inv_eig[0] + q * q * self.inv_eig[1]
    }

    /// Log density `-ln(2 pi) - log_det / 2 - mahalanobis_sq / 2`.
    #[inline]
    pub fn log_pdf(&self, x: &Vector2<f64>) -> f64 {
        self.log_norm - 0.5 * self.mahalanobis_sq(x)
    }

    /// Density.
    #[inline]
    pub fn pdf(&self, x: &Vector2<f64>) -> f64 {
        self.log_pdf(x).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(m: [f64; 2], c: [f64; 4]) -> Result<Gaussian2, Gauss2dError> {
        Gaussian2::new(
            Vector2::new(m[0], m[1]),
            Matrix2::new(c[0], c[1], c[2], c[3]),
        )
    }

    #[test]
    fn validation_errors() {
        assert!(matches!(
            g([f64::NAN, 0.0], [1.0, 0.0, 0.0, 1.0]),
            Err(Gauss2dError::NonFinite {
                field: "mean",
                index: 0,
                ..
            })
        ));
        assert!(matches!(
            g([0.0, 0.0], [1.0, 0.0, f64::INFINITY, 1.0]),
            Err(Gauss2dError::NonFinite {
                field: "cov",
                index: 2,
                ..
            })
        ));
        assert!(matches!(
            g([0.0, 0.0], [1.0, 0.3, 0.2, 1.0]),
            Err(Gauss2dError::NotSymmetric { .. })
        ));
        assert!(matches!(
            g([0.0, 0.0], [1.0, 2.0, 2.0, 1.0]),
            Err(Gauss2dError::NotPositiveSemiDefinite { .. })
        ));
        assert!(matches!(
            Gaussian2::with_floor(Vector2::zeros(), Matrix2::identity(), CovFloor::new(0.0)),
            Err(Gauss2dError::InvalidFloor { .. })
        ));
        assert!(matches!(
            Gaussian2::isotropic(Vector2::zeros(), -1.0),
            Err(Gauss2dError::NotPositiveSemiDefinite { .. })
        ));
    }

    #[test]
    fn floor_regularises_singular_covariances() {
        let z = Gaussian2::isotropic(Vector2::new(1.0, 2.0), 0.0).unwrap();
        assert_eq!(z.cov(), Matrix2::identity() * 1e-12);
        assert!((z.log_det() - 2.0 * 1e-12f64.ln()).abs() < 1e-9);
        // Rank-one covariance along (1, 1): small eigenvalue raised, major axis kept.
        let r = g([0.0, 0.0], [1.0, 1.0, 1.0, 1.0]).unwrap();
        let (l1, l2) = r.eigenvalues();
        assert!((l1 - 2.0).abs() < 1e-12 && l2 == 1e-12);
        assert!(r.log_pdf(&Vector2::new(0.5, 0.5)).is_finite());
        // Tiny negative variance from rounding is accepted and floored.
        let t = g([0.0, 0.0], [1.0, 0.0, 0.0, -1e-13]).unwrap();
        assert_eq!(t.eigenvalues().1, 1e-12);
        // Custom floor.
        let c =
            Gaussian2::with_floor(Vector2::zeros(), Matrix2::zeros(), CovFloor::new(0.25)).unwrap();
        assert_eq!(c.cov(), Matrix2::identity() * 0.25);
    }

    #[test]
    fn precision_is_inverse() {
        let x = g([0.1, -0.2], [2.0, 0.7, 0.7, 0.5]).unwrap();
        let id = x.precision() * x.cov();
        assert!((id - Matrix2::identity()).norm() < 1e-13);
        let det: f64 = x.cov().determinant();
        assert!((x.log_det() - det.ln()).abs() < 1e-13);
    }

    #[test]
    fn serde_roundtrip_and_revalidation() {
        let x = g([0.1, -0.2], [2.0, 0.7, 0.7, 0.5]).unwrap();
        let s = serde_json::to_string(&x).unwrap();
        assert_eq!(s, r#"{"mean":[0.1,-0.2],"cov":[[2.0,0.7],[0.7,0.5]]}"#);
        let y: Gaussian2 = serde_json::from_str(&s).unwrap();
        assert_eq!(x, y);
        let bad = r#"{"mean":[0.0,0.0],"cov":[[1.0,2.0],[2.0,1.0]]}"#;
        let e = serde_json::from_str::<Gaussian2>(bad).unwrap_err();
        assert!(e.to_string().contains("positive semi-definite"), "{e}");
    }
}
