//! ResNets (He et al. 2016): the CIFAR ResNet-20 and the ImageNet ResNet-18/50/101, the latter
//! with the ImageNet stem (7x7/2 conv and max-pool) or the CIFAR stem (3x3/1 conv).

use bnn_layers::CodebookView;
use bnn_layers::flexops::{batch_norm, batch_norm_relu};
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig, MaxPool2d, MaxPool2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, PaddingConfig2d};
use burn::prelude::*;
use burn::tensor::activation::relu;
use burn::tensor::s;

use crate::layers::{Conv, Dense, LayerFactory};

/// Residual block type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// Two 3x3 convolutions (expansion 1).
    Basic,
    /// 1x1 - 3x3 - 1x1 (expansion 4).
    Bottleneck,
}

impl BlockKind {
    fn expansion(&self) -> usize {
        match self {
            BlockKind::Basic => 1,
            BlockKind::Bottleneck => 4,
        }
    }
}

/// How a residual block whose shape changes reaches its output (He et al. 2016, section 4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shortcut {
    /// Option B: a 1x1 convolution and batch norm ([`Downsample`]). The default.
    #[default]
    Projection,
    /// Option A: the input subsampled by the stride and zero-padded to the new width, no
    /// parameters (the CIFAR ResNets of bayesian-torch and of the original paper).
    ZeroPad,
}

/// Projection shortcut: 1x1 convolution and batch norm (option B of He et al.).
#[derive(Module, Debug)]
pub struct Downsample {
    /// The 1x1 convolution.
    pub conv: Conv,
    /// Its batch norm.
    pub bn: BatchNorm,
}

/// A residual block, basic or bottleneck.
#[derive(Module, Debug)]
pub struct Block {
    /// First convolution.
    pub conv1: Conv,
    /// First batch norm.
    pub bn1: BatchNorm,
    /// Second convolution.
    pub conv2: Conv,
    /// Second batch norm.
    pub bn2: BatchNorm,
    /// Third convolution (bottleneck only).
    pub conv3: Option<Conv>,
    /// Third batch norm (bottleneck only).
    pub bn3: Option<BatchNorm>,
    /// Projection shortcut when the shape changes ([`Shortcut::Projection`]).
    pub downsample: Option<Downsample>,
    /// Option-A shortcut when the shape changes ([`Shortcut::ZeroPad`]): the stride of the
    /// subsampling and the zero channels added on each side; `(1, 0)` otherwise.
    #[module(skip)]
    pub zero_pad: (usize, usize),
}

fn bn(c: usize, device: &Device) -> BatchNorm {
    BatchNormConfig::new(c).init(device)
}

impl Block {
    fn new(
        f: &mut LayerFactory<'_>,
        path: &str,
        kind: BlockKind,
        shortcut: Shortcut,
        c_in: usize,
        width: usize,
        stride: usize,
    ) -> Self {
        let c_out = width * kind.expansion();
        let d = f.device().clone();
        let reshape = stride != 1 || c_in != c_out;
        // bayesian-torch's `LambdaLayer`: `F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, p, p))` with
        // `p = planes // 4`, i.e. half the added channels on each side.
        let zero_pad = match (shortcut, reshape) {
            (Shortcut::ZeroPad, true) => (stride, c_out.saturating_sub(c_in) / 2),
            _ => (1, 0),
        };
        // Layers are built in field order, so the factory's order is the visiting order.
        let downsample = |f: &mut LayerFactory<'_>| {
            (reshape && shortcut == Shortcut::Projection).then(|| Downsample {
                conv: f.conv(
                    &format!("{path}.downsample.conv"),
                    c_in,
                    c_out,
                    1,
                    stride,
                    0,
                    false,
                ),
                bn: bn(c_out, &d),
            })
        };
        match kind {
            BlockKind::Basic => Self {
                conv1: f.conv(&format!("{path}.conv1"), c_in, width, 3, stride, 1, false),
                bn1: bn(width, &d),
                conv2: f.conv(&format!("{path}.conv2"), width, width, 3, 1, 1, false),
                bn2: bn(width, &d),
                conv3: None,
                bn3: None,
                downsample: downsample(f),
                zero_pad,
            },
            // torchvision's ResNet v1.5: the stride sits on the 3x3 convolution.
            BlockKind::Bottleneck => Self {
                conv1: f.conv(&format!("{path}.conv1"), c_in, width, 1, 1, 0, false),
                bn1: bn(width, &d),
                conv2: f.conv(&format!("{path}.conv2"), width, width, 3, stride, 1, false),
                bn2: bn(width, &d),
                conv3: Some(f.conv(&format!("{path}.conv3"), width, c_out, 1, 1, 0, false)),
                bn3: Some(bn(c_out, &d)),
                downsample: downsample(f),
                zero_pad,
            },
        }
    }

    fn forward(&self, x: Tensor<4>, cb: Option<&CodebookView>) -> Tensor<4> {
        let identity = match &self.downsample {
            Some(ds) => batch_norm(&ds.bn, ds.conv.forward(x.clone(), cb)),
            None => zero_pad_shortcut(x.clone(), self.zero_pad),
        };
        let h = batch_norm_relu(&self.bn1, self.conv1.forward(x, cb));
        let h = self.conv2.forward(h, cb);
        let h = match (&self.conv3, &self.bn3) {
            (Some(conv3), Some(bn3)) => {
                batch_norm(bn3, conv3.forward(batch_norm_relu(&self.bn2, h), cb))
            }
            _ => batch_norm(&self.bn2, h),
        };
        relu(h + identity)
    }
}

/// Option A's shortcut: every `stride`-th pixel from the first, `pad` zero channels before and
/// after; the identity for `(1, 0)`.
fn zero_pad_shortcut(x: Tensor<4>, (stride, pad): (usize, usize)) -> Tensor<4> {
    let x = if stride > 1 {
        let step = stride as isize;
        x.slice(s![.., .., ..;step, ..;step])
    } else {
        x
    };
    if pad == 0 {
        return x;
    }
    let [b, _, h, w] = x.dims();
    let zeros = Tensor::<4>::zeros([b, pad, h, w], &x.device());
    Tensor::cat(vec![zeros.clone(), x, zeros], 1)
}

/// The stem of a ResNet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stem {
    /// 7x7 stride-2 convolution and 3x3 stride-2 max-pool (224 px inputs).
    ImageNet,
    /// 3x3 stride-1 convolution (32 px and smaller inputs).
    Cifar,
}

/// A ResNet.
#[derive(Module, Debug)]
pub struct ResNet {
    /// Stem convolution.
    pub conv1: Conv,
    /// Stem batch norm.
    pub bn1: BatchNorm,
    /// Residual stages.
    pub layers: Vec<Vec<Block>>,
    /// Classifier.
    pub fc: Dense,
    maxpool: Option<MaxPool2d>,
    avgpool: AdaptiveAvgPool2d,
}

impl ResNet {
    /// A ResNet with `blocks[i]` blocks of width `widths[i]` in stage `i`, whose blocks change
    /// shape through `shortcut`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        f: &mut LayerFactory<'_>,
        kind: BlockKind,
        shortcut: Shortcut,
        blocks: &[usize],
        widths: &[usize],
        stem: Stem,
        in_channels: usize,
        classes: usize,
    ) -> Self {
        let c0 = widths[0];
        let d = f.device().clone();
        let (conv1, maxpool) = match stem {
            Stem::ImageNet => (
                f.conv("conv1", in_channels, c0, 7, 2, 3, false),
                Some(
                    MaxPool2dConfig::new([3, 3])
                        .with_strides([2, 2])
                        .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                        .init(),
                ),
            ),
            Stem::Cifar => (f.conv("conv1", in_channels, c0, 3, 1, 1, false), None),
        };
        let mut c_in = c0;
        let mut layers = Vec::new();
        for (s, (&n, &w)) in blocks.iter().zip(widths).enumerate() {
            let mut stage = Vec::new();
            for b in 0..n {
                let stride = if s > 0 && b == 0 { 2 } else { 1 };
                stage.push(Block::new(
                    f,
                    &format!("layers.{s}.{b}"),
                    kind,
                    shortcut,
                    c_in,
                    w,
                    stride,
                ));
                c_in = w * kind.expansion();
            }
            layers.push(stage);
        }
        Self {
            conv1,
            bn1: bn(c0, &d),
            layers,
            fc: f.linear("fc", c_in, classes, true),
            maxpool,
            avgpool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
        }
    }

    /// `[batch, c, h, w] -> [batch, classes]`.
    pub fn forward(&self, x: Tensor<4>, cb: Option<&CodebookView>) -> Tensor<2> {
        let mut h = batch_norm_relu(&self.bn1, self.conv1.forward(x, cb));
        if let Some(pool) = &self.maxpool {
            h = pool.forward(h);
        }
        for stage in &self.layers {
            for block in stage {
                h = block.forward(h, cb);
            }
        }
        let h: Tensor<2> = self.avgpool.forward(h).flatten(1, 3);
        self.fc.forward(h, cb)
    }
}
