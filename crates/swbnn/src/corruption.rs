//! Dataset shift for the corruptions figure: additive Gaussian pixel noise at the five
//! severities of ImageNet-C's `gaussian_noise` (Hendrycks & Dietterich 2019: standard
//! deviations 0.08, 0.12, 0.18, 0.26, 0.38 on `[0, 1]` pixels, clipped back to `[0, 1]`),
//! applied before the usual normalisation. Noise is drawn per image from the loader's
//! per-sample generator, so a severity's corrupted test set is the same every time.

use std::sync::Arc;

use bnn_data::{
    Compose, DataLoader, Image, LoaderConfig, Normalize, Result as DataResult, SampleRng, Transform,
};
use bnn_metrics::EvalSummary;
use bnn_plot::CorruptionSeries;
use bnn_train::predict;
use burn::prelude::*;
use models::Network;

use crate::Error;
use crate::data::norm_stats;
use crate::run_dir::{FIGURE_SEED, Loaders};

/// Noise standard deviation of severities 1 to 5 (ImageNet-C `gaussian_noise`).
pub const GAUSSIAN_NOISE: [f32; 5] = [0.08, 0.12, 0.18, 0.26, 0.38];

/// Adds `N(0, std^2)` to every pixel and clips to `[0, 1]`.
#[derive(Debug, Clone, Copy)]
pub struct GaussianNoise {
    /// Standard deviation on `[0, 1]` pixels.
    pub std: f32,
}

impl Transform for GaussianNoise {
    fn apply(&self, mut image: Image, rng: &mut SampleRng) -> DataResult<Image> {
        for v in &mut image.data {
            // Box-Muller from two uniforms of the sample's own generator.
            let u = rng.uniform().max(f64::MIN_POSITIVE);
            let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * rng.uniform()).cos();
            *v = (*v + self.std * z as f32).clamp(0.0, 1.0);
        }
        Ok(image)
    }
}

/// Accuracy, NLL and ECE of `model` on the clean test set (severity 0) and at each severity
/// of [`GAUSSIAN_NOISE`], with `samples` Monte Carlo passes.
pub fn noise_series(
    label: &str,
    model: &Network,
    loaders: &Loaders,
    device: &Device,
    samples: usize,
) -> Result<CorruptionSeries, Error> {
    let mut series = CorruptionSeries {
        name: label.to_string(),
        severity: Vec::new(),
        accuracy: Vec::new(),
        nll: Vec::new(),
        ece: Vec::new(),
    };
    let stats = norm_stats(loaders.dataset);
    for severity in 0..=GAUSSIAN_NOISE.len() {
        let mut t = Compose::new();
        if severity > 0 {
            t = t.then(GaussianNoise {
                std: GAUSSIAN_NOISE[severity - 1],
            });
        }
        let t = t.then(Normalize::new(stats));
        let config = LoaderConfig {
            batch_size: 256,
            shuffle: false,
            drop_last: false,
            seed: severity as u64,
            workers: loaders.workers,
            prefetch: 4,
        };
        let loader = DataLoader::from_arcs(loaders.test_data.clone(), Arc::new(t), config)?;
        device.seed(FIGURE_SEED);
        let p = predict(model, &loader, samples)?;
        let s = EvalSummary::compute(p.predictive.probabilities(), &p.labels)?;
        series.severity.push(severity as f64);
        series.accuracy.push(s.accuracy);
        series.nll.push(s.nll);
        series.ece.push(s.ece);
    }
    Ok(series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_seeded_clipped_and_of_the_right_size() {
        let img = Image {
            channels: 1,
            height: 40,
            width: 50,
            data: vec![0.5; 2000],
        };
        let noise = GaussianNoise { std: 0.1 };
        let a = noise.apply(img.clone(), &mut SampleRng::new(3)).unwrap();
        let b = noise.apply(img.clone(), &mut SampleRng::new(3)).unwrap();
        assert_eq!(a, b);
        let n = a.data.len() as f64;
        let mean = a.data.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let sd = (a
            .data
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / n)
            .sqrt();
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        assert!((sd - 0.1).abs() < 0.01, "{sd}");
        let big = GaussianNoise { std: 5.0 }
            .apply(img, &mut SampleRng::new(4))
            .unwrap();
        assert!(big.data.iter().all(|v| (0.0..=1.0).contains(v)));
    }
}
