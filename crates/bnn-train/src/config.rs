//! Training configuration.

use bnn_layers::{Prior, SharedKl};
use serde::{Deserialize, Serialize};

use crate::TrainError;

/// Optimiser.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptimizerKind {
    /// Adam (Kingma & Ba 2015).
    Adam {
        /// The denominator's `epsilon`. [`ADAM_EPSILON`] (1e-8, the paper's and PyTorch's
        /// default) by default; burn's own default, 1e-5, is the size of the KL gradient on a
        /// `rho` (about `1 / N_train`) and would damp the sigmas' steps.
        epsilon: f64,
    },
    /// SGD with (Nesterov) momentum.
    Sgd {
        /// Momentum factor.
        momentum: f64,
        /// Nesterov momentum.
        nesterov: bool,
    },
}

/// Adam's default `epsilon` here: 1e-8 (Kingma & Ba 2015; PyTorch's default).
pub const ADAM_EPSILON: f64 = 1e-8;

impl OptimizerKind {
    /// Adam with [`ADAM_EPSILON`].
    pub fn adam() -> Self {
        Self::Adam {
            epsilon: ADAM_EPSILON,
        }
    }
}

/// Learning-rate schedule over the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LrSchedule {
    /// The base rate throughout.
    Constant,
    /// One-cycle (Smith & Topin 2019) with linear annealing: from `lr / 25` up to `lr` over the
    /// first `pct_start` of the run, then down to `lr / 25 / 1e4`, read at `(step + 1) / total`
    /// of the run. Close to PyTorch's `OneCycleLR` with `anneal_strategy='linear'`, not to its
    /// default (cosine, [`LrSchedule::OneCycleCos`]); the momentum stays fixed.
    OneCycle {
        /// Fraction of steps spent warming up.
        pct_start: f64,
    },
    /// One-cycle with cosine annealing, step for step as PyTorch's `OneCycleLR` defaults
    /// (`anneal_strategy='cos'`, `div_factor=25`, `final_div_factor=1e4`, `three_phase=False`):
    /// step `s` of `total` gets `lr / 25` at `s = 0`, `lr` at `s = pct_start * total - 1` and
    /// `lr / 25 / 1e4` at `s = total - 1`, each phase a half cosine. With `momentum`, SGD's
    /// momentum cycles against the rate as PyTorch's `cycle_momentum=True` cycles it
    /// ([`LrSchedule::momentum`]); without, the optimiser's momentum stays fixed.
    OneCycleCos {
        /// Fraction of steps spent warming up.
        pct_start: f64,
        /// SGD's momentum cycle (PyTorch's default: [`MomentumCycle::PYTORCH`]), or none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        momentum: Option<MomentumCycle>,
    },
    /// Cosine decay from `lr` to 0.
    Cosine,
    /// Linear warm-up from 0 to `lr` over the first `warmup` of the steps, then `lr` times
    /// `gamma` per milestone passed (PyTorch's `MultiStepLR` after a `WarmUpLR`). Milestones and
    /// warm-up are fractions of the run, so a shortened run keeps the schedule's shape.
    MultiStep {
        /// Fraction of steps spent warming up (0: none).
        warmup: f64,
        /// Fractions of the run at which the rate is multiplied by `gamma`, ascending.
        milestones: Vec<f64>,
        /// Factor applied at each milestone.
        gamma: f64,
    },
}

/// The momentum half of PyTorch's one-cycle (`OneCycleLR(cycle_momentum=True)`): the momentum
/// falls from `max` to `base` while the rate rises, and climbs back to `max` while it anneals,
/// on the same half cosines.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MomentumCycle {
    /// Momentum at the rate's peak (PyTorch's `base_momentum`).
    pub base: f64,
    /// Momentum at the start and the end of the run (PyTorch's `max_momentum`).
    pub max: f64,
}

impl MomentumCycle {
    /// PyTorch's defaults: `base_momentum=0.85`, `max_momentum=0.95`.
    pub const PYTORCH: Self = Self {
        base: 0.85,
        max: 0.95,
    };
}

/// Where step `step` of `total` lies in PyTorch's two-phase one-cycle
/// (`OneCycleLR._schedule_phases`): `(true, pct)` while warming up, `(false, pct)` while
/// annealing, `pct` the fraction of that phase done.
fn one_cycle_phase(pct_start: f64, step: usize, total: usize) -> (bool, f64) {
    let (step, last) = (step as f64, total.max(1) as f64 - 1.0);
    let peak = pct_start * (last + 1.0) - 1.0;
    if peak > 0.0 && step <= peak {
        (true, step / peak)
    } else if last > peak {
        (false, ((step - peak) / (last - peak)).min(1.0))
    } else {
        (false, 1.0)
    }
}

/// PyTorch's `OneCycleLR._annealing_cos`: from `from` at `pct = 0` to `to` at `pct = 1`.
fn anneal_cos(from: f64, to: f64, pct: f64) -> f64 {
    to + (from - to) / 2.0 * ((std::f64::consts::PI * pct).cos() + 1.0)
}

impl LrSchedule {
    /// SGD's momentum at `step` of `total` steps, where the schedule cycles it (a
    /// [`LrSchedule::OneCycleCos`] with a [`MomentumCycle`]); `None` leaves the optimiser's own.
    pub fn momentum(&self, step: usize, total: usize) -> Option<f64> {
        match self {
            &LrSchedule::OneCycleCos {
                pct_start,
                momentum: Some(MomentumCycle { base, max }),
            } => Some(match one_cycle_phase(pct_start, step, total) {
                (true, pct) => anneal_cos(max, base, pct),
                (false, pct) => anneal_cos(base, max, pct),
            }),
            _ => None,
        }
    }

    /// Multiplier of the base rate at `step` of `total` steps.
    pub fn factor(&self, step: usize, total: usize) -> f64 {
        let t = (step as f64 + 1.0) / total.max(1) as f64;
        match self {
            LrSchedule::Constant => 1.0,
            LrSchedule::Cosine => 0.5 * (1.0 + (std::f64::consts::PI * t.min(1.0)).cos()),
            LrSchedule::MultiStep {
                warmup,
                milestones,
                gamma,
            } => {
                if t <= *warmup {
                    return t / warmup;
                }
                let passed = milestones.iter().filter(|&&m| t > m).count();
                gamma.powi(passed as i32)
            }
            &LrSchedule::OneCycleCos { pct_start, .. } => {
                // torch.optim.lr_scheduler.OneCycleLR.get_lr, two phases.
                let (initial, min) = (1.0 / 25.0, 1.0 / 25.0 / 1e4);
                match one_cycle_phase(pct_start, step, total) {
                    (true, pct) => anneal_cos(initial, 1.0, pct),
                    (false, pct) => anneal_cos(1.0, min, pct),
                }
            }
            &LrSchedule::OneCycle { pct_start } => {
                let (start, end) = (1.0 / 25.0, 1.0 / 25.0 / 1e4);
                let p = pct_start.clamp(1e-6, 1.0 - 1e-6);
                if t <= p {
                    start + (1.0 - start) * t / p
                } else {
                    1.0 + (end - 1.0) * ((t - p) / (1.0 - p)).min(1.0)
                }
            }
        }
    }
}

/// Most epochs a training configuration may have. The paper's longest schedule is 200
/// epochs; a million of even the smallest data set's epochs would run for weeks, so a larger
/// number is a typo (`1e11`), and it would overflow the step counts of the schedules.
pub const MAX_EPOCHS: usize = 1_000_000;

/// How to train a model. Defaults are for Bayes-by-Backprop on small images; see the
/// constructors for the settings of each stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Passes over the training set.
    pub epochs: usize,
    /// Mini-batch size.
    pub batch_size: usize,
    /// Learning rate of means and deterministic parameters.
    pub lr: f64,
    /// Learning rate of the `rho` (standard deviation) parameters; the paper's appendix trains
    /// them faster than the means (1e-3 vs 1e-4).
    pub lr_rho: f64,
    /// Optimiser.
    pub optimizer: OptimizerKind,
    /// L2 weight decay (deterministic training; the KL term regularises Bayesian models).
    pub weight_decay: f64,
    /// Learning-rate schedule.
    pub schedule: LrSchedule,
    /// Prior of the ELBO.
    pub prior: Prior,
    /// Extra factor on the KL term (1 = the ELBO).
    pub kl_weight: f64,
    /// Linear KL warm-up over this many steps (0 = none).
    pub kl_warmup_steps: usize,
    /// How weight-shared layers count their KL (the paper's mixture bound by default, or per
    /// weight); models without shared layers ignore it.
    #[serde(default)]
    pub shared_kl: SharedKl,
    /// Seed of the data order, augmentations and weight noise.
    pub seed: u64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self::bayes_by_backprop(5)
    }
}

impl TrainConfig {
    /// Checks every field's range: at most [`MAX_EPOCHS`] epochs (0, a stage that trains
    /// nothing, is allowed here; a command that must train refuses it), a positive batch size and learning rate, non-negative
    /// finite `lr_rho`, weight decay and KL weight, momentum in `[0, 1)`, a positive Adam
    /// epsilon, a one-cycle warm-up fraction in `(0, 1)`, a momentum cycle (SGD only) with
    /// `0 <= base <= max < 1`, and a positive prior sigma.
    pub fn validate(&self) -> Result<(), TrainError> {
        let check = |field, value: f64, ok: bool, expected| {
            if ok && value.is_finite() {
                Ok(())
            } else {
                Err(TrainError::InvalidSetting {
                    field,
                    value,
                    expected,
                })
            }
        };
        check(
            "epochs",
            self.epochs as f64,
            self.epochs <= MAX_EPOCHS,
            "at most bnn_train::MAX_EPOCHS (1,000,000)",
        )?;
        check(
            "batch_size",
            self.batch_size as f64,
            self.batch_size > 0,
            "at least 1",
        )?;
        check("lr", self.lr, self.lr > 0.0, "finite and > 0")?;
        check("lr_rho", self.lr_rho, self.lr_rho >= 0.0, "finite and >= 0")?;
        check(
            "weight_decay",
            self.weight_decay,
            self.weight_decay >= 0.0,
            "finite and >= 0",
        )?;
        check(
            "kl_weight",
            self.kl_weight,
            self.kl_weight >= 0.0,
            "finite and >= 0",
        )?;
        match self.optimizer {
            OptimizerKind::Adam { epsilon } => {
                check("optimizer.adam.epsilon", epsilon, epsilon > 0.0, "> 0")?
            }
            OptimizerKind::Sgd { momentum, .. } => check(
                "optimizer.sgd.momentum",
                momentum,
                (0.0..1.0).contains(&momentum),
                "in [0, 1)",
            )?,
        }
        if let LrSchedule::OneCycle { pct_start } | LrSchedule::OneCycleCos { pct_start, .. } =
            self.schedule
        {
            check(
                "schedule.one-cycle.pct_start",
                pct_start,
                pct_start > 0.0 && pct_start < 1.0,
                "in (0, 1)",
            )?;
        }
        if let LrSchedule::OneCycleCos {
            momentum: Some(MomentumCycle { base, max }),
            ..
        } = self.schedule
        {
            check(
                "schedule.one-cycle-cos.momentum.max",
                max,
                (0.0..1.0).contains(&max),
                "in [0, 1)",
            )?;
            check(
                "schedule.one-cycle-cos.momentum.base",
                base,
                (0.0..=max).contains(&base),
                "in [0, max]",
            )?;
            if let OptimizerKind::Adam { .. } = self.optimizer {
                return Err(TrainError::InvalidSetting {
                    field: "schedule.one-cycle-cos.momentum",
                    value: max,
                    expected: "no momentum cycle with Adam (it cycles SGD's momentum only)",
                });
            }
        }
        if let LrSchedule::MultiStep {
            warmup,
            milestones,
            gamma,
        } = &self.schedule
        {
            check(
                "schedule.multi-step.warmup",
                *warmup,
                (0.0..1.0).contains(warmup),
                "in [0, 1)",
            )?;
            check(
                "schedule.multi-step.gamma",
                *gamma,
                *gamma > 0.0,
                "finite and > 0",
            )?;
            for (i, &m) in milestones.iter().enumerate() {
                let ascending = i == 0 || m > milestones[i - 1];
                check(
                    "schedule.multi-step.milestones",
                    m,
                    (0.0..=1.0).contains(&m) && ascending,
                    "ascending fractions in [0, 1]",
                )?;
            }
        }
        let (Prior::Normal { sigma, .. } | Prior::Empirical { sigma }) = self.prior;
        check("prior.sigma", sigma, sigma > 0.0, "finite and > 0")?;
        if self.shared_kl == SharedKl::Codebook && matches!(self.prior, Prior::Empirical { .. }) {
            return Err(TrainError::InvalidSetting {
                field: "shared_kl",
                value: sigma,
                expected: "a normal prior with the codebook KL (an empirical prior centres each \
                           weight on its own value, not one prior per codebook entry)",
            });
        }
        Ok(())
    }

    /// Deterministic training: SGD with Nesterov momentum 0.9, one-cycle to 0.05, weight decay
    /// 5e-4 (the usual CIFAR recipe).
    pub fn deterministic(epochs: usize) -> Self {
        Self {
            epochs,
            batch_size: 128,
            lr: 0.05,
            lr_rho: 0.0,
            optimizer: OptimizerKind::Sgd {
                momentum: 0.9,
                nesterov: true,
            },
            weight_decay: 5e-4,
            schedule: LrSchedule::OneCycle { pct_start: 0.25 },
            prior: Prior::default(),
            kl_weight: 1.0,
            kl_warmup_steps: 0,
            shared_kl: SharedKl::Mixture,
            seed: 0,
        }
    }

    /// A deterministic regression network: Adam at 1e-3 under the one-cycle schedule, no
    /// weight decay: the Bayes-by-Backprop recipe's optimiser and rate for the means, so that
    /// the two stages differ by the KL alone. SGD with momentum ([`TrainConfig::deterministic`])
    /// fails a Gaussian head with a learned spread: early steps inflate the spread, which
    /// shrinks the means' gradients by its square (a training NLL stuck near 2.5 nats on a
    /// synthetic table after 20 epochs, where Adam reached 0.22).
    pub fn deterministic_regression(epochs: usize) -> Self {
        Self {
            weight_decay: 0.0,
            lr: 1e-3,
            optimizer: OptimizerKind::adam(),
            ..Self::deterministic(epochs)
        }
    }

    /// Bayes by Backprop: Adam, one-cycle, means at 1e-3, `rho` at 1e-2, prior `N(0, 0.1^2)`.
    pub fn bayes_by_backprop(epochs: usize) -> Self {
        Self {
            epochs,
            batch_size: 128,
            lr: 1e-3,
            lr_rho: 1e-2,
            optimizer: OptimizerKind::adam(),
            weight_decay: 0.0,
            schedule: LrSchedule::OneCycle { pct_start: 0.25 },
            prior: Prior::default(),
            kl_weight: 1.0,
            kl_warmup_steps: 0,
            shared_kl: SharedKl::Mixture,
            seed: 0,
        }
    }

    /// 2DGBNN stage-3 retraining: the paper's appendix rates, 1e-4 for means and 1e-3 for
    /// sigmas, with Adam at a constant rate.
    pub fn retrain(epochs: usize) -> Self {
        Self {
            lr: 1e-4,
            lr_rho: 1e-3,
            schedule: LrSchedule::Constant,
            ..Self::bayes_by_backprop(epochs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A number of epochs no run can finish (a typo such as 10^11) is refused by the
    /// configuration itself, so a config file meets the same bound as a flag; 0 (a skipped
    /// stage) and the bound itself pass.
    #[test]
    fn epochs_beyond_the_bound_are_refused() {
        for ok in [0, 200, MAX_EPOCHS] {
            TrainConfig::retrain(ok).validate().unwrap();
        }
        let e = TrainConfig::retrain(100_000_000_000)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("epochs") && e.contains("1,000,000"), "{e}");
        assert!(e.contains("100000000000 "), "{e}");
    }
}
