//! One of our models as a PyTorch state dict: the mean network, the full BNN under a Bayesian
//! library's names, or the weight-shared model as named arrays.

use std::collections::HashMap;

use bnn_layers::{ModulePath, NamedTensor, export_params, export_posterior, import_params};
use bnn_layers::{inverse_softplus, softplus};
use bnn_models::torch_names::{Convention, torch_key};
use bnn_models::{Kind, ModelConfig, Network};
use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::Int;

use super::InteropError;
use super::import::{to_torch, torch_shape};
use super::state_dict::{HostTensor, StateDict};

/// What `swbnn export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportAs {
    /// A state dict under a library's names: the mean network for
    /// [`Convention::Plain`] and [`Convention::Torchvision`] (`mu` of every weight), the full
    /// posterior for the Bayesian conventions. A shared model is exported as its per-weight
    /// Bayesian twin (each weight's gathered `(mu, sigma)`).
    Convention(Convention),
    /// The weight-shared model as it is ([`SHARED_FORMAT`]).
    Shared,
}

impl std::str::FromStr for ExportAs {
    type Err = String;

    /// A convention's name (`bayesian-torch`, `blitz`, `torchbnn`, `plain`, `torchvision`) or
    /// `shared`.
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "shared" {
            return Ok(ExportAs::Shared);
        }
        s.parse::<Convention>()
            .map(ExportAs::Convention)
            .map_err(|e| format!("{e}, or shared"))
    }
}

/// The `format` metadata of a shared model's export, read by `interop/torch/swbnn_shared.py`.
///
/// Names, with `L` a layer's plain PyTorch name (`conv1`, `layer1.0.conv2`, `fc`):
/// - `codebook.mu`, `codebook.sigma` `[K]`: the shared Gaussians;
/// - `L.weight.index` (int64, the weight's PyTorch shape): per weight, a row of the table
///   `[codebook | L's outliers | L's ellipse weights]`;
/// - `L.weight.outlier_mu`, `L.weight.outlier_sigma` `[n]`;
/// - `L.weight.ellipse_components` (int64) and `L.weight.ellipse_alphas` `[E, 5]`: an ellipse
///   weight is the moment-matched blend `m = sum a_j mu_j`,
///   `s^2 = sum a_j (sigma_j^2 + (mu_j - m)^2)` of its codebook entries (padding has alpha 0);
/// - `L.bias.mu`, `L.bias.sigma`: per-weight Bayesian biases;
/// - batch norm under PyTorch's names (`weight`, `bias`, `running_mean`, `running_var`).
///
/// The header's metadata holds `format` and `config` (the model's `config.json`).
pub const SHARED_FORMAT: &str = "swbnn-shared-v1";

/// The fixed noise of the interop tests, the same in Python: `eps_j = ((7919 j + 13) mod
/// 2003) / 1001 - 1` for the `j`-th value of a tensor in PyTorch's (row-major) layout,
/// computed in `f64` and rounded to `f32` (exact on both sides).
pub fn fixed_noise(n: usize) -> Vec<f32> {
    (0..n as u64)
        .map(|j| (((j * 7919 + 13) % 2003) as f64 / 1001.0 - 1.0) as f32)
        .collect()
}

/// The state dict of `model` (built from `config`) exported `as_`, with its metadata.
pub fn export_state_dict(
    model: &Network,
    config: &ModelConfig,
    as_: ExportAs,
) -> Result<(StateDict, HashMap<String, String>), InteropError> {
    let config_json =
        serde_json::to_string(config).map_err(|e| InteropError::Write(e.to_string()))?;
    let mut meta = HashMap::from([("config".to_string(), config_json)]);
    match as_ {
        ExportAs::Shared => {
            meta.insert("format".into(), SHARED_FORMAT.into());
            Ok((shared_arrays(model, config)?, meta))
        }
        ExportAs::Convention(c) => {
            meta.insert("format".into(), format!("pytorch-{}", c.name()));
            let twin;
            let model = match config.kind {
                Kind::Shared => {
                    twin = bayes_twin(model, config)?;
                    &twin
                }
                Kind::Deterministic if c.is_bayesian() => {
                    return Err(InteropError::Export(format!(
                        "a deterministic model has no posterior to write under {c}'s names; export it as plain or torchvision"
                    )));
                }
                _ => model,
            };
            Ok((convention_dict(model, config, c)?, meta))
        }
    }
}

/// Every parameter under `convention`'s key, plus PyTorch's `num_batches_tracked` (0) for each
/// batch norm, which `load_state_dict` expects.
fn convention_dict(
    model: &Network,
    config: &ModelConfig,
    convention: Convention,
) -> Result<StateDict, InteropError> {
    let mut out = StateDict::new();
    for t in export_params(model) {
        let Some(tk) = torch_key(config.arch, convention, &t.path, t.shape.len())? else {
            continue;
        };
        if t.path.ends_with(".running_mean") {
            let counter = tk.key.replace(".running_mean", ".num_batches_tracked");
            out.insert(counter, HostTensor::i64(vec![], vec![0]));
        }
        let data = to_torch(&t.data, &t.shape, tk.transform);
        out.insert(
            tk.key,
            HostTensor::f32(torch_shape(&t.shape, tk.transform), data),
        );
    }
    Ok(out)
}

/// The Bayesian model whose every weight has the gathered distribution of the shared model's.
pub fn bayes_twin(shared: &Network, config: &ModelConfig) -> Result<Network, InteropError> {
    let device = shared.devices().first().cloned().unwrap_or_default();
    let twin = config.clone().with_kind(Kind::Bayesian).init(&device)?;
    let shapes: HashMap<String, Vec<usize>> = twin.param_shapes().into_iter().collect();
    let mut named: Vec<NamedTensor> = export_params(shared)
        .into_iter()
        .filter(|t| shapes.contains_key(&t.path))
        .collect();
    for b in export_posterior(shared) {
        let Some(shape) = shapes.get(&format!("{}_mu", b.path)) else {
            continue;
        };
        if named.iter().any(|t| t.path == format!("{}_mu", b.path)) {
            continue;
        }
        let rho = b
            .sigma
            .iter()
            .map(|&s| inverse_softplus(f64::from(s)) as f32)
            .collect();
        named.push(NamedTensor {
            path: format!("{}_mu", b.path),
            shape: shape.clone(),
            data: b.mu,
        });
        named.push(NamedTensor {
            path: format!("{}_rho", b.path),
            shape: shape.clone(),
            data: rho,
        });
    }
    let (twin, copied) = import_params(twin, &named)?;
    if copied != shapes.len() {
        return Err(InteropError::Export(format!(
            "the shared model filled {copied} of its Bayesian twin's {} tensors",
            shapes.len()
        )));
    }
    Ok(twin)
}

/// Collects every integer parameter by path.
#[derive(Default)]
struct Ints {
    path: ModulePath,
    out: HashMap<String, Vec<i64>>,
}

impl ModuleVisitor for Ints {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<D, Int>>) {
        let v = param
            .val()
            .into_data()
            .convert::<i64>()
            .try_into_vec::<i64>()
            .unwrap_or_default();
        self.out.insert(self.path.joined(), v);
    }
}

fn softplus_all(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&r| softplus(f64::from(r)) as f32).collect()
}

/// The shared model's arrays ([`SHARED_FORMAT`]).
fn shared_arrays(model: &Network, config: &ModelConfig) -> Result<StateDict, InteropError> {
    if config.kind != Kind::Shared {
        return Err(InteropError::Export(format!(
            "only a weight-shared model (a .swb file) exports as shared arrays; this one is {:?}",
            config.kind
        )));
    }
    let device = model.devices().first().cloned().unwrap_or_default();
    let bayes_shapes: HashMap<String, Vec<usize>> = config
        .clone()
        .with_kind(Kind::Bayesian)
        .init(&device)?
        .param_shapes()
        .into_iter()
        .collect();
    let mut ints = Ints::default();
    model.visit(&mut ints);
    let floats: HashMap<String, NamedTensor> = export_params(model)
        .into_iter()
        .map(|t| (t.path.clone(), t))
        .collect();
    let float = |p: &str| {
        floats
            .get(p)
            .ok_or_else(|| InteropError::Export(format!("the shared model has no {p}")))
    };
    let mut out = StateDict::new();
    let mu = float("codebook.mu")?;
    out.insert(
        "codebook.mu".into(),
        HostTensor::f32(mu.shape.clone(), mu.data.clone()),
    );
    let rho = float("codebook.rho")?;
    out.insert(
        "codebook.sigma".into(),
        HostTensor::f32(rho.shape.clone(), softplus_all(&rho.data)),
    );
    let plain = |path: &str, rank: usize| -> Result<String, InteropError> {
        let tk = torch_key(config.arch, Convention::Plain, path, rank)?
            .ok_or_else(|| InteropError::Export(format!("{path} has no PyTorch name")))?;
        Ok(tk.key)
    };
    let mut index_paths: Vec<&String> = ints
        .out
        .keys()
        .filter(|p| p.ends_with(".weight.index"))
        .collect();
    index_paths.sort();
    for ipath in index_paths {
        let layer = ipath.trim_end_matches(".weight.index");
        let shape = bayes_shapes
            .get(&format!("{layer}.weight_mu"))
            .ok_or_else(|| InteropError::Export(format!("{layer}: not a layer of the model")))?;
        let tk = torch_key(
            config.arch,
            Convention::Plain,
            &format!("{layer}.weight_mu"),
            shape.len(),
        )?
        .ok_or_else(|| InteropError::Export(format!("{layer} has no PyTorch name")))?;
        let torch_layer = tk.key.trim_end_matches(".weight").to_string();
        let index: Vec<f32> = ints.out[ipath].iter().map(|&i| i as f32).collect();
        // Transposed like the weight (values are small integers, exact in f32).
        let index: Vec<i64> = to_torch(&index, shape, tk.transform)
            .into_iter()
            .map(|i| i as i64)
            .collect();
        out.insert(
            format!("{torch_layer}.weight.index"),
            HostTensor::i64(torch_shape(shape, tk.transform), index),
        );
        let w = format!("{layer}.weight");
        if let (Some(m), Some(r)) = (
            floats.get(&format!("{w}.outlier_mu")),
            floats.get(&format!("{w}.outlier_rho")),
        ) {
            out.insert(
                format!("{torch_layer}.weight.outlier_mu"),
                HostTensor::f32(m.shape.clone(), m.data.clone()),
            );
            out.insert(
                format!("{torch_layer}.weight.outlier_sigma"),
                HostTensor::f32(r.shape.clone(), softplus_all(&r.data)),
            );
        }
        if let (Some(c), Some(a)) = (
            ints.out.get(&format!("{w}.ellipse_components")),
            floats.get(&format!("{w}.ellipse_alphas")),
        ) {
            let e = a.data.len() / bnn_layers::MAX_BLEND;
            out.insert(
                format!("{torch_layer}.weight.ellipse_components"),
                HostTensor::i64(vec![e, bnn_layers::MAX_BLEND], c.clone()),
            );
            out.insert(
                format!("{torch_layer}.weight.ellipse_alphas"),
                HostTensor::f32(vec![e, bnn_layers::MAX_BLEND], a.data.clone()),
            );
        }
        if let (Some(m), Some(r)) = (
            floats.get(&format!("{layer}.bias_mu")),
            floats.get(&format!("{layer}.bias_rho")),
        ) {
            out.insert(
                format!("{torch_layer}.bias.mu"),
                HostTensor::f32(m.shape.clone(), m.data.clone()),
            );
            out.insert(
                format!("{torch_layer}.bias.sigma"),
                HostTensor::f32(r.shape.clone(), softplus_all(&r.data)),
            );
        }
    }
    // Batch norm (and any other per-weight parameter the plain names cover).
    for (path, t) in &floats {
        let last = path.rsplit('.').next().unwrap_or("");
        if matches!(last, "gamma" | "beta" | "running_mean" | "running_var") {
            out.insert(
                plain(path, t.shape.len())?,
                HostTensor::f32(t.shape.clone(), t.data.clone()),
            );
        }
    }
    Ok(out)
}
