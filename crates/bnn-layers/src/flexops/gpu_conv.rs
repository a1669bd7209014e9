//! 2-D convolution on GPU backends as im2col + a batched matrix product, in burn tensor
//! operations.
//!
//! burn 0.22.1 on wgpu runs every f32 3x3 forward convolution on its direct kernel (one
//! thread per output vector, no shared-memory tiling): its implicit-GEMM kernels need CMMA
//! tiles, which the WGSL compiler does not offer for f32. Written as a padded input, one strided
//! slice per kernel tap stacked into columns, and a matrix product, the work goes to burn's
//! tiled matmul instead, and autodiff derives both gradients from the same operations (slice
//! backward for the input, a matrix product for the weight).
//!
//! Layout: the taps of each image are stacked into its `[c_in*kh*kw, oh*ow]` columns, and one
//! batched product with the weight (`[c_out, c_in*kh*kw]`, broadcast over the batch) gives
//! `[batch, c_out, oh*ow]`: no transposes, and every tensor is contiguous.
//!
//! Chosen by [`uses_gpu_conv`]: on wgpu by default, on any GPU backend with
//! `SWBNN_GPU_CONV=im2col`, never with `SWBNN_GPU_CONV=burn` or `SWBNN_BURN_OPS=1`.

use std::sync::OnceLock;

use burn::prelude::*;
use burn::tensor::ops::{ConvOptions, PadMode};
use burn::tensor::{DType, Slice};

use super::conv_shape;

/// A convolution whose column matrix would exceed this many bytes goes to burn's convolution
/// instead, so that the route never asks for more than 2 GiB at once (the columns are
/// `kh * kw` times the input).
pub const MAX_COLUMN_BYTES: usize = 1 << 31;

/// How `SWBNN_GPU_CONV` routes GPU convolutions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// wgpu through im2col + matmul, other GPU backends through burn.
    Default,
    /// Every GPU backend through im2col + matmul.
    Im2col,
    /// Every GPU backend through burn's convolution.
    Burn,
}

fn route() -> Route {
    static ROUTE: OnceLock<Route> = OnceLock::new();
    *ROUTE.get_or_init(|| {
        if super::burn_ops_forced() {
            return Route::Burn;
        }
        match std::env::var("SWBNN_GPU_CONV").as_deref() {
            Ok("im2col") => Route::Im2col,
            Ok("burn") => Route::Burn,
            _ => Route::Default,
        }
    })
}

/// Whether [`conv2d`] is the convolution for these operands: an f32 convolution with one
/// group on a GPU backend that the route selects, whose column matrix fits
/// [`MAX_COLUMN_BYTES`].
pub fn uses_gpu_conv(x: &Tensor<4>, weight: &Tensor<4>, options: &ConvOptions<2>) -> bool {
    let device = x.device();
    let backend = crate::device::backend_name(&device);
    let selected = match route() {
        Route::Burn => false,
        Route::Default => backend == Some("wgpu"),
        Route::Im2col => matches!(backend, Some("wgpu" | "cuda")),
    };
    if !selected
        || x.dtype() != DType::F32
        || weight.dtype() != DType::F32
        || device != weight.device()
    {
        return false;
    }
    let Some(shape) = conv_shape(x.dims(), weight.dims(), options) else {
        return false;
    };
    let Some([oh, ow]) = shape.output() else {
        return false;
    };
    let [kh, kw] = shape.kernel;
    [shape.c_in, kh, kw, shape.batch, oh, ow, 4]
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .is_some_and(|bytes| bytes <= MAX_COLUMN_BYTES)
}

/// `x` `[batch, c_in, h, w]` convolved with `weight` `[c_out, c_in, kh, kw]`, no bias, as
/// im2col + matmul (see the module docs). The caller checks [`uses_gpu_conv`].
pub fn conv2d(x: Tensor<4>, weight: Tensor<4>, options: &ConvOptions<2>) -> Tensor<4> {
    let [batch, c_in, h, w] = x.dims();
    let [c_out, _, kh, kw] = weight.dims();
    let [(top, bottom), (left, right)] = [
        (options.padding_begin()[0], options.padding_end()[0]),
        (options.padding_begin()[1], options.padding_end()[1]),
    ];
    let [sh, sw] = options.stride;
    let [dh, dw] = options.dilation;
    let oh = (h + top + bottom - dh * (kh - 1) - 1) / sh + 1;
    let ow = (w + left + right - dw * (kw - 1) - 1) / sw + 1;

    let mut xp = x;
    if top + bottom + left + right > 0 {
        xp = xp.pad((left, right, top, bottom), PadMode::Constant(0.0));
    }
    let all = || Slice::new(0, None, 1);
    let taps: Vec<Tensor<4>> = (0..kh)
        .flat_map(|i| (0..kw).map(move |j| (i, j)))
        .map(|(i, j)| {
            let r0 = (i * dh) as isize;
            let c0 = (j * dw) as isize;
            xp.clone().slice([
                all(),
                all(),
                Slice::new(r0, Some(r0 + ((oh - 1) * sh + 1) as isize), sh as isize),
                Slice::new(c0, Some(c0 + ((ow - 1) * sw + 1) as isize), sw as isize),
            ])
        })
        .collect();
    // [batch, c_in, kh*kw, oh, ow]: per image, rows ordered as the weight's [c_in, kh, kw].
    let columns: Tensor<5> = Tensor::stack(taps, 2);
    let columns = columns.reshape([batch, c_in * kh * kw, oh * ow]);
    // [1, c_out, c_in*kh*kw] against [batch, c_in*kh*kw, oh*ow]: the weight is broadcast
    // over the batch, and the product is already [batch, c_out, oh*ow], contiguous.
    let weight = weight.reshape([1, c_out, c_in * kh * kw]);
    weight.matmul(columns).reshape([batch, c_out, oh, ow])
}
