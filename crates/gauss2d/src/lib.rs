//! Validated 2-D Gaussians for stochastic weight sharing in Bayesian neural networks (2DGBNN).
//!
//! Every BNN weight is a point `(mu, sigma)` in the plane; millions of them are replaced by a few
//! thousand shared 2-D Gaussians. This crate provides the Gaussian type and the geometry the
//! method needs:
//!
//! * [`Gaussian2`]: validated mean/covariance (finite, symmetric, PSD, eigenvalues floored by
//!   [`CovFloor`]) with cached precision and log-determinant; allocation-free, inlined
//!   [`Gaussian2::log_pdf`] and [`Gaussian2::mahalanobis_sq`] for the GMM's inner loop;
//! * [`sqrtm_spd`] (closed-form 2x2 matrix square root), [`w2_sq`]/[`w2`] (Wasserstein-2),
//!   [`kl`] and [`kl_normal_1d`] (KL divergences), [`chi2_2_quantile`];
//! * [`merge`]: the paper's merge rule, the exact W2 barycentre and moment matching, selected by
//!   [`MergeRule`]. Note that the paper's rule is *not* the W2 barycentre (see [`merge`]).
//!
//! ```
//! use gauss2d::{Gaussian2, Matrix2, MergeRule, Vector2, chi2_2_quantile, merge, w2};
//!
//! let a = Gaussian2::new(Vector2::new(0.0, 0.1), Matrix2::new(0.04, 0.01, 0.01, 0.02))?;
//! let b = Gaussian2::isotropic(Vector2::new(0.3, 0.1), 0.03)?;
//!
//! // Is a weight inside a's 95 % ellipse?
//! let w = Vector2::new(0.05, 0.12);
//! assert!(a.mahalanobis_sq(&w) <= chi2_2_quantile(0.95)?);
//!
//! // Distance and merges (clusters of 30 and 10 members).
//! let d = w2(&a, &b);
//! assert!(d >= 0.3 * 0.99);
//! let paper = merge::merge_weighted(MergeRule::Paper, &[(30.0, a), (10.0, b)])?;
//! let bary = merge::merge_weighted(MergeRule::W2Barycenter, &[(30.0, a), (10.0, b)])?;
//! assert!((paper.mean() - bary.mean()).norm() < 1e-12);
//! # Ok::<(), gauss2d::Gauss2dError>(())
//! ```
#![warn(missing_docs)]

mod distance;
mod error;
mod gaussian;
pub mod merge;
mod sym2;

pub use distance::{chi2_2_quantile, kl, kl_normal_1d, w2, w2_sq};
pub use error::Gauss2dError;
pub use gaussian::{CovFloor, Gaussian2, Gaussian2Repr};
pub use merge::{
    BarycenterOptions, MergeRule, merge_paper, merge_paper_weighted, merge_weighted, moment_match,
    w2_barycenter, w2_barycenter_with,
};
pub use nalgebra::{Matrix2, Vector2};
pub use sym2::{PSD_REL_TOL, SYMMETRY_REL_TOL, sqrtm_spd};
