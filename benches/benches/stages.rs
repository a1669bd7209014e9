//! Criterion benchmarks of the burn-free weight-sharing stages on synthetic data:
//! the W2 distance, the GMM fit, and stages 1-2 (`build_plan`) on a ResNet-20-sized table.
//!
//! `cargo bench -p swbnn-benches`

use criterion::{Criterion, criterion_group, criterion_main};
use gauss2d::{Gaussian2, Matrix2, Vector2, w2_sq};
use gmm_minibatch::{GmmConfig, fit, synthetic_cloud};
use swshare::synth::{SynthSpec, synthetic_table};
use swshare::{SwshareConfig, build_plan};

fn bench_w2(c: &mut Criterion) {
    let a = Gaussian2::new(
        Vector2::new(0.01, 0.002),
        Matrix2::new(1e-4, 2e-6, 2e-6, 1e-7),
    )
    .unwrap();
    let b = Gaussian2::new(
        Vector2::new(0.02, 0.003),
        Matrix2::new(2e-4, -1e-6, -1e-6, 3e-7),
    )
    .unwrap();
    c.bench_function("gauss2d w2_sq", |bench| {
        bench.iter(|| w2_sq(std::hint::black_box(&a), std::hint::black_box(&b)))
    });
}

fn bench_gmm(c: &mut Criterion) {
    let points = synthetic_cloud(200_000, 7);
    let cfg = GmmConfig {
        k: 500,
        ..Default::default()
    };
    let mut g = c.benchmark_group("gmm");
    g.sample_size(10);
    g.bench_function("fit 200k points, K=500", |bench| {
        bench.iter(|| fit(&points, None, &cfg).unwrap())
    });
    g.finish();
}

fn bench_plan(c: &mut Criterion) {
    let table = synthetic_table(&SynthSpec {
        n_shareable: 270_000,
        layers: 20,
        ..Default::default()
    })
    .unwrap();
    let mut cfg = SwshareConfig::default();
    cfg.gmm.k = 2000;
    let mut g = c.benchmark_group("swshare");
    g.sample_size(10);
    g.bench_function("build_plan ResNet-20 size, K=2000", |bench| {
        bench.iter(|| build_plan(&table, &cfg).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench_w2, bench_gmm, bench_plan);
criterion_main!(benches);
