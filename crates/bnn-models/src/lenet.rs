//! LeNet-5 (LeCun et al. 1998), with ReLU and max-pooling as is usual today.

use bnn_layers::CodebookView;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;

use crate::ModelError;
use crate::layers::{Conv, Dense, LayerFactory};

/// conv(5x5, 6, pad 2) - pool - conv(5x5, 16) - pool - 120 - 84 - classes.
#[derive(Module, Debug)]
pub struct LeNet5 {
    /// First convolution.
    pub conv1: Conv,
    /// Second convolution.
    pub conv2: Conv,
    /// Dense 16*s*s -> 120.
    pub fc1: Dense,
    /// Dense 120 -> 84.
    pub fc2: Dense,
    /// Dense 84 -> classes.
    pub fc3: Dense,
    pool: MaxPool2d,
}

impl LeNet5 {
    /// Builds LeNet-5 for `image_size` square inputs (28 gives the classic 16x5x5 features).
    pub fn new(
        f: &mut LayerFactory<'_>,
        in_channels: usize,
        image_size: usize,
        classes: usize,
    ) -> Result<Self, ModelError> {
        // pad 2 keeps the size, pool halves, the 5x5 valid conv removes 4, pool halves.
        let s = (image_size / 2)
            .checked_sub(4)
            .map(|v| v / 2)
            .filter(|&v| v > 0)
            .ok_or_else(|| {
                ModelError::InvalidConfig(format!(
                    "lenet5 needs images of at least 10 px, got {image_size}"
                ))
            })?;
        Ok(Self {
            conv1: f.conv("conv1", in_channels, 6, 5, 1, 2, true),
            conv2: f.conv("conv2", 6, 16, 5, 1, 0, true),
            fc1: f.linear("fc1", 16 * s * s, 120, true),
            fc2: f.linear("fc2", 120, 84, true),
            fc3: f.linear("fc3", 84, classes, true),
            pool: MaxPool2dConfig::new([2, 2]).init(),
        })
    }

    /// `[batch, c, h, w] -> [batch, classes]`.
    pub fn forward(&self, x: Tensor<4>, cb: Option<&CodebookView>) -> Tensor<2> {
        let x = self.pool.forward(relu(self.conv1.forward(x, cb)));
        let x = self.pool.forward(relu(self.conv2.forward(x, cb)));
        let x: Tensor<2> = x.flatten(1, 3);
        let x = relu(self.fc1.forward(x, cb));
        let x = relu(self.fc2.forward(x, cb));
        self.fc3.forward(x, cb)
    }
}
