//! `swbnn compress --auto` on a small synthetic task: the search keeps a smaller file than the
//! configured K gives, never one outside its margins on validation, and names every
//! candidate in the search file; bad requests are refused before any work.

use std::path::Path;

mod common;
use common::cli::swbnn;
use common::npz_fixture::write_image_npz;

fn ok(args: &[&str]) -> String {
    let o = swbnn(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{args:?} failed: {err}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn refused(args: &[&str], needles: &[&str]) -> String {
    let o = swbnn(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{args:?} succeeded");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: `{n}` not in: {err}");
    }
    err
}

/// A Bayesian MLP trained on 1,700 synthetic 8 x 8 images (600 held out for validation).
fn trained(dir: &Path) -> (String, String) {
    let file = dir.join("mine.npz");
    write_image_npz(&file, 1700, 200, 8);
    let dataset = format!("npz:{}", file.display());
    let p = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let common = ["--validation", "600", "--threads", "2", "--epochs", "2"];
    let det = p("det");
    let bnn = p("bnn");
    for (kind, out, from) in [
        ("deterministic", &det, None),
        ("bayesian", &bnn, Some(&det)),
    ] {
        let mut args = vec![
            "train",
            "--dataset",
            &dataset,
            "--arch",
            "mlp",
            "--kind",
            kind,
            "--out",
            out,
        ];
        if let Some(f) = from {
            args.extend(["--from", f]);
        }
        args.extend(common);
        ok(&args);
    }
    (dataset, bnn)
}

const CONFIG: &str = r#"{"sharing": {"gmm": {"k": 64}}, "retrain": {"epochs": 2}}"#;

#[test]
fn the_search_keeps_a_smaller_file_within_its_margins_and_names_every_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let (dataset, bnn) = trained(dir.path());
    let config = dir.path().join("c.json");
    std::fs::write(&config, CONFIG).unwrap();
    let out = dir.path().join("m.swb");
    let args = [
        "--json",
        "compress",
        "--model",
        &bnn,
        "--dataset",
        &dataset,
        "--config",
        config.to_str().unwrap(),
        "--validation",
        "600",
        "--auto",
        "--samples",
        "8",
        "--out",
        out.to_str().unwrap(),
    ];
    // Another validation split than the model held out would judge on its training images.
    let mut other: Vec<&str> = args.to_vec();
    let v = other.iter().position(|a| *a == "600").unwrap();
    other[v] = "700";
    refused(&other, &["held out 600", "--validation 700", "trained on"]);
    assert!(!out.exists());
    let printed: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
    let search_path = dir.path().join("m.search.json");
    let search: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&search_path).unwrap()).unwrap();
    assert_eq!(printed, search, "the printed report is the file's");
    let candidates = search["candidates"].as_array().unwrap();
    // K = 32 and 64, 2DGBNN and 1-D sharing, f32 and int8 outliers; three quantised BNNs.
    let name = |c: &serde_json::Value| {
        (
            c["method"].as_str().unwrap().to_string(),
            c["k"].as_u64(),
            c["int8_outliers"].as_bool().unwrap(),
            c["sigma_bits"].as_u64(),
        )
    };
    let mut names: Vec<_> = candidates.iter().map(name).collect();
    names.sort();
    let mut want = Vec::new();
    for m in ["2dgbnn", "mu-only"] {
        for k in [32, 64] {
            for int8 in [false, true] {
                want.push((m.to_string(), Some(k), int8, None));
            }
        }
    }
    for b in [1, 2, 8] {
        want.push(("qbnn".to_string(), None, false, Some(b)));
    }
    want.sort();
    assert_eq!(names, want, "every candidate is named once");

    assert_eq!(search["within_margins"], true, "{search:#}");
    let i = search["written"].as_u64().unwrap() as usize;
    let chosen = &candidates[i];
    assert_eq!(chosen["verdict"], "chosen");
    let bytes = chosen["bytes"].as_u64().unwrap();
    assert_eq!(std::fs::metadata(&out).unwrap().len(), bytes);
    // Smaller than the configured K's 2DGBNN file.
    let default_k = candidates
        .iter()
        .find(|c| c["method"] == "2dgbnn" && c["k"] == 64 && c["int8_outliers"] == false)
        .unwrap();
    assert!(
        bytes < default_k["bytes"].as_u64().unwrap(),
        "{chosen:#} against {default_k:#}"
    );
    // Within every margin on validation, as recorded.
    let (src, v, m) = (
        &search["source"],
        &chosen["validation"],
        &search["config"]["margins"],
    );
    let f = |x: &serde_json::Value, k: &str| x[k].as_f64().unwrap();
    assert!(f(v, "accuracy") >= f(src, "accuracy") - f(m, "accuracy_points") / 100.0);
    assert!(f(v, "nll") <= f(src, "nll") + f(m, "nll"));
    assert!(f(v, "ece") <= f(src, "ece") + f(m, "ece"));
    assert!(f(v, "ood_auroc") >= f(src, "ood_auroc") - f(m, "ood_auroc"));
    // Every smaller candidate that was judged is outside a margin (larger ones may be judged
    // too: steps of the bisection).
    for c in candidates {
        let b = c["bytes"].as_u64().unwrap();
        if c["validation"].is_null() {
            continue;
        }
        if b < bytes {
            assert!(c["verdict"].get("outside").is_some(), "{c:#}");
        }
    }
    // The file is a model every command reads.
    let ev = ok(&[
        "--json",
        "eval",
        out.to_str().unwrap(),
        "--dataset",
        &dataset,
    ]);
    assert!(ev.contains("accuracy"), "{ev}");

    // Margins of 0 that no candidate meets: the search file says why, no model is written,
    // and --force writes the nearest.
    let strict = dir.path().join("strict.swb");
    let mut strict_args: Vec<&str> = args.to_vec();
    let at = strict_args.len() - 2;
    strict_args.splice(
        at..,
        [
            "--margin-accuracy",
            "0",
            "--margin-nll",
            "0",
            "--margin-ece",
            "0",
            "--margin-ood-auroc",
            "0",
            "--out",
            strict.to_str().unwrap(),
        ],
    );
    let o = swbnn(&strict_args);
    let err = String::from_utf8_lossy(&o.stderr);
    let strict_search = dir.path().join("strict.search.json");
    if o.status.success() {
        // A candidate may match the source exactly on validation (a tie is within): then it
        // must be recorded as such.
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&strict_search).unwrap()).unwrap();
        assert_eq!(s["within_margins"], true);
    } else {
        assert!(
            err.contains("no candidate") && err.contains("--force"),
            "{err}"
        );
        assert!(strict_search.is_file(), "the search file is written");
        assert!(!strict.exists(), "no model is written without --force");
        strict_args.push("--force");
        ok(&strict_args);
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&strict_search).unwrap()).unwrap();
        assert_eq!(s["within_margins"], false);
        let i = s["written"].as_u64().unwrap() as usize;
        assert_eq!(s["candidates"][i]["verdict"], "nearest");
        assert!(strict.is_file());
    }
}

#[test]
fn contradictory_or_unusable_search_requests_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mine.npz");
    write_image_npz(&file, 300, 30, 8);
    let dataset = format!("npz:{}", file.display());
    let out = dir.path().join("m.swb");
    let out = out.to_str().unwrap();
    // The model directory does not exist: each refusal must come before it is read.
    let model = dir.path().join("no-model");
    let model = model.to_str().unwrap();
    let base = [
        "compress",
        "--model",
        model,
        "--dataset",
        &dataset,
        "--auto",
    ];
    let with = |extra: &[&'static str]| {
        let mut a: Vec<&str> = base.to_vec();
        a.extend(extra);
        a
    };
    refused(
        &[&with(&["--k", "50"])[..], &["--out", out]].concat(),
        &["--auto", "--k"],
    );
    refused(
        &[&with(&["--margin-nll=-0.1"])[..], &["--out", out]].concat(),
        &["--margin-nll", "finite and >= 0"],
    );
    refused(
        &[&with(&["--margin-ece", "NaN"])[..], &["--out", out]].concat(),
        &["--margin-ece"],
    );
    refused(
        &[&with(&["--validation", "0"])[..], &["--out", out]].concat(),
        &["--validation 0"],
    );
    refused(
        &[&with(&["--validation", "100"])[..], &["--out", out]].concat(),
        &["--validation 100", "500"],
    );
    refused(&with(&["--out", "-"]), &["--out", "not `-`"]);
    // A margin without --auto.
    refused(
        &[
            "compress",
            "--model",
            model,
            "--dataset",
            &dataset,
            "--margin-nll",
            "0.1",
            "--out",
            out,
        ],
        &["--auto"],
    );
    assert!(!Path::new(out).exists());
}
