//! The defaults of the one-model operations: `swbnn compress`'s settings without a config file
//! and the recipes of Bayes by Backprop.

use bnn_layers::{SigmaInit, softplus};
use bnn_train::{LrSchedule, MomentumCycle, OptimizerKind, TrainConfig};
use serde::{Deserialize, Serialize};
use swshare::compress::CompressConfig;
use swshare::retrain_stop::RetrainStop;

/// Stage-3 epochs of the quick preset, and of `swbnn compress` without a config file: a
/// ceiling, as the confidence-recovered rule ends stage 3 earlier (the paper's 200 take days on
/// a CPU; a config file or `--epochs` sets more).
pub const QUICK_RETRAIN_EPOCHS: usize = 2;

/// The compression settings of `swbnn compress` (and of the Python `compress`) without a
/// config file: the method's defaults, with the quick preset's stage 3
/// ([`QUICK_RETRAIN_EPOCHS`], ended once the model is as confident as the BNN it came from).
pub fn command_line_compress() -> CompressConfig {
    let mut cfg = CompressConfig::default();
    cfg.retrain.epochs = QUICK_RETRAIN_EPOCHS;
    cfg.retrain_stop = RetrainStop::confidence_recovered();
    cfg
}

/// How Bayes by Backprop (stage 1 of 2DGBNN) is trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BbbRecipe {
    /// The paper's "with pre-trained" setting: the Bayesian means start from the deterministic
    /// net; Adam, one-cycle, means at 1e-3 and `rho` at 1e-2; sigmas initialised as in the
    /// paper's appendix (Xavier-uniform with gain 0.01 for weights, `|N(0, 0.001^2)|` for biases).
    Pretrained,
    /// The PyTorch reference (`benches/peers/torch_reference_bbb.py`): from scratch; SGD under
    /// PyTorch's `OneCycleLR` defaults to 0.1 (cosine phases, momentum cycled 0.95 -> 0.85 ->
    /// 0.95), the same rate for means and `rho`; every `rho` initialised to -6
    /// (sigma = softplus(-6) = 0.00247); prior N(0, 0.1^2). `docs/method.md` lists what still
    /// differs from the script.
    Reference,
}

impl BbbRecipe {
    /// The BBB training settings of this recipe for `epochs` epochs (seed 0).
    pub fn train_config(self, epochs: usize) -> TrainConfig {
        match self {
            BbbRecipe::Pretrained => TrainConfig::bayes_by_backprop(epochs),
            BbbRecipe::Reference => TrainConfig {
                lr: 0.1,
                lr_rho: 0.1,
                optimizer: OptimizerKind::Sgd {
                    momentum: 0.9,
                    nesterov: false,
                },
                // PyTorch's OneCycleLR with its defaults: cosine phases, a 0.3 warm-up share,
                // and the momentum cycled 0.95 -> 0.85 -> 0.95 (which overrides the
                // optimiser's 0.9 there too).
                schedule: LrSchedule::OneCycleCos {
                    pct_start: 0.3,
                    momentum: Some(MomentumCycle::PYTORCH),
                },
                ..TrainConfig::bayes_by_backprop(epochs)
            },
        }
    }

    /// How this recipe initialises the sigmas of the weights and of the biases.
    pub fn sigma_init(self) -> (SigmaInit, SigmaInit) {
        match self {
            BbbRecipe::Pretrained => (SigmaInit::paper_weight(), SigmaInit::paper_bias()),
            BbbRecipe::Reference => {
                let sigma = SigmaInit::Constant {
                    sigma: softplus(REFERENCE_RHO),
                };
                (sigma, sigma)
            }
        }
    }

    /// Whether the Bayesian means start from the deterministic net.
    pub fn from_deterministic(self) -> bool {
        self == BbbRecipe::Pretrained
    }
}

/// The reference recipe's initial `rho` (sigma = softplus(-6) = 0.00247).
pub const REFERENCE_RHO: f64 = -6.0;

impl BbbRecipe {
    /// Every recipe's name, as [`FromStr`](std::str::FromStr) reads it.
    pub const NAMES: [&'static str; 2] = ["pretrained", "reference"];
}

impl std::str::FromStr for BbbRecipe {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pretrained" => Ok(BbbRecipe::Pretrained),
            "reference" => Ok(BbbRecipe::Reference),
            _ => Err(format!("unknown recipe {s:?} (pretrained or reference)")),
        }
    }
}
