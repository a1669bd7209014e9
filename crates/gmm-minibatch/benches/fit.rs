//! Criterion bench: fit on ~1M synthetic points with K = 500.
use criterion::{Criterion, criterion_group, criterion_main};
use gmm_minibatch::{GmmConfig, fit, synthetic_cloud};

fn bench_fit(c: &mut Criterion) {
    let points = synthetic_cloud(1_000_000, 0);
    let cfg = GmmConfig {
        k: 500,
        ..GmmConfig::default()
    };
    let mut g = c.benchmark_group("gmm-minibatch");
    g.sample_size(10);
    g.bench_function("fit_1M_k500", |b| {
        b.iter(|| fit(&points, None, &cfg).expect("fit"))
    });
    let model = fit(&points, None, &cfg).expect("fit");
    g.bench_function("assign_1M_k500", |b| {
        b.iter(|| {
            model
                .assign_and_mean_log_likelihood(&points)
                .expect("assign")
        })
    });
    g.finish();
}

criterion_group!(benches, bench_fit);
criterion_main!(benches);
