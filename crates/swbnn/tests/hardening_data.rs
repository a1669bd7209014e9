//! A user's data cannot exhaust the machine: `swbnn train` on a crafted `.npz` (one label of
//! 10^9, a zip bomb) or a folder holding a PNG that declares 20000x20000 pixels, run under a
//! 1 GiB address-space limit (`prlimit --as`), ends within seconds with an error naming the
//! file, not with an allocation failure, a signal or the kernel's OOM killer. And data that
//! `eval` would refuse later (a broken test split, images that are not square) is refused by
//! `train` up front.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::npz_fixture::{images, npy, write_npz};

/// The `.npy` bytes of an array of `descr` (three characters: `<i8`, `<f4`) and `shape`
/// holding `data`: the fixture's uint8 header with its type replaced.
fn npy_of(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let mut bytes = npy(shape, &[]);
    let at = bytes
        .windows(5)
        .position(|w| w == b"'|u1'")
        .expect("the fixture's dtype");
    bytes[at + 1..at + 4].copy_from_slice(descr.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

/// The address-space limit of the runs: 1 GiB, far below what the crafted files ask for.
const LIMIT: &str = "--as=1073741824";
/// How long a refusal may take.
const WITHIN: Duration = Duration::from_secs(5);

/// The arguments of a one-epoch deterministic MLP `swbnn train` on `dataset` into `out`.
fn train_args(dataset: &str, out: &Path) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = [
        "train",
        "--dataset",
        dataset,
        "--arch",
        "mlp",
        "--kind",
        "deterministic",
        "--epochs",
        "1",
        "--validation",
        "0",
        "--threads",
        "1",
        "--out",
    ]
    .map(Into::into)
    .to_vec();
    args.push(out.into());
    args
}

/// Runs `swbnn train --dataset DATASET --arch mlp ...` under the 1 GiB limit; returns the exit
/// code (`None`: killed by a signal) and standard error, and the time it took.
fn train_limited(dataset: &str, out: &Path) -> (Option<i32>, String, Duration) {
    let mut child = Command::new("prlimit")
        .arg(LIMIT)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_swbnn"))
        .args(train_args(dataset, out))
        .env("RUST_BACKTRACE", "0")
        .env_remove("SWBNN_DATA")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running prlimit (util-linux) and swbnn");
    let started = Instant::now();
    // Waits at most twice the bound, so that a run that takes the machine is stopped.
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > 2 * WITHIN {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let code = status.and_then(|s| s.code());
    (code, err, elapsed)
}

/// Asserts a clear refusal under the limit: a non-zero exit code (not a signal, not an abort),
/// within [`WITHIN`], with every one of `needles` in the message.
fn refused_within_limit(dataset: &str, out: &Path, needles: &[&str]) {
    let (code, err, elapsed) = train_limited(dataset, out);
    assert!(
        matches!(code, Some(c) if c != 0 && c != 134),
        "{dataset}: exit code {code:?} (None: a signal or the time-out), in {elapsed:?}: {err}"
    );
    assert!(elapsed < WITHIN, "{dataset}: took {elapsed:?}: {err}");
    assert!(!err.contains("panicked"), "{dataset}: {err}");
    assert!(!err.contains("memory allocation"), "{dataset}: {err}");
    for n in needles {
        assert!(err.contains(n), "{dataset}: `{n}` not in: {err}");
    }
}

/// One label of 10^9 among ten classes made the class count 10^9 + 1, and a table per class
/// took the machine (an abort allocating 51 GB for 2^31 - 1).
#[test]
fn a_label_of_a_billion_is_refused_under_a_gigabyte() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("labels.npz");
    let (x, y) = images(60, 8, 1);
    let mut labels: Vec<i64> = y.iter().map(|&l| l as i64).collect();
    labels[17] = 1_000_000_000;
    let bytes: Vec<u8> = labels.iter().flat_map(|l| l.to_le_bytes()).collect();
    let y_npy = npy_of("<i8", &[60], &bytes);
    write_npz(
        &file,
        &[("x_train", npy(&[60, 8, 8], &x)), ("y_train", y_npy)],
    );
    refused_within_limit(
        &format!("npz:{}", file.display()),
        &dir.path().join("out"),
        &["labels.npz", "label 1000000000", "image 17"],
    );
}

/// A deflated member of zeros declaring 533 MB (shape [680000, 28, 28]) in a 0.5 MB file was
/// inflated whole before any check; and a forged entry declaring 3.9 GB over a few bytes.
#[test]
fn zip_bombs_are_refused_under_a_gigabyte() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bomb.npz");
    {
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&file).unwrap());
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .compression_level(Some(1));
        let n = 680_000;
        zip.start_file("x_train.npy", options).unwrap();
        zip.write_all(&npy(&[n, 28, 28], &[])).unwrap();
        let zeros = vec![0u8; 784 * 1000];
        for _ in 0..n / 1000 {
            zip.write_all(&zeros).unwrap();
        }
        zip.start_file("y_train.npy", options).unwrap();
        let labels: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
        zip.write_all(&npy(&[n], &labels)).unwrap();
        zip.finish().unwrap();
    }
    refused_within_limit(
        &format!("npz:{}", file.display()),
        &dir.path().join("out"),
        &["bomb.npz", "x_train", "more than the"],
    );

    // The entry's sizes forged: 3.9 GB declared, a few bytes stored.
    let forged = dir.path().join("forged.npz");
    let (x, y) = images(2, 28, 1);
    let mut member = npy(&[5_000_000, 28, 28], &[]);
    member.extend_from_slice(&x);
    write_npz(&forged, &[("x_train", member), ("y_train", npy(&[2], &y))]);
    let mut bytes = std::fs::read(&forged).unwrap();
    let declared = (npy(&[5_000_000, 28, 28], &[]).len() + 5_000_000 * 784) as u32;
    let (mut local, mut central) = (true, true);
    for i in 0..bytes.len() - 30 {
        if local && bytes[i..].starts_with(b"PK\x03\x04") {
            bytes[i + 22..i + 26].copy_from_slice(&declared.to_le_bytes());
            local = false;
        } else if central && bytes[i..].starts_with(b"PK\x01\x02") {
            bytes[i + 24..i + 28].copy_from_slice(&declared.to_le_bytes());
            central = false;
        }
    }
    std::fs::write(&forged, bytes).unwrap();
    refused_within_limit(
        &format!("npz:{}", forged.display()),
        &dir.path().join("out2"),
        &["forged.npz", "x_train", "compression ratio"],
    );
}

/// A PNG of 20000x20000 black pixels (a few hundred kB) was decoded whole, 400 MB each.
#[test]
fn an_image_declaring_twenty_thousand_pixels_a_side_is_refused_under_a_gigabyte() {
    let dir = tempfile::tempdir().unwrap();
    let side = 20_000u32;
    let mut png = Vec::new();
    {
        use image::ImageEncoder;
        let encoder = image::codecs::png::PngEncoder::new_with_quality(
            &mut png,
            image::codecs::png::CompressionType::Fast,
            image::codecs::png::FilterType::NoFilter,
        );
        let black = vec![0u8; (side * side) as usize];
        encoder
            .write_image(&black, side, side, image::ExtendedColorType::L8)
            .unwrap();
    }
    for class in ["a", "b"] {
        std::fs::create_dir_all(dir.path().join(class)).unwrap();
        std::fs::write(dir.path().join(class).join("bomb.png"), &png).unwrap();
    }
    refused_within_limit(
        &format!("folder:{}", dir.path().display()),
        &dir.path().join("out"),
        &["bomb.png", "20000x20000", "limit"],
    );
}

/// Runs `swbnn train` (no limit) on `dataset`; returns the exit code and standard error.
fn train(dataset: &str, out: &Path) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_swbnn"))
        .args(train_args(dataset, out))
        .env("RUST_BACKTRACE", "0")
        .env_remove("SWBNN_DATA")
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A broken test split: its name, `x_test`, `y_test`, and what the error must say.
type BrokenTest = (&'static str, Vec<u8>, Vec<u8>, &'static [&'static str]);

/// `train` accepted a `.npz` whose test split `eval` refuses afterwards: every split of the file
/// is checked before the training starts.
#[test]
fn a_broken_test_split_is_refused_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = images(30, 8, 1);
    let (xt, yt) = images(6, 8, 2);
    let nan: Vec<u8> = (0..6 * 64)
        .flat_map(|i| if i == 70 { f32::NAN } else { 0.5 }.to_le_bytes())
        .collect();
    let nan_npy = npy_of("<f4", &[6, 8, 8], &nan);
    let mut label_200 = yt.clone();
    label_200[3] = 200;
    let (x32, _) = images(6, 16, 2);
    let cases: Vec<BrokenTest> = vec![
        (
            "empty",
            npy(&[0, 8, 8], &[]),
            npy(&[0], &[]),
            &["x_test", "no images"],
        ),
        (
            "nan",
            nan_npy,
            npy(&[6], &yt),
            &["x_test", "image 1", "NaN"],
        ),
        (
            "label",
            npy(&[6, 8, 8], &xt),
            npy(&[6], &label_200),
            &["y_test", "label 200"],
        ),
        (
            "size",
            npy(&[6, 16, 16], &x32),
            npy(&[6], &yt),
            &["x_test", "16x16"],
        ),
    ];
    for (name, x_test, y_test, needles) in cases {
        let file = dir.path().join(format!("{name}.npz"));
        write_npz(
            &file,
            &[
                ("x_train", npy(&[30, 8, 8], &x)),
                ("y_train", npy(&[30], &y)),
                ("x_test", x_test),
                ("y_test", y_test),
            ],
        );
        let out = dir.path().join(format!("out-{name}"));
        let (code, err) = train(&format!("npz:{}", file.display()), &out);
        assert!(matches!(code, Some(c) if c != 0), "{name}: {code:?} {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        for n in needles
            .iter()
            .chain(&[file.file_name().unwrap().to_str().unwrap()])
        {
            assert!(err.contains(n), "{name}: `{n}` not in: {err}");
        }
        assert!(
            !out.join("model.bpk").exists(),
            "{name}: a model was trained"
        );
    }
}

/// `x_train` of [n, 28, 20] panicked in the backend (an MLP of 784 inputs given 560): images
/// that are not square are refused when the data are opened.
#[test]
fn images_that_are_not_square_are_refused_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wide.npz");
    // The pixels of 30 images of 28x28 as 42 images of 28x20.
    let (x, _) = images(30, 28, 1);
    let wide = npy(&[42, 28, 20], &x[..42 * 28 * 20]);
    let labels: Vec<u8> = (0..42).map(|i| (i % 3) as u8).collect();
    write_npz(
        &file,
        &[("x_train", wide), ("y_train", npy(&[42], &labels))],
    );
    let (code, err) = train(&format!("npz:{}", file.display()), &dir.path().join("out"));
    assert!(matches!(code, Some(c) if c != 0), "{code:?} {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("wide.npz") && err.contains("28x20") && err.contains("square"),
        "{err}"
    );
}
