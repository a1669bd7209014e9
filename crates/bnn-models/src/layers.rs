//! Layers that are deterministic, Bayesian or weight-shared, chosen when the model is built,
//! and the factory that builds them.
//!
//! Enum variant names are left out of parameter paths (see `bnn_layers`), so a layer has the
//! same path, e.g. `layer1.0.conv1`, in every kind of the same architecture.

use bnn_layers::{
    BayesConv2d, BayesConv2dConfig, BayesLinear, BayesLinearConfig, BayesOptions, CodebookView,
    SharedConv2d, SharedLinear, WeightSource,
};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Linear, LinearConfig, PaddingConfig2d};
use burn::prelude::*;

use crate::{Kind, ModelError};

/// The sources of a shared layer's weights, asked for by layer path and weight shape.
pub type ShareFn<'a> = dyn FnMut(&str, &[usize]) -> Result<Vec<WeightSource>, ModelError> + 'a;

/// Builds the layers of one model in one kind, and records their paths.
pub struct LayerFactory<'a> {
    kind: Kind,
    options: BayesOptions,
    device: Device,
    share: Option<&'a mut ShareFn<'a>>,
    codebook_len: usize,
    /// Paths of the layers built so far, in order.
    pub paths: Vec<String>,
    prefix: String,
    error: Option<ModelError>,
}

impl<'a> LayerFactory<'a> {
    /// A factory for deterministic or Bayesian layers.
    pub fn new(kind: Kind, options: BayesOptions, device: &Device) -> Self {
        Self {
            kind,
            options,
            device: device.clone(),
            share: None,
            codebook_len: 0,
            paths: Vec::new(),
            prefix: String::new(),
            error: None,
        }
    }

    /// A factory for shared layers, whose weight sources come from `share`.
    pub fn shared(
        options: BayesOptions,
        device: &Device,
        share: &'a mut ShareFn<'a>,
        codebook_len: usize,
    ) -> Self {
        Self {
            kind: Kind::Shared,
            options,
            device: device.clone(),
            share: Some(share),
            codebook_len,
            paths: Vec::new(),
            prefix: String::new(),
            error: None,
        }
    }

    /// Prepends `prefix` (e.g. `"body."`) to every layer path, so paths match the module tree
    /// the layers end up in.
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        self.prefix = prefix.to_string();
        self
    }

    /// The device layers are built on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The first error met while building, if any.
    pub fn finish(self) -> Result<Vec<String>, ModelError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.paths),
        }
    }

    fn sources(&mut self, path: &str, shape: &[usize]) -> Option<Vec<WeightSource>> {
        let share = self.share.as_mut()?;
        match share(path, shape) {
            Ok(s) => Some(s),
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }

    /// A `k x k` convolution with symmetric padding.
    #[allow(clippy::too_many_arguments)]
    pub fn conv(
        &mut self,
        path: &str,
        c_in: usize,
        c_out: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        bias: bool,
    ) -> Conv {
        let path = &format!("{}{path}", self.prefix);
        self.paths.push(path.clone());
        if self.kind == Kind::Deterministic {
            return Conv::Det(
                Conv2dConfig::new([c_in, c_out], [kernel, kernel])
                    .with_stride([stride, stride])
                    .with_padding(PaddingConfig2d::Explicit(
                        padding, padding, padding, padding,
                    ))
                    .with_bias(bias)
                    .init(&self.device),
            );
        }
        let bayes = BayesConv2dConfig::new([c_in, c_out], [kernel, kernel])
            .with_stride([stride, stride])
            .with_padding([padding, padding])
            .with_bias(bias)
            .with_options(self.options.clone())
            .init(&self.device);
        if self.kind == Kind::Bayesian {
            return Conv::Bayes(bayes);
        }
        let shape = bayes.weight_mu.shape().dims::<4>();
        match self.sources(path, &shape) {
            Some(sources) => match SharedConv2d::from_bayes(&bayes, &sources, self.codebook_len) {
                Ok(layer) => Conv::Shared(layer),
                Err(source) => {
                    self.error.get_or_insert(ModelError::Layer {
                        path: path.into(),
                        source,
                    });
                    Conv::Bayes(bayes)
                }
            },
            None => Conv::Bayes(bayes),
        }
    }

    /// A dense layer.
    pub fn linear(&mut self, path: &str, d_in: usize, d_out: usize, bias: bool) -> Dense {
        let path = &format!("{}{path}", self.prefix);
        self.paths.push(path.clone());
        if self.kind == Kind::Deterministic {
            return Dense::Det(
                LinearConfig::new(d_in, d_out)
                    .with_bias(bias)
                    .init(&self.device),
            );
        }
        let bayes = BayesLinearConfig::new(d_in, d_out)
            .with_bias(bias)
            .with_options(self.options.clone())
            .init(&self.device);
        if self.kind == Kind::Bayesian {
            return Dense::Bayes(bayes);
        }
        let shape = bayes.weight_mu.shape().dims::<2>();
        match self.sources(path, &shape) {
            Some(sources) => match SharedLinear::from_bayes(&bayes, &sources, self.codebook_len) {
                Ok(layer) => Dense::Shared(layer),
                Err(source) => {
                    self.error.get_or_insert(ModelError::Layer {
                        path: path.into(),
                        source,
                    });
                    Dense::Bayes(bayes)
                }
            },
            None => Dense::Bayes(bayes),
        }
    }
}

/// A 2-D convolution of any kind.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)] // one per layer; boxing would only add indirection
pub enum Conv {
    /// Deterministic.
    Det(Conv2d),
    /// Mean-field Bayesian.
    Bayes(BayesConv2d),
    /// Weight-shared Bayesian.
    Shared(SharedConv2d),
}

const NO_CODEBOOK: &str =
    "a shared layer needs the model's codebook (build shared models with ModelConfig::init_shared)";

impl Conv {
    /// Forward pass; `codebook` is the model's codebook view (shared layers only).
    pub fn forward(&self, x: Tensor<4>, codebook: Option<&CodebookView>) -> Tensor<4> {
        match self {
            Conv::Det(c) => bnn_layers::flexops::conv2d_layer(c, x),
            Conv::Bayes(c) => c.forward(x),
            Conv::Shared(c) => c.forward(x, codebook.expect(NO_CODEBOOK)),
        }
    }
}

/// A dense layer of any kind.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)] // one per layer; boxing would only add indirection
pub enum Dense {
    /// Deterministic.
    Det(Linear),
    /// Mean-field Bayesian.
    Bayes(BayesLinear),
    /// Weight-shared Bayesian.
    Shared(SharedLinear),
}

impl Dense {
    /// Forward pass over the last dimension.
    pub fn forward<const D: usize>(
        &self,
        x: Tensor<D>,
        codebook: Option<&CodebookView>,
    ) -> Tensor<D> {
        match self {
            Dense::Det(l) => l.forward(x),
            Dense::Bayes(l) => l.forward(x),
            Dense::Shared(l) => l.forward(x, codebook.expect(NO_CODEBOOK)),
        }
    }
}
