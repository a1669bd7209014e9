//! The flat table of every Bayesian weight of a network: `(mu, sigma)` and, optionally, the
//! averaged gradient of the loss with respect to `mu`.
//!
//! Weight order is stable and documented: layers in the order they were pushed (the burn edge
//! walks the model in its module order, i.e. by layer path), then row-major index inside a layer.
//! A layer's weights occupy `offset..offset + len` of the flat arrays.
//!
//! Only *shareable* layers take part in weight sharing; biases and normalisation parameters
//! are kept as they are (`shareable: false`). The method's stages work on the **shareable
//! weights in table order**; a weight's position in that sub-sequence is its *shareable
//! position*, the index used by [`crate::SharingPlan::fates`].

use serde::{Deserialize, Serialize};
use std::ops::Range;
use thiserror::Error;

/// One layer (one parameter tensor) of the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerInfo {
    /// Module path of the parameter, e.g. `"layer1.0.conv1.weight"`.
    pub path: String,
    /// Tensor shape; `len` is its product.
    pub shape: Vec<usize>,
    /// First index of the layer in the flat arrays.
    pub offset: usize,
    /// Number of weights of the layer.
    pub len: usize,
    /// Whether the layer takes part in weight sharing (false for biases and normalisation
    /// parameters, which keep their own distributions).
    pub shareable: bool,
}

impl LayerInfo {
    /// The layer's index range in the flat arrays.
    pub fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.len
    }
}

/// Why a table could not be built.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum TableError {
    /// A layer's slice lengths disagree with its shape.
    #[error("layer `{layer}`: {what} has {got} values, shape {shape:?} needs {expected}")]
    LengthMismatch {
        /// Layer path.
        layer: String,
        /// Which array (`mu`, `sigma`, `grad_mu`).
        what: &'static str,
        /// Length given.
        got: usize,
        /// Length the shape implies.
        expected: usize,
        /// Layer shape.
        shape: Vec<usize>,
    },
    /// Layers are not contiguous and in order, or do not cover the arrays exactly.
    #[error(
        "layer `{layer}`: offset {offset} (len {len}) but the previous layers end at {expected}"
    )]
    BadOffset {
        /// Layer path.
        layer: String,
        /// Offset given.
        offset: usize,
        /// Length given.
        len: usize,
        /// Offset expected.
        expected: usize,
    },
    /// The arrays are longer or shorter than the layers cover.
    #[error("{what} has {got} values but the layers cover {expected}")]
    TotalMismatch {
        /// Which array.
        what: &'static str,
        /// Length given.
        got: usize,
        /// Length covered by the layers.
        expected: usize,
    },
    /// A value is NaN or infinite, or a sigma is not strictly positive.
    #[error("layer `{layer}` index {index} (flat {flat}): {what} = {value} is invalid ({why})")]
    BadValue {
        /// Layer path.
        layer: String,
        /// Row-major index inside the layer.
        index: usize,
        /// Flat index in the table.
        flat: usize,
        /// Which array.
        what: &'static str,
        /// The offending value.
        value: f32,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Some layers have gradients and some do not.
    #[error("layer `{layer}`: gradients must be given for all layers or for none")]
    PartialGradients {
        /// First layer whose gradient presence differs from the first layer's.
        layer: String,
    },
    /// Two layers have the same path.
    #[error("duplicate layer path `{0}`")]
    DuplicatePath(String),
    /// More weights than `u32` positions (plans index weights with `u32`).
    #[error("table has {0} weights; at most u32::MAX are supported")]
    TooLarge(usize),
}

/// The validated flat table of `(mu, sigma[, grad_mu])` of a network's Bayesian weights.
///
/// `sigma` is the standard deviation (already through the softplus or exp of the model's
/// parametrisation). `grad_mu`, when present, is `d loss / d mu` averaged over a configurable
/// number of mini-batches ([`crate::OutlierConfig::grad_batches`]); the averaging is done by
/// whoever collects the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WeightTable {
    layers: Vec<LayerInfo>,
    mu: Vec<f32>,
    sigma: Vec<f32>,
    grad_mu: Option<Vec<f32>>,
    n_shareable: usize,
}

impl WeightTable {
    /// Builds a table from layers and flat arrays, validating everything: layers contiguous
    /// from offset 0 and covering the arrays, `len` equal to the shape's product, array
    /// lengths equal, all values finite and every `sigma > 0`, unique paths.
    pub fn new(
        layers: Vec<LayerInfo>,
        mu: Vec<f32>,
        sigma: Vec<f32>,
        grad_mu: Option<Vec<f32>>,
    ) -> Result<Self, TableError> {
        let mut expected = 0usize;
        let mut seen = std::collections::HashSet::new();
        for l in &layers {
            let prod: usize = l.shape.iter().product();
            if prod != l.len {
                return Err(TableError::LengthMismatch {
                    layer: l.path.clone(),
                    what: "len",
                    got: l.len,
                    expected: prod,
                    shape: l.shape.clone(),
                });
            }
            if l.offset != expected {
                return Err(TableError::BadOffset {
                    layer: l.path.clone(),
                    offset: l.offset,
                    len: l.len,
                    expected,
                });
            }
            if !seen.insert(l.path.as_str()) {
                return Err(TableError::DuplicatePath(l.path.clone()));
            }
            expected += l.len;
        }
        if expected > u32::MAX as usize {
            return Err(TableError::TooLarge(expected));
        }
        let arrays: [(&'static str, Option<&[f32]>); 3] = [
            ("mu", Some(&mu)),
            ("sigma", Some(&sigma)),
            ("grad_mu", grad_mu.as_deref()),
        ];
        for (what, arr) in arrays {
            let Some(arr) = arr else { continue };
            if arr.len() != expected {
                return Err(TableError::TotalMismatch {
                    what,
                    got: arr.len(),
                    expected,
                });
            }
            for l in &layers {
                for (index, &value) in arr[l.range()].iter().enumerate() {
                    let why = if !value.is_finite() {
                        "not finite"
                    } else if what == "sigma" && value <= 0.0 {
                        "sigma must be > 0"
                    } else {
                        continue;
                    };
                    return Err(TableError::BadValue {
                        layer: l.path.clone(),
                        index,
                        flat: l.offset + index,
                        what,
                        value,
                        why,
                    });
                }
            }
        }
        let n_shareable = layers.iter().filter(|l| l.shareable).map(|l| l.len).sum();
        Ok(Self {
            layers,
            mu,
            sigma,
            grad_mu,
            n_shareable,
        })
    }

    /// The layers, in table order.
    pub fn layers(&self) -> &[LayerInfo] {
        &self.layers
    }
    /// All means, flat, in table order.
    pub fn mu(&self) -> &[f32] {
        &self.mu
    }
    /// All standard deviations, flat, in table order.
    pub fn sigma(&self) -> &[f32] {
        &self.sigma
    }
    /// Averaged `d loss / d mu`, flat, if collected.
    pub fn grad_mu(&self) -> Option<&[f32]> {
        self.grad_mu.as_deref()
    }
    /// Number of Bayesian weights (all layers).
    pub fn len(&self) -> usize {
        self.mu.len()
    }
    /// Whether the table has no weights.
    pub fn is_empty(&self) -> bool {
        self.mu.is_empty()
    }
    /// Number of weights in shareable layers.
    pub fn n_shareable(&self) -> usize {
        self.n_shareable
    }
    /// Number of weights in unshareable layers (biases, normalisation parameters).
    pub fn n_unshared(&self) -> usize {
        self.len() - self.n_shareable
    }
    /// Flat index ranges of the shareable layers, in order; concatenated they enumerate the
    /// shareable positions `0..n_shareable()`.
    pub fn shareable_ranges(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.layers
            .iter()
            .filter(|l| l.shareable)
            .map(LayerInfo::range)
    }
    /// Flat table index of every shareable position, in order.
    pub fn shareable_indices(&self) -> Vec<u32> {
        self.shareable_ranges()
            .flat_map(|r| r.map(|i| i as u32))
            .collect()
    }
    /// Gathers a flat array at the shareable positions.
    pub fn gather_shareable(&self, values: &[f32]) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.n_shareable);
        for r in self.shareable_ranges() {
            out.extend_from_slice(&values[r]);
        }
        out
    }
    /// Looks a layer up by path.
    pub fn layer(&self, path: &str) -> Option<&LayerInfo> {
        self.layers.iter().find(|l| l.path == path)
    }
}

/// Incremental construction of a [`WeightTable`], one layer at a time (offsets are computed).
#[derive(Debug, Default, Clone)]
pub struct WeightTableBuilder {
    layers: Vec<LayerInfo>,
    mu: Vec<f32>,
    sigma: Vec<f32>,
    grad: Vec<f32>,
    grad_state: Option<bool>,
    first_error: Option<TableError>,
}

impl WeightTableBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one layer. `grad_mu` must be given for all layers or for none. Errors are
    /// reported by [`Self::build`] (the first one wins), so calls can be chained.
    pub fn push_layer(
        &mut self,
        path: impl Into<String>,
        shape: &[usize],
        shareable: bool,
        mu: &[f32],
        sigma: &[f32],
        grad_mu: Option<&[f32]>,
    ) -> &mut Self {
        if self.first_error.is_some() {
            return self;
        }
        let path = path.into();
        let len: usize = shape.iter().product();
        let arrays: [(&'static str, Option<&[f32]>); 3] = [
            ("mu", Some(mu)),
            ("sigma", Some(sigma)),
            ("grad_mu", grad_mu),
        ];
        for (what, arr) in arrays {
            if let Some(arr) = arr
                && arr.len() != len
            {
                self.first_error = Some(TableError::LengthMismatch {
                    layer: path,
                    what,
                    got: arr.len(),
                    expected: len,
                    shape: shape.to_vec(),
                });
                return self;
            }
        }
        let has_grad = grad_mu.is_some();
        if *self.grad_state.get_or_insert(has_grad) != has_grad {
            self.first_error = Some(TableError::PartialGradients { layer: path });
            return self;
        }
        self.layers.push(LayerInfo {
            path,
            shape: shape.to_vec(),
            offset: self.mu.len(),
            len,
            shareable,
        });
        self.mu.extend_from_slice(mu);
        self.sigma.extend_from_slice(sigma);
        if let Some(g) = grad_mu {
            self.grad.extend_from_slice(g);
        }
        self
    }

    /// Validates and builds the table.
    pub fn build(self) -> Result<WeightTable, TableError> {
        if let Some(e) = self.first_error {
            return Err(e);
        }
        let grad = (self.grad_state == Some(true)).then_some(self.grad);
        WeightTable::new(self.layers, self.mu, self.sigma, grad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_layers() -> WeightTableBuilder {
        let mut b = WeightTableBuilder::new();
        b.push_layer(
            "fc.weight",
            &[2, 3],
            true,
            &[0.1, -0.1, 0.0, 0.3, 0.05, 0.02],
            &[0.01; 6],
            None,
        )
        .push_layer("fc.bias", &[2], false, &[0.0, 1.0], &[0.1, 0.2], None);
        b
    }

    #[test]
    fn builds_and_indexes() {
        let t = two_layers().build().unwrap();
        assert_eq!(t.len(), 8);
        assert_eq!(t.n_shareable(), 6);
        assert_eq!(t.n_unshared(), 2);
        assert_eq!(t.layers()[1].offset, 6);
        assert_eq!(t.shareable_indices(), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(t.gather_shareable(t.mu())[3], 0.3);
        assert!(t.grad_mu().is_none());
    }

    #[test]
    fn unshareable_first_is_skipped() {
        let mut b = WeightTableBuilder::new();
        b.push_layer("bn.weight", &[2], false, &[1.0, 1.0], &[0.1, 0.1], None)
            .push_layer("conv.weight", &[3], true, &[0.1, 0.2, 0.3], &[0.1; 3], None);
        let t = b.build().unwrap();
        assert_eq!(t.shareable_indices(), vec![2, 3, 4]);
    }

    #[test]
    fn rejects_nan_with_layer_and_index() {
        let mut b = two_layers();
        b.push_layer("x", &[3], true, &[0.0, f32::NAN, 0.0], &[1.0; 3], None);
        match b.build() {
            Err(TableError::BadValue {
                layer, index, flat, ..
            }) => {
                assert_eq!(layer, "x");
                assert_eq!(index, 1);
                assert_eq!(flat, 9);
            }
            other => panic!("expected BadValue, got {other:?}"),
        }
    }

    #[test]
    fn rejects_nonpositive_sigma() {
        let mut b = WeightTableBuilder::new();
        b.push_layer("x", &[2], true, &[0.0, 0.0], &[0.1, 0.0], None);
        assert!(matches!(
            b.build(),
            Err(TableError::BadValue { index: 1, .. })
        ));
    }

    #[test]
    fn rejects_length_mismatch() {
        let mut b = WeightTableBuilder::new();
        b.push_layer("x", &[2, 2], true, &[0.0; 4], &[0.1; 3], None);
        assert!(matches!(
            b.build(),
            Err(TableError::LengthMismatch { what: "sigma", .. })
        ));
        let layers = vec![LayerInfo {
            path: "x".into(),
            shape: vec![3],
            offset: 0,
            len: 3,
            shareable: true,
        }];
        assert!(matches!(
            WeightTable::new(
                layers.clone(),
                vec![0.0; 3],
                vec![1.0; 3],
                Some(vec![0.0; 2])
            ),
            Err(TableError::TotalMismatch {
                what: "grad_mu",
                ..
            })
        ));
        let mut bad = layers;
        bad[0].offset = 1;
        assert!(matches!(
            WeightTable::new(bad, vec![0.0; 3], vec![1.0; 3], None),
            Err(TableError::BadOffset { .. })
        ));
    }

    #[test]
    fn rejects_partial_gradients_and_duplicates() {
        let mut b = WeightTableBuilder::new();
        b.push_layer("a", &[1], true, &[0.0], &[0.1], Some(&[0.0]))
            .push_layer("b", &[1], true, &[0.0], &[0.1], None);
        assert!(matches!(
            b.build(),
            Err(TableError::PartialGradients { .. })
        ));
        let mut b = WeightTableBuilder::new();
        b.push_layer("a", &[1], true, &[0.0], &[0.1], None)
            .push_layer("a", &[1], true, &[0.0], &[0.1], None);
        assert!(matches!(b.build(), Err(TableError::DuplicatePath(_))));
    }
}
