//! Our own f32 kernels for the two operations that dominate a convolutional training step on
//! burn-flex, 2-D convolution (forward and both gradients) and training-mode batch norm
//! (forward and backward), as a burn backend extension, and a vectorised softplus.
//!
//! burn-flex 0.22 overrides neither `conv2d_x_backward` nor `conv2d_weight_backward`: the input
//! gradient goes through a transposed convolution with a scalar scatter-add, and the weight
//! gradient through a forward convolution with batch and channels swapped, whose kernel is the
//! whole gradient map (few parallel tasks). Nor does it override `batch_norm_train` and its
//! backward, whose defaults copy the activation to swap batch and channels and compose a dozen
//! element-wise passes. Those and fresh zeroed buffers made a ResNet-20 training step on flex
//! 3-4x slower than PyTorch's. [`conv2d`] runs im2col + `gemm` kernels ([`conv`]), parallel over
//! images, for f32 tensors on flex with one group, and [`batch_norm`] one-pass kernels
//! ([`norm`]; in inference also one pass, with the ReLU after it in [`batch_norm_relu`], where
//! burn's default is four broadcast passes); on GPU backends [`conv2d`] can run as im2col + burn's tiled matmul
//! ([`gpu_conv`]); anything else (groups, other float types) goes to burn's own operations.
//! A third kernel, [`softplus()`], is the `sigma = softplus(rho)` of every
//! Bayesian weight, vectorised where flex calls scalar `log1pf` and `expf`.
//!
//! Pinned to burn 0.22.x: the extension trait, the flex implementation (which reads
//! `FlexTensor` storage) and the autodiff backward steps live in this module only, so that it can
//! be dropped once burn-flex overrides those functions itself (`docs/benchmarks.md`).
//!
//! Setting the environment variable `SWBNN_BURN_OPS=1` routes every call to burn's own
//! operations, to compare the two in one build.

mod autodiff;
pub mod conv;
#[cfg(feature = "flex")]
mod flex;
pub mod gpu_conv;
pub mod norm;
pub mod softplus;

use std::sync::OnceLock;

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, backend_extension};
use burn::nn::conv::Conv2d;
use burn::nn::{BatchNorm, PaddingConfig2d};
use burn::prelude::*;
use burn::tensor::DType;
use burn::tensor::ops::ConvOptions;

use conv::ConvShape;

/// The kernels as a backend extension; implemented for flex and, with backward steps, for
/// autodiff over it.
#[backend_extension(Flex: cfg(feature = "flex"), Autodiff)]
pub(crate) trait FlexKernels: Backend {
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

    /// Training-mode batch norm of `x` (`[batch, channels, ...]`) with the batch statistics:
    /// `(output, mean, biased variance)`, as burn's `batch_norm_train`.
    fn batch_norm_train_f32(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);

    /// Gradients of [`FlexKernels::batch_norm_train_f32`] with respect to `x`, `gamma` and
    /// `beta`, as burn's `batch_norm_train_backward`.
    fn batch_norm_train_backward_f32(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        variance: FloatTensor<Self>,
        epsilon: f64,
        output_grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);

    /// Inference-mode batch norm of `x` (`[batch, channels, ...]`) with the given statistics,
    /// followed by a ReLU when `relu` is set, as burn's `batch_norm` (and `relu`).
    fn batch_norm_eval_f32(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        variance: FloatTensor<Self>,
        epsilon: f64,
        relu: bool,
    ) -> FloatTensor<Self>;

    /// `softplus(x) = ln(1 + e^x)`, element-wise.
    fn softplus_f32(x: FloatTensor<Self>) -> FloatTensor<Self>;

    /// The gradient of [`FlexKernels::softplus_f32`]: `output_grad * sigmoid(x)`.
    fn softplus_backward_f32(
        x: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
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

fn burn_ops_forced() -> bool {
    static FORCED: OnceLock<bool> = OnceLock::new();
    *FORCED.get_or_init(|| std::env::var("SWBNN_BURN_OPS").is_ok_and(|v| v == "1"))
}

/// Whether a tensor is an f32 tensor on flex (with or without autodiff) and our kernels are
/// not switched off.
fn on_flex_f32<const D: usize>(t: &Tensor<D>) -> bool {
    crate::noise::is_flex(&t.device()) && t.dtype() == DType::F32 && !burn_ops_forced()
}

/// Whether [`conv2d`] runs our kernels for these operands.
pub fn uses_kernels(x: &Tensor<4>, weight: &Tensor<4>, options: &ConvOptions<2>) -> bool {
    on_flex_f32(x)
        && on_flex_f32(weight)
        && x.device() == weight.device()
        && conv_shape(x.dims(), weight.dims(), options).is_some()
}

/// 2-D convolution, as burn's `burn::tensor::module::conv2d`: `x` `[batch, c_in, h, w]`,
/// `weight` `[c_out, c_in / groups, kh, kw]`, `bias` `[c_out]`; returns
/// `[batch, c_out, oh, ow]`. Differentiable. Our kernels where [`uses_kernels`], im2col +
/// matmul on GPU backends where [`gpu_conv::uses_gpu_conv`], burn's convolution otherwise.
pub fn conv2d(
    x: Tensor<4>,
    weight: Tensor<4>,
    bias: Option<Tensor<1>>,
    options: ConvOptions<2>,
) -> Tensor<4> {
    let y = if uses_kernels(&x, &weight, &options) {
        Tensor::<4>::from_dispatch(<Dispatch as FlexKernels>::conv2d_f32(
            x.into_dispatch(),
            weight.into_dispatch(),
            options,
        ))
    } else if gpu_conv::uses_gpu_conv(&x, &weight, &options) {
        gpu_conv::conv2d(x, weight, &options)
    } else {
        return burn::tensor::module::conv2d(x, weight, bias, options);
    };
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

/// The forward pass of burn-nn's [`BatchNorm`], with our kernels on flex: in training mode
/// (autodiff device, layer not frozen) one-pass statistics and normalisation, in inference (no
/// autodiff) one pass with the running statistics, bit for bit burn's. In training mode the
/// running variance is updated, on every backend, with the batch's *unbiased* variance
/// (`n / (n - 1)` times the biased one, `n` the values per channel, as PyTorch's `BatchNorm2d`
/// does; burn-nn's layer uses the biased one); with one value per channel there is no unbiased
/// variance and the biased one (0) is used. Normalisation itself uses the biased variance, as
/// both do. The update is applied at once, not left pending for the next read on the same thread
/// (as burn's layer does), so a model saved after training holds its last step's statistics and
/// the replicas of data-parallel training, which take turns in rank order, each apply theirs
/// in that order. Otherwise (autodiff in evaluation mode, other backends) it is the layer's
/// forward.
pub fn batch_norm<const D: usize>(layer: &BatchNorm, x: Tensor<D>) -> Tensor<D> {
    norm_forward(layer, x, false)
}

/// `relu(batch_norm(layer, x))`, the two in one pass in inference on flex ([`batch_norm`]).
pub fn batch_norm_relu<const D: usize>(layer: &BatchNorm, x: Tensor<D>) -> Tensor<D> {
    norm_forward(layer, x, true)
}

fn norm_forward<const D: usize>(layer: &BatchNorm, x: Tensor<D>, relu: bool) -> Tensor<D> {
    let device = x.device();
    if D >= 2 && !device.is_autodiff() && on_flex_f32(&x) {
        let running = |p: &burn::module::RunningState<Tensor<1>>| {
            p.value().to_device(&device).into_dispatch()
        };
        return Tensor::from_dispatch(<Dispatch as FlexKernels>::batch_norm_eval_f32(
            x.into_dispatch(),
            layer.gamma.val().into_dispatch(),
            layer.beta.val().into_dispatch(),
            running(&layer.running_mean),
            running(&layer.running_var),
            layer.epsilon,
            relu,
        ));
    }
    let y = train_or_layer_forward(layer, x);
    if relu {
        burn::tensor::activation::relu(y)
    } else {
        y
    }
}

fn train_or_layer_forward<const D: usize>(layer: &BatchNorm, x: Tensor<D>) -> Tensor<D> {
    let device = x.device();
    let train = device.is_autodiff() && layer.training.is_enabled();
    if !train || D < 2 {
        return layer.forward(x);
    }
    let dims = x.dims();
    let per_channel = (dims.iter().product::<usize>() / dims[1].max(1)) as f64;
    let (y, mean, var) = if on_flex_f32(&x) {
        let (y, mean, var) = <Dispatch as FlexKernels>::batch_norm_train_f32(
            x.into_dispatch(),
            layer.gamma.val().into_dispatch(),
            layer.beta.val().into_dispatch(),
            layer.epsilon,
        );
        (
            Tensor::from_dispatch(y),
            Tensor::<1>::from_dispatch(mean),
            Tensor::<1>::from_dispatch(var),
        )
    } else {
        let out = burn::tensor::module::batch_norm_train(
            x,
            layer.gamma.val(),
            layer.beta.val(),
            layer.epsilon,
        );
        (out.output, out.mean, out.variance)
    };
    let bessel = if per_channel > 1.0 {
        per_channel / (per_channel - 1.0)
    } else {
        1.0
    };
    let m = layer.momentum;
    let running_mean = layer.running_mean.value_sync().to_device(&device);
    let running_var = layer.running_var.value_sync().to_device(&device);
    let running_mean = running_mean
        .mul_scalar(1.0 - m)
        .add(mean.detach().mul_scalar(m));
    let running_var = running_var
        .mul_scalar(1.0 - m)
        .add(var.detach().mul_scalar(m * bessel));
    layer.running_mean.update(running_mean.detach());
    layer.running_var.update(running_var.detach());
    // burn keeps an update pending per thread until the next read on that thread, and a record
    // or `value()` does not see it: the saved model would miss the last step's update, and a
    // replica on a fresh thread (one per step in data-parallel training) would never apply its
    // own. Applied now, the statistics are current whoever reads them next.
    layer.running_mean.value_sync();
    layer.running_var.value_sync();
    y
}

/// `softplus(x) = ln(1 + e^x)`, element-wise and differentiable: our vectorised kernel on flex
/// ([`softplus`](mod@softplus)), `-log_sigmoid(-x)` elsewhere.
pub fn softplus<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    if !on_flex_f32(&x) {
        return burn::tensor::activation::log_sigmoid(x.neg()).neg();
    }
    Tensor::from_dispatch(<Dispatch as FlexKernels>::softplus_f32(x.into_dispatch()))
}

#[cfg(test)]
mod tests;
