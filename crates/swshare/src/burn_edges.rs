//! The burn edges of the method: a Bayesian model's weights into a [`WeightTable`], a
//! [`SharingPlan`] into a weight-shared model, and a shared model to and from the `.swb` file.
//!
//! Layer paths are the `models` crate's (`body.layers.0.0.conv1`); a Bayesian weight tensor is
//! `<layer>.weight` in the table, and its shareable positions run in table order.

use std::collections::HashMap;

use bnn_layers::{
    BayesTensor, Codebook, LayerError, NamedTensor as LayerTensor, ParamRole, export_params,
    import_params, inverse_softplus, shared_from_bayes, softplus,
};
use bnn_models::{Architecture, Classifier, Kind, ModelError};
use burn::prelude::*;

use crate::format::{
    EllipseEntry, FullBnnData, LayerShape, ModelMeta, NamedTensor, SharedModelData, SwbError,
};
use crate::{SharingPlan, SwshareError, TableError, WeightFate, WeightTable, WeightTableBuilder};

// The layers pad every ellipse blend to their own width; it must be the method's.
const _: () = assert!(bnn_layers::MAX_BLEND == crate::MAX_BLEND);

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
    /// The sharing plan is inconsistent.
    #[error("invalid sharing plan: {0}")]
    InvalidPlan(#[from] crate::PlanError),
    /// The plan and the weight table cover different numbers of weights.
    #[error("the sharing plan covers {plan} weights, the weight table has {table} shareable")]
    PlanTableMismatch {
        /// Weights in the plan.
        plan: usize,
        /// Shareable weights in the table.
        table: usize,
    },
    /// A model that should be weight-shared has no codebook.
    #[error("the model has no codebook: it is not a weight-shared model")]
    NoCodebook,
    /// The model and its config disagree about the codebook.
    #[error(
        "the architecture config says {config:?} with {config_k} codebook entries, the model has {model_k}"
    )]
    CodebookMismatch {
        /// The config's kind.
        config: Kind,
        /// The config's codebook length.
        config_k: usize,
        /// The model's codebook length.
        model_k: usize,
    },
    /// The plan and the model have different numbers of outliers.
    #[error("the sharing plan has {plan} outliers, the model {model}")]
    OutlierMismatch {
        /// Outliers in the plan.
        plan: usize,
        /// Outlier parameters in the model.
        model: usize,
    },
    /// A model file whose content does not fit its architecture (the error names the file).
    #[error("{}: {source}", path.display())]
    File {
        /// The model file.
        path: std::path::PathBuf,
        /// What is wrong.
        #[source]
        source: Box<EdgeError>,
    },
    /// The content of a model file is inconsistent.
    #[error("invalid model file content: {0}")]
    InvalidFile(String),
    /// The architecture config (JSON) of a model file cannot be read or written.
    #[error("the model file's architecture config: {0}")]
    Architecture(#[from] serde_json::Error),
    /// Parameters of the architecture that the model file does not hold.
    #[error(
        "the model file lacks {missing} of the {expected} tensors its architecture needs besides the shared weights (first: {first}); a missing tensor is never filled with a fresh initialisation"
    )]
    MissingTensors {
        /// Tensors the file lacks.
        missing: usize,
        /// Tensors the architecture needs.
        expected: usize,
        /// The first missing path.
        first: String,
    },
    /// Unshared tensors of a model file match no parameter of its architecture.
    #[error(
        "{unknown} of the model file's {total} unshared tensors match no parameter of its architecture (first: {first})"
    )]
    UnknownTensors {
        /// Tensors that matched nothing.
        unknown: usize,
        /// Unshared tensors in the file.
        total: usize,
        /// The first path that matched nothing.
        first: String,
    },
}

/// The architecture of the weight-shared model of `bayes_config` with `k` codebook entries.
/// The one place this is derived: the edges, the file and the report all use it.
pub fn shared_config<A: Architecture>(bayes_config: &A, k: usize) -> A {
    bayes_config.to_kind(Kind::Shared, k)
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

/// Builds the weight-shared model of `config`'s architecture (the Bayesian config) from a plan:
/// codebook entries start at their component means, outliers at their own `(mu, sigma)`,
/// ellipse weights blend as the plan says; biases, batch norm and the other per-weight
/// parameters come from `bayes` by path, and so do empirical-prior centres.
///
/// The model is built by [`from_swb`] from the plan's initial file content, so a model built
/// here and one loaded from a file take the same path.
pub fn build_shared_model<A: Architecture>(
    config: &A,
    bayes: &Classifier<A::Body>,
    table: &WeightTable,
    plan: &SharingPlan,
    device: &Device,
) -> Result<Classifier<A::Body>, EdgeError> {
    shared_model_from_initial::<A>(&initial_swb(config, bayes, table, plan)?, bayes, device)
}

/// [`build_shared_model`] from the plan's initial file content ([`initial_swb`]), for a
/// caller that keeps that content too.
pub fn shared_model_from_initial<A: Architecture>(
    initial: &SharedModelData,
    bayes: &Classifier<A::Body>,
    device: &Device,
) -> Result<Classifier<A::Body>, EdgeError> {
    let (model, _) = from_swb::<A>(initial, device)?;
    // Empirical-prior centres are for training only and are not stored in files.
    let (model, _) = shared_from_bayes(bayes, model)?;
    Ok(model)
}

/// The `.swb` content of the shared model before retraining: the plan's codebook means and
/// sigmas, the outliers' `(mu, sigma)` from the table, every parameter of `bayes` that is not a
/// shareable weight as an unshared tensor.
pub fn initial_swb<A: Architecture>(
    config: &A,
    bayes: &Classifier<A::Body>,
    table: &WeightTable,
    plan: &SharingPlan,
) -> Result<SharedModelData, EdgeError> {
    plan.validate()?;
    if plan.n_weights() != table.n_shareable() {
        return Err(EdgeError::PlanTableMismatch {
            plan: plan.n_weights(),
            table: table.n_shareable(),
        });
    }
    let mu = table.gather_shareable(table.mu());
    let sigma = table.gather_shareable(table.sigma());
    let (outlier_mu, outlier_rho) = plan
        .outliers()
        .map(|(p, _)| {
            let p = p as usize;
            (mu[p], inverse_softplus(f64::from(sigma[p])) as f32)
        })
        .unzip();
    // The Bayesian weight tensors `<layer>.weight_{mu,rho,prior_mu}` are what the plan replaces.
    let shareable: Vec<&str> = table
        .layers()
        .iter()
        .filter(|l| l.shareable)
        .map(|l| l.path.as_str())
        .collect();
    let replaced = |path: &str| {
        ["_mu", "_rho", "_prior_mu"].iter().any(|suffix| {
            path.strip_suffix(suffix)
                .is_some_and(|base| shareable.contains(&base))
        })
    };
    let unshared = export_params(bayes)
        .into_iter()
        .filter(|t| !replaced(&t.path) && !t.path.ends_with("_prior_mu"))
        .map(to_format)
        .collect();
    let k = plan.k();
    Ok(SharedModelData {
        arch: serde_json::to_string(&shared_config(config, k))?,
        codebook_mu: plan.codebook.iter().map(|c| c.init_mu).collect(),
        codebook_rho: plan
            .codebook
            .iter()
            .map(|c| inverse_softplus(f64::from(c.init_sigma)) as f32)
            .collect(),
        layers: layer_shapes(table),
        fates: plan.fates.clone(),
        ellipses: ellipse_entries(plan),
        outlier_mu,
        outlier_rho,
        outlier_causes: plan.outliers().map(|(_, c)| c).collect(),
        unshared,
        temperature: None,
        conformal: None,
    })
}

fn layer_shapes(table: &WeightTable) -> Vec<LayerShape> {
    table
        .layers()
        .iter()
        .filter(|l| l.shareable)
        .map(|l| LayerShape {
            path: l.path.clone(),
            shape: l.shape.clone(),
        })
        .collect()
}

fn ellipse_entries(plan: &SharingPlan) -> Vec<EllipseEntry> {
    plan.ellipses
        .iter()
        .map(|e| {
            let (components, alphas) = e.blend().unzip();
            EllipseEntry { components, alphas }
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

/// The `.swb` content of a trained shared model of architecture `config` (kind
/// [`Kind::Shared`], see [`shared_config`]): current codebook and outlier
/// values, the plan's fates and blends, every other parameter as an unshared tensor.
pub fn to_swb<A: Architecture>(
    model: &Classifier<A::Body>,
    config: &A,
    table: &WeightTable,
    plan: &SharingPlan,
) -> Result<SharedModelData, EdgeError> {
    let params = export_params(model);
    let get = |p: &str| params.iter().find(|t| t.path == p);
    let cb_mu = get("codebook.mu").ok_or(EdgeError::NoCodebook)?;
    let cb_rho = get("codebook.rho").ok_or(EdgeError::NoCodebook)?;
    if config.kind() != Kind::Shared || config.codebook_len() != cb_mu.data.len() {
        return Err(EdgeError::CodebookMismatch {
            config: config.kind(),
            config_k: config.codebook_len(),
            model_k: cb_mu.data.len(),
        });
    }
    let (mut outlier_mu, mut outlier_rho) = (Vec::new(), Vec::new());
    for l in table.layers().iter().filter(|l| l.shareable) {
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
        return Err(EdgeError::OutlierMismatch {
            plan: outlier_causes.len(),
            model: outlier_mu.len(),
        });
    }
    let arch = serde_json::to_string(config)?;
    Ok(SharedModelData {
        arch,
        codebook_mu: cb_mu.data.clone(),
        codebook_rho: cb_rho.data.clone(),
        layers: layer_shapes(table),
        fates: plan.fates.clone(),
        ellipses: ellipse_entries(plan),
        outlier_mu,
        outlier_rho,
        outlier_causes,
        unshared: params
            .into_iter()
            .filter(|t| !is_shared_part(&t.path))
            .map(to_format)
            .collect(),
        temperature: None,
        conformal: None,
    })
}

/// What the shared model of `config` stores, from its Bayesian counterpart's shapes (nothing
/// allocated): the shareable weights `<layer>.weight`, the tensors every file must hold, and
/// the empirical-prior centres a file may hold.
struct ExpectedTensors {
    weights: Vec<(String, Vec<usize>)>,
    required: HashMap<String, Vec<usize>>,
    optional: HashMap<String, Vec<usize>>,
}

impl ExpectedTensors {
    fn of<A: Architecture>(config: &A, device: &Device) -> Result<Self, EdgeError> {
        let mut out = ExpectedTensors {
            weights: Vec::new(),
            required: HashMap::new(),
            optional: HashMap::new(),
        };
        for (path, shape) in config.param_shapes(device)? {
            if let Some(layer) = path.strip_suffix(".weight_mu") {
                out.weights.push((format!("{layer}.weight"), shape));
            } else if path.ends_with(".weight_rho") {
            } else if path.ends_with("_prior_mu") {
                out.optional.insert(path, shape);
            } else {
                out.required.insert(path, shape);
            }
        }
        Ok(out)
    }
}

/// The model configuration of an architecture text, refusing keys the configuration does not
/// have (a misspelt option would otherwise be dropped silently). Absent keys take their
/// defaults, so files written before a field existed still load.
fn parse_arch<A: Architecture>(arch: &str) -> Result<A, EdgeError> {
    let config: A = serde_json::from_str(arch)?;
    // burn's `Config` derive cannot deny unknown fields: compare the text's keys with those
    // of the configuration written back, which holds every field.
    let text: serde_json::Value = serde_json::from_str(arch)?;
    let known = serde_json::to_value(&config)?;
    match unknown_key(&text, &known, "") {
        Some(key) => Err(EdgeError::InvalidFile(format!(
            "the architecture has an unknown key {key:?}"
        ))),
        None => {
            config.validate()?;
            Ok(config)
        }
    }
}

/// The first key path of `text` that `known` lacks, descending into objects and arrays.
fn unknown_key(text: &serde_json::Value, known: &serde_json::Value, at: &str) -> Option<String> {
    use serde_json::Value;
    match (text, known) {
        (Value::Object(t), Value::Object(k)) => t.iter().find_map(|(key, v)| match k.get(key) {
            None => Some(format!("{at}{key}")),
            Some(kv) => unknown_key(v, kv, &format!("{at}{key}.")),
        }),
        (Value::Array(t), Value::Array(k)) => t
            .iter()
            .zip(k)
            .enumerate()
            .find_map(|(i, (v, kv))| unknown_key(v, kv, &format!("{at}{i}."))),
        _ => None,
    }
}

/// Checks what a `.swb` file says before its index (architecture text, layers, codebook
/// length) against the architecture it names: the text is a model configuration, of the
/// shared kind with the file's codebook length, whose shareable weight tensors are the file's
/// layers in order with their shapes. Nothing is allocated for the model.
fn check_meta<A: Architecture>(
    meta: &ModelMeta<'_>,
    device: &Device,
) -> Result<(A, ExpectedTensors), EdgeError> {
    let config: A = parse_arch(meta.arch)?;
    let k = meta.codebook_len;
    if config.kind() != Kind::Shared || config.codebook_len() != k {
        return Err(EdgeError::CodebookMismatch {
            config: config.kind(),
            config_k: config.codebook_len(),
            model_k: k,
        });
    }
    if k == 0 {
        return Err(EdgeError::InvalidFile("the codebook is empty".into()));
    }
    let expected = ExpectedTensors::of(&config, device)?;
    let file_layers: Vec<(&str, &[usize])> = meta
        .layers
        .iter()
        .map(|l| (l.path.as_str(), l.shape.as_slice()))
        .collect();
    let want: Vec<(&str, &[usize])> = expected
        .weights
        .iter()
        .map(|(p, s)| (p.as_str(), s.as_slice()))
        .collect();
    if file_layers != want {
        let first = want
            .iter()
            .zip(&file_layers)
            .find(|(a, b)| a != b)
            .map(|(a, b)| {
                format!(
                    "the architecture has {} {:?}, the file {} {:?}",
                    a.0, a.1, b.0, b.1
                )
            })
            .unwrap_or_else(|| {
                format!(
                    "the architecture has {} shareable weight tensors, the file {}",
                    want.len(),
                    file_layers.len()
                )
            });
        return Err(EdgeError::InvalidFile(format!(
            "the shared layers do not match the architecture: {first}"
        )));
    }
    Ok((config, expected))
}

/// Checks `.swb` content against the architecture it names before anything is allocated: the
/// sizes within bounds, the shared kind with the file's codebook length, the layers and every
/// unshared tensor present once with the architecture's shapes. Allocation when building the
/// model afterwards is then bounded by the file's own tensors.
///
/// This is the whole semantic validation of a shared model file: [`load_swb`] and
/// [`from_swb`] run it, so everything that loads has passed it.
pub fn check_swb<A: Architecture>(data: &SharedModelData, device: &Device) -> Result<A, EdgeError> {
    data.validate().map_err(EdgeError::InvalidFile)?;
    let meta = ModelMeta {
        arch: &data.arch,
        layers: &data.layers,
        codebook_len: data.codebook_len(),
    };
    let (config, expected) = check_meta::<A>(&meta, device)?;
    let mut seen = std::collections::HashSet::new();
    for t in &data.unshared {
        if !seen.insert(t.path.as_str()) {
            return Err(EdgeError::InvalidFile(format!(
                "tensor {} is stored twice",
                t.path
            )));
        }
        let Some(shape) = expected
            .required
            .get(&t.path)
            .or_else(|| expected.optional.get(&t.path))
        else {
            return Err(EdgeError::UnknownTensors {
                unknown: data
                    .unshared
                    .iter()
                    .filter(|u| {
                        !expected.required.contains_key(&u.path)
                            && !expected.optional.contains_key(&u.path)
                    })
                    .count(),
                total: data.unshared.len(),
                first: t.path.clone(),
            });
        };
        if shape != &t.shape {
            return Err(EdgeError::InvalidFile(format!(
                "tensor {} has shape {:?}, the architecture {shape:?}",
                t.path, t.shape
            )));
        }
    }
    let mut missing: Vec<&String> = expected
        .required
        .keys()
        .filter(|p| !seen.contains(p.as_str()))
        .collect();
    missing.sort();
    if let Some(first) = missing.first() {
        return Err(EdgeError::MissingTensors {
            missing: missing.len(),
            expected: expected.required.len(),
            first: first.to_string(),
        });
    }
    Ok(config)
}

/// Reads a `.swb` file and runs [`check_swb`] on it; the architecture is checked against the
/// layers before the index is decoded, so a file whose layers its architecture does not
/// have costs no decoding work. Returns the content with its configuration.
pub fn load_swb<A: Architecture>(
    path: impl AsRef<std::path::Path>,
    device: &Device,
) -> Result<(SharedModelData, A), EdgeError> {
    let path = path.as_ref();
    let in_file = |e: EdgeError| EdgeError::File {
        path: path.to_path_buf(),
        source: Box::new(e),
    };
    let mut early = None;
    let loaded = crate::format::load_checked(path, |meta| remember::<A>(&mut early, meta, device));
    let data = match (loaded, early) {
        (Ok(data), _) => data,
        (Err(_), Some(e)) => return Err(in_file(e)),
        (Err(e), None) => return Err(e.into()),
    };
    let config = check_swb::<A>(&data, device).map_err(in_file)?;
    Ok((data, config))
}

/// [`load_swb`] over the bytes of a file (the architecture is checked before the index).
pub fn swb_from_bytes<A: Architecture>(
    bytes: &[u8],
    device: &Device,
) -> Result<(SharedModelData, A), EdgeError> {
    let mut early = None;
    let decoded =
        crate::format::from_bytes_checked(bytes, |meta| remember::<A>(&mut early, meta, device));
    let data = match (decoded, early) {
        (Ok(data), _) => data,
        (Err(_), Some(e)) => return Err(e),
        (Err(e), None) => {
            return Err(EdgeError::InvalidFile(e.to_string()));
        }
    };
    let config = check_swb::<A>(&data, device)?;
    Ok((data, config))
}

/// Runs [`check_meta`], keeping its typed error in `early` for the caller.
fn remember<A: Architecture>(
    early: &mut Option<EdgeError>,
    meta: &ModelMeta<'_>,
    device: &Device,
) -> Result<(), String> {
    check_meta::<A>(meta, device).map(|_| ()).map_err(|e| {
        let text = e.to_string();
        *early = Some(e);
        text
    })
}

/// The `.swb` content of `config`'s architecture (any kind; the file holds its shared kind)
/// with every weight shared by one Gaussian `N(0, softplus(-5)^2)` and every other tensor
/// zero: a small, valid file for tests and fuzzing. Nothing is allocated for the weights.
pub fn uniform_swb<A: Architecture>(
    config: &A,
    device: &Device,
) -> Result<SharedModelData, EdgeError> {
    let config = shared_config(config, 1);
    let expected = ExpectedTensors::of(&config, device)?;
    let n: usize = expected
        .weights
        .iter()
        .map(|(_, s)| s.iter().product::<usize>())
        .sum();
    let mut unshared: Vec<NamedTensor> = expected
        .required
        .into_iter()
        .map(|(path, shape)| NamedTensor {
            data: vec![0.0; shape.iter().product()],
            path,
            shape,
        })
        .collect();
    unshared.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(SharedModelData {
        arch: serde_json::to_string(&config)?,
        codebook_mu: vec![0.0],
        codebook_rho: vec![-5.0],
        layers: expected
            .weights
            .into_iter()
            .map(|(path, shape)| LayerShape { path, shape })
            .collect(),
        fates: vec![WeightFate::Shared(0); n],
        ellipses: Vec::new(),
        outlier_mu: Vec::new(),
        outlier_rho: Vec::new(),
        outlier_causes: Vec::new(),
        unshared,
        temperature: None,
        conformal: None,
    })
}

/// Rebuilds a shared model from `.swb` content; returns it with its configuration.
///
/// The content is checked against the architecture it names before anything is allocated
/// (sizes within `models`' bounds, every layer and unshared tensor present with its shape), so
/// a file cannot make this allocate much more than its own tensors, and no parameter is ever
/// left at a fresh initialisation.
pub fn from_swb<A: Architecture>(
    data: &SharedModelData,
    device: &Device,
) -> Result<(Classifier<A::Body>, A), EdgeError> {
    let config = check_swb::<A>(data, device)?;
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
        let known: std::collections::HashSet<String> =
            export_params(&model).into_iter().map(|t| t.path).collect();
        return Err(EdgeError::UnknownTensors {
            unknown: unshared.len() - set,
            total: unshared.len(),
            first: unshared
                .iter()
                .find(|t| !known.contains(&t.path))
                .map(|t| t.path.clone())
                .unwrap_or_default(),
        });
    }
    Ok((model, config))
}

/// The full BNN's file content (every weight's `(mu, rho)`), the baseline of the size ratio.
pub fn full_bnn_data<A: Architecture>(
    model: &Classifier<A::Body>,
    config: &A,
) -> Result<FullBnnData, EdgeError> {
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
    let arch = serde_json::to_string(config)?;
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
        temperature: None,
        conformal: None,
    })
}

/// `softplus(rho)` of a host slice (the stored `rho` to sigma).
pub fn sigmas(rho: &[f32]) -> Vec<f32> {
    rho.iter().map(|&r| softplus(r as f64) as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OutlierCause;
    use crate::format::encode_shared_unchecked;
    use bnn_layers::test_device;
    use bnn_models::{Arch, ModelConfig};

    /// A valid shared MLP file with three codebook entries, an outlier and an ellipse.
    fn valid() -> SharedModelData {
        let config =
            ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 3, 1, 2).with_mlp_hidden(vec![4]);
        let mut data = uniform_swb(&config, &test_device()).unwrap();
        data.arch = serde_json::to_string(&shared_config(&config, 3)).unwrap();
        data.codebook_mu = vec![-0.1, 0.0, 0.1];
        data.codebook_rho = vec![-5.0; 3];
        data.fates[1] = WeightFate::Outlier(OutlierCause::Gradient);
        data.outlier_mu = vec![0.5];
        data.outlier_rho = vec![-4.0];
        data.outlier_causes = vec![OutlierCause::Gradient];
        data.fates[2] = WeightFate::Ellipse(0);
        data.ellipses = vec![EllipseEntry {
            components: vec![0, 2],
            alphas: vec![0.25, 0.75],
        }];
        data
    }

    /// `load_swb`'s verdict on `data` written behind a valid checksum without validation.
    fn load(data: &SharedModelData) -> Result<(), String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.swb");
        std::fs::write(&path, encode_shared_unchecked(data)).unwrap();
        load_swb::<ModelConfig>(&path, &test_device())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn load_and_inspect_refuse_each_kind_of_bad_content() {
        load(&valid()).unwrap();
        from_swb::<ModelConfig>(&valid(), &test_device()).unwrap();
        type Edit = fn(&mut SharedModelData);
        let cases: [(&str, Edit, &str); 13] = [
            (
                "NaN codebook mean",
                |d| d.codebook_mu[0] = f32::NAN,
                "codebook_mu[0] is NaN",
            ),
            (
                "infinite codebook rho",
                |d| d.codebook_rho[2] = f32::INFINITY,
                "codebook_rho[2] is inf",
            ),
            (
                "NaN outlier",
                |d| d.outlier_mu[0] = f32::NAN,
                "outlier_mu[0] is NaN",
            ),
            (
                "NaN alpha",
                |d| d.ellipses[0].alphas[1] = f32::NAN,
                "alpha NaN",
            ),
            (
                "alphas not summing to 1",
                |d| d.ellipses[0].alphas = vec![0.5, 0.6],
                "summing to 1.1",
            ),
            (
                "repeated component",
                |d| d.ellipses[0].components = vec![2, 2],
                "component 2 twice",
            ),
            (
                "missing bias",
                |d| {
                    let i = d
                        .unshared
                        .iter()
                        .position(|t| t.path.contains("bias"))
                        .unwrap();
                    d.unshared.remove(i);
                },
                "lacks 1 of the",
            ),
            (
                "duplicated bias",
                |d| {
                    let t = d
                        .unshared
                        .iter()
                        .find(|t| t.path.contains("bias"))
                        .unwrap()
                        .clone();
                    d.unshared.push(t);
                },
                "stored twice",
            ),
            (
                "architecture not JSON",
                |d| d.arch = "mlp, please".into(),
                "architecture config",
            ),
            (
                "unknown architecture key",
                |d| {
                    let mut v: serde_json::Value = serde_json::from_str(&d.arch).unwrap();
                    v["hidden_widths"] = serde_json::json!([4]);
                    d.arch = v.to_string();
                },
                "unknown key \"hidden_widths\"",
            ),
            (
                "unknown nested architecture key",
                |d| {
                    let mut v: serde_json::Value = serde_json::from_str(&d.arch).unwrap();
                    v["bayes"]["colour"] = serde_json::json!(1);
                    d.arch = v.to_string();
                },
                "unknown key \"bayes.colour\"",
            ),
            (
                "architecture with other layers",
                |d| {
                    let mut v: serde_json::Value = serde_json::from_str(&d.arch).unwrap();
                    v["mlp_hidden"] = serde_json::json!([5]);
                    d.arch = v.to_string();
                },
                "do not match the architecture",
            ),
            (
                "architecture with another codebook length",
                |d| {
                    let mut v: serde_json::Value = serde_json::from_str(&d.arch).unwrap();
                    v["codebook_len"] = serde_json::json!(4);
                    d.arch = v.to_string();
                },
                "codebook entries",
            ),
        ];
        for (what, edit, reason) in cases {
            let mut d = valid();
            edit(&mut d);
            let err = load(&d).expect_err(what);
            assert!(err.contains(reason), "{what}: {err}");
            assert!(err.contains("m.swb"), "{what}: {err}");
            let err = from_swb::<ModelConfig>(&d, &test_device())
                .map(|_| ())
                .expect_err(what);
            assert!(err.to_string().contains(reason), "{what}: {err}");
        }
    }

    #[test]
    fn architecture_is_checked_before_the_index_is_decoded() {
        // Layers the architecture does not have: refused without decoding the index.
        let mut d = valid();
        d.layers.push(LayerShape {
            path: "extra.weight".into(),
            shape: vec![1000],
        });
        d.fates
            .extend(std::iter::repeat_n(WeightFate::Shared(0), 1000));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.swb");
        let opts = crate::format::SaveOptions {
            entropy_index: true,
            int8_outliers: false,
        };
        crate::format::save(&path, &d, &opts).unwrap();
        let before = crate::format::decode_work();
        let err = load_swb::<ModelConfig>(&path, &test_device())
            .unwrap_err()
            .to_string();
        assert_eq!(crate::format::decode_work(), before, "index decoded");
        assert!(err.contains("do not match the architecture"), "{err}");
        // The same file decodes when nothing checks the architecture.
        crate::format::load(&path).unwrap();
        assert!(crate::format::decode_work() > before);
    }

    #[test]
    fn older_architecture_texts_without_newer_fields_still_load() {
        let mut d = valid();
        let mut v: serde_json::Value = serde_json::from_str(&d.arch).unwrap();
        v.as_object_mut().unwrap().remove("cifar_stem");
        d.arch = v.to_string();
        load(&d).unwrap();
    }
}
