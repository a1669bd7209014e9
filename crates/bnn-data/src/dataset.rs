//! The `Dataset` trait, samples and the in-memory data set used by IDX, CIFAR and SVHN.

use crate::error::{DataError, Result};

/// The most classes a data set may have: ImageNet-21k's 21,841 classes rounded up to a power
/// of two (and below the model's own bound). Loaders that count classes from the data (the
/// largest label of a `.npz`, the sub-folders of a folder) refuse more before anything is
/// sized by the count: per-class tables (stratified subsets, class counts) take memory in
/// proportion to it, and one wrong label of 2^31 used to ask for 51 GB.
pub const MAX_CLASSES: usize = 32_768;

/// Which part of a data set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Split {
    /// The training part.
    Train,
    /// The test (or ImageNet validation) part.
    Test,
}

/// One image with its label: pixels are `u8`, channel-major (`[C, H, W]`, row-major).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// `channels * height * width` bytes, channel by channel, row by row.
    pub pixels: Vec<u8>,
    /// Number of channels (1 for grey, 3 for RGB).
    pub channels: usize,
    /// Image height in pixels.
    pub height: usize,
    /// Image width in pixels.
    pub width: usize,
    /// Class index, `0..classes`.
    pub label: u32,
}

impl Sample {
    /// `(channels, height, width)`.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.channels, self.height, self.width)
    }
}

/// A finite, indexable collection of labelled images.
///
/// Implementations are shared between loader threads, hence `Send + Sync`.
pub trait Dataset: Send + Sync {
    /// Number of samples.
    fn len(&self) -> usize;

    /// `true` when there are no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of classes; labels lie in `0..classes()`.
    fn classes(&self) -> usize;

    /// `(channels, height, width)` of every sample.
    fn shape(&self) -> (usize, usize, usize);

    /// The `index`-th sample.
    fn get(&self, index: usize) -> Result<Sample>;

    /// The label of the `index`-th sample; lazy data sets override this so that
    /// stratification does not decode images.
    fn label(&self, index: usize) -> Result<u32> {
        self.get(index).map(|s| s.label)
    }

    /// Targets per sample of a regression data set ([`crate::TabularDataset`]); 0 (the
    /// default) for a classification data set, whose samples are labelled images.
    ///
    /// A regression data set has no classes (`classes() == 0`) and no images: its samples are
    /// rows of `f32` features, `shape()`'s `C * H * W` of them, read with
    /// [`Dataset::append_row`].
    fn target_dim(&self) -> usize {
        0
    }

    /// Appends the features and the targets of row `index` of a regression data set to
    /// `features` and `targets`. A classification data set has no rows: the default is an
    /// error.
    fn append_row(
        &self,
        index: usize,
        features: &mut Vec<f32>,
        targets: &mut Vec<f32>,
    ) -> Result<()> {
        let _ = (index, features, targets);
        Err(DataError::Config(
            "a classification data set holds labelled images, not rows of features and \
             targets"
                .into(),
        ))
    }
}

impl<D: Dataset + ?Sized> Dataset for std::sync::Arc<D> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn classes(&self) -> usize {
        (**self).classes()
    }
    fn shape(&self) -> (usize, usize, usize) {
        (**self).shape()
    }
    fn get(&self, index: usize) -> Result<Sample> {
        (**self).get(index)
    }
    fn label(&self, index: usize) -> Result<u32> {
        (**self).label(index)
    }
    fn target_dim(&self) -> usize {
        (**self).target_dim()
    }
    fn append_row(
        &self,
        index: usize,
        features: &mut Vec<f32>,
        targets: &mut Vec<f32>,
    ) -> Result<()> {
        (**self).append_row(index, features, targets)
    }
}

impl<D: Dataset + ?Sized> Dataset for Box<D> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn classes(&self) -> usize {
        (**self).classes()
    }
    fn shape(&self) -> (usize, usize, usize) {
        (**self).shape()
    }
    fn get(&self, index: usize) -> Result<Sample> {
        (**self).get(index)
    }
    fn label(&self, index: usize) -> Result<u32> {
        (**self).label(index)
    }
    fn target_dim(&self) -> usize {
        (**self).target_dim()
    }
    fn append_row(
        &self,
        index: usize,
        features: &mut Vec<f32>,
        targets: &mut Vec<f32>,
    ) -> Result<()> {
        (**self).append_row(index, features, targets)
    }
}

/// A data set held in memory as one contiguous `u8` buffer of CHW images.
#[derive(Debug, Clone)]
pub struct InMemoryDataset {
    pixels: Vec<u8>,
    labels: Vec<u32>,
    shape: (usize, usize, usize),
    classes: usize,
}

impl InMemoryDataset {
    /// Builds a data set from `labels.len()` images of `shape`, stored one after another in CHW order.
    ///
    /// Fails when the buffer length does not match, a label is `>= classes`, or `classes` is
    /// above [`MAX_CLASSES`].
    pub fn new(
        pixels: Vec<u8>,
        labels: Vec<u32>,
        shape: (usize, usize, usize),
        classes: usize,
    ) -> Result<Self> {
        let per = shape.0 * shape.1 * shape.2;
        if per == 0 {
            return Err(DataError::Config(format!(
                "image shape {shape:?} has a zero dimension"
            )));
        }
        if classes > MAX_CLASSES {
            return Err(DataError::Config(format!(
                "{classes} classes: more than the {MAX_CLASSES} a data set may have"
            )));
        }
        if pixels.len() != per * labels.len() {
            return Err(DataError::Config(format!(
                "{} pixel bytes do not hold {} images of shape {shape:?}",
                pixels.len(),
                labels.len()
            )));
        }
        if let Some((i, &l)) = labels
            .iter()
            .enumerate()
            .find(|&(_, &l)| l as usize >= classes)
        {
            return Err(DataError::Config(format!(
                "label {l} of sample {i} is not below the class count {classes}"
            )));
        }
        Ok(InMemoryDataset {
            pixels,
            labels,
            shape,
            classes,
        })
    }

    /// All labels, in sample order.
    pub fn labels(&self) -> &[u32] {
        &self.labels
    }

    /// The raw pixel bytes of sample `index` (CHW), without copying.
    pub fn pixels_of(&self, index: usize) -> Result<&[u8]> {
        if index >= self.labels.len() {
            return Err(DataError::IndexOutOfRange {
                index,
                len: self.labels.len(),
            });
        }
        let per = self.shape.0 * self.shape.1 * self.shape.2;
        Ok(&self.pixels[index * per..(index + 1) * per])
    }

    /// The whole pixel buffer.
    pub fn pixels(&self) -> &[u8] {
        &self.pixels
    }

    /// Number of samples of each class.
    pub fn class_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.classes];
        for &l in &self.labels {
            counts[l as usize] += 1;
        }
        counts
    }
}

impl Dataset for InMemoryDataset {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn classes(&self) -> usize {
        self.classes
    }
    fn shape(&self) -> (usize, usize, usize) {
        self.shape
    }
    fn get(&self, index: usize) -> Result<Sample> {
        let pixels = self.pixels_of(index)?.to_vec();
        Ok(Sample {
            pixels,
            channels: self.shape.0,
            height: self.shape.1,
            width: self.shape.2,
            label: self.labels[index],
        })
    }
    fn label(&self, index: usize) -> Result<u32> {
        self.labels
            .get(index)
            .copied()
            .ok_or(DataError::IndexOutOfRange {
                index,
                len: self.labels.len(),
            })
    }
}
