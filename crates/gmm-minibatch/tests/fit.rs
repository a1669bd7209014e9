//! Behaviour tests of the fit and the scoring (small N, fixed seeds).

use gmm_minibatch::gauss2d::{Gaussian2, Matrix2, Vector2};
use gmm_minibatch::{GmmConfig, GmmError, GmmFit, KReason, fit, initialise, synthetic_cloud};
use proptest::prelude::*;

/// Deterministic standard normals (Box-Muller on a simple LCG) for test data.
fn normals(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut u = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| (-2.0 * u().ln()).sqrt() * (std::f64::consts::TAU * u()).cos())
        .collect()
}

/// Three well-separated anisotropic clusters.
fn three_clusters(n_each: usize) -> (Vec<[f32; 2]>, [[f64; 2]; 3]) {
    let means = [[0.0, 0.0], [5.0, 0.05], [-4.0, 0.12]];
    let z = normals(6 * n_each, 11);
    let mut pts = Vec::new();
    for (c, m) in means.iter().enumerate() {
        for i in 0..n_each {
            let (a, b) = (z[2 * (c * n_each + i)], z[2 * (c * n_each + i) + 1]);
            // Correlated, very different scales per axis (like mu vs sigma).
            pts.push([
                (m[0] + 0.5 * a) as f32,
                (m[1] + 0.004 * (0.6 * a + 0.8 * b)) as f32,
            ]);
        }
    }
    (pts, means)
}

fn cfg(k: usize) -> GmmConfig {
    GmmConfig {
        k,
        seed: 3,
        ..GmmConfig::default()
    }
}

#[test]
fn recovers_well_separated_mixture() {
    let (pts, means) = three_clusters(4000);
    let f = fit(&pts, None, &cfg(3)).unwrap();
    assert_eq!(f.k_final, 3);
    assert_eq!(f.k_reason, KReason::Requested);
    for m in means {
        let best = f
            .components
            .iter()
            .map(|g| ((g.mean()[0] - m[0]) / 0.5).powi(2) + ((g.mean()[1] - m[1]) / 0.004).powi(2))
            .fold(f64::INFINITY, f64::min);
        assert!(best < 0.05 * 0.05, "mean {m:?} not recovered ({best})");
    }
    for w in &f.weights {
        assert!((w - 1.0 / 3.0).abs() < 0.01, "weights {:?}", f.weights);
    }
    // The fitted covariance of a cluster: var_mu = 0.25, corr 0.6.
    let g = &f.components[0];
    let c = g.cov();
    let corr = c[(0, 1)] / (c[(0, 0)] * c[(1, 1)]).sqrt();
    assert!(
        (c[(0, 0)] - 0.25).abs() < 0.02 && (corr - 0.6).abs() < 0.03,
        "{c:?}"
    );
}

#[test]
fn same_seed_same_result() {
    let pts = synthetic_cloud(30_000, 5);
    let a = fit(&pts, None, &cfg(40)).unwrap();
    let b = fit(&pts, None, &cfg(40)).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.assign(&pts).unwrap(), b.assign(&pts).unwrap());
    let c = fit(&pts, None, &GmmConfig { seed: 4, ..cfg(40) }).unwrap();
    assert_ne!(a.components, c.components);
}

#[test]
fn fewer_points_than_components() {
    let pts: Vec<[f32; 2]> = normals(100, 2)
        .chunks(2)
        .map(|c| [c[0] as f32, c[1] as f32])
        .collect();
    let f = fit(&pts, None, &cfg(100)).unwrap();
    assert!(f.k_final <= 50 && f.k_final > 0);
    assert!(matches!(f.k_reason, KReason::FewerDistinctPoints { distinct } if distinct <= 50));
    assert_eq!(f.k_requested, 100);
    assert!(f.mean_log_likelihood(&pts).unwrap().is_finite());
}

#[test]
fn duplicates_give_one_component_per_location() {
    let mut pts = Vec::new();
    for i in 0..3000 {
        pts.push([[0.1f32, 0.01], [0.3, 0.02], [-0.2, 0.015]][i % 3]);
    }
    let f = fit(&pts, None, &cfg(10)).unwrap();
    assert_eq!(f.k_reason, KReason::FewerDistinctPoints { distinct: 3 });
    assert_eq!(f.k_final, 3);
    let counts = f.counts(&pts).unwrap();
    let mut sorted = counts.clone();
    sorted.sort();
    assert_eq!(sorted, vec![1000, 1000, 1000]);
}

#[test]
fn zero_variance_axis() {
    let pts: Vec<[f32; 2]> = normals(4000, 9)
        .iter()
        .map(|&x| [x as f32 * 0.05, 0.01])
        .collect();
    let f = fit(&pts, None, &cfg(8)).unwrap();
    assert_eq!(f.standardizer.scale[1], 1.0);
    assert!(f.k_final >= 1);
    let ll = f.log_likelihood(&pts).unwrap();
    assert!(ll.iter().all(|v| v.is_finite()));
}

#[test]
fn errors_name_the_problem() {
    let mut pts = synthetic_cloud(100, 1);
    pts[17][1] = f32::NAN;
    match fit(&pts, None, &cfg(5)) {
        Err(GmmError::NonFinitePoint {
            index: 17, axis: 1, ..
        }) => {}
        other => panic!("{other:?}"),
    }
    let msg = fit(&pts, None, &cfg(5)).unwrap_err().to_string();
    assert!(msg.contains("17"), "{msg}");
    pts[17][1] = 0.01;
    pts[3][0] = f32::INFINITY;
    assert!(matches!(
        fit(&pts, None, &cfg(5)),
        Err(GmmError::NonFinitePoint {
            index: 3,
            axis: 0,
            ..
        })
    ));
    pts[3][0] = 0.0;
    assert!(matches!(
        fit(&pts, None, &cfg(0)),
        Err(GmmError::ZeroComponents)
    ));
    assert!(matches!(fit(&[], None, &cfg(5)), Err(GmmError::EmptyInput)));
    assert!(matches!(
        fit(&pts, Some(&[1.0; 99]), &cfg(5)),
        Err(GmmError::WeightLength {
            weights: 99,
            points: 100
        })
    ));
    let mut w = vec![1.0f32; 100];
    w[42] = -1.0;
    assert!(matches!(
        fit(&pts, Some(&w), &cfg(5)),
        Err(GmmError::BadWeight { index: 42, .. })
    ));
    let f = fit(&pts, None, &cfg(5)).unwrap();
    pts[9][0] = f32::NAN;
    assert!(matches!(
        f.assign(&pts),
        Err(GmmError::NonFinitePoint { index: 9, .. })
    ));
}

#[test]
fn weights_act_like_repetition() {
    let base = synthetic_cloud(5000, 8);
    let w: Vec<f32> = (0..base.len()).map(|i| (1 + i % 2) as f32).collect();
    let mut rep = Vec::new();
    for (p, &wi) in base.iter().zip(&w) {
        for _ in 0..wi as usize {
            rep.push(*p);
        }
    }
    let a = fit(&base, Some(&w), &cfg(6)).unwrap();
    let b = fit(&rep, None, &cfg(6)).unwrap();
    let (la, lb) = (
        a.mean_log_likelihood(&rep).unwrap(),
        b.mean_log_likelihood(&rep).unwrap(),
    );
    assert!((la - lb).abs() < 1e-6, "{la} vs {lb}");
}

#[test]
fn fit_improves_on_initialisation() {
    let pts = synthetic_cloud(50_000, 2);
    let c = cfg(60);
    let init = initialise(&pts, None, &c).unwrap();
    let f = fit(&pts, None, &c).unwrap();
    let (li, lf) = (
        init.mean_log_likelihood(&pts).unwrap(),
        f.mean_log_likelihood(&pts).unwrap(),
    );
    assert!(lf > li + 0.01, "fit {lf} vs init {li}");
    assert!(f.iterations > 0 && f.minibatch_epochs <= c.minibatch_epochs);
}

#[test]
fn top_k_and_assign_agree() {
    let pts = synthetic_cloud(20_000, 4);
    let f = fit(&pts, None, &cfg(30)).unwrap();
    let t = f.top_k(&pts, 3).unwrap();
    assert_eq!(
        (t.k, t.indices.len(), t.resp.len()),
        (3, 3 * pts.len(), 3 * pts.len())
    );
    for row in t.resp.chunks(3) {
        let s: f32 = row.iter().sum();
        assert!((s - 1.0).abs() < 1e-5, "{row:?}");
        assert!(row[0] >= row[1] && row[1] >= row[2]);
    }
    let t1 = f.top_k(&pts, 1).unwrap();
    assert!(t1.resp.iter().all(|&r| (r - 1.0).abs() < 1e-6));
    assert_eq!(f.assign(&pts).unwrap(), t1.indices);
    let top_first: Vec<u32> = t.indices.chunks(3).map(|r| r[0]).collect();
    assert_eq!(top_first, t1.indices);
    let counts = f.counts(&pts).unwrap();
    assert_eq!(counts.iter().sum::<u64>(), pts.len() as u64);
    let big = f.top_k(&pts[..5], 1000).unwrap();
    assert_eq!(big.k, f.k_final);
}

/// Brute-force per-point log-likelihood with gauss2d (no pruning).
fn brute(f: &GmmFit, p: [f32; 2]) -> (f64, u32) {
    let x = Vector2::new(f64::from(p[0]), f64::from(p[1]));
    let l: Vec<f64> = f
        .components
        .iter()
        .zip(&f.weights)
        .map(|(g, w)| w.ln() + g.log_pdf(&x))
        .collect();
    let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let arg = l.iter().position(|&v| v == m).unwrap() as u32;
    (m + l.iter().map(|v| (v - m).exp()).sum::<f64>().ln(), arg)
}

#[test]
fn pruned_scoring_is_exact_and_round_trips() {
    let pts = synthetic_cloud(40_000, 6);
    let f = fit(&pts, None, &cfg(80)).unwrap();
    let ll = f.log_likelihood(&pts).unwrap();
    let asg = f.assign(&pts).unwrap();
    for i in (0..pts.len()).step_by(97) {
        let (b, arg) = brute(&f, pts[i]);
        assert!(
            (ll[i] - b).abs() < 1e-8 * (1.0 + b.abs()),
            "point {i}: {} vs {b}",
            ll[i]
        );
        assert_eq!(asg[i], arg, "point {i}");
    }
    let mean = ll.iter().sum::<f64>() / ll.len() as f64;
    assert!((f.mean_log_likelihood(&pts).unwrap() - mean).abs() < 1e-9);
    let g = GmmFit::from_components(f.components.clone(), f.weights.clone()).unwrap();
    assert_eq!(g.assign(&pts).unwrap(), asg);
    let ll2 = g.log_likelihood(&pts).unwrap();
    assert!(ll.iter().zip(&ll2).all(|(a, b)| (a - b).abs() < 1e-8));
    // serde round trip
    let json = serde_json::to_string(&f).unwrap();
    let back: GmmFit = serde_json::from_str(&json).unwrap();
    assert_eq!(back.assign(&pts[..100]).unwrap(), asg[..100].to_vec());
}

/// With a large tolerance the pruning must drop mass, and never more than it may: every
/// per-point log-likelihood is below the brute-force one by at most `-ln(1 - eps)`.
#[test]
fn pruning_omits_at_most_the_tolerance() {
    let z = normals(4 * 300 + 2 * 20_000, 5);
    let gs: Vec<Gaussian2> = (0..300)
        .map(|k| {
            let (a, b) = (z[4 * k], z[4 * k + 1]);
            let (sx, sy) = (
                0.05 + 0.3 * z[4 * k + 2].abs(),
                0.05 + 0.3 * z[4 * k + 3].abs(),
            );
            Gaussian2::new(
                Vector2::new(a, 0.5 * b),
                Matrix2::new(sx * sx, 0.0, 0.0, sy * sy),
            )
            .unwrap()
        })
        .collect();
    let ws: Vec<f64> = (0..300).map(|k| 1.0 + (k % 7) as f64).collect();
    let mut f = GmmFit::from_components(gs, ws).unwrap();
    let pts: Vec<[f32; 2]> = (0..20_000)
        .map(|i| {
            let o = 4 * 300 + 2 * i;
            [(1.2 * z[o]) as f32, (0.8 * z[o + 1]) as f32]
        })
        .collect();
    for eps in [0.3, 0.05, 1e-3] {
        f.score_prune_tolerance = eps;
        let ll = f.log_likelihood(&pts).unwrap();
        let mut worst: f64 = 0.0;
        for (i, p) in pts.iter().enumerate() {
            let (b, _) = brute(&f, *p);
            let gap = b - ll[i];
            assert!(gap >= -1e-9 * (1.0 + b.abs()), "point {i}: {} > {b}", ll[i]);
            worst = worst.max(gap);
        }
        assert!(worst <= -(1.0 - eps).ln() + 1e-9, "eps {eps}: {worst}");
        assert!(worst > 0.05 * eps, "eps {eps}: nothing pruned ({worst})");
    }
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let pts = synthetic_cloud(60_000, 7);
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                let f = fit(&pts, None, &cfg(30)).unwrap();
                let asg = f.assign(&pts).unwrap();
                let (asg2, mean) = f.assign_and_mean_log_likelihood(&pts).unwrap();
                let ll = f.log_likelihood(&pts[..20_000]).unwrap();
                (f, asg, asg2, mean.to_bits(), ll)
            })
    };
    let one = run(1);
    assert_eq!(one.1, one.2, "assign and the scoring pass agree");
    for t in [2, 3] {
        assert!(run(t) == one, "{t} threads");
    }
}

#[test]
fn from_components_validates() {
    let g = Gaussian2::new(Vector2::new(0.0, 0.0), Matrix2::new(1.0, 0.0, 0.0, 1.0)).unwrap();
    assert!(GmmFit::from_components(vec![], vec![]).is_err());
    assert!(GmmFit::from_components(vec![g], vec![1.0, 2.0]).is_err());
    assert!(GmmFit::from_components(vec![g], vec![-1.0]).is_err());
    assert!(GmmFit::from_components(vec![g, g], vec![0.0, 0.0]).is_err());
    let m = GmmFit::from_components(vec![g, g], vec![0.0, 2.0]).unwrap();
    assert_eq!(m.assign(&[[0.0, 0.0]]).unwrap(), vec![1]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Pruned scoring equals brute force for random mixtures and points.
    #[test]
    fn scoring_matches_brute_force(
        comps in prop::collection::vec((-3.0f64..3.0, -3.0f64..3.0, 0.01f64..2.0, 0.01f64..2.0, -0.9f64..0.9, 0.01f64..1.0), 1..12),
        pts in prop::collection::vec((-6.0f32..6.0, -6.0f32..6.0), 1..300),
    ) {
        let gs: Vec<Gaussian2> = comps.iter().map(|&(mx, my, sx, sy, r, _)| {
            let c = r * sx * sy;
            Gaussian2::new(Vector2::new(mx, my), Matrix2::new(sx * sx, c, c, sy * sy)).unwrap()
        }).collect();
        let ws: Vec<f64> = comps.iter().map(|c| c.5).collect();
        let f = GmmFit::from_components(gs, ws).unwrap();
        let pts: Vec<[f32; 2]> = pts.iter().map(|&(a, b)| [a, b]).collect();
        let ll = f.log_likelihood(&pts).unwrap();
        let asg = f.assign(&pts).unwrap();
        for (i, p) in pts.iter().enumerate() {
            let (b, arg) = brute(&f, *p);
            prop_assert!((ll[i] - b).abs() < 1e-8 * (1.0 + b.abs()), "{} vs {}", ll[i], b);
            prop_assert_eq!(asg[i], arg, "point {}", i);
        }
    }
}
