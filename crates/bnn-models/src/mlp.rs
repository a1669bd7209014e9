//! Multi-layer perceptron.

use bnn_layers::CodebookView;
use burn::prelude::*;
use burn::tensor::activation::relu;

use crate::layers::{Dense, LayerFactory};

/// Dense layers with ReLU between them; the input image is flattened.
#[derive(Module, Debug)]
pub struct Mlp {
    /// The layers, input first.
    pub layers: Vec<Dense>,
}

impl Mlp {
    /// `d_in -> hidden... -> classes`.
    pub fn new(f: &mut LayerFactory<'_>, d_in: usize, hidden: &[usize], classes: usize) -> Self {
        let mut sizes = vec![d_in];
        sizes.extend_from_slice(hidden);
        sizes.push(classes);
        let layers = sizes
            .windows(2)
            .enumerate()
            .map(|(i, w)| f.linear(&format!("layers.{i}"), w[0], w[1], true))
            .collect();
        Self { layers }
    }

    /// `[batch, c, h, w] -> [batch, classes]`.
    pub fn forward(&self, x: Tensor<4>, cb: Option<&CodebookView>) -> Tensor<2> {
        let mut h: Tensor<2> = x.flatten(1, 3);
        let last = self.layers.len().saturating_sub(1);
        for (i, layer) in self.layers.iter().enumerate() {
            h = layer.forward(h, cb);
            if i < last {
                h = relu(h);
            }
        }
        h
    }
}
