//! Mean-field Gaussian 2-D convolution.

use burn::config::Config;
use burn::module::{Flag, Param};
use burn::nn::Initializer;
use burn::prelude::*;
use burn::tensor::ops::ConvOptions;

use crate::forward::sigma_of_rho;
use crate::forward::{GaussTensor, bias_gauss, conv2d_forward_stacked};
use crate::{BayesOptions, Estimator, McStack};

/// Configuration of a [`BayesConv2d`] layer.
#[derive(Config, Debug)]
pub struct BayesConv2dConfig {
    /// `[c_in, c_out]`.
    pub channels: [usize; 2],
    /// `[kh, kw]`.
    pub kernel_size: [usize; 2],
    /// Stride.
    #[config(default = "[1, 1]")]
    pub stride: [usize; 2],
    /// Symmetric zero padding `[ph, pw]`.
    #[config(default = "[0, 0]")]
    pub padding: [usize; 2],
    /// Dilation.
    #[config(default = "[1, 1]")]
    pub dilation: [usize; 2],
    /// Groups (`c_in` and `c_out` must be divisible by it).
    #[config(default = 1)]
    pub groups: usize,
    /// Whether the layer has a (Bayesian) bias.
    #[config(default = false)]
    pub bias: bool,
    /// Estimator, sigma initialisation and empirical prior.
    #[config(default = "BayesOptions::new()")]
    pub options: BayesOptions,
}

/// A 2-D convolution whose weights are independent Gaussians `N(mu, softplus(rho)^2)`.
#[derive(Module, Debug)]
pub struct BayesConv2d {
    /// Posterior means, `[c_out, c_in / groups, kh, kw]`.
    pub weight_mu: Param<Tensor<4>>,
    /// Posterior `rho`.
    pub weight_rho: Param<Tensor<4>>,
    /// Bias means.
    pub bias_mu: Option<Param<Tensor<1>>>,
    /// Bias `rho`.
    pub bias_rho: Option<Param<Tensor<1>>>,
    /// Centre of an empirical prior for the weights (not trained).
    pub weight_prior_mu: Option<Param<Tensor<4>>>,
    /// Centre of an empirical prior for the bias (not trained).
    pub bias_prior_mu: Option<Param<Tensor<1>>>,
    /// Stochastic (enabled) or mean (disabled) forward.
    pub sampling: Param<Flag>,
    /// Weight samples per forward pass, one per block of a stacked batch; see
    /// [`crate::set_mc_stack`].
    pub mc_stack: McStack,
    /// Convolution geometry.
    #[module(skip)]
    pub geometry: ConvGeometry,
    /// The forward estimator.
    #[module(skip)]
    pub estimator: Estimator,
}

/// Stride, padding, dilation and groups of a convolution.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub struct ConvGeometry {
    /// Stride.
    pub stride: [usize; 2],
    /// Symmetric padding.
    pub padding: [usize; 2],
    /// Dilation.
    pub dilation: [usize; 2],
    /// Groups.
    pub groups: usize,
}

impl ConvGeometry {
    /// burn's convolution options.
    pub fn options(&self) -> ConvOptions<2> {
        ConvOptions::new(self.stride, self.padding, self.dilation, self.groups)
    }
}

impl BayesConv2dConfig {
    /// The convolution geometry of this configuration.
    pub fn geometry(&self) -> ConvGeometry {
        ConvGeometry {
            stride: self.stride,
            padding: self.padding,
            dilation: self.dilation,
            groups: self.groups,
        }
    }

    /// The weight shape `[c_out, c_in / groups, kh, kw]`.
    pub fn weight_shape(&self) -> [usize; 4] {
        [
            self.channels[1],
            self.channels[0] / self.groups.max(1),
            self.kernel_size[0],
            self.kernel_size[1],
        ]
    }

    /// Creates the layer; means as burn's `Conv2d` default (Kaiming-uniform).
    pub fn init(&self, device: &Device) -> BayesConv2d {
        let shape = self.weight_shape();
        let k = self.kernel_size[0] * self.kernel_size[1];
        let fan_in = shape[1] * k;
        let fan_out = self.channels[1] / self.groups.max(1) * k;
        let init = Initializer::KaimingUniform {
            gain: 1.0 / 3f64.sqrt(),
            fan_out_only: false,
        };
        let weight_mu = init.init_with(shape, Some(fan_in), Some(fan_out), device);
        let weight_rho = self
            .options
            .weight_sigma
            .rho_param(shape, fan_in, fan_out, device);
        let (bias_mu, bias_rho) = if self.bias {
            let c = self.channels[1];
            (
                Some(init.init_with([c], Some(fan_in), Some(fan_out), device)),
                Some(
                    self.options
                        .bias_sigma
                        .rho_param([c], fan_in, fan_out, device),
                ),
            )
        } else {
            (None, None)
        };
        BayesConv2d {
            weight_mu,
            weight_rho,
            bias_mu,
            bias_rho,
            weight_prior_mu: self.options.empirical_prior.then(|| {
                Initializer::Zeros
                    .init(shape, device)
                    .set_require_grad(false)
            }),
            bias_prior_mu: (self.options.empirical_prior && self.bias).then(|| {
                Initializer::Zeros
                    .init([self.channels[1]], device)
                    .set_require_grad(false)
            }),
            sampling: Param::from_bool(true),
            mc_stack: McStack::default(),
            geometry: self.geometry(),
            estimator: self.options.estimator,
        }
    }
}

impl BayesConv2d {
    /// Forward pass, `[batch, c_in, h, w] -> [batch, c_out, h', w']` (`batch = stack * B` with
    /// a Monte-Carlo stack, [`crate::stack`]).
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        conv2d_forward_stacked(
            input,
            self.weight(),
            self.bias(),
            self.geometry.options(),
            self.estimator,
            self.sampling.is_enabled(),
            self.mc_stack.get(),
        )
    }

    /// The weight posterior.
    pub fn weight(&self) -> GaussTensor<4> {
        GaussTensor {
            mu: self.weight_mu.val(),
            sigma: sigma_of_rho(self.weight_rho.val()),
        }
    }

    /// The bias posterior, if any.
    pub fn bias(&self) -> Option<GaussTensor<1>> {
        bias_gauss(&self.bias_mu, &self.bias_rho)
    }
}
