//! The backward steps of the kernels under burn's autodiff, as burn's own for conv2d and
//! batch norm: inputs kept through the checkpointer, the inner backend's gradient kernels
//! called only for the parents that need a gradient.

use burn::backend::ops::{ActivationOps, ModuleOps};
use burn::backend::tensor::FloatTensor;
use burn::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::ConvOptions;
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::checkpoint::strategy::CheckpointStrategy;
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, Ops, OpsKind};
use burn_autodiff::{Autodiff, NodeId};

use super::FlexKernels;

#[derive(Debug)]
struct Conv2dBackward;

impl<B: Backend + FlexKernels> Backward<B, 2> for Conv2dBackward {
    type State = (NodeId, NodeId, ConvOptions<2>);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [node_x, node_weight] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (x_state, weight_state, options) = ops.state;
        let x = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(x_state);
        let weight = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(weight_state);
        if let Some(node) = node_x {
            let dx =
                B::conv2d_f32_x_backward(x.clone(), weight.clone(), grad.clone(), options.clone());
            grads.register::<B>(node.id, dx);
        }
        if let Some(node) = node_weight {
            let dw = B::conv2d_f32_weight_backward(x, weight, grad, options);
            grads.register::<B>(node.id, dw);
        }
    }
}

#[derive(Debug)]
struct BatchNormBackward;

impl<B: Backend + FlexKernels> Backward<B, 3> for BatchNormBackward {
    // x and gamma through the checkpointer; the batch statistics as the forward computed them.
    type State = (
        NodeId,
        NodeId,
        B::FloatTensorPrimitive,
        B::FloatTensorPrimitive,
        f64,
    );

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [node_x, node_gamma, node_beta] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let (x_state, gamma_state, mean, variance, epsilon) = ops.state;
        let x = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(x_state);
        let gamma = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(gamma_state);
        let (dx, dgamma, dbeta) =
            B::batch_norm_train_backward_f32(x, gamma, mean, variance, epsilon, grad);
        for (node, g) in [(node_x, dx), (node_gamma, dgamma), (node_beta, dbeta)] {
            if let Some(node) = node {
                grads.register::<B>(node.id, g);
            }
        }
    }
}

#[derive(Debug)]
struct SoftplusBackward;

impl<B: Backend + FlexKernels> Backward<B, 1> for SoftplusBackward {
    type State = NodeId;

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let [node_x] = ops.parents;
        let grad = grads.consume::<B>(&ops.node);
        let x = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(ops.state);
        if let Some(node) = node_x {
            grads.register::<B>(node.id, B::softplus_backward_f32(x, grad));
        }
    }
}

impl<B: Backend + FlexKernels, C: CheckpointStrategy> FlexKernels for Autodiff<B, C> {
    fn conv2d_f32(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        match Conv2dBackward
            .prepare::<C>([x.node(), weight.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let weight_state = prep.checkpoint(&weight);
                let y = B::conv2d_f32(x.into_primitive(), weight.into_primitive(), options.clone());
                prep.finish((x_state, weight_state, options), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::conv2d_f32(
                x.into_primitive(),
                weight.into_primitive(),
                options,
            )),
        }
    }

    // The gradients themselves are not differentiated again (no double backward): they run on
    // the inner backend and come back as constants.
    fn conv2d_f32_x_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        Self::from_inner(B::conv2d_f32_x_backward(
            Self::inner(x),
            Self::inner(weight),
            Self::inner(output_grad),
            options,
        ))
    }

    fn conv2d_f32_weight_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        Self::from_inner(B::conv2d_f32_weight_backward(
            Self::inner(x),
            Self::inner(weight),
            Self::inner(output_grad),
            options,
        ))
    }

    fn batch_norm_train_f32(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        match BatchNormBackward
            .prepare::<C>([x.node(), gamma.node(), beta.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let gamma_state = prep.checkpoint(&gamma);
                let (y, mean, var) = B::batch_norm_train_f32(
                    x.into_primitive(),
                    gamma.into_primitive(),
                    beta.into_primitive(),
                    epsilon,
                );
                let state = (x_state, gamma_state, mean.clone(), var.clone(), epsilon);
                (
                    prep.finish(state, y),
                    Self::from_inner(mean),
                    Self::from_inner(var),
                )
            }
            OpsKind::UnTracked(prep) => {
                let (y, mean, var) = B::batch_norm_train_f32(
                    x.into_primitive(),
                    gamma.into_primitive(),
                    beta.into_primitive(),
                    epsilon,
                );
                (
                    prep.finish(y),
                    Self::from_inner(mean),
                    Self::from_inner(var),
                )
            }
        }
    }

    fn batch_norm_train_backward_f32(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        variance: FloatTensor<Self>,
        epsilon: f64,
        output_grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let (dx, dgamma, dbeta) = B::batch_norm_train_backward_f32(
            Self::inner(x),
            Self::inner(gamma),
            Self::inner(mean),
            Self::inner(variance),
            epsilon,
            Self::inner(output_grad),
        );
        (
            Self::from_inner(dx),
            Self::from_inner(dgamma),
            Self::from_inner(dbeta),
        )
    }

    fn batch_norm_eval_f32(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        variance: FloatTensor<Self>,
        epsilon: f64,
        relu: bool,
    ) -> FloatTensor<Self> {
        // Inference runs without autodiff; here burn's differentiable operations.
        let y = <Self as ModuleOps<Self>>::batch_norm(x, gamma, beta, mean, variance, epsilon);
        if relu {
            <Self as ActivationOps<Self>>::relu(y)
        } else {
            y
        }
    }

    fn softplus_f32(x: FloatTensor<Self>) -> FloatTensor<Self> {
        match SoftplusBackward
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let state = prep.checkpoint(&x);
                prep.finish(state, B::softplus_f32(x.into_primitive()))
            }
            OpsKind::UnTracked(prep) => prep.finish(B::softplus_f32(x.into_primitive())),
        }
    }

    fn softplus_backward_f32(
        x: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        Self::from_inner(B::softplus_backward_f32(
            Self::inner(x),
            Self::inner(output_grad),
        ))
    }
}
