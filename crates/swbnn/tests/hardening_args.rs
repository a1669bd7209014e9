//! Arguments and data choices a careless user can meet: each refused at the start with a clear
//! error (never an abort, never hours of work), or accepted where it is valid. Small data sets
//! made here (8 x 8 grey images of 3 classes), so no installed data set is needed.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod common;
use common::npz_fixture::{images, npy, write_npz};

fn run<S: AsRef<OsStr>>(program: &str, pre: &[&str], args: &[S]) -> Output {
    Command::new(program)
        .args(pre)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .env_remove("SWBNN_DATA")
        .output()
        .expect("running swbnn")
}

fn swbnn<S: AsRef<OsStr>>(args: &[S]) -> Output {
    run(env!("CARGO_BIN_EXE_swbnn"), &[], args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok<S: AsRef<OsStr> + std::fmt::Debug>(args: &[S]) -> (String, String) {
    let o = swbnn(args);
    let err = stderr(&o);
    assert!(o.status.success(), "{args:?} failed: {err}");
    (String::from_utf8_lossy(&o.stdout).into_owned(), err)
}

/// A clean refusal: exit 1 or 2, no panic, every needle in the message. Returns it.
fn refused_output(args: &[&str], o: &Output, needles: &[&str]) -> String {
    let err = stderr(o);
    assert!(!o.status.success(), "{args:?} succeeded: {err}");
    assert!(
        matches!(o.status.code(), Some(1 | 2)),
        "{args:?}: exit {:?}: {err}",
        o.status
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: `{n}` not in: {err}");
    }
    err
}

fn refused(args: &[&str], needles: &[&str]) -> String {
    refused_output(args, &swbnn(args), needles)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Writes `n` 8 x 8 grey PNGs of 3 classes under `root/<split>/<class>/`.
fn write_pngs(root: &Path, split: &str, n: usize, seed: u64) {
    let (x, y) = images(n, 8, seed);
    for (i, label) in y.iter().enumerate() {
        let d = root.join(split).join(["a", "b", "c"][*label as usize]);
        std::fs::create_dir_all(&d).unwrap();
        image::GrayImage::from_raw(8, 8, x[i * 64..(i + 1) * 64].to_vec())
            .unwrap()
            .save(d.join(format!("{i:05}.png")))
            .unwrap();
    }
}

/// An `.npz` of 8 x 8 images: `train` training images, `test` test images.
fn write_data(path: &Path, train: usize, test: usize) {
    let (x, y) = images(train, 8, 1);
    let (xt, yt) = images(test, 8, 2);
    write_npz(
        path,
        &[
            ("x_train", npy(&[train, 8, 8], &x)),
            ("y_train", npy(&[train], &y)),
            ("x_test", npy(&[test, 8, 8], &xt)),
            ("y_test", npy(&[test], &yt)),
        ],
    );
}

struct Fixture {
    dir: tempfile::TempDir,
    /// `npz:` of the data set.
    dataset: String,
    /// A Bayesian MLP trained on it for 2 epochs.
    bnn: PathBuf,
}

/// The data set and model, made once for the whole binary.
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data.npz");
        write_data(&file, 300, 60);
        let dataset = format!("npz:{}", file.display());
        let bnn = dir.path().join("bnn");
        ok(&[
            "train",
            "--dataset",
            &dataset,
            "--arch",
            "mlp",
            "--kind",
            "bayesian",
            "--epochs",
            "2",
            "--validation",
            "0",
            "--out",
            s(&bnn),
        ]);
        Fixture { dir, dataset, bnn }
    })
}

/// Runs swbnn under an address-space limit of 1 GiB (`prlimit --as`), as a machine with
/// little memory: the run must refuse at once, never abort.
fn under_one_gib(args: &[&str]) -> (Output, Duration) {
    let start = Instant::now();
    let o = run(
        "prlimit",
        &["--as=1073741824", env!("CARGO_BIN_EXE_swbnn")],
        args,
    );
    (o, start.elapsed())
}

/// `--image-size 4096` on a folder of 600 images asked for 10 GB at once and aborted (exit
/// 134), and LeNet-5 at 2,048 pixels aborted allocating its first dense layer: the size is
/// capped, and what a run needs is estimated and refused before it is allocated.
#[test]
fn a_run_beyond_the_memory_is_refused_before_it_is_allocated() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let train = |root: &Path, size: &str, arch: &str| -> Vec<String> {
        [
            "train",
            "--dataset",
            &format!("folder:{}", root.display()),
            "--image-size",
            size,
            "--arch",
            arch,
            "--kind",
            "deterministic",
            "--validation",
            "0",
            "--out",
            s(&out),
        ]
        .map(String::from)
        .to_vec()
    };
    let small = tmp.path().join("small");
    write_pngs(&small, "train", 6, 1);
    let args = train(&small, "4096", "mlp");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&args, &["--image-size", "1024"]);

    // The images alone: 1,100 images of 1024 x 1024 are 1.15 GB.
    let many = tmp.path().join("many");
    write_pngs(&many, "train", 1100, 2);
    // The model alone: LeNet-5 at 1,024 pixels has 123 million weights.
    for (root, arch, needle) in [
        (&many, "mlp", "1100 images"),
        (&small, "lenet5", "parameters"),
    ] {
        let args = train(root, "1024", arch);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (o, took) = under_one_gib(&args);
        let err = refused_output(&args, &o, &["memory", needle, "address-space limit"]);
        assert!(took < Duration::from_secs(5), "{took:?}: {err}");
        assert!(!out.exists(), "nothing is written");
    }
}

/// Values that are allowed but never finish: thousands of threads on a few cores, a K the
/// compression cannot fit in reasonable time, epochs of a config file beyond the bound.
#[test]
fn values_that_never_finish_are_refused() {
    let f = fixture();
    let cores = std::thread::available_parallelism().unwrap().get();
    let too_many = (4 * cores + 1).to_string();
    refused(
        &["--threads", &too_many, "inspect", "x.swb"],
        &["--threads", "out of range"],
    );
    let out = f.dir.path().join("never.swb");
    let compress = |extra: &[&str], needles: &[&str]| {
        let mut args = vec![
            "compress",
            "--model",
            s(&f.bnn),
            "--dataset",
            &f.dataset,
            "--out",
            s(&out),
        ];
        args.extend(extra);
        refused(&args, needles);
        assert!(!out.exists());
    };
    let max_k = gmm_minibatch::MAX_K;
    let k = (max_k + 1).to_string();
    compress(&["--k", &k], &["--k", "out of range"]);
    // The same bound from a config file.
    let config = f.dir.path().join("k.json");
    std::fs::write(
        &config,
        format!(r#"{{"sharing": {{"gmm": {{"k": {k}}}}}}}"#),
    )
    .unwrap();
    compress(&["--config", s(&config)], &["gmm.k", &max_k.to_string()]);
    for (epochs, needle) in [("100000000000", "1,000,000"), ("0", "at least 1")] {
        std::fs::write(&config, format!(r#"{{"retrain": {{"epochs": {epochs}}}}}"#)).unwrap();
        compress(&["--config", s(&config)], &["epochs", needle]);
    }
    // Monte Carlo samples, and samples times images: a test split one image too large.
    let samples = swbnn::args::MAX_SAMPLES;
    refused(
        &[
            "eval",
            s(&f.bnn),
            "--samples",
            &(samples + 1).to_string(),
            "--dataset",
            "x",
        ],
        &["--samples", "out of range"],
    );
    let images = swbnn::args::MAX_SAMPLE_IMAGES / samples + 1;
    let big = f.dir.path().join("big.npz");
    write_data(&big, 30, images);
    let started = Instant::now();
    refused(
        &[
            "eval",
            s(&f.bnn),
            "--dataset",
            &format!("npz:{}", big.display()),
            "--samples",
            &samples.to_string(),
        ],
        &["image passes", "--subset"],
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// `--ood folder:X` with the data set's own folder, or a copy of the test split in another
/// file, was accepted (AUROC 0.5): whatever the kind of source, an OOD set of the test
/// images is refused.
#[test]
fn an_ood_set_of_the_test_images_is_refused_for_every_kind_of_source() {
    let f = fixture();
    let root = f.dir.path().join("photos");
    write_pngs(&root, "train", 30, 3);
    write_pngs(&root, "test", 30, 4);
    let folder = format!("folder:{}", root.display());
    refused(
        &[
            "eval",
            s(&f.bnn),
            "--dataset",
            &folder,
            "--ood",
            &folder,
            "--samples",
            "2",
        ],
        &["test set", "out-of-distribution"],
    );
    // The test split copied into another .npz file, as its only images.
    let (xt, yt) = images(60, 8, 2);
    let copy = f.dir.path().join("copy.npz");
    write_npz(
        &copy,
        &[
            ("x_train", npy(&[60, 8, 8], &xt)),
            ("y_train", npy(&[60], &yt)),
        ],
    );
    refused(
        &[
            "eval",
            s(&f.bnn),
            "--dataset",
            &f.dataset,
            "--ood",
            &format!("npz:{}", copy.display()),
            "--samples",
            "2",
        ],
        &["test set", "out-of-distribution"],
    );
    // Other images are an OOD set.
    let (xo, yo) = images(60, 8, 9);
    let other: Vec<u8> = xo.iter().map(|v| 255 - v).collect();
    let ood = f.dir.path().join("ood.npz");
    write_npz(
        &ood,
        &[
            ("x_train", npy(&[60, 8, 8], &other)),
            ("y_train", npy(&[60], &yo)),
        ],
    );
    ok(&[
        "eval",
        s(&f.bnn),
        "--dataset",
        &f.dataset,
        "--ood",
        &format!("npz:{}", ood.display()),
        "--samples",
        "2",
    ]);
}

/// `--resume --epochs 2` of an 8-epoch run exited 0 and printed nothing, and a larger
/// `--epochs` extended the run silently: fewer epochs than trained is refused, and what
/// resuming does is said.
#[test]
fn resume_says_what_it_does() {
    let f = fixture();
    let run = f.dir.path().join("resumed");
    let train = |epochs: &str, resume: bool| {
        let mut args = vec![
            "train",
            "--dataset",
            &f.dataset,
            "--arch",
            "mlp",
            "--kind",
            "deterministic",
            "--validation",
            "0",
            "--epochs",
            epochs,
            "--out",
            s(&run),
        ];
        if resume {
            args.push("--resume");
        }
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    ok(&train("2", false));
    let state = std::fs::read(run.join("state.json")).unwrap();
    let args = train("1", true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&args, &["--epochs 1", "trained 2 epochs"]);
    assert_eq!(std::fs::read(run.join("state.json")).unwrap(), state);
    let (_, err) = ok(&train("2", true));
    assert!(err.contains("at epoch 2 of 2: nothing to train"), "{err}");
    assert_eq!(std::fs::read(run.join("state.json")).unwrap(), state);
    let (_, err) = ok(&train("3", true));
    assert!(
        err.contains("extending the run from 2 to 3 epochs"),
        "{err}"
    );
}

/// `--width 64 --arch lenet5` was recorded in the model's `config.json` and ignored: an option
/// the architecture does not take is an error naming both.
#[test]
fn an_option_the_architecture_ignores_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/interop/lenet5-bayesian-torch.safetensors");
    let import = |extra: &[&str]| {
        let mut args = vec![
            "import",
            s(&source),
            "--arch",
            "lenet5",
            "--dataset",
            "fashion-mnist",
            "--image-size",
            "12",
            "--out",
            s(tmp.path()),
            "--force",
        ];
        args.extend(extra);
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    for (extra, option) in [
        (&["--width", "64"][..], "width"),
        (&["--shortcut", "zero-pad"][..], "shortcut"),
    ] {
        let args = import(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, &[option, "lenet5"]);
        assert!(!tmp.path().join("config.json").exists());
    }
    ok(&import(&[]));
}

/// A path that is not UTF-8 is a path for `--dataset npz:` as for `--out`, and a tiny or huge
/// number is echoed in a few characters, not 300 digits.
#[test]
fn paths_are_paths_and_numbers_print_short() {
    let tmp = tempfile::tempdir().unwrap();
    let name = OsStr::from_bytes(b"data-\xff.npz");
    let file = tmp.path().join(name);
    write_data(&file, 60, 30);
    let mut dataset = b"npz:".to_vec();
    dataset.extend_from_slice(file.as_os_str().as_bytes());
    let out = tmp.path().join(OsStr::from_bytes(b"out-\xfe"));
    let args: Vec<&OsStr> = [
        "train",
        "--arch",
        "mlp",
        "--kind",
        "deterministic",
        "--epochs",
        "1",
        "--validation",
        "0",
        "--dataset",
    ]
    .iter()
    .map(OsStr::new)
    .chain([
        OsStr::from_bytes(&dataset),
        OsStr::new("--out"),
        out.as_os_str(),
    ])
    .collect();
    ok(&args);
    assert!(out.join("model.bpk").exists());

    let f = fixture();
    for t in ["1e-300", "1e300"] {
        let flag = format!("--temperature={t}");
        let err = refused(
            &["eval", s(&f.bnn), "--dataset", &f.dataset, &flag],
            &["temperature", t],
        );
        assert!(err.len() < 400 && !err.contains("00000000"), "{err}");
    }
}
