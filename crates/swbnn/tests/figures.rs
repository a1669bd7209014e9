//! `swbnn plot` and the reproduction report on a tiny run (an MLP on 600 Fashion-MNIST images,
//! MNIST digits as the OOD set when present): every figure is drawn, as PNG and SVG, and the
//! report links the figures it wrote.

use std::path::{Path, PathBuf};

use bnn_data::DatasetId;
use models::Arch;
use swbnn::experiment::{self, Progress};
use swbnn::plot::{Figure, PlotArgs, SigmaScale};
use swbnn::report::{ReportOptions, write_report};

struct Quiet;
impl bnn_train::Observer for Quiet {}
impl Progress for Quiet {}

fn args(what: Figure, model: &Path, out: PathBuf) -> PlotArgs {
    PlotArgs {
        what,
        model: model.to_path_buf(),
        out,
        method: None,
        dataset: None,
        ood: None,
        ood_dir: None,
        data: None,
        subset: None,
        samples: Some(3),
        layer: None,
        after_retraining: false,
        max_ellipses: 20,
        sigma_axis: SigmaScale::Auto,
        width: None,
        height: None,
    }
}

#[test]
fn every_figure_of_a_tiny_run() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = tempfile::tempdir().unwrap();
    let dir = out.path();
    let mut setup = swbnn::presets::setup(
        DatasetId::FashionMnist,
        Some(Arch::Mlp),
        true,
        &root,
        dir.to_path_buf(),
    );
    setup.train_subset = Some(600);
    setup.test_subset = Some(200);
    setup.deterministic.epochs = 1;
    setup.bbb.epochs = 1;
    setup.retrain.epochs = 1;
    setup.samples = 3;
    setup.swshare.gmm.k = 16;
    setup.swshare.refine.n_min = 10;
    let device = bnn_layers::test_device();
    let outcome = experiment::run(&setup, &device, &mut Quiet).unwrap();
    experiment::write_tables(dir, &outcome).unwrap();
    let json = serde_json::to_string_pretty(&setup).unwrap();
    std::fs::write(dir.join("setup.json"), json).unwrap();
    assert!(dir.join(swbnn::run_dir::PLAN_FILE).is_file());

    let report = write_report(dir, &device, ReportOptions { corruptions: true }).unwrap();
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(
        text.contains("| mlp | 2dgbnn |"),
        "the table is in the report"
    );
    let mut linked = 0;
    for line in text.lines().filter(|l| l.starts_with("![")) {
        let file = line.split("](").nth(1).unwrap().trim_end_matches(')');
        let img = image::open(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(img.width() >= 1000, "{file} is {} px wide", img.width());
        linked += 1;
    }
    // Reliability, per class x 3, weights x 2, corruptions; OOD x 3 with the MNIST digits.
    let expected = if setup.ood.is_some() { 10 } else { 7 };
    assert_eq!(linked, expected, "{text}");

    // `swbnn plot` on the run directory, the .swb file and the BBB stage, PNG and SVG.
    let figs = tempfile::tempdir().unwrap();
    let swb = dir.join("mlp-2dgbnn.swb");
    let mut cases = vec![
        (Figure::Reliability, dir.to_path_buf(), "svg"),
        (Figure::PerClass, dir.to_path_buf(), "png"),
        (Figure::Weights, dir.to_path_buf(), "svg"),
        (Figure::Weights, swb.clone(), "png"),
        (Figure::Reliability, swb.clone(), "png"),
        (Figure::Corruptions, swb.clone(), "svg"),
    ];
    if setup.ood.is_some() {
        cases.push((Figure::Ood, dir.to_path_buf(), "png"));
    }
    for (i, (what, model, ext)) in cases.into_iter().enumerate() {
        let path = figs.path().join(format!("{i}.{ext}"));
        let mut a = args(what, &model, path.clone());
        if model == swb {
            a.dataset = Some(DatasetId::FashionMnist);
            a.subset = Some(100);
        }
        swbnn::plot::run(&a, &device).unwrap_or_else(|e| panic!("{what:?} {model:?}: {e}"));
        let bytes = std::fs::read(&path).unwrap();
        if ext == "png" {
            image::load_from_memory(&bytes).unwrap();
        } else {
            assert!(String::from_utf8(bytes).unwrap().starts_with("<svg"));
        }
    }

    // Clear errors: a layer that does not exist; a model file without its data set.
    let mut a = args(Figure::Weights, dir, figs.path().join("w.png"));
    a.layer = Some("no.such.layer".into());
    let e = swbnn::plot::run(&a, &device).unwrap_err().to_string();
    assert!(
        e.contains("no shareable layer") && e.contains(".weight"),
        "{e}"
    );
    let a = args(Figure::Ood, &swb, figs.path().join("o.png"));
    let e = swbnn::plot::run(&a, &device).unwrap_err().to_string();
    assert!(e.contains("--dataset"), "{e}");
}
