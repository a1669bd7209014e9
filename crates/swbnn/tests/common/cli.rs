//! Running the `swbnn` binary from a test: the output, a run that must succeed, and one that
//! must be refused with a clear error (never a panic). Not every test uses every helper.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `swbnn` with `args`, without backtraces and without `$SWBNN_DATA`.
pub fn swbnn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_swbnn"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .env_remove("SWBNN_DATA")
        .output()
        .expect("running swbnn")
}

/// Runs `swbnn`, which must succeed; returns its standard output and standard error.
pub fn ok(args: &[&str]) -> (String, String) {
    let o = swbnn(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{args:?} failed: {err}");
    (String::from_utf8_lossy(&o.stdout).into_owned(), err)
}

/// Runs `swbnn`, which must fail without a panic, its standard error holding every needle.
pub fn refused(args: &[&str], needles: &[&str]) {
    let o = swbnn(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "{args:?} succeeded");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: `{n}` not in: {err}");
    }
}
