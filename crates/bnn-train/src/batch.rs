//! Host batches to tensors.

use bnn_data::Batch;
use burn::prelude::*;
use burn::tensor::{Int, TensorData};

/// Uploads a batch: images `[B, C, H, W]` and labels `[B]`.
pub fn to_tensors(batch: &Batch, device: &Device) -> (Tensor<4>, Tensor<1, Int>) {
    let images = Tensor::from_data(TensorData::new(batch.images.clone(), batch.shape), device);
    let labels: Vec<i64> = batch.labels.iter().map(|&l| l as i64).collect();
    let n = labels.len();
    (
        images,
        Tensor::from_data(TensorData::new(labels, [n]), device),
    )
}

/// Mean cross-entropy of `logits` `[B, C]` against integer `targets`, computed with a stable
/// log-softmax.
pub fn cross_entropy(logits: Tensor<2>, targets: Tensor<1, Int>) -> Tensor<1> {
    let log_probs = burn::tensor::activation::log_softmax(logits, 1);
    let picked = log_probs.gather(1, targets.unsqueeze_dim(1));
    picked.mean().neg()
}

/// Host copy of a float tensor.
pub fn to_vec<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap_or_default()
}
