//! `cargo xtask reproduce npz:FILE` / `folder:DIR` through the library: the generic recipe
//! ([`swbnn::presets::setup_for_source`]) and [`swbnn::reproduce`] on a tiny `.npz` and tiny
//! class folders made here, with tiny epochs: the run directory holds the tables, the report
//! and its figures, and the evaluation ran; the paper's tables are refused for such data.

use std::io::Write;
use std::path::Path;

use bnn_data::DataSource;
use swbnn::Reproduction;
use swbnn::experiment::Progress;
use swbnn::setup::Setup;
use swbnn::tables::{ReportContext, TableId, TablesConfig};

struct Quiet;
impl bnn_train::Observer for Quiet {}
impl Progress for Quiet {}

/// `n` grey `side x side` images of 3 classes: class `c` lights rows `c * side / 3 ..`, on
/// seeded noise. Returns `(pixels, labels)`.
fn images(n: usize, side: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as u32
    };
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    for i in 0..n {
        let c = i % 3;
        labels.push(c as u8);
        for r in 0..side {
            for _ in 0..side {
                let lit = (r * 3 / side == c) && next() % 4 != 0;
                pixels.push(if lit { 160 } else { 0 } + (next() % 90) as u8);
            }
        }
    }
    (pixels, labels)
}

/// The `.npy` bytes of a uint8 array of `shape`.
fn npy(shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '|u1', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// A `.npz` of `train` and (when `test > 0`) `test` grey `side x side` images.
fn write_npz(path: &Path, train: usize, test: usize, side: usize) {
    let (xtr, ytr) = images(train, side, 1);
    let (xte, yte) = images(test, side, 2);
    let mut arrays = vec![
        ("x_train", npy(&[train, side, side], &xtr)),
        ("y_train", npy(&[train], &ytr)),
    ];
    if test > 0 {
        arrays.push(("x_test", npy(&[test, side, side], &xte)));
        arrays.push(("y_test", npy(&[test], &yte)));
    }
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in arrays {
        zip.start_file(format!("{name}.npy"), options).unwrap();
        zip.write_all(&bytes).unwrap();
    }
    zip.finish().unwrap();
}

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
