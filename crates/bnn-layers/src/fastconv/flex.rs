//! The kernels on burn-flex tensors: f32 storage read in place (copied only when not
//! contiguous), outputs wrapped without a copy. Other dtypes go to flex's own convolution.

use burn::backend::ops::ModuleOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Bytes, Flex, TensorMetadata};
use burn::tensor::DType;
use burn::tensor::ops::ConvOptions;
use burn_flex::{FlexTensor, Layout};

use super::kernels::{self, ConvShape};
use super::{ConvKernels, conv_shape};

fn dims4(t: &FlexTensor) -> [usize; 4] {
    t.shape()
        .dims::<4>()
}

/// The kernels' shape, or `None` when flex's own convolution must do it.
fn covered(x: &FlexTensor, weight: &FlexTensor, options: &ConvOptions<2>) -> Option<ConvShape> {
    if x.dtype() != DType::F32 || weight.dtype() != DType::F32 {
        return None;
    }
    conv_shape(dims4(x), dims4(weight), options)
}

/// Runs `f` on the tensor's f32 values in row-major order.
fn with_values<R>(t: &FlexTensor, f: impl FnOnce(&[f32]) -> R) -> R {
    match t.as_slice::<f32>() {
        Some(v) => f(v),
        None => {
            let c = t.to_contiguous();
            f(c.as_slice::<f32>().expect("a contiguous f32 tensor"))
        }
    }
}

fn tensor(values: Vec<f32>, dims: [usize; 4]) -> FlexTensor {
    FlexTensor::new(
        Bytes::from_elems(values),
        Layout::contiguous(dims.into()),
        DType::F32,
    )
}

impl ConvKernels for Flex {
    fn conv2d_f32(
        x: FloatTensor<Flex>,
        weight: FloatTensor<Flex>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Flex> {
        let Some(s) = covered(&x, &weight, &options) else {
            return <Flex as ModuleOps<Flex>>::conv2d(x, weight, None, options);
        };
        let y = with_values(&x, |xv| {
            with_values(&weight, |wv| kernels::forward(&s, xv, wv))
        });
        let [oh, ow] = s.output().expect("covered shapes fit");
        tensor(y, [s.batch, s.c_out, oh, ow])
    }

    fn conv2d_f32_x_backward(
        x: FloatTensor<Flex>,
        weight: FloatTensor<Flex>,
        output_grad: FloatTensor<Flex>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Flex> {
        let Some(s) = covered(&x, &weight, &options).filter(|_| output_grad.dtype() == DType::F32)
        else {
            return <Flex as ModuleOps<Flex>>::conv2d_x_backward(x, weight, output_grad, options);
        };
        let dx = with_values(&weight, |wv| {
            with_values(&output_grad, |gv| kernels::backward_input(&s, wv, gv))
        });
        tensor(dx, dims4(&x))
    }

    fn conv2d_f32_weight_backward(
        x: FloatTensor<Flex>,
        weight: FloatTensor<Flex>,
        output_grad: FloatTensor<Flex>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Flex> {
        let Some(s) = covered(&x, &weight, &options).filter(|_| output_grad.dtype() == DType::F32)
        else {
            return <Flex as ModuleOps<Flex>>::conv2d_weight_backward(
                x,
                weight,
                output_grad,
                options,
            );
        };
        let dw = with_values(&x, |xv| {
            with_values(&output_grad, |gv| kernels::backward_weight(&s, xv, gv))
        });
        tensor(dw, dims4(&weight))
    }
}
