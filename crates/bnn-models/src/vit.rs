//! Vision Transformer (Dosovitskiy et al. 2021), laid out as torchvision's `vit_b_16`.

use bnn_layers::CodebookView;
use burn::module::Param;
use burn::nn::{LayerNorm, LayerNormConfig};
use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::activation::{gelu, softmax};

use crate::ModelError;
use crate::layers::{Conv, Dense, LayerFactory};

/// Shape of a ViT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VitShape {
    /// Patch side in pixels.
    pub patch: usize,
    /// Token width.
    pub dim: usize,
    /// Encoder layers.
    pub depth: usize,
    /// Attention heads.
    pub heads: usize,
    /// Hidden width of the MLP.
    pub mlp_dim: usize,
}

/// One pre-norm encoder layer.
#[derive(Module, Debug)]
pub struct EncoderLayer {
    /// Norm before attention.
    pub ln1: LayerNorm,
    /// Query, key and value projection, `dim -> 3 dim`.
    pub qkv: Dense,
    /// Output projection.
    pub proj: Dense,
    /// Norm before the MLP.
    pub ln2: LayerNorm,
    /// MLP in.
    pub fc1: Dense,
    /// MLP out.
    pub fc2: Dense,
    heads: usize,
}

impl EncoderLayer {
    fn forward(&self, x: Tensor<3>, cb: Option<&CodebookView>) -> Tensor<3> {
        let [b, n, d] = x.dims();
        let h = self.heads;
        let dh = d / h;
        let qkv = self.qkv.forward(self.ln1.forward(x.clone()), cb);
        // [b, n, 3, h, dh] -> three [b, h, n, dh]
        let qkv = qkv.reshape([b, n, 3, h, dh]);
        let part = |i: usize| -> Tensor<4> {
            qkv.clone()
                .narrow(2, i, 1)
                .reshape([b, n, h, dh])
                .swap_dims(1, 2)
        };
        let (q, k, v) = (part(0), part(1), part(2));
        let att = softmax(
            q.matmul(k.swap_dims(2, 3)).div_scalar((dh as f64).sqrt()),
            3,
        );
        let o = att.matmul(v).swap_dims(1, 2).reshape([b, n, d]);
        let x = x + self.proj.forward(o, cb);
        let m = self
            .fc2
            .forward(gelu(self.fc1.forward(self.ln2.forward(x.clone()), cb)), cb);
        x + m
    }
}

/// A Vision Transformer classifier (class token, learned position embeddings).
#[derive(Module, Debug)]
pub struct Vit {
    /// Patch embedding, a `patch x patch` convolution with stride `patch`.
    pub patch_embed: Conv,
    /// Class token, `[1, 1, dim]`.
    pub cls_token: Param<Tensor<3>>,
    /// Position embeddings, `[1, tokens + 1, dim]`.
    pub pos_embed: Param<Tensor<3>>,
    /// Encoder layers.
    pub layers: Vec<EncoderLayer>,
    /// Final norm.
    pub ln: LayerNorm,
    /// Classifier on the class token.
    pub head: Dense,
}

impl Vit {
    /// Builds a ViT for `image_size` square inputs.
    pub fn new(
        f: &mut LayerFactory<'_>,
        shape: VitShape,
        in_channels: usize,
        image_size: usize,
        classes: usize,
    ) -> Result<Self, ModelError> {
        if !image_size.is_multiple_of(shape.patch) || !shape.dim.is_multiple_of(shape.heads) {
            return Err(ModelError::InvalidConfig(format!(
                "ViT needs image size {image_size} divisible by patch {} and width {} by heads {}",
                shape.patch, shape.dim, shape.heads
            )));
        }
        let tokens = (image_size / shape.patch).pow(2);
        let d = f.device().clone();
        let normal = |dims: [usize; 3]| {
            let device = d.clone();
            Param::uninitialized(
                burn::module::ParamId::new(),
                move |dev, grad| {
                    let t = Tensor::<3>::random(dims, Distribution::Normal(0.0, 0.02), dev);
                    if grad { t.require_grad() } else { t }
                },
                device,
                true,
                dims.into(),
            )
        };
        let patch_embed = f.conv(
            "patch_embed",
            in_channels,
            shape.dim,
            shape.patch,
            shape.patch,
            0,
            true,
        );
        let layers = (0..shape.depth)
            .map(|i| EncoderLayer {
                ln1: LayerNormConfig::new(shape.dim).with_epsilon(1e-6).init(&d),
                qkv: f.linear(&format!("layers.{i}.qkv"), shape.dim, 3 * shape.dim, true),
                proj: f.linear(&format!("layers.{i}.proj"), shape.dim, shape.dim, true),
                ln2: LayerNormConfig::new(shape.dim).with_epsilon(1e-6).init(&d),
                fc1: f.linear(&format!("layers.{i}.fc1"), shape.dim, shape.mlp_dim, true),
                fc2: f.linear(&format!("layers.{i}.fc2"), shape.mlp_dim, shape.dim, true),
                heads: shape.heads,
            })
            .collect();
        Ok(Self {
            patch_embed,
            cls_token: normal([1, 1, shape.dim]),
            pos_embed: normal([1, tokens + 1, shape.dim]),
            layers,
            ln: LayerNormConfig::new(shape.dim).with_epsilon(1e-6).init(&d),
            head: f.linear("head", shape.dim, classes, true),
        })
    }

    /// `[batch, c, h, w] -> [batch, classes]`.
    pub fn forward(&self, x: Tensor<4>, cb: Option<&CodebookView>) -> Tensor<2> {
        let p = self.patch_embed.forward(x, cb); // [b, d, gh, gw]
        let [b, d, _, _] = p.dims();
        let tokens: Tensor<3> = p.flatten::<3>(2, 3).swap_dims(1, 2); // [b, n, d]
        let cls = self.cls_token.val().expand([b as i64, 1, d as i64]);
        let mut h = Tensor::cat(vec![cls, tokens], 1) + self.pos_embed.val();
        for layer in &self.layers {
            h = layer.forward(h, cb);
        }
        let h = self.ln.forward(h);
        let cls: Tensor<2> = h.narrow(1, 0, 1).reshape([b, d]);
        self.head.forward(cls, cb)
    }
}
