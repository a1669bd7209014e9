//! The stochastic forward passes shared by Bayesian and weight-shared layers.
//!
//! Both kinds end up with a per-weight mean and standard deviation tensor; only where those come
//! from differs (own parameters, or a gather from a shared codebook), so the estimators live here
//! once.

use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::module::linear;
use burn::tensor::ops::ConvOptions;

use crate::Estimator;
use crate::flexops::conv2d;
use crate::noise::standard_normal;

/// Added under square roots of variances so their gradient stays finite at zero.
const VAR_EPS: f64 = 1e-16;

/// A Gaussian tensor: elementwise mean and standard deviation.
#[derive(Debug, Clone)]
pub struct GaussTensor<const D: usize> {
    /// Means.
    pub mu: Tensor<D>,
    /// Standard deviations (positive).
    pub sigma: Tensor<D>,
}

impl<const D: usize> GaussTensor<D> {
    /// One draw `mu + sigma * eps`, `eps ~ N(0, I)`.
    pub fn sample(&self) -> Tensor<D> {
        let eps = standard_normal(self.mu.dims(), &self.mu.device());
        self.mu.clone() + self.sigma.clone() * eps
    }

    /// `stack` draws at once, concatenated along dimension 0: `[stack * d0, ...]`, draw `s` in
    /// rows `s * d0 .. (s + 1) * d0`, from one noise draw of that shape. `stack == 1` is
    /// [`Self::sample`].
    pub fn sample_stacked(&self, stack: usize) -> Tensor<D> {
        if stack <= 1 {
            return self.sample();
        }
        let sigma = self.sigma.clone().repeat_dim(0, stack);
        let eps = standard_normal(sigma.dims(), &sigma.device());
        self.mu.clone().repeat_dim(0, stack) + sigma * eps
    }
}

/// `sigma = softplus(rho) = ln(1 + e^rho)`.
///
/// On flex it is [`crate::flexops::softplus()`], one vectorised operation with a fused backward
/// (`-log_sigmoid(-rho)` when the kernels are switched off), while burn's softplus is composed of
/// seven element-wise operations, each with its own backward. On the MLP's 318k weights,
/// computed twice per step (forward and KL), that difference is a large part of a Bayesian step
/// on CPU.
/// Other backends use burn's `softplus` above `rho = -4` and, below, the series
/// `ln(1 + y) = y (1 - y/2 + y^2/3 - y^3/4)`, `y = e^rho` (relative error under `y^4 / 5 < 2.3e-8`).
/// burn's softplus computes `ln(1 + e^rho)` there, and on wgpu the rounding of `1 + e^rho` to f32
/// costs `~6e-8 / e^rho` relative error: 0.9 % at `rho = -12`, a typical trained value, and `sigma`
/// rounded to 0 (an infinite KL) below `rho` of about -16.6 (both measured on lavapipe).
pub fn sigma_of_rho<const D: usize>(rho: Tensor<D>) -> Tensor<D> {
    if crate::noise::is_flex(&rho.device()) {
        crate::flexops::softplus(rho)
    } else {
        let small = rho.clone().lower_elem(SMALL_RHO);
        // Clamped so the unused branch stays finite: its gradient is masked to 0, and
        // 0 * inf would be NaN.
        let y = rho.clone().clamp_max(SMALL_RHO).exp();
        // Horner form of 1 - y (1/2 - y (1/3 - y/4)).
        let a = y.clone().mul_scalar(-0.25).add_scalar(1.0 / 3.0);
        let b = (y.clone() * a).neg().add_scalar(0.5);
        let c = (y.clone() * b).neg().add_scalar(1.0);
        burn::tensor::activation::softplus(rho, 1.0).mask_where(small, y * c)
    }
}

/// Below this `rho`, [`sigma_of_rho`] uses the series of `ln(1 + e^rho)` on backends other
/// than flex.
const SMALL_RHO: f64 = -4.0;

/// The Gaussian of an optional Bayesian bias, `sigma = softplus(rho)`.
pub fn bias_gauss(
    mu: &Option<burn::module::Param<Tensor<1>>>,
    rho: &Option<burn::module::Param<Tensor<1>>>,
) -> Option<GaussTensor<1>> {
    match (mu, rho) {
        (Some(mu), Some(rho)) => Some(GaussTensor {
            mu: mu.val(),
            sigma: sigma_of_rho(rho.val()),
        }),
        _ => None,
    }
}

fn random_signs<const D: usize>(shape: [usize; D], device: &Device) -> Tensor<D> {
    if let Some(t) = crate::noise::from_source(shape, device) {
        return t
            .greater_equal_elem(0.0)
            .float()
            .mul_scalar(2.0)
            .sub_scalar(1.0);
    }
    Tensor::random(shape, Distribution::Bernoulli(0.5), device)
        .mul_scalar(2.0)
        .sub_scalar(1.0)
}

/// Dense layer forward. `weight` is `[d_input, d_output]` (burn's layout); `input` is
/// `[..., d_input]`. With `sample == false` the mean network is used.
pub fn linear_forward<const D: usize>(
    input: Tensor<D>,
    weight: GaussTensor<2>,
    bias: Option<GaussTensor<1>>,
    estimator: Estimator,
    sample: bool,
) -> Tensor<D> {
    if !sample {
        return linear(input, weight.mu, bias.map(|b| b.mu));
    }
    match estimator {
        Estimator::Reparameterization => linear(input, weight.sample(), bias.map(|b| b.sample())),
        Estimator::LocalReparameterization => {
            let mean = linear(
                input.clone(),
                weight.mu,
                bias.as_ref().map(|b| b.mu.clone()),
            );
            let var = linear(
                input.square(),
                weight.sigma.square(),
                bias.map(|b| b.sigma.square()),
            );
            let eps = standard_normal(mean.dims(), &mean.device());
            mean + var.add_scalar(VAR_EPS).sqrt() * eps
        }
        Estimator::Flipout => {
            let dims = input.dims();
            let d_in = dims[D - 1];
            let rows = dims[..D - 1].iter().product::<usize>();
            let d_out = weight.mu.dims()[1];
            let device = input.device();
            let x2: Tensor<2> = input.reshape([rows, d_in]);
            let mean = linear(
                x2.clone(),
                weight.mu.clone(),
                bias.as_ref().map(|b| b.sample()),
            );
            let delta = weight.sigma.clone() * standard_normal(weight.sigma.dims(), &device);
            let s_in = random_signs([rows, d_in], &device);
            let s_out = random_signs([rows, d_out], &device);
            let perturb = linear(x2 * s_in, delta, None) * s_out;
            let mut out_dims = dims;
            out_dims[D - 1] = d_out;
            (mean + perturb).reshape(out_dims)
        }
    }
}

/// 2-D convolution forward; `weight` is `[c_out, c_in / groups, kh, kw]`. The convolutions run
/// through [`crate::flexops::conv2d`].
pub fn conv2d_forward(
    input: Tensor<4>,
    weight: GaussTensor<4>,
    bias: Option<GaussTensor<1>>,
    options: ConvOptions<2>,
    estimator: Estimator,
    sample: bool,
) -> Tensor<4> {
    if !sample {
        return conv2d(input, weight.mu, bias.map(|b| b.mu), options);
    }
    match estimator {
        Estimator::Reparameterization => {
            conv2d(input, weight.sample(), bias.map(|b| b.sample()), options)
        }
        Estimator::LocalReparameterization => {
            let mean = conv2d(
                input.clone(),
                weight.mu,
                bias.as_ref().map(|b| b.mu.clone()),
                options.clone(),
            );
            let var = conv2d(
                input.square(),
                weight.sigma.square(),
                bias.map(|b| b.sigma.square()),
                options,
            );
            let eps = standard_normal(mean.dims(), &mean.device());
            mean + var.add_scalar(VAR_EPS).sqrt() * eps
        }
        Estimator::Flipout => {
            let [batch, c_in, _, _] = input.dims();
            let c_out = weight.mu.dims()[0];
            let device = input.device();
            let mean = conv2d(
                input.clone(),
                weight.mu,
                bias.as_ref().map(|b| b.sample()),
                options.clone(),
            );
            let delta = weight.sigma.clone() * standard_normal(weight.sigma.dims(), &device);
            let s_in = random_signs([batch, c_in, 1, 1], &device);
            let s_out = random_signs([batch, c_out, 1, 1], &device);
            mean + conv2d(input * s_in, delta, None, options) * s_out
        }
    }
}

/// [`linear_forward`] on a stacked batch ([`crate::stack`]): `input` is `[stack * B, ..., d_input]`
/// and rows `s * B .. (s + 1) * B` get weight sample `s`, all `stack` samples drawn at once and
/// applied in one batched matmul. Each draw comes in the order of the per-sample forward (bias
/// before weight perturbation for Flipout, weight before bias otherwise). `stack <= 1`, a mean
/// forward, and local reparameterisation (whose noise is per output, so batch-agnostic) are
/// [`linear_forward`] itself.
///
/// # Panics
/// If the batch is not a multiple of `stack`.
pub fn linear_forward_stacked<const D: usize>(
    input: Tensor<D>,
    weight: GaussTensor<2>,
    bias: Option<GaussTensor<1>>,
    estimator: Estimator,
    sample: bool,
    stack: usize,
) -> Tensor<D> {
    if !sample || stack <= 1 || estimator == Estimator::LocalReparameterization {
        return linear_forward(input, weight, bias, estimator, sample);
    }
    let dims = input.dims();
    let [d_in, d_out] = weight.mu.dims();
    let rows =
        crate::stack::rows_per_sample(dims[0], stack) * dims[1..D - 1].iter().product::<usize>();
    let x: Tensor<3> = input.reshape([stack, rows, d_in]);
    let bias_rows = |b: &GaussTensor<1>| b.sample_stacked(stack).reshape([stack, 1, d_out]);
    let y = if estimator == Estimator::Flipout {
        let device = x.device();
        let mut mean = linear(x.clone(), weight.mu, None);
        if let Some(b) = &bias {
            mean = mean + bias_rows(b);
        }
        let sigma = weight.sigma.repeat_dim(0, stack);
        let delta =
            (sigma.clone() * standard_normal(sigma.dims(), &device)).reshape([stack, d_in, d_out]);
        let s_in: Tensor<3> =
            random_signs([stack * rows, d_in], &device).reshape([stack, rows, d_in]);
        let s_out: Tensor<3> =
            random_signs([stack * rows, d_out], &device).reshape([stack, rows, d_out]);
        mean + (x * s_in).matmul(delta) * s_out
    } else {
        let w = weight.sample_stacked(stack).reshape([stack, d_in, d_out]);
        let y = x.matmul(w);
        match &bias {
            Some(b) => y + bias_rows(b),
            None => y,
        }
    };
    let mut out_dims = dims;
    out_dims[D - 1] = d_out;
    y.reshape(out_dims)
}

/// `[stack * B, C, H, W]` (sample-major) to `[B, stack * C, H, W]`, the input of a convolution
/// with one group per sample.
fn to_groups(x: Tensor<4>, stack: usize) -> Tensor<4> {
    let [rows, c, h, w] = x.dims();
    let b = rows / stack;
    x.reshape([stack, b, c, h, w])
        .swap_dims(0, 1)
        .reshape([b, stack * c, h, w])
}

/// The inverse of [`to_groups`] on a convolution's output.
fn from_groups(y: Tensor<4>, stack: usize) -> Tensor<4> {
    let [b, sc, h, w] = y.dims();
    let c = sc / stack;
    y.reshape([b, stack, c, h, w])
        .swap_dims(0, 1)
        .reshape([stack * b, c, h, w])
}

/// [`conv2d_forward`] on a stacked batch ([`crate::stack`]): `input` is `[stack * B, c_in, h, w]`
/// and rows `s * B .. (s + 1) * B` get weight sample `s`. The `stack` weight samples
/// `[stack * c_out, c_in / groups, kh, kw]` are applied in one convolution with `stack * groups`
/// groups on the input rearranged to `[B, stack * c_in, h, w]`. Draw order, `stack <= 1`, mean
/// forward and local reparameterisation as [`linear_forward_stacked`].
///
/// # Panics
/// If the batch is not a multiple of `stack`.
pub fn conv2d_forward_stacked(
    input: Tensor<4>,
    weight: GaussTensor<4>,
    bias: Option<GaussTensor<1>>,
    options: ConvOptions<2>,
    estimator: Estimator,
    sample: bool,
    stack: usize,
) -> Tensor<4> {
    if !sample || stack <= 1 || estimator == Estimator::LocalReparameterization {
        return conv2d_forward(input, weight, bias, options, estimator, sample);
    }
    let [rows, c_in, _, _] = input.dims();
    let b = crate::stack::rows_per_sample(rows, stack);
    let c_out = weight.mu.dims()[0];
    let mut grouped = options.clone();
    grouped.groups *= stack;
    if estimator == Estimator::Flipout {
        let device = input.device();
        let bias = bias.map(|g| g.sample_stacked(stack));
        let mut mean = conv2d(input.clone(), weight.mu, None, options);
        if let Some(bias) = bias {
            let [_, _, oh, ow] = mean.dims();
            mean = (mean.reshape([stack, b, c_out, oh, ow])
                + bias.reshape([stack, 1, c_out, 1, 1]))
            .reshape([rows, c_out, oh, ow]);
        }
        let sigma = weight.sigma.repeat_dim(0, stack);
        let delta = sigma.clone() * standard_normal(sigma.dims(), &device);
        let s_in = random_signs([rows, c_in, 1, 1], &device);
        let s_out = random_signs([rows, c_out, 1, 1], &device);
        let perturb = conv2d(to_groups(input * s_in, stack), delta, None, grouped);
        mean + from_groups(perturb, stack) * s_out
    } else {
        let w = weight.sample_stacked(stack);
        let bias = bias.map(|g| g.sample_stacked(stack));
        from_groups(conv2d(to_groups(input, stack), w, bias, grouped), stack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigma_of_rho_is_softplus_over_the_whole_range() {
        let device = crate::test_device();
        let rho: Vec<f32> = vec![
            -40.0, -25.0, -18.0, -12.0, -8.0, -6.0, -4.5, -4.0, -3.5, -1.0, 0.0, 1.0, 5.0, 20.0,
            40.0,
        ];
        let sigma = sigma_of_rho(Tensor::<1>::from_floats(rho.as_slice(), &device))
            .into_data()
            .convert::<f32>()
            .try_to_vec::<f32>()
            .unwrap();
        for (&r, &s) in rho.iter().zip(&sigma) {
            let want = crate::softplus(r as f64);
            assert!(
                s > 0.0,
                "sigma({r}) = {s} must stay positive (KL takes its log)"
            );
            assert!(
                ((s as f64 - want) / want).abs() < 1e-5,
                "sigma({r}) = {s}, softplus = {want}"
            );
        }
    }
}
