//! `swbnn plot` and the reproduction report on tiny runs (an MLP on 600 Fashion-MNIST images,
//! MNIST digits as the OOD set when present), single-seed and multi-seed: every figure is
//! drawn, as PNG and SVG, at the requested size, and the report links the figures it wrote.

use std::path::{Path, PathBuf};

use bnn_data::{Corruption, CorruptionKind, DatasetId};
use bnn_models::Arch;
use swbnn::experiment::{self, Progress};
use swbnn::plot::{Figure, PlotRequest, SigmaScale};
use swbnn::report::write_report;
use swbnn::setup::Setup;

struct Quiet;
impl bnn_train::Observer for Quiet {}
impl Progress for Quiet {}

fn args(what: Figure, model: &Path, out: PathBuf) -> PlotRequest {
    PlotRequest {
        what,
        model: model.to_path_buf(),
        seed: None,
        out,
        force: false,
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
        width: Some(900),
        height: Some(500),
    }
}

fn tiny_setup(out: &Path) -> Setup {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut setup = swbnn::presets::setup(
        DatasetId::FashionMnist,
        Some(Arch::Mlp),
        true,
        &swbnn::data::OodSearch::from_env(&root),
        out.to_path_buf(),
    );
    setup.train_subset = Some(600);
    setup.test_subset = Some(200);
    setup.deterministic.epochs = 1;
    setup.bbb.epochs = 1;
    setup.compress.retrain.epochs = 1;
    setup.samples = 3;
    setup.compress.sharing.gmm.k = 16;
    setup.compress.sharing.refine.n_min = 10;
    setup.corruptions = vec![
        Corruption::new(CorruptionKind::GaussianNoise, 1).unwrap(),
        Corruption::new(CorruptionKind::GaussianNoise, 3).unwrap(),
        Corruption::new(CorruptionKind::Contrast, 3).unwrap(),
    ];
    setup
}

fn write_setup(setup: &Setup) {
    let json = serde_json::to_string_pretty(setup).unwrap();
    std::fs::write(setup.out_dir.join("setup.json"), json).unwrap();
}

/// Checks that every figure `report.md` links decodes, and returns how many there are.
fn linked_figures(dir: &Path) -> (String, usize) {
    let text = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let mut linked = 0;
    for line in text.lines().filter(|l| l.starts_with("![")) {
        let file = line.split("](").nth(1).unwrap().trim_end_matches(')');
        let img = image::open(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(img.width() >= 1000, "{file} is {} px wide", img.width());
        linked += 1;
    }
    (text, linked)
}

/// Draws `what` from `model` into a PNG and an SVG and checks both have the requested size.
fn draw_both(a: &PlotRequest, dir: &Path, name: &str) {
    let device = bnn_layers::test_device();
    for ext in ["png", "svg"] {
        let mut a = a.clone();
        a.out = dir.join(format!("{name}.{ext}"));
        let plotted = swbnn::plot::run(&a, &device)
            .unwrap_or_else(|e| panic!("{:?} {:?}: {e}", a.what, a.model));
        assert_eq!(plotted.out, a.out);
        // The OOD figure says which folder its OOD set came from; no other figure names one.
        assert_eq!(
            plotted.ood_dir.is_some(),
            a.what == Figure::Ood,
            "{name}: {plotted:?}"
        );
        let bytes = std::fs::read(&a.out).unwrap();
        if ext == "png" {
            let img = image::load_from_memory(&bytes).unwrap();
            assert_eq!((img.width(), img.height()), (900, 500), "{name}");
        } else {
            let svg = String::from_utf8(bytes).unwrap();
            assert!(svg.starts_with("<svg"), "{name}");
            assert!(
                svg.contains(r#"width="900""#) && svg.contains(r#"height="500""#),
                "{name}: {}",
                &svg[..200.min(svg.len())]
            );
        }
    }
}

#[test]
fn every_figure_of_a_tiny_run() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path();
    let setup = tiny_setup(dir);
    let device = bnn_layers::test_device();
    let outcome = experiment::run(&setup, &device, &mut Quiet).unwrap();
    swbnn::store::write_tables(dir, &outcome).unwrap();
    write_setup(&setup);
    assert!(
        dir.join("stages/2dgbnn")
            .join(swbnn::store::PLAN_FILE)
            .is_file()
    );

    // The figures draw the evaluation's own predictions, kept beside each stage's row: their
    // metrics are the table's to the last digit (a second Monte Carlo pass drew other samples).
    let run = swbnn::run_dir::RunDir::open(dir, None).unwrap();
    let loaders = run.loaders().unwrap();
    let methods = swbnn::method::Method::MAIN;
    let preds =
        swbnn::run_dir::run_predictions(&run, &loaders, &methods, &device, run.setup.samples)
            .unwrap();
    for (p, r) in preds.iter().zip(&outcome.rows) {
        let summary =
            bnn_metrics::EvalSummary::compute(p.test.predictive.probabilities(), &p.test.labels)
                .unwrap();
        assert_eq!(
            (summary.accuracy, summary.ece),
            (r.accuracy, r.ece),
            "{}",
            r.method
        );
    }

    write_report(dir, &device).unwrap();
    let (text, linked) = linked_figures(dir);
    assert!(
        text.contains("| mlp | 2dgbnn |"),
        "the table is in the report"
    );
    assert!(text.contains("gaussian-noise:3"), "the corruptions table");
    // Reliability, per class x 3, weights x 2, corruptions; OOD x 3 with the MNIST digits.
    let expected = if setup.ood.is_some() { 10 } else { 7 };
    assert_eq!(linked, expected, "{text}");

    // `swbnn plot` on the run directory, the .swb file and the 2DGBNN stage directory.
    let figs = tempfile::tempdir().unwrap();
    let swb = dir.join("mlp-2dgbnn.swb");
    let stage = dir.join("stages/2dgbnn");
    let mut cases = vec![
        (Figure::Reliability, dir.to_path_buf()),
        (Figure::PerClass, dir.to_path_buf()),
        (Figure::Weights, dir.to_path_buf()),
        (Figure::Corruptions, dir.to_path_buf()),
        (Figure::Weights, swb.clone()),
        (Figure::Reliability, stage.clone()),
    ];
    if setup.ood.is_some() {
        cases.push((Figure::Ood, dir.to_path_buf()));
    }
    for (i, (what, model)) in cases.into_iter().enumerate() {
        let mut a = args(what, &model, PathBuf::new());
        if model != dir {
            a.dataset = Some(DatasetId::FashionMnist.into());
            a.subset = Some(100);
        }
        draw_both(&a, figs.path(), &format!("{i}"));
    }
    // The weights after retraining, of one layer.
    let first = swshare::format::load(&swb).unwrap().layers[0].path.clone();
    let mut a = args(Figure::Weights, dir, PathBuf::new());
    a.after_retraining = true;
    a.layer = Some(first);
    draw_both(&a, figs.path(), "layer");

    // Clear errors: a layer that does not exist; a model file without its data set; a run
    // without corruptions; a seed a single-seed run does not have.
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
    let mut a = args(Figure::Reliability, dir, figs.path().join("r.png"));
    a.seed = Some(1);
    let e = swbnn::plot::run(&a, &device).unwrap_err().to_string();
    assert!(e.contains("no seed 1"), "{e}");
    // A damaged predictions file is an error naming it, not a silent second pass.
    let kept = dir.join("stages/bbb").join(swbnn::store::PREDICTIONS_FILE);
    let bytes = std::fs::read(&kept).unwrap();
    std::fs::write(&kept, &bytes[..bytes.len() / 2]).unwrap();
    let e = write_report(dir, &device).unwrap_err().to_string();
    assert!(
        e.contains(&kept.display().to_string()) && e.contains("predictions"),
        "{e}"
    );
    std::fs::write(&kept, bytes).unwrap();
    std::fs::remove_file(dir.join("corruptions.json")).unwrap();
    let a = args(Figure::Corruptions, dir, figs.path().join("c.png"));
    let e = swbnn::plot::run(&a, &device).unwrap_err().to_string();
    assert!(e.contains("--corruptions"), "{e}");
}

#[test]
fn a_multi_seed_report_draws_seed_zero_and_the_mean_corruptions() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path();
    let mut setup = tiny_setup(dir);
    setup.ood = None;
    setup.corruptions.truncate(2);
    let device = bnn_layers::test_device();
    std::fs::create_dir_all(dir).unwrap();
    write_setup(&setup);
    experiment::run_seeds(&setup, 2, &device, &mut Quiet).unwrap();
    // Each seed's directory records its seed number; the validation rows are summarised apart.
    for i in 0..2u64 {
        let s = swbnn::store::read_setup(&swbnn::store::seed_dir(dir, i)).unwrap();
        assert_eq!((s.seed, s.bbb.seed), (i, setup.bbb.seed + 1000 * i));
    }
    let validation: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("validation.json")).unwrap())
            .unwrap();
    assert_eq!(validation["summaries"].as_array().unwrap().len(), 3);
    assert_eq!(validation["summaries"][1]["seeds"], 2);
    assert_eq!(validation["seeds"].as_array().unwrap().len(), 2);
    write_report(dir, &device).unwrap();
    let (text, linked) = linked_figures(dir);
    assert!(text.contains("Validation split (for choices"), "{text}");
    assert!(text.contains("seed 0"), "{text}");
    assert!(text.contains("mean over seeds"), "{text}");
    assert_eq!(linked, 7, "{text}");

    // Another seed's models, by --seed or by its directory.
    let figs = tempfile::tempdir().unwrap();
    let mut a = args(Figure::Weights, dir, PathBuf::new());
    a.seed = Some(1);
    draw_both(&a, figs.path(), "seed1");
    let a = args(Figure::Corruptions, &dir.join("seed-1"), PathBuf::new());
    draw_both(&a, figs.path(), "seed1-corruptions");
    let mut a = args(Figure::Reliability, dir, figs.path().join("r.png"));
    a.seed = Some(2);
    let e = swbnn::plot::run(&a, &device).unwrap_err().to_string();
    assert!(e.contains("seed-2"), "{e}");
}

/// `swbnn plot search` draws a `*.search.json` of `compress --auto` (built here from its
/// types), and refuses a data flag it does not read.
#[test]
fn plot_search_draws_a_search_file() {
    use swbnn_ops::search::{
        Candidate, CandidateMethod, SearchConfig, SearchReport, ValidationMetrics, Verdict,
    };
    let metrics = |nll: f64| ValidationMetrics {
        accuracy: 0.9,
        nll,
        ece: 0.01,
        ood_auroc: Some(0.75),
    };
    let candidate = |method, bytes, nll: f64, verdict| Candidate {
        method,
        k: (method != CandidateMethod::Qbnn).then_some(32),
        codebook: None,
        sigma_bits: (method == CandidateMethod::Qbnn).then_some(2),
        int8_outliers: method == CandidateMethod::MuOnly,
        bytes,
        parameters: 1_000,
        validation: Some(metrics(nll)),
        seconds: 1.0,
        retrain_steps: 0,
        verdict,
    };
    let report = SearchReport {
        config: SearchConfig::default(),
        source: metrics(0.30),
        source_parameters: 100_000,
        validation_images: 5_000,
        candidates: vec![
            candidate(
                CandidateMethod::MuOnly,
                30_000,
                0.35,
                Verdict::Outside(vec!["NLL 0.3500 > 0.3100".into()]),
            ),
            candidate(CandidateMethod::Gbnn2d, 40_000, 0.305, Verdict::Chosen),
            candidate(CandidateMethod::Qbnn, 80_000, 0.30, Verdict::Within),
        ],
        written: Some(1),
        within_margins: true,
        seconds: 3.0,
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.search.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&report).unwrap()).unwrap();
    let out = dir.path().join("search.svg");
    let swbnn = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_swbnn"))
            .args(["plot", "search"])
            .arg(&file)
            .arg("--out")
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    let o = swbnn(&["--dataset", "fashion-mnist"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains("--dataset"),
        "{stderr}"
    );
    assert!(!out.exists());
    let o = swbnn(&[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.contains("2DGBNN") && svg.contains("chosen"), "{svg}");
}
