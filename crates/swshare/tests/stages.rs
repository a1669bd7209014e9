//! Stage functions on hand-made components (no GMM fit involved).

use gauss2d::{Gaussian2, Matrix2, Vector2};
use proptest::prelude::*;
use swshare::gmm_stage::plan_from_fit;
use swshare::merge::{MergedComponents, merge_components};
use swshare::synth::SplitMix64;
use swshare::*;

fn g(mx: f64, my: f64, vx: f64, vy: f64) -> Gaussian2 {
    Gaussian2::new(Vector2::new(mx, my), Matrix2::new(vx, 0.0, 0.0, vy)).unwrap()
}

/// A table whose shareable weights are `points` (one layer) plus a bias layer.
fn table_of(points: &[[f32; 2]], grad: Option<&[f32]>) -> WeightTable {
    let mu: Vec<f32> = points.iter().map(|p| p[0]).collect();
    let sigma: Vec<f32> = points.iter().map(|p| p[1]).collect();
    let mut b = WeightTableBuilder::new();
    b.push_layer("w", &[points.len()], true, &mu, &sigma, grad)
        .push_layer(
            "b",
            &[3],
            false,
            &[0.0; 3],
            &[0.1; 3],
            grad.map(|_| &[0.0f32; 3][..]),
        );
    b.build().unwrap()
}

/// Points drawn around the given components, `counts[k]` each, assigned to their component.
fn cloud(comps: &[Gaussian2], counts: &[usize], seed: u64) -> (Vec<[f32; 2]>, Vec<u32>) {
    let mut rng = SplitMix64::new(seed);
    let (mut pts, mut assign) = (Vec::new(), Vec::new());
    for (k, (c, &n)) in comps.iter().zip(counts).enumerate() {
        let (m, cov) = (c.mean(), c.cov());
        for _ in 0..n {
            let x = m.x + cov[(0, 0)].sqrt() * rng.normal();
            let y = (m.y + cov[(1, 1)].sqrt() * rng.normal()).abs() + 1e-6;
            pts.push([x as f32, y as f32]);
            assign.push(k as u32);
        }
    }
    (pts, assign)
}

fn plan_for(comps: &[Gaussian2], counts: &[usize], seed: u64) -> (WeightTable, SharingPlan) {
    let (pts, assign) = cloud(comps, counts, seed);
    let table = table_of(&pts, None);
    let mask = detect_outliers(
        &table,
        &OutlierConfig {
            tau_w: 10.0,
            ..Default::default()
        },
    )
    .unwrap();
    let positions: Vec<u32> = (0..pts.len() as u32).collect();
    let mix: Vec<f64> = counts
        .iter()
        .map(|&c| c as f64 / pts.len() as f64)
        .collect();
    let plan = plan_from_fit(&mask, &positions, &assign, comps, &mix).unwrap();
    (table, plan)
}

#[test]
fn small_clusters_become_outliers() {
    let comps = [
        g(0.0, 0.01, 1e-4, 1e-6),
        g(0.05, 0.01, 1e-4, 1e-6),
        g(-0.05, 0.02, 1e-4, 1e-6),
        g(0.1, 0.02, 1e-4, 1e-6),
    ];
    let (table, mut plan) = plan_for(&comps, &[100, 29, 30, 5], 1);
    let out = reduce_small_clusters(&mut plan, &table, 30, SmallClusterPolicy::Drop).unwrap();
    assert_eq!(out.dropped, 2);
    assert_eq!(out.new_outliers, 34);
    assert_eq!(out.map, vec![Some(0), None, Some(1), None]);
    plan.validate().unwrap();
    assert_eq!(plan.k(), 2);
    assert_eq!(plan.counts().outlier_small_cluster, 34);
    // Exactly the members of components 1 and 3 (positions 100..129 and 159..164).
    for (p, f) in plan.fates.iter().enumerate() {
        let small = (100..129).contains(&p) || p >= 159;
        assert_eq!(
            *f == WeightFate::Outlier(OutlierCause::SmallCluster),
            small,
            "position {p}"
        );
    }
    let w: f64 = plan.codebook.iter().map(|e| e.mixing_weight).sum();
    assert!((w - 1.0).abs() < 1e-12);
}

#[test]
fn refit_policy_moves_components_to_member_moments() {
    let comps = [g(0.0, 0.01, 1e-4, 1e-6), g(0.05, 0.01, 1e-4, 1e-6)];
    let (table, mut plan) = plan_for(&comps, &[200, 100], 2);
    // Move component 0 away: the refit must bring it back to its members' mean.
    plan.codebook[0] = CodebookEntry::new(g(0.5, 0.5, 1.0, 1.0), 0.5);
    reduce_small_clusters(&mut plan, &table, 30, SmallClusterPolicy::DropAndRefit).unwrap();
    plan.validate().unwrap();
    let m = plan.codebook[0].gaussian.mean();
    let want: f64 = table.mu()[..200].iter().map(|&x| f64::from(x)).sum::<f64>() / 200.0;
    assert!((m.x - want).abs() < 1e-9, "{} vs {want}", m.x);
    assert!((plan.codebook[0].mixing_weight - 2.0 / 3.0).abs() < 1e-12);
}

#[test]
fn all_small_is_an_error_and_order_is_checked() {
    let comps = [g(0.0, 0.01, 1e-4, 1e-6), g(0.05, 0.01, 1e-4, 1e-6)];
    let (table, mut plan) = plan_for(&comps, &[10, 10], 3);
    assert!(matches!(
        reduce_small_clusters(&mut plan.clone(), &table, 30, SmallClusterPolicy::Drop),
        Err(SwshareError::NoComponentLeft { .. })
    ));
    detect_ellipses(&mut plan, &table, &EllipseConfig::default()).unwrap();
    if !plan.ellipses.is_empty() {
        assert!(matches!(
            reduce_small_clusters(&mut plan, &table, 1, SmallClusterPolicy::Drop),
            Err(SwshareError::StageOrder(_))
        ));
    }
}

#[test]
fn ellipse_weights_use_highest_pdf_components_and_alphas_sum_to_one() {
    let comps: Vec<Gaussian2> = (0..12)
        .map(|i| {
            let f = i as f64;
            g(
                -0.1 + 0.02 * f,
                0.01 + 0.002 * (f * 1.3).sin().abs(),
                4e-5,
                4e-6,
            )
        })
        .collect();
    let counts = vec![400; 12];
    let (table, mut plan) = plan_for(&comps, &counts, 4);
    // Perturb the assignment so many points sit outside their component's ellipse.
    for (p, f) in plan.fates.iter_mut().enumerate() {
        if p % 7 == 0
            && let WeightFate::Shared(k) = f
        {
            *k = (*k + 3) % 12;
        }
    }
    plan.recount();
    let before = plan.clone();
    let n = detect_ellipses(&mut plan, &table, &EllipseConfig::default()).unwrap();
    plan.validate().unwrap();
    assert!(n > 0);
    assert_eq!(plan.counts().ellipse, n);
    // Exactly the plain weights with D^2 > T_M became ellipse weights.
    for (p, f) in before.fates.iter().enumerate() {
        let WeightFate::Shared(k) = *f else { continue };
        let x = Vector2::new(f64::from(table.mu()[p]), f64::from(table.sigma()[p]));
        let outside = comps[k as usize].mahalanobis_sq(&x) > 5.991;
        assert_eq!(
            matches!(plan.fates[p], WeightFate::Ellipse(_)),
            outside,
            "{p}"
        );
    }
    for e in &plan.ellipses {
        assert_eq!(e.len, 5);
        let s: f32 = e.alphas.iter().sum();
        assert!((s - 1.0).abs() < 1e-5);
        let p = e.weight as usize;
        let x = Vector2::new(f64::from(table.mu()[p]), f64::from(table.sigma()[p]));
        let mut lp: Vec<(f64, u32)> = comps
            .iter()
            .enumerate()
            .map(|(i, c)| (c.log_pdf(&x), i as u32))
            .collect();
        lp.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let best: Vec<u32> = lp[..5].iter().map(|v| v.1).collect();
        assert_eq!(&e.components[..], &best[..]);
        // alpha ratio = pdf ratio (mixing weight not included).
        let r = f64::from(e.alphas[1]) / f64::from(e.alphas[0]);
        let want = (lp[1].0 - lp[0].0).exp();
        assert!(
            (r - want).abs() <= 1e-5 * want.max(1e-30) + 1e-7,
            "{r} vs {want}"
        );
    }
}

#[test]
fn default_threshold_is_on_the_squared_distance() {
    // Near-duplicates: equal covariances, means 3e-4 apart, so W2 = 3e-4 and W2^2 = 9e-8, under
    // the paper's 1.5e-7. Two others sit W2 = 1e-3 apart (W2^2 = 1e-6): they must stay apart.
    let cov = (1e-7, 1e-9);
    let comps = [
        g(0.0100, 0.010, cov.0, cov.1),
        g(0.0103, 0.010, cov.0, cov.1),
        g(0.0500, 0.010, cov.0, cov.1),
        g(0.0510, 0.010, cov.0, cov.1),
    ];
    let d = gauss2d::w2(&comps[0], &comps[1]);
    assert!((d - 3e-4).abs() < 1e-9, "{d}");
    let MergedComponents {
        components: c,
        map,
        merges,
        ..
    } = merge_components(&comps, &[0.25; 4], &[], false, &MergeConfig::default()).unwrap();
    assert_eq!(merges, 1);
    assert_eq!(c.len(), 3);
    assert_eq!(map, vec![0, 0, 1, 2]);
}

#[test]
fn identical_components_always_merge_far_ones_never() {
    let a = g(0.01, 0.01, 1e-6, 1e-8);
    let far = g(0.1, 0.01, 1e-6, 1e-8);
    let comps = [a, far, a];
    let cfg = MergeConfig::default();
    let MergedComponents {
        components: c,
        map,
        passes,
        merges,
        ..
    } = merge_components(&comps, &[0.3, 0.4, 0.3], &[], false, &cfg).unwrap();
    assert_eq!(merges, 1);
    assert_eq!(c.len(), 2);
    assert_eq!(map, vec![0, 1, 0]);
    assert_eq!(passes, 2);
    assert!((c[0].mean() - a.mean()).norm() < 1e-15);
    // Far apart: never, whatever the rule.
    for rule in [
        MergeRule::Paper,
        MergeRule::W2Barycenter,
        MergeRule::MomentMatch,
    ] {
        let cfg = MergeConfig {
            rule,
            tau_d: 1e-3,
            ..Default::default()
        };
        let c = merge_components(&[a, far], &[0.5, 0.5], &[], false, &cfg)
            .unwrap()
            .components;
        assert_eq!(c.len(), 2);
        let c = merge_components(&[a, a], &[0.5, 0.5], &[], false, &cfg)
            .unwrap()
            .components;
        assert_eq!(c.len(), 1);
    }
}

#[test]
fn merge_remaps_fates_and_ellipses() {
    // Components 0 and 2 are identical; points assigned to each; ellipses blend both.
    let a = g(0.0, 0.01, 1e-4, 1e-6);
    let comps = [a, g(0.05, 0.012, 1e-4, 1e-6), a, g(-0.05, 0.02, 1e-4, 1e-6)];
    let (table, mut plan) = plan_for(&comps, &[200, 200, 200, 200], 5);
    detect_ellipses(
        &mut plan,
        &table,
        &EllipseConfig {
            k: 3,
            ..Default::default()
        },
    )
    .unwrap();
    plan.validate().unwrap();
    let before = plan.clone();
    let out = merge_gaussians(&mut plan, &table, &MergeConfig::default()).unwrap();
    plan.validate().unwrap();
    assert_eq!((out.k_before, out.k_after, out.merges), (4, 3, 1));
    assert_eq!(out.map, vec![0, 1, 0, 2]);
    let cb = before.counts();
    let ca = plan.counts();
    assert_eq!(cb.total, ca.total);
    assert_eq!(cb.outliers(), ca.outliers());
    assert_eq!(cb.plain_shared + cb.ellipse, ca.plain_shared + ca.ellipse);
    for (p, f) in before.fates.iter().enumerate() {
        match *f {
            WeightFate::Shared(k) => {
                assert_eq!(plan.fates[p], WeightFate::Shared(out.map[k as usize]))
            }
            WeightFate::Ellipse(j) => {
                let old = &before.ellipses[j as usize];
                let mut want: Vec<u32> = old.blend().map(|(c, _)| out.map[c as usize]).collect();
                want.sort();
                want.dedup();
                match plan.fates[p] {
                    WeightFate::Ellipse(nj) => {
                        let mut got: Vec<u32> =
                            plan.ellipses[nj as usize].blend().map(|(c, _)| c).collect();
                        got.sort();
                        assert_eq!(got, want);
                    }
                    WeightFate::Shared(k) => assert_eq!(vec![k], want),
                    WeightFate::Outlier(_) => panic!("ellipse became outlier"),
                }
            }
            WeightFate::Outlier(c) => assert_eq!(plan.fates[p], WeightFate::Outlier(c)),
        }
    }
}

#[test]
fn gradient_and_variance_criteria_block_merges() {
    let a = g(0.0, 0.01, 1e-4, 1e-6);
    let comps = [a, a];
    let (pts, assign) = cloud(&comps, &[100, 100], 6);
    // Members of component 1 have a much larger gradient.
    let grad: Vec<f32> = assign
        .iter()
        .map(|&k| if k == 0 { 0.0 } else { 1.0 })
        .collect();
    let table = table_of(&pts, Some(&grad));
    let mask = detect_outliers(
        &table,
        &OutlierConfig {
            tau_w: 10.0,
            grad_top_fraction: 0.0,
            ..Default::default()
        },
    )
    .unwrap();
    let positions: Vec<u32> = (0..pts.len() as u32).collect();
    let plan = plan_from_fit(&mask, &positions, &assign, &comps, &[0.5, 0.5]).unwrap();
    let blocked = MergeConfig {
        tau_g: Some(0.5),
        ..Default::default()
    };
    let mut p = plan.clone();
    assert_eq!(merge_gaussians(&mut p, &table, &blocked).unwrap().merges, 0);
    let allowed = MergeConfig {
        tau_g: Some(1.5),
        ..Default::default()
    };
    let mut p = plan.clone();
    assert_eq!(merge_gaussians(&mut p, &table, &allowed).unwrap().merges, 1);
    // Member mu spread is ~0.01: tau_v = 1e-3 blocks, 1.0 allows.
    let mut p = plan.clone();
    let v = MergeConfig {
        tau_v: Some(1e-3),
        ..Default::default()
    };
    assert_eq!(merge_gaussians(&mut p, &table, &v).unwrap().merges, 0);
    let mut p = plan;
    let v = MergeConfig {
        tau_v: Some(1.0),
        ..Default::default()
    };
    assert_eq!(merge_gaussians(&mut p, &table, &v).unwrap().merges, 1);
}

#[test]
fn repeated_passes_collapse_a_chain() {
    // Five components 1e-4 apart in mu, tau_d = (3e-4)^2: neighbours merge, then merged ones.
    let comps: Vec<Gaussian2> = (0..5)
        .map(|i| g(1e-4 * i as f64, 0.01, 1e-10, 1e-10))
        .collect();
    let cfg = MergeConfig {
        tau_d: 9e-8,
        ..Default::default()
    };
    let MergedComponents {
        components: c,
        map,
        passes,
        merges,
        ..
    } = merge_components(&comps, &[0.2; 5], &[], false, &cfg).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(merges, 4);
    assert!(passes >= 3);
    assert!(map.iter().all(|&m| m == 0));
}

fn corrupted_plans(plan: &SharingPlan) -> Vec<(&'static str, SharingPlan)> {
    let mut v = Vec::new();
    let shared = plan
        .fates
        .iter()
        .position(|f| matches!(f, WeightFate::Shared(_)))
        .unwrap();
    let ell = plan
        .fates
        .iter()
        .position(|f| matches!(f, WeightFate::Ellipse(_)))
        .unwrap();
    let mut p = plan.clone();
    p.fates[shared] = WeightFate::Shared(plan.k() as u32);
    v.push(("component out of range", p));
    let mut p = plan.clone();
    p.fates[ell] = WeightFate::Ellipse(plan.ellipses.len() as u32);
    v.push(("ellipse out of range", p));
    let mut p = plan.clone();
    p.ellipses[0].alphas[0] += 0.1;
    v.push(("alphas", p));
    let mut p = plan.clone();
    p.ellipses[0].components[1] = p.ellipses[0].components[0];
    v.push(("duplicate", p));
    let mut p = plan.clone();
    p.ellipses[0].len = 1;
    v.push(("len", p));
    let mut p = plan.clone();
    p.codebook[0].count += 1;
    v.push(("count", p));
    let mut p = plan.clone();
    p.codebook[0].init_sigma = 0.0;
    v.push(("init sigma", p));
    let mut p = plan.clone();
    p.codebook[0].mixing_weight = f64::NAN;
    v.push(("mixing", p));
    let mut p = plan.clone();
    p.fates[ell] = WeightFate::Outlier(OutlierCause::Gradient);
    v.push(("unlinked ellipse", p));
    // Two weights pointing at each other's ellipse entries.
    let mut p = plan.clone();
    let (w0, w1) = (
        plan.ellipses[0].weight as usize,
        plan.ellipses[1].weight as usize,
    );
    p.fates.swap(w0, w1);
    v.push(("swapped link", p));
    let mut p = plan.clone();
    p.ellipses[0].alphas[4] = 0.5;
    p.ellipses[0].len = 3;
    v.push(("unused slot", p));
    v
}

#[test]
fn validate_catches_corrupted_plans() {
    let comps: Vec<Gaussian2> = (0..8)
        .map(|i| g(-0.05 + 0.015 * i as f64, 0.01, 3e-5, 2e-6))
        .collect();
    let (table, mut plan) = plan_for(&comps, &[300; 8], 7);
    for (p, f) in plan.fates.iter_mut().enumerate() {
        if p % 5 == 0
            && let WeightFate::Shared(k) = f
        {
            *k = (*k + 4) % 8;
        }
    }
    plan.recount();
    detect_ellipses(&mut plan, &table, &EllipseConfig::default()).unwrap();
    plan.validate().unwrap();
    assert!(!plan.ellipses.is_empty());
    for (what, bad) in corrupted_plans(&plan) {
        assert!(bad.validate().is_err(), "not caught: {what}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn merging_never_increases_k_and_keeps_plans_valid(
        seed in 0u64..1000,
        k in 2usize..40,
        tau_d in prop_oneof![Just(1.5e-7), Just(1e-3), Just(1e-2), Just(0.1)],
        rule in prop_oneof![Just(MergeRule::Paper), Just(MergeRule::W2Barycenter), Just(MergeRule::MomentMatch)],
    ) {
        let mut rng = SplitMix64::new(seed);
        let comps: Vec<Gaussian2> = (0..k)
            .map(|_| g(0.05 * rng.normal(), 0.01 + 0.002 * rng.uniform(), 1e-6 + 1e-5 * rng.uniform(), 1e-8 + 1e-7 * rng.uniform()))
            .collect();
        let (table, mut plan) = plan_for(&comps, &vec![20; k], seed);
        detect_ellipses(&mut plan, &table, &EllipseConfig::default()).unwrap();
        let before = plan.counts();
        let cfg = MergeConfig { tau_d, rule, ..Default::default() };
        let out = merge_gaussians(&mut plan, &table, &cfg).unwrap();
        prop_assert!(out.k_after <= out.k_before);
        prop_assert_eq!(out.k_before - out.k_after, out.merges);
        prop_assert!(plan.validate().is_ok());
        let after = plan.counts();
        prop_assert_eq!(before.total, after.total);
        prop_assert_eq!(before.plain_shared + before.ellipse, after.plain_shared + after.ellipse);
        let total_mix: f64 = plan.codebook.iter().map(|e| e.mixing_weight).sum();
        prop_assert!((total_mix - 1.0).abs() < 1e-9);
        // A second run merges nothing new under the same criteria... unless merged Gaussians
        // moved close to others, which the first run's last pass already ruled out.
        let again = merge_gaussians(&mut plan, &table, &cfg).unwrap();
        prop_assert_eq!(again.merges, 0);
    }
}
