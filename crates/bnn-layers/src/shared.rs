//! The weight-shared parameterisation (the method's stage 3).
//!
//! A layer's weights take their distribution from
//! (a) a global [`Codebook`] of K shared Gaussians `(mu_k, rho_k)`, through an index,
//! (b) per-weight outliers `(mu_i, rho_i)`, or
//! (c) an alpha-blend of up to [`MAX_BLEND`] codebook entries with fixed alphas ("ellipse" weights).
//!
//! Weights share *distributions*, not values: every weight draws its own `eps`,
//! `w_i = mu_k + sigma_k * eps_i`. An ellipse weight uses the moment-matched mixture
//! `m = sum_j a_j mu_j`, `s^2 = sum_j a_j (sigma_j^2 + (mu_j - m)^2)`.
//! All three sources are gathered from one table with `select`, whose backward scatters the
//! gradients back, so the loss's gradient reaches the codebook entries.

use burn::config::Config;
use burn::module::{Flag, Param, ParamId};
use burn::prelude::*;
use burn::tensor::{Int, TensorData};

use crate::conv::ConvGeometry;
use crate::forward::sigma_of_rho;
use crate::forward::{GaussTensor, bias_gauss, conv2d_forward_stacked, linear_forward_stacked};
use crate::{BayesConv2d, BayesLinear, Estimator, LayerError, McStack};

/// Most codebook entries an ellipse weight blends (the paper's k = 5).
pub const MAX_BLEND: usize = 5;

/// The K shared Gaussians, one `(mu_k, rho_k)` pair each, `sigma_k = softplus(rho_k)`.
#[derive(Module, Debug)]
pub struct Codebook {
    /// Shared means.
    pub mu: Param<Tensor<1>>,
    /// Shared `rho`.
    pub rho: Param<Tensor<1>>,
}

/// The codebook's current means and standard deviations, computed once per forward pass.
#[derive(Debug, Clone)]
pub struct CodebookView {
    /// Means, `[K]`.
    pub mu: Tensor<1>,
    /// Standard deviations, `[K]`.
    pub sigma: Tensor<1>,
}

impl Codebook {
    /// A codebook from host values.
    pub fn new(mu: &[f32], rho: &[f32], device: &Device) -> Result<Self, LayerError> {
        if mu.len() != rho.len() || mu.is_empty() {
            return Err(LayerError::LengthMismatch {
                what: "codebook rho".into(),
                expected: mu.len().max(1),
                got: rho.len(),
            });
        }
        check_finite("codebook", mu.iter().chain(rho))?;
        Ok(Self {
            mu: Param::from_tensor(vec_tensor(mu, device)),
            rho: Param::from_tensor(vec_tensor(rho, device)),
        })
    }

    /// Number of shared Gaussians.
    pub fn len(&self) -> usize {
        self.mu.shape().dims::<1>()[0]
    }

    /// Whether the codebook is empty (never true for one built by [`Codebook::new`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Means and standard deviations for this forward pass.
    pub fn view(&self) -> CodebookView {
        CodebookView {
            mu: self.mu.val(),
            sigma: sigma_of_rho(self.rho.val()),
        }
    }
}

/// Where one weight of a shared tensor takes its distribution from (host-side description used
/// to build a [`SharedWeight`]).
#[derive(Debug, Clone, PartialEq)]
pub enum WeightSource {
    /// Shared codebook entry.
    Codebook(u32),
    /// Own trainable `(mu, rho)`.
    Outlier {
        /// Mean.
        mu: f32,
        /// `rho`, `sigma = softplus(rho)`.
        rho: f32,
    },
    /// Fixed alpha-blend of 1 to [`MAX_BLEND`] codebook entries.
    Ellipse {
        /// Codebook entries.
        components: Vec<u32>,
        /// Blend weights (normalised on construction).
        alphas: Vec<f32>,
    },
}

/// One weight tensor in the shared parameterisation.
#[derive(Module, Debug)]
pub struct SharedWeight {
    /// Per weight, an index into `[codebook | outliers | ellipses]`.
    pub index: Param<Tensor<1, Int>>,
    /// Outlier means.
    pub outlier_mu: Option<Param<Tensor<1>>>,
    /// Outlier `rho`.
    pub outlier_rho: Option<Param<Tensor<1>>>,
    /// Ellipse components, `[E * MAX_BLEND]` (padding has alpha 0).
    pub ellipse_components: Option<Param<Tensor<1, Int>>>,
    /// Ellipse alphas, `[E * MAX_BLEND]`, fixed.
    pub ellipse_alphas: Option<Param<Tensor<1>>>,
    /// Centre of an empirical prior, per weight (not trained).
    pub prior_mu: Option<Param<Tensor<1>>>,
    /// Shape of the weight tensor.
    #[module(skip)]
    pub shape: Vec<usize>,
}

impl SharedWeight {
    /// Builds a shared weight of `shape` from one [`WeightSource`] per weight (row-major).
    pub fn new(
        shape: &[usize],
        sources: &[WeightSource],
        codebook_len: usize,
        device: &Device,
    ) -> Result<Self, LayerError> {
        let n: usize = shape.iter().product();
        if sources.len() != n {
            return Err(LayerError::LengthMismatch {
                what: "shared weight sources".into(),
                expected: n,
                got: sources.len(),
            });
        }
        let (mut out_mu, mut out_rho) = (Vec::new(), Vec::new());
        let (mut comps, mut alphas) = (Vec::new(), Vec::new());
        for (i, s) in sources.iter().enumerate() {
            match s {
                WeightSource::Codebook(k) => check_index(i, *k, codebook_len)?,
                WeightSource::Outlier { mu, rho } => {
                    if !mu.is_finite() || !rho.is_finite() {
                        return Err(LayerError::NonFinite {
                            what: "outlier".into(),
                            index: i,
                        });
                    }
                    out_mu.push(*mu);
                    out_rho.push(*rho);
                }
                WeightSource::Ellipse {
                    components,
                    alphas: a,
                } => {
                    let blend = normalise_blend(i, components, a, codebook_len)?;
                    for (k, alpha) in blend {
                        comps.push(k as i64);
                        alphas.push(alpha);
                    }
                }
            }
        }
        let (n_out, n_ell) = (out_mu.len(), comps.len() / MAX_BLEND);
        let (mut next_out, mut next_ell) = (codebook_len, codebook_len + n_out);
        let index: Vec<i64> = sources
            .iter()
            .map(|s| match s {
                WeightSource::Codebook(k) => *k as i64,
                WeightSource::Outlier { .. } => {
                    next_out += 1;
                    (next_out - 1) as i64
                }
                WeightSource::Ellipse { .. } => {
                    next_ell += 1;
                    (next_ell - 1) as i64
                }
            })
            .collect();
        let int_param = |v: Vec<i64>| {
            let len = v.len();
            Param::initialized(
                ParamId::new(),
                Tensor::<1, Int>::from_data(TensorData::new(v, [len]), device),
            )
        };
        Ok(Self {
            index: int_param(index),
            outlier_mu: (n_out > 0).then(|| Param::from_tensor(vec_tensor(&out_mu, device))),
            outlier_rho: (n_out > 0).then(|| Param::from_tensor(vec_tensor(&out_rho, device))),
            ellipse_components: (n_ell > 0).then(|| int_param(comps)),
            ellipse_alphas: (n_ell > 0)
                .then(|| Param::from_tensor(vec_tensor(&alphas, device)).set_require_grad(false)),
            prior_mu: None,
            shape: shape.to_vec(),
        })
    }

    /// Number of weights.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Number of outlier weights.
    pub fn num_outliers(&self) -> usize {
        self.outlier_mu
            .as_ref()
            .map_or(0, |p| p.shape().dims::<1>()[0])
    }

    /// Number of ellipse weights.
    pub fn num_ellipses(&self) -> usize {
        self.ellipse_alphas
            .as_ref()
            .map_or(0, |p| p.shape().dims::<1>()[0] / MAX_BLEND)
    }

    /// Per-weight means and standard deviations, flat in row-major order.
    pub fn gather(&self, codebook: &CodebookView) -> GaussTensor<1> {
        let outliers = match (&self.outlier_mu, &self.outlier_rho) {
            (Some(mu), Some(rho)) => Some((mu.val(), rho.val())),
            _ => None,
        };
        let ellipses = match (&self.ellipse_components, &self.ellipse_alphas) {
            (Some(c), Some(a)) => Some((c.val(), a.val())),
            _ => None,
        };
        gather_sources(codebook, outliers, ellipses, self.index.val())
    }

    /// The per-weight distributions reshaped to the weight tensor's rank `D`.
    pub fn gather_shaped<const D: usize>(&self, codebook: &CodebookView) -> GaussTensor<D> {
        let g = self.gather(codebook);
        let mut shape = [1usize; D];
        for (d, s) in shape.iter_mut().zip(&self.shape) {
            *d = *s;
        }
        GaussTensor {
            mu: g.mu.reshape(shape),
            sigma: g.sigma.reshape(shape),
        }
    }
}

/// The per-weight distributions of a shared tensor: a gather from the table
/// `[codebook | outliers | ellipse blends]` with `index`. Outliers come as `(mu, rho)`,
/// ellipses as flat `[E * MAX_BLEND]` components and alphas, blended by moment matching.
pub(crate) fn gather_sources(
    codebook: &CodebookView,
    outliers: Option<(Tensor<1>, Tensor<1>)>,
    ellipses: Option<(Tensor<1, Int>, Tensor<1>)>,
    index: Tensor<1, Int>,
) -> GaussTensor<1> {
    let mut mus = vec![codebook.mu.clone()];
    let mut sigmas = vec![codebook.sigma.clone()];
    if let Some((mu, rho)) = outliers {
        mus.push(mu);
        sigmas.push(sigma_of_rho(rho));
    }
    if let Some((comps, alphas)) = ellipses {
        let e = comps.dims()[0] / MAX_BLEND;
        let a = alphas.reshape([e, MAX_BLEND]);
        let pick = |t: &Tensor<1>| t.clone().select(0, comps.clone()).reshape([e, MAX_BLEND]);
        let (m, s) = (pick(&codebook.mu), pick(&codebook.sigma));
        let mean = (a.clone() * m.clone()).sum_dim(1);
        let var = (a * (s.square() + (m - mean.clone()).square())).sum_dim(1);
        mus.push(mean.reshape([e]));
        sigmas.push(var.clamp_min(1e-30).sqrt().reshape([e]));
    }
    GaussTensor {
        mu: Tensor::cat(mus, 0).select(0, index.clone()),
        sigma: Tensor::cat(sigmas, 0).select(0, index),
    }
}

/// A dense layer whose weights are shared ([`SharedWeight`]); the bias stays per-weight Bayesian.
#[derive(Module, Debug)]
pub struct SharedLinear {
    /// The shared weight, shape `[d_input, d_output]`.
    pub weight: SharedWeight,
    /// Bias means.
    pub bias_mu: Option<Param<Tensor<1>>>,
    /// Bias `rho`.
    pub bias_rho: Option<Param<Tensor<1>>>,
    /// Centre of an empirical prior for the bias.
    pub bias_prior_mu: Option<Param<Tensor<1>>>,
    /// Stochastic (enabled) or mean (disabled) forward.
    pub sampling: Param<Flag>,
    /// Weight samples per forward pass, one per block of a stacked batch; see
    /// [`crate::set_mc_stack`].
    pub mc_stack: McStack,
    /// The forward estimator.
    #[module(skip)]
    pub estimator: Estimator,
}

impl SharedLinear {
    /// Shares the weights of a Bayesian layer; the bias is kept.
    pub fn from_bayes(
        layer: &BayesLinear,
        sources: &[WeightSource],
        codebook_len: usize,
    ) -> Result<Self, LayerError> {
        let device = layer.weight_mu.device();
        let shape = layer.weight_mu.shape().dims::<2>();
        let mut weight = SharedWeight::new(&shape, sources, codebook_len, &device)?;
        weight.prior_mu = layer.weight_prior_mu.as_ref().map(|p| {
            Param::from_tensor(p.val().reshape([shape[0] * shape[1]])).set_require_grad(false)
        });
        Ok(Self {
            weight,
            bias_mu: layer.bias_mu.as_ref().map(|p| Param::from_tensor(p.val())),
            bias_rho: layer.bias_rho.as_ref().map(|p| Param::from_tensor(p.val())),
            bias_prior_mu: layer
                .bias_prior_mu
                .as_ref()
                .map(|p| Param::from_tensor(p.val()).set_require_grad(false)),
            sampling: Param::from_bool(true),
            mc_stack: McStack::default(),
            estimator: layer.estimator,
        })
    }

    /// Forward pass with the codebook's current view.
    pub fn forward<const D: usize>(&self, input: Tensor<D>, codebook: &CodebookView) -> Tensor<D> {
        linear_forward_stacked(
            input,
            self.weight.gather_shaped::<2>(codebook),
            bias_gauss(&self.bias_mu, &self.bias_rho),
            self.estimator,
            self.sampling.is_enabled(),
            self.mc_stack.get(),
        )
    }
}

/// A 2-D convolution whose weights are shared; the bias stays per-weight Bayesian.
#[derive(Module, Debug)]
pub struct SharedConv2d {
    /// The shared weight, shape `[c_out, c_in / groups, kh, kw]`.
    pub weight: SharedWeight,
    /// Bias means.
    pub bias_mu: Option<Param<Tensor<1>>>,
    /// Bias `rho`.
    pub bias_rho: Option<Param<Tensor<1>>>,
    /// Centre of an empirical prior for the bias.
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

impl SharedConv2d {
    /// Shares the weights of a Bayesian convolution; the bias is kept.
    pub fn from_bayes(
        layer: &BayesConv2d,
        sources: &[WeightSource],
        codebook_len: usize,
    ) -> Result<Self, LayerError> {
        let device = layer.weight_mu.device();
        let shape = layer.weight_mu.shape().dims::<4>();
        let mut weight = SharedWeight::new(&shape, sources, codebook_len, &device)?;
        let n: usize = shape.iter().product();
        weight.prior_mu = layer
            .weight_prior_mu
            .as_ref()
            .map(|p| Param::from_tensor(p.val().reshape([n])).set_require_grad(false));
        Ok(Self {
            weight,
            bias_mu: layer.bias_mu.as_ref().map(|p| Param::from_tensor(p.val())),
            bias_rho: layer.bias_rho.as_ref().map(|p| Param::from_tensor(p.val())),
            bias_prior_mu: layer
                .bias_prior_mu
                .as_ref()
                .map(|p| Param::from_tensor(p.val()).set_require_grad(false)),
            sampling: Param::from_bool(true),
            mc_stack: McStack::default(),
            geometry: layer.geometry,
            estimator: layer.estimator,
        })
    }

    /// Forward pass with the codebook's current view.
    pub fn forward(&self, input: Tensor<4>, codebook: &CodebookView) -> Tensor<4> {
        conv2d_forward_stacked(
            input,
            self.weight.gather_shaped::<4>(codebook),
            bias_gauss(&self.bias_mu, &self.bias_rho),
            self.geometry.options(),
            self.estimator,
            self.sampling.is_enabled(),
            self.mc_stack.get(),
        )
    }
}

/// Options of a shared model's codebook, kept with the architecture config.
#[derive(Config, Debug)]
pub struct CodebookConfig {
    /// Number of shared Gaussians.
    pub len: usize,
}

fn vec_tensor(v: &[f32], device: &Device) -> Tensor<1> {
    Tensor::from_data(TensorData::new(v.to_vec(), [v.len()]), device)
}

fn check_finite<'a>(what: &str, values: impl Iterator<Item = &'a f32>) -> Result<(), LayerError> {
    for (i, v) in values.enumerate() {
        if !v.is_finite() {
            return Err(LayerError::NonFinite {
                what: what.into(),
                index: i,
            });
        }
    }
    Ok(())
}

fn check_index(weight: usize, index: u32, len: usize) -> Result<(), LayerError> {
    if (index as usize) < len {
        Ok(())
    } else {
        Err(LayerError::CodebookIndex { weight, index, len })
    }
}

/// Validates an ellipse blend and pads it to [`MAX_BLEND`] entries with zero alphas.
fn normalise_blend(
    weight: usize,
    components: &[u32],
    alphas: &[f32],
    len: usize,
) -> Result<[(u32, f32); MAX_BLEND], LayerError> {
    let bad = |reason: String| LayerError::InvalidBlend { weight, reason };
    if components.is_empty() || components.len() > MAX_BLEND {
        return Err(bad(format!(
            "{} components (1..={MAX_BLEND} allowed)",
            components.len()
        )));
    }
    if alphas.len() != components.len() {
        return Err(bad(format!(
            "{} alphas for {} components",
            alphas.len(),
            components.len()
        )));
    }
    let total: f32 = alphas.iter().sum();
    if alphas.iter().any(|a| !a.is_finite() || *a < 0.0) || total <= 0.0 || !total.is_finite() {
        return Err(bad(format!(
            "alphas {alphas:?} must be finite, >= 0 and not all 0"
        )));
    }
    let mut out = [(0u32, 0f32); MAX_BLEND];
    for (slot, (&k, &a)) in out.iter_mut().zip(components.iter().zip(alphas)) {
        check_index(weight, k, len)?;
        *slot = (k, a / total);
    }
    Ok(out)
}
