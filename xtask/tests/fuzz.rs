//! The short, fixed-seed fuzz run of CI: every target, no panic, no execution beyond the heap
//! bound (`cargo xtask fuzz all --iterations 3000 --seed 1`; docs/benchmarks.md has the long
//! runs).

use std::process::Command;

#[test]
fn every_reader_survives_a_short_fixed_seed_fuzz_run() {
    let saved = tempfile::tempdir().unwrap();
    let iterations = 3000;
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "fuzz",
            "all",
            "--iterations",
            &iterations.to_string(),
            "--seed",
            "1",
        ])
        .arg("--save-dir")
        .arg(saved.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let reports: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let targets: Vec<&str> = reports
        .iter()
        .map(|r| r["target"].as_str().unwrap())
        .collect();
    assert_eq!(
        targets,
        [
            "swb",
            "swb-cost",
            "idx",
            "cifar",
            "svhn-mat",
            "npy",
            "npz",
            "image",
            "checkpoint"
        ]
    );
    for r in &reports {
        assert_eq!(r["executions"], iterations, "{r}");
        assert_eq!(r["panics"], 0, "{r}");
        assert_eq!(r["over_bound"], 0, "{r}");
        // Mutations must not all be trivially refused: some inputs get through.
        assert!(r["accepted"].as_u64().unwrap() > 0, "{r}");
    }
    // The decode-cost target measured work on every input and none passed its bound.
    let cost = &reports[1];
    assert_eq!(cost["over_cost"], 0, "{cost}");
    assert!(cost["max_work_per_byte"].as_f64().unwrap() > 0.0, "{cost}");
}
