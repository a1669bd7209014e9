//! The quantised-BNN baseline (`method: qbnn`): post-training quantisation of a trained
//! Bayes-by-Backprop model as Subedar et al. (2021) and bayesian-torch's `bnn_to_qbnn` do it
//! (IntelLabs/bayesian-torch, commit aa7e57b, `bayesian_torch/models/bnn_to_qbnn.py`):
//!
//! 1. batch norm folded into the convolution whose output it normalises, where `bnn_to_qbnn`
//!    with `fuse_conv_bn=True` folds it: `convN` into `bnN` of every residual block, the stem's
//!    `conv1` into `bn1`, a projection shortcut's convolution into its batch norm
//!    (`batch_norm_folding`). Only the ResNets have such pairs; WRN-28-10 is pre-activation
//!    (its `bn1` comes *before* `conv1`, which the reference's name matching would wrongly
//!    fold), ViT has layer norms, LeNet-5 and the MLP have none. Folding is exact in
//!    distribution: with `c = gamma / sqrt(var + eps)` per output channel, `c * w` for
//!    `w ~ N(mu, sigma^2)` is `N(c mu, c^2 sigma^2)`, so `mu <- c mu`, `sigma <- |c| sigma` (the
//!    reference multiplies sigma by the signed `c`, the same distribution), and the folded bias
//!    `beta - c * mean` stays `f32`, as the reference's `quantized_mu_bias` does;
//! 2. means in symmetric per-tensor int8, standard deviations at `sigma_bits` bits, biases and
//!    every other tensor in `f32` ([`swshare::format::qbnn`] has the schemes and the file);
//! 3. the model is rebuilt from the file's bytes and evaluated with the same Monte-Carlo
//!    predictive as Bayes by Backprop. Activations stay `f32`: the baseline measures what
//!    quantised parameters cost in accuracy, calibration and bytes, not int8 arithmetic.

use std::collections::HashMap;
use std::path::Path;

use bnn_layers::{NamedTensor, export_params, import_params, inverse_softplus, softplus};
use bnn_models::{Body, Kind, ModelConfig, Network};
use burn::prelude::*;
use swshare::format::qbnn::{AffineBits, FoldedNorm, QTensor, QValues, QbnnData, SymmetricI8};

use crate::Error;

/// A convolution and the batch norm applied to its output.
#[derive(Debug, Clone, PartialEq)]
pub struct FoldPair {
    /// Path of the convolution (e.g. `body.layers.0.0.conv1`).
    pub conv: String,
    /// Path of its batch norm (e.g. `body.layers.0.0.bn1`).
    pub norm: String,
    /// The batch norm's epsilon.
    pub epsilon: f64,
}

/// The convolution / batch-norm pairs `bnn_to_qbnn(fuse_conv_bn=True)` folds, read from the
/// model's structure (so only pairs where the norm really follows the convolution).
pub fn fold_pairs(model: &Network) -> Vec<FoldPair> {
    let Body::ResNet(r) = &model.body else {
        return Vec::new();
    };
    let pair = |conv: String, norm: String, bn: &burn::nn::BatchNorm| FoldPair {
        conv,
        norm,
        epsilon: bn.epsilon,
    };
    let mut out = vec![pair("body.conv1".into(), "body.bn1".into(), &r.bn1)];
    for (s, stage) in r.layers.iter().enumerate() {
        for (b, block) in stage.iter().enumerate() {
            let p = format!("body.layers.{s}.{b}");
            out.push(pair(format!("{p}.conv1"), format!("{p}.bn1"), &block.bn1));
            out.push(pair(format!("{p}.conv2"), format!("{p}.bn2"), &block.bn2));
            if let Some(bn3) = &block.bn3 {
                out.push(pair(format!("{p}.conv3"), format!("{p}.bn3"), bn3));
            }
            if let Some(ds) = &block.downsample {
                out.push(pair(
                    format!("{p}.downsample.conv"),
                    format!("{p}.downsample.bn"),
                    &ds.bn,
                ));
            }
        }
    }
    out
}

/// Every float parameter by path, in model order.
struct Params {
    tensors: Vec<NamedTensor>,
    index: HashMap<String, usize>,
}

impl Params {
    fn of(model: &Network) -> Self {
        let tensors = export_params(model);
        let index = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.path.clone(), i))
            .collect();
        Self { tensors, index }
    }

    fn get(&self, path: &str) -> Result<&NamedTensor, Error> {
        self.index
            .get(path)
            .map(|&i| &self.tensors[i])
            .ok_or_else(|| no_parameter(path))
    }

    fn data_mut(&mut self, path: &str) -> Result<&mut Vec<f32>, Error> {
        match self.index.get(path) {
            Some(&i) => Ok(&mut self.tensors[i].data),
            None => Err(no_parameter(path)),
        }
    }

    fn has(&self, path: &str) -> bool {
        self.index.contains_key(path)
    }
}

/// `rho` values of `sigma * |c|` for each `rho` (per output channel `c`).
fn scale_rho(rho: &mut [f32], coef: &[f64]) {
    let per = rho.len() / coef.len();
    for (ch, c) in coef.iter().enumerate() {
        for r in &mut rho[ch * per..(ch + 1) * per] {
            let sigma = softplus(f64::from(*r)) * c.abs();
            *r = inverse_softplus(sigma.max(f64::MIN_POSITIVE)) as f32;
        }
    }
}

/// The model's parameters with every [`fold_pairs`] batch norm folded into its convolution
/// (no quantisation): the folded norm becomes the identity plus `beta`, the folded bias.
/// Importing them into the same architecture gives the same function in evaluation mode.
pub fn fold_batch_norm(model: &Network) -> Result<(Vec<NamedTensor>, Vec<FoldPair>), Error> {
    let pairs = fold_pairs(model);
    let mut p = Params::of(model);
    for pair in &pairs {
        let n = |s: &str| format!("{}.{s}", pair.norm);
        let gamma = p.get(&n("gamma"))?.data.clone();
        let beta = p.get(&n("beta"))?.data.clone();
        let mean = p.get(&n("running_mean"))?.data.clone();
        let var = p.get(&n("running_var"))?.data.clone();
        let coef: Vec<f64> = gamma
            .iter()
            .zip(&var)
            .map(|(&g, &v)| f64::from(g) / (f64::from(v) + pair.epsilon).sqrt())
            .collect();
        let w = format!("{}.weight_mu", pair.conv);
        let mu = p.data_mut(&w)?;
        if mu.len() % coef.len() != 0 {
            return Err(Error::QbnnTensor {
                tensor: w,
                problem: format!(
                    "{} values, not a multiple of {} channels",
                    mu.len(),
                    coef.len()
                ),
            });
        }
        let per = mu.len() / coef.len();
        for (ch, c) in coef.iter().enumerate() {
            for m in &mut mu[ch * per..(ch + 1) * per] {
                *m = (f64::from(*m) * c) as f32;
            }
        }
        scale_rho(p.data_mut(&format!("{}.weight_rho", pair.conv))?, &coef);
        let bias = format!("{}.bias_mu", pair.conv);
        let folded: Vec<f32> = if p.has(&bias) {
            // A convolution with a bias takes the whole affine map; the norm keeps beta = 0.
            let b = p.data_mut(&bias)?;
            for (ch, c) in coef.iter().enumerate() {
                b[ch] = ((f64::from(b[ch]) - f64::from(mean[ch])) * c + f64::from(beta[ch])) as f32;
            }
            scale_rho(p.data_mut(&format!("{}.bias_rho", pair.conv))?, &coef);
            vec![0.0; coef.len()]
        } else {
            coef.iter()
                .enumerate()
                .map(|(ch, c)| (f64::from(beta[ch]) - c * f64::from(mean[ch])) as f32)
                .collect()
        };
        *p.data_mut(&n("beta"))? = folded;
        set_identity(&mut p, &pair.norm, pair.epsilon)?;
    }
    Ok((p.tensors, pairs))
}

/// A batch norm that passes its input through (plus `beta`): `gamma = 1`, mean 0 and a
/// variance of `1 - epsilon`, so `sqrt(var + epsilon) = 1`.
fn set_identity(p: &mut Params, norm: &str, epsilon: f64) -> Result<(), Error> {
    let c = p.get(&format!("{norm}.beta"))?.data.len();
    *p.data_mut(&format!("{norm}.gamma"))? = vec![1.0; c];
    *p.data_mut(&format!("{norm}.running_mean"))? = vec![0.0; c];
    *p.data_mut(&format!("{norm}.running_var"))? = vec![(1.0 - epsilon) as f32; c];
    Ok(())
}

fn identity_norm_tensors(norm: &FoldedNorm, channels: usize) -> [NamedTensor; 3] {
    let t = |name: &str, value: f32| NamedTensor {
        path: format!("{}.{name}", norm.path),
        shape: vec![channels],
        data: vec![value; channels],
    };
    [
        t("gamma", 1.0),
        t("running_mean", 0.0),
        t("running_var", (1.0 - norm.epsilon) as f32),
    ]
}

/// A parameter path the model lacks.
fn no_parameter(path: &str) -> Error {
    Error::QbnnTensor {
        tensor: path.to_string(),
        problem: "no such parameter in the model".into(),
    }
}

/// Quantises a trained Bayesian model (batch norm folded first) with int8 means and
/// `sigma_bits`-bit standard deviations: the content of its `.qbnn` file.
pub fn quantize(bayes: &Network, config: &ModelConfig, sigma_bits: u8) -> Result<QbnnData, Error> {
    if config.kind != Kind::Bayesian {
        return Err(Error::Usage(format!(
            "qbnn quantises a Bayesian model; this one is {}",
            config.kind
        )));
    }
    let (tensors, pairs) = fold_batch_norm(bayes)?;
    let implied: Vec<String> = pairs
        .iter()
        .flat_map(|p| ["gamma", "running_mean", "running_var"].map(|s| format!("{}.{s}", p.norm)))
        .collect();
    let mut out = Vec::new();
    for t in tensors {
        // Empirical-prior centres only enter the KL of training; implied norm tensors are
        // restored from the fold list.
        if t.path.ends_with("_prior_mu") || implied.contains(&t.path) {
            continue;
        }
        let values = if t.path.ends_with(".weight_mu") {
            QValues::MeanI8(SymmetricI8::quantize(&t.data)?)
        } else if t.path.ends_with(".weight_rho") {
            let sigma: Vec<f32> = t
                .data
                .iter()
                .map(|&r| softplus(f64::from(r)) as f32)
                .collect();
            QValues::SigmaBits(AffineBits::quantize(&sigma, sigma_bits)?)
        } else {
            QValues::F32(t.data)
        };
        out.push(QTensor {
            path: t.path,
            shape: t.shape,
            values,
        });
    }
    Ok(QbnnData {
        arch: serde_json::to_string(config).map_err(Error::json)?,
        sigma_bits,
        tensors: out,
        folded_norms: pairs
            .into_iter()
            .map(|p| FoldedNorm {
                path: p.norm,
                epsilon: p.epsilon,
            })
            .collect(),
        temperature: None,
        conformal: None,
    })
}

/// The Bayesian model a `.qbnn` file describes, on `device`: means and standard deviations
/// restored from their codes (`rho = softplus^-1(sigma)`), folded batch norms as identities
/// plus their bias. Every tensor of the file must land in the model.
pub fn from_qbnn(data: &QbnnData, device: &Device) -> Result<(Network, ModelConfig), Error> {
    let config: ModelConfig = serde_json::from_str(&data.arch)
        .map_err(|e| Error::parse(Path::new("the .qbnn file's architecture JSON"), e))?;
    let model = config.init(device)?;
    let mut tensors: Vec<NamedTensor> = data
        .tensors
        .iter()
        .map(|t| {
            let values = t.values.dequantize();
            let data = match t.values {
                QValues::SigmaBits(_) => values
                    .iter()
                    .map(|&s| inverse_softplus(f64::from(s).max(f64::MIN_POSITIVE)) as f32)
                    .collect(),
                _ => values,
            };
            NamedTensor {
                path: t.path.clone(),
                shape: t.shape.clone(),
                data,
            }
        })
        .collect();
    for norm in &data.folded_norms {
        let beta = format!("{}.beta", norm.path);
        let channels = tensors
            .iter()
            .find(|t| t.path == beta)
            .map(|t| t.data.len())
            .ok_or_else(|| Error::QbnnTensor {
                tensor: beta.clone(),
                problem: "missing, but its norm layer is folded".into(),
            })?;
        tensors.extend(identity_norm_tensors(norm, channels));
    }
    let (model, copied) = import_params(model, &tensors)?;
    if copied != tensors.len() {
        return Err(Error::DataMismatch {
            what: "qbnn file".into(),
            found: format!("{} tensors", tensors.len()),
            expected: format!("{copied} of them (a {} model)", config.arch),
        });
    }
    Ok((model, config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_layers::set_sampling;
    use bnn_models::Arch;

    /// A Bayesian model with trained-looking batch-norm statistics (small, varied variances,
    /// so a wrong epsilon or channel order shows) and one negative gamma.
    fn model(arch: Arch, device: &Device) -> Network {
        device.seed(3);
        let net = ModelConfig::for_input(arch, Kind::Bayesian, 10, 3, 16)
            .init(device)
            .unwrap();
        let mut tensors = export_params(&net);
        for (k, t) in tensors.iter_mut().enumerate() {
            let wave = |i: usize| ((i * 7 + k * 13) as f32 * 0.37).sin();
            if t.path.ends_with("running_var") {
                t.data = (0..t.data.len())
                    .map(|i| 2e-3 + 1e-3 * wave(i).abs())
                    .collect();
            } else if t.path.ends_with("running_mean") || t.path.ends_with(".beta") {
                t.data = (0..t.data.len()).map(|i| 0.1 * wave(i)).collect();
            } else if t.path.ends_with(".gamma") {
                t.data = (0..t.data.len()).map(|i| 1.0 + 0.5 * wave(i)).collect();
                t.data[0] = -0.7;
            }
        }
        import_params(net, &tensors).unwrap().0
    }

    fn mean_logits(net: &Network, device: &Device) -> Vec<f32> {
        let net = set_sampling(net.clone(), false);
        let x = Tensor::<4>::random(
            [2, 3, 16, 16],
            burn::tensor::Distribution::Normal(0.0, 1.0),
            device,
        );
        net.forward(x)
            .into_data()
            .convert::<f32>()
            .try_to_vec::<f32>()
            .unwrap()
    }

    #[test]
    fn folding_keeps_the_function_and_only_folds_norms_after_convolutions() {
        let _rng = bnn_layers::lock_device_rng();
        let device = bnn_layers::test_device();
        let net = model(Arch::Resnet20, &device);
        let pairs = fold_pairs(&net);
        // Stem, 9 blocks x 2 convolutions, 2 projection shortcuts.
        assert_eq!(pairs.len(), 1 + 18 + 2);
        let (tensors, _) = fold_batch_norm(&net).unwrap();
        let config = ModelConfig::for_input(Arch::Resnet20, Kind::Bayesian, 10, 3, 16);
        let folded = import_params(config.init(&device).unwrap(), &tensors)
            .unwrap()
            .0;
        device.seed(9);
        let a = mean_logits(&net, &device);
        device.seed(9);
        let b = mean_logits(&folded, &device);
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-3 * (1.0 + x.abs()), "{x} vs {y}");
        }
        // A bottleneck ResNet folds its third convolution too; a pre-activation WRN nothing.
        let r50 = ModelConfig::for_input(Arch::Resnet50, Kind::Bayesian, 10, 3, 16)
            .init(&device)
            .unwrap();
        let p = fold_pairs(&r50);
        assert!(p.iter().any(|p| p.conv.ends_with("0.0.conv3")));
        assert_eq!(p.len(), 1 + 16 * 3 + 4);
        let names: Vec<_> = export_params(&r50).into_iter().map(|t| t.path).collect();
        for pair in &p {
            assert!(
                names.contains(&format!("{}.weight_mu", pair.conv)),
                "{}",
                pair.conv
            );
            assert!(
                names.contains(&format!("{}.gamma", pair.norm)),
                "{}",
                pair.norm
            );
        }
        let mlp = ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 10, 3, 16)
            .init(&device)
            .unwrap();
        assert!(fold_pairs(&mlp).is_empty());
    }

    #[test]
    fn folded_sigma_is_scaled_by_the_absolute_coefficient() {
        let _rng = bnn_layers::lock_device_rng();
        let device = bnn_layers::test_device();
        let net = model(Arch::Resnet20, &device);
        let before = export_params(&net);
        let (after, _) = fold_batch_norm(&net).unwrap();
        let get =
            |ts: &[NamedTensor], p: &str| ts.iter().find(|t| t.path == p).unwrap().data.clone();
        let gamma = get(&before, "body.bn1.gamma");
        let var = get(&before, "body.bn1.running_var");
        let rho0 = get(&before, "body.conv1.weight_rho");
        let rho1 = get(&after, "body.conv1.weight_rho");
        let mu0 = get(&before, "body.conv1.weight_mu");
        let mu1 = get(&after, "body.conv1.weight_mu");
        let per = rho0.len() / gamma.len();
        // Channel 0 has gamma = -0.7: the mean changes sign, the sigma stays positive.
        let c = f64::from(gamma[0]) / (f64::from(var[0]) + 1e-5).sqrt();
        assert!(c < 0.0);
        for i in 0..per {
            let s0 = softplus(f64::from(rho0[i]));
            let s1 = softplus(f64::from(rho1[i]));
            assert!((s1 - s0 * c.abs()).abs() <= 1e-5 * s1, "{s0} {s1} {c}");
            assert!((f64::from(mu1[i]) - f64::from(mu0[i]) * c).abs() < 1e-4);
        }
    }

    #[test]
    fn quantised_file_rebuilds_the_model() {
        let _rng = bnn_layers::lock_device_rng();
        let device = bnn_layers::test_device();
        let net = model(Arch::Resnet20, &device);
        let config = ModelConfig::for_input(Arch::Resnet20, Kind::Bayesian, 10, 3, 16);
        let data = quantize(&net, &config, 8).unwrap();
        let bytes = swshare::format::qbnn::to_bytes(&data).unwrap();
        let back = swshare::format::qbnn::from_bytes(&bytes).unwrap();
        let (q, _) = from_qbnn(&back, &device).unwrap();
        device.seed(9);
        let a = mean_logits(&net, &device);
        device.seed(9);
        let b = mean_logits(&q, &device);
        // int8 means move the logits a little, not wholesale.
        let scale = a.iter().map(|x| x.abs()).fold(0f32, f32::max);
        let err = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(err < 0.1 * scale, "max error {err} of logits up to {scale}");
        assert!(err > 0.0, "quantisation changed nothing");
        // A weight costs one byte for its mean and one for its 8-bit sigma; everything else
        // stays f32.
        let weights = net.counts().bayes_weights;
        let other: usize = export_params(&net)
            .iter()
            .filter(|t| !t.path.contains(".weight_"))
            .map(|t| t.data.len() * 4)
            .sum();
        assert!(
            bytes.len() <= 2 * weights + other + 4096,
            "{} bytes",
            bytes.len()
        );
        let q4 = swshare::format::qbnn::to_bytes(&quantize(&net, &config, 4).unwrap()).unwrap();
        assert!(
            q4.len() + weights / 2 - 64 <= bytes.len(),
            "{} vs {}",
            q4.len(),
            bytes.len()
        );
        // A file for another architecture is an error naming the mismatch, not a panic.
        let mut other = back.clone();
        other.arch = serde_json::to_string(&ModelConfig::for_input(
            Arch::Mlp,
            Kind::Bayesian,
            10,
            3,
            16,
        ))
        .unwrap();
        let e = from_qbnn(&other, &device).unwrap_err();
        assert!(
            matches!(e, Error::DataMismatch { .. } | Error::Layer(_)),
            "{e:?}"
        );
        let e = quantize(&net, &config.clone().with_kind(Kind::Deterministic), 4).unwrap_err();
        assert!(matches!(e, Error::Usage(_)), "{e:?}");
    }
}
