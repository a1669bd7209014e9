//! Per-channel normalisation and each data set's statistics.

use std::borrow::Cow;

use super::{Image, Transform};
use crate::dataset::Dataset;
use crate::error::{DataError, Result};
use crate::rng::SampleRng;

/// Per-channel mean and standard deviation of a data set's pixels scaled to `[0, 1]`: a
/// preset's published constants, or measured on the user's training images
/// ([`NormStats::measure`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NormStats {
    /// Mean per channel.
    pub mean: Cow<'static, [f32]>,
    /// Standard deviation per channel.
    pub std: Cow<'static, [f32]>,
}

impl NormStats {
    /// Statistics from per-channel `mean` and `std`: as many of each, every value finite and
    /// every `std` positive, else an error naming the value.
    pub fn new(mean: Vec<f32>, std: Vec<f32>) -> Result<Self> {
        if mean.is_empty() || mean.len() != std.len() {
            return Err(DataError::Config(format!(
                "normalisation needs as many means as stds, at least one: {} means, {} stds",
                mean.len(),
                std.len()
            )));
        }
        if let Some(m) = mean.iter().find(|m| !m.is_finite()) {
            return Err(DataError::Config(format!(
                "normalisation mean {m} is not finite"
            )));
        }
        if let Some(s) = std.iter().find(|&&s| !(s.is_finite() && s > 0.0)) {
            return Err(DataError::Config(format!(
                "normalisation std {s} is not positive"
            )));
        }
        Ok(NormStats {
            mean: Cow::Owned(mean),
            std: Cow::Owned(std),
        })
    }

    /// The per-channel mean and (population) standard deviation of every pixel of `data`,
    /// scaled to `[0, 1]`, as torchvision users compute them for their own data. Sums run in
    /// `f64`, so the result does not depend on the order. A channel of one constant value
    /// gets std 1 (nothing to scale); an empty data set is an error.
    pub fn measure(data: &dyn Dataset) -> Result<Self> {
        if data.is_empty() {
            return Err(DataError::Config(
                "cannot measure the normalisation of an empty data set".into(),
            ));
        }
        let (c, h, w) = data.shape();
        let plane = h * w;
        let (mut sum, mut sum_sq) = (vec![0f64; c], vec![0f64; c]);
        for i in 0..data.len() {
            let sample = data.get(i)?;
            for (ch, pixels) in sample.pixels.chunks(plane.max(1)).enumerate().take(c) {
                for &p in pixels {
                    let v = p as f64;
                    sum[ch] += v;
                    sum_sq[ch] += v * v;
                }
            }
        }
        let n = (data.len() * plane) as f64;
        let mean: Vec<f64> = sum.iter().map(|s| s / n).collect();
        let std: Vec<f32> = sum_sq
            .iter()
            .zip(&mean)
            .map(|(sq, m)| {
                let var = (sq / n - m * m).max(0.0);
                match var.sqrt() / 255.0 {
                    s if s > 1e-6 => s as f32,
                    _ => 1.0,
                }
            })
            .collect();
        let mean = mean.iter().map(|m| (m / 255.0) as f32).collect();
        NormStats::new(mean, std)
    }

    /// MNIST training set (the customary constants).
    pub const MNIST: NormStats = NormStats {
        mean: Cow::Borrowed(&[0.1307]),
        std: Cow::Borrowed(&[0.3081]),
    };
    /// Fashion-MNIST training set.
    pub const FASHION_MNIST: NormStats = NormStats {
        mean: Cow::Borrowed(&[0.2860]),
        std: Cow::Borrowed(&[0.3530]),
    };
    /// CIFAR-10 training set (population std over all pixels).
    pub const CIFAR10: NormStats = NormStats {
        mean: Cow::Borrowed(&[0.4914, 0.4822, 0.4465]),
        std: Cow::Borrowed(&[0.2470, 0.2435, 0.2616]),
    };
    /// CIFAR-100 training set, as given in the paper's hyper-parameter table.
    pub const CIFAR100: NormStats = NormStats {
        mean: Cow::Borrowed(&[0.5071, 0.4865, 0.4409]),
        std: Cow::Borrowed(&[0.2673, 0.2564, 0.2761]),
    };
    /// SVHN training set (the customary constants).
    pub const SVHN: NormStats = NormStats {
        mean: Cow::Borrowed(&[0.4377, 0.4438, 0.4728]),
        std: Cow::Borrowed(&[0.1980, 0.2010, 0.1970]),
    };
    /// ImageNet-1k (torchvision's constants).
    pub const IMAGENET: NormStats = NormStats {
        mean: Cow::Borrowed(&[0.485, 0.456, 0.406]),
        std: Cow::Borrowed(&[0.229, 0.224, 0.225]),
    };
}

/// `(x - mean[c]) / std[c]` per channel (torchvision `Normalize`).
#[derive(Debug, Clone, PartialEq)]
pub struct Normalize {
    /// The statistics used.
    pub stats: NormStats,
}

impl Normalize {
    /// Normalisation with `stats`.
    pub fn new(stats: NormStats) -> Self {
        Normalize { stats }
    }
}

impl Transform for Normalize {
    fn apply(&self, mut image: Image, _rng: &mut SampleRng) -> Result<Image> {
        let (mean, std) = (&self.stats.mean, &self.stats.std);
        if mean.len() != image.channels || std.len() != image.channels {
            return Err(DataError::Config(format!(
                "Normalize has {} means / {} stds for a {}-channel image",
                mean.len(),
                std.len(),
                image.channels
            )));
        }
        if let Some(s) = std.iter().find(|&&s| !(s.is_finite() && s > 0.0)) {
            return Err(DataError::Config(format!(
                "Normalize std {s} is not positive"
            )));
        }
        let plane = image.height * image.width;
        for (c, chunk) in image.data.chunks_mut(plane.max(1)).enumerate() {
            let (m, inv) = (mean[c], 1.0 / std[c]);
            for v in chunk {
                *v = (*v - m) * inv;
            }
        }
        Ok(image)
    }
}
