//! Gradient estimators for mean-field Gaussian layers.

use burn::config::Config;

/// How a Bayesian layer turns its posterior `N(mu, sigma^2)` into a stochastic forward pass.
///
/// All three are unbiased estimators of the same expected log-likelihood; they differ in
/// variance and cost:
/// - [`Estimator::Reparameterization`]: `w = mu + sigma * eps`, one `eps` per weight per forward
///   (Blundell et al. 2015, "Weight Uncertainty in Neural Networks"). The whole mini-batch shares
///   one weight sample.
/// - [`Estimator::LocalReparameterization`]: samples the pre-activations instead of the weights,
///   `b = x mu + sqrt(x^2 sigma^2) * eps` (Kingma, Salimans & Welling 2015). Independent weights
///   per example, lower variance, and the noise has the size of the output rather than the weight.
/// - [`Estimator::Flipout`]: one shared perturbation decorrelated across examples by random sign
///   flips, `b = x mu + ((x o s) (sigma o eps)) o r` (Wen et al. 2018).
#[derive(Config, Debug, Copy, PartialEq, Eq, Hash)]
pub enum Estimator {
    /// Sample the weights: `w = mu + sigma * eps`.
    Reparameterization,
    /// Sample the pre-activations (Kingma et al. 2015).
    LocalReparameterization,
    /// Flipout (Wen et al. 2018).
    Flipout,
}

// burn's `Config` derive does not accept `#[default]` on a variant.
#[allow(clippy::derivable_impls)]
impl Default for Estimator {
    fn default() -> Self {
        Self::Reparameterization
    }
}

impl Estimator {
    /// The name used on command lines and in result files.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Reparameterization => "reparam",
            Self::LocalReparameterization => "local-reparam",
            Self::Flipout => "flipout",
        }
    }

    /// Parses [`Estimator::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "reparam" | "reparameterization" => Some(Self::Reparameterization),
            "local-reparam" | "lrt" | "local-reparameterization" => {
                Some(Self::LocalReparameterization)
            }
            "flipout" => Some(Self::Flipout),
            _ => None,
        }
    }
}
