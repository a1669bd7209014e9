//! Outputs never replace a file the run did not create: a file that appears at `--out` while
//! a command runs is not replaced without `--force` (the check runs again at the final
//! rename, not only at the start), so of two concurrent runs exactly one wins; killed
//! writers' temporaries beside an output are removed by the next write; `--out -` means
//! standard output for `compress` as for `export`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

mod common;
use common::npz_fixture::write_image_npz;

fn swbnn_in(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_swbnn"));
    c.args(args)
        .current_dir(dir)
        .env("RUST_BACKTRACE", "0")
        .env_remove("SWBNN_DATA")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn run_in(dir: &Path, args: &[&str]) -> Output {
    swbnn_in(dir, args).output().expect("running swbnn")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok_in(dir: &Path, args: &[&str]) -> Output {
    let o = run_in(dir, args);
    assert!(o.status.success(), "{args:?} failed: {}", stderr(&o));
    o
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A Bayesian MLP trained on a small `.npz` data set, made once for the whole binary.
struct Fixture {
    _dir: tempfile::TempDir,
    dataset: String,
    bayes: PathBuf,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let npz = dir.path().join("data.npz");
        write_image_npz(&npz, 600, 0, 8);
        let dataset = format!("npz:{}", npz.display());
        let bayes = dir.path().join("bnn");
        ok_in(
            dir.path(),
            &[
                "train",
                "--dataset",
                &dataset,
                "--arch",
                "mlp",
                "--kind",
                "bayesian",
                "--epochs",
                "1",
                "--validation",
                "100",
                "--threads",
                "2",
                "--out",
                s(&bayes),
            ],
        );
        Fixture {
            _dir: dir,
            dataset,
            bayes,
        }
    })
}

fn compress_args<'a>(f: &'a Fixture, out: &'a str) -> Vec<&'a str> {
    vec![
        "compress",
        "--model",
        s(&f.bayes),
        "--dataset",
        &f.dataset,
        "--out",
        out,
        "--validation",
        "100",
        "--k",
        "4",
        "--epochs",
        "2",
    ]
}

fn export_args<'a>(f: &'a Fixture, out: &'a str) -> Vec<&'a str> {
    vec![
        "export",
        s(&f.bayes),
        "--convention",
        "bayesian-torch",
        "--out",
        out,
    ]
}

/// A file made at `--out` while `compress` runs, after its start-up check, used to be
/// replaced at its end (exit 0). It is kept now, and the run fails naming it.
#[test]
fn a_file_that_appears_at_out_during_compress_is_not_replaced() {
    let f = fixture();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("m.swb");
    // How long a whole run takes, to make the file half-way through the next one.
    let started = Instant::now();
    ok_in(tmp.path(), &compress_args(f, s(&out)));
    let took = started.elapsed();
    std::fs::remove_file(&out).unwrap();

    // The file must appear after the run's start-up check and before its final rename; an
    // attempt that misses that window (a busy machine makes a run slower or faster than the
    // first) says nothing and is made again at another point of the run.
    let theirs: &[u8] = b"another run's output";
    let mut overlapped = false;
    for fraction in [0.5, 0.3, 0.7, 0.5, 0.2] {
        let _ = std::fs::remove_file(&out);
        let mut child = swbnn_in(tmp.path(), &compress_args(f, s(&out)))
            .spawn()
            .unwrap();
        std::thread::sleep(took.mul_f64(fraction));
        if child.try_wait().unwrap().is_some() {
            continue; // finished before the file was made
        }
        std::fs::write(&out, theirs).unwrap();
        let o = child.wait_with_output().unwrap();
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{err}");
        if o.status.success() {
            // Our file is still there: the run had renamed its own before we wrote.
            assert_eq!(
                std::fs::read(&out).unwrap(),
                theirs,
                "compress replaced {}: {err}",
                out.display()
            );
            continue;
        }
        if !err.contains("appeared while this command ran") {
            // Made before the start-up check, which refused it as it should.
            assert!(err.contains("already exists"), "{err}");
            continue;
        }
        assert!(err.contains(s(&out)), "{err}");
        assert_eq!(std::fs::read(&out).unwrap(), theirs);
        overlapped = true;
        break;
    }
    assert!(
        overlapped,
        "no attempt made the file while the run was under way"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "temporaries left: {left:?}");
}

/// Two `export` runs to one new `--out` without `--force`: both passed the check at their
/// start and both succeeded, the later one replacing the other's file. Exactly one wins now.
#[test]
fn of_two_concurrent_exports_to_one_out_exactly_one_succeeds() {
    let f = fixture();
    let tmp = tempfile::tempdir().unwrap();
    // Several pairs: a pair whose second run starts after the first has written is refused by
    // the start-up check in either version; the ones that overlap are what this tests.
    for round in 0..6 {
        let out = tmp.path().join(format!("m{round}.safetensors"));
        let children: Vec<_> = (0..2)
            .map(|_| {
                swbnn_in(tmp.path(), &export_args(f, s(&out)))
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outputs: Vec<Output> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let won = outputs.iter().filter(|o| o.status.success()).count();
        let errs: Vec<String> = outputs.iter().map(stderr).collect();
        assert_eq!(won, 1, "round {round}: {won} of 2 runs succeeded: {errs:?}");
        let lost = outputs.iter().find(|o| !o.status.success()).unwrap();
        let err = stderr(lost);
        assert!(
            err.contains(s(&out)) && err.contains("already exists") && !err.contains("panicked"),
            "{err}"
        );
        assert!(std::fs::metadata(&out).unwrap().len() > 0);
    }
}

/// A temporary that a killed writer left beside an output (`.NAME.tmp-PID-RANDOM`, its
/// process gone) is removed by the next write of that output; a live process's is kept.
#[test]
fn a_dead_writer_s_temporary_beside_out_is_removed_by_the_next_write() {
    let f = fixture();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("m.safetensors");
    // 4000000 is above Linux's largest process id (2^22): never a live process.
    let dead = tmp.path().join(".m.safetensors.tmp-4000000-Ab3xYz");
    let live = tmp.path().join(".m.safetensors.tmp-1-Ab3xYz");
    std::fs::write(&dead, b"half a file").unwrap();
    std::fs::write(&live, b"being written").unwrap();
    ok_in(tmp.path(), &export_args(f, s(&out)));
    assert!(!dead.exists(), "the dead writer's temporary is left");
    assert!(live.exists(), "a live process's temporary was removed");
    assert!(out.exists());
}

/// `compress --out -` wrote a file named `-` (and the report to standard output), where
/// `export --out -` means standard output.
#[test]
fn compress_out_dash_writes_the_swb_bytes_to_standard_output() {
    let f = fixture();
    let tmp = tempfile::tempdir().unwrap();
    let o = ok_in(tmp.path(), &compress_args(f, "-"));
    assert!(!tmp.path().join("-").exists(), "a file named - was written");
    assert_eq!(
        &o.stdout[..swshare::format::MAGIC.len()],
        swshare::format::MAGIC,
        "standard output is not a .swb file"
    );
    // The same bytes as the file the same run writes (compression is repeatable).
    let file = tmp.path().join("m.swb");
    ok_in(tmp.path(), &compress_args(f, s(&file)));
    assert!(o.stdout == std::fs::read(&file).unwrap(), "other bytes");
    // The report went to standard error.
    assert!(!stderr(&o).is_empty());
}
