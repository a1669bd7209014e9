//! Regression through every command: a CSV table and a `.npz` with floating-point targets,
//! made here, go through train (deterministic, then Bayesian from it), compress, calibrate
//! (conformal intervals) and eval; bad tables are refused, naming the file, row and column,
//! before any work.

use std::path::Path;

mod common;
use common::cli::{ok, refused};
use common::table_fixture::{rows, write_csv, write_regression_npz};

/// The method on `dataset` (train, BNN, compress, conformal calibration, eval); returns the
/// compressed model's `eval --json`.
fn whole_method(dir: &Path, dataset: &str, train_extra: &[&str]) -> serde_json::Value {
    let p = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (det, bnn, swb) = (p("det"), p("bnn"), p("m.swb"));
    let common = ["--validation", "150", "--threads", "2"];
    for (kind, out, extra) in [
        ("deterministic", &det, vec!["--epochs", "4"]),
        (
            "bayesian",
            &bnn,
            vec!["--epochs", "4", "--from", det.as_str()],
        ),
    ] {
        let mut args = vec![
            "train",
            "--dataset",
            dataset,
            "--arch",
            "mlp",
            "--kind",
            kind,
            "--out",
            out,
        ];
        args.extend(extra);
        args.extend(common);
        args.extend(train_extra);
        ok(&args);
    }
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("bnn/config.json")).unwrap())
            .unwrap();
    assert_eq!(config["head"]["gaussian"]["targets"], 1, "{config}");
    let tabular = &config["tabular"];
    assert_eq!(tabular["feature_names"].as_array().unwrap().len(), 2);
    // The targets' mean is measured on the training rows: near the 50 they are made around.
    let mean = tabular["target_mean"][0].as_f64().unwrap();
    assert!((mean - 50.0).abs() < 1.0, "{tabular}");
    ok(&[
        "compress",
        "--model",
        &bnn,
        "--dataset",
        dataset,
        "--out",
        &swb,
        "--k",
        "8",
        "--epochs",
        "1",
        "--validation",
        "150",
    ]);
    ok(&[
        "calibrate",
        &swb,
        "--dataset",
        dataset,
        "--conformal",
        "0.9",
        "--samples",
        "8",
    ]);
    let (out, _) = ok(&[
        "--json",
        "eval",
        &swb,
        "--dataset",
        dataset,
        "--samples",
        "8",
    ]);
    // The reliability figure of a regression network: observed against nominal coverage.
    let figure = p("coverage.svg");
    ok(&[
        "plot",
        "coverage",
        &swb,
        "--dataset",
        dataset,
        "--samples",
        "4",
        "--out",
        &figure,
    ]);
    let svg = std::fs::read_to_string(&figure).unwrap();
    assert!(
        svg.contains("nominal level") && svg.contains("2DGBNN"),
        "{svg}"
    );
    serde_json::from_str(&out).unwrap()
}

/// Asserts what every table's evaluation holds: metrics in the user's units (an RMSE of a few
/// units, not the tens of a model that forgot the targets' mean), intervals widening with the
/// level, and the conformal intervals' level, coverage and width.
fn check_evaluation(ev: &serde_json::Value) {
    let reg = &ev["regression"];
    assert!(ev["evaluation"].is_null(), "{ev}");
    let rmse = reg["rmse"].as_f64().unwrap();
    assert!(rmse.is_finite() && rmse < 10.0, "{reg}");
    for key in ["gaussian_nll", "crps", "pit_calibration_error"] {
        assert!(reg[key].as_f64().unwrap().is_finite(), "{key}: {reg}");
    }
    let widths: Vec<f64> = reg["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["mean_width"].as_f64().unwrap())
        .collect();
    assert_eq!(widths.len(), 3);
    assert!(widths[0] < widths[1] && widths[1] < widths[2], "{widths:?}");
    assert_eq!(reg["reliability"].as_array().unwrap().len(), 19);
    let c = &ev["conformal"];
    assert_eq!(c["level"], 0.9, "{ev}");
    assert_eq!(c["method"], "normalized_interval");
    let coverage = c["coverage"].as_f64().unwrap();
    // 200 test rows: the 0.9 intervals cover 0.9 give or take a few standard errors
    // (sqrt(0.09 / 200) = 0.021).
    assert!((0.8..=0.98).contains(&coverage), "{c}");
    assert!(c["mean_width"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_csv_table_goes_through_the_whole_method() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (dir.path().join("train.csv"), dir.path().join("test.csv"));
    write_csv(&train, &rows(900, 1));
    write_csv(&test, &rows(200, 2));
    let dataset = format!("csv:{},test={}", train.display(), test.display());
    let ev = whole_method(dir.path(), &dataset, &["--target", "price"]);
    check_evaluation(&ev);
    assert_eq!(ev["regression"]["target_names"][0], "price");
}

#[test]
fn a_npz_of_float_targets_goes_through_the_whole_method_homoscedastic() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("table.npz");
    write_regression_npz(&file, &rows(900, 3), &rows(200, 4));
    let dataset = format!("npz:{}", file.display());
    let ev = whole_method(dir.path(), &dataset, &["--noise", "homoscedastic"]);
    check_evaluation(&ev);
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("det/config.json")).unwrap())
            .unwrap();
    assert_eq!(config["head"]["gaussian"]["noise"], "homoscedastic");
}

/// Each bad table or request is an error before any training: the file, row and column
/// named where there is one; never a panic.
#[test]
fn bad_tables_and_requests_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let good = p("good.csv");
    write_csv(Path::new(&good), &rows(300, 5));
    let train = |dataset: &str, extra: &[&str]| {
        let mut args = vec![
            "train".to_string(),
            "--dataset".into(),
            dataset.to_string(),
            "--arch".into(),
            "mlp".into(),
            "--kind".into(),
            "deterministic".into(),
            "--epochs".into(),
            "1".into(),
            "--out".into(),
            p("never"),
        ];
        if !extra.contains(&"--validation") {
            args.extend(["--validation".to_string(), "50".into()]);
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let run = |args: Vec<String>, needles: &[&str]| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&refs, needles);
        assert!(!Path::new(&p("never")).join("model.bpk").exists());
    };
    let write = |name: &str, text: &str| {
        std::fs::write(p(name), text).unwrap();
        format!("csv:{}", p(name))
    };
    // A target that is not a column; no target; a NaN target; text; a missing cell.
    run(
        train(&format!("csv:{good}"), &["--target", "cost"]),
        &["cost", "price"],
    );
    run(train(&format!("csv:{good}"), &[]), &["--target"]);
    let nan = write("nan.csv", "x1,x2,price\n1,2,3\n1,2,nan\n");
    run(
        train(&nan, &["--target", "price"]),
        &["nan.csv", "line 3", "price"],
    );
    let text = write("text.csv", "x1,x2,price\n1,two,3\n");
    run(
        train(&text, &["--target", "price"]),
        &["text.csv", "line 2", "x2"],
    );
    let empty = write("empty.csv", "x1,x2,price\n1,,3\n");
    run(
        train(&empty, &["--target", "price"]),
        &["empty.csv", "line 2", "x2"],
    );
    // A constant target: nothing to learn, and no scale to standardise by.
    let mut flat = String::from("x1,x2,price\n");
    for i in 0..100 {
        flat.push_str(&format!("{i},{},7\n", i % 3));
    }
    let flat = write("flat.csv", &flat);
    run(train(&flat, &["--target", "price"]), &["price", "constant"]);
    // Options that do not fit the data set.
    run(
        train(
            &format!("csv:{good}"),
            &["--target", "price", "--validation", "400"],
        ),
        &["validation split of 400"],
    );
    refused(
        &[
            "train",
            "--dataset",
            &format!("csv:{good}"),
            "--target",
            "price",
            "--arch",
            "lenet5",
            "--kind",
            "deterministic",
            "--out",
            &p("never"),
        ],
        &["mlp"],
    );
}

/// A conformal level outside (0, 1), a validation split too small for the level, and a
/// regression network asked for a temperature: each refused, naming what to change.
#[test]
fn conformal_requests_that_cannot_hold_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let csv = p("t.csv");
    write_csv(Path::new(&csv), &rows(300, 6));
    let dataset = format!("csv:{csv}");
    let det = p("det");
    ok(&[
        "train",
        "--dataset",
        &dataset,
        "--target",
        "price",
        "--arch",
        "mlp",
        "--kind",
        "deterministic",
        "--epochs",
        "1",
        "--validation",
        "5",
        "--out",
        &det,
    ]);
    refused(
        &[
            "calibrate",
            &det,
            "--dataset",
            &dataset,
            "--conformal",
            "1.5",
        ],
        &["strictly between 0 and 1"],
    );
    refused(
        &[
            "calibrate",
            &det,
            "--dataset",
            &dataset,
            "--conformal",
            "0.9",
        ],
        &["at least 10 validation", "holds 5"],
    );
    refused(
        &["calibrate", &det, "--dataset", &dataset],
        &["regression network", "--conformal"],
    );
    refused(
        &["eval", &det, "--dataset", &dataset, "--calibrated"],
        &["no temperature"],
    );
    refused(&["eval", &det, "--dataset", &dataset], &["no test split"]);
}
