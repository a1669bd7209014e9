//! Measures loader throughput (images per second) with the paper's augmentations and
//! prints one JSON object per configuration.
//!
//! Run: `cargo run -p bnn-data --example throughput [-- --data DIR]`
//! (with `--data`, Fashion-MNIST is also measured when found there or in the usual places).

use std::sync::Arc;
use std::time::Instant;

use bnn_data::{
    DataLoader, Dataset, DatasetId, InMemoryDataset, LoaderConfig, Locator, Split, Transform,
};

fn synthetic(n: usize, shape: (usize, usize, usize)) -> InMemoryDataset {
    let per = shape.0 * shape.1 * shape.2;
    let pixels = (0..n * per)
        .map(|k| ((k * 2654435761) >> 13) as u8)
        .collect();
    let labels = (0..n).map(|i| (i % 10) as u32).collect();
    InMemoryDataset::new(pixels, labels, shape, 10).expect("consistent synthetic data")
}

fn measure(name: &str, data: Arc<dyn Dataset>, transform: Arc<dyn Transform>, batch: usize) {
    for workers in [0, 1, 2] {
        let config = LoaderConfig {
            batch_size: batch,
            workers,
            prefetch: 4,
            seed: 1,
            ..Default::default()
        };
        let loader = DataLoader::from_arcs(data.clone(), transform.clone(), config)
            .expect("valid configuration");
        let start = Instant::now();
        let mut images = 0usize;
        for b in loader.epoch(0) {
            images += b.expect("batch loads").len();
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{{\"dataset\":\"{name}\",\"workers\":{workers},\"batch\":{batch},\"images\":{images},\"seconds\":{secs:.3},\"images_per_second\":{:.0}}}",
            images as f64 / secs
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let explicit = args
        .iter()
        .position(|a| a == "--data")
        .and_then(|i| args.get(i + 1))
        .map(Into::into);

    let cifar: Arc<dyn Dataset> = Arc::new(synthetic(10_000, (3, 32, 32)));
    measure(
        "synthetic-cifar (crop+flip+normalise)",
        cifar,
        Arc::new(DatasetId::Cifar10.train_transform()),
        128,
    );
    let imagenet: Arc<dyn Dataset> = Arc::new(synthetic(256, (3, 256, 256)));
    measure(
        "synthetic-imagenet-256 (rrc224+flip+jitter+normalise)",
        imagenet,
        Arc::new(DatasetId::ImageNet.train_transform()),
        32,
    );
    let locator = Locator {
        download: false,
        ..Locator::from_env(explicit)
    };
    match bnn_data::open(DatasetId::FashionMnist, Split::Train, &locator) {
        Ok(data) => measure(
            "fashion-mnist-train (normalise)",
            data,
            Arc::new(DatasetId::FashionMnist.train_transform()),
            128,
        ),
        Err(e) => eprintln!("fashion-mnist not measured: {e}"),
    }
}
