//! `cargo xtask reproduce` checks its arguments before any work: `--resume` needs a started
//! run, the output directory must be writable, and the limits hold. None of these reads data.

use std::path::Path;
use std::process::Command;

/// Runs `reproduce fashion-mnist --quick` with `args` and expects a clean refusal naming
/// `needle`; returns the message.
fn refused(args: &[&str], needle: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["reproduce", "fashion-mnist", "--quick"])
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{args:?} succeeded: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: `{needle}` not in: {err}");
    err
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `--resume` into a missing directory, or one that holds no run (no `setup.json`), used to
/// start the whole run afresh; a stage the run never reached still starts (the kill test's
/// `redone` run).
#[test]
fn reproduce_resume_needs_a_started_run() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let err = refused(&["--resume", "--out", s(&missing)], "does not exist");
    assert!(err.contains(s(&missing)), "{err}");
    assert!(!missing.exists());
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    refused(&["--resume", "--out", s(&empty)], "setup.json is missing");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}

/// A run made before seed numbers and validation splits were recorded (its setup.json has
/// neither) was seed 0 and trained on every training image: `--resume` with today's defaults
/// (seed number 6, a 5,000-image split) is refused, naming the flag that resumes it as it was
/// made, before anything is read or written.
#[test]
fn reproduce_resume_refuses_another_seed_or_validation_split() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("old");
    std::fs::create_dir(&out).unwrap();
    let old = r#"{"dataset": "fashion-mnist", "arch": "lenet5"}"#;
    std::fs::write(out.join("setup.json"), old).unwrap();
    let err = refused(&["--resume", "--out", s(&out)], "--seed-offset 0");
    assert!(err.contains("seed number 0"), "{err}");
    let err = refused(
        &["--resume", "--seed-offset", "0", "--out", s(&out)],
        "--validation 0",
    );
    assert!(err.contains("validation split is none"), "{err}");
    assert_eq!(
        std::fs::read_to_string(out.join("setup.json")).unwrap(),
        old
    );
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        1,
        "nothing written"
    );
}

#[test]
fn reproduce_checks_limits_and_output_first() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    refused(&["--out", "/proc/x"], "/proc");
    for (flag, value) in [
        ("--samples", "100000000"),
        ("--samples", "0"),
        ("--test-subset", "0"),
        ("--seeds", "0"),
    ] {
        refused(&[flag, value, "--out", s(&out)], "out of range");
    }
    let patch = tmp.path().join("setup.json");
    std::fs::write(
        &patch,
        r#"{"compress": {"sharing": {"gmm": {"k": 65535}}}}"#,
    )
    .unwrap();
    refused(&["--setup", s(&patch), "--out", s(&out)], "32768");
    assert!(!out.exists());
}

/// The benchmarks' counts are checked too (a zero batch or step count, or a codebook the
/// format cannot store, used to reach the benchmark).
#[test]
fn bench_checks_its_counts_first() {
    for (args, needle) in [
        (
            &["mc-inference", "--samples", "100000000"][..],
            "out of range",
        ),
        (&["mc-inference", "--batches", "0"][..], "out of range"),
        (&["train-step", "--batch", "0"][..], "out of range"),
        (
            &["stages", "--weights", "1000", "--k", "65535"][..],
            "32768",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .arg("bench")
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: `{needle}` not in: {err}");
    }
}

/// `gpu-kit` checks the headers and the data it was given before it builds anything (a build
/// takes many minutes).
#[test]
fn gpu_kit_checks_its_inputs_before_building() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .arg("gpu-kit")
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = run(&["--cuda-include", s(tmp.path())]);
    assert!(
        err.contains("no cuda_fp16.h") && err.contains(s(tmp.path())),
        "{err}"
    );
    std::fs::write(tmp.path().join("cuda_fp16.h"), "").unwrap();
    std::fs::write(tmp.path().join("mma.h"), "").unwrap();
    let err = run(&["--cuda-include", s(tmp.path()), "--data", s(tmp.path())]);
    assert!(err.contains("Fashion-MNIST"), "{err}");
    assert!(!err.contains("Compiling"), "{err}");
}

/// A user's data set that cannot be read is refused naming the file, before any run starts.
#[test]
fn reproduce_names_a_users_data_set_it_cannot_read() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing.npz");
    let out = tmp.path().join("run");
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["reproduce", &format!("npz:{}", s(&missing)), "--quick"])
        .args(["--out", s(&out)])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("missing.npz"), "{err}");
    assert!(!out.exists(), "nothing is written: {err}");
}

/// `--ood heldout:CLASSES` parses into the plan (it once panicked in clap: the field's type
/// did not match its parser's), and a malformed one is refused with the reason.
#[test]
fn reproduce_takes_a_held_out_ood_choice() {
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "reproduce",
            "fashion-mnist",
            "--quick",
            "--dry-run",
            "--ood",
            "heldout:6,9",
        ])
        .args(["--out", s(&tmp.path().join("run"))])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "--ood heldout:6,9 failed: {err}");
    assert!(!err.contains("panicked"), "{err}");
    refused(&["--dry-run", "--ood", "heldout:6,x"], "`x`");
}
