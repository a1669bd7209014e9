//! One-call conversion between a deterministic model and its Bayesian twin, by parameter path.
//!
//! Works for any pair of modules built from the same architecture where the Bayesian layer's
//! `weight_mu` sits at the path of the deterministic layer's `weight` (as in the `models` crate,
//! whose layer enums keep paths identical across kinds).

use std::collections::HashMap;

use burn::module::{Module, ModuleMapper, Param};
use burn::prelude::*;

use crate::LayerError;
use crate::visit::{Collector, ModulePath};

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    ToBayes,
    ToDeterministic,
    ToShared,
    Same,
}

struct CopyMapper {
    path: ModulePath,
    source: HashMap<String, (Vec<usize>, Tensor<1>)>,
    direction: Direction,
    copied: usize,
    error: Option<LayerError>,
}

impl CopyMapper {
    fn source_for(&self, path: &str) -> Option<&(Vec<usize>, Tensor<1>)> {
        match self.direction {
            Direction::ToBayes => {
                if let Some(base) = path.strip_suffix("_prior_mu") {
                    self.source.get(base)
                } else if let Some(base) = path.strip_suffix("_mu") {
                    self.source.get(base)
                } else if path.ends_with("_rho") {
                    None
                } else {
                    self.source.get(path)
                }
            }
            Direction::Same => self.source.get(path),
            // A shared weight keeps its empirical-prior centre under the weight
            // (`conv1.weight.prior_mu`); the Bayesian layer beside it (`conv1.weight_prior_mu`).
            Direction::ToShared => match path.strip_suffix(".weight.prior_mu") {
                Some(layer) => self.source.get(&format!("{layer}.weight_prior_mu")),
                None => self.source.get(path),
            },
            Direction::ToDeterministic => self
                .source
                .get(&format!("{path}_mu"))
                .or_else(|| self.source.get(path)),
        }
    }
}

impl ModuleMapper for CopyMapper {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let path = self.path.joined();
        let Some((shape, flat)) = self.source_for(&path).cloned() else {
            return param;
        };
        let dims = param.shape().dims::<D>();
        // A shared weight's prior centre is stored flat; the Bayesian layer's has the weight's
        // shape: the same values in the same (row-major) order.
        let same = if self.direction == Direction::ToShared {
            shape.iter().product::<usize>() == dims.iter().product::<usize>()
        } else {
            shape == dims.to_vec()
        };
        if !same {
            self.error.get_or_insert(LayerError::ShapeMismatch {
                what: path,
                expected: dims.to_vec(),
                got: shape,
            });
            return param;
        }
        self.copied += 1;
        param.map(|old| {
            let device = old.device();
            let requires_grad = old.is_require_grad();
            flat.reshape(dims)
                .to_device(&device)
                .detach()
                .set_require_grad(requires_grad)
        })
    }
}

fn copy_params<S: Module, T: Module>(
    source: &S,
    target: T,
    direction: Direction,
) -> Result<(T, usize), LayerError> {
    let collected = Collector::collect(source, None);
    let source = collected
        .floats
        .into_iter()
        .map(|e| (e.path, (e.shape, e.flat)))
        .collect();
    let mut mapper = CopyMapper {
        path: ModulePath::default(),
        source,
        direction,
        copied: 0,
        error: None,
    };
    let target = target.map(&mut mapper);
    match mapper.error {
        Some(e) => Err(e),
        None => Ok((target, mapper.copied)),
    }
}

/// Makes `bayes` the Bayesian twin of a trained deterministic model: every `*_mu` (and, where
/// present, `*_prior_mu`, the centre of an empirical prior) takes the deterministic weights at
/// the same path; every other parameter with a matching path (batch-norm scales, running
/// statistics) is copied; `*_rho` keep their initialisation. Returns the model and the number of
/// tensors copied.
pub fn bayes_from_deterministic<D: Module, B: Module>(
    deterministic: &D,
    bayes: B,
) -> Result<(B, usize), LayerError> {
    copy_params(deterministic, bayes, Direction::ToBayes)
}

/// The mean network of a Bayesian model: `weight <- weight_mu` for every layer of the
/// deterministic `target`, other parameters copied by path.
pub fn deterministic_from_bayes<B: Module, D: Module>(
    bayes: &B,
    target: D,
) -> Result<(D, usize), LayerError> {
    copy_params(bayes, target, Direction::ToDeterministic)
}

/// Copies into a weight-shared model `shared` everything of the Bayesian model `bayes` that it
/// keeps per weight: biases (`bias_mu`, `bias_rho`), batch norm and other parameters by path,
/// and the empirical-prior centres of the shared weights (`<layer>.weight_prior_mu` into
/// `<layer>.weight.prior_mu`). The codebook and outliers come from the sharing plan, not from
/// here. Returns the model and the number of tensors copied.
pub fn shared_from_bayes<B: Module, S: Module>(
    bayes: &B,
    shared: S,
) -> Result<(S, usize), LayerError> {
    copy_params(bayes, shared, Direction::ToShared)
}

/// A named host tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTensor {
    /// Parameter path (enum variant names left out).
    pub path: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Values, row-major.
    pub data: Vec<f32>,
}

/// Every float parameter of a model (running statistics included), by path, in visiting order.
pub fn export_params<M: Module>(model: &M) -> Vec<NamedTensor> {
    Collector::collect(model, None)
        .floats
        .into_iter()
        .map(|e| NamedTensor {
            path: e.path,
            shape: e.shape,
            data: e
                .flat
                .into_data()
                .convert::<f32>()
                .try_into_vec::<f32>()
                .unwrap_or_default(),
        })
        .collect()
}

/// Sets the float parameters of `model` whose paths appear in `tensors`; returns the model and
/// how many were set. A shape mismatch is an error; paths not in the model are ignored.
pub fn import_params<M: Module>(
    model: M,
    tensors: &[NamedTensor],
) -> Result<(M, usize), LayerError> {
    let device = model.devices().first().cloned().unwrap_or_default();
    let mut source = HashMap::new();
    for t in tensors {
        let n: usize = t.shape.iter().product();
        if n != t.data.len() {
            return Err(LayerError::LengthMismatch {
                what: t.path.clone(),
                expected: n,
                got: t.data.len(),
            });
        }
        let flat =
            Tensor::<1>::from_data(burn::tensor::TensorData::new(t.data.clone(), [n]), &device);
        source.insert(t.path.clone(), (t.shape.clone(), flat));
    }
    let mut mapper = CopyMapper {
        path: ModulePath::default(),
        source,
        direction: Direction::Same,
        copied: 0,
        error: None,
    };
    let model = model.map(&mut mapper);
    match mapper.error {
        Some(e) => Err(e),
        None => Ok((model, mapper.copied)),
    }
}
