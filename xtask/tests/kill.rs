//! SIGKILL during `cargo xtask reproduce` at seeded random points never leaves a half-written
//! or inconsistent stage, and `--resume` finishes with the table of an uninterrupted run.
//! Uses the real Fashion-MNIST (CI installs it); `SWBNN_KILLS=<n>` sets the kills.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn reproduce(out: &Path, resume: bool, patch: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xtask"));
    c.args([
        "reproduce",
        "fashion-mnist",
        "--arch",
        "mlp",
        "--train-subset",
        "400",
        "--test-subset",
        "200",
        "--epochs",
        "2,2,1",
        "--samples",
        "2",
    ])
    .arg("--out")
    .arg(out)
    .arg("--setup")
    .arg(patch)
    .env("RUST_BACKTRACE", "0")
    .env_remove("SWBNN_DATA")
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    if resume {
        c.arg("--resume");
    }
    c
}

fn run_ok(mut c: Command) {
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The table's rows without their timings.
fn rows(out: &Path) -> Vec<serde_json::Value> {
    let mut rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(out.join("table.json")).unwrap()).unwrap();
    for r in &mut rows {
        r.as_object_mut().unwrap().remove("train_seconds");
    }
    rows
}

#[test]
fn killed_reproduction_resumes_to_the_same_table() {
    let tmp = tempfile::tempdir().unwrap();
    let patch = tmp.path().join("setup.json");
    std::fs::write(
        &patch,
        r#"{"compress": {"sharing": {"gmm": {"k": 16}, "refine": {"n_min": 10}}}}"#,
    )
    .unwrap();
    let whole = tmp.path().join("whole");
    let started = Instant::now();
    run_ok(reproduce(&whole, false, &patch));
    let seconds = started.elapsed().as_secs_f64();

    // The 2DGBNN stage redone from the checkpointed BBB model gives the table of the run that
    // had it in memory (it did not, by 1e-9, before training returned the committed model).
    let redone = tmp.path().join("redone");
    copy_dir(&whole, &redone);
    std::fs::remove_dir_all(redone.join("stages/2dgbnn")).unwrap();
    run_ok(reproduce(&redone, true, &patch));
    assert_same(&rows(&redone), &rows(&whole));

    let out = tmp.path().join("killed");
    let kills: usize = std::env::var("SWBNN_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..kills {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let delay =
            Duration::from_secs_f64(0.2 + (seconds - 0.2) * (x >> 11) as f64 / (1u64 << 53) as f64);
        // `--resume` needs a started run: one killed before its setup.json starts afresh.
        let mut child = reproduce(&out, out.join("setup.json").exists(), &patch)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while t.elapsed() < delay && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        child.wait().unwrap();
        // Every stage's state, if committed, names files that are there.
        for stage in ["deterministic", "bbb", "2dgbnn"] {
            let dir = out.join("stages").join(stage);
            if let Ok(bytes) = std::fs::read(dir.join("state.json")) {
                let state: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                let files = dir.join(state["commit"]["files"].as_str().unwrap());
                assert!(files.join("model.bpk").is_file(), "{stage}");
                assert!(files.join("optimizer.bpk").is_file(), "{stage}");
            }
        }
    }
    run_ok(reproduce(&out, out.join("setup.json").exists(), &patch));
    assert_same(&rows(&out), &rows(&whole));
}

fn assert_same(got: &[serde_json::Value], want: &[serde_json::Value]) {
    for (g, w) in got.iter().zip(want) {
        for (k, v) in w.as_object().unwrap() {
            assert_eq!(&g[k], v, "{} {k}: the resumed table differs", w["method"]);
        }
    }
    assert_eq!(got.len(), want.len());
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
