//! The training loop: cross-entropy for deterministic models, the ELBO for Bayesian and shared
//! ones, with separate learning rates for means and `rho`.

use std::time::Instant;

use bnn_data::DataLoader;
use bnn_layers::{ElboConfig, KlSchedule, ModulePath};
use bnn_models::{Body, Classifier, ClassifierBody};
use burn::module::{Module, ModuleVisitor, Param, ParamGroup};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::lr_scheduler::module_lr_scheduler::{ModuleLearningRate, ModuleLrScheduler};
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, ModuleOptimizer, SgdConfig};
use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::checkpoint::{Checkpointer, PartialEpoch};
use crate::momentum::{CyclingSgd, MomentumDial};
use crate::parallel::{Objective, Position, Replicas};
use crate::{DataParallel, OptimizerKind, TrainConfig, TrainError};

/// What one epoch did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochStats {
    /// Epoch index (0-based).
    pub epoch: usize,
    /// Mean training loss (NLL + scaled KL).
    pub loss: f64,
    /// Mean training NLL.
    pub nll: f64,
    /// KL divergence at the end of the epoch (0 for deterministic models).
    pub kl: f64,
    /// Training accuracy over the epoch (with sampled weights; 0 for a regression network,
    /// whose fit is [`EpochStats::rmse`]).
    pub accuracy: f64,
    /// A regression network's training root-mean-square error over the epoch, in standardised
    /// target units, with sampled weights (`None` for a classifier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rmse: Option<f64>,
    /// Images per second.
    pub images_per_s: f64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// `Some(n)`: the observer stopped training after `n` of the epoch's steps, and the
    /// statistics cover those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_steps: Option<usize>,
}

/// Progress of one optimiser step, for progress bars.
#[derive(Debug, Clone, Copy)]
pub struct StepInfo {
    /// Epoch index.
    pub epoch: usize,
    /// Step within the epoch.
    pub step: usize,
    /// Steps in the epoch.
    pub steps: usize,
    /// The step's loss.
    pub loss: f32,
    /// Images per second so far in this epoch.
    pub images_per_s: f64,
}

/// Where training stands when an [`Observer`] is asked whether to stop: `step` of the `steps`
/// of epoch `epoch` are behind the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Epoch index (0-based).
    pub epoch: usize,
    /// Steps of this epoch already trained.
    pub step: usize,
    /// Steps in an epoch.
    pub steps: usize,
}

impl Progress {
    /// Epochs of training behind the model, fractional inside an epoch.
    pub fn epochs_done(&self) -> f64 {
        self.epoch as f64 + self.step as f64 / self.steps.max(1) as f64
    }
}

/// Receives progress; the library prints nothing itself. `B` is the body of the model being
/// trained (the zoo's by default); an observer that does not look at the model implements it
/// for every body.
pub trait Observer<B: ClassifierBody = Body> {
    /// After every optimiser step.
    fn on_step(&mut self, _info: &StepInfo) {}
    /// After every epoch, and after the part of one that a stop ended.
    fn on_epoch(&mut self, _stats: &EpochStats) {}
    /// How often [`should_stop`](Self::should_stop) is asked: before the steps
    /// `j * steps / n`, `j = 0..n`, of every epoch (`n` = this, at least 1; the default 1 asks
    /// at epoch boundaries only).
    fn stop_checks_per_epoch(&self) -> usize {
        1
    }
    /// Whether training ends at `at` instead of going on (after a resumed checkpoint's epochs
    /// too). Training noise is seeded per step, so a rule that samples weights does not change
    /// it, but it must seed the device itself for a resumed run to decide as an uninterrupted
    /// one did. The default never stops.
    fn should_stop(&mut self, _model: &Classifier<B>, _at: Progress) -> Result<bool, TrainError> {
        Ok(false)
    }
    /// The model after every optimiser step, brought back into a constraint set (projected
    /// gradient descent: pruned weights set back to zero, for instance). Training goes on
    /// with what this returns; the default returns `model` unchanged.
    fn project(&mut self, model: Classifier<B>) -> Result<Classifier<B>, TrainError> {
        Ok(model)
    }
}

/// Whether `step` is one of the `checks` evenly spaced steps of an epoch of `steps` at which
/// the observer is asked to stop.
fn is_check_step(step: usize, steps: usize, checks: usize) -> bool {
    let checks = checks.clamp(1, steps.max(1));
    (0..checks).any(|j| j * steps / checks == step)
}

/// An observer that ignores everything.
pub struct Silent;

impl<B: ClassifierBody> Observer<B> for Silent {}

/// Parameters trained at `lr_rho`: every `rho` (a layer's `weight_rho`/`bias_rho`, a shared
/// layer's `outlier_rho`, the codebook's `rho`). Matched by path, not by parameter id, so the
/// group survives a model that a checkpoint replaced (a loaded record keeps its own ids).
const RHO_PATTERN: &str = r"(^|[._])rho$";

fn rho_group() -> Result<ParamGroup, TrainError> {
    ParamGroup::from_regex(RHO_PATTERN)
        .map_err(|e| TrainError::Config(format!("parameter group {RHO_PATTERN}: {e:?}")))
}

/// Whether any float parameter of a model is in `group`, matched by path as the optimiser
/// matches it (burn's path, enum variant names included, so not a
/// [`ModulePath`](bnn_layers::ModulePath)).
struct InGroup<'a> {
    group: &'a ParamGroup,
    path: Vec<String>,
    found: bool,
}

impl ModuleVisitor for InGroup<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.found = self.found || self.group.matches(&param.id, Some(&self.path.join(".")));
    }
}

/// The optimiser of a run: one for every parameter, and one of the same kind without weight
/// decay for the `rho` group (the KL is its regulariser). With `dial`, SGD reads its momentum
/// from it at every step (a schedule that cycles the momentum).
fn optimizer(
    config: &TrainConfig,
    rho: &ParamGroup,
    dial: Option<&MomentumDial>,
) -> ModuleOptimizer {
    if let (OptimizerKind::Sgd { nesterov, .. }, Some(dial)) = (config.optimizer, dial) {
        let sgd = |wd| CyclingSgd::new(dial.clone(), nesterov, wd);
        return ModuleOptimizer::from(sgd(config.weight_decay)).with_group(
            rho.clone(),
            sgd(0.0),
            None,
        );
    }
    let decay = |wd: f64| (wd > 0.0).then(|| WeightDecayConfig::new(wd as f32));
    match config.optimizer {
        OptimizerKind::Adam { epsilon } => {
            let adam = |wd| {
                AdamConfig::new()
                    .with_epsilon(epsilon as f32)
                    .with_weight_decay(decay(wd))
            };
            adam(config.weight_decay)
                .init()
                .with_group(rho.clone(), adam(0.0).build(), None)
        }
        OptimizerKind::Sgd { momentum, nesterov } => {
            let sgd = |wd| {
                SgdConfig::new()
                    .with_weight_decay(decay(wd))
                    .with_momentum(Some(
                        MomentumConfig::new()
                            .with_momentum(momentum)
                            .with_dampening(0.0)
                            .with_nesterov(nesterov),
                    ))
            };
            sgd(config.weight_decay)
                .init()
                .with_group(rho.clone(), sgd(0.0).build(), None)
        }
    }
}

/// This step's rates: `lr` for every parameter, `lr_rho` for the `rho` group. The schedule is a
/// function of the global step, so a resumed run needs no scheduler state.
fn step_rates(lr: f64, lr_rho: f64, rho: &ParamGroup) -> ModuleLearningRate {
    ModuleLrScheduler::new(lr)
        .with_group(rho.clone(), lr_rho)
        .step()
}

/// The first float parameter of `model` holding a NaN or an infinity, by path.
struct NonFinite {
    path: ModulePath,
    found: Option<String>,
}

impl ModuleVisitor for NonFinite {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        // `0 * x` is NaN exactly where `x` is NaN or infinite, so the sum is finite iff all are.
        if self.found.is_none()
            && !param
                .val()
                .detach()
                .mul_scalar(0.0)
                .sum()
                .into_scalar::<f32>()
                .is_finite()
        {
            self.found = Some(self.path.joined());
        }
    }
}

/// The path of the first float parameter of `model` that holds a NaN or an infinity, if any
/// (e.g. `fc1.weight_mu`): what a loader names when it refuses a damaged model.
pub fn first_non_finite<B: ClassifierBody>(model: &Classifier<B>) -> Option<String> {
    let mut v = NonFinite {
        path: ModulePath::default(),
        found: None,
    };
    model.visit(&mut v);
    v.found
}

/// The largest magnitude a parameter of a model read from a file (a `model.bpk`, an imported
/// state dict) may hold: 1e6.
///
/// Far above what training gives (means and `rho`s of trained networks lie within tens, batch
/// norm's running statistics within thousands), and far below where `f32` arithmetic on them
/// overflows (a KL term squares a mean, a forward pass multiplies weights layer after layer).
/// A value beyond it is damage or a misread file (a variance read as a mean, bytes of
/// another type), on which every later command would fail, or silently compute nonsense.
pub const MAX_PARAM_MAGNITUDE: f32 = 1e6;

/// The largest `rho` (a weight's `sigma = softplus(rho)`) a model read from a file may hold:
/// 10, a sigma of 10.00005.
///
/// Ten times the largest prior sigma of any preset or import default (1, bayesian-torch's
/// `prior_variance`), toward which the KL pulls every sigma; trained sigmas lie far below it
/// (the presets start them at 0.0025-0.05). A larger `rho` is damage: a codebook whose sigmas
/// were 100 evaluated to chance accuracy without a word.
pub const MAX_RHO: f32 = 10.0;

/// A parameter value beyond what a model read from a file may hold.
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfRange {
    /// The parameter's path (e.g. `body.fc1.weight_rho`).
    pub param: String,
    /// Its most extreme value: the largest magnitude, or for a `rho` the largest value.
    pub value: f32,
    /// The bound it passes: [`MAX_PARAM_MAGNITUDE`], or [`MAX_RHO`] for a `rho`.
    pub bound: f32,
}

impl std::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.bound == MAX_RHO {
            write!(
                f,
                "parameter {} holds rho {:e} (sigma = softplus(rho)), beyond the {} no trained \
                 model reaches",
                self.param, self.value, self.bound
            )
        } else {
            write!(
                f,
                "parameter {} holds a value of magnitude {:e}, beyond the {:e} no trained model \
                 reaches",
                self.param, self.value, self.bound
            )
        }
    }
}

/// Finds the first parameter beyond its bound.
struct RangeCheck {
    path: ModulePath,
    found: Option<OutOfRange>,
}

impl ModuleVisitor for RangeCheck {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val();
        // An empty tensor has no maximum (and nothing out of range).
        if self.found.is_some() || value.shape().num_elements() == 0 {
            return;
        }
        let value = value.detach();
        let largest = value.clone().abs().max().into_scalar::<f32>();
        let param = self.path.joined();
        if largest > MAX_PARAM_MAGNITUDE {
            self.found = Some(OutOfRange {
                param,
                value: largest,
                bound: MAX_PARAM_MAGNITUDE,
            });
            return;
        }
        // A very negative rho is a near-zero sigma, harmless; only large sigmas are damage.
        if param.ends_with("rho") {
            let top = value.max().into_scalar::<f32>();
            if top > MAX_RHO {
                self.found = Some(OutOfRange {
                    param,
                    value: top,
                    bound: MAX_RHO,
                });
            }
        }
    }
}

/// The first float parameter of `model` beyond ±[`MAX_PARAM_MAGNITUDE`], or a `rho` (every
/// parameter whose name ends in `rho`) above [`MAX_RHO`], if any (NaN and infinities are
/// [`first_non_finite`]'s to find): what a loader names when it refuses a damaged model.
pub fn first_out_of_range<B: ClassifierBody>(model: &Classifier<B>) -> Option<OutOfRange> {
    let mut v = RangeCheck {
        path: ModulePath::default(),
        found: None,
    };
    model.visit(&mut v);
    v.found
}

/// The seed of `epoch`'s noise (each step's is derived from it): a function of the run's seed
/// and the epoch alone, so a resumed run draws the same noise as an uninterrupted one.
fn epoch_seed(seed: u64, epoch: usize) -> u64 {
    bnn_data::derive_seed(seed, epoch as u64, u64::MAX)
}

/// Trains `model` (on an autodiff device) for `config.epochs` epochs over `loader`.
///
/// Deterministic models minimise the NLL of the data (the cross-entropy of a classifier, the
/// Gaussian NLL of a regression network: [`crate::likelihood`]); models with Bayesian
/// parameters minimise the negative ELBO per example, `NLL + kl_weight * KL / N_train`
/// ([`ElboConfig`]). The loader's data must fit the model's head (targets for a Gaussian head,
/// labels for a classifier; [`crate::likelihood::check_targets`]).
///
/// The device's generator is re-seeded from `(config.seed, epoch, step)` before every step,
/// and the loader's order depends on `(seed, epoch)` only, so training is a function of its
/// inputs. With a `checkpointer`, the model and the optimiser state are committed after
/// every epoch, and a checkpoint in its directory is resumed exactly: the result is
/// bit-identical to an uninterrupted run on the same backend and thread count (the same
/// parameter tensors and history; the record files differ in burn's random parameter ids, see
/// [`Checkpointer`]; asking for more epochs than the checkpoint's run extends it). The model returned is then the committed one,
/// as a resumed run would load it. A checkpoint of another run is refused with
/// [`TrainError::ResumeMismatch`] (see [`Checkpointer::check`]).
///
/// The observer may end training early ([`Observer::should_stop`], asked before every epoch
/// or [more often](Observer::stop_checks_per_epoch)); the history then holds the epochs
/// trained, the last one partial when the stop came inside it, and the checkpoint records the
/// stop ([`CheckpointState::stopped`](crate::CheckpointState::stopped)) and, inside an epoch,
/// the epoch's running sums: resumed without the stop, the run goes on exactly as one that
/// never stopped.
///
/// A non-finite loss stops training with [`TrainError::NonFiniteLoss`], a non-finite
/// parameter at the end of an epoch with [`TrainError::NonFiniteParameters`]; either way no
/// checkpoint with a non-finite value is written and the previous one stays on disk.
pub fn train<B: ClassifierBody>(
    model: Classifier<B>,
    loader: &DataLoader,
    config: &TrainConfig,
    checkpointer: Option<&Checkpointer>,
    observer: &mut dyn Observer<B>,
) -> Result<(Classifier<B>, Vec<EpochStats>), TrainError> {
    let device = model.devices().first().cloned().unwrap_or_default();
    train_data_parallel(
        model,
        loader,
        config,
        &DataParallel::single(device),
        checkpointer,
        observer,
    )
}

/// [`train`] with one replica per device of `parallel` (see the module `parallel` of this
/// crate for the arithmetic): every global batch of `loader` is split into one shard per
/// replica, each replica draws its own weight noise (seeded from `(config.seed, epoch, step,
/// rank)`), and the optimiser steps on the mean of the replicas' gradients, which is the
/// gradient of the global batch's loss (the KL keeps its global `N_train` scaling). The
/// statistics are those of the global batch. The model returned lives on the first device.
///
/// Same seed, same backend and world size: same result. A world size of 1 is [`train`]. A
/// checkpoint records the world size: resuming with another is refused
/// ([`TrainError::ResumeMismatch`]); set it with [`Checkpointer::with_world_size`] for
/// [`Checkpointer::check`]. More replicas than examples per batch is
/// [`DevicesError::WorldSizeExceedsBatch`](crate::DevicesError::WorldSizeExceedsBatch).
pub fn train_data_parallel<B: ClassifierBody>(
    model: Classifier<B>,
    loader: &DataLoader,
    config: &TrainConfig,
    parallel: &DataParallel,
    checkpointer: Option<&Checkpointer>,
    observer: &mut dyn Observer<B>,
) -> Result<(Classifier<B>, Vec<EpochStats>), TrainError> {
    config.validate()?;
    parallel.check_batch_size(loader.config().batch_size)?;
    crate::likelihood::check_targets(model.head(), loader.dataset().target_dim())?;
    let regression = model.head().is_regression();
    let replicas = Replicas::start(parallel);
    let mut model = replicas.place(model);
    let rho = rho_group()?;
    let mut in_group = InGroup {
        group: &rho,
        path: Vec::new(),
        found: false,
    };
    model.visit(&mut in_group);
    let bayesian = in_group.found;
    // The schedule's momentum at step 0; the loop sets it before every step.
    let dial = config.schedule.momentum(0, 1).map(MomentumDial::new);
    let mut optim = optimizer(config, &rho, dial.as_ref());
    let n_train = loader.dataset().len();
    let elbo = ElboConfig::new(n_train)
        .with_kl_weight(config.kl_weight)
        .with_schedule(if config.kl_warmup_steps > 0 {
            KlSchedule::Linear {
                warmup_steps: config.kl_warmup_steps,
            }
        } else {
            KlSchedule::Constant
        });
    let objective = Objective {
        elbo,
        kl: bayesian.then_some((config.prior, config.shared_kl)),
    };
    let steps_per_epoch = loader.num_batches();
    let total_steps =
        steps_per_epoch
            .checked_mul(config.epochs)
            .ok_or(TrainError::InvalidSetting {
                field: "epochs",
                value: config.epochs as f64,
                expected: "epochs times batches per epoch within usize",
            })?;
    let mut history = Vec::new();
    let mut start_epoch = 0;
    let mut resumed_partial = None;
    let run = checkpointer.map(|ck| ck.run_of(&model, loader, config, parallel.world_size()));
    if let (Some(ck), Some(run)) = (checkpointer, &run)
        && let Some((m, o, state)) = ck.resume(model.clone(), optim.clone(), run)?
    {
        model = replicas.place(m);
        optim = o;
        history = state.history;
        match (state.partial, history.last()) {
            (Some(sums), Some(stats)) => {
                start_epoch = state.epoch;
                resumed_partial = Some((sums, stats.clone()));
            }
            _ => start_epoch = state.epoch + 1,
        }
    }

    let checks = observer.stop_checks_per_epoch();
    let mut saved = None;
    for epoch in start_epoch..config.epochs {
        let partial = resumed_partial.take().filter(|_| epoch == start_epoch);
        let from = partial
            .as_ref()
            .and_then(|(_, stats)| stats.partial_steps)
            .unwrap_or(0);
        let at = |step| Progress {
            epoch,
            step,
            steps: steps_per_epoch,
        };
        if is_check_step(from, steps_per_epoch, checks) && observer.should_stop(&model, at(from))? {
            // The model is the last checkpoint's: only the stop is new.
            if let Some(ck) = checkpointer {
                ck.mark_stopped()?;
            }
            break;
        }
        if partial.is_some() {
            // The stopped epoch goes on from its step; its statistics are made anew.
            history.pop();
        }
        let seed = epoch_seed(config.seed, epoch);
        let started = Instant::now();
        let (mut loss_sum, mut nll_sum, mut correct, mut squared_error, mut seen) = partial
            .as_ref()
            .map_or((0.0f64, 0.0f64, 0usize, 0.0f64, 0usize), |(p, _)| {
                (p.loss_sum, p.nll_sum, p.correct, p.squared_error, p.seen)
            });
        let earlier_seconds = partial.as_ref().map_or(0.0, |(_, stats)| stats.seconds);
        let mut earlier_kl = partial.as_ref().map(|(_, stats)| stats.kl);
        let mut last_kl: Option<Tensor<1>> = None;
        let mut stopped_at = None;
        for (step, batch) in loader.epoch(epoch as u64).enumerate().skip(from) {
            if step > from
                && is_check_step(step, steps_per_epoch, checks)
                && observer.should_stop(&model, at(step))?
            {
                stopped_at = Some(step);
                break;
            }
            let batch = batch?;
            let global = epoch * steps_per_epoch + step;
            let at = Position {
                epoch_seed: seed,
                step,
                global,
            };
            let (grads, totals) = replicas.gradients(&model, &batch, &objective, at)?;
            if !totals.loss.is_finite() {
                return Err(TrainError::NonFiniteLoss {
                    epoch,
                    step,
                    value: totals.loss,
                });
            }
            if totals.kl.is_some() {
                last_kl = totals.kl;
                earlier_kl = None;
            }
            correct += totals.correct;
            squared_error += totals.squared_error;
            seen += totals.seen;
            loss_sum += totals.loss as f64 * totals.seen as f64;
            nll_sum += totals.nll_sum;

            let factor = config.schedule.factor(global, total_steps);
            let rates = step_rates(config.lr * factor, config.lr_rho * factor, &rho);
            if let (Some(dial), Some(m)) = (&dial, config.schedule.momentum(global, total_steps)) {
                dial.set(m);
            }
            model = observer.project(optim.step(rates, model, grads))?;
            observer.on_step(&StepInfo {
                epoch,
                step,
                steps: steps_per_epoch,
                loss: totals.loss,
                images_per_s: seen as f64 / started.elapsed().as_secs_f64().max(1e-9),
            });
        }
        let seconds = earlier_seconds + started.elapsed().as_secs_f64();
        let kl = last_kl
            .map(|k| k.into_scalar::<f32>() as f64)
            .or(earlier_kl);
        let stats = EpochStats {
            epoch,
            loss: loss_sum / seen.max(1) as f64,
            nll: nll_sum / seen.max(1) as f64,
            kl: kl.unwrap_or(0.0),
            accuracy: correct as f64 / seen.max(1) as f64,
            rmse: regression.then(|| {
                let cells = seen.max(1) * model.head().targets().max(1);
                (squared_error / cells as f64).sqrt()
            }),
            images_per_s: seen as f64 / seconds.max(1e-9),
            seconds,
            partial_steps: stopped_at,
        };
        if let Some(path) = first_non_finite(&model) {
            return Err(TrainError::NonFiniteParameters { epoch, path });
        }
        observer.on_epoch(&stats);
        history.push(stats);
        let partial = stopped_at.map(|_| PartialEpoch {
            loss_sum,
            nll_sum,
            correct,
            squared_error,
            seen,
        });
        if let (Some(ck), Some(run)) = (checkpointer, &run) {
            saved = Some(ck.save(&model, &optim, run, epoch, &history, partial)?);
        }
        if partial.is_some() {
            break;
        }
    }
    if let (Some(ck), Some(record)) = (checkpointer, saved) {
        model = ck.reload(model, record)?;
    }
    Ok((model, history))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LrSchedule;
    use burn::optim::GradientsParams;

    #[derive(Module, Debug)]
    struct Pair {
        weight_mu: Param<Tensor<1>>,
        weight_rho: Param<Tensor<1>>,
    }

    #[derive(Module, Debug)]
    struct Single {
        w: Param<Tensor<1>>,
    }

    /// Twenty steps of SGD under PyTorch's one-cycle with momentum cycling on
    /// `sum(c * w) + sum(a * w^2) / 2`, against PyTorch 2.15 (float64):
    /// `SGD([w], lr=0.1, momentum=0.9[, nesterov=True, weight_decay=5e-4])` with
    /// `OneCycleLR(opt, max_lr=0.1, total_steps=20, pct_start=0.25)`.
    #[test]
    fn sgd_with_a_momentum_cycle_follows_pytorchs_trajectory() {
        let device = bnn_layers::test_device().autodiff();
        let cases = [
            (
                false,
                0.0,
                [-0.692839288483, -0.435359113413, -0.0807973761244],
            ),
            (
                true,
                5e-4,
                [-0.55336578702, 0.0452789690602, -0.307392467235],
            ),
        ];
        for (nesterov, weight_decay, torch) in cases {
            let config = TrainConfig {
                lr: 0.1,
                optimizer: OptimizerKind::Sgd {
                    momentum: 0.9,
                    nesterov,
                },
                weight_decay,
                schedule: LrSchedule::OneCycleCos {
                    pct_start: 0.25,
                    momentum: Some(crate::MomentumCycle::PYTORCH),
                },
                ..TrainConfig::deterministic(1)
            };
            config.validate().unwrap();
            let rho = rho_group().unwrap();
            let dial = MomentumDial::new(config.schedule.momentum(0, 20).unwrap());
            let mut optim = optimizer(&config, &rho, Some(&dial));
            let tensor = |v: [f64; 3]| Tensor::<1>::from_floats(v, &device);
            let mut model = Single {
                w: Param::from_tensor(tensor([1.0, -2.0, 0.5]).require_grad()),
            };
            let (c, a) = (tensor([0.3, -0.7, 1.1]), tensor([1.0, 2.0, 3.0]));
            for step in 0..20 {
                let w = model.w.val();
                let loss = (w.clone() * c.clone()).sum() + (w.clone() * w * a.clone()).sum() / 2.0;
                let grads = GradientsParams::from_grads(loss.backward(), &model);
                let lr = config.lr * config.schedule.factor(step, 20);
                dial.set(config.schedule.momentum(step, 20).unwrap());
                model = optim.step(step_rates(lr, lr, &rho), model, grads);
            }
            let got: Vec<f32> = model
                .w
                .val()
                .into_data()
                .convert::<f32>()
                .try_to_vec::<f32>()
                .unwrap();
            for (g, t) in got.iter().zip(torch) {
                assert!(
                    (*g as f64 - t).abs() < 2e-5,
                    "nesterov {nesterov}: {got:?} vs PyTorch {torch:?}"
                );
            }
        }
    }

    /// Adam's first step is `lr * g / (|g| + epsilon)`: with a KL-sized gradient (1e-5) it must
    /// be a full `lr` step, for the means at `lr` and for the `rho`s at `lr_rho`.
    #[test]
    fn adam_takes_full_steps_on_small_gradients_in_both_groups() {
        let device = bnn_layers::test_device().autodiff();
        let model = Pair {
            weight_mu: Param::from_tensor(Tensor::zeros([4], &device).require_grad()),
            weight_rho: Param::from_tensor(Tensor::zeros([4], &device).require_grad()),
        };
        let loss = (model.weight_mu.val() + model.weight_rho.val()).sum() * 1e-5;
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let rho = rho_group().unwrap();
        let mut optim = optimizer(&TrainConfig::bayes_by_backprop(1), &rho, None);
        let model = optim.step(step_rates(1e-3, 1e-2, &rho), model, grads);
        let host = |t: Tensor<1>| {
            t.into_data()
                .convert::<f32>()
                .try_into_vec::<f32>()
                .unwrap()
        };
        for (name, values, lr) in [
            ("mu", host(model.weight_mu.val()), 1e-3f32),
            ("rho", host(model.weight_rho.val()), 1e-2f32),
        ] {
            for v in values {
                assert!(
                    (v + lr).abs() < 0.01 * lr,
                    "{name} stepped to {v}, want -{lr}"
                );
            }
        }
    }
}
