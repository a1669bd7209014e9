//! Known values computed independently with numpy/scipy/mpmath by `reference/make_values.py`
//! (stored in `reference/values.json`).

use gauss2d::{
    Gaussian2, Matrix2, MergeRule, Vector2, chi2_2_quantile, kl, kl_normal_1d, merge_paper,
    merge_paper_weighted, merge_weighted, moment_match, sqrtm_spd, w2, w2_barycenter, w2_sq,
};
use serde_json::Value;

const VALUES: &str = include_str!("reference/values.json");

fn values() -> Value {
    serde_json::from_str(VALUES).expect("values.json parses")
}

fn f(v: &Value) -> f64 {
    v.as_f64().expect("number")
}

fn vec2(v: &Value) -> Vector2<f64> {
    Vector2::new(f(&v[0]), f(&v[1]))
}

fn mat2(v: &Value) -> Matrix2<f64> {
    Matrix2::new(f(&v[0][0]), f(&v[0][1]), f(&v[1][0]), f(&v[1][1]))
}

fn gaussian(v: &Value, name: &str) -> Gaussian2 {
    let g = &v["gaussians"][name];
    Gaussian2::new(vec2(&g["mean"]), mat2(&g["cov"])).expect("valid reference Gaussian")
}

fn assert_close(actual: f64, expected: f64, rel: f64, what: &str) {
    let tol = rel * expected.abs().max(1e-300) + 1e-15;
    assert!(
        (actual - expected).abs() <= tol,
        "{what}: got {actual:e}, expected {expected:e} (tol {tol:e})"
    );
}

fn assert_gaussian(actual: &Gaussian2, expected: &Value, rel: f64, what: &str) {
    let m = vec2(&expected["mean"]);
    let c = mat2(&expected["cov"]);
    let scale = c.amax().max(m.amax());
    assert!(
        (actual.mean() - m).amax() <= rel * scale,
        "{what}: mean {:?} vs {m:?}",
        actual.mean()
    );
    assert!(
        (actual.cov() - c).amax() <= rel * c.amax(),
        "{what}: cov {:?} vs {c:?}",
        actual.cov()
    );
}

#[test]
fn densities_mahalanobis_log_det_sqrtm() {
    let v = values();
    for case in v["density"].as_array().unwrap() {
        let name = case["g"].as_str().unwrap();
        let g = gaussian(&v, name);
        let x = vec2(&case["x"]);
        let what = format!("{name} at {x:?}");
        assert_close(
            g.mahalanobis_sq(&x),
            f(&case["mahalanobis_sq"]),
            1e-11,
            &what,
        );
        assert_close(g.log_pdf(&x), f(&case["log_pdf"]), 1e-11, &what);
        assert_close(g.pdf(&x), f(&case["pdf"]), 1e-10, &what);
    }
    for (name, ld) in v["log_det"].as_object().unwrap() {
        assert_close(gaussian(&v, name).log_det(), f(ld), 1e-12, name);
        let r = sqrtm_spd(&gaussian(&v, name).cov()).unwrap();
        let expected = mat2(&v["sqrtm"][name]);
        assert!(
            (r - expected).amax() <= 1e-12 * expected.amax(),
            "sqrtm {name}"
        );
    }
}

#[test]
fn w2_kl_and_paper_merge_of_pairs() {
    let v = values();
    for case in v["pairs"].as_array().unwrap() {
        let (an, bn) = (case["a"].as_str().unwrap(), case["b"].as_str().unwrap());
        let (a, b) = (gaussian(&v, an), gaussian(&v, bn));
        let what = format!("({an}, {bn})");
        let expected_w2 = f(&case["w2_sq"]);
        if expected_w2 == 0.0 {
            assert!(w2_sq(&a, &b) < 1e-14, "{what}");
        } else {
            assert_close(w2_sq(&a, &b), expected_w2, 1e-11, &what);
        }
        let expected_kl = f(&case["kl"]);
        if expected_kl == 0.0 {
            assert!(kl(&a, &b) < 1e-14, "{what}");
        } else {
            assert_close(kl(&a, &b), expected_kl, 1e-10, &what);
        }
        assert_gaussian(&merge_paper(&a, &b).unwrap(), &case["paper"], 1e-12, &what);
    }
}

#[test]
fn weighted_paper_merge() {
    let v = values();
    for case in v["weighted_pairs"].as_array().unwrap() {
        let a = gaussian(&v, case["a"].as_str().unwrap());
        let b = gaussian(&v, case["b"].as_str().unwrap());
        let (w1, w2) = (f(&case["w1"]), f(&case["w2"]));
        let merged = merge_paper_weighted(w1, &a, w2, &b).unwrap();
        assert_gaussian(&merged, &case["paper"], 1e-12, &format!("{case}"));
        let via_rule = MergeRule::Paper.merge_pair(w1, &a, w2, &b).unwrap();
        assert_eq!(merged, via_rule);
    }
}

#[test]
fn barycenter_and_moment_matching_of_sets() {
    let v = values();
    for case in v["sets"].as_array().unwrap() {
        let items: Vec<(f64, Gaussian2)> = case["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|it| (f(&it[0]), gaussian(&v, it[1].as_str().unwrap())))
            .collect();
        let what = format!("{}", case["items"]);
        let bary = w2_barycenter(&items).unwrap();
        assert_gaussian(&bary, &case["barycenter"], 1e-8, &what);
        assert_eq!(
            bary,
            merge_weighted(MergeRule::W2Barycenter, &items).unwrap()
        );
        let mm = moment_match(&items).unwrap();
        assert_gaussian(&mm, &case["moment"], 1e-12, &what);
        assert_eq!(mm, merge_weighted(MergeRule::MomentMatch, &items).unwrap());
    }
}

/// The paper's rule is not the W2 barycentre: measure the W2 distance between the two results.
#[test]
fn paper_rule_vs_barycenter_gap() {
    let v = values();
    for case in v["pairs"].as_array().unwrap() {
        let a = gaussian(&v, case["a"].as_str().unwrap());
        let b = gaussian(&v, case["b"].as_str().unwrap());
        let paper = merge_paper(&a, &b).unwrap();
        let bary = w2_barycenter(&[(1.0, a), (1.0, b)]).unwrap();
        let gap = f(&case["w2_paper_vs_barycenter"]);
        assert_close(w2(&paper, &bary), gap, 1e-7, &format!("{case}"));
        assert!(gap > 0.3, "the two rules differ substantially: {gap}");
    }
    // Equal covariances S, means d apart: barycentre N(m, S), paper N(m, 1.5 S + d d^T / 8).
    let (e, ff) = (gaussian(&v, "E"), gaussian(&v, "F"));
    let s = e.cov();
    let d = e.mean() - ff.mean();
    let bary = w2_barycenter(&[(1.0, e), (1.0, ff)]).unwrap();
    assert!((bary.cov() - s).amax() < 1e-12);
    let paper = merge_paper(&e, &ff).unwrap();
    assert!((paper.cov() - (s * 1.5 + d * d.transpose() / 8.0)).amax() < 1e-14);
    assert_close(w2(&paper, &bary), 0.551_672_645_361_391_6, 1e-7, "E/F gap");
}

/// The paper's geometric-mean term makes the rule asymmetric for non-commuting covariances.
#[test]
fn paper_rule_is_asymmetric_for_non_commuting_covariances() {
    let v = values();
    let (a, b) = (gaussian(&v, "A"), gaussian(&v, "B"));
    let ab = merge_paper(&a, &b).unwrap();
    let ba = merge_paper(&b, &a).unwrap();
    assert_eq!(ab.mean(), ba.mean());
    assert_close(ab.cov().trace(), ba.cov().trace(), 1e-13, "trace");
    let diff = (ab.cov() - ba.cov()).amax();
    assert!(
        diff > 0.02,
        "python: |cov(A,B) - cov(B,A)|_max = 0.0245; got {diff}"
    );
}

#[test]
fn kl_1d_and_chi2_quantiles() {
    let v = values();
    for case in v["kl_1d"].as_array().unwrap() {
        let a = &case["args"];
        let got = kl_normal_1d(f(&a[0]), f(&a[1]), f(&a[2]), f(&a[3])).unwrap();
        assert_close(got, f(&case["kl"]), 1e-9, &format!("{a}"));
    }
    for case in v["chi2_2"].as_array().unwrap() {
        let p = f(&case["p"]);
        assert_close(
            chi2_2_quantile(p).unwrap(),
            f(&case["q"]),
            1e-12,
            &format!("p = {p}"),
        );
    }
}
