//! Wide ResNet (Zagoruyko & Komodakis 2016) with pre-activation basic blocks.

use bnn_layers::CodebookView;
use bnn_layers::flexops::batch_norm_relu;
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig};
use burn::prelude::*;

use crate::ModelError;
use crate::layers::{Conv, Dense, LayerFactory};

/// Pre-activation block: BN-ReLU-conv3x3-BN-ReLU-conv3x3, 1x1 projection when the shape changes.
#[derive(Module, Debug)]
pub struct WideBlock {
    /// First batch norm.
    pub bn1: BatchNorm,
    /// First convolution.
    pub conv1: Conv,
    /// Second batch norm.
    pub bn2: BatchNorm,
    /// Second convolution.
    pub conv2: Conv,
    /// Projection shortcut.
    pub shortcut: Option<Conv>,
}

impl WideBlock {
    fn forward(&self, x: Tensor<4>, cb: Option<&CodebookView>) -> Tensor<4> {
        let o = batch_norm_relu(&self.bn1, x.clone());
        let identity = match &self.shortcut {
            Some(s) => s.forward(o.clone(), cb),
            None => x,
        };
        let h = self.conv1.forward(o, cb);
        let h = self.conv2.forward(batch_norm_relu(&self.bn2, h), cb);
        h + identity
    }
}

/// WRN-depth-width.
#[derive(Module, Debug)]
pub struct WideResNet {
    /// Stem 3x3 convolution (16 channels).
    pub conv1: Conv,
    /// Three stages.
    pub blocks: Vec<Vec<WideBlock>>,
    /// Final batch norm.
    pub bn: BatchNorm,
    /// Classifier.
    pub fc: Dense,
    avgpool: AdaptiveAvgPool2d,
}

impl WideResNet {
    /// WRN-`depth`-`widen`; `depth = 6 n + 4`.
    pub fn new(
        f: &mut LayerFactory<'_>,
        depth: usize,
        widen: usize,
        in_channels: usize,
        classes: usize,
    ) -> Result<Self, ModelError> {
        if depth < 10 || !(depth - 4).is_multiple_of(6) {
            return Err(ModelError::InvalidConfig(format!(
                "WRN depth must be 6n+4, got {depth}"
            )));
        }
        let n = (depth - 4) / 6;
        let widths = [16 * widen, 32 * widen, 64 * widen];
        let d = f.device().clone();
        let conv1 = f.conv("conv1", in_channels, 16, 3, 1, 1, false);
        let mut c_in = 16;
        let mut blocks = Vec::new();
        for (s, &w) in widths.iter().enumerate() {
            let mut stage = Vec::new();
            for b in 0..n {
                let stride = if s > 0 && b == 0 { 2 } else { 1 };
                let p = format!("blocks.{s}.{b}");
                stage.push(WideBlock {
                    bn1: BatchNormConfig::new(c_in).init(&d),
                    conv1: f.conv(&format!("{p}.conv1"), c_in, w, 3, stride, 1, false),
                    bn2: BatchNormConfig::new(w).init(&d),
                    conv2: f.conv(&format!("{p}.conv2"), w, w, 3, 1, 1, false),
                    shortcut: (stride != 1 || c_in != w)
                        .then(|| f.conv(&format!("{p}.shortcut"), c_in, w, 1, stride, 0, false)),
                });
                c_in = w;
            }
            blocks.push(stage);
        }
        Ok(Self {
            conv1,
            blocks,
            bn: BatchNormConfig::new(c_in).init(&d),
            fc: f.linear("fc", c_in, classes, true),
            avgpool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
        })
    }

    /// `[batch, c, h, w] -> [batch, classes]`.
    pub fn forward(&self, x: Tensor<4>, cb: Option<&CodebookView>) -> Tensor<2> {
        let mut h = self.conv1.forward(x, cb);
        for stage in &self.blocks {
            for block in stage {
                h = block.forward(h, cb);
            }
        }
        let h = batch_norm_relu(&self.bn, h);
        let h: Tensor<2> = self.avgpool.forward(h).flatten(1, 3);
        self.fc.forward(h, cb)
    }
}
