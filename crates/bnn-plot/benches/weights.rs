//! The weights figure for ResNet-20's size (270k weights, 1,608 Gaussians after merging, as
//! the full Fashion-MNIST run) and for a million weights, into PNG and SVG at the report's size.
//! `cargo bench -p bnn-plot --bench weights`; target: under 2 s for 270k weights in release.

#[path = "../tests/fixtures/mod.rs"]
mod fixtures;

use bnn_plot::{Size, WeightsOptions, WeightsPlot, weights};
use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut group = c.benchmark_group("weights_figure");
    group.sample_size(10);
    for (label, n) in [("270k", 270_000), ("1M", 1_000_000)] {
        let w = fixtures::weights(n, 1608);
        let data = WeightsPlot {
            title: "bench",
            mu: &w.mu,
            sigma: &w.sigma,
            fates: &w.fates,
            gaussians: &w.gaussians,
        };
        for ext in ["png", "svg"] {
            let path = dir.path().join(format!("w.{ext}"));
            group.bench_function(format!("{label}_{ext}"), |b| {
                b.iter(|| {
                    weights(
                        &data,
                        &WeightsOptions::default(),
                        Size::new(1100, 750),
                        &path,
                    )
                    .expect("figure")
                })
            });
        }
    }
    // For comparison: every one of the 270k weights as a dot (the density switched off).
    let w = fixtures::weights(270_000, 1608);
    let data = WeightsPlot {
        title: "bench",
        mu: &w.mu,
        sigma: &w.sigma,
        fates: &w.fates,
        gaussians: &w.gaussians,
    };
    let all_dots = WeightsOptions {
        dot_limit: usize::MAX,
        ..Default::default()
    };
    let path = dir.path().join("w.png");
    group.bench_function("270k_png_every_weight_a_dot", |b| {
        b.iter(|| weights(&data, &all_dots, Size::new(1100, 750), &path).expect("figure"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
