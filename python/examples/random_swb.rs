//! Writes a weight-shared `.swb` model of an architecture with randomly initialised weights
//! (stages 1-2 on a fresh Bayesian network, no training): a model for throughput benchmarks
//! and for trying the Python package without training one.
//!
//! ```text
//! cargo run --release -p swbnn-python --example random_swb -- --arch lenet5 --out lenet5.swb [--k 64] [--side 28] [--channels 1] [--classes 10]
//! ```

use bnn_layers::{device_by_name, export_bayes};
use bnn_models::{Arch, Kind, ModelConfig};
use swshare::burn_edges::{initial_swb, table_from_tensors};
use swshare::format::{self, SaveOptions};
use swshare::{SwshareConfig, build_plan};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let num = |name: &str, default: usize| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(get(name).map(|v| v.parse()).transpose()?.unwrap_or(default))
    };
    let arch: Arch = get("--arch").unwrap_or_else(|| "lenet5".into()).parse()?;
    let out = get("--out").ok_or("usage: --arch ARCH --out FILE.swb [--k K]")?;
    let device = device_by_name("flex")?;
    device.seed(num("--seed", 0)? as u64);
    let config = ModelConfig::for_input(
        arch,
        Kind::Bayesian,
        num("--classes", 10)?,
        num("--channels", 1)?,
        num("--side", 28)?,
    );
    let bayes = config.init(&device)?;
    let table = table_from_tensors(&export_bayes(&bayes, None))?;
    let mut cfg = SwshareConfig::default();
    cfg.gmm.k = num("--k", 64)?;
    let (plan, report) = build_plan(&table, &cfg)?;
    let data = initial_swb(&config, &bayes, &table, &plan)?;
    let sizes = format::save(&out, &data, &SaveOptions::default())?;
    println!(
        "{}",
        serde_json::json!({
            "out": out, "arch": arch.to_string(), "gaussians": plan.k(),
            "shareable_weights": report.shareable_weights, "bytes": sizes.total,
        })
    );
    Ok(())
}
