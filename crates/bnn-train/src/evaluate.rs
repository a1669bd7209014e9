//! Monte-Carlo evaluation: predictive probabilities averaged over weight samples, and the
//! metrics the paper reports; with post-hoc calibration, the same at a temperature that divides
//! each sample's logits ([`predict_tempered`]), fitted on held-out data ([`predict_logits`],
//! [`LogitSamples::fit_temperature`]).
//!
//! # Monte-Carlo stacking
//!
//! [`predict_with`], [`predict_tempered_with`] and [`predict_logits_with`] take an
//! [`McBatching`]: how many weight samples one forward pass draws ([`bnn_layers::stack`]). With a stack `S > 1`, each batch `[B, ...]` is repeated
//! `S` times along the batch dimension and run through a model drawing `S` weight samples per
//! forward, so a batch takes `ceil(samples / S)` forwards instead of `samples`. The predictive
//! (the sum of each sample's softmax, and of each sample's entropy for the mutual information)
//! is then accumulated on the device and read back once per batch; [`predict_logits_with`]
//! reads each stacked forward's logits back once. With `S = 1` the evaluation runs one full pass
//! over the data set per sample and reads each pass's logits back, as before stacking existed.
//!
//! [`McBatching::Auto`], what the functions without `_with` (and [`evaluate`]) use, keeps `S = 1` on CPU backends
//! (flex, ndarray, cpu), so their results stay bit for bit those of earlier versions, and stacks
//! on GPU backends (`wgpu`, `cuda`) as [`McBatching::stack_for`] documents. The stacked path
//! draws its noise batch by batch and `S` samples at a time, so its draws differ from the
//! per-sample path's: the same seed, backend and `S` give the same result, another `S` gives
//! other (equally distributed) samples. It computes the softmax and entropies in `f32` on the
//! device, where the per-sample path computes them in `f64` on the host: the predictive agrees
//! to `f32` rounding, and a mutual information near 0 can round to a tiny negative number.
//!
//! On GPU backends every evaluation takes the stacked path (with `S = 1` where the stack is 1),
//! and a last, partial batch is padded with zero images to the loader's batch size, its
//! padding rows dropped from the results: one input shape for the whole run, so the kernels
//! compiled and autotuned for the full batches serve the last one too.

use bnn_data::DataLoader;
use bnn_layers::{MAX_MC_STACK, set_mc_stack, set_sampling};
use bnn_metrics::{
    EvalSummary, McLogits, McPredictive, OodScore, OodSummary, Predictive, TemperatureFit,
    mean_confidence, validate_temperature,
};
use bnn_models::{Classifier, ClassifierBody};
use burn::module::Module;
use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::TrainError;
use crate::batch::{to_tensors, to_vec};

/// Predictions of a model on a data set.
#[derive(Debug, Clone)]
pub struct Predictions {
    /// The predictive distribution (mean of the samples' softmax).
    pub predictive: Predictive,
    /// True labels, in data-set order.
    pub labels: Vec<u32>,
}

/// Runs `samples` stochastic passes (one mean pass if `samples <= 1` or the model has no
/// Bayesian layers) over the loader's data set in index order and averages the probabilities.
///
/// The loader must not drop the last batch. `model` may live on an autodiff device; evaluation
/// runs on `model.valid()`.
pub fn predict<B: ClassifierBody>(
    model: &Classifier<B>,
    loader: &DataLoader,
    samples: usize,
) -> Result<Predictions, TrainError> {
    predict_with(model, loader, samples, McBatching::Auto)
}

/// [`predict`] with the weight samples batched as `batching` says (see the module docs).
pub fn predict_with<B: ClassifierBody>(
    model: &Classifier<B>,
    loader: &DataLoader,
    samples: usize,
    batching: McBatching,
) -> Result<Predictions, TrainError> {
    let mut out = predict_tempered_with(model, loader, samples, &[1.0], batching)?;
    Ok(out.remove(0))
}

/// [`predict`] at each of `temperatures` from the same forward passes: each pass's logits are
/// divided by the temperature before the softmax, then the probabilities are averaged
/// (temperature scaling of a Monte-Carlo predictive, [`bnn_metrics::McLogits::predictive`]).
/// At `T = 1` the result is [`predict`]'s, bit for bit. Every temperature must pass
/// [`bnn_metrics::validate_temperature`]; one prediction per temperature, in order.
pub fn predict_tempered<B: ClassifierBody>(
    model: &Classifier<B>,
    loader: &DataLoader,
    samples: usize,
    temperatures: &[f64],
) -> Result<Vec<Predictions>, TrainError> {
    predict_tempered_with(model, loader, samples, temperatures, McBatching::Auto)
}

/// [`predict_tempered`] with the weight samples batched as `batching` says (see the module
/// docs); with a stack, every temperature's predictive is accumulated on the device.
pub fn predict_tempered_with<B: ClassifierBody>(
    model: &Classifier<B>,
    loader: &DataLoader,
    samples: usize,
    temperatures: &[f64],
    batching: McBatching,
) -> Result<Vec<Predictions>, TrainError> {
    check_temperatures(temperatures)?;
    let run = McRun::new(model, loader, samples, batching)?;
    if run.stacked() {
        return stacked_predictive(&run, loader, temperatures);
    }
    let n = loader.dataset().len();
    let mut accs: Vec<McPredictive> = Vec::new();
    let mut scaled = Vec::new();
    let labels = for_each_pass(&run, loader, |logits, classes| {
        if accs.is_empty() {
            for _ in temperatures {
                accs.push(McPredictive::new(n, classes)?);
            }
        }
        for (mc, &t) in accs.iter_mut().zip(temperatures) {
            mc.push_logits(tempered(logits, t, &mut scaled))?;
        }
        Ok(())
    })?;
    accs.into_iter()
        .map(|mc| {
            Ok(Predictions {
                predictive: mc.finish()?,
                labels: labels.clone(),
            })
        })
        .collect()
}

/// `logits` divided by `t` (in `f64`, as [`bnn_metrics::McLogits`] divides them); at
/// `t = 1` the logits themselves.
fn tempered<'a>(logits: &'a [f32], t: f64, scaled: &'a mut Vec<f32>) -> &'a [f32] {
    if t == 1.0 {
        return logits;
    }
    let inv = 1.0 / t;
    scaled.clear();
    scaled.extend(logits.iter().map(|&z| (f64::from(z) * inv) as f32));
    scaled
}

fn check_temperatures(temperatures: &[f64]) -> Result<(), TrainError> {
    if temperatures.is_empty() {
        return Err(TrainError::Config(
            "a tempered prediction needs at least one temperature".into(),
        ));
    }
    for &t in temperatures {
        validate_temperature(t)?;
    }
    Ok(())
}

/// How Monte-Carlo evaluation batches its weight samples (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum McBatching {
    /// The backend's default, [`McBatching::stack_for`]: one sample per forward on CPU
    /// backends, stacked on GPU backends.
    #[default]
    Auto,
    /// At most this many weight samples per forward pass; `1` is one pass over the data set per
    /// sample (0 reads as 1).
    Stack(usize),
}

/// The most rows (stack times batch size) of a stacked forward that [`McBatching::Auto`]
/// chooses.
pub const MAX_STACKED_ROWS: usize = 2048;

/// The most input values (rows times values per image) of a stacked forward that
/// [`McBatching::Auto`] chooses: 2^23, 32 MiB of `f32`. Activations grow with the input, so
/// this keeps large images (ImageNet's 224 px) at one sample per forward.
pub const MAX_STACKED_INPUT: usize = 1 << 23;

impl McBatching {
    /// The stack (weight samples per forward) for `samples` samples of batches of `batch`
    /// images of `image_values` values each on `device`.
    ///
    /// [`McBatching::Auto`] is 1 on CPU backends (flex, ndarray, cpu: there a stacked forward
    /// saves no launches and runs slower, its grouped convolutions on burn's own kernel rather
    /// than `bnn_layers::flexops`', and 1 keeps earlier versions' results) and on any backend
    /// [`bnn_layers::backend_name`] does not know; on `wgpu` and `cuda` it is the largest stack
    /// whose forward stays within [`MAX_STACKED_ROWS`] rows and [`MAX_STACKED_INPUT`] input
    /// values (16 for batches of 128 MNIST or CIFAR images). Every stack is then capped at
    /// `samples` and [`bnn_layers::MAX_MC_STACK`], and is at least 1.
    pub fn stack_for(
        &self,
        device: &Device,
        batch: usize,
        image_values: usize,
        samples: usize,
    ) -> usize {
        let stack = match *self {
            McBatching::Stack(s) => s,
            McBatching::Auto => match bnn_layers::backend_name(device) {
                Some("wgpu" | "cuda") => {
                    let batch = batch.max(1);
                    let by_rows = MAX_STACKED_ROWS / batch;
                    let by_input = MAX_STACKED_INPUT / batch.saturating_mul(image_values.max(1));
                    by_rows.min(by_input)
                }
                _ => 1,
            },
        };
        stack.min(samples).clamp(1, MAX_MC_STACK)
    }
}

/// A Monte-Carlo evaluation set up: the model in evaluation mode, sampling when it has
/// Bayesian weights and more than one pass is asked for, and the stack of its forwards.
struct McRun<B: ClassifierBody> {
    model: Classifier<B>,
    passes: usize,
    stack: usize,
    device: Device,
    /// On GPU backends, the loader's batch size: a last, partial batch is padded to it with
    /// zero images (rows dropped from the results), so every forward has one shape and the
    /// kernels compiled and tuned for the full batches serve it.
    pad_to: Option<usize>,
}

impl<B: ClassifierBody> McRun<B> {
    /// Whether the stacked path runs: with a stack, or on a GPU backend (which pads).
    fn stacked(&self) -> bool {
        self.stack > 1 || self.pad_to.is_some()
    }
}

/// `x` (`[b, ...]`) with zero rows appended up to `rows` (unchanged if it has as many).
fn pad_rows(x: Tensor<4>, rows: Option<usize>) -> Tensor<4> {
    let [b, c, h, w] = x.dims();
    match rows {
        Some(rows) if rows > b => {
            let zeros = Tensor::<4>::zeros([rows - b, c, h, w], &x.device());
            Tensor::cat(vec![x, zeros], 0)
        }
        _ => x,
    }
}

impl<B: ClassifierBody> McRun<B> {
    fn new(
        model: &Classifier<B>,
        loader: &DataLoader,
        samples: usize,
        batching: McBatching,
    ) -> Result<Self, TrainError> {
        if loader.dataset().is_empty() {
            return Err(TrainError::Config("empty evaluation set".into()));
        }
        if model.head().is_regression() {
            return Err(TrainError::Config(
                "a regression network predicts a mean and a standard deviation, not class \
                 probabilities: use predict_regression"
                    .into(),
            ));
        }
        crate::likelihood::check_targets(model.head(), loader.dataset().target_dim())?;
        let valid = model.valid();
        let counts = bnn_layers::count_params(&valid);
        let stochastic = samples > 1 && counts.bayes_weights + counts.shared_weights > 0;
        let model = set_sampling(valid, stochastic);
        let passes = if stochastic { samples } else { 1 };
        let device = model.devices().first().cloned().unwrap_or_default();
        let (c, h, w) = loader.dataset().shape();
        let batch = loader.config().batch_size;
        let stack = batching.stack_for(&device, batch, c * h * w, passes);
        let pad_to =
            matches!(bnn_layers::backend_name(&device), Some("wgpu" | "cuda")).then_some(batch);
        Ok(Self {
            model,
            passes,
            stack,
            device,
            pad_to,
        })
    }
}

/// Runs the per-sample forward passes of [`predict`] and hands each pass's logits
/// (`[n, classes]`, data-set order) to `visit`; returns the labels in data-set order.
fn for_each_pass<B: ClassifierBody>(
    run: &McRun<B>,
    loader: &DataLoader,
    mut visit: impl FnMut(&[f32], usize) -> Result<(), TrainError>,
) -> Result<Vec<u32>, TrainError> {
    let n = loader.dataset().len();
    let mut labels = vec![0u32; n];
    for _ in 0..run.passes {
        let mut logits_all: Vec<f32> = Vec::new();
        let mut classes = 0;
        for batch in loader.epoch(0) {
            let batch = batch?;
            let (x, _) = to_tensors(&batch, &run.device);
            let logits = run.model.forward(x);
            classes = logits.dims()[1];
            if logits_all.is_empty() {
                logits_all = vec![0.0; n * classes];
            }
            let host = to_vec(logits);
            for (row, &i) in batch.indices.iter().enumerate() {
                logits_all[i * classes..(i + 1) * classes]
                    .copy_from_slice(&host[row * classes..(row + 1) * classes]);
                labels[i] = batch.labels[row];
            }
        }
        visit(&logits_all, classes)?;
    }
    Ok(labels)
}

/// A model set up to draw `samples` Monte-Carlo samples of a batch in forwards of at most
/// `stack` weight samples each ([`bnn_layers::stack`]): `stack, ..., stack, rest`.
///
/// The model is taken as it is: put it in evaluation mode with sampling on first
/// (`bnn_layers::set_sampling(model.valid(), true)`).
#[derive(Debug, Clone)]
pub struct StackedMc<B: ClassifierBody> {
    /// The model per distinct forward size, largest first.
    models: Vec<(usize, Classifier<B>)>,
    /// The samples of each forward, in order.
    chunks: Vec<usize>,
}

impl<B: ClassifierBody> StackedMc<B> {
    /// Sets up `model` for `samples` samples in forwards of at most `stack` (both at least 1,
    /// `stack` at most [`bnn_layers::MAX_MC_STACK`]).
    pub fn new(model: &Classifier<B>, samples: usize, stack: usize) -> Result<Self, TrainError> {
        if samples == 0 || stack == 0 || stack > MAX_MC_STACK {
            return Err(TrainError::Config(format!(
                "a stacked Monte-Carlo run needs samples >= 1 and a stack of 1 to \
                 {MAX_MC_STACK}, got {samples} samples and a stack of {stack}"
            )));
        }
        let stack = stack.min(samples);
        let mut chunks = vec![stack; samples / stack];
        if !samples.is_multiple_of(stack) {
            chunks.push(samples % stack);
        }
        let mut models = Vec::new();
        for &s in &chunks {
            if models.iter().all(|(size, _)| *size != s) {
                let m = set_mc_stack(model.clone(), s)
                    .map_err(|e| TrainError::Config(e.to_string()))?;
                models.push((s, m));
            }
        }
        Ok(Self { models, chunks })
    }

    /// The number of weight samples of each forward, in order.
    pub fn chunks(&self) -> &[usize] {
        &self.chunks
    }

    /// Every forward's logits on `x` (`[B, ...]`): per forward, its number of samples `s` and
    /// its logits `[s * B, classes]`, whose rows `j * B .. (j + 1) * B` are its sample `j`.
    pub fn logits(&self, x: Tensor<4>) -> Vec<(usize, Tensor<2>)> {
        self.chunks
            .iter()
            .map(|&s| {
                let model = self
                    .models
                    .iter()
                    .find(|(size, _)| *size == s)
                    .map(|(_, m)| m)
                    .expect("a model per chunk size");
                let input = if s == 1 {
                    x.clone()
                } else {
                    x.clone().repeat_dim(0, s)
                };
                (s, model.forward(input))
            })
            .collect()
    }
}

/// Sums over all samples of [`StackedMc::logits`] of a batch of `batch` rows, on the device:
/// of `softmax(z / t)` (`[batch, classes]`) and, with `entropy`, of each sample's entropy in
/// nats (`[batch]`), both in `f32`.
pub fn stacked_probability_sums(
    logits: &[(usize, Tensor<2>)],
    batch: usize,
    t: f64,
    entropy: bool,
) -> (Tensor<2>, Option<Tensor<1>>) {
    let mut probs: Option<Tensor<2>> = None;
    let mut entropies: Option<Tensor<1>> = None;
    for (s, z) in logits {
        let (s, classes) = (*s, z.dims()[1]);
        let z = if t == 1.0 {
            z.clone()
        } else {
            z.clone().mul_scalar(1.0 / t)
        };
        // Stable softmax; with e = exp(z - m) and S = sum e, H = ln S - sum_k p_k (z_k - m).
        let shifted = z.clone() - z.max_dim(1);
        let e = shifted.clone().exp();
        let total = e.clone().sum_dim(1);
        let p = e / total.clone();
        if entropy {
            let h = total.log() - (p.clone() * shifted).sum_dim(1);
            let h: Tensor<1> = h.reshape([s, batch]).sum_dim(0).reshape([batch]);
            entropies = Some(match entropies {
                Some(acc) => acc + h,
                None => h,
            });
        }
        let p: Tensor<2> = p
            .reshape([s, batch, classes])
            .sum_dim(0)
            .reshape([batch, classes]);
        probs = Some(match probs {
            Some(acc) => acc + p,
            None => p,
        });
    }
    (probs.expect("at least one forward"), entropies)
}

/// [`predict_tempered_with`] with a stack: per batch, the stacked forwards, every
/// temperature's sums on the device, one read back.
fn stacked_predictive<B: ClassifierBody>(
    run: &McRun<B>,
    loader: &DataLoader,
    temperatures: &[f64],
) -> Result<Vec<Predictions>, TrainError> {
    let n = loader.dataset().len();
    let stacked = StackedMc::new(&run.model, run.passes, run.stack)?;
    let mut labels = vec![0u32; n];
    // Per temperature: sums of probabilities `[n, classes]` and of entropies `[n]`.
    let mut sums: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    let mut classes = 0;
    for batch in loader.epoch(0) {
        let batch = batch?;
        let b = batch.labels.len();
        let (x, _) = to_tensors(&batch, &run.device);
        let rows = run.pad_to.map_or(b, |p| p.max(b));
        let logits = stacked.logits(pad_rows(x, run.pad_to));
        classes = logits[0].1.dims()[1];
        if sums.is_empty() {
            sums = temperatures
                .iter()
                .map(|_| (vec![0.0; n * classes], vec![0.0; n]))
                .collect();
        }
        // `[b, T * (classes + 1)]`: per temperature the probability sums, then the entropy sum.
        let parts: Vec<Tensor<2>> = temperatures
            .iter()
            .flat_map(|&t| {
                let (p, h) = stacked_probability_sums(&logits, rows, t, true);
                [p, h.expect("entropy asked for").reshape([rows, 1])]
            })
            .collect();
        // Padding rows come last; only the batch's own rows are read.
        let host = to_vec(Tensor::cat(parts, 1).narrow(0, 0, b));
        let width = temperatures.len() * (classes + 1);
        for (row, &i) in batch.indices.iter().enumerate() {
            let line = &host[row * width..(row + 1) * width];
            for ((probs, entropy), part) in sums.iter_mut().zip(line.chunks(classes + 1)) {
                for (acc, &p) in probs[i * classes..(i + 1) * classes].iter_mut().zip(part) {
                    *acc = f64::from(p);
                }
                entropy[i] = f64::from(part[classes]);
            }
            labels[i] = batch.labels[row];
        }
    }
    sums.into_iter()
        .map(|(probs, entropy)| {
            let mc = McPredictive::from_sums(n, classes, run.passes, probs, entropy)?;
            Ok(Predictions {
                predictive: mc.finish()?,
                labels: labels.clone(),
            })
        })
        .collect()
}

/// [`predict_logits_with`] with a stack: each stacked forward's logits read back once.
fn stacked_logits<B: ClassifierBody>(
    run: &McRun<B>,
    loader: &DataLoader,
) -> Result<LogitSamples, TrainError> {
    let n = loader.dataset().len();
    let stacked = StackedMc::new(&run.model, run.passes, run.stack)?;
    let mut labels = vec![0u32; n];
    let mut logits_all: Vec<f32> = Vec::new();
    let mut classes = 0;
    for batch in loader.epoch(0) {
        let batch = batch?;
        let (x, _) = to_tensors(&batch, &run.device);
        let rows = run.pad_to.map_or(x.dims()[0], |p| p.max(x.dims()[0]));
        let mut pass = 0;
        for (s, logits) in stacked.logits(pad_rows(x, run.pad_to)) {
            classes = logits.dims()[1];
            if logits_all.is_empty() {
                logits_all = vec![0.0; run.passes * n * classes];
            }
            let host = to_vec(logits);
            for j in 0..s {
                let out = &mut logits_all[(pass + j) * n * classes..(pass + j + 1) * n * classes];
                for (row, &i) in batch.indices.iter().enumerate() {
                    let from = (j * rows + row) * classes;
                    out[i * classes..(i + 1) * classes]
                        .copy_from_slice(&host[from..from + classes]);
                }
            }
            pass += s;
        }
        for (row, &i) in batch.indices.iter().enumerate() {
            labels[i] = batch.labels[row];
        }
    }
    Ok(LogitSamples {
        logits: logits_all,
        samples: run.passes,
        n,
        classes,
        labels,
    })
}

/// Every Monte-Carlo pass's logits on a data set, kept whole to fit a temperature on them
/// (held-out data: `samples * n * classes` values in memory).
#[derive(Debug, Clone, PartialEq)]
pub struct LogitSamples {
    /// `samples` passes of row-major `[n, classes]` logits, one pass after the other.
    pub logits: Vec<f32>,
    /// Number of passes (ensemble members for [`predict_ensemble_logits`]).
    pub samples: usize,
    /// Number of examples.
    pub n: usize,
    /// Number of classes.
    pub classes: usize,
    /// True labels, in data-set order.
    pub labels: Vec<u32>,
}

impl LogitSamples {
    /// The logits as [`McLogits`] (checked: shape, finite values).
    pub fn mc(&self) -> Result<McLogits<'_>, TrainError> {
        Ok(McLogits::new(
            &self.logits,
            self.samples,
            self.n,
            self.classes,
        )?)
    }

    /// The temperature that minimises the NLL of these logits against their labels
    /// ([`bnn_metrics::fit_temperature`]).
    pub fn fit_temperature(&self) -> Result<TemperatureFit, TrainError> {
        Ok(bnn_metrics::fit_temperature(&self.mc()?, &self.labels)?)
    }
}

/// The logits of [`predict`]'s passes (one pass for a deterministic model or `samples <= 1`),
/// kept whole: what a temperature is fitted on.
pub fn predict_logits<B: ClassifierBody>(
    model: &Classifier<B>,
    loader: &DataLoader,
    samples: usize,
) -> Result<LogitSamples, TrainError> {
    predict_logits_with(model, loader, samples, McBatching::Auto)
}

/// [`predict_logits`] with the weight samples batched as `batching` says (see the module
/// docs); with a stack, each stacked forward's logits are read back once.
pub fn predict_logits_with<B: ClassifierBody>(
    model: &Classifier<B>,
    loader: &DataLoader,
    samples: usize,
    batching: McBatching,
) -> Result<LogitSamples, TrainError> {
    let run = McRun::new(model, loader, samples, batching)?;
    if run.stacked() {
        return stacked_logits(&run, loader);
    }
    let (mut logits, mut passes, mut classes) = (Vec::new(), 0, 0);
    let labels = for_each_pass(&run, loader, |pass, c| {
        logits.extend_from_slice(pass);
        passes += 1;
        classes = c;
        Ok(())
    })?;
    Ok(LogitSamples {
        logits,
        samples: passes,
        n: labels.len(),
        classes,
        labels,
    })
}

/// A deep ensemble's logits, one member's mean pass after the other: the members are the
/// Monte-Carlo samples of [`predict_ensemble`].
pub fn predict_ensemble_logits<B: ClassifierBody>(
    members: &[Classifier<B>],
    loader: &DataLoader,
) -> Result<LogitSamples, TrainError> {
    let mut out: Option<LogitSamples> = None;
    for member in members {
        let one = predict_logits(member, loader, 1)?;
        match out.as_mut() {
            None => out = Some(one),
            Some(all) => {
                if (one.n, one.classes) != (all.n, all.classes) {
                    return Err(TrainError::Config(format!(
                        "ensemble members disagree: {} x {} logits against {} x {}",
                        one.n, one.classes, all.n, all.classes
                    )));
                }
                all.logits.extend_from_slice(&one.logits);
                all.samples += 1;
            }
        }
    }
    out.ok_or_else(|| TrainError::Config("an ensemble needs members".into()))
}

/// Accuracy, NLL, ECE (15 bins) and the rest, plus OOD detection against a second data set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// In-distribution metrics.
    pub summary: EvalSummary,
    /// OOD detection by max-probability, if an OOD set was given.
    pub ood_max_prob: Option<OodSummary>,
    /// OOD detection by predictive entropy, if an OOD set was given.
    pub ood_entropy: Option<OodSummary>,
    /// Monte-Carlo samples used.
    pub samples: usize,
    /// Where the uncertainty comes from: confidence and epistemic uncertainty on each set.
    pub uncertainty: UncertaintyDiagnostics,
}

/// Entropy and epistemic uncertainty (mutual information between prediction and weights) on
/// the in-distribution set and, if given, the OOD set (the test set's mean confidence is in
/// the [`EvalSummary`]). A Bayesian model whose mutual
/// information is no higher on OOD data than on test data gets its OOD detection from
/// aleatoric (softmax) uncertainty alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UncertaintyDiagnostics {
    /// Mean predictive entropy on the test set (nats).
    pub mean_entropy: f64,
    /// Mean mutual information on the test set (nats); `None` for a single pass.
    pub mean_mutual_information: Option<f64>,
    /// Mean confidence on the OOD set.
    pub ood_mean_confidence: Option<f64>,
    /// Mean predictive entropy on the OOD set.
    pub ood_mean_entropy: Option<f64>,
    /// Mean mutual information on the OOD set.
    pub ood_mean_mutual_information: Option<f64>,
    /// OOD AUROC with the mutual-information score (MC samples only).
    pub ood_auroc_mutual_information: Option<f64>,
}

/// Mutual information, for a prediction of more than one sample (one pass has none).
fn epistemic(p: &Predictive) -> Option<&[f64]> {
    p.mutual_information().filter(|_| p.n_samples() > 1)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Evaluates a model on `test` (and optionally against `ood`) with `samples` MC samples.
pub fn evaluate<B: ClassifierBody>(
    model: &Classifier<B>,
    test: &DataLoader,
    ood: Option<&DataLoader>,
    samples: usize,
) -> Result<Evaluation, TrainError> {
    Ok(evaluate_with_predictions(model, test, ood, samples)?.0)
}

/// [`evaluate`], also returning the predictions it computed: the test set's and the OOD
/// set's.
pub fn evaluate_with_predictions<B: ClassifierBody>(
    model: &Classifier<B>,
    test: &DataLoader,
    ood: Option<&DataLoader>,
    samples: usize,
) -> Result<(Evaluation, Predictions, Option<Predictions>), TrainError> {
    let pred = predict(model, test, samples)?;
    let out = ood.map(|l| predict(model, l, samples)).transpose()?;
    let ev = evaluation_of(&pred, out.as_ref().map(|p| &p.predictive), samples)?;
    Ok((ev, pred, out))
}

/// An evaluation with the predictions it was computed from.
pub type EvaluatedPredictions = (Evaluation, Predictions, Option<Predictions>);

/// [`evaluate_with_predictions`] at each of `temperatures`, from one set of forward passes
/// ([`predict_tempered`]): the raw evaluation is the one at `T = 1`.
pub fn evaluate_tempered<B: ClassifierBody>(
    model: &Classifier<B>,
    test: &DataLoader,
    ood: Option<&DataLoader>,
    samples: usize,
    temperatures: &[f64],
) -> Result<Vec<EvaluatedPredictions>, TrainError> {
    let preds = predict_tempered(model, test, samples, temperatures)?;
    let outs = match ood {
        Some(l) => predict_tempered(model, l, samples, temperatures)?
            .into_iter()
            .map(Some)
            .collect(),
        None => vec![None; temperatures.len()],
    };
    preds
        .into_iter()
        .zip(outs)
        .map(|(pred, out)| {
            let ev = evaluation_of(&pred, out.as_ref().map(|p| &p.predictive), samples)?;
            Ok((ev, pred, out))
        })
        .collect()
}

/// A deep ensemble's predictions (Lakshminarayanan et al. 2017): each member's probabilities
/// (one mean pass each), averaged. The mutual information is the members' disagreement.
pub fn predict_ensemble<B: ClassifierBody>(
    members: &[Classifier<B>],
    loader: &DataLoader,
) -> Result<Predictions, TrainError> {
    let mut out = predict_ensemble_tempered(members, loader, &[1.0])?;
    Ok(out.remove(0))
}

/// [`predict_ensemble`] at each of `temperatures`: each member's logits divided by the
/// temperature before its softmax, then the members' probabilities averaged.
pub fn predict_ensemble_tempered<B: ClassifierBody>(
    members: &[Classifier<B>],
    loader: &DataLoader,
    temperatures: &[f64],
) -> Result<Vec<Predictions>, TrainError> {
    check_temperatures(temperatures)?;
    let mut acc: Option<(Vec<McPredictive>, Vec<u32>)> = None;
    for member in members {
        let preds = predict_tempered(member, loader, 1, temperatures)?;
        let (mcs, _) = match acc.as_mut() {
            Some(a) => a,
            None => {
                let probs = preds[0].predictive.probabilities();
                let mcs = temperatures
                    .iter()
                    .map(|_| McPredictive::new(probs.n(), probs.classes()))
                    .collect::<Result<Vec<_>, _>>()?;
                acc.insert((mcs, preds[0].labels.clone()))
            }
        };
        for (mc, pred) in mcs.iter_mut().zip(&preds) {
            mc.push_probabilities(pred.predictive.probabilities())?;
        }
    }
    let (mcs, labels) =
        acc.ok_or_else(|| TrainError::Config("an ensemble needs members".into()))?;
    mcs.into_iter()
        .map(|mc| {
            Ok(Predictions {
                predictive: mc.finish()?,
                labels: labels.clone(),
            })
        })
        .collect()
}

/// [`evaluate`] for a deep ensemble ([`predict_ensemble`]); `samples` in the result is the
/// number of members.
pub fn evaluate_ensemble<B: ClassifierBody>(
    members: &[Classifier<B>],
    test: &DataLoader,
    ood: Option<&DataLoader>,
) -> Result<Evaluation, TrainError> {
    let pred = predict_ensemble(members, test)?;
    let out = match ood {
        Some(loader) => Some(predict_ensemble(members, loader)?.predictive),
        None => None,
    };
    evaluation_of(&pred, out.as_ref(), members.len())
}

/// [`evaluate_ensemble`] at each of `temperatures` ([`predict_ensemble_tempered`]).
pub fn evaluate_ensemble_tempered<B: ClassifierBody>(
    members: &[Classifier<B>],
    test: &DataLoader,
    ood: Option<&DataLoader>,
    temperatures: &[f64],
) -> Result<Vec<Evaluation>, TrainError> {
    let preds = predict_ensemble_tempered(members, test, temperatures)?;
    let outs = match ood {
        Some(l) => predict_ensemble_tempered(members, l, temperatures)?
            .into_iter()
            .map(|p| Some(p.predictive))
            .collect(),
        None => vec![None; temperatures.len()],
    };
    preds
        .iter()
        .zip(&outs)
        .map(|(pred, out)| evaluation_of(pred, out.as_ref(), members.len()))
        .collect()
}

/// The metrics of [`Evaluation`] from predictions already made on the test set and,
/// optionally, an OOD set.
pub fn evaluation_of(
    pred: &Predictions,
    ood: Option<&Predictive>,
    samples: usize,
) -> Result<Evaluation, TrainError> {
    let summary = EvalSummary::compute(pred.predictive.probabilities(), &pred.labels)?;
    let p = &pred.predictive;
    let mut uncertainty = UncertaintyDiagnostics {
        mean_entropy: mean(p.entropy()),
        mean_mutual_information: epistemic(p).map(mean),
        ..Default::default()
    };
    let (ood_max_prob, ood_entropy) = match ood {
        Some(out) => {
            uncertainty.ood_mean_confidence = Some(mean_confidence(out.probabilities()));
            uncertainty.ood_mean_entropy = Some(mean(out.entropy()));
            uncertainty.ood_mean_mutual_information = epistemic(out).map(mean);
            if epistemic(p).is_some() && epistemic(out).is_some() {
                uncertainty.ood_auroc_mutual_information =
                    Some(OodSummary::from_predictive(p, out, OodScore::MutualInformation)?.auroc);
            }
            (
                Some(OodSummary::from_predictive(p, out, OodScore::MaxProb)?),
                Some(OodSummary::from_predictive(p, out, OodScore::Entropy)?),
            )
        }
        None => (None, None),
    };
    Ok(Evaluation {
        summary,
        ood_max_prob,
        ood_entropy,
        samples,
        uncertainty,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_data::{Compose, InMemoryDataset, LoaderConfig};
    use bnn_models::{Arch, Kind, ModelConfig};

    /// 10 images in batches of 4: the last batch has 2.
    fn uneven_loader() -> DataLoader {
        let pixels: Vec<u8> = (0..10 * 16).map(|i| ((i * 37) % 251) as u8).collect();
        let labels: Vec<u32> = (0..10u32).map(|i| i % 4).collect();
        let data = InMemoryDataset::new(pixels, labels, (1, 4, 4), 4).unwrap();
        let config = LoaderConfig {
            batch_size: 4,
            shuffle: false,
            drop_last: false,
            seed: 0,
            workers: 0,
            prefetch: 1,
        };
        DataLoader::new(data, Compose::new(), config).unwrap()
    }

    /// The GPU backends' padding of a last, partial batch (forced here on the CPU device)
    /// changes no result: the mean network's logits and predictive equal the unpadded ones.
    #[test]
    fn a_padded_last_batch_gives_the_unpadded_results() {
        let _rng = bnn_layers::lock_device_rng();
        let device = bnn_layers::test_device();
        device.seed(3);
        let model = ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 4, 1, 4)
            .with_mlp_hidden(vec![8])
            .init(&device)
            .unwrap();
        let loader = uneven_loader();
        // One sample: the mean network, so padded and unpadded forwards draw no noise.
        let plain = McRun::new(&model, &loader, 1, McBatching::Stack(1)).unwrap();
        assert_eq!(plain.pad_to, None, "no padding on a CPU backend");
        let mut padded = McRun::new(&model, &loader, 1, McBatching::Stack(1)).unwrap();
        padded.pad_to = Some(4);
        assert!(padded.stacked() && !plain.stacked());

        let a = stacked_logits(&plain, &loader).unwrap();
        let b = stacked_logits(&padded, &loader).unwrap();
        assert_eq!((a.n, a.classes, a.samples), (10, 4, 1));
        assert_eq!((b.n, b.classes, b.samples), (10, 4, 1));
        assert_eq!(a.labels, b.labels);
        for (x, y) in a.logits.iter().zip(&b.logits) {
            assert!((x - y).abs() <= 1e-5 * (1.0 + x.abs()), "{x} vs {y}");
        }
        let p = stacked_predictive(&plain, &loader, &[1.0, 2.0]).unwrap();
        let q = stacked_predictive(&padded, &loader, &[1.0, 2.0]).unwrap();
        for (p, q) in p.iter().zip(&q) {
            assert_eq!(p.labels, q.labels);
            let (p, q) = (p.predictive.probabilities(), q.predictive.probabilities());
            assert_eq!(p.n(), 10);
            for (x, y) in p.rows().flatten().zip(q.rows().flatten()) {
                assert!((x - y).abs() <= 1e-6, "{x} vs {y}");
            }
        }
        // And the padding itself: zero rows after the batch's own.
        let x = Tensor::<4>::ones([2, 1, 4, 4], &device);
        let y = pad_rows(x.clone(), Some(4));
        assert_eq!(y.dims(), [4, 1, 4, 4]);
        let v = to_vec(y.sum_dim(3).sum_dim(2).sum_dim(1).reshape([4]));
        assert_eq!(v, vec![16.0, 16.0, 0.0, 0.0]);
        assert_eq!(pad_rows(x, None).dims(), [2, 1, 4, 4]);
    }
}
