//! Known-value tests against numbers computed independently with numpy / scikit-learn by
//! `tests/reference/make_values.py` (inputs and outputs stored in `tests/reference/values.json`).

use bnn_metrics::{
    EvalSummary, McPredictive, OodScore, OodSummary, Probabilities, accuracy, auroc,
    average_precision, brier, ece, ece_with_bins, fpr_at_tpr, mce, mce_with_bins, nll,
    predictive_entropy, reliability_diagram, roc_curve,
};
use serde_json::Value;

const TOL: f64 = 1e-6;

fn values() -> Value {
    serde_json::from_str(include_str!("reference/values.json")).expect("valid JSON")
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| match x {
            Value::String(s) if s == "inf" => f64::INFINITY,
            x => x.as_f64().expect("number"),
        })
        .collect()
}

fn f32s(v: &Value) -> Vec<f32> {
    // The JSON holds float32 values printed exactly as float64, so this cast is lossless.
    f64s(v).into_iter().map(|x| x as f32).collect()
}

fn usize_of(v: &Value) -> usize {
    v.as_u64().expect("integer") as usize
}

fn close(what: &str, got: f64, want: f64) {
    assert!(
        (got - want).abs() <= TOL,
        "{what}: got {got}, want {want} (diff {})",
        (got - want).abs()
    );
}

fn close_all(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        close(&format!("{what}[{i}]"), *g, *w);
    }
}

#[test]
fn classification_and_calibration() {
    let v = values();
    let c = &v["classification"];
    let (n, k) = (usize_of(&c["n"]), usize_of(&c["classes"]));
    let p = Probabilities::new(f32s(&c["probs"]), n, k).unwrap();
    let labels: Vec<i64> = c["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();

    close(
        "accuracy",
        accuracy(&p, &labels).unwrap(),
        c["accuracy"].as_f64().unwrap(),
    );
    close("nll", nll(&p, &labels).unwrap(), c["nll"].as_f64().unwrap());
    close(
        "brier",
        brier(&p, &labels).unwrap(),
        c["brier"].as_f64().unwrap(),
    );
    close(
        "ece15",
        ece(&p, &labels).unwrap(),
        c["ece15"].as_f64().unwrap(),
    );
    close(
        "mce15",
        mce(&p, &labels).unwrap(),
        c["mce15"].as_f64().unwrap(),
    );
    close(
        "ece10",
        ece_with_bins(&p, &labels, 10).unwrap(),
        c["ece10"].as_f64().unwrap(),
    );
    close(
        "mce10",
        mce_with_bins(&p, &labels, 10).unwrap(),
        c["mce10"].as_f64().unwrap(),
    );
    close_all("entropy", &predictive_entropy(&p), &f64s(&c["entropy"]));

    let d = reliability_diagram(&p, &labels, 15).unwrap();
    let bins = c["bins15"].as_array().unwrap();
    assert_eq!(d.bins.len(), bins.len());
    for (b, (got, want)) in d.bins.iter().zip(bins).enumerate() {
        assert_eq!(got.count, usize_of(&want["count"]), "bin {b} count");
        close(
            "bin conf",
            got.mean_confidence,
            want["mean_confidence"].as_f64().unwrap(),
        );
        close("bin acc", got.accuracy, want["accuracy"].as_f64().unwrap());
        close("bin lower", got.lower, b as f64 / 15.0);
        close("bin upper", got.upper, (b + 1) as f64 / 15.0);
    }
    // The one-hot rows have confidence exactly 1.0 and must land in the top bin.
    assert!(d.bins[14].count >= 6);

    let s = EvalSummary::compute(&p, &labels).unwrap();
    assert_eq!(s.n, n);
    close(
        "summary accuracy",
        s.accuracy,
        c["accuracy"].as_f64().unwrap(),
    );
    close("summary nll", s.nll, c["nll"].as_f64().unwrap());
    close("summary ece", s.ece, c["ece15"].as_f64().unwrap());
    close("summary mce", s.mce, c["mce15"].as_f64().unwrap());
    close("summary brier", s.brier, c["brier"].as_f64().unwrap());
    // Round-trips through serde.
    let json = serde_json::to_string(&s).unwrap();
    assert_eq!(serde_json::from_str::<EvalSummary>(&json).unwrap(), s);
}

#[test]
fn monte_carlo_predictive() {
    let v = values();
    let m = &v["mc"];
    let (s, n, k) = (
        usize_of(&m["samples"]),
        usize_of(&m["n"]),
        usize_of(&m["classes"]),
    );
    let logits = f32s(&m["logits"]);
    let pred =
        McPredictive::collect_logits(n, k, s, |i| logits[i * n * k..(i + 1) * n * k].to_vec())
            .unwrap();
    assert_eq!(pred.n_samples(), s);
    let probs: Vec<f64> = pred
        .probabilities()
        .as_slice()
        .iter()
        .map(|&x| f64::from(x))
        .collect();
    close_all("mean probs", &probs, &f64s(&m["mean_probs"]));
    close_all("entropy", pred.entropy(), &f64s(&m["entropy"]));
    close_all(
        "mi",
        pred.mutual_information().unwrap(),
        &f64s(&m["mutual_information"]),
    );
    close_all(
        "expected entropy",
        &pred.expected_entropy().unwrap(),
        &f64s(&m["expected_entropy"]),
    );
}

fn check_ood(name: &str, case: &Value, got: &OodSummary) {
    close(
        &format!("{name} auroc"),
        got.auroc,
        case["auroc"].as_f64().unwrap(),
    );
    close(
        &format!("{name} aupr_in"),
        got.aupr_in,
        case["aupr_in"].as_f64().unwrap(),
    );
    close(
        &format!("{name} aupr_out"),
        got.aupr_out,
        case["aupr_out"].as_f64().unwrap(),
    );
    close(
        &format!("{name} fpr85"),
        got.fpr_at_85_tpr,
        case["fpr_at_85_tpr"].as_f64().unwrap(),
    );
    close(
        &format!("{name} fpr95"),
        got.fpr_at_95_tpr,
        case["fpr_at_95_tpr"].as_f64().unwrap(),
    );
}

#[test]
fn ood_from_scores_with_and_without_ties() {
    let v = values();
    for name in ["ood_ties", "ood_no_ties"] {
        let c = &v[name];
        let (a, b) = (f64s(&c["in_scores"]), f64s(&c["out_scores"]));
        check_ood(name, c, &OodSummary::from_scores(&a, &b).unwrap());
        close(
            "auroc fn",
            auroc(&a, &b).unwrap(),
            c["auroc"].as_f64().unwrap(),
        );
        close(
            "ap fn",
            average_precision(&a, &b).unwrap(),
            c["aupr_in"].as_f64().unwrap(),
        );
        close(
            "fpr fn",
            fpr_at_tpr(&a, &b, 0.95).unwrap(),
            c["fpr_at_95_tpr"].as_f64().unwrap(),
        );
        let roc = roc_curve(&a, &b).unwrap();
        close_all("roc fpr", &roc.fpr, &f64s(&c["roc_fpr"]));
        close_all("roc tpr", &roc.tpr, &f64s(&c["roc_tpr"]));
        let want_t = f64s(&c["roc_thresholds"]);
        assert_eq!(roc.thresholds.len(), want_t.len());
        assert_eq!(roc.thresholds[0], f64::INFINITY);
        close_all("roc thresholds", &roc.thresholds[1..], &want_t[1..]);
    }
}

#[test]
fn ood_from_probabilities() {
    let v = values();
    let c = &v["ood_probs"];
    let k = usize_of(&c["classes"]);
    let a = Probabilities::new(f32s(&c["in_probs"]), usize_of(&c["n_in"]), k).unwrap();
    let b = Probabilities::new(f32s(&c["out_probs"]), usize_of(&c["n_out"]), k).unwrap();
    let got = OodSummary::from_probabilities(&a, &b, OodScore::MaxProb).unwrap();
    check_ood("max_prob", &c["max_prob"], &got);
    let got = OodSummary::from_probabilities(&a, &b, OodScore::Entropy).unwrap();
    check_ood("entropy", &c["entropy"], &got);
}
