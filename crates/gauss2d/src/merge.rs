//! Merging weighted Gaussians into one: the paper's rule, the exact Wasserstein-2 barycentre
//! and moment matching, selectable through [`MergeRule`].
//!
//! # The paper's rule is not the W2 barycentre
//!
//! The paper (eqs. `merge_mean`, `merge_var`, citing Agueh & Carlier 2011) merges two Gaussians as
//! `m = (m1 + m2) / 2` and
//! `S = (S1 + S2) / 2 + (m1 - m2)(m1 - m2)^T / 8 + (S1^{1/2} S2 S1^{1/2})^{1/2} / 2`.
//! The W2 barycentre of two equally weighted Gaussians has the same mean but covariance `S*`
//! solving `S* = ((S*^{1/2} S1 S*^{1/2})^{1/2} + (S*^{1/2} S2 S*^{1/2})^{1/2}) / 2`, which does not
//! depend on the means at all. For `S1 = S2 = S` the barycentre is `N(m, S)`, whereas the paper's
//! rule, taken literally, gives `1.5 S + d d^T / 8` (`d = m1 - m2`): the geometric-mean term
//! `(S^{1/2} S S^{1/2})^{1/2} = S` adds `S / 2` on top of the average `S`. The paper's rule is
//! also only symmetric in `(a, b)` up to the geometric-mean term: `(S1^{1/2} S2 S1^{1/2})^{1/2}`
//! and `(S2^{1/2} S1 S2^{1/2})^{1/2}` share trace and determinant but are different matrices
//! unless `S1` and `S2` commute. The test `tests/reference_values.rs` measures both effects
//! against numbers computed independently with numpy/scipy. [`merge_paper`] implements the
//! formula exactly as printed.

use nalgebra::{Matrix2, Vector2};
use serde::{Deserialize, Serialize};

use crate::sym2::{sqrtm_psd_unchecked, symmetrize};
use crate::{Gauss2dError, Gaussian2};

/// Which rule [`merge_weighted`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum MergeRule {
    /// The paper's rule ([`merge_paper_weighted`]; `n > 2` components are folded pairwise in
    /// order, see [`merge_weighted`]).
    #[default]
    Paper,
    /// Exact Wasserstein-2 barycentre ([`w2_barycenter`]).
    W2Barycenter,
    /// Mean and covariance of the mixture ([`moment_match`]).
    MomentMatch,
}

/// Options of the barycentre fixed-point iteration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BarycenterOptions {
    /// Stop when `||S_new - S||_F <= tol * ||S||_F`. Default `1e-10`.
    pub tol: f64,
    /// Give up (error) after this many iterations. Default `1000`.
    pub max_iter: usize,
}

impl Default for BarycenterOptions {
    fn default() -> Self {
        Self {
            tol: 1e-10,
            max_iter: 1000,
        }
    }
}

/// Validates the weights (non-empty, each finite and `>= 0`, total finite and `> 0`) and
/// returns their total.
fn total_weight(components: &[(f64, Gaussian2)], what: &'static str) -> Result<f64, Gauss2dError> {
    if components.is_empty() {
        return Err(Gauss2dError::EmptyInput { what });
    }
    let mut total = 0.0;
    for (index, &(w, _)) in components.iter().enumerate() {
        if !(w.is_finite() && w >= 0.0) {
            return Err(Gauss2dError::InvalidWeights {
                reason: "each weight must be finite and >= 0",
                index: Some(index),
                value: w,
            });
        }
        total += w;
    }
    if !(total.is_finite() && total > 0.0) {
        return Err(Gauss2dError::InvalidWeights {
            reason: "total weight must be finite and > 0",
            index: None,
            value: total,
        });
    }
    Ok(total)
}

/// Weighted mean of the component means.
fn weighted_mean(components: &[(f64, Gaussian2)], total: f64) -> Vector2<f64> {
    components
        .iter()
        .fold(Vector2::zeros(), |acc, (w, g)| acc + g.mean() * (w / total))
}

/// The paper's merge of two equally weighted Gaussians (eqs. `merge_mean`, `merge_var`):
/// mean `(m1 + m2) / 2`, covariance
/// `(S1 + S2) / 2 + (m1 - m2)(m1 - m2)^T / 8 + (S1^{1/2} S2 S1^{1/2})^{1/2} / 2`.
///
/// This is not the W2 barycentre and, for non-commuting covariances, not exactly symmetric in
/// `(a, b)` (see the [module docs](self)). Equals `merge_paper_weighted(1.0, a, 1.0, b)`.
pub fn merge_paper(a: &Gaussian2, b: &Gaussian2) -> Result<Gaussian2, Gauss2dError> {
    merge_paper_weighted(1.0, a, 1.0, b)
}

/// Weighted generalisation of the paper's rule, for merging clusters with member counts
/// (or masses) `w1`, `w2`. With `alpha = w1 / (w1 + w2)`, `beta = 1 - alpha`:
///
/// `m = alpha m1 + beta m2`,
/// `S = alpha S1 + beta S2 + (alpha beta / 2) d d^T + 2 alpha beta (S1^{1/2} S2 S1^{1/2})^{1/2}`,
/// `d = m1 - m2`.
///
/// Choice: the averages become weighted averages and each cross term gets the factor
/// `alpha beta`, scaled so that `alpha = beta = 1/2` reproduces the paper exactly (`1/8` and
/// `1/2`). Consequently a zero weight returns the other Gaussian unchanged, and the
/// mean-difference term is half the between-cluster term `alpha beta d d^T` of moment matching.
/// Errors for negative, non-finite or all-zero weights.
pub fn merge_paper_weighted(
    w1: f64,
    a: &Gaussian2,
    w2: f64,
    b: &Gaussian2,
) -> Result<Gaussian2, Gauss2dError> {
    let total = total_weight(&[(w1, *a), (w2, *b)], "merge_paper_weighted")?;
    let alpha = w1 / total;
    let beta = w2 / total;
    let (s1, s2) = (a.cov(), b.cov());
    let d = a.mean() - b.mean();
    let r1 = sqrtm_psd_unchecked(&s1);
    let geo = sqrtm_psd_unchecked(&symmetrize(&(r1 * s2 * r1)));
    let cov = s1 * alpha
        + s2 * beta
        + (d * d.transpose()) * (0.5 * alpha * beta)
        + geo * (2.0 * alpha * beta);
    let mean = a.mean() * alpha + b.mean() * beta;
    Gaussian2::new(mean, symmetrize(&cov))
}

/// Moment matching: the Gaussian with the mean and covariance of the mixture
/// `sum_i w_i N(m_i, S_i)` (weights normalised):
/// `m = sum w_i m_i`, `S = sum w_i (S_i + (m_i - m)(m_i - m)^T)`.
pub fn moment_match(components: &[(f64, Gaussian2)]) -> Result<Gaussian2, Gauss2dError> {
    let total = total_weight(components, "moment_match")?;
    let mean = weighted_mean(components, total);
    let cov = components.iter().fold(Matrix2::zeros(), |acc, (w, g)| {
        let d = g.mean() - mean;
        acc + (g.cov() + d * d.transpose()) * (w / total)
    });
    Gaussian2::new(mean, symmetrize(&cov))
}

/// Exact Wasserstein-2 barycentre with default [`BarycenterOptions`].
///
/// Mean: the weighted mean. Covariance: the fixed point of
/// `S <- S^{-1/2} (sum_i w_i (S^{1/2} S_i S^{1/2})^{1/2})^2 S^{-1/2}`
/// (Alvarez-Esteban, del Barrio, Cuesta-Albertos & Matran 2016), started at `sum_i w_i S_i`.
/// Errors for bad weights, or [`Gauss2dError::NoConvergence`] if the tolerance is not reached.
pub fn w2_barycenter(components: &[(f64, Gaussian2)]) -> Result<Gaussian2, Gauss2dError> {
    w2_barycenter_with(components, BarycenterOptions::default())
}

/// Exact Wasserstein-2 barycentre with explicit options (see [`w2_barycenter`]).
pub fn w2_barycenter_with(
    components: &[(f64, Gaussian2)],
    opts: BarycenterOptions,
) -> Result<Gaussian2, Gauss2dError> {
    const WHAT: &str = "w2_barycenter";
    if !(opts.tol.is_finite() && opts.tol > 0.0) {
        return Err(Gauss2dError::InvalidOption {
            name: "tol",
            value: opts.tol,
        });
    }
    let total = total_weight(components, WHAT)?;
    let mean = weighted_mean(components, total);
    let mut s = components
        .iter()
        .fold(Matrix2::zeros(), |acc, (w, g)| acc + g.cov() * (w / total));
    let mut residual = f64::INFINITY;
    for iteration in 1..=opts.max_iter {
        let r = sqrtm_psd_unchecked(&s);
        let Some(r_inv) = r.try_inverse() else {
            break;
        };
        let t = components.iter().fold(Matrix2::zeros(), |acc, (w, g)| {
            acc + sqrtm_psd_unchecked(&symmetrize(&(r * g.cov() * r))) * (w / total)
        });
        // S^{-1/2} T T S^{-1/2} = M M^T with M = S^{-1/2} T: symmetric PSD by construction.
        let m = r_inv * t;
        let next = symmetrize(&(m * m.transpose()));
        residual = (next - s).norm() / s.norm();
        s = next;
        if !residual.is_finite() {
            break;
        }
        if residual <= opts.tol {
            return Gaussian2::new(mean, s).map_err(|e| match e {
                Gauss2dError::NonFinite { .. } => Gauss2dError::NoConvergence {
                    what: WHAT,
                    iterations: iteration,
                    residual,
                    tol: opts.tol,
                },
                other => other,
            });
        }
    }
    Err(Gauss2dError::NoConvergence {
        what: WHAT,
        iterations: opts.max_iter,
        residual,
        tol: opts.tol,
    })
}

/// Merges weighted Gaussians with the selected rule.
///
/// * [`MergeRule::W2Barycenter`]: [`w2_barycenter`] (order-independent).
/// * [`MergeRule::MomentMatch`]: [`moment_match`] (order-independent).
/// * [`MergeRule::Paper`]: the paper only defines a pairwise rule, so components are folded left
///   to right with [`merge_paper_weighted`], the running result carrying the accumulated weight
///   (as when clusters are merged one pair at a time). Zero-weight components are skipped; the
///   result depends on the order for three or more components.
///
/// A single component (with positive weight) is returned as it is for `Paper`.
pub fn merge_weighted(
    rule: MergeRule,
    components: &[(f64, Gaussian2)],
) -> Result<Gaussian2, Gauss2dError> {
    match rule {
        MergeRule::W2Barycenter => w2_barycenter(components),
        MergeRule::MomentMatch => moment_match(components),
        MergeRule::Paper => {
            total_weight(components, "merge_weighted(Paper)")?;
            let mut acc: Option<(f64, Gaussian2)> = None;
            for &(w, g) in components.iter().filter(|(w, _)| *w > 0.0) {
                acc = Some(match acc {
                    None => (w, g),
                    Some((wa, ga)) => (wa + w, merge_paper_weighted(wa, &ga, w, &g)?),
                });
            }
            // total_weight guarantees at least one positive weight.
            acc.map(|(_, g)| g).ok_or(Gauss2dError::InvalidWeights {
                reason: "no positive weight",
                index: None,
                value: 0.0,
            })
        }
    }
}

impl MergeRule {
    /// Merges two weighted Gaussians with this rule (`merge_weighted(self, &[(w1, a), (w2, b)])`).
    pub fn merge_pair(
        self,
        w1: f64,
        a: &Gaussian2,
        w2: f64,
        b: &Gaussian2,
    ) -> Result<Gaussian2, Gauss2dError> {
        merge_weighted(self, &[(w1, *a), (w2, *b)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(m: [f64; 2], c: [f64; 3]) -> Gaussian2 {
        Gaussian2::new(
            Vector2::new(m[0], m[1]),
            Matrix2::new(c[0], c[1], c[1], c[2]),
        )
        .unwrap()
    }

    #[test]
    fn weight_errors() {
        let a = g([0.0, 0.0], [1.0, 0.0, 1.0]);
        assert!(matches!(
            moment_match(&[]),
            Err(Gauss2dError::EmptyInput { .. })
        ));
        assert!(matches!(
            w2_barycenter(&[(1.0, a), (-1.0, a)]),
            Err(Gauss2dError::InvalidWeights { index: Some(1), .. })
        ));
        assert!(matches!(
            merge_paper_weighted(0.0, &a, 0.0, &a),
            Err(Gauss2dError::InvalidWeights { index: None, .. })
        ));
        assert!(matches!(
            merge_weighted(MergeRule::Paper, &[(f64::NAN, a)]),
            Err(Gauss2dError::InvalidWeights { index: Some(0), .. })
        ));
        assert!(matches!(
            w2_barycenter_with(
                &[(1.0, a)],
                BarycenterOptions {
                    tol: 0.0,
                    max_iter: 10
                }
            ),
            Err(Gauss2dError::InvalidOption { name: "tol", .. })
        ));
    }

    #[test]
    fn no_convergence_is_reported() {
        let a = g([0.0, 0.0], [1.0, 0.5, 2.0]);
        let b = g([1.0, 0.0], [3.0, -0.4, 0.2]);
        let opts = BarycenterOptions {
            tol: 1e-15,
            max_iter: 1,
        };
        assert!(matches!(
            w2_barycenter_with(&[(1.0, a), (1.0, b)], opts),
            Err(Gauss2dError::NoConvergence { iterations: 1, .. })
        ));
    }

    #[test]
    fn zero_weight_returns_other_and_paper_fold() {
        let a = g([0.0, 1.0], [1.0, 0.5, 2.0]);
        let b = g([1.0, 0.0], [3.0, -0.4, 0.2]);
        assert_eq!(merge_paper_weighted(2.0, &a, 0.0, &b).unwrap(), a);
        assert_eq!(
            merge_weighted(MergeRule::Paper, &[(0.0, b), (3.0, a)]).unwrap(),
            a
        );
        let pair = merge_paper_weighted(1.0, &a, 2.0, &b).unwrap();
        let fold = merge_weighted(MergeRule::Paper, &[(1.0, a), (2.0, b)]).unwrap();
        assert_eq!(pair, fold);
        assert_eq!(MergeRule::Paper.merge_pair(1.0, &a, 2.0, &b).unwrap(), pair);
    }

    #[test]
    fn merge_rule_serde() {
        let s = serde_json::to_string(&MergeRule::W2Barycenter).unwrap();
        assert_eq!(s, "\"W2Barycenter\"");
        assert_eq!(
            serde_json::from_str::<MergeRule>(&s).unwrap(),
            MergeRule::W2Barycenter
        );
        assert_eq!(MergeRule::default(), MergeRule::Paper);
    }
}
