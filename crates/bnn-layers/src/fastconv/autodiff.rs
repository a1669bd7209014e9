//! The backward step of [`ConvKernels::conv2d_f32`] under burn's autodiff: it keeps `x` and the
//! weight (through the checkpointer, like burn's own conv2d) and calls the inner backend's two
//! gradient kernels, each only for a parent that needs its gradient.

use burn::backend::tensor::FloatTensor;
use burn::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::ConvOptions;
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::checkpoint::strategy::CheckpointStrategy;
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, Ops, OpsKind};
use burn_autodiff::{Autodiff, NodeId};

use super::ConvKernels;

#[derive(Debug)]
struct Conv2dBackward;

impl<B: Backend + ConvKernels> Backward<B, 2> for Conv2dBackward {
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
            let dx = B::conv2d_f32_x_backward(
                x.clone(),
                weight.clone(),
                grad.clone(),
                options.clone(),
            );
            grads.register::<B>(node.id, dx);
        }
        if let Some(node) = node_weight {
            let dw = B::conv2d_f32_weight_backward(x, weight, grad, options);
            grads.register::<B>(node.id, dw);
        }
    }
}

impl<B: Backend + ConvKernels, C: CheckpointStrategy> ConvKernels for Autodiff<B, C> {
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
}
