//! Distances and divergences between Gaussians, and the chi-square(2) quantile.

use crate::{Gauss2dError, Gaussian2};

/// Squared Wasserstein-2 distance
/// `W2^2 = |m1 - m2|^2 + tr(S1 + S2 - 2 (S1^{1/2} S2 S1^{1/2})^{1/2})`.
///
/// Evaluated in closed form without any matrix square root: for 2x2 PSD `C`,
/// `tr sqrt(C) = sqrt(tr C + 2 sqrt(det C))`, and `C = S1^{1/2} S2 S1^{1/2}` has
/// `tr C = tr(S1 S2)`, `det C = det S1 det S2`. Tiny negative results from rounding are clamped
/// to 0. Exactly symmetric in its arguments; allocation-free.
#[inline]
pub fn w2_sq(a: &Gaussian2, b: &Gaussian2) -> f64 {
    let dm = a.mean() - b.mean();
    let (s1, s2) = (a.cov(), b.cov());
    // Both covariances are exactly symmetric, so tr(S1 S2) is symmetric in (a, b) bit for bit.
    let tr_prod =
        s1[(0, 0)] * s2[(0, 0)] + s1[(1, 1)] * s2[(1, 1)] + 2.0 * (s1[(0, 1)] * s2[(0, 1)]);
    let (a1, a2) = a.eigenvalues();
    let (b1, b2) = b.eigenvalues();
    let sqrt_det = (a1 * a2).sqrt() * (b1 * b2).sqrt();
    let tr_sqrt = (tr_prod + 2.0 * sqrt_det).max(0.0).sqrt();
    let tr_sum = s1.trace() + s2.trace();
    let mean_sq = dm.x * dm.x + dm.y * dm.y;
    (mean_sq + (tr_sum - 2.0 * tr_sqrt)).max(0.0)
}

/// Wasserstein-2 distance, `sqrt(w2_sq(a, b))`.
#[inline]
pub fn w2(a: &Gaussian2, b: &Gaussian2) -> f64 {
    w2_sq(a, b).sqrt()
}

/// Kullback-Leibler divergence `KL(q || p)` between 2-D Gaussians:
/// `(tr(Sp^{-1} Sq) + (mp - mq)^T Sp^{-1} (mp - mq) - 2 + ln det Sp - ln det Sq) / 2`,
/// clamped at 0 against rounding.
pub fn kl(q: &Gaussian2, p: &Gaussian2) -> f64 {
    let pp = p.precision();
    let sq = q.cov();
    let tr = pp[(0, 0)] * sq[(0, 0)] + pp[(1, 1)] * sq[(1, 1)] + 2.0 * pp[(0, 1)] * sq[(0, 1)];
    let maha = p.mahalanobis_sq(&q.mean());
    (0.5 * ((tr - 2.0) + maha + (p.log_det() - q.log_det()))).max(0.0)
}

/// Kullback-Leibler divergence `KL(N(mu_q, sigma_q^2) || N(mu_p, sigma_p^2))` between 1-D normals:
/// `ln(sigma_p / sigma_q) + (sigma_q^2 + (mu_q - mu_p)^2) / (2 sigma_p^2) - 1/2`.
///
/// Evaluated as `(u - ln(1 + u)) / 2 + ((mu_q - mu_p) / sigma_p)^2 / 2` with
/// `u = (sigma_q / sigma_p)^2 - 1`, which keeps accuracy for nearly equal sigmas.
/// Errors for non-finite means or sigmas that are not finite and `> 0`.
pub fn kl_normal_1d(mu_q: f64, sigma_q: f64, mu_p: f64, sigma_p: f64) -> Result<f64, Gauss2dError> {
    for (index, value) in [mu_q, mu_p].into_iter().enumerate() {
        if !value.is_finite() {
            return Err(Gauss2dError::NonFinite {
                field: "mu (q, p)",
                index,
                value,
            });
        }
    }
    for (which, value) in [("sigma_q", sigma_q), ("sigma_p", sigma_p)] {
        if !(value.is_finite() && value > 0.0) {
            return Err(Gauss2dError::InvalidStdDev { which, value });
        }
    }
    let r = sigma_q / sigma_p;
    let u = r * r - 1.0;
    let z = (mu_q - mu_p) / sigma_p;
    let kl = 0.5 * (u - u.ln_1p()) + 0.5 * z * z;
    if kl.is_finite() {
        Ok(kl.max(0.0))
    } else {
        Err(Gauss2dError::NonFinite {
            field: "kl_normal_1d result",
            index: 0,
            value: kl,
        })
    }
}

/// Quantile of the chi-square distribution with 2 degrees of freedom, `-2 ln(1 - p)`.
///
/// `chi2_2_quantile(0.95) = 5.991...`, the paper's threshold on the squared Mahalanobis distance.
/// Errors for `p` outside `[0, 1)` (including NaN).
pub fn chi2_2_quantile(p: f64) -> Result<f64, Gauss2dError> {
    if (0.0..1.0).contains(&p) {
        Ok(-2.0 * (-p).ln_1p())
    } else {
        Err(Gauss2dError::InvalidProbability { p })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Matrix2, Vector2};

    #[test]
    fn chi2_errors_and_value() {
        assert!((chi2_2_quantile(0.95).unwrap() - 5.991_464_547_107_979).abs() < 1e-12);
        assert_eq!(chi2_2_quantile(0.0).unwrap(), 0.0);
        for p in [1.0, -0.1, f64::NAN, f64::INFINITY] {
            assert!(chi2_2_quantile(p).is_err(), "{p}");
        }
    }

    #[test]
    fn kl_1d_errors() {
        assert!(matches!(
            kl_normal_1d(0.0, 0.0, 0.0, 1.0),
            Err(Gauss2dError::InvalidStdDev {
                which: "sigma_q",
                ..
            })
        ));
        assert!(matches!(
            kl_normal_1d(0.0, 1.0, 0.0, -1.0),
            Err(Gauss2dError::InvalidStdDev {
                which: "sigma_p",
                ..
            })
        ));
        assert!(kl_normal_1d(f64::NAN, 1.0, 0.0, 1.0).is_err());
        assert_eq!(kl_normal_1d(0.3, 0.2, 0.3, 0.2).unwrap(), 0.0);
    }

    #[test]
    fn kl_2d_matches_1d_for_diagonal() {
        let q = Gaussian2::new(Vector2::new(0.1, 0.2), Matrix2::new(0.04, 0.0, 0.0, 0.25)).unwrap();
        let p = Gaussian2::new(Vector2::new(-0.3, 0.5), Matrix2::new(0.09, 0.0, 0.0, 1.0)).unwrap();
        let expect =
            kl_normal_1d(0.1, 0.2, -0.3, 0.3).unwrap() + kl_normal_1d(0.2, 0.5, 0.5, 1.0).unwrap();
        assert!((kl(&q, &p) - expect).abs() < 1e-13);
    }
}
