//! Our own f32 2-D convolution for burn-flex, forward and both gradients, as a burn backend
//! extension.
//!
//! burn-flex 0.22 overrides neither `conv2d_x_backward` nor `conv2d_weight_backward`: the input
//! gradient goes through a transposed convolution with a scalar scatter-add, and the weight
//! gradient through a forward convolution with batch and channels swapped, whose kernel is the
//! whole gradient map (few parallel tasks). Those and fresh zeroed buffers made a ResNet-20
//! training step on flex 3-4x slower than PyTorch's. [`conv2d`] runs im2col + `gemm` kernels
//! ([`kernels`]) instead, parallel over images, for f32 tensors on flex with one group; anything
//! else (groups, other float types, other backends such as wgpu) goes to burn's `conv2d`.
//!
//! Pinned to burn 0.22.x: the extension trait, the flex implementation (which reads
//! `FlexTensor` storage) and the autodiff backward step live in this module only, so that it can
//! be dropped once burn-flex overrides the two gradient functions itself (`docs/benchmarks.md`).
//!
//! Setting the environment variable `SWBNN_BURN_CONV=1` routes every convolution to burn's own
//! `conv2d`, to compare the two in one build.

mod autodiff;
#[cfg(feature = "flex")]
mod flex;
pub mod kernels;

use std::sync::OnceLock;

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, backend_extension};
use burn::nn::PaddingConfig2d;
use burn::nn::conv::Conv2d;
use burn::prelude::*;
use burn::tensor::DType;
use burn::tensor::ops::ConvOptions;

use kernels::ConvShape;

/// The convolution kernels as a backend extension; implemented for flex and, with a backward
/// step, for autodiff over it.
#[backend_extension(Flex: cfg(feature = "flex"), Autodiff)]
pub(crate) trait ConvKernels: Backend {
    /// `[batch, c_in, h, w]` and `[c_out, c_in, kh, kw]` to `[batch, c_out, oh, ow]`, no bias.
    fn conv2d_f32(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self>;

    /// The gradient with respect to `x` (burn's `conv2d_x_backward`).
    fn conv2d_f32_x_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self>;

    /// The gradient with respect to `weight` (burn's `conv2d_weight_backward`).
    fn conv2d_f32_weight_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self>;
}

/// The kernels' view of a convolution of `x` (`[batch, c_in, h, w]`) with `weight`
/// (`[c_out, c_in, kh, kw]`); `None` for what they do not cover (groups, mismatched channels,
/// a kernel larger than the padded input).
pub(crate) fn conv_shape(
    x: [usize; 4],
    weight: [usize; 4],
    options: &ConvOptions<2>,
) -> Option<ConvShape> {
    let [batch, c_in, h, w] = x;
    let [c_out, wc_in, kh, kw] = weight;
    if options.groups != 1 || wc_in != c_in {
        return None;
    }
    let s = ConvShape {
        batch,
        c_in,
        input: [h, w],
        c_out,
        kernel: [kh, kw],
        stride: options.stride,
        pad_begin: options.padding_begin(),
        pad_end: options.padding_end(),
        dilation: options.dilation,
    };
    s.output().map(|_| s)
}

fn burn_conv_forced() -> bool {
    static FORCED: OnceLock<bool> = OnceLock::new();
    *FORCED.get_or_init(|| std::env::var("SWBNN_BURN_CONV").is_ok_and(|v| v == "1"))
}

/// Whether [`conv2d`] runs our kernels for these operands.
pub fn uses_kernels(x: &Tensor<4>, weight: &Tensor<4>, options: &ConvOptions<2>) -> bool {
    crate::noise::is_flex(&x.device())
        && x.device() == weight.device()
        && x.dtype() == DType::F32
        && weight.dtype() == DType::F32
        && conv_shape(x.dims(), weight.dims(), options).is_some()
        && !burn_conv_forced()
}

/// 2-D convolution, as burn's `burn::tensor::module::conv2d`: `x` `[batch, c_in, h, w]`,
/// `weight` `[c_out, c_in / groups, kh, kw]`, `bias` `[c_out]`; returns
/// `[batch, c_out, oh, ow]`. Differentiable. Our kernels where [`uses_kernels`], burn's
/// convolution otherwise.
pub fn conv2d(
    x: Tensor<4>,
    weight: Tensor<4>,
    bias: Option<Tensor<1>>,
    options: ConvOptions<2>,
) -> Tensor<4> {
    if !uses_kernels(&x, &weight, &options) {
        return burn::tensor::module::conv2d(x, weight, bias, options);
    }
    let y = Tensor::<4>::from_dispatch(<Dispatch as ConvKernels>::conv2d_f32(
        x.into_dispatch(),
        weight.into_dispatch(),
        options,
    ));
    match bias {
        Some(b) => {
            let c = b.dims()[0];
            y + b.reshape([1, c, 1, 1])
        }
        None => y,
    }
}

/// The forward pass of burn-nn's [`Conv2d`] through [`conv2d`]; `Same` padding, which depends
/// on the input size, is left to the layer's own forward.
pub fn conv2d_layer(layer: &Conv2d, x: Tensor<4>) -> Tensor<4> {
    let padding = match layer.padding {
        PaddingConfig2d::Explicit(top, left, bottom, right) => [(top, bottom), (left, right)],
        PaddingConfig2d::Valid => [(0, 0), (0, 0)],
        PaddingConfig2d::Same => return layer.forward(x),
    };
    conv2d(
        x,
        layer.weight.val(),
        layer.bias.as_ref().map(|b| b.val()),
        ConvOptions::new_with_padding(layer.stride, padding, layer.dilation, layer.groups),
    )
}

#[cfg(test)]
mod tests;
