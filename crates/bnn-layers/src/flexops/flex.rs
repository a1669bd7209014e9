//! The kernels on burn-flex tensors: f32 storage read in place (copied only when not
//! contiguous), outputs wrapped without a copy. Other dtypes go to flex's own convolution.

use burn::backend::ops::{ActivationOps, FloatTensorOps, ModuleOps};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Bytes, Flex, TensorMetadata};
use burn::tensor::DType;
use burn::tensor::ops::ConvOptions;
use burn_flex::{FlexTensor, Layout};

use super::conv::{self, ConvShape};
use super::norm;
use super::softplus;
use super::{FlexKernels, conv_shape};

fn dims4(t: &FlexTensor) -> [usize; 4] {
    t.shape().dims::<4>()
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

fn tensor<S: Into<burn::backend::Shape>>(values: Vec<f32>, dims: S) -> FlexTensor {
    FlexTensor::new(
        Bytes::from_elems(values),
        Layout::contiguous(dims.into()),
        DType::F32,
    )
}

/// `[batch, channels, plane]` of a batch-norm input, `None` for what flex's own batch norm
/// must do (other dtypes, rank below 2).
fn norm_dims(x: &FlexTensor, others: &[&FlexTensor]) -> Option<[usize; 3]> {
    let shape = x.shape();
    let dims: &[usize] = &shape;
    if dims.len() < 2
        || std::iter::once(x)
            .chain(others.iter().copied())
            .any(|t| t.dtype() != DType::F32)
    {
        return None;
    }
    Some([dims[0], dims[1], dims[2..].iter().product()])
}

impl FlexKernels for Flex {
    fn conv2d_f32(
        x: FloatTensor<Flex>,
        weight: FloatTensor<Flex>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Flex> {
        let Some(s) = covered(&x, &weight, &options) else {
            return <Flex as ModuleOps<Flex>>::conv2d(x, weight, None, options);
        };
        let y = with_values(&x, |xv| {
            with_values(&weight, |wv| conv::forward(&s, xv, wv))
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
            with_values(&output_grad, |gv| conv::backward_input(&s, wv, gv))
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
            with_values(&output_grad, |gv| conv::backward_weight(&s, xv, gv))
        });
        tensor(dw, dims4(&weight))
    }

    fn batch_norm_train_f32(
        x: FloatTensor<Flex>,
        gamma: FloatTensor<Flex>,
        beta: FloatTensor<Flex>,
        epsilon: f64,
    ) -> (FloatTensor<Flex>, FloatTensor<Flex>, FloatTensor<Flex>) {
        let Some(dims) = norm_dims(&x, &[&gamma, &beta]) else {
            let r = <Flex as ModuleOps<Flex>>::batch_norm_train(x, gamma, beta, epsilon);
            return (r.output, r.mean, r.variance);
        };
        let (y, mean, var) = with_values(&x, |xv| {
            with_values(&gamma, |g| {
                with_values(&beta, |b| norm::forward_train(dims, xv, g, b, epsilon))
            })
        });
        let channels = [dims[1]];
        (
            tensor(y, x.shape()),
            tensor(mean, channels),
            tensor(var, channels),
        )
    }

    fn batch_norm_train_backward_f32(
        x: FloatTensor<Flex>,
        gamma: FloatTensor<Flex>,
        mean: FloatTensor<Flex>,
        variance: FloatTensor<Flex>,
        epsilon: f64,
        output_grad: FloatTensor<Flex>,
    ) -> (FloatTensor<Flex>, FloatTensor<Flex>, FloatTensor<Flex>) {
        let Some(dims) = norm_dims(&x, &[&gamma, &mean, &variance, &output_grad]) else {
            let r = <Flex as ModuleOps<Flex>>::batch_norm_train_backward(
                x,
                gamma,
                mean,
                variance,
                epsilon,
                output_grad,
            );
            return (r.x_grad, r.gamma_grad, r.beta_grad);
        };
        let (dx, dgamma, dbeta) = with_values(&x, |xv| {
            with_values(&output_grad, |gv| {
                with_values(&gamma, |g| {
                    with_values(&mean, |m| {
                        with_values(&variance, |v| {
                            norm::backward_train(dims, xv, g, m, v, epsilon, gv)
                        })
                    })
                })
            })
        });
        let channels = [dims[1]];
        (
            tensor(dx, x.shape()),
            tensor(dgamma, channels),
            tensor(dbeta, channels),
        )
    }

    fn batch_norm_eval_f32(
        x: FloatTensor<Flex>,
        gamma: FloatTensor<Flex>,
        beta: FloatTensor<Flex>,
        mean: FloatTensor<Flex>,
        variance: FloatTensor<Flex>,
        epsilon: f64,
        relu: bool,
    ) -> FloatTensor<Flex> {
        let Some(dims) = norm_dims(&x, &[&gamma, &beta, &mean, &variance]) else {
            let y = <Flex as ModuleOps<Flex>>::batch_norm(x, gamma, beta, mean, variance, epsilon);
            return if relu {
                <Flex as ActivationOps<Flex>>::relu(y)
            } else {
                y
            };
        };
        let y = with_values(&x, |xv| {
            with_values(&gamma, |g| {
                with_values(&beta, |b| {
                    with_values(&mean, |m| {
                        with_values(&variance, |v| {
                            norm::forward_eval(dims, xv, g, b, m, v, epsilon, relu)
                        })
                    })
                })
            })
        });
        tensor(y, x.shape())
    }

    fn softplus_f32(x: FloatTensor<Flex>) -> FloatTensor<Flex> {
        if x.dtype() != DType::F32 {
            let neg = <Flex as FloatTensorOps<Flex>>::float_neg(x);
            let ls = <Flex as ActivationOps<Flex>>::log_sigmoid(neg);
            return <Flex as FloatTensorOps<Flex>>::float_neg(ls);
        }
        let y = with_values(&x, softplus::softplus);
        tensor(y, x.shape())
    }

    fn softplus_backward_f32(
        x: FloatTensor<Flex>,
        output_grad: FloatTensor<Flex>,
    ) -> FloatTensor<Flex> {
        if x.dtype() != DType::F32 || output_grad.dtype() != DType::F32 {
            let s = <Flex as ActivationOps<Flex>>::sigmoid(x);
            return <Flex as FloatTensorOps<Flex>>::float_mul(output_grad, s);
        }
        let dx = with_values(&x, |xv| {
            with_values(&output_grad, |gv| softplus::softplus_backward(xv, gv))
        });
        tensor(dx, x.shape())
    }
}
