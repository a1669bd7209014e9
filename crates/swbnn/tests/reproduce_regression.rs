//! `cargo xtask reproduce csv:... / npz:...` through the library: a table's recipe
//! ([`swbnn_harness::presets::table_setup`]) and [`swbnn_harness::reproduce`] on tables made
//! here, cut to seconds. The run directory holds the rows, the table over seeds, the report
//! and its coverage figure; a resumed run keeps the finished stages; a setup asking for what
//! the regression experiment does not run is refused, naming the field, before anything is
//! written.

use std::path::Path;

use bnn_data::DataSource;
use common::cli::{ok, refused};
use common::table_fixture::{rows, write_csv, write_regression_npz};
use swbnn_harness::experiment::Progress;
use swbnn_harness::regression::{RegressionReproduction, RegressionRow};
use swbnn_harness::setup::Setup;
use swbnn_harness::tables::{ReportContext, TablesConfig};
use swbnn_harness::{Reproduction, presets};

mod common;

/// Held by each run: burn's device generator is shared by the process, so two runs on
/// parallel test threads would draw each other's noise.
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Quiet;
impl bnn_train::Observer for Quiet {}
impl Progress for Quiet {}

/// A table's recipe for `source`, cut to seconds: few epochs and samples.
fn tiny_setup(source: &DataSource, targets: &[&str], out: &Path) -> Setup {
    let targets: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
    let mut setup = presets::setup_for_source(
        source,
        &targets,
        None,
        true,
        &swbnn_ops::data::OodSearch::from_env(Path::new(".")),
        out.to_path_buf(),
    )
    .unwrap();
    setup.deterministic.epochs = 4;
    setup.bbb.epochs = 3;
    setup.compress.retrain.epochs = 2;
    setup.samples = 8;
    setup
}

fn run(setup: &Setup, seeds: usize) -> Result<RegressionReproduction, swbnn_ops::Error> {
    let _turn = ONE_RUN_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let context = ReportContext {
        command: "test".into(),
        backend: "test".into(),
    };
    match swbnn_harness::reproduce(
        setup,
        &[],
        &TablesConfig::for_setup(setup),
        seeds,
        &bnn_layers::test_device(),
        &context,
        &mut Quiet,
    )? {
        Reproduction::Regression(r) => Ok(*r),
        _ => panic!("a table ran another experiment"),
    }
}

/// The rows of one seed: the three methods in order, finite metrics in the user's units, a
/// 2DGBNN smaller than its BBB, conformal intervals at 0.9.
fn check_rows(rows: &[RegressionRow]) {
    let methods: Vec<_> = rows.iter().map(|r| r.method.name()).collect();
    assert_eq!(methods, ["deterministic", "bbb", "2dgbnn"]);
    for r in rows {
        // The targets lie near 50: a model that forgot to bring its predictions back to the
        // user's units would miss by about that much.
        assert!(r.rmse.is_finite() && r.rmse < 10.0, "{r:?}");
        assert!(
            r.nll.is_finite() && r.crps.is_finite() && r.crps > 0.0,
            "{r:?}"
        );
        assert!((0.0..=1.0).contains(&r.coverage_90), "{r:?}");
        assert!((0.0..=1.0).contains(&r.conformal_coverage), "{r:?}");
        assert!(r.width_90 > 0.0 && r.conformal_width > 0.0, "{r:?}");
        assert_eq!(r.conformal_level, 0.9);
        assert_eq!(r.test_rows, 150);
        assert_eq!(r.reliability.len(), 19, "levels 0.05 to 0.95");
        assert!(r.bytes > 0 && r.parameters > 0, "{r:?}");
    }
    assert!(
        rows[2].parameters < rows[1].parameters / 2,
        "2DGBNN {} against BBB {}",
        rows[2].parameters,
        rows[1].parameters
    );
    assert!(
        rows[1].parameters > rows[0].parameters,
        "a mean and a rho each"
    );
}

#[test]
fn a_csv_table_runs_the_regression_experiment_and_resumes_its_stages() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (dir.path().join("train.csv"), dir.path().join("test.csv"));
    write_csv(&train, &rows(600, 11));
    write_csv(&test, &rows(150, 12));
    let source: DataSource = format!("csv:{},test={}", train.display(), test.display())
        .parse()
        .unwrap();
    let out = dir.path().join("run");
    let setup = tiny_setup(&source, &["price"], &out);
    // The table's recipe.
    assert_eq!(setup.arch, bnn_models::Arch::Mlp);
    assert_eq!(
        setup.mlp_hidden.as_deref(),
        Some(&presets::TABLE_MLP_HIDDEN[..])
    );
    assert_eq!(setup.compress.sharing.gmm.k, presets::TABLE_K);
    assert_eq!(setup.validation.size, 120, "a fifth of the training rows");
    assert_eq!(setup.targets, ["price"]);

    let done = run(&setup, 1).unwrap();
    assert_eq!(done.runs.len(), 1);
    check_rows(&done.runs[0]);
    assert_eq!(done.summaries.len(), 3);
    assert_eq!(done.table, out.join("regression.md"));
    assert_eq!(done.report, out.join("report.md"));
    for file in [
        "setup.json",
        "regression.md",
        "regression.json",
        "report.md",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let report = std::fs::read_to_string(&done.report).unwrap();
    assert!(
        report.contains("train.csv") && report.contains("figures/coverage.png"),
        "{report}"
    );
    assert!(out.join("figures/coverage.png").is_file());
    assert!(out.join("stages/2dgbnn/model.swb").is_file());
    // setup.json records the targets and reads back as the setup that ran.
    let back = swbnn_harness::store::read_setup(&out).unwrap();
    assert_eq!(back.targets, ["price"]);
    assert_eq!(back.dataset, source);

    // Resumed after the 2DGBNN stage lost its row: the deterministic and BBB rows are the
    // cached ones (their files untouched), and 2DGBNN runs again to the same numbers.
    let det_row = out.join("stages/deterministic/regression-row.json");
    let det_time = std::fs::metadata(&det_row).unwrap().modified().unwrap();
    std::fs::remove_file(out.join("stages/2dgbnn/regression-row.json")).unwrap();
    let resumed = Setup {
        resume: true,
        ..setup.clone()
    };
    let again = run(&resumed, 1).unwrap();
    assert_eq!(
        std::fs::metadata(&det_row).unwrap().modified().unwrap(),
        det_time
    );
    assert_eq!(again.runs, done.runs, "same seed, same numbers");
    // Resumed as another model: refused before any stage, naming what differs.
    let other = Setup {
        noise: Some(bnn_models::Noise::Homoscedastic),
        ..resumed.clone()
    };
    let e = run(&other, 1).unwrap_err().to_string();
    assert!(e.contains("cannot resume") && e.contains("noise"), "{e}");
    let wider = Setup {
        mlp_hidden: Some(vec![20]),
        ..resumed
    };
    let e = run(&wider, 1).unwrap_err().to_string();
    assert!(e.contains("mlp_hidden") && e.contains("[20]"), "{e}");
}

#[test]
fn settings_the_regression_experiment_does_not_run_are_refused_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.csv");
    write_csv(&train, &rows(200, 3));
    let source: DataSource = format!("csv:{}", train.display()).parse().unwrap();
    let out = dir.path().join("run");
    let base = tiny_setup(&source, &["price"], &out);

    let mut lr = base.clone();
    lr.deterministic.lr = 0.1;
    let mut corrupt = base.clone();
    corrupt.corruptions = bnn_data::Corruption::all();
    let mut wide = base.clone();
    wide.bayes.empirical_prior = !wide.bayes.empirical_prior;
    for (setup, field) in [
        (lr, "deterministic.lr"),
        (corrupt, "corruptions"),
        (wide, "bayes.empirical_prior"),
    ] {
        let e = run(&setup, 1).unwrap_err().to_string();
        assert!(e.contains(field) && e.contains("csv:"), "{field}: {e}");
        assert!(!out.exists(), "{field}: something was written");
    }
    // A CSV's targets are named; images take none.
    let e = presets::setup_for_source(
        &source,
        &[],
        None,
        true,
        &swbnn_ops::data::OodSearch::from_env(Path::new(".")),
        out.clone(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--target"), "{e}");
    // A table's network is the MLP: another architecture is refused in the words of that rule.
    let e = presets::setup_for_source(
        &source,
        &["price".to_string()],
        Some(bnn_models::Arch::Lenet5),
        true,
        &swbnn_ops::data::OodSearch::from_env(Path::new(".")),
        out.clone(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--arch mlp") && e.contains("lenet5"), "{e}");
    let mut images = base.clone();
    images.dataset = DataSource::Preset(bnn_data::DatasetId::FashionMnist);
    let e = images.check().unwrap_err().to_string();
    assert!(e.contains("--target") && e.contains("fashion-mnist"), "{e}");
}

#[test]
fn a_npz_of_float_targets_runs_over_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("table.npz");
    write_regression_npz(&file, &rows(600, 21), &rows(150, 22));
    let source: DataSource = format!("npz:{}", file.display()).parse().unwrap();
    let out = dir.path().join("run");
    let mut setup = tiny_setup(&source, &[], &out);
    setup.noise = Some(bnn_models::Noise::Homoscedastic);
    let done = run(&setup, 2).unwrap();
    assert_eq!(done.runs.len(), 2);
    for rows in &done.runs {
        check_rows(rows);
    }
    assert_ne!(done.runs[0], done.runs[1], "two seeds, two runs");
    assert!(done.summaries.iter().all(|s| s.seeds == 2));
    for i in 0..2 {
        let seed = out.join(format!("seed-{i}"));
        assert!(seed.join("regression.json").is_file() && seed.join("setup.json").is_file());
    }
    let table = std::fs::read_to_string(out.join("regression.md")).unwrap();
    assert!(table.contains(" ± "), "{table}");

    // `swbnn plot coverage` draws a seed's rows from the run; the image figures are refused.
    let run = out.to_str().unwrap();
    let figure = dir.path().join("seed-1.png");
    ok(&[
        "plot",
        "coverage",
        run,
        "--seed",
        "1",
        "--out",
        figure.to_str().unwrap(),
    ]);
    assert!(std::fs::metadata(&figure).unwrap().len() > 0);
    let other = dir.path().join("other.png");
    let other = other.to_str().unwrap();
    refused(
        &["plot", "coverage", run, "--seed", "2", "--out", other],
        &["--seed 2", "2 seed(s)"],
    );
    refused(
        &["plot", "reliability", run, "--out", other],
        &["regression table", "coverage"],
    );
}
