//! A model of the zoo: configuration, construction in each kind, forward pass.

use bnn_layers::{Codebook, CodebookView, ParamCounts, WeightSource};
use burn::config::Config;
use burn::prelude::*;

use crate::classifier::{Architecture, Classifier, ClassifierBody};
use crate::layers::{LayerFactory, ShareFn};
use crate::lenet::LeNet5;
use crate::mlp::Mlp;
use crate::resnet::{BlockKind, ResNet, Shortcut, Stem};
use crate::trained_on::{InputNorm, TabularInput, TrainedOn};
use crate::vit::{Vit, VitShape};
use crate::wrn::WideResNet;
use crate::{Arch, Head, Kind, ModelError, Noise};
use bnn_layers::BayesOptions;

/// Everything needed to build a model; saved with every model file so that evaluation needs no
/// other flags.
#[derive(Config, Debug, PartialEq)]
pub struct ModelConfig {
    /// Architecture.
    pub arch: Arch,
    /// Deterministic, Bayesian or shared.
    pub kind: Kind,
    /// Number of classes.
    pub classes: usize,
    /// Input channels (1 for MNIST-like data, 3 for colour).
    #[config(default = 3)]
    pub in_channels: usize,
    /// Input side in pixels (square images).
    #[config(default = 32)]
    pub image_size: usize,
    /// ResNet-18/50/101 stem: `None` picks the CIFAR stem for images up to 64 px, else ImageNet's.
    #[config(default = "None")]
    pub cifar_stem: Option<bool>,
    /// Hidden widths of the MLP.
    #[config(default = "vec![400, 400]")]
    pub mlp_hidden: Vec<usize>,
    /// How the ResNets' blocks change shape: `None` (what files without the field hold) is
    /// [`Shortcut::Projection`].
    #[config(default = "None")]
    pub shortcut: Option<Shortcut>,
    /// Width of the ResNets' first stage (the others double it stage by stage): `None` is the
    /// architecture's own (16 for ResNet-20, 64 for ResNet-18/50/101). Narrow ResNets keep test
    /// fixtures small.
    #[config(default = "None")]
    pub width: Option<usize>,
    /// Options of the Bayesian layers.
    #[config(default = "BayesOptions::new()")]
    pub bayes: BayesOptions,
    /// Number of shared Gaussians (shared kind).
    #[config(default = 0)]
    pub codebook_len: usize,
    /// The data the model was trained on; `None` in files written before it was recorded,
    /// and for models built outside training (an import, a test).
    #[config(default = "None")]
    pub trained_on: Option<TrainedOn>,
    /// The normalisation of its input images; `None` in files written before it was recorded
    /// (their data set's preset constants apply).
    #[config(default = "None")]
    pub normalization: Option<InputNorm>,
    /// What the outputs mean ([`ModelConfig::head`]): `None`, class logits (what every file
    /// written before regression holds), or a Gaussian per regression target.
    #[config(default = "None")]
    pub head: Option<Head>,
    /// The columns and standardisation of a regression network's tabular input (the MLP on
    /// rows of features); `None` for image models.
    #[config(default = "None")]
    pub tabular: Option<TabularInput>,
}

/// The network body of each architecture.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Body {
    /// MLP.
    Mlp(Mlp),
    /// LeNet-5.
    LeNet5(LeNet5),
    /// ResNets.
    ResNet(ResNet),
    /// Wide ResNets.
    Wrn(WideResNet),
    /// Vision Transformers.
    Vit(Vit),
}

impl ClassifierBody for Body {
    fn forward(&self, x: Tensor<4>, cb: Option<&CodebookView>) -> Tensor<2> {
        match self {
            Body::Mlp(m) => m.forward(x, cb),
            Body::LeNet5(m) => m.forward(x, cb),
            Body::ResNet(m) => m.forward(x, cb),
            Body::Wrn(m) => m.forward(x, cb),
            Body::Vit(m) => m.forward(x, cb),
        }
    }
}

/// A model of the zoo: a [`Classifier`] of the zoo's [`Body`].
pub type Network = Classifier<Body>;

impl ModelConfig {
    /// The same configuration with another kind.
    pub fn with_kind(mut self, kind: Kind) -> Self {
        self.kind = kind;
        self
    }

    /// A regression network on rows of `tabular.features()` features: an MLP (the one
    /// architecture of the zoo that takes a row) with a Gaussian head of `tabular.targets()`
    /// targets and `noise`. Checked as every configuration ([`ModelConfig::validate`]).
    pub fn regression(kind: Kind, tabular: TabularInput, noise: Noise) -> Self {
        let targets = tabular.targets();
        Self::new(Arch::Mlp, kind, 0)
            .with_in_channels(1)
            .with_image_size(1)
            .with_head(Some(Head::Gaussian { targets, noise }))
            .with_tabular(Some(tabular))
    }

    /// The shape `[C, H, W]` of one input: `[1, 1, features]` for a network on tabular rows,
    /// else `[in_channels, image_size, image_size]`.
    pub fn input_shape(&self) -> (usize, usize, usize) {
        match &self.tabular {
            Some(t) => (1, 1, t.features()),
            None => (self.in_channels, self.image_size, self.image_size),
        }
    }

    /// What the outputs mean: class logits unless a head is recorded.
    pub fn head(&self) -> Head {
        self.head.unwrap_or_default()
    }

    /// Outputs of the network body ([`Head::outputs`]).
    pub fn outputs(&self) -> usize {
        self.head().outputs(self.classes)
    }

    /// A configuration with the given architecture, kind and classes, for `image_size` inputs of
    /// `in_channels` channels.
    pub fn for_input(
        arch: Arch,
        kind: Kind,
        classes: usize,
        in_channels: usize,
        image_size: usize,
    ) -> Self {
        Self::new(arch, kind, classes)
            .with_in_channels(in_channels)
            .with_image_size(image_size)
    }

    /// Checks every size against its bound ([`MAX_CLASSES`], [`MAX_IN_CHANNELS`],
    /// [`MAX_IMAGE_SIZE`], [`MAX_MLP_WIDTH`], [`MAX_MLP_LAYERS`], [`MAX_CODEBOOK_LEN`]), so that
    /// no shape computation of any architecture can overflow. Every constructor calls it; a
    /// configuration read from a file passes it before anything is allocated.
    pub fn validate(&self) -> Result<(), ModelError> {
        let bound = |what: &str, value: usize, min: usize, max: usize| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(ModelError::InvalidConfig(format!(
                    "{what} = {value} is out of range: {min} to {max}"
                )))
            }
        };
        self.head().validate()?;
        match self.head() {
            Head::Categorical => {
                bound("classes", self.classes, 1, MAX_CLASSES)?;
                if self.tabular.is_some() {
                    return Err(ModelError::InvalidConfig(
                        "a tabular input record belongs to a regression network (a Gaussian \
                         head), not a classifier"
                            .into(),
                    ));
                }
            }
            Head::Gaussian { targets, .. } => {
                bound("classes of a regression network", self.classes, 0, 0)?;
                let tabular = self.tabular.as_ref().ok_or_else(|| {
                    ModelError::InvalidConfig(
                        "a regression network of the zoo takes rows of features: its \
                         tabular input record is missing"
                            .into(),
                    )
                })?;
                tabular.check()?;
                if tabular.targets() != targets {
                    return Err(ModelError::InvalidConfig(format!(
                        "a Gaussian head of {targets} targets and {} target columns",
                        tabular.targets()
                    )));
                }
                if self.arch != Arch::Mlp {
                    return Err(ModelError::InvalidConfig(format!(
                        "{} takes images; a regression network on rows of features is an mlp",
                        self.arch
                    )));
                }
            }
        }
        bound("in_channels", self.in_channels, 1, MAX_IN_CHANNELS)?;
        bound("image_size", self.image_size, 1, MAX_IMAGE_SIZE)?;
        bound("codebook_len", self.codebook_len, 0, MAX_CODEBOOK_LEN)?;
        if let Some(w) = self.width {
            bound("width", w, 1, MAX_WIDTH)?;
        }
        if let Some(norm) = &self.normalization {
            norm.check(self.in_channels)?;
        }
        if self.arch == Arch::Mlp {
            bound(
                "mlp_hidden layers",
                self.mlp_hidden.len(),
                0,
                MAX_MLP_LAYERS,
            )?;
            for &w in &self.mlp_hidden {
                bound("mlp_hidden width", w, 1, MAX_MLP_WIDTH)?;
            }
        }
        Ok(())
    }

    /// Refuses an option the architecture ignores, naming the option and the architecture:
    /// `width` and `shortcut` shape the ResNets only, `cifar_stem` ResNet-18/50/101 only (a
    /// ResNet-20 always has the CIFAR stem), `mlp_hidden` the MLP only (another architecture
    /// may carry the default). Called where a user's request sets them (`swbnn import`), not
    /// by [`ModelConfig::validate`]: tests set them on every architecture to keep fixtures
    /// small, and files hold the defaults.
    pub fn check_arch_options(&self) -> Result<(), ModelError> {
        let resnet = matches!(
            self.arch,
            Arch::Resnet18 | Arch::Resnet20 | Arch::Resnet50 | Arch::Resnet101
        );
        let stem = matches!(self.arch, Arch::Resnet18 | Arch::Resnet50 | Arch::Resnet101);
        let ignored = [
            ("width", self.width.is_some() && !resnet, "the ResNets"),
            (
                "shortcut",
                self.shortcut.is_some() && !resnet,
                "the ResNets",
            ),
            (
                "cifar_stem",
                self.cifar_stem.is_some() && !stem,
                "ResNet-18, ResNet-50 and ResNet-101",
            ),
            (
                "mlp_hidden",
                self.arch != Arch::Mlp && self.mlp_hidden != [400, 400],
                "the MLP",
            ),
        ];
        match ignored.iter().find(|(_, set, _)| *set) {
            Some((option, _, takes)) => Err(ModelError::InvalidConfig(format!(
                "{option} is an option of {takes}; {} does not take it",
                self.arch
            ))),
            None => Ok(()),
        }
    }

    /// Path and shape of every float parameter (and running statistic) of this configuration,
    /// in visiting order, without allocating the parameters ([`Architecture::param_shapes`]).
    pub fn param_shapes(&self, device: &Device) -> Result<Vec<(String, Vec<usize>)>, ModelError> {
        Architecture::param_shapes(self, device)
    }

    fn body(&self, f: &mut LayerFactory<'_>) -> Result<Body, ModelError> {
        let (c, s, k) = (self.in_channels, self.image_size, self.outputs());
        let stem = match self.cifar_stem.unwrap_or(s <= 64) {
            true => Stem::Cifar,
            false => Stem::ImageNet,
        };
        let shortcut = self.shortcut.unwrap_or_default();
        let resnet = |f: &mut LayerFactory<'_>, kind, blocks: &[usize], widths: &[usize], stem| {
            Body::ResNet(ResNet::new(f, kind, shortcut, blocks, widths, stem, c, k))
        };
        let base = |default: usize| self.width.unwrap_or(default);
        let cifar_widths = [base(16), 2 * base(16), 4 * base(16)];
        let imagenet_widths = [base(64), 2 * base(64), 4 * base(64), 8 * base(64)];
        Ok(match self.arch {
            Arch::Mlp => {
                let (c, h, w) = self.input_shape();
                Body::Mlp(Mlp::new(f, c * h * w, &self.mlp_hidden, k))
            }
            Arch::Lenet5 => Body::LeNet5(LeNet5::new(f, c, s, k)?),
            Arch::Resnet20 => resnet(f, BlockKind::Basic, &[3, 3, 3], &cifar_widths, Stem::Cifar),
            Arch::Resnet18 => resnet(f, BlockKind::Basic, &[2, 2, 2, 2], &imagenet_widths, stem),
            Arch::Resnet50 => resnet(
                f,
                BlockKind::Bottleneck,
                &[3, 4, 6, 3],
                &imagenet_widths,
                stem,
            ),
            Arch::Resnet101 => resnet(
                f,
                BlockKind::Bottleneck,
                &[3, 4, 23, 3],
                &imagenet_widths,
                stem,
            ),
            Arch::Wrn28x10 => Body::Wrn(WideResNet::new(f, 28, 10, c, k)?),
            Arch::VitB16 => {
                let shape = VitShape {
                    patch: 16,
                    dim: 768,
                    depth: 12,
                    heads: 12,
                    mlp_dim: 3072,
                };
                Body::Vit(Vit::new(f, shape, c, s, k)?)
            }
            Arch::VitTiny => {
                let patch = if s % 4 == 0 && s >= 16 { 4 } else { 7.min(s) };
                let shape = VitShape {
                    patch,
                    dim: 64,
                    depth: 4,
                    heads: 4,
                    mlp_dim: 128,
                };
                Body::Vit(Vit::new(f, shape, c, s, k)?)
            }
        })
    }

    /// Builds a deterministic or Bayesian model ([`Architecture::init`]).
    pub fn init(&self, device: &Device) -> Result<Network, ModelError> {
        Architecture::init(self, device)
    }

    /// Builds the shared kind from the weight sources `share` gives by layer path
    /// ([`Architecture::init_shared`]).
    pub fn init_shared(
        &self,
        device: &Device,
        share: &mut ShareFn<'_>,
        codebook: Codebook,
    ) -> Result<Network, ModelError> {
        Architecture::init_shared(self, device, share, codebook)
    }

    /// Paths of the layers with weights ([`Architecture::layer_paths`]).
    pub fn layer_paths(&self, device: &Device) -> Result<Vec<String>, ModelError> {
        Architecture::layer_paths(self, device)
    }

    /// Parameter counts of this configuration, without allocating the model
    /// ([`Architecture::counts`]).
    pub fn counts(&self, device: &Device) -> Result<ParamCounts, ModelError> {
        Architecture::counts(self, device)
    }
}

/// The zoo is one architecture among others: its layers come from the same factory.
impl Architecture for ModelConfig {
    type Body = Body;

    fn kind(&self) -> Kind {
        self.kind
    }

    fn codebook_len(&self) -> usize {
        self.codebook_len
    }

    fn bayes_options(&self) -> &BayesOptions {
        &self.bayes
    }

    fn head(&self) -> Head {
        self.head.unwrap_or_default()
    }

    fn to_kind(&self, kind: Kind, codebook_len: usize) -> Self {
        self.clone().with_kind(kind).with_codebook_len(codebook_len)
    }

    fn build(&self, layers: &mut LayerFactory<'_>) -> Result<Body, ModelError> {
        self.body(layers)
    }

    fn validate(&self) -> Result<(), ModelError> {
        ModelConfig::validate(self)
    }
}

/// Most classes a configuration may have: ImageNet-21k's 21,841 rounded up to a power of two,
/// the bound of the data sets too (`bnn_data::MAX_CLASSES`, which this crate does not depend
/// on; a test of `swbnn-ops`, which sees both, holds them equal), so that a model is never
/// made for more classes than a data set may have.
pub const MAX_CLASSES: usize = 32_768;
/// Widest first ResNet stage ([`ModelConfig::width`]).
pub const MAX_WIDTH: usize = 4096;
/// Most input channels.
pub const MAX_IN_CHANNELS: usize = 64;
/// Largest input side in pixels, also the largest `--image-size` a folder's images are resized
/// to. The architectures are made for 28 to 224 pixels (ImageNet's 224 is the largest preset);
/// at 1,024 pixels LeNet-5's first dense layer alone has 123 million weights and one batch of a
/// ResNet's first activations is 34 GB, so a larger side is a typo rather than a plan (4,096 on
/// 600 images asked for 10 GB at once and aborted).
pub const MAX_IMAGE_SIZE: usize = 1024;
/// Widest MLP hidden layer.
pub const MAX_MLP_WIDTH: usize = 1 << 20;
/// Most MLP hidden layers.
pub const MAX_MLP_LAYERS: usize = 64;
/// Most codebook entries (the `.swb` index holds at most 65,534).
pub const MAX_CODEBOOK_LEN: usize = 65_534;

/// A [`ShareFn`] for tests and summaries: every weight of every layer uses codebook entry 0.
pub fn share_all_first(_path: &str, shape: &[usize]) -> Result<Vec<WeightSource>, ModelError> {
    Ok(vec![WeightSource::Codebook(0); shape.iter().product()])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes read from a file are checked before any shape arithmetic: these used to overflow
    /// (`c * s * s` for the MLP) or ask for hundreds of gigabytes.
    #[test]
    fn absurd_sizes_are_errors_not_panics() {
        let device = bnn_layers::test_device();
        let base = ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 10, 1, 28);
        for (config, needle) in [
            (base.clone().with_image_size(1 << 32), "image_size"),
            (base.clone().with_in_channels(1 << 40), "in_channels"),
            (
                ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 1_000_000_000, 1, 28),
                "classes",
            ),
            (
                ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 0, 1, 28),
                "classes",
            ),
            (base.clone().with_mlp_hidden(vec![1 << 30]), "mlp_hidden"),
            (base.clone().with_codebook_len(1 << 20), "codebook_len"),
        ] {
            let err = config.init(&device).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
            assert!(config.param_shapes(&device).is_err());
        }
    }

    fn tabular(features: usize, targets: usize) -> TabularInput {
        TabularInput {
            feature_names: (0..features).map(|i| format!("x{i}")).collect(),
            target_names: (0..targets).map(|i| format!("y{i}")).collect(),
            feature_mean: vec![0.0; features],
            feature_std: vec![1.0; features],
            target_mean: vec![0.0; targets],
            target_std: vec![1.0; targets],
        }
    }

    /// A regression MLP takes rows of its features and gives a mean and a std per target (two
    /// outputs each, heteroscedastic; one and the learned noise, homoscedastic), in every kind.
    #[test]
    fn a_regression_mlp_reads_rows_and_predicts_gaussians() {
        let device = bnn_layers::test_device();
        for (noise, outputs, params) in
            [(Noise::Heteroscedastic, 4, 0), (Noise::Homoscedastic, 2, 1)]
        {
            let config = ModelConfig::regression(Kind::Bayesian, tabular(3, 2), noise)
                .with_mlp_hidden(vec![8]);
            config.validate().unwrap();
            assert_eq!(
                (config.input_shape(), config.outputs()),
                ((1, 1, 3), outputs)
            );
            let model = config.init(&device).unwrap();
            assert_eq!(model.noise_rho.iter().count(), params);
            let out = model.forward(Tensor::zeros([5, 1, 1, 3], &device));
            assert_eq!(out.dims(), [5, outputs]);
            let (mean, std) = model.mean_std(out).unwrap();
            assert_eq!((mean.dims(), std.dims()), ([5, 2], [5, 2]));
            let json = serde_json::to_string(&config).unwrap();
            assert_eq!(serde_json::from_str::<ModelConfig>(&json).unwrap(), config);
        }
        let base = ModelConfig::regression(Kind::Bayesian, tabular(3, 2), Noise::Heteroscedastic);
        let lenet = ModelConfig {
            arch: Arch::Lenet5,
            ..base.clone()
        };
        let classes = ModelConfig {
            classes: 10,
            ..base.clone()
        };
        for (bad, needle) in [
            (lenet, "mlp"),
            (classes, "classes"),
            (
                base.clone().with_tabular(None),
                "tabular input record is missing",
            ),
            (
                base.clone().with_tabular(Some(tabular(3, 1))),
                "2 targets and 1 target columns",
            ),
            (
                ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 10, 1, 28)
                    .with_tabular(Some(tabular(3, 1))),
                "belongs to a regression network",
            ),
        ] {
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.contains(needle), "`{needle}` not in: {e}");
        }
    }

    /// An option the architecture ignores is an error naming both; the ones it takes pass.
    #[test]
    fn options_an_architecture_ignores_are_refused() {
        let lenet = ModelConfig::for_input(Arch::Lenet5, Kind::Bayesian, 10, 1, 28);
        lenet.check_arch_options().unwrap();
        for (config, option) in [
            (lenet.clone().with_width(Some(64)), "width"),
            (
                lenet
                    .clone()
                    .with_shortcut(Some(crate::resnet::Shortcut::ZeroPad)),
                "shortcut",
            ),
            (lenet.clone().with_cifar_stem(Some(true)), "cifar_stem"),
            (lenet.clone().with_mlp_hidden(vec![16]), "mlp_hidden"),
            (
                ModelConfig::for_input(Arch::Resnet20, Kind::Bayesian, 10, 3, 32)
                    .with_cifar_stem(Some(false)),
                "cifar_stem",
            ),
        ] {
            let e = config.check_arch_options().unwrap_err().to_string();
            assert!(
                e.contains(option) && e.contains(&config.arch.to_string()),
                "{e}"
            );
        }
        let resnet = ModelConfig::for_input(Arch::Resnet18, Kind::Bayesian, 10, 3, 32)
            .with_width(Some(8))
            .with_cifar_stem(Some(true))
            .with_shortcut(Some(crate::resnet::Shortcut::ZeroPad));
        resnet.check_arch_options().unwrap();
        ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 10, 1, 28)
            .with_mlp_hidden(vec![16])
            .check_arch_options()
            .unwrap();
    }

    /// The shapes come without allocating: an MLP of 2 x 10^11 weights is listed in no time.
    #[test]
    fn param_shapes_are_lazy_and_named_like_exports() {
        let device = bnn_layers::test_device();
        let big = ModelConfig::for_input(Arch::Mlp, Kind::Shared, 10, 3, 1024)
            .with_mlp_hidden(vec![65536]);
        let shapes = big.param_shapes(&device).unwrap();
        let n: usize = shapes
            .iter()
            .map(|(_, s)| s.iter().product::<usize>())
            .sum();
        assert!(n > 100_000_000_000, "{n}");
        let small = ModelConfig::for_input(Arch::Lenet5, Kind::Bayesian, 10, 1, 28);
        let exported: Vec<(String, Vec<usize>)> =
            bnn_layers::export_params(&small.init(&device).unwrap())
                .into_iter()
                .map(|t| (t.path, t.shape))
                .collect();
        assert_eq!(small.param_shapes(&device).unwrap(), exported);
    }

    /// A `config.json` written before the shortcut and width fields loads as the option-B,
    /// standard-width model it described.
    #[test]
    fn old_config_files_load_with_projection_shortcuts() {
        let device = bnn_layers::test_device();
        let mut json = serde_json::to_value(ModelConfig::for_input(
            Arch::Resnet20,
            Kind::Bayesian,
            10,
            3,
            32,
        ))
        .unwrap();
        let map = json.as_object_mut().unwrap();
        map.remove("shortcut");
        map.remove("width");
        // Nor the head and the tabular input, which came with regression: a classifier.
        map.remove("head");
        map.remove("tabular");
        let old: ModelConfig = serde_json::from_value(json).unwrap();
        assert_eq!((old.shortcut, old.width), (None, None));
        assert_eq!((old.head(), old.outputs()), (Head::Categorical, 10));
        let shapes = old.param_shapes(&device).unwrap();
        assert!(shapes.iter().any(|(p, _)| p.contains("downsample.conv")));
        // Option A has no shortcut parameters: 2 projections of (mu, rho) and 2 batch norms
        // of 4 tensors fewer.
        let mut a = old.clone();
        a.shortcut = Some(crate::resnet::Shortcut::ZeroPad);
        let a_shapes = a.param_shapes(&device).unwrap();
        assert_eq!(shapes.len() - a_shapes.len(), 2 * 2 + 2 * 4);
        assert!(!a_shapes.iter().any(|(p, _)| p.contains("downsample")));
        let logits = a
            .init(&device)
            .unwrap()
            .forward(Tensor::zeros([2, 3, 32, 32], &device));
        assert_eq!(logits.dims(), [2, 10]);
    }
}
