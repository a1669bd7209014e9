//! SNR pruning, the compression baseline of Blundell et al. (2015, "Weight Uncertainty in Neural
//! Networks", section 5.2): the Bayes-by-Backprop weights with the lowest signal-to-noise ratio
//! `|mu| / sigma` are set to zero, and only the others are stored and trained.
//!
//! Set beside 2DGBNN at the same size, it asks whether sharing does better than keeping the
//! most certain weights: [`prune_to`] prunes a Bayesian model down to a number of trainable
//! parameters or to a file size, [`retrain_pruned`] retrains what is left with stage 3's
//! settings and stop rule (the pruned weights held at zero after every step), and
//! [`pruned_file`] writes the sparse file whose bytes are compared.
//!
//! A pruned weight has `mu = 0` and `rho =` [`PRUNED_RHO`] (`sigma` about `1e-13`), so its
//! samples are zero to within `1e-12` and it adds nothing to the predictive; its KL term is a
//! constant (about 27 nats per weight under an `N(0, 0.1^2)` prior) whose gradient the
//! projection undoes, so the pruned weights change the ELBO's value, not its optimum.

use std::collections::{BTreeMap, HashMap};

use bnn_data::DataLoader;
use bnn_layers::{BayesTensor, ModulePath, ParamRole, count_params, export_bayes};
use bnn_models::{Architecture, Classifier, ClassifierBody, Kind};
use bnn_train::{Checkpointer, EpochStats, Observer, TrainError, train};
use burn::module::{Module, ModuleMapper, Param};
use burn::prelude::*;
use burn::tensor::TensorData;
use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use crate::compress::{CompressConfig, CompressError};
use crate::retrain_stop::StopRule;

/// `rho` of a pruned weight: `sigma = softplus(-30)`, about `9.4e-14`, finite so that its KL
/// stays finite.
pub const PRUNED_RHO: f32 = -30.0;

/// The `format` metadata of a [`pruned_file`].
pub const PRUNED_FORMAT: &str = "swbnn-snr-pruned-bnn";

/// What [`prune_to`] prunes down to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PruneTarget {
    /// At most this many trainable parameters (each kept weight has two, `mu` and `rho`;
    /// biases and other parameters are kept whole).
    Parameters(usize),
    /// A [`pruned_file`] of at most this many bytes (without a calibration temperature).
    Bytes(u64),
}

/// Errors of SNR pruning.
#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    /// The target is below what the parameters that are never pruned need.
    #[error(
        "cannot prune to {target}: the parameters that are never pruned (biases, norms) already \
         need {floor}"
    )]
    TargetTooSmall {
        /// The target, described.
        target: String,
        /// What the unprunable part needs, described.
        floor: String,
    },
    /// The model has no Bayesian weight tensor to prune.
    #[error("the model has no Bayesian weight tensor to prune")]
    NothingToPrune,
    /// A mask does not fit the model.
    #[error("the pruning mask does not fit the model: {0}")]
    Mask(String),
    /// A pruned file that cannot be read.
    #[error("not a readable SNR-pruned file: {0}")]
    File(String),
    /// Training or the stop rule failed.
    #[error(transparent)]
    Train(Box<TrainError>),
    /// The compression settings are invalid.
    #[error(transparent)]
    Compress(Box<CompressError>),
}

// Boxed: the error stays small beside the `Ok` values of the functions that return it.
impl From<TrainError> for PruneError {
    fn from(e: TrainError) -> Self {
        Self::Train(Box::new(e))
    }
}

impl From<CompressError> for PruneError {
    fn from(e: CompressError) -> Self {
        Self::Compress(Box::new(e))
    }
}

/// Which weights of each Bayesian weight tensor are kept, by the tensor's path (its `_mu`
/// parameter's path less `_mu`), in the model's visiting order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneMask {
    layers: Vec<(String, Vec<bool>)>,
}

impl PruneMask {
    /// Keeps the `keep` weights of highest `|mu| / sigma` among every weight tensor of
    /// `tensors` (biases are not pruned), ties to the earlier weight in visiting order.
    pub fn by_snr(tensors: &[BayesTensor], keep: usize) -> Self {
        let weights: Vec<&BayesTensor> = tensors
            .iter()
            .filter(|t| t.role == ParamRole::Weight)
            .collect();
        let mut snr: Vec<(f32, usize, usize)> = Vec::new();
        for (l, t) in weights.iter().enumerate() {
            for (i, (&m, &s)) in t.mu.iter().zip(&t.sigma).enumerate() {
                // A NaN ratio ranks last: such a weight is pruned first.
                let r = (m.abs() / s).max(0.0);
                snr.push((if r.is_nan() { 0.0 } else { r }, l, i));
            }
        }
        snr.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        let mut layers: Vec<(String, Vec<bool>)> = weights
            .iter()
            .map(|t| (t.path.clone(), vec![false; t.mu.len()]))
            .collect();
        for &(_, l, i) in snr.iter().take(keep) {
            layers[l].1[i] = true;
        }
        Self { layers }
    }

    /// Weights kept.
    pub fn kept(&self) -> usize {
        self.layers
            .iter()
            .map(|(_, m)| m.iter().filter(|&&k| k).count())
            .sum()
    }

    /// Weights in the masked tensors, kept or not.
    pub fn total(&self) -> usize {
        self.layers.iter().map(|(_, m)| m.len()).sum()
    }

    /// `(path, kept)` of each masked tensor.
    pub fn layers(&self) -> &[(String, Vec<bool>)] {
        &self.layers
    }
}

/// Sets every weight `mask` prunes to `mu = 0`, `rho =` [`PRUNED_RHO`]; the others are left as
/// they are. Every masked tensor must be one of the model's, of the mask's size.
pub fn apply_mask<M: Module>(model: M, mask: &PruneMask) -> Result<M, PruneError> {
    let mut mapper = MaskMapper {
        path: ModulePath::default(),
        mask: mask
            .layers
            .iter()
            .map(|(p, m)| (p.clone(), m.clone()))
            .collect(),
        seen: BTreeMap::new(),
        error: None,
    };
    let model = model.map(&mut mapper);
    if let Some(e) = mapper.error {
        return Err(PruneError::Mask(e));
    }
    for (path, _) in &mask.layers {
        if mapper.seen.get(path).copied().unwrap_or(0) != 2 {
            return Err(PruneError::Mask(format!(
                "the model has no `{path}_mu` and `{path}_rho` to prune"
            )));
        }
    }
    Ok(model)
}

struct MaskMapper {
    path: ModulePath,
    mask: HashMap<String, Vec<bool>>,
    // Parameters of each masked tensor found (`_mu`, `_rho`).
    seen: BTreeMap<String, usize>,
    error: Option<String>,
}

impl ModuleMapper for MaskMapper {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let path = self.path.joined();
        let (base, is_rho) = match (path.strip_suffix("_mu"), path.strip_suffix("_rho")) {
            (Some(b), _) => (b, false),
            (_, Some(b)) => (b, true),
            _ => return param,
        };
        let Some(kept) = self.mask.get(base) else {
            return param;
        };
        let dims = param.shape().dims::<D>();
        if dims.iter().product::<usize>() != kept.len() {
            self.error.get_or_insert(format!(
                "`{path}` has {} values, the mask {}",
                dims.iter().product::<usize>(),
                kept.len()
            ));
            return param;
        }
        *self.seen.entry(base.to_string()).or_default() += 1;
        let keep: Vec<f32> = kept.iter().map(|&k| f32::from(u8::from(k))).collect();
        let n = keep.len();
        param.map(|old| {
            let device = old.device();
            let requires_grad = old.is_require_grad();
            let k = Tensor::<1>::from_data(TensorData::new(keep, [n]), &device).reshape(dims);
            let new = match is_rho {
                // rho * k + PRUNED_RHO * (1 - k)
                true => old.clone() * k.clone() + (k.neg().add_scalar(1.0)).mul_scalar(PRUNED_RHO),
                false => old * k,
            };
            new.detach().set_require_grad(requires_grad)
        })
    }
}

/// Trainable parameters of `model` once `mask` is applied: its count less two (`mu`, `rho`) per
/// pruned weight.
pub fn pruned_parameters<M: Module>(model: &M, mask: &PruneMask) -> usize {
    count_params(model).trainable - 2 * (mask.total() - mask.kept())
}

/// Prunes the Bayesian model `bayes` by SNR down to `target` ([`PruneMask::by_snr`] with as
/// many weights as fit), returning the pruned model and its mask. For
/// [`PruneTarget::Bytes`] the file is [`pruned_file`]'s, found by bisection on the number kept.
pub fn prune_to<A: Architecture>(
    bayes: &Classifier<A::Body>,
    bayes_config: &A,
    target: PruneTarget,
) -> Result<(Classifier<A::Body>, PruneMask), PruneError> {
    let tensors = export_bayes(bayes, None);
    let total: usize = tensors
        .iter()
        .filter(|t| t.role == ParamRole::Weight)
        .map(|t| t.mu.len())
        .sum();
    if total == 0 {
        return Err(PruneError::NothingToPrune);
    }
    let keep = match target {
        PruneTarget::Parameters(p) => {
            let floor = count_params(bayes).trainable - 2 * total;
            if p < floor {
                return Err(PruneError::TargetTooSmall {
                    target: format!("{p} trainable parameters"),
                    floor: format!("{floor}"),
                });
            }
            ((p - floor) / 2).min(total)
        }
        PruneTarget::Bytes(b) => {
            let bytes = |keep: usize| -> Result<u64, PruneError> {
                let mask = PruneMask::by_snr(&tensors, keep);
                let model = apply_mask(bayes.clone(), &mask)?;
                Ok(pruned_file(&model, bayes_config, &mask, None)?.len() as u64)
            };
            if bytes(0)? > b {
                return Err(PruneError::TargetTooSmall {
                    target: format!("{b} bytes"),
                    floor: format!("{} bytes", bytes(0)?),
                });
            }
            // The largest `keep` whose file fits: the file grows with every weight kept.
            let (mut lo, mut hi) = (0, total);
            while lo < hi {
                let mid = lo + (hi - lo).div_ceil(2);
                match bytes(mid)? <= b {
                    true => lo = mid,
                    false => hi = mid - 1,
                }
            }
            lo
        }
    };
    let mask = PruneMask::by_snr(&tensors, keep);
    let model = apply_mask(bayes.clone(), &mask)?;
    Ok((model, mask))
}

/// Retrains the pruned model `pruned` as stage 3 retrains a shared model: `cfg.retrain`'s
/// optimiser, rates, epochs and seed, ended by `cfg.retrain_stop` against the confidence of
/// `source` (the model it was pruned from) on `validation`, with `mask` applied again after
/// every step so that pruned weights stay zero. Checkpointed (and resumed) by `checkpointer`.
#[allow(clippy::too_many_arguments)]
pub fn retrain_pruned<A: Architecture>(
    pruned: Classifier<A::Body>,
    mask: &PruneMask,
    source: &Classifier<A::Body>,
    bayes_config: &A,
    data: &DataLoader,
    validation: Option<&DataLoader>,
    cfg: &CompressConfig,
    checkpointer: Option<&Checkpointer>,
    observer: &mut dyn Observer<A::Body>,
) -> Result<(Classifier<A::Body>, Vec<EpochStats>), PruneError> {
    cfg.validate()?;
    if bayes_config.kind() != Kind::Bayesian {
        return Err(CompressError::NotBayesian(bayes_config.kind()).into());
    }
    let device = pruned.devices().first().cloned().unwrap_or_default();
    device.seed(cfg.retrain.seed);
    let mut keeper = KeepPruned {
        mask,
        inner: observer,
    };
    let mut stop = StopRule::new(
        cfg.retrain_stop,
        source,
        validation,
        cfg.retrain.seed,
        &mut keeper,
    )?;
    Ok(train(pruned, data, &cfg.retrain, checkpointer, &mut stop)?)
}

/// Applies the mask after every step; everything else goes to `inner`.
struct KeepPruned<'a, B: ClassifierBody> {
    mask: &'a PruneMask,
    inner: &'a mut dyn Observer<B>,
}

impl<B: ClassifierBody> Observer<B> for KeepPruned<'_, B> {
    fn on_step(&mut self, info: &bnn_train::StepInfo) {
        self.inner.on_step(info);
    }

    fn on_epoch(&mut self, stats: &EpochStats) {
        self.inner.on_epoch(stats);
    }

    fn stop_checks_per_epoch(&self) -> usize {
        self.inner.stop_checks_per_epoch()
    }

    fn should_stop(
        &mut self,
        model: &Classifier<B>,
        at: bnn_train::Progress,
    ) -> Result<bool, TrainError> {
        self.inner.should_stop(model, at)
    }

    fn project(&mut self, model: Classifier<B>) -> Result<Classifier<B>, TrainError> {
        let model = self.inner.project(model)?;
        apply_mask(model, self.mask).map_err(|e| TrainError::Config(e.to_string()))
    }
}

/// The pruned model as a file: safetensors holding, per Bayesian weight tensor, the kept
/// weights' `mu` and `rho` (f32) and which they are (`<path>.kept`: a bit mask, `U8`, or the
/// flat indices, `U32`, whichever is smaller); every other parameter whole (f32); the
/// architecture, the tensors' shapes and `temperature` in the metadata. [`read_pruned`] reads
/// it back.
pub fn pruned_file<A: Architecture>(
    model: &Classifier<A::Body>,
    config: &A,
    mask: &PruneMask,
    temperature: Option<f64>,
) -> Result<Vec<u8>, PruneError> {
    let data = crate::burn_edges::full_bnn_data(model, config)
        .map_err(|e| PruneError::Mask(e.to_string()))?;
    let by_path: HashMap<&str, &Vec<bool>> =
        mask.layers.iter().map(|(p, m)| (p.as_str(), m)).collect();
    let mut tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    let mut shapes = BTreeMap::new();
    let mut at = 0;
    for layer in &data.layers {
        let n: usize = layer.shape.iter().product();
        let (mu, rho) = (&data.mu[at..at + n], &data.rho[at..at + n]);
        at += n;
        shapes.insert(layer.path.clone(), layer.shape.clone());
        let all = vec![true; n];
        let kept = by_path.get(layer.path.as_str()).copied().unwrap_or(&all);
        if kept.len() != n {
            return Err(PruneError::Mask(format!(
                "`{}` has {n} weights, the mask {}",
                layer.path,
                kept.len()
            )));
        }
        let idx: Vec<usize> = (0..n).filter(|&i| kept[i]).collect();
        let floats =
            |v: &[f32]| -> Vec<u8> { idx.iter().flat_map(|&i| v[i].to_le_bytes()).collect() };
        let (dtype, bytes) = match idx.len() * 4 < n.div_ceil(8) {
            true => (
                Dtype::U32,
                idx.iter().flat_map(|&i| (i as u32).to_le_bytes()).collect(),
            ),
            false => {
                let mut bits = vec![0u8; n.div_ceil(8)];
                for &i in &idx {
                    bits[i / 8] |= 1 << (i % 8);
                }
                (Dtype::U8, bits)
            }
        };
        let count = match dtype {
            Dtype::U32 => idx.len(),
            _ => n.div_ceil(8),
        };
        tensors.push((format!("{}.kept", layer.path), dtype, vec![count], bytes));
        tensors.push((
            format!("{}.mu", layer.path),
            Dtype::F32,
            vec![idx.len()],
            floats(mu),
        ));
        tensors.push((
            format!("{}.rho", layer.path),
            Dtype::F32,
            vec![idx.len()],
            floats(rho),
        ));
    }
    for t in &data.unshared {
        let bytes = t.data.iter().flat_map(|v| v.to_le_bytes()).collect();
        tensors.push((t.path.clone(), Dtype::F32, t.shape.clone(), bytes));
    }
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(name, dtype, shape, bytes)| {
            TensorView::new(*dtype, shape.clone(), bytes)
                .map(|v| (name.clone(), v))
                .map_err(|e| PruneError::File(format!("{name}: {e}")))
        })
        .collect::<Result<_, _>>()?;
    let mut meta = HashMap::new();
    meta.insert("format".to_string(), PRUNED_FORMAT.to_string());
    meta.insert("arch".to_string(), data.arch.clone());
    meta.insert(
        "weights".to_string(),
        serde_json::to_string(&shapes).map_err(|e| PruneError::File(e.to_string()))?,
    );
    if let Some(t) = temperature {
        meta.insert("temperature".to_string(), format!("{t:?}"));
    }
    crate::safetensors_file::serialize(views, Some(meta))
        .map_err(|e| PruneError::File(e.to_string()))
}

/// One Bayesian weight tensor of a [`PrunedModel`]: `(path, shape, mu, rho)`, pruned weights
/// at 0 and [`PRUNED_RHO`].
pub type PrunedTensor = (String, Vec<usize>, Vec<f32>, Vec<f32>);

/// A [`pruned_file`] read back: the architecture's JSON, each weight tensor, and the other
/// parameters by path.
#[derive(Debug, Clone, PartialEq)]
pub struct PrunedModel {
    /// The architecture, as JSON.
    pub arch: String,
    /// Each Bayesian weight tensor, in file order of paths.
    pub weights: Vec<PrunedTensor>,
    /// Every other parameter: `(path, shape, values)`.
    pub others: Vec<(String, Vec<usize>, Vec<f32>)>,
    /// The calibration temperature, if the file has one.
    pub temperature: Option<f64>,
}

/// Reads a [`pruned_file`]; anything that is not one (another format, a missing or
/// inconsistent tensor, an index out of range) is an error naming it.
pub fn read_pruned(bytes: &[u8]) -> Result<PrunedModel, PruneError> {
    let bad = |m: String| PruneError::File(m);
    let (_, meta) =
        SafeTensors::read_metadata(bytes).map_err(|e| bad(format!("safetensors header: {e}")))?;
    let meta = meta.metadata().clone().unwrap_or_default();
    if meta.get("format").map(String::as_str) != Some(PRUNED_FORMAT) {
        return Err(bad(format!(
            "its metadata has no `format: {PRUNED_FORMAT}`"
        )));
    }
    let arch = meta
        .get("arch")
        .cloned()
        .ok_or_else(|| bad("no `arch` in its metadata".into()))?;
    let shapes: BTreeMap<String, Vec<usize>> = serde_json::from_str(
        meta.get("weights")
            .ok_or_else(|| bad("no `weights` in its metadata".into()))?,
    )
    .map_err(|e| bad(format!("`weights` in its metadata: {e}")))?;
    let temperature = match meta.get("temperature") {
        Some(t) => Some(
            t.parse::<f64>()
                .map_err(|e| bad(format!("temperature `{t}`: {e}")))?,
        ),
        None => None,
    };
    let st = SafeTensors::deserialize(bytes).map_err(|e| bad(e.to_string()))?;
    let floats = |name: &str| -> Result<Vec<f32>, PruneError> {
        let t = st.tensor(name).map_err(|e| bad(format!("{name}: {e}")))?;
        if t.dtype() != Dtype::F32 {
            return Err(bad(format!("{name} is {:?}, not F32", t.dtype())));
        }
        Ok(t.data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    };
    let mut weights = Vec::new();
    for (path, shape) in &shapes {
        let n = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| n <= bytes.len().saturating_mul(8))
            .ok_or_else(|| bad(format!("{path}: shape {shape:?} is larger than the file")))?;
        let kept_name = format!("{path}.kept");
        let kept = st
            .tensor(&kept_name)
            .map_err(|e| bad(format!("{kept_name}: {e}")))?;
        let idx: Vec<usize> = match kept.dtype() {
            Dtype::U32 => kept
                .data()
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize)
                .collect(),
            Dtype::U8 if kept.data().len() == n.div_ceil(8) => (0..n)
                .filter(|&i| kept.data()[i / 8] >> (i % 8) & 1 == 1)
                .collect(),
            other => return Err(bad(format!("{kept_name}: {other:?} of the wrong size"))),
        };
        let (mu_k, rho_k) = (
            floats(&format!("{path}.mu"))?,
            floats(&format!("{path}.rho"))?,
        );
        if mu_k.len() != idx.len() || rho_k.len() != idx.len() {
            return Err(bad(format!(
                "{path}: {} kept weights, {} mu and {} rho",
                idx.len(),
                mu_k.len(),
                rho_k.len()
            )));
        }
        let (mut mu, mut rho) = (vec![0.0f32; n], vec![PRUNED_RHO; n]);
        let mut last = None;
        for (j, &i) in idx.iter().enumerate() {
            if i >= n || last.is_some_and(|l| i <= l) {
                return Err(bad(format!("{path}: kept index {i} out of order or range")));
            }
            last = Some(i);
            (mu[i], rho[i]) = (mu_k[j], rho_k[j]);
        }
        weights.push((path.clone(), shape.clone(), mu, rho));
    }
    let mut others = Vec::new();
    for (name, view) in st.tensors() {
        let base = [".kept", ".mu", ".rho"]
            .iter()
            .find_map(|s| name.strip_suffix(s));
        if base.is_some_and(|b| shapes.contains_key(b)) {
            continue;
        }
        others.push((name.clone(), view.shape().to_vec(), floats(&name)?));
    }
    others.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(PrunedModel {
        arch,
        weights,
        others,
        temperature,
    })
}
