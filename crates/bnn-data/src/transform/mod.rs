//! Composable, seeded image transforms on `f32` CHW images.
//!
//! Every random decision is drawn from the [`SampleRng`] handed to
//! [`Transform::apply`]; the loader derives it from `(seed, epoch, sample index)`, so the
//! output never depends on which thread processed a sample.

mod color;
mod filter;
mod geometry;
mod normalize;

pub use color::{
    ColorJitter, adjust_brightness, adjust_contrast, adjust_hue, adjust_saturation, hsv_to_rgb,
    rgb_to_hsv,
};
pub use filter::gaussian_blur;
pub use geometry::{
    CenterCrop, HorizontalFlip, PadMode, RandomCrop, RandomHorizontalFlip, RandomResizedCrop,
    resize_bilinear, rotate_bilinear, translate,
};
pub use normalize::{NormStats, Normalize};

use crate::dataset::Sample;
use crate::error::Result;
use crate::rng::SampleRng;

/// A CHW image of `f32` values (in `[0, 1]` until normalised).
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// Number of channels.
    pub channels: usize,
    /// Height in pixels.
    pub height: usize,
    /// Width in pixels.
    pub width: usize,
    /// `channels * height * width` values, channel-major, row-major.
    pub data: Vec<f32>,
}

impl Image {
    /// The sample's bytes scaled to `[0, 1]` (torchvision's `ToTensor`).
    pub fn from_sample(sample: &Sample) -> Self {
        Image {
            channels: sample.channels,
            height: sample.height,
            width: sample.width,
            data: sample.pixels.iter().map(|&p| p as f32 / 255.0).collect(),
        }
    }

    /// A zero image of the given shape.
    pub fn zeros(channels: usize, height: usize, width: usize) -> Self {
        Image {
            channels,
            height,
            width,
            data: vec![0.0; channels * height * width],
        }
    }

    /// `(channels, height, width)`.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.channels, self.height, self.width)
    }

    /// Value at channel `c`, row `y`, column `x` (no bounds check beyond the slice's).
    #[inline]
    pub fn at(&self, c: usize, y: usize, x: usize) -> f32 {
        self.data[(c * self.height + y) * self.width + x]
    }
}

/// One step of an augmentation pipeline.
pub trait Transform: Send + Sync {
    /// Transforms `image`, drawing any randomness from `rng`.
    fn apply(&self, image: Image, rng: &mut SampleRng) -> Result<Image>;
}

impl<T: Transform + ?Sized> Transform for Box<T> {
    fn apply(&self, image: Image, rng: &mut SampleRng) -> Result<Image> {
        (**self).apply(image, rng)
    }
}

impl<T: Transform + ?Sized> Transform for std::sync::Arc<T> {
    fn apply(&self, image: Image, rng: &mut SampleRng) -> Result<Image> {
        (**self).apply(image, rng)
    }
}

/// Transforms applied one after another; an empty `Compose` is the identity.
#[derive(Default)]
pub struct Compose {
    steps: Vec<Box<dyn Transform>>,
}

impl Compose {
    /// An empty pipeline.
    pub fn new() -> Self {
        Compose { steps: Vec::new() }
    }

    /// Appends a step.
    pub fn then(mut self, step: impl Transform + 'static) -> Self {
        self.steps.push(Box::new(step));
        self
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// `true` when the pipeline has no step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

impl std::fmt::Debug for Compose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Compose({} steps)", self.steps.len())
    }
}

impl Transform for Compose {
    fn apply(&self, mut image: Image, rng: &mut SampleRng) -> Result<Image> {
        for step in &self.steps {
            image = step.apply(image, rng)?;
        }
        Ok(image)
    }
}
