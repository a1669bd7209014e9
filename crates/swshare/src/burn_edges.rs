//! The burn edges of the method: a Bayesian model's weights into a [`WeightTable`], a
//! [`SharingPlan`] into a weight-shared model, and a shared model to and from the `.swb` file.
//!
//! Layer paths are the `models` crate's (`body.layers.0.0.conv1`); a Bayesian weight tensor is
//! `<layer>.weight` in the table, and its shareable positions run in table order.

use std::collections::HashMap;

use bnn_layers::{
    BayesTensor, Codebook, LayerError, NamedTensor as LayerTensor, ParamRole,
    deterministic_from_bayes, export_params, import_params, inverse_softplus, softplus,
};
use burn::prelude::*;
use models::{Kind, ModelConfig, ModelError, Network};

use crate::format::{
    EllipseEntry, FullBnnData, LayerShape, NamedTensor, SharedModelData, SwbError,
};
use crate::{SharingPlan, SwshareError, TableError, WeightFate, WeightTable, WeightTableBuilder};

/// Errors at the burn edges.
#[derive(Debug, thiserror::Error)]
pub enum EdgeError {
    /// Building a model failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A layer conversion failed.
    #[error(transparent)]
    Layer(#[from] LayerError),
    /// The method's stages failed.
    #[error(transparent)]
    Swshare(#[from] SwshareError),
    /// A weight table could not be built.
    #[error(transparent)]
    Table(#[from] TableError),
    /// The model file failed.
    #[error(transparent)]
    Format(#[from] SwbError),
    /// The plan, table, model or file disagree.
    #[error("{0}")]
    Mismatch(String),
}

/// The weight table of a Bayesian model's exported tensors (see `bnn_layers::export_bayes`):
/// weights are shareable, biases are not.
pub fn table_from_tensors(tensors: &[BayesTensor]) -> Result<WeightTable, EdgeError> {
    let mut b = WeightTableBuilder::new();
    for t in tensors {
        b.push_layer(
            t.path.clone(),
            &t.shape,
            t.role == ParamRole::Weight,
            &t.mu,
            &t.sigma,
            t.grad_mu.as_deref(),
        );
    }
    Ok(b.build()?)
}

/// Where each shareable layer's weights start among the plan's positions.
fn shareable_starts(table: &WeightTable) -> HashMap<String, (usize, usize)> {
    let mut starts = HashMap::new();
    let mut pos = 0;
    for (i, l) in table.layers().iter().enumerate() {
        if l.shareable {
            starts.insert(l.path.clone(), (pos, i));
            pos += l.len;
        }
    }
    starts
}

/// Builds the weight-shared model of `config`'s architecture from a plan: codebook entries start
/// at their component means, outliers at their own `(mu, sigma)`, ellipse weights blend as the
/// plan says; biases, batch-norm and other parameters are copied from `bayes` by path.
pub fn build_shared_model(
    config: &ModelConfig,
    bayes: &Network,
    table: &WeightTable,
    plan: &SharingPlan,
    device: &Device,
) -> Result<Network, EdgeError> {
    plan.validate()
        .map_err(|e| EdgeError::Mismatch(format!("invalid plan: {e}")))?;
    if plan.n_weights() != table.n_shareable() {
        return Err(EdgeError::Mismatch(format!(
            "plan covers {} weights, the table has {} shareable",
            plan.n_weights(),
            table.n_shareable()
        )));
    }
    let starts = shareable_starts(table);
    let mut share = |path: &str, shape: &[usize]| {
        let key = format!("{path}.weight");
        let &(start, li) = starts
            .get(&key)
            .ok_or_else(|| ModelError::MissingSources(key.clone()))?;
        let info = &table.layers()[li];
        if info.shape != shape {
            return Err(ModelError::InvalidConfig(format!(
                "{key}: plan shape {:?} differs from the model's {shape:?}",
                info.shape
            )));
        }
        Ok(sources_for(plan, table, start, info.offset, info.len))
    };
    let mu: Vec<f32> = plan.codebook.iter().map(|c| c.init_mu).collect();
    let rho: Vec<f32> = plan
        .codebook
        .iter()
        .map(|c| inverse_softplus(c.init_sigma as f64) as f32)
        .collect();
    let codebook = Codebook::new(&mu, &rho, device)?;
    let shared_config = config
        .clone()
        .with_kind(Kind::Shared)
        .with_codebook_len(mu.len());
    let model = shared_config.init_shared(device, &mut share, codebook)?;
    let (model, _) = deterministic_from_bayes(bayes, model)?;
    Ok(model)
}

fn sources_for(
    plan: &SharingPlan,
    table: &WeightTable,
    start: usize,
    offset: usize,
    len: usize,
) -> Vec<bnn_layers::WeightSource> {
    use bnn_layers::WeightSource;
    (0..len)
        .map(|i| match plan.fates[start + i] {
            WeightFate::Shared(k) => WeightSource::Codebook(k),
            WeightFate::Ellipse(j) => {
                let e = &plan.ellipses[j as usize];
                let (components, alphas) = e.blend().unzip();
                WeightSource::Ellipse { components, alphas }
            }
            WeightFate::Outlier(_) => WeightSource::Outlier {
                mu: table.mu()[offset + i],
                rho: inverse_softplus(table.sigma()[offset + i] as f64) as f32,
            },
        })
        .collect()
}

fn is_shared_part(path: &str) -> bool {
    path.starts_with("codebook.")
        || [
            ".index",
            ".outlier_mu",
            ".outlier_rho",
            ".ellipse_components",
            ".ellipse_alphas",
            ".prior_mu",
        ]
        .iter()
        .any(|s| path.ends_with(s))
}

fn to_format(t: LayerTensor) -> NamedTensor {
    NamedTensor {
        path: t.path,
        shape: t.shape,
        data: t.data,
    }
}

/// The `.swb` content of a trained shared model: current codebook and outlier values, the plan's
/// fates and blends, every other parameter as an unshared tensor.
pub fn to_swb(
    model: &Network,
    config: &ModelConfig,
    table: &WeightTable,
    plan: &SharingPlan,
) -> Result<SharedModelData, EdgeError> {
    let params = export_params(model);
    let get = |p: &str| params.iter().find(|t| t.path == p);
    let cb_mu =
        get("codebook.mu").ok_or_else(|| EdgeError::Mismatch("model has no codebook".into()))?;
    let cb_rho =
        get("codebook.rho").ok_or_else(|| EdgeError::Mismatch("model has no codebook".into()))?;
    let mut layers = Vec::new();
    let (mut outlier_mu, mut outlier_rho) = (Vec::new(), Vec::new());
    for l in table.layers().iter().filter(|l| l.shareable) {
        layers.push(LayerShape {
            path: l.path.clone(),
            shape: l.shape.clone(),
        });
        if let (Some(m), Some(r)) = (
            get(&format!("{}.outlier_mu", l.path)),
            get(&format!("{}.outlier_rho", l.path)),
        ) {
            outlier_mu.extend_from_slice(&m.data);
            outlier_rho.extend_from_slice(&r.data);
        }
    }
    let outlier_causes: Vec<_> = plan.outliers().map(|(_, c)| c).collect();
    if outlier_causes.len() != outlier_mu.len() {
        return Err(EdgeError::Mismatch(format!(
            "plan has {} outliers, the model {}",
            outlier_causes.len(),
            outlier_mu.len()
        )));
    }
    let ellipses = plan
        .ellipses
        .iter()
        .map(|e| {
            let (components, alphas) = e.blend().unzip();
            EllipseEntry { components, alphas }
        })
        .collect();
    let arch = serde_json::to_string(
        &config
            .clone()
            .with_kind(Kind::Shared)
            .with_codebook_len(cb_mu.data.len()),
    )
    .map_err(|e| EdgeError::Mismatch(e.to_string()))?;
    Ok(SharedModelData {
        arch,
        codebook_mu: cb_mu.data.clone(),
        codebook_rho: cb_rho.data.clone(),
        layers,
        fates: plan.fates.clone(),
        ellipses,
        outlier_mu,
        outlier_rho,
        outlier_causes,
        unshared: params
            .into_iter()
            .filter(|t| !is_shared_part(&t.path))
            .map(to_format)
            .collect(),
    })
}

/// Rebuilds a shared model from `.swb` content; returns it with its configuration.
pub fn from_swb(
    data: &SharedModelData,
    device: &Device,
) -> Result<(Network, ModelConfig), EdgeError> {
    data.validate()
        .map_err(|e| EdgeError::Mismatch(format!("invalid model file: {e}")))?;
    let config: ModelConfig = serde_json::from_str(&data.arch)
        .map_err(|e| EdgeError::Mismatch(format!("bad architecture config in model file: {e}")))?;
    let mut starts = HashMap::new();
    let mut pos = 0;
    for l in &data.layers {
        let n: usize = l.shape.iter().product();
        starts.insert(l.path.clone(), (pos, n, l.shape.clone()));
        pos += n;
    }
    // Outliers are stored in fate order; their index among outliers is a running count.
    let mut outlier_before = Vec::with_capacity(data.fates.len());
    let mut count = 0usize;
    for f in &data.fates {
        outlier_before.push(count);
        if matches!(f, WeightFate::Outlier(_)) {
            count += 1;
        }
    }
    let mut share = |path: &str, shape: &[usize]| {
        use bnn_layers::WeightSource;
        let key = format!("{path}.weight");
        let (start, n, s) = starts
            .get(&key)
            .ok_or_else(|| ModelError::MissingSources(key.clone()))?;
        if s.as_slice() != shape {
            return Err(ModelError::InvalidConfig(format!(
                "{key}: file shape {s:?} differs from {shape:?}"
            )));
        }
        Ok((*start..start + n)
            .map(|p| match data.fates[p] {
                WeightFate::Shared(k) => WeightSource::Codebook(k),
                WeightFate::Ellipse(j) => {
                    let e = &data.ellipses[j as usize];
                    WeightSource::Ellipse {
                        components: e.components.clone(),
                        alphas: e.alphas.clone(),
                    }
                }
                WeightFate::Outlier(_) => {
                    let o = outlier_before[p];
                    WeightSource::Outlier {
                        mu: data.outlier_mu[o],
                        rho: data.outlier_rho[o],
                    }
                }
            })
            .collect())
    };
    let codebook = Codebook::new(&data.codebook_mu, &data.codebook_rho, device)?;
    let model = config.init_shared(device, &mut share, codebook)?;
    let unshared: Vec<LayerTensor> = data
        .unshared
        .iter()
        .map(|t| LayerTensor {
            path: t.path.clone(),
            shape: t.shape.clone(),
            data: t.data.clone(),
        })
        .collect();
    let (model, set) = import_params(model, &unshared)?;
    if set != unshared.len() {
        return Err(EdgeError::Mismatch(format!(
            "{} of {} unshared tensors in the file match no parameter of the model",
            unshared.len() - set,
            unshared.len()
        )));
    }
    Ok((model, config))
}

/// The full BNN's file content (every weight's `(mu, rho)`), the baseline of the size ratio.
pub fn full_bnn_data(model: &Network, config: &ModelConfig) -> Result<FullBnnData, EdgeError> {
    let params = export_params(model);
    let tensors = bnn_layers::export_bayes(model, None);
    let mut layers = Vec::new();
    let (mut mu, mut rho) = (Vec::new(), Vec::new());
    let mut bayes_paths = Vec::new();
    for t in tensors.iter().filter(|t| t.role == ParamRole::Weight) {
        layers.push(LayerShape {
            path: t.path.clone(),
            shape: t.shape.clone(),
        });
        mu.extend_from_slice(&t.mu);
        rho.extend(t.sigma.iter().map(|&s| inverse_softplus(s as f64) as f32));
        bayes_paths.push(format!("{}_mu", t.path));
        bayes_paths.push(format!("{}_rho", t.path));
    }
    let arch = serde_json::to_string(config).map_err(|e| EdgeError::Mismatch(e.to_string()))?;
    Ok(FullBnnData {
        arch,
        layers,
        mu,
        rho,
        unshared: params
            .into_iter()
            .filter(|t| !bayes_paths.contains(&t.path))
            .map(to_format)
            .collect(),
    })
}

/// `softplus(rho)` of a host slice (the stored `rho` to sigma).
pub fn sigmas(rho: &[f32]) -> Vec<f32> {
    rho.iter().map(|&r| softplus(r as f64) as f32).collect()
}
