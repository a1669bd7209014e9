//! Architecture names and model kinds, used everywhere (command line, configs, files).

use serde::{Deserialize, Serialize};

use crate::ModelError;

/// The architectures of the zoo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arch {
    /// Multi-layer perceptron (default 784-400-400-10 on MNIST-sized input).
    Mlp,
    /// LeNet-5 (LeCun et al. 1998).
    Lenet5,
    /// ResNet-18 (He et al. 2016), basic blocks [2, 2, 2, 2].
    Resnet18,
    /// ResNet-20, the CIFAR variant: 3 stages of 3 basic blocks, widths 16/32/64.
    Resnet20,
    /// ResNet-50, bottleneck blocks [3, 4, 6, 3].
    Resnet50,
    /// ResNet-101, bottleneck blocks [3, 4, 23, 3].
    Resnet101,
    /// Wide ResNet 28-10 (Zagoruyko & Komodakis 2016).
    #[serde(rename = "wrn28-10")]
    Wrn28x10,
    /// ViT-B/16 (Dosovitskiy et al. 2021): 12 layers, width 768, 12 heads, patch 16.
    #[serde(rename = "vit-b16")]
    VitB16,
    /// A small ViT for tests: 4 layers, width 64, 4 heads, patch 4 (7 on 28 px input).
    VitTiny,
}

impl Arch {
    /// Every architecture.
    pub const ALL: [Arch; 9] = [
        Arch::Mlp,
        Arch::Lenet5,
        Arch::Resnet18,
        Arch::Resnet20,
        Arch::Resnet50,
        Arch::Resnet101,
        Arch::Wrn28x10,
        Arch::VitB16,
        Arch::VitTiny,
    ];

    /// The architecture's name.
    pub fn name(&self) -> &'static str {
        match self {
            Arch::Mlp => "mlp",
            Arch::Lenet5 => "lenet5",
            Arch::Resnet18 => "resnet18",
            Arch::Resnet20 => "resnet20",
            Arch::Resnet50 => "resnet50",
            Arch::Resnet101 => "resnet101",
            Arch::Wrn28x10 => "wrn28-10",
            Arch::VitB16 => "vit-b16",
            Arch::VitTiny => "vit-tiny",
        }
    }
}

impl std::str::FromStr for Arch {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Arch::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| ModelError::UnknownName {
                what: "architecture",
                name: s.to_string(),
                known: Arch::ALL
                    .iter()
                    .map(|a| a.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which parameterisation the layers get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Ordinary point-estimate weights.
    Deterministic,
    /// Mean-field Gaussian weights (Bayes by Backprop).
    Bayesian,
    /// Weight-shared Bayesian weights (2DGBNN stage 3).
    Shared,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 3] = [Kind::Deterministic, Kind::Bayesian, Kind::Shared];

    /// The kind's name.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Deterministic => "deterministic",
            Kind::Bayesian => "bayesian",
            Kind::Shared => "shared",
        }
    }
}

impl std::str::FromStr for Kind {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| ModelError::UnknownName {
                what: "kind",
                name: s.to_string(),
                known: "deterministic, bayesian, shared".into(),
            })
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
