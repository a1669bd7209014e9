//! The CIFAR-10 and ImageNet presets end to end on tiny generated files in the real formats
//! (CIFAR-10 binary batches, an ImageNet-style JPEG folder tree), with epochs, images, K and
//! the sweeps shrunk so the runs take seconds: every table is made, every report cell is a
//! value, the run resumes from its stages, and a resume with another setup is refused.

use std::path::{Path, PathBuf};

use bnn_data::DatasetId;
use bnn_models::Arch;
use swbnn::calibration::StoredCalibration;
use swbnn::experiment::Progress;
use swbnn::setup::Setup;
use swbnn::tables::{self, ReportContext, TableId, TablesConfig, TimingConfig};

struct Quiet;

/// Held by each run: burn's device RNG is shared by the process, so two runs on parallel test
/// threads would draw each other's weight noise, and a resumed 2DGBNN stage would rebuild
/// stages 1-2 differently from the run that wrote its checkpoint (a real run is alone in its
/// process).
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
impl bnn_train::Observer for Quiet {}
impl Progress for Quiet {}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Pixel `k` of image `i` of class `label`: a class-dependent colour plus a pattern.
fn pixel(i: usize, k: usize, label: usize) -> u8 {
    ((label * 25 + (k / 1024) * 60 + (i * 7 + k) % 13) % 256) as u8
}

/// The five CIFAR-10 training batches and the test batch, `per_batch` records each.
fn write_cifar10(dir: &Path, per_batch: usize) {
    let dir = dir.join("cifar-10-batches-bin");
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, first: usize| {
        let mut bytes = Vec::new();
        for i in first..first + per_batch {
            let label = i % 10;
            bytes.push(label as u8);
            bytes.extend((0..3072).map(|k| pixel(i, k, label)));
        }
        std::fs::write(dir.join(name), bytes).unwrap();
    };
    for b in 1..=5 {
        write(&format!("data_batch_{b}.bin"), b * per_batch);
    }
    write("test_batch.bin", 0);
}

/// `train/<wnid>/*.JPEG` and `val/<wnid>/*.JPEG` with `per_class` images of two classes.
fn write_imagenet(dir: &Path, per_class: usize) {
    for (split, offset) in [("train", 0), ("val", 100)] {
        for (c, wnid) in ["n01440764", "n01443537"].iter().enumerate() {
            let d = dir.join(split).join(wnid);
            std::fs::create_dir_all(&d).unwrap();
            for i in 0..per_class {
                let shade = (40 + 150 * c + 7 * i + offset) as u8;
                let img = image::RgbImage::from_fn(48, 36, |x, y| {
                    image::Rgb([shade, (x * 5) as u8, (y * 7) as u8])
                });
                img.save_with_format(d.join(format!("{i}.JPEG")), image::ImageFormat::Jpeg)
                    .unwrap();
            }
        }
    }
}

/// The preset shrunk to a smoke run: one epoch per stage, two MC samples, a tiny GMM.
fn shrink(setup: &mut Setup, data: &Path) {
    setup.data_dir = Some(data.to_path_buf());
    setup.ood = None;
    // Two images (the ImageNet folder has four training images, CIFAR-10 twenty).
    setup.validation = swbnn::setup::ValidationSplit::new(2);
    setup.deterministic.epochs = 1;
    setup.bbb.epochs = 1;
    setup.compress.retrain.epochs = 1;
    setup.samples = 2;
    setup.workers = 1;
    setup.compress.sharing.gmm.k = 8;
    setup.compress.sharing.refine.n_min = 3;
}

fn small_tables() -> TablesConfig {
    TablesConfig {
        sigma_bits: vec![8, 2],
        ensemble_members: 2,
        tau_w: vec![0.2, 0.6],
        gmm_k: vec![4, 8],
        timing: TimingConfig {
            images: 8,
            repeats: 1,
            batch_size: 8,
        },
    }
}

/// Every table line of the report has as many cells as its header, none of them empty or a
/// placeholder.
fn check_cells(md: &str) {
    let mut width = None;
    for line in md.lines() {
        if !line.starts_with('|') {
            width = None;
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.iter().all(|c| c.chars().all(|ch| ch == '-')) {
            continue;
        }
        match width {
            None => width = Some(cells.len()),
            Some(w) => assert_eq!(cells.len(), w, "ragged row: {line}"),
        }
        for c in &cells {
            assert!(
                !c.is_empty() && *c != "-" && !c.contains("NaN") && !c.contains("not measured"),
                "placeholder cell in: {line}"
            );
        }
    }
}

fn context() -> ReportContext {
    ReportContext {
        command: "test".into(),
        backend: "flex".into(),
    }
}

#[test]
fn cifar10_preset_makes_every_table_and_resumes() {
    let _alone = ONE_RUN_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let data = tempfile::tempdir().unwrap();
    write_cifar10(data.path(), 4);
    let out = tempfile::tempdir().unwrap();
    let mut setup = swbnn::presets::setup(
        DatasetId::Cifar10,
        Some(Arch::Resnet20),
        false,
        &swbnn::data::OodSearch::from_env(&root()),
        out.path().to_path_buf(),
    );
    // The paper's recipe is what runs, shrunk.
    assert_eq!(setup.deterministic.batch_size, 256);
    shrink(&mut setup, data.path());
    let cfg = small_tables();
    let device = bnn_layers::test_device();
    let all = TableId::parse_list(&["all"]).unwrap();
    let outcome = tables::run(&setup, &cfg, &all, &device, &context(), &mut Quiet).unwrap();

    let count = |t: TableId| outcome.rows.iter().filter(|r| r.table == t).count();
    assert_eq!(count(TableId::Main), 3);
    // 2DGBNN, 1-D sharing, stage 3 without sharing, two SNR prunings, two QBNNs, BBB.
    assert_eq!(count(TableId::EqualSize), 8);
    assert_eq!(count(TableId::Quant), 2 + 2);
    assert_eq!(count(TableId::Ensemble), 4);
    assert_eq!(count(TableId::Ablation), 4);
    assert_eq!(count(TableId::GmmK), 2);
    assert_eq!(count(TableId::TauW), 2);
    assert_eq!(count(TableId::Merge), 2);
    assert_eq!(outcome.timing.len(), 4);
    let row = |t: TableId, label: &str| {
        &outcome
            .rows
            .iter()
            .find(|r| r.table == t && r.label.contains(label))
            .unwrap_or_else(|| panic!("no {label} row in {t}"))
            .row
    };
    // A real quantised file per row: fewer sigma bits, fewer bytes; both under the f32 BNN.
    let (q8, q2) = (
        row(TableId::Quant, "sigma 8"),
        row(TableId::Quant, "sigma 2"),
    );
    let bbb = row(TableId::Main, "bbb");
    assert!(q2.model_bytes < q8.model_bytes && q8.model_bytes < bbb.model_bytes / 3);
    let stages = out.path().join("stages");
    assert!(stages.join("qbnn-sigma2/model.qbnn").exists());
    // The equal-size baselines: 1-D sharing has no ellipse weights; stage 3 without sharing
    // keeps the BBB's size and its own stage; the QBNN rows are the quant table's.
    let one_d = row(TableId::EqualSize, "1-D sharing");
    assert_eq!(one_d.ellipses, Some(0));
    assert!(one_d.parameters < bbb.parameters / 2, "{one_d:?}");
    let unshared = row(TableId::EqualSize, "stage 3 without sharing");
    assert_eq!(unshared.parameters, bbb.parameters);
    assert_ne!(unshared.nll, bbb.nll, "retrained");
    assert!(stages.join("stage3-unshared/row.json").exists());
    assert!(stages.join("equal-size-mu-only/row.json").exists());
    assert_eq!(row(TableId::EqualSize, "sigma 2"), q2);
    // SNR pruning at 2DGBNN's size: its parameters (two per kept weight, so within one), its
    // file bytes (at most).
    let gbnn = row(TableId::Main, "2dgbnn");
    let by_params = row(TableId::EqualSize, "SNR pruning, 2DGBNN's parameters");
    assert!(
        by_params.parameters <= gbnn.parameters && by_params.parameters + 2 > gbnn.parameters,
        "{} vs {}",
        by_params.parameters,
        gbnn.parameters
    );
    let by_bytes = row(TableId::EqualSize, "SNR pruning, 2DGBNN's bytes");
    assert!(by_bytes.model_bytes <= gbnn.model_bytes, "{by_bytes:?}");
    assert!(
        by_bytes.model_bytes + 100 > gbnn.model_bytes / 2,
        "{by_bytes:?}"
    );
    for stage in ["snr-prune-params", "snr-prune-bytes"] {
        assert!(stages.join(stage).join("row.json").exists(), "{stage}");
    }
    // The ensemble holds both members.
    let det = row(TableId::Main, "deterministic");
    let ens = row(TableId::Ensemble, "ensemble");
    assert_eq!(ens.parameters, 2 * det.parameters);
    // Without outliers there are none; without ellipses none of those.
    assert_eq!(row(TableId::Ablation, "without outliers").outliers, Some(0));
    assert_eq!(row(TableId::Ablation, "without ellipses").ellipses, Some(0));
    assert_eq!(
        row(TableId::TauW, "0.2"),
        row(TableId::Main, "2dgbnn"),
        "the preset's tau_w row is the main row, not retrained"
    );
    assert!(!stages.join("tau-w-0.2").exists());
    // Every row of every table has its temperature, fitted on the validation split and kept
    // with its model: in the .qbnn file, in the ensemble's stage.
    for r in &outcome.rows {
        let c = r.row.calibrated.as_ref();
        assert!(
            c.is_some(),
            "{} {}: no calibrated metrics",
            r.table,
            r.label
        );
    }
    let q2_file = swbnn::calibration::ModelFile::at(&stages.join("qbnn-sigma2"));
    assert_eq!(
        q2_file.temperature().unwrap(),
        q2.calibrated.as_ref().map(|c| c.temperature)
    );
    assert_eq!(
        swbnn::store::ModelDir::new(stages.join("ensemble"))
            .read_calibration()
            .unwrap()
            .map(|c| c.temperature),
        ens.calibrated.as_ref().map(|c| c.temperature)
    );

    let md = std::fs::read_to_string(out.path().join("tables.md")).unwrap();
    assert!(md.contains("Calibrated T"), "{md}");
    for title in [
        "## Main table",
        "## 2DGBNN against simpler compressions",
        "## Quantised BNN",
        "## Deep ensemble",
        "## Ablation",
        "## Choice of the GMM size K",
        "## tau_w sweep",
        "## Merging",
        "## Timing",
    ] {
        assert!(md.contains(title), "missing {title}");
    }
    check_cells(&md);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("tables.json")).unwrap())
            .unwrap();
    assert_eq!(
        json["seeds"][0]["rows"].as_array().unwrap().len(),
        outcome.rows.len()
    );

    // Resuming reuses every stage: the same rows (times included), nothing retrained.
    setup.resume = true;
    let again = tables::run(&setup, &cfg, &all, &device, &context(), &mut Quiet).unwrap();
    assert_eq!(again.rows, outcome.rows);
    // A resume with another setup is refused, naming the file that pins the setup.
    setup.bbb.epochs = 2;
    let e = tables::run(&setup, &cfg, &all, &device, &context(), &mut Quiet)
        .unwrap_err()
        .to_string();
    assert!(e.contains("tables-setup.json"), "{e}");
}

#[test]
fn imagenet_preset_runs_on_an_image_folder() {
    let _alone = ONE_RUN_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let data = tempfile::tempdir().unwrap();
    write_imagenet(data.path(), 2);
    let out = tempfile::tempdir().unwrap();
    let mut setup = swbnn::presets::setup(
        DatasetId::ImageNet,
        None,
        false,
        &swbnn::data::OodSearch::from_env(&root()),
        out.path().to_path_buf(),
    );
    assert_eq!(setup.arch, Arch::Resnet50);
    shrink(&mut setup, data.path());
    for tc in [
        &mut setup.deterministic,
        &mut setup.bbb,
        &mut setup.compress.retrain,
    ] {
        tc.batch_size = 4;
    }
    let mut cfg = small_tables();
    cfg.sigma_bits = vec![4];
    let chosen = TableId::parse_list(&["main", "quant", "timing"]).unwrap();
    let device = bnn_layers::test_device();
    let outcome = tables::run(&setup, &cfg, &chosen, &device, &context(), &mut Quiet).unwrap();
    assert_eq!(outcome.rows.len(), 3 + 3);
    for r in &outcome.rows {
        assert!(r.row.accuracy >= 0.0 && r.row.nll.is_finite(), "{r:?}");
    }
    let md = std::fs::read_to_string(out.path().join("tables.md")).unwrap();
    assert!(md.contains("## Quantised BNN") && md.contains("## Timing"));
    check_cells(&md);
}

#[test]
fn dry_run_plans_without_data() {
    let setup = swbnn::presets::setup(
        DatasetId::ImageNet,
        Some(Arch::VitB16),
        false,
        &swbnn::data::OodSearch::from_env(&root()),
        "/nonexistent/out".into(),
    );
    let cfg = TablesConfig::for_setup(&setup);
    let plan = tables::plan::plan(&setup, &cfg, &TableId::ALL);
    // The validation split's 5,000 images are held out of training.
    assert_eq!(plan.train_examples, 1_281_167 - 5_000);
    let det = &plan.stages[0];
    assert_eq!((det.stage.as_str(), det.epochs), ("deterministic", 250));
    assert_eq!(det.train_images, 250 * (1_281_167 - 5_000));
    // 4 sigma widths, 4 ensemble members, 3 ablation, 3 K, 3 tau_w, 1 merge variants.
    let names: Vec<&str> = plan.stages.iter().map(|s| s.stage.as_str()).collect();
    for s in [
        "qbnn-sigma1",
        "ensemble-4",
        "ablation-no-outliers",
        "gmm-k-18000",
        "tau-w-0.6",
        "merge-off",
        "timing",
    ] {
        assert!(names.contains(&s), "{s} not in {names:?}");
    }
    assert!(!names.contains(&"tau-w-0.2"));
    let md = plan.markdown();
    assert!(md.contains("| total |"));
}
