//! Bayesian and weight-shared layers for [burn](https://burn.dev) 0.22.
//!
//! - [`BayesLinear`] and [`BayesConv2d`]: mean-field Gaussian posteriors `N(mu, softplus(rho)^2)`
//!   with a choice of [`Estimator`] (reparameterisation, local reparameterisation, Flipout).
//! - [`SharedLinear`] and [`SharedConv2d`]: the weight-shared parameterisation of stochastic
//!   weight sharing (2DGBNN): weights draw from a global [`Codebook`], from their own outlier
//!   parameters, or from an alpha-blend of codebook entries.
//! - [`kl_divergence`] collects the model's closed-form KL through burn's `ModuleVisitor`; the
//!   layers' `forward` returns only the output, so they drop into any model. [`ElboConfig`] puts
//!   the two together with documented scaling.
//! - [`export_bayes`] exports every Bayesian tensor's `(mu, sigma)` (and `d loss / d mu`) in a
//!   stable order; [`bayes_from_deterministic`] / [`deterministic_from_bayes`] convert models.
//! - [`set_sampling`] switches between stochastic and mean forward; [`set_mc_stack`] makes
//!   every forward draw several weight samples at once, one per block of a stacked batch
//!   (Monte-Carlo stacking, [`stack`]).
//!
//! ```
//! use bnn_layers::{BayesLinearConfig, Prior, kl_divergence, set_sampling, test_device};
//! use burn::prelude::*;
//!
//! let device = test_device();
//! let layer = BayesLinearConfig::new(4, 3).init(&device);
//! let x = Tensor::<2>::ones([2, 4], &device);
//! let a = layer.forward(x.clone());
//! let b = layer.forward(x.clone());
//! assert_eq!(a.dims(), [2, 3]);
//! // Stochastic by default: two passes differ.
//! assert!((a - b).abs().sum().into_scalar::<f32>() > 0.0);
//! // Mean mode is deterministic.
//! let layer = set_sampling(layer, false);
//! let d = (layer.forward(x.clone()) - layer.forward(x)).abs().sum().into_scalar::<f32>();
//! assert_eq!(d, 0.0);
//! let kl = kl_divergence(&layer, &Prior::default()).unwrap();
//! assert!(kl.into_scalar::<f32>() > 0.0);
//! ```
#![warn(missing_docs)]

mod conv;
mod convert;
mod device;
mod elbo;
mod error;
mod estimator;
pub mod flexops;
pub mod forward;
pub mod gpu_cache;
mod init;
mod linear;
pub mod noise;
mod options;
mod prior;
mod shared;
pub mod stack;
mod visit;

pub use conv::{BayesConv2d, BayesConv2dConfig, ConvGeometry};
pub use convert::{
    NamedTensor, bayes_from_deterministic, deterministic_from_bayes, export_params, import_params,
    shared_from_bayes,
};
#[cfg(feature = "cuda")]
pub use device::cuda_compiler;
pub use device::{
    available_backends, backend_name, device_by_name, is_gpu_name, lock_device_rng, test_device,
};
pub use elbo::{ElboConfig, KlSchedule};
pub use error::LayerError;
pub use estimator::Estimator;
pub use gpu_cache::{GpuCache, KernelCounts, gpu_cache, kernel_counts};
pub use init::{SigmaInit, inverse_softplus, softplus};
pub use linear::{BayesLinear, BayesLinearConfig};
pub use options::BayesOptions;
pub use prior::{Prior, SharedKl, kl_gaussian_each, kl_gaussian_sum};
pub use shared::{
    Codebook, CodebookConfig, CodebookView, MAX_BLEND, SharedConv2d, SharedLinear, SharedWeight,
    WeightSource,
};
pub use stack::{MAX_MC_STACK, McStack, set_mc_stack};
pub use visit::{
    BayesTensor, ModulePath, ParamCounts, ParamRole, count_params, export_bayes, export_posterior,
    kl_divergence, kl_divergence_with, set_sampling,
};
