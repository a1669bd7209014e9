//! Property tests (proptest, fixed seed).

use gauss2d::{
    Gaussian2, Matrix2, Vector2, kl, kl_normal_1d, merge_paper, moment_match, sqrtm_spd, w2,
    w2_barycenter, w2_sq,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

fn config() -> Config {
    Config {
        cases: 256,
        rng_seed: RngSeed::Fixed(0x2d6b_1234),
        failure_persistence: None,
        ..Config::default()
    }
}

/// SPD covariance `R(angle) diag(l1, l2) R(angle)^T` with log-uniform eigenvalues in
/// `[1e-3, 10] * scale`, `scale` in `{1, 1e-4}` (the second is the scale of real weight clusters).
fn cov_strategy() -> impl Strategy<Value = Matrix2<f64>> {
    (
        -3.0f64..1.0,
        -3.0f64..1.0,
        0.0f64..std::f64::consts::PI,
        prop::bool::ANY,
    )
        .prop_map(|(e1, e2, angle, small)| {
            let scale = if small { 1e-4 } else { 1.0 };
            let (c, s) = (angle.cos(), angle.sin());
            let r = Matrix2::new(c, -s, s, c);
            let d = Matrix2::new(10f64.powf(e1) * scale, 0.0, 0.0, 10f64.powf(e2) * scale);
            let m = r * d * r.transpose();
            // Exactly symmetric input.
            let off = 0.5 * (m[(0, 1)] + m[(1, 0)]);
            Matrix2::new(m[(0, 0)], off, off, m[(1, 1)])
        })
}

fn mean_strategy() -> impl Strategy<Value = Vector2<f64>> {
    (-5.0f64..5.0, -5.0f64..5.0).prop_map(|(x, y)| Vector2::new(x, y))
}

fn gaussian_strategy() -> impl Strategy<Value = Gaussian2> {
    (mean_strategy(), cov_strategy()).prop_map(|(m, c)| Gaussian2::new(m, c).unwrap())
}

fn scale_of(gs: &[&Gaussian2]) -> f64 {
    gs.iter()
        .map(|g| g.cov().trace() + g.mean().norm_squared())
        .fold(0.0, f64::max)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn w2_nonnegative_symmetric_and_triangle(a in gaussian_strategy(), b in gaussian_strategy(), c in gaussian_strategy()) {
        let d = w2_sq(&a, &b);
        prop_assert!(d >= 0.0);
        prop_assert_eq!(d, w2_sq(&b, &a));
        let tol = 1e-7 * scale_of(&[&a, &b, &c]).sqrt();
        prop_assert!(w2(&a, &c) <= w2(&a, &b) + w2(&b, &c) + tol);
    }

    #[test]
    fn w2_zero_for_identical(a in gaussian_strategy()) {
        prop_assert!(w2_sq(&a, &a) <= 1e-14 * a.cov().trace());
    }

    #[test]
    fn w2_equals_mean_distance_for_equal_covariances(m1 in mean_strategy(), m2 in mean_strategy(), s in cov_strategy()) {
        let a = Gaussian2::new(m1, s).unwrap();
        let b = Gaussian2::new(m2, s).unwrap();
        let expect = (m1 - m2).norm_squared();
        prop_assert!((w2_sq(&a, &b) - expect).abs() <= 1e-13 * (expect + s.trace()));
    }

    #[test]
    fn sqrtm_squares_back(s in cov_strategy()) {
        let r = sqrtm_spd(&s).unwrap();
        prop_assert!((r * r - s).amax() <= 1e-13 * s.amax());
        prop_assert_eq!(r[(0, 1)], r[(1, 0)]);
    }

    #[test]
    fn barycenter_of_identical_is_itself(a in gaussian_strategy(), w in prop::collection::vec(0.1f64..10.0, 1..5)) {
        let items: Vec<_> = w.iter().map(|&w| (w, a)).collect();
        let b = w2_barycenter(&items).unwrap();
        prop_assert!((b.mean() - a.mean()).amax() <= 1e-14 * (1.0 + a.mean().amax()));
        prop_assert!((b.cov() - a.cov()).amax() <= 1e-9 * a.cov().amax());
    }

    #[test]
    fn barycenter_solves_fixed_point_and_is_symmetric(a in gaussian_strategy(), b in gaussian_strategy(), w in 0.05f64..0.95) {
        let ab = w2_barycenter(&[(w, a), (1.0 - w, b)]).unwrap();
        let ba = w2_barycenter(&[(1.0 - w, b), (w, a)]).unwrap();
        let s = ab.cov();
        prop_assert!((ab.mean() - ba.mean()).amax() <= 1e-12 * (1.0 + ab.mean().amax()));
        prop_assert!((s - ba.cov()).amax() <= 1e-8 * s.amax());
        // S = sum_i w_i (S^1/2 S_i S^1/2)^1/2.
        let r = sqrtm_spd(&s).unwrap();
        let sym = |m: Matrix2<f64>| (m + m.transpose()) * 0.5;
        let t = sqrtm_spd(&sym(r * a.cov() * r)).unwrap() * w
            + sqrtm_spd(&sym(r * b.cov() * r)).unwrap() * (1.0 - w);
        prop_assert!((t - s).amax() <= 1e-8 * s.amax());
        // The barycentre minimises the weighted sum of squared W2 distances; in particular it
        // beats the paper's rule and moment matching for equal weights.
        let cost = |g: &Gaussian2| w * w2_sq(g, &a) + (1.0 - w) * w2_sq(g, &b);
        let mm = moment_match(&[(w, a), (1.0 - w, b)]).unwrap();
        prop_assert!(cost(&ab) <= cost(&mm) * (1.0 + 1e-9) + 1e-15);
    }

    #[test]
    fn merges_are_symmetric(a in gaussian_strategy(), b in gaussian_strategy(), w in 0.05f64..0.95) {
        let m1 = moment_match(&[(w, a), (1.0 - w, b)]).unwrap();
        let m2 = moment_match(&[(1.0 - w, b), (w, a)]).unwrap();
        prop_assert!((m1.mean() - m2.mean()).amax() <= 1e-14 * (1.0 + m1.mean().amax()));
        prop_assert!((m1.cov() - m2.cov()).amax() <= 1e-13 * m1.cov().amax());
        // Paper rule: mean, trace and determinant are symmetric in general ...
        let p1 = merge_paper(&a, &b).unwrap();
        let p2 = merge_paper(&b, &a).unwrap();
        prop_assert_eq!(p1.mean(), p2.mean());
        prop_assert!((p1.cov().trace() - p2.cov().trace()).abs() <= 1e-12 * p1.cov().trace());
    }

    #[test]
    fn paper_merge_symmetric_for_commuting_covariances(m1 in mean_strategy(), m2 in mean_strategy(), v in prop::array::uniform4(1e-3f64..10.0)) {
        // ... and the whole covariance when S1, S2 commute (here: both diagonal).
        let a = Gaussian2::diagonal(m1, v[0], v[1]).unwrap();
        let b = Gaussian2::diagonal(m2, v[2], v[3]).unwrap();
        let p1 = merge_paper(&a, &b).unwrap();
        let p2 = merge_paper(&b, &a).unwrap();
        prop_assert!((p1.cov() - p2.cov()).amax() <= 1e-13 * p1.cov().amax());
    }

    #[test]
    fn kl_nonnegative_and_zero_for_identical(q in gaussian_strategy(), p in gaussian_strategy()) {
        prop_assert!(kl(&q, &p) >= 0.0);
        prop_assert!(kl(&q, &q) <= 1e-12);
    }

    #[test]
    fn kl_1d_nonnegative_and_zero_for_identical(mq in -3.0f64..3.0, sq in 1e-4f64..3.0, mp in -3.0f64..3.0, sp in 1e-4f64..3.0) {
        prop_assert!(kl_normal_1d(mq, sq, mp, sp).unwrap() >= 0.0);
        prop_assert_eq!(kl_normal_1d(mq, sq, mq, sq).unwrap(), 0.0);
    }

    #[test]
    fn mahalanobis_consistent_with_log_pdf(g in gaussian_strategy(), x in mean_strategy()) {
        let d2 = g.mahalanobis_sq(&x);
        prop_assert!(d2 >= 0.0);
        let ln_2pi = (2.0 * std::f64::consts::PI).ln();
        let lp = g.log_pdf(&x);
        prop_assert!((lp - (-ln_2pi - 0.5 * g.log_det() - 0.5 * d2)).abs() <= 1e-12 * (1.0 + lp.abs()));
        prop_assert!(((g.log_pdf(&g.mean()) - lp) - 0.5 * d2).abs() <= 1e-10 * (1.0 + d2));
        // Against a plain inverse of the covariance.
        let inv = g.cov().try_inverse().unwrap();
        let dx = x - g.mean();
        let direct = (dx.transpose() * inv * dx)[(0, 0)];
        prop_assert!((d2 - direct).abs() <= 1e-9 * (1.0 + direct));
    }

    #[test]
    fn serde_roundtrip(g in gaussian_strategy()) {
        let s = serde_json::to_string(&g).unwrap();
        let back: Gaussian2 = serde_json::from_str(&s).unwrap();
        prop_assert_eq!(back, g);
    }
}
