//! Mean-field Gaussian dense layer.

use burn::config::Config;
use burn::module::{Flag, Param};
use burn::nn::{Initializer, Linear};
use burn::prelude::*;

use crate::forward::sigma_of_rho;
use crate::forward::{GaussTensor, bias_gauss, linear_forward_stacked};
use crate::{BayesOptions, Estimator, McStack};

/// Configuration of a [`BayesLinear`] layer.
#[derive(Config, Debug)]
pub struct BayesLinearConfig {
    /// Input features.
    pub d_input: usize,
    /// Output features.
    pub d_output: usize,
    /// Whether the layer has a (Bayesian) bias.
    #[config(default = true)]
    pub bias: bool,
    /// Estimator, sigma initialisation and empirical prior.
    #[config(default = "BayesOptions::new()")]
    pub options: BayesOptions,
}

/// A dense layer whose weights are independent Gaussians `N(mu, softplus(rho)^2)`.
///
/// Parameter names end in `_mu` / `_rho`; the weight-sharing stages rely on that convention.
#[derive(Module, Debug)]
pub struct BayesLinear {
    /// Posterior means, `[d_input, d_output]`.
    pub weight_mu: Param<Tensor<2>>,
    /// Posterior `rho`, `sigma = softplus(rho)`.
    pub weight_rho: Param<Tensor<2>>,
    /// Bias means.
    pub bias_mu: Option<Param<Tensor<1>>>,
    /// Bias `rho`.
    pub bias_rho: Option<Param<Tensor<1>>>,
    /// Centre of an empirical prior for the weights (not trained).
    pub weight_prior_mu: Option<Param<Tensor<2>>>,
    /// Centre of an empirical prior for the bias (not trained).
    pub bias_prior_mu: Option<Param<Tensor<1>>>,
    /// Stochastic (enabled) or mean (disabled) forward; see [`crate::set_sampling`].
    pub sampling: Param<Flag>,
    /// Weight samples per forward pass, one per block of a stacked batch; see
    /// [`crate::set_mc_stack`].
    pub mc_stack: McStack,
    /// The forward estimator.
    #[module(skip)]
    pub estimator: Estimator,
}

impl BayesLinearConfig {
    /// Creates the layer: means as burn's `Linear` (Kaiming-uniform, `U(-1/sqrt(d_in), 1/sqrt(d_in))`),
    /// sigmas as configured.
    pub fn init(&self, device: &Device) -> BayesLinear {
        let init = Initializer::KaimingUniform {
            gain: 1.0 / 3f64.sqrt(),
            fan_out_only: false,
        };
        let (fi, fo) = (self.d_input, self.d_output);
        let weight_mu = init.init_with([fi, fo], Some(fi), Some(fo), device);
        let weight_rho = self
            .options
            .weight_sigma
            .rho_param([fi, fo], fi, fo, device);
        let (bias_mu, bias_rho) = if self.bias {
            (
                Some(init.init_with([fo], Some(fi), Some(fo), device)),
                Some(self.options.bias_sigma.rho_param([fo], fi, fo, device)),
            )
        } else {
            (None, None)
        };
        BayesLinear {
            weight_mu,
            weight_rho,
            bias_mu,
            bias_rho,
            weight_prior_mu: self.options.empirical_prior.then(|| {
                Initializer::Zeros
                    .init([fi, fo], device)
                    .set_require_grad(false)
            }),
            bias_prior_mu: (self.options.empirical_prior && self.bias).then(|| {
                Initializer::Zeros
                    .init([fo], device)
                    .set_require_grad(false)
            }),
            sampling: Param::from_bool(true),
            mc_stack: McStack::default(),
            estimator: self.options.estimator,
        }
    }
}

impl BayesLinear {
    /// Forward pass; `input` is `[..., d_input]` (`[stack * B, ..., d_input]` with a
    /// Monte-Carlo stack, [`crate::stack`]).
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        linear_forward_stacked(
            input,
            self.weight(),
            self.bias(),
            self.estimator,
            self.sampling.is_enabled(),
            self.mc_stack.get(),
        )
    }

    /// The weight posterior.
    pub fn weight(&self) -> GaussTensor<2> {
        GaussTensor {
            mu: self.weight_mu.val(),
            sigma: sigma_of_rho(self.weight_rho.val()),
        }
    }

    /// The bias posterior, if any.
    pub fn bias(&self) -> Option<GaussTensor<1>> {
        bias_gauss(&self.bias_mu, &self.bias_rho)
    }

    /// The mean network as a deterministic `Linear`.
    pub fn to_mean_linear(&self) -> Linear {
        Linear {
            weight: Param::from_tensor(self.weight_mu.val()),
            bias: self.bias_mu.as_ref().map(|b| Param::from_tensor(b.val())),
        }
    }

    /// A Bayesian twin of a trained `Linear`: `mu <- weights`, sigmas from `config`.
    pub fn from_linear(linear: &Linear, config: &BayesLinearConfig, device: &Device) -> Self {
        let mut layer = config.init(device);
        layer.weight_mu = Param::from_tensor(linear.weight.val());
        if let (Some(b), true) = (&linear.bias, layer.bias_mu.is_some()) {
            layer.bias_mu = Some(Param::from_tensor(b.val()));
        }
        layer
    }
}
