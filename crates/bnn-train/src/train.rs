//! The training loop: cross-entropy for deterministic models, the ELBO for Bayesian and shared
//! ones, with separate learning rates for means and `rho`.

use std::time::Instant;

use bnn_data::DataLoader;
use bnn_layers::{ElboConfig, KlSchedule, kl_divergence};
use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer, SgdConfig};
use burn::prelude::*;
use models::Network;
use serde::{Deserialize, Serialize};

use crate::batch::{cross_entropy, to_tensors};
use crate::checkpoint::Checkpointer;
use crate::{OptimizerKind, TrainConfig, TrainError};

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
    /// Training accuracy over the epoch (with sampled weights).
    pub accuracy: f64,
    /// Images per second.
    pub images_per_s: f64,
    /// Wall-clock seconds.
    pub seconds: f64,
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

/// Receives progress; the library prints nothing itself.
pub trait Observer {
    /// After every optimiser step.
    fn on_step(&mut self, _info: &StepInfo) {}
    /// After every epoch.
    fn on_epoch(&mut self, _stats: &EpochStats) {}
}

/// An observer that ignores everything.
pub struct Silent;

impl Observer for Silent {}

/// Collects the ids of every `rho` parameter (trained at `lr_rho`).
#[derive(Default)]
struct RhoIds {
    path: Vec<String>,
    ids: Vec<ParamId>,
}

impl ModuleVisitor for RhoIds {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if self
            .path
            .last()
            .is_some_and(|n| n == "rho" || n.ends_with("_rho"))
        {
            self.ids.push(param.id);
        }
    }
}

fn optimizer(kind: OptimizerKind, weight_decay: f64) -> ModuleOptimizer {
    let decay = (weight_decay > 0.0).then(|| WeightDecayConfig::new(weight_decay as f32));
    match kind {
        OptimizerKind::Adam => AdamConfig::new().with_weight_decay(decay).init(),
        OptimizerKind::Sgd { momentum, nesterov } => SgdConfig::new()
            .with_weight_decay(decay)
            .with_momentum(Some(
                MomentumConfig::new()
                    .with_momentum(momentum)
                    .with_dampening(0.0)
                    .with_nesterov(nesterov),
            ))
            .init(),
    }
}

/// Trains `model` (on an autodiff device) for `config.epochs` epochs over `loader`.
///
/// Deterministic models minimise the cross-entropy; models with Bayesian parameters minimise
/// the negative ELBO per example, `NLL + kl_weight * KL / N_train` ([`ElboConfig`]). With a
/// `checkpointer`, the model is saved after every epoch and training resumes after the last
/// saved epoch. A non-finite loss stops training with [`TrainError::NonFiniteLoss`]; the last
/// good checkpoint stays on disk.
pub fn train(
    mut model: Network,
    loader: &DataLoader,
    config: &TrainConfig,
    checkpointer: Option<&Checkpointer>,
    observer: &mut dyn Observer,
) -> Result<(Network, Vec<EpochStats>), TrainError> {
    if config.batch_size == 0 || config.lr <= 0.0 || !config.lr.is_finite() {
        return Err(TrainError::Config(format!(
            "batch size {} and learning rate {} must be positive",
            config.batch_size, config.lr
        )));
    }
    let mut rho = RhoIds::default();
    model.visit(&mut rho);
    let bayesian = !rho.ids.is_empty();
    let mut main_opt = optimizer(config.optimizer, config.weight_decay);
    let mut rho_opt = optimizer(config.optimizer, 0.0);
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
    let steps_per_epoch = loader.num_batches();
    let total_steps = steps_per_epoch * config.epochs;
    let mut history = Vec::new();
    let mut start_epoch = 0;
    if let Some(ck) = checkpointer
        && let Some((m, state)) = ck.resume(model.clone())?
    {
        model = m;
        start_epoch = state.epoch + 1;
        history = state.history;
    }

    let device = model.devices().first().cloned().unwrap_or_default();
    for epoch in start_epoch..config.epochs {
        let started = Instant::now();
        let (mut loss_sum, mut nll_sum, mut correct, mut seen) = (0.0f64, 0.0f64, 0usize, 0usize);
        let mut last_kl: Option<Tensor<1>> = None;
        for (step, batch) in loader.epoch(epoch as u64).enumerate() {
            let batch = batch?;
            let global = epoch * steps_per_epoch + step;
            let (x, y) = to_tensors(&batch, &device);
            let logits = model.forward(x);
            let nll = cross_entropy(logits.clone(), y.clone());
            let kl = if bayesian {
                kl_divergence(&model, &config.prior)
            } else {
                None
            };
            if let Some(k) = &kl {
                last_kl = Some(k.clone().detach());
            }
            let loss = elbo.loss(nll.clone(), kl, global);
            let loss_value = loss.clone().into_scalar::<f32>();
            if !loss_value.is_finite() {
                return Err(TrainError::NonFiniteLoss {
                    epoch,
                    step,
                    value: loss_value,
                });
            }
            let predicted = logits.argmax(1).reshape([batch.len()]);
            correct += predicted.equal(y).int().sum().into_scalar::<i64>() as usize;
            seen += batch.len();
            loss_sum += loss_value as f64 * batch.len() as f64;
            nll_sum += nll.into_scalar::<f32>() as f64 * batch.len() as f64;

            let mut grads = loss.backward();
            let factor = config.schedule.factor(global, total_steps);
            if bayesian {
                let rho_grads = GradientsParams::from_params(&mut grads, &model, &rho.ids);
                let main_grads = GradientsParams::from_module(&mut grads, &model);
                model = main_opt.step(config.lr * factor, model, main_grads);
                model = rho_opt.step(config.lr_rho * factor, model, rho_grads);
            } else {
                let main_grads = GradientsParams::from_module(&mut grads, &model);
                model = main_opt.step(config.lr * factor, model, main_grads);
            }
            observer.on_step(&StepInfo {
                epoch,
                step,
                steps: steps_per_epoch,
                loss: loss_value,
                images_per_s: seen as f64 / started.elapsed().as_secs_f64().max(1e-9),
            });
        }
        let seconds = started.elapsed().as_secs_f64();
        let stats = EpochStats {
            epoch,
            loss: loss_sum / seen.max(1) as f64,
            nll: nll_sum / seen.max(1) as f64,
            kl: last_kl.map_or(0.0, |k| k.into_scalar::<f32>() as f64),
            accuracy: correct as f64 / seen.max(1) as f64,
            images_per_s: seen as f64 / seconds.max(1e-9),
            seconds,
        };
        observer.on_epoch(&stats);
        history.push(stats);
        if let Some(ck) = checkpointer {
            ck.save(&model, epoch, &history)?;
        }
    }
    Ok((model, history))
}
