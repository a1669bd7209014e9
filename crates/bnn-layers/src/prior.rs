//! Priors and the closed-form KL divergence of a mean-field Gaussian posterior.

use burn::config::Config;
use burn::prelude::*;

/// The prior `p(w)` of the ELBO.
#[derive(Config, Debug, Copy, PartialEq)]
pub enum Prior {
    /// `N(mu, sigma^2)` for every weight. The paper's comparison against quantisation uses
    /// `N(0, 0.1^2)` (section "Comparison against Quantisation"), our default.
    Normal {
        /// Prior mean.
        mu: f64,
        /// Prior standard deviation.
        sigma: f64,
    },
    /// An empirical (MOPED-style, Krishnan et al. 2020) prior `N(w_det, sigma^2)` centred on the
    /// weights of a deterministic network, stored in each layer's `*_prior_mu` tensors by
    /// [`crate::bayes_from_deterministic`]. Layers without stored centres fall back to 0.
    Empirical {
        /// Prior standard deviation around the deterministic weights.
        sigma: f64,
    },
}

impl Default for Prior {
    fn default() -> Self {
        Self::Normal {
            mu: 0.0,
            sigma: 0.1,
        }
    }
}

impl Prior {
    /// The prior's standard deviation.
    pub fn sigma(&self) -> f64 {
        match *self {
            Self::Normal { sigma, .. } | Self::Empirical { sigma } => sigma,
        }
    }
}

/// How the KL term counts weights that take their distribution from a shared codebook entry.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum SharedKl {
    /// Every weight's own KL, `sum_i KL(q_i || p) = sum_k n_k KL(N_k || p) + ...`: the exact
    /// KL of the variational family in which each weight draws independently from its shared
    /// distribution. A shared entry then feels the prior `n_k` times, coherently over its
    /// members, while their likelihood gradients partly cancel.
    PerWeight,
    /// The paper's bound (its combined variational formulation, "GMM KL divergence"):
    /// `sum_k pi_k KL(N_k || p)` with `pi_k` the share of the shared (plain and ellipse) weights
    /// that use entry `k`, i.e. the *mean* KL over the shared weights; outliers keep their own
    /// KL each. The default: with [`SharedKl::PerWeight`] the coherent `n_k`-fold prior pull
    /// widens and shrinks the shared entries and left LeNet-5 under-confident (ECE 0.025 vs
    /// 0.009 with this bound, docs/results.md).
    Mixture,
    /// A codebook-level KL: `sum_k n_k KL(N_k || p)` over the codebook entries, `n_k` the
    /// weights that use entry `k` (an ellipse weight counts its blend weight `alpha_j` towards
    /// each entry it blends), plus the outliers' own KL. It differs from
    /// [`SharedKl::PerWeight`] only through the ellipse weights, whose blended distribution's
    /// KL [`SharedKl::PerWeight`] takes instead. Needs a [`Prior::Normal`] (one prior for every
    /// member of an entry).
    Codebook,
}

// Not `#[derive(Default)]`: burn's `Config` derive does not accept the `#[default]` helper
// attribute on a variant ("cannot find attribute `default`").
#[allow(clippy::derivable_impls)]
impl Default for SharedKl {
    fn default() -> Self {
        Self::Mixture
    }
}

/// `KL(N(mu_i, sigma_i^2) || N(prior_mu_i, prior_sigma^2))` of every weight, `[n]`; see
/// [`kl_gaussian_sum`].
pub fn kl_gaussian_each(
    mu: Tensor<1>,
    sigma: Tensor<1>,
    prior_mu: Option<Tensor<1>>,
    scalar_mu: f64,
    prior_sigma: f64,
) -> Tensor<1> {
    let diff = match prior_mu {
        Some(p) => mu - p,
        None => mu.sub_scalar(scalar_mu),
    };
    let var_p = prior_sigma * prior_sigma;
    (sigma.clone().square() + diff.square()).div_scalar(2.0 * var_p) - sigma.log()
        + (prior_sigma.ln() - 0.5)
}

/// `sum_i KL(N(mu_i, sigma_i^2) || N(prior_mu_i, prior_sigma^2))`, in closed form:
/// `ln(sp / sq) + (sq^2 + (mq - mp)^2) / (2 sp^2) - 1/2` per weight.
///
/// `prior_mu` is `None` for a scalar prior mean `scalar_mu`.
pub fn kl_gaussian_sum(
    mu: Tensor<1>,
    sigma: Tensor<1>,
    prior_mu: Option<Tensor<1>>,
    scalar_mu: f64,
    prior_sigma: f64,
) -> Tensor<1> {
    let n = mu.dims()[0] as f64;
    let diff = match prior_mu {
        Some(p) => mu - p,
        None if scalar_mu == 0.0 => mu,
        None => mu.sub_scalar(scalar_mu),
    };
    let var_p = prior_sigma * prior_sigma;
    // Sums first, scalars after: the constants act on one-element tensors, not on every weight
    // (this runs every training step over all weights).
    let quad = (sigma.clone().square() + diff.square()).sum();
    let log_sigma = sigma.log().sum();
    quad.div_scalar(2.0 * var_p) - log_sigma + (n * (prior_sigma.ln() - 0.5))
}
