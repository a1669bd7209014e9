//! Throughput of the GMM hot path (`log_pdf`, `mahalanobis_sq`, `w2_sq`), printed as JSON.
//!
//! `cargo run -p gauss2d --release --example log_pdf_throughput`

use std::hint::black_box;
use std::time::Instant;

use gauss2d::{Gaussian2, Matrix2, Vector2, w2_sq};

fn main() -> Result<(), gauss2d::Gauss2dError> {
    const K: usize = 64;
    const N: usize = 200_000;
    let comps: Vec<Gaussian2> = (0..K)
        .map(|k| {
            let t = k as f64 / K as f64;
            Gaussian2::new(
                Vector2::new(t - 0.5, 0.01 + 0.02 * t),
                Matrix2::new(1e-3 + t * 1e-3, 2e-5, 2e-5, 1e-5 + t * 1e-5),
            )
        })
        .collect::<Result<_, _>>()?;
    // Deterministic points (low-discrepancy sequence, no RNG dependency).
    let points: Vec<Vector2<f64>> = (0..N)
        .map(|i| {
            let u = (i as f64 * 0.618_033_988_749_895).fract();
            let v = (i as f64 * 0.754_877_666_246_693).fract();
            Vector2::new(u - 0.5, 0.04 * v)
        })
        .collect();

    let start = Instant::now();
    let mut acc = 0.0;
    for x in &points {
        for g in &comps {
            acc += g.log_pdf(black_box(x));
        }
    }
    let log_pdf_ns = start.elapsed().as_secs_f64() * 1e9 / (N * K) as f64;
    black_box(acc);

    let start = Instant::now();
    let mut acc = 0.0;
    for x in &points {
        for g in &comps {
            acc += g.mahalanobis_sq(black_box(x));
        }
    }
    let maha_ns = start.elapsed().as_secs_f64() * 1e9 / (N * K) as f64;
    black_box(acc);

    let start = Instant::now();
    let mut acc = 0.0;
    let reps = 200;
    for _ in 0..reps {
        for a in &comps {
            for b in &comps {
                acc += w2_sq(black_box(a), black_box(b));
            }
        }
    }
    let w2_ns = start.elapsed().as_secs_f64() * 1e9 / (reps * K * K) as f64;
    black_box(acc);

    println!(
        "{{\"log_pdf_ns\": {log_pdf_ns:.3}, \"mahalanobis_sq_ns\": {maha_ns:.3}, \"w2_sq_ns\": {w2_ns:.3}, \"evaluations\": {}}}",
        N * K
    );
    Ok(())
}
