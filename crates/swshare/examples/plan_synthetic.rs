//! Builds a sharing plan for a synthetic 1M-weight table and prints the report as JSON.
//!
//! ```text
//! cargo run --release -p swshare --no-default-features --example plan_synthetic -- \
//!     [--n 1000000] [--k 2000] [--tau-d 1.5e-7] [--tau-v 0.01] [--seed 0]
//! ```
//!
//! The output is one JSON object: `{"n_weights", "k", "tau_d", "tau_v", "table_s",
//! "threads", "report": CompressionReport}`; timings per stage are in `report.timings`.

use std::time::Instant;

use swshare::synth::{SynthSpec, synthetic_table};
use swshare::{SwshareConfig, build_plan};

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = arg(&args, "--n").unwrap_or(1_000_000);
    let mut cfg = SwshareConfig::default();
    if let Some(k) = arg(&args, "--k") {
        cfg.gmm.k = k;
    }
    if let Some(t) = arg(&args, "--tau-d") {
        cfg.refine.merge.tau_d = t;
    }
    cfg.refine.merge.tau_v = arg(&args, "--tau-v");
    if let Some(s) = arg(&args, "--seed") {
        cfg.gmm.seed = s;
    }

    let t = Instant::now();
    let table = synthetic_table(&SynthSpec {
        n_shareable: n,
        layers: 20,
        ..Default::default()
    })?;
    let table_s = t.elapsed().as_secs_f64();

    let (plan, report) = build_plan(&table, &cfg)?;
    plan.validate()?;
    let out = serde_json::json!({
        "n_weights": table.len(),
        "k": cfg.gmm.k,
        "tau_d": cfg.refine.merge.tau_d,
        "tau_v": cfg.refine.merge.tau_v,
        "table_s": table_s,
        "threads": rayon::current_num_threads(),
        "report": report,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    eprintln!("{report}");
    Ok(())
}
