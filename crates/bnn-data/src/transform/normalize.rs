//! Per-channel normalisation and each data set's statistics.

use super::{Image, Transform};
use crate::error::{DataError, Result};
use crate::rng::SampleRng;

/// Per-channel mean and standard deviation of a data set's pixels scaled to `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormStats {
    /// Mean per channel.
    pub mean: &'static [f32],
    /// Standard deviation per channel.
    pub std: &'static [f32],
}

impl NormStats {
    /// MNIST training set (the customary constants).
    pub const MNIST: NormStats = NormStats {
        mean: &[0.1307],
        std: &[0.3081],
    };
    /// Fashion-MNIST training set.
    pub const FASHION_MNIST: NormStats = NormStats {
        mean: &[0.2860],
        std: &[0.3530],
    };
    /// CIFAR-10 training set (population std over all pixels).
    pub const CIFAR10: NormStats = NormStats {
        mean: &[0.4914, 0.4822, 0.4465],
        std: &[0.2470, 0.2435, 0.2616],
    };
    /// CIFAR-100 training set, as given in the paper's hyper-parameter table.
    pub const CIFAR100: NormStats = NormStats {
        mean: &[0.5071, 0.4865, 0.4409],
        std: &[0.2673, 0.2564, 0.2761],
    };
    /// SVHN training set (the customary constants).
    pub const SVHN: NormStats = NormStats {
        mean: &[0.4377, 0.4438, 0.4728],
        std: &[0.1980, 0.2010, 0.1970],
    };
    /// ImageNet-1k (torchvision's constants).
    pub const IMAGENET: NormStats = NormStats {
        mean: &[0.485, 0.456, 0.406],
        std: &[0.229, 0.224, 0.225],
    };
}

/// `(x - mean[c]) / std[c]` per channel (torchvision `Normalize`).
#[derive(Debug, Clone, Copy, PartialEq)]
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
        let (mean, std) = (self.stats.mean, self.stats.std);
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
