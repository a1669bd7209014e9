//! `cargo xtask reproduce npz:FILE` / `folder:DIR` through the library: the generic recipe
//! ([`swbnn::presets::setup_for_source`]) and [`swbnn::reproduce`] on a tiny `.npz` and tiny
//! class folders made here, with tiny epochs: the run directory holds the tables, the report
//! and its figures, and the evaluation ran; the paper's tables are refused for such data.

use std::path::Path;

use bnn_data::DataSource;
use common::npz_fixture::{images, write_image_npz as write_npz};
use swbnn::Reproduction;
use swbnn::experiment::Progress;
use swbnn::setup::Setup;
use swbnn::tables::{ReportContext, TableId, TablesConfig};

mod common;

struct Quiet;
impl bnn_train::Observer for Quiet {}
impl Progress for Quiet {}

/// Class folders `train/<class>/` and `test/<class>/` of PNG images under `root`.
fn write_folders(root: &Path, train: usize, test: usize, side: usize) {
    let names = ["circle", "cross", "square"];
    for (split, n, seed) in [("train", train, 1), ("test", test, 2)] {
        let (pixels, labels) = images(n, side, seed);
        for (i, &label) in labels.iter().enumerate() {
            let dir = root.join(split).join(names[label as usize]);
            std::fs::create_dir_all(&dir).unwrap();
            let img = image::GrayImage::from_raw(
                side as u32,
                side as u32,
                pixels[i * side * side..(i + 1) * side * side].to_vec(),
            )
            .unwrap();
            img.save(dir.join(format!("{i}.png"))).unwrap();
        }
    }
}

/// The generic recipe for `source`, cut to seconds: one epoch per stage, few samples, a
/// small GMM.
fn tiny_setup(source: &DataSource, out: &Path) -> Setup {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut setup = swbnn::presets::setup_for_source(
        source,
        &[],
        None,
        true,
        &swbnn::data::OodSearch::from_env(&root),
        out.to_path_buf(),
    )
    .unwrap();
    setup.deterministic.epochs = 1;
    setup.bbb.epochs = 1;
    setup.compress.retrain.epochs = 1;
    setup.samples = 2;
    setup.compress.sharing.gmm.k = 8;
    setup.compress.sharing.refine.n_min = 10;
    setup
}

fn run(setup: &Setup, tables: &[TableId]) -> Result<Reproduction, Box<swbnn::Error>> {
    let context = ReportContext {
        command: "test".into(),
        backend: "test".into(),
    };
    swbnn::reproduce(
        setup,
        tables,
        &TablesConfig::for_setup(setup),
        1,
        &bnn_layers::test_device(),
        &context,
        &mut Quiet,
    )
    .map_err(Box::new)
}

/// Checks a finished single-seed run in `out` and returns its report's text.
fn check_run(done: Reproduction, out: &Path) -> String {
    let Reproduction::Main { outcome, report } = done else {
        panic!("not the main experiment");
    };
    let methods: Vec<_> = outcome.rows.iter().map(|r| r.method.name()).collect();
    assert_eq!(methods, ["deterministic", "bbb", "2dgbnn"]);
    for r in &outcome.rows {
        assert!(
            (0.0..=1.0).contains(&r.accuracy),
            "{}: {}",
            r.method,
            r.accuracy
        );
        assert!(r.nll.is_finite() && (0.0..=1.0).contains(&r.ece), "{r:?}");
        assert!(r.ood_auroc.is_none(), "no OOD set was asked for");
    }
    assert_eq!(report, out.join("report.md"));
    for file in ["setup.json", "table.md", "table.json", "report.md"] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    assert!(out.join("lenet5-2dgbnn.swb").is_file());
    let figures = std::fs::read_dir(out.join("figures")).unwrap().count();
    assert!(figures > 0, "no figures");
    // The models record the normalisation measured on the training examples.
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("stages/deterministic/config.json")).unwrap(),
    )
    .unwrap();
    assert!(config["normalization"]["mean"].is_array(), "{config}");
    std::fs::read_to_string(out.join("report.md")).unwrap()
}

#[test]
fn reproduce_runs_the_experiment_and_its_report_on_a_users_npz() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shapes.npz");
    write_npz(&file, 240, 60, 16);
    let source: DataSource = format!("npz:{}", file.display()).parse().unwrap();
    let out = dir.path().join("run");
    let setup = tiny_setup(&source, &out);
    assert_eq!(setup.arch, bnn_models::Arch::Lenet5);
    assert_eq!(setup.validation.size, 24, "a tenth of the training split");

    // The paper's tables are a preset's: refused, naming the option, before anything runs.
    let e = run(&setup, &[TableId::Quant]).unwrap_err().to_string();
    assert!(e.contains("--tables") && e.contains("npz:"), "{e}");
    assert!(!out.exists());

    let report = check_run(run(&setup, &[]).unwrap(), &out);
    assert!(report.contains("shapes.npz"), "{report}");
    // setup.json records the data set as its text, and reads back.
    let back = swbnn::store::read_setup(&out).unwrap();
    assert_eq!(back.dataset, source);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("setup.json")).unwrap()).unwrap();
    assert_eq!(json["dataset"], source.to_string());
}

#[test]
fn reproduce_runs_on_class_folders_and_names_the_classes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("shapes");
    write_folders(&root, 120, 30, 12);
    let source = DataSource::Folder(root);
    let out = dir.path().join("run");
    let report = check_run(run(&tiny_setup(&source, &out), &[]).unwrap(), &out);
    assert!(report.contains("shapes"), "{report}");
}

#[test]
fn a_users_data_set_without_a_test_split_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("train-only.npz");
    write_npz(&file, 60, 0, 8);
    let source = DataSource::Npz(file);
    let out = dir.path().join("run");
    let e = run(&tiny_setup(&source, &out), &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("no test split") && e.contains("x_test"), "{e}");
}

/// `--ood heldout:CLASSES`: the held-out classes leave training, validation and the test rows
/// (the other classes relabelled from 0), and their test images are the OOD set.
#[test]
fn held_out_classes_become_the_ood_set() {
    use bnn_data::Dataset;

    let dir = tempfile::tempdir().unwrap();
    let npz = dir.path().join("shapes.npz");
    write_npz(&npz, 300, 90, 12);
    let source = DataSource::Npz(npz.clone());
    let mut setup = tiny_setup(&source, &dir.path().join("out"));
    setup.held_out_classes = vec![1];
    let data = swbnn::data::ExperimentData::open(&setup).unwrap();
    assert_eq!(data.train.classes(), 2);
    assert_eq!(data.test.classes(), 2);
    let (_, test_labels) = images(90, 12, 2);
    let held_out = test_labels.iter().filter(|&&l| l == 1).count();
    assert!(held_out > 0);
    assert_eq!(data.test.len(), 90 - held_out);
    let ood = data.ood_loader.as_ref().expect("the held-out images");
    assert_eq!(ood.dataset().len(), held_out);
    for d in [&data.train, &data.validation, &data.test] {
        for i in 0..d.len() {
            assert!(d.label(i).unwrap() < 2);
        }
    }
    assert!(data.data_sha256.contains_key("shapes.npz"));
    // Both a held-out set and another OOD set: an error naming both.
    setup.ood = Some((bnn_data::DatasetId::Mnist, dir.path().to_path_buf()));
    let e = swbnn::data::ExperimentData::open(&setup)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("[1]") && e.contains("mnist"), "{e}");
    // A class the data set does not have.
    setup.ood = None;
    setup.held_out_classes = vec![7];
    let e = swbnn::data::ExperimentData::open(&setup)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("held-out class 7"), "{e}");
}

/// A held-out run's report draws its figures on the classes the models learned: the figures
/// once read the whole test split, and the held-out classes' labels stopped the report.
#[test]
fn a_held_out_run_writes_its_report_and_figures() {
    let dir = tempfile::tempdir().unwrap();
    let npz = dir.path().join("shapes.npz");
    write_npz(&npz, 240, 60, 12);
    let source = DataSource::Npz(npz);
    let out = dir.path().join("run");
    let mut setup = tiny_setup(&source, &out);
    setup.held_out_classes = vec![1];
    let Reproduction::Main { outcome, report } = run(&setup, &[]).unwrap() else {
        panic!("not the main experiment");
    };
    assert!(
        outcome.rows.iter().all(|r| r.ood_auroc.is_some()),
        "the held-out class is the OOD set"
    );
    let text = std::fs::read_to_string(report).unwrap();
    assert!(text.contains("per-class-2dgbnn.png"), "{text}");
    assert!(out.join("figures/per-class-2dgbnn.png").is_file());
    // Its OOD set is the held-out class, and the report draws it as it draws a named one.
    assert!(text.contains("vs held-out classes (1)"), "{text}");
    assert!(text.contains("ood-2dgbnn.png"), "{text}");
    assert!(out.join("figures/ood-2dgbnn.png").is_file());
}
