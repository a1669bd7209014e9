//! Initialisation of the posterior's standard deviations.

use burn::config::Config;
use burn::module::{Param, ParamId};
use burn::prelude::*;
use burn::tensor::{Distribution, TensorData};

/// Smallest sigma an initialiser produces; keeps `rho = softplus^-1(sigma)` finite.
pub const MIN_INIT_SIGMA: f64 = 1e-8;

/// How the posterior standard deviations `sigma = softplus(rho)` start.
///
/// A draw `d` from the chosen distribution maps to `sigma = max(|d|, 1e-8)` and then to
/// `rho = ln(exp(sigma) - 1)`, computed in `f64` on the host (the series `ln(sigma) + sigma/2`
/// below 1e-4, where `exp(sigma) - 1` loses precision).
#[derive(Config, Debug, Copy, PartialEq)]
pub enum SigmaInit {
    /// `|U(-a, a)|` with `a = gain * sqrt(6 / (fan_in + fan_out))` (PyTorch's `xavier_uniform_`).
    /// The paper's appendix ("Discussion the Initialisation of sigma") uses gain 0.01 for weights.
    XavierUniform {
        /// The gain `g`.
        gain: f64,
    },
    /// `|N(0, std^2)|`. The paper's appendix uses std 0.001 for biases.
    AbsNormal {
        /// Standard deviation of the draw.
        std: f64,
    },
    /// Every sigma equal to this value (e.g. `softplus(-5) = 0.0067`, a common BBB choice).
    Constant {
        /// The value of sigma.
        sigma: f64,
    },
}

impl SigmaInit {
    /// The paper's weight initialisation: Xavier-uniform with gain 0.01.
    pub fn paper_weight() -> Self {
        Self::XavierUniform { gain: 0.01 }
    }

    /// The paper's bias initialisation: `N(0, 0.001^2)`.
    pub fn paper_bias() -> Self {
        Self::AbsNormal { std: 0.001 }
    }

    /// A lazily initialised `rho` parameter: nothing is allocated until first use, so very large
    /// models can be built just to count their parameters.
    pub fn rho_param<const D: usize>(
        &self,
        shape: [usize; D],
        fan_in: usize,
        fan_out: usize,
        device: &Device,
    ) -> Param<Tensor<D>> {
        let init = *self;
        Param::uninitialized(
            ParamId::new(),
            move |device, require_grad| {
                let t = init.init_rho(shape, fan_in, fan_out, device);
                if require_grad { t.require_grad() } else { t }
            },
            device.clone(),
            true,
            shape.into(),
        )
    }

    /// Draws `rho` for a tensor of `shape` with the given fans.
    pub fn init_rho<const D: usize>(
        &self,
        shape: [usize; D],
        fan_in: usize,
        fan_out: usize,
        device: &Device,
    ) -> Tensor<D> {
        let draws: Tensor<D> = match *self {
            Self::XavierUniform { gain } => {
                let a = gain * (6.0 / (fan_in + fan_out).max(1) as f64).sqrt();
                Tensor::random(shape, Distribution::Uniform(-a, a), device)
            }
            Self::AbsNormal { std } => {
                Tensor::random(shape, Distribution::Normal(0.0, std), device)
            }
            Self::Constant { sigma } => Tensor::full(shape, sigma, device),
        };
        let values: Vec<f32> = draws
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap_or_default();
        let rho: Vec<f32> = values
            .iter()
            .map(|&d| inverse_softplus((d as f64).abs().max(MIN_INIT_SIGMA)) as f32)
            .collect();
        Tensor::from_data(TensorData::new(rho, shape), device)
    }
}

/// `softplus(x) = ln(1 + e^x)`, the map from `rho` to `sigma`.
pub fn softplus(x: f64) -> f64 {
    if x > 30.0 { x } else { x.exp().ln_1p() }
}

/// `softplus^-1(s) = ln(e^s - 1)` for `s > 0`.
pub fn inverse_softplus(s: f64) -> f64 {
    if s < 1e-4 {
        s.ln() + s / 2.0
    } else if s > 30.0 {
        s
    } else {
        s.exp_m1().ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_softplus_inverts() {
        for &s in &[1e-9, 1e-6, 1e-4, 0.003, 0.1, 1.0, 5.0, 40.0] {
            let back = softplus(inverse_softplus(s));
            assert!((back - s).abs() / s < 1e-9, "{s} -> {back}");
        }
    }
}
