//! The whole of stages 1-2 on a synthetic 50k-weight table.

use swshare::synth::{SynthSpec, synthetic_table};
use swshare::*;

fn small_cfg() -> SwshareConfig {
    let mut cfg = SwshareConfig::default();
    cfg.gmm.k = 200;
    cfg.gmm.seed = 7;
    // A coarser fitting grid keeps the debug-build tests fast.
    cfg.gmm.histogram_resolution = 256;
    cfg
}

fn table() -> WeightTable {
    synthetic_table(&SynthSpec::default()).unwrap()
}

#[test]
fn counts_add_up() {
    let t = table();
    let (plan, r) = build_plan(&t, &small_cfg()).unwrap();
    plan.validate().unwrap();
    assert_eq!(r.total_weights, t.len());
    assert_eq!(r.shareable_weights, 50_000);
    assert_eq!(r.unshared_weights, 5 * 16);
    assert_eq!(r.total_weights, r.shareable_weights + r.unshared_weights);
    assert_eq!(
        r.outliers + r.plain_shared + r.ellipse_weights,
        r.shareable_weights
    );
    assert_eq!(
        r.outliers,
        r.outliers_mean_threshold + r.outliers_gradient + r.outliers_small_cluster
    );
    assert_eq!(plan.fates.len(), r.shareable_weights);
    // Every cause occurs on this table.
    assert!(r.outliers_mean_threshold > 0);
    // Gradient outliers: the top 1 % (500) |grad| weights that are not mean outliers
    // (ranked by a full sort here, independently of the library's selection).
    let mu_s = t.gather_shareable(t.mu());
    let g = t.gather_shareable(t.grad_mu().unwrap());
    let mut order: Vec<usize> = (0..g.len()).collect();
    order.sort_by(|&a, &b| g[b].abs().total_cmp(&g[a].abs()).then(a.cmp(&b)));
    let want_grad = order[..500]
        .iter()
        .filter(|&&p| mu_s[p].abs() <= 0.2)
        .count();
    assert_eq!(r.outliers_gradient, want_grad);
    assert!(want_grad > 400);
    assert!(r.ellipse_weights > 0);
    assert!(r.gradients_available);
    // Plain-shared counts per entry add up to plain_shared.
    let per_entry: usize = plan.codebook.iter().map(|e| e.count as usize).sum();
    assert_eq!(per_entry, r.plain_shared);
    assert!(r.gaussians_after_merge <= r.gaussians_before_merge);
    assert!(r.gaussians_before_merge <= r.gaussians_fitted);
    assert_eq!(r.gaussians_fitted, 200);
    assert_eq!(
        r.shared_model_params,
        2 * (r.gaussians_after_merge + r.outliers + r.unshared_weights)
    );
    assert_eq!(r.full_model_params, 2 * r.total_weights);
    assert!(r.compression_ratio > 0.9 && r.compression_ratio < 1.0);
    // Mean-threshold outliers are exactly the |mu| > 0.2 weights.
    let mu = t.gather_shareable(t.mu());
    let want = mu.iter().filter(|m| m.abs() > 0.2).count();
    assert_eq!(r.outliers_mean_threshold, want);
    // Report renders and serialises.
    let text = r.to_string();
    assert!(text.contains("Compression ratio"));
    let back: CompressionReport = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(back, r);
}

#[test]
fn small_clusters_with_large_n_min() {
    let t = table();
    let mut cfg = small_cfg();
    cfg.refine.n_min = 400;
    let (plan, r) = build_plan(&t, &cfg).unwrap();
    plan.validate().unwrap();
    assert!(r.outliers_small_cluster > 0);
    assert!(r.gaussians_before_merge < r.gaussians_fitted);
    assert_eq!(
        r.outliers + r.plain_shared + r.ellipse_weights,
        r.shareable_weights
    );
}

#[test]
fn deterministic() {
    let t = table();
    let cfg = small_cfg();
    let (a, ra) = build_plan(&t, &cfg).unwrap();
    let (b, rb) = build_plan(&t, &cfg).unwrap();
    assert_eq!(a, b);
    assert_eq!(ra.ellipse_weights, rb.ellipse_weights);
}

#[test]
fn merging_with_the_tables_tau_d_reduces_k() {
    let t = table();
    let mut cfg = small_cfg();
    cfg.refine.merge.tau_d = 1e-2;
    cfg.refine.merge.tau_v = Some(0.01);
    let (plan, r) = build_plan(&t, &cfg).unwrap();
    plan.validate().unwrap();
    assert!(r.gaussians_after_merge < r.gaussians_before_merge);
    assert!(r.merge_passes >= 2);
    assert_eq!(
        r.outliers + r.plain_shared + r.ellipse_weights,
        r.shareable_weights
    );
}

#[test]
fn k_larger_than_inliers_is_an_error() {
    let t = synthetic_table(&SynthSpec {
        n_shareable: 300,
        layers: 1,
        ..Default::default()
    })
    .unwrap();
    let mut cfg = small_cfg();
    cfg.gmm.k = 1000;
    assert!(matches!(
        build_plan(&t, &cfg),
        Err(SwshareError::TooFewInliers { k: 1000, .. })
    ));
}

#[test]
fn all_outliers_is_an_error_not_a_panic() {
    let mut b = WeightTableBuilder::new();
    b.push_layer("w", &[10], true, &[0.5; 10], &[0.01; 10], None);
    let t = b.build().unwrap();
    let mut cfg = small_cfg();
    cfg.gmm.k = 2;
    assert!(matches!(
        build_plan(&t, &cfg),
        Err(SwshareError::TooFewInliers { inliers: 0, .. })
    ));
}

#[test]
fn invalid_config_is_rejected() {
    let t = table();
    let mut cfg = small_cfg();
    cfg.refine.ellipse.k = 9;
    assert!(matches!(
        build_plan(&t, &cfg),
        Err(SwshareError::Config { .. })
    ));
}

#[test]
fn without_gradients_no_gradient_outliers() {
    let t = synthetic_table(&SynthSpec {
        gradients: false,
        n_shareable: 20_000,
        ..Default::default()
    })
    .unwrap();
    let (plan, r) = build_plan(&t, &small_cfg()).unwrap();
    plan.validate().unwrap();
    assert_eq!(r.outliers_gradient, 0);
    assert!(!r.gradients_available);
}
