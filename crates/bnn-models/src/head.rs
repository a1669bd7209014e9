//! What a network's outputs mean: class logits, or a Gaussian per regression target.
//!
//! A regression network predicts, for each of its `T` targets, a mean and a positive standard
//! deviation: the likelihood `y ~ N(mean(x), std(x)^2)` whose negative log is the data term of
//! its loss (the ELBO's for a Bayesian network). Two parameterisations of the spread:
//!
//! - **heteroscedastic** (the default): the network has `2 T` outputs, the means and `T`
//!   unconstrained values `s`, each mapped to `std = softplus(s) + MIN_STD` (Nix and Weigend
//!   1994; the positive map of Lakshminarayanan et al. 2017, "Simple and scalable predictive
//!   uncertainty estimation using deep ensembles", eq. 1 and section 2.2.1): the noise may
//!   differ from input to input;
//! - **homoscedastic**: `T` outputs, the means, and one learned `rho` per target beside the
//!   network ([`crate::Classifier::noise_rho`]), `std = softplus(rho) + MIN_STD` for every
//!   input.
//!
//! The network works in standardised units (its inputs and targets standardised on the
//! training split, `crate::TabularInput`); [`MIN_STD`] is in those units.

use burn::module::Param;
use burn::prelude::*;
use burn::tensor::activation::softplus;
use serde::{Deserialize, Serialize};

use crate::ModelError;

/// The smallest predictive standard deviation, in standardised target units (a thousandth of
/// the training targets' spread): keeps the Gaussian NLL finite when the network is sure,
/// without bounding any spread a real data set needs.
pub const MIN_STD: f32 = 1e-3;

/// Most regression targets a network may predict.
pub const MAX_TARGETS: usize = 4096;

/// How a Gaussian head's spread depends on the input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Noise {
    /// A standard deviation per input and target, from the network's second `T` outputs.
    #[default]
    Heteroscedastic,
    /// One standard deviation per target, the same for every input.
    Homoscedastic,
}

impl Noise {
    /// Every kind's name, as [`FromStr`](std::str::FromStr) reads it.
    pub const NAMES: [&'static str; 2] = ["heteroscedastic", "homoscedastic"];
}

impl std::fmt::Display for Noise {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Noise::Heteroscedastic => "heteroscedastic",
            Noise::Homoscedastic => "homoscedastic",
        })
    }
}

impl std::str::FromStr for Noise {
    type Err = String;

    /// `heteroscedastic` or `homoscedastic`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "heteroscedastic" => Ok(Noise::Heteroscedastic),
            "homoscedastic" => Ok(Noise::Homoscedastic),
            _ => Err(format!(
                "unknown noise model {s:?} (heteroscedastic or homoscedastic)"
            )),
        }
    }
}

/// What a network's outputs mean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Head {
    /// Logits of a categorical distribution over the classes (classification).
    #[default]
    Categorical,
    /// A Gaussian per regression target (module docs).
    Gaussian {
        /// Number of targets `T` (at least 1, at most [`MAX_TARGETS`]).
        targets: usize,
        /// How the spread depends on the input.
        noise: Noise,
    },
}

impl Head {
    /// A heteroscedastic Gaussian head for `targets` targets.
    pub fn gaussian(targets: usize) -> Self {
        Head::Gaussian {
            targets,
            noise: Noise::Heteroscedastic,
        }
    }

    /// Whether the head predicts regression targets.
    pub fn is_regression(&self) -> bool {
        matches!(self, Head::Gaussian { .. })
    }

    /// Regression targets predicted (0 for a categorical head).
    pub fn targets(&self) -> usize {
        match *self {
            Head::Categorical => 0,
            Head::Gaussian { targets, .. } => targets,
        }
    }

    /// Outputs the network body must have: `classes` logits, `2 T` for a heteroscedastic
    /// Gaussian (means, then spreads), `T` for a homoscedastic one.
    pub fn outputs(&self, classes: usize) -> usize {
        match *self {
            Head::Categorical => classes,
            Head::Gaussian {
                targets,
                noise: Noise::Heteroscedastic,
            } => 2 * targets,
            Head::Gaussian {
                targets,
                noise: Noise::Homoscedastic,
            } => targets,
        }
    }

    /// Checks the target count of a Gaussian head (1 to [`MAX_TARGETS`]).
    pub fn validate(&self) -> Result<(), ModelError> {
        if let Head::Gaussian { targets, .. } = *self
            && !(1..=MAX_TARGETS).contains(&targets)
        {
            return Err(ModelError::InvalidConfig(format!(
                "a Gaussian head of {targets} targets: 1 to {MAX_TARGETS}"
            )));
        }
        Ok(())
    }

    /// The learned noise parameter of a homoscedastic head, `T` values of `rho` starting at a
    /// standard deviation of 1 (the standardised targets' spread); `None` for other heads.
    pub fn noise_param(&self, device: &Device) -> Option<Param<Tensor<1>>> {
        match *self {
            Head::Gaussian {
                targets,
                noise: Noise::Homoscedastic,
            } => {
                let rho0 = rho_for_std(1.0);
                Some(Param::from_tensor(Tensor::full([targets], rho0, device)))
            }
            _ => None,
        }
    }

    /// The mean and standard deviation `[batch, T]` of a Gaussian head's `outputs`
    /// (`[batch, outputs]`), with `noise_rho` the homoscedastic head's parameter. A
    /// categorical head, outputs of another width, or a homoscedastic head without its
    /// parameter is an error.
    pub fn mean_std(
        &self,
        outputs: Tensor<2>,
        noise_rho: Option<&Param<Tensor<1>>>,
    ) -> Result<(Tensor<2>, Tensor<2>), ModelError> {
        let Head::Gaussian { targets, noise } = *self else {
            return Err(ModelError::InvalidConfig(
                "a categorical head has logits, not a mean and a standard deviation".into(),
            ));
        };
        let [batch, width] = outputs.dims();
        if width != self.outputs(0) {
            return Err(ModelError::InvalidConfig(format!(
                "a {noise} Gaussian head of {targets} targets takes {} outputs, the network \
                 gives {width}",
                self.outputs(0)
            )));
        }
        match noise {
            Noise::Heteroscedastic => {
                let mean = outputs.clone().slice([0..batch, 0..targets]);
                let raw = outputs.slice([0..batch, targets..2 * targets]);
                Ok((mean, softplus(raw, 1.0).add_scalar(MIN_STD)))
            }
            Noise::Homoscedastic => {
                let rho = noise_rho.ok_or_else(|| {
                    ModelError::InvalidConfig(
                        "a homoscedastic Gaussian head without its noise parameter".into(),
                    )
                })?;
                let std = softplus(rho.val(), 1.0).add_scalar(MIN_STD);
                let std = std.unsqueeze_dim::<2>(0).expand([batch, targets]);
                Ok((outputs, std))
            }
        }
    }
}

/// The `rho` whose standard deviation `softplus(rho) + MIN_STD` is `std` (> `MIN_STD`).
pub fn rho_for_std(std: f32) -> f32 {
    let s = (std - MIN_STD) as f64;
    // softplus^-1(s) = ln(e^s - 1) = s + ln(1 - e^-s), stable for large s.
    (s + (-(-s).exp()).ln_1p()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_and_names() {
        assert_eq!(Head::Categorical.outputs(10), 10);
        assert_eq!(Head::gaussian(3).outputs(0), 6);
        let homo = Head::Gaussian {
            targets: 3,
            noise: Noise::Homoscedastic,
        };
        assert_eq!(homo.outputs(0), 3);
        assert_eq!((homo.targets(), Head::Categorical.targets()), (3, 0));
        for name in Noise::NAMES {
            assert_eq!(name.parse::<Noise>().unwrap().to_string(), name);
        }
        assert!("gaussian".parse::<Noise>().is_err());
        assert!(Head::gaussian(0).validate().is_err());
        assert!(Head::gaussian(MAX_TARGETS + 1).validate().is_err());
        // Files written before heads existed hold none: serde's default is the categorical.
        let json = serde_json::to_string(&Head::gaussian(2)).unwrap();
        assert_eq!(
            serde_json::from_str::<Head>(&json).unwrap(),
            Head::gaussian(2)
        );
    }

    /// Means pass through; spreads are `softplus + MIN_STD`, checked against values computed
    /// by hand (`softplus(0) = ln 2`, `softplus(2) = 2.126928011`).
    #[test]
    fn mean_and_std_of_both_parameterisations() {
        let device = bnn_layers::test_device();
        let out =
            Tensor::<2>::from_floats([[1.0, -2.0, 0.0, 2.0], [3.0, 4.0, -30.0, 0.0]], &device);
        let (m, s) = Head::gaussian(2).mean_std(out, None).unwrap();
        let host = |t: Tensor<2>| t.into_data().convert::<f32>().try_to_vec::<f32>().unwrap();
        assert_eq!(host(m), vec![1.0, -2.0, 3.0, 4.0]);
        let want = [
            std::f32::consts::LN_2,
            2.126_928,
            9.357_623e-14,
            std::f32::consts::LN_2,
        ];
        for (g, w) in host(s).iter().zip(want) {
            assert!((g - (w + MIN_STD)).abs() < 1e-6, "{g} vs {w}");
        }
        let homo = Head::Gaussian {
            targets: 2,
            noise: Noise::Homoscedastic,
        };
        let rho = homo.noise_param(&device).unwrap();
        let out = Tensor::<2>::from_floats([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], &device);
        let (m, s) = homo.mean_std(out.clone(), Some(&rho)).unwrap();
        assert_eq!(host(m), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        for g in host(s) {
            assert!((g - 1.0).abs() < 1e-6, "{g}");
        }
        assert!(homo.mean_std(out.clone(), None).is_err());
        assert!(Head::gaussian(2).mean_std(out, None).is_err());
        assert!(
            Head::Categorical
                .mean_std(Tensor::zeros([1, 2], &device), None)
                .is_err()
        );
    }

    #[test]
    fn rho_for_std_inverts_the_map() {
        for std in [0.01f32, 0.5, 1.0, 3.0, 40.0] {
            let rho = rho_for_std(std) as f64;
            let back = (rho.exp().ln_1p()) as f32 + MIN_STD;
            assert!((back - std).abs() < 1e-5 * std.max(1.0), "{std}: {back}");
        }
    }
}
