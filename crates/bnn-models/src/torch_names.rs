//! The names PyTorch libraries give the parameters of our architectures, so that state dicts
//! move between them and us by name (no burn types here: paths and shapes only).
//!
//! A parameter path of ours (`body.layers.1.0.conv1.weight_mu`, see
//! [`Network::param_shapes`](crate::Network::param_shapes)) has one key in each
//! [`Convention`]:
//!
//! | ours | bayesian-torch | blitz | torchbnn | plain / torchvision |
//! | --- | --- | --- | --- | --- |
//! | `conv1.weight_mu` | `conv1.mu_kernel` | `conv1.weight_mu` | `conv1.weight_mu` | `conv1.weight` (mean) |
//! | `conv1.weight_rho` | `conv1.rho_kernel` | `conv1.weight_rho` | `conv1.weight_log_sigma` (`ln softplus(rho)`) | - |
//! | `fc.weight_mu` `[in, out]` | `fc.mu_weight` `[out, in]` | `fc.weight_mu` `[out, in]` | `fc.weight_mu` `[out, in]` | `fc.weight` `[out, in]` |
//! | `fc.bias_mu`, `fc.bias_rho` | `fc.mu_bias`, `fc.rho_bias` | `fc.bias_mu`, `fc.bias_rho` | `fc.bias_mu`, `fc.bias_log_sigma` | `fc.bias` |
//! | `bn1.gamma`, `bn1.beta` | `bn1.weight`, `bn1.bias` | same | same | same |
//! | `bn1.running_mean`, `bn1.running_var` | same names | same | same | same |
//!
//! Dense weights are transposed: burn keeps `[in, out]`, PyTorch `[out, in]`. Every library
//! here keeps `sigma = softplus(rho) = ln(1 + e^rho)` except torchbnn, which keeps `ln sigma`.
//! ResNet stages `layers.i.j` are `layer{i+1}.j`. The projection shortcut (`downsample.conv`,
//! `downsample.bn`) is torchvision's `downsample.0` / `downsample.1`; ResNet-20 follows the
//! CIFAR ResNets of bayesian-torch (and of its deterministic twin): `shortcut.0` / `shortcut.1`
//! and a classifier named `linear` instead of `fc`, except under [`Convention::Torchvision`].
//! PyTorch's `num_batches_tracked` counter has no counterpart (it does not change a forward pass).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Arch, ModelError};

/// A PyTorch library's names for Bayesian (or deterministic) layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Convention {
    /// bayesian-torch (`*Reparameterization`, `*Flipout`, `dnn_to_bnn`): `mu_kernel`,
    /// `rho_kernel`, `mu_weight`, `rho_weight`, `mu_bias`, `rho_bias`.
    BayesianTorch,
    /// blitz (`BayesianLinear`, `BayesianConv2d`): `weight_mu`, `weight_rho`, `bias_mu`,
    /// `bias_rho`, plus the samplers' copies (`weight_sampler.mu`, ...).
    Blitz,
    /// torchbnn (`BayesLinear`, `BayesConv2d`): `weight_mu`, `weight_log_sigma`, `bias_mu`,
    /// `bias_log_sigma`.
    Torchbnn,
    /// A deterministic network (`weight`, `bias`), the architecture's own names (ResNet-20:
    /// the CIFAR ResNet's `linear` and `shortcut.*`).
    Plain,
    /// A deterministic network under torchvision's ResNet names (`fc`, `downsample.*`) for
    /// every ResNet.
    Torchvision,
}

impl Convention {
    /// Every convention.
    pub const ALL: [Convention; 5] = [
        Convention::BayesianTorch,
        Convention::Blitz,
        Convention::Torchbnn,
        Convention::Plain,
        Convention::Torchvision,
    ];

    /// The command-line name (`bayesian-torch`, `blitz`, `torchbnn`, `plain`, `torchvision`).
    pub fn name(self) -> &'static str {
        match self {
            Convention::BayesianTorch => "bayesian-torch",
            Convention::Blitz => "blitz",
            Convention::Torchbnn => "torchbnn",
            Convention::Plain => "plain",
            Convention::Torchvision => "torchvision",
        }
    }

    /// Whether the convention names posteriors (`mu`, `rho` or `log sigma`) rather than one
    /// weight per parameter.
    pub fn is_bayesian(self) -> bool {
        matches!(
            self,
            Convention::BayesianTorch | Convention::Blitz | Convention::Torchbnn
        )
    }

    /// The convention of a state dict, told from its keys when exactly one fits: `mu_kernel`
    /// or `mu_weight` is bayesian-torch, `weight_log_sigma` torchbnn, `weight_rho` blitz; keys
    /// ending in `.weight` alone are a deterministic net (torchvision's names when a key has
    /// `downsample.` or starts with `fc.`, else plain). `None` when the keys mix conventions or
    /// fit none.
    pub fn detect<'a>(keys: impl IntoIterator<Item = &'a str>) -> Option<Convention> {
        let (mut bt, mut blitz, mut tbnn, mut det, mut tv) = (false, false, false, false, false);
        for k in keys {
            let last = k.rsplit('.').next().unwrap_or(k);
            match last {
                "mu_kernel" | "mu_weight" | "rho_kernel" | "rho_weight" => bt = true,
                "weight_log_sigma" | "bias_log_sigma" => tbnn = true,
                "weight_rho" | "bias_rho" => blitz = true,
                "weight" if !k.contains("_sampler.") => det = true,
                _ => {}
            }
            tv |= k.contains("downsample.") || k.starts_with("fc.");
        }
        // Batch norm has `.weight` in every convention: a deterministic net is one whose
        // keys name no posterior at all.
        match (bt, blitz, tbnn) {
            (true, false, false) => Some(Convention::BayesianTorch),
            (false, true, false) => Some(Convention::Blitz),
            (false, false, true) => Some(Convention::Torchbnn),
            (false, false, false) if det && tv => Some(Convention::Torchvision),
            (false, false, false) if det => Some(Convention::Plain),
            _ => None,
        }
    }
}

impl fmt::Display for Convention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Convention {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Convention::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Convention::ALL.iter().map(|c| c.name()).collect();
                format!("unknown convention {s:?} (one of {})", names.join(", "))
            })
    }
}

/// How a value changes between our layer and the PyTorch key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Transform {
    /// Swap the two axes of a dense weight (burn `[in, out]`, PyTorch `[out, in]`).
    pub transpose: bool,
    /// PyTorch holds `ln sigma` where we hold `rho` (`sigma = softplus(rho)`).
    pub log_sigma: bool,
}

/// A parameter's PyTorch key and the change of its value on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchKey {
    /// The state-dict key.
    pub key: String,
    /// What changes between the two layouts.
    pub transform: Transform,
}

/// Prefix of every parameter path of a [`Network`](crate::Network).
const BODY: &str = "body.";

/// Whether `arch` has PyTorch names here (the ResNets, LeNet-5 and the MLP).
pub fn has_torch_names(arch: Arch) -> bool {
    matches!(
        arch,
        Arch::Mlp
            | Arch::Lenet5
            | Arch::Resnet18
            | Arch::Resnet20
            | Arch::Resnet50
            | Arch::Resnet101
    )
}

/// [`has_torch_names`] as an error naming the architectures that have them.
pub fn check_torch_names(arch: Arch) -> Result<(), ModelError> {
    if has_torch_names(arch) {
        return Ok(());
    }
    Err(ModelError::InvalidConfig(format!(
        "{} has no PyTorch names (supported: mlp, lenet5, resnet18, resnet20, resnet50, resnet101)",
        arch.name()
    )))
}

/// The PyTorch key of our parameter `path` (of a `rank`-dimensional tensor) in `convention`,
/// or `None` for a parameter the convention does not store (a posterior's `rho` in a
/// deterministic convention, the centre of an empirical prior). An architecture without PyTorch
/// names ([`has_torch_names`]) or a path that is not one of ours is an error.
pub fn torch_key(
    arch: Arch,
    convention: Convention,
    path: &str,
    rank: usize,
) -> Result<Option<TorchKey>, ModelError> {
    check_torch_names(arch)?;
    torch_key_renamed(convention, path, rank, &|module| {
        torch_module(arch, convention, module)
    })
}

/// [`torch_key`] for any model built by an [`Architecture`](crate::Architecture): the module
/// path of `path` (without the leading `body.`, e.g. `head` or `block.0.conv`) becomes
/// `rename(module)` in the state dict, and the parameter's own name follows `convention`.
/// With `rename` the identity, a PyTorch module whose attributes are named as the burn
/// model's fields maps one to one.
pub fn torch_key_renamed(
    convention: Convention,
    path: &str,
    rank: usize,
    rename: &dyn Fn(&str) -> String,
) -> Result<Option<TorchKey>, ModelError> {
    let bad = || ModelError::InvalidConfig(format!("{path} is not a parameter path of a model"));
    let rest = path.strip_prefix(BODY).ok_or_else(bad)?;
    let (module, param) = rest.rsplit_once('.').ok_or_else(bad)?;
    let module = rename(module);
    let dense = rank == 2;
    let weight = |transform| {
        Some(TorchKey {
            key: format!("{module}.weight"),
            transform,
        })
    };
    let key = |name: &str, transform| {
        Some(TorchKey {
            key: format!("{module}.{name}"),
            transform,
        })
    };
    let copy = Transform::default();
    let transposed = Transform {
        transpose: dense,
        log_sigma: false,
    };
    let log_sigma = Transform {
        transpose: dense,
        log_sigma: true,
    };
    Ok(match param {
        // Batch norm, the same in every convention.
        "gamma" => key("weight", copy),
        "beta" => key("bias", copy),
        "running_mean" | "running_var" => key(param, copy),
        // A deterministic layer.
        "weight" if !convention.is_bayesian() => weight(transposed),
        "bias" if !convention.is_bayesian() => key("bias", copy),
        // The mean network of a Bayesian layer.
        "weight_mu" if !convention.is_bayesian() => weight(transposed),
        "bias_mu" if !convention.is_bayesian() => key("bias", copy),
        "weight_rho" | "bias_rho" if !convention.is_bayesian() => None,
        "weight_prior_mu" | "bias_prior_mu" => None,
        _ if !convention.is_bayesian() => return Err(bad()),
        // A Bayesian layer.
        "weight_mu" | "weight_rho" | "bias_mu" | "bias_rho" => {
            let (tensor, stat) = param.split_once('_').ok_or_else(bad)?;
            match convention {
                Convention::BayesianTorch => {
                    let tensor = match (tensor, rank) {
                        ("bias", _) => "bias",
                        (_, 4) => "kernel",
                        _ => "weight",
                    };
                    key(&format!("{stat}_{tensor}"), transposed)
                }
                Convention::Blitz => key(param, transposed),
                Convention::Torchbnn if stat == "rho" => {
                    key(&format!("{tensor}_log_sigma"), log_sigma)
                }
                _ => key(param, transposed),
            }
        }
        _ => return Err(bad()),
    })
}

/// Keys a state dict of `convention` may hold beside those [`torch_key`] names, which carry
/// nothing a forward pass needs: batch norm's `num_batches_tracked` (for a `running_mean` key
/// that is mapped) and blitz's sampler copies (`<layer>.weight_sampler.{mu,rho,eps_w}`,
/// `bias_sampler`, for a mapped `<layer>.weight_mu`). `mapped` tells whether a key is one of
/// the mapped ones. Returns the key whose value a copy must equal (`Some(key)`), `Some("")` for
/// a key to ignore, `None` for a key that is not allowed.
pub fn extra_key(
    convention: Convention,
    key: &str,
    mapped: &dyn Fn(&str) -> bool,
) -> Option<String> {
    if let Some(bn) = key.strip_suffix(".num_batches_tracked") {
        return mapped(&format!("{bn}.running_mean")).then(String::new);
    }
    if convention == Convention::Blitz {
        for tensor in ["weight", "bias"] {
            let Some((layer, stat)) = key.rsplit_once(&format!(".{tensor}_sampler.")) else {
                continue;
            };
            let own = format!("{layer}.{tensor}_{stat}");
            return match stat {
                "eps_w" => mapped(&format!("{layer}.{tensor}_mu")).then(String::new),
                "mu" | "rho" => mapped(&own).then_some(own),
                _ => None,
            };
        }
    }
    None
}

/// Our module path (`layers.1.0.downsample.conv`, without the leading `body.`) in PyTorch's
/// names (`layer2.0.shortcut.0` for ResNet-20 in bayesian-torch).
pub fn torch_module(arch: Arch, convention: Convention, module: &str) -> String {
    let resnet = matches!(
        arch,
        Arch::Resnet18 | Arch::Resnet20 | Arch::Resnet50 | Arch::Resnet101
    );
    if !resnet {
        return module.to_string();
    }
    let cifar = arch == Arch::Resnet20 && convention != Convention::Torchvision;
    let shortcut = if cifar { "shortcut" } else { "downsample" };
    let parts: Vec<&str> = module.split('.').collect();
    let mut out = Vec::with_capacity(parts.len());
    let mut i = 0;
    while i < parts.len() {
        match (parts[i], parts.get(i + 1)) {
            ("layers", Some(stage)) => {
                let n = stage.parse::<usize>().map_or(0, |s| s + 1);
                out.push(format!("layer{n}"));
                i += 2;
                continue;
            }
            ("downsample", Some(&"conv")) => {
                out.push(format!("{shortcut}.0"));
                i += 2;
                continue;
            }
            ("downsample", Some(&"bn")) => {
                out.push(format!("{shortcut}.1"));
                i += 2;
                continue;
            }
            ("fc", None) if cifar => out.push("linear".to_string()),
            (p, _) => out.push(p.to_string()),
        }
        i += 1;
    }
    out.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(arch: Arch, c: Convention, path: &str, rank: usize) -> String {
        torch_key(arch, c, path, rank).unwrap().unwrap().key
    }

    #[test]
    fn bayesian_torch_names_kernels_weights_and_shortcuts() {
        use Convention::*;
        let r20 = Arch::Resnet20;
        assert_eq!(
            key(r20, BayesianTorch, "body.conv1.weight_mu", 4),
            "conv1.mu_kernel"
        );
        assert_eq!(
            key(
                r20,
                BayesianTorch,
                "body.layers.2.0.downsample.conv.weight_rho",
                4
            ),
            "layer3.0.shortcut.0.rho_kernel"
        );
        assert_eq!(
            key(r20, BayesianTorch, "body.layers.0.1.bn2.gamma", 1),
            "layer1.1.bn2.weight"
        );
        let t = torch_key(r20, BayesianTorch, "body.fc.weight_mu", 2)
            .unwrap()
            .unwrap();
        assert_eq!(t.key, "linear.mu_weight");
        assert!(t.transform.transpose && !t.transform.log_sigma);
        assert_eq!(
            key(r20, BayesianTorch, "body.fc.bias_rho", 1),
            "linear.rho_bias"
        );
        assert_eq!(key(r20, Torchvision, "body.fc.weight_mu", 2), "fc.weight");
        assert_eq!(
            key(
                Arch::Resnet18,
                Plain,
                "body.layers.1.0.downsample.bn.running_var",
                1
            ),
            "layer2.0.downsample.1.running_var"
        );
        let t = torch_key(Arch::Lenet5, Torchbnn, "body.fc1.weight_rho", 2)
            .unwrap()
            .unwrap();
        assert_eq!(t.key, "fc1.weight_log_sigma");
        assert!(t.transform.transpose && t.transform.log_sigma);
        assert_eq!(
            torch_key(Arch::Lenet5, Plain, "body.fc1.weight_rho", 2).unwrap(),
            None
        );
        assert!(torch_key(Arch::VitTiny, Plain, "body.x.weight", 2).is_err());
        assert!(torch_key(Arch::Lenet5, Blitz, "body.fc1.weight", 2).is_err());
    }

    #[test]
    fn detects_each_convention_from_its_keys() {
        let d = |keys: &[&str]| Convention::detect(keys.iter().copied());
        assert_eq!(
            d(&["conv1.mu_kernel", "bn1.weight"]),
            Some(Convention::BayesianTorch)
        );
        assert_eq!(
            d(&["a.weight_mu", "a.weight_rho", "a.weight_sampler.mu"]),
            Some(Convention::Blitz)
        );
        assert_eq!(d(&["a.weight_log_sigma"]), Some(Convention::Torchbnn));
        assert_eq!(
            d(&["conv1.weight", "fc.weight"]),
            Some(Convention::Torchvision)
        );
        assert_eq!(
            d(&["conv1.weight", "linear.weight"]),
            Some(Convention::Plain)
        );
        assert_eq!(d(&["a.mu_weight", "b.weight_rho"]), None);
        assert_eq!(d(&["bn.running_mean"]), None);
    }

    #[test]
    fn extra_keys_are_counters_and_blitz_copies_only() {
        let mapped = |k: &str| k == "bn1.running_mean" || k.starts_with("fc.weight");
        let e = |c, k| extra_key(c, k, &mapped);
        assert_eq!(
            e(Convention::Plain, "bn1.num_batches_tracked"),
            Some(String::new())
        );
        assert_eq!(e(Convention::Plain, "bn2.num_batches_tracked"), None);
        assert_eq!(
            e(Convention::Blitz, "fc.weight_sampler.mu"),
            Some("fc.weight_mu".into())
        );
        assert_eq!(
            e(Convention::Blitz, "fc.weight_sampler.eps_w"),
            Some(String::new())
        );
        assert_eq!(e(Convention::BayesianTorch, "fc.weight_sampler.mu"), None);
    }
}
