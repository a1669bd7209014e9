//! Fit a GMM to an `.npy` point cloud and print one JSON line; or generate a cloud.
//!
//! ```text
//! cargo run --release -p gmm-minibatch --example fit -- --points FILE.npy --k 2000 [--seed S]
//! cargo run --release -p gmm-minibatch --example fit -- --generate N --out FILE.npy [--seed S]
//! ```
//! Optional tuning flags: `--res R --epochs E --batch B --iters I --tol T`.

use std::time::Instant;

use gmm_minibatch::{GmmConfig, fit, npy, synthetic_cloud};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |name: &str| -> Option<String> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let seed: u64 = get("--seed").map(|s| s.parse()).transpose()?.unwrap_or(0);
    if let Some(n) = get("--generate") {
        let n: usize = n.parse()?;
        let out = get("--out").ok_or("--generate needs --out FILE.npy")?;
        let t = Instant::now();
        let pts = synthetic_cloud(n, seed);
        npy::write_points(&out, &pts)?;
        println!(
            "{}",
            serde_json::json!({"generated": n, "out": out, "seed": seed, "seconds": t.elapsed().as_secs_f64()})
        );
        return Ok(());
    }
    let path = get("--points")
        .ok_or("usage: --points FILE.npy --k K [--seed S] | --generate N --out FILE.npy")?;
    let mut cfg = GmmConfig {
        seed,
        ..GmmConfig::default()
    };
    if let Some(k) = get("--k") {
        cfg.k = k.parse()?;
    }
    if let Some(v) = get("--res") {
        cfg.histogram_resolution = v.parse()?;
    }
    if let Some(v) = get("--epochs") {
        cfg.minibatch_epochs = v.parse()?;
    }
    if let Some(v) = get("--batch") {
        cfg.batch_size = v.parse()?;
    }
    if let Some(v) = get("--iters") {
        cfg.max_iterations = v.parse()?;
    }
    if let Some(v) = get("--tol") {
        cfg.tolerance = v.parse()?;
    }
    let points = npy::read_points(&path)?;
    let t = Instant::now();
    let model = fit(&points, None, &cfg)?;
    let seconds_fit = t.elapsed().as_secs_f64();
    // What the GMM stage does: fit, then assign every point.
    let t = Instant::now();
    let assignment = model.assign(&points)?;
    let seconds_assign = t.elapsed().as_secs_f64();
    assert_eq!(assignment.len(), points.len());
    drop(assignment);
    // Quality of the fit: exact mean log-likelihood of every point (a separate pass).
    let t = Instant::now();
    let loglik = model.mean_log_likelihood(&points)?;
    let seconds_loglik = t.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "n": points.len(),
            "k": cfg.k,
            "k_final": model.k_final,
            "seconds_fit": seconds_fit,
            "seconds_assign": seconds_assign,
            "seconds_loglik": seconds_loglik,
            "loglik_per_point": loglik,
            "iterations": model.iterations,
            "minibatch_epochs": model.minibatch_epochs,
            "objective": model.objective,
            "threads": rayon::current_num_threads(),
        })
    );
    Ok(())
}
