//! The evidence lower bound with its scaling made explicit.

use burn::config::Config;
use burn::prelude::*;

/// How the KL term is weighted over training (annealing).
#[derive(Config, Debug, Copy, PartialEq)]
pub enum KlSchedule {
    /// Full weight from the first step.
    Constant,
    /// Linear warm-up from 0 to 1 over this many optimiser steps (Bowman et al. 2016).
    Linear {
        /// Steps until full weight.
        warmup_steps: usize,
    },
}

/// The negative ELBO per training example, the quantity to minimise:
///
/// `loss = NLL_mean + beta * KL / N_train`
///
/// where `NLL_mean` is the mini-batch mean of `-log p(y|x,w)` for one weight sample and `KL`
/// the model's total KL divergence (a sum over all weights). Dividing the KL by the number of
/// training examples `N_train` (not the batch size) makes the mini-batch loss an unbiased
/// estimate of `-ELBO / N_train` (Blundell et al. 2015, eq. 8 with `pi_i = 1/M`).
#[derive(Config, Debug)]
pub struct ElboConfig {
    /// Number of training examples `N_train`.
    pub num_train: usize,
    /// Extra constant factor on the KL (1 = the true ELBO).
    #[config(default = 1.0)]
    pub kl_weight: f64,
    /// Annealing of the KL weight.
    #[config(default = "KlSchedule::Constant")]
    pub schedule: KlSchedule,
}

impl ElboConfig {
    /// The KL factor `beta / N_train` at optimiser step `step`.
    pub fn kl_factor(&self, step: usize) -> f64 {
        let anneal = match self.schedule {
            KlSchedule::Constant => 1.0,
            KlSchedule::Linear { warmup_steps } => {
                ((step + 1) as f64 / warmup_steps.max(1) as f64).min(1.0)
            }
        };
        self.kl_weight * anneal / self.num_train.max(1) as f64
    }

    /// `nll_mean + kl_factor(step) * kl`.
    pub fn loss(&self, nll_mean: Tensor<1>, kl: Option<Tensor<1>>, step: usize) -> Tensor<1> {
        match kl {
            Some(kl) => nll_mean + kl.mul_scalar(self.kl_factor(step)),
            None => nll_mean,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kl_factor_scales_by_dataset_and_anneals() {
        let c = ElboConfig::new(1000);
        assert!((c.kl_factor(0) - 1e-3).abs() < 1e-15);
        let a = ElboConfig::new(1000).with_schedule(KlSchedule::Linear { warmup_steps: 10 });
        assert!((a.kl_factor(0) - 1e-4).abs() < 1e-15);
        assert!((a.kl_factor(4) - 5e-4).abs() < 1e-15);
        assert!((a.kl_factor(100) - 1e-3).abs() < 1e-15);
    }
}
