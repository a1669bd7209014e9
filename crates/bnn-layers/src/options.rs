//! The options every Bayesian layer shares: how it samples and how its sigmas start.

use burn::config::Config;

use crate::{Estimator, SigmaInit};

/// Options of a Bayesian layer ([`crate::BayesLinear`], [`crate::BayesConv2d`]), or of every
/// Bayesian layer of a model.
#[derive(Config, Debug, PartialEq)]
pub struct BayesOptions {
    /// The forward estimator.
    #[config(default = "Estimator::Reparameterization")]
    pub estimator: Estimator,
    /// Initialisation of the weight sigmas (paper's appendix: Xavier-uniform, gain 0.01).
    #[config(default = "SigmaInit::XavierUniform { gain: 0.01 }")]
    pub weight_sigma: SigmaInit,
    /// Initialisation of the bias sigmas (paper's appendix: `|N(0, 0.001^2)|`).
    #[config(default = "SigmaInit::AbsNormal { std: 0.001 }")]
    pub bias_sigma: SigmaInit,
    /// Whether to hold the centres of an empirical (MOPED) prior ([`crate::Prior::Empirical`]),
    /// filled by [`crate::bayes_from_deterministic`].
    #[config(default = false)]
    pub empirical_prior: bool,
}
