//! Your own classifier, written once from the layers of [`LayerFactory`] and built
//! deterministic, Bayesian or weight-shared: the one public way every model goes through the
//! method. The zoo's [`crate::ModelConfig`] is one implementation of [`Architecture`], with no
//! special path.
//!
//! You write two things:
//! - the **body** (a burn [`Module`]) and its forward pass, [`ClassifierBody::forward`], which
//!   hands the codebook to every layer;
//! - its **configuration** (serialisable, stored in `.swb` files), which builds the body from a
//!   [`LayerFactory`] with [`Architecture::build`] and says which kind it is.
//!
//! [`Architecture::init`] then builds the deterministic or Bayesian model,
//! [`Architecture::init_shared`] the weight-shared one, each a [`Classifier`] whose layer paths
//! are the same in every kind (`body.<your field>`). See the `custom_model` example of the
//! `swshare` crate for the whole method on such a model.

use bnn_layers::{BayesOptions, Codebook, CodebookView, ParamCounts, count_params};
use burn::module::{ModuleDisplay, ModuleVisitor, Param};
use burn::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::layers::{LayerFactory, ShareFn};
use crate::{Head, Kind, ModelError};

/// Path prefix of every layer: the `body` field of [`Classifier`].
pub(crate) const BODY: &str = "body.";

/// The layers of a classifier, built by [`Architecture::build`].
pub trait ClassifierBody: Module + ModuleDisplay + 'static {
    /// `[batch, channels, h, w] -> [batch, classes]` logits. `codebook` is the shared
    /// Gaussians of a weight-shared model (`None` in the other kinds): pass it to every
    /// layer of [`LayerFactory`].
    fn forward(&self, x: Tensor<4>, codebook: Option<&CodebookView>) -> Tensor<2>;
}

/// A network in one kind: its body and, for the shared kind, the global codebook. A
/// classifier's outputs are class logits; a regression network's are read by its Gaussian
/// [`Head`] ([`Classifier::mean_std`]).
#[derive(Module, Debug)]
pub struct Classifier<B: ClassifierBody> {
    /// The layers.
    pub body: B,
    /// Shared Gaussians (shared kind only).
    pub codebook: Option<Codebook>,
    /// The noise `rho` per target of a homoscedastic Gaussian head (`std = softplus(rho) +
    /// MIN_STD`, [`crate::head`]); `None` for every other head. A point estimate in every
    /// kind: it is not a weight, has no prior and is never shared.
    pub noise_rho: Option<Param<Tensor<1>>>,
    /// What the outputs mean (set by the architecture, not stored in records).
    #[module(skip)]
    pub head: Head,
}

impl<B: ClassifierBody> Classifier<B> {
    /// `[batch, channels, h, w] -> [batch, outputs]`: class logits for a categorical head, the
    /// raw outputs of a Gaussian one ([`Classifier::mean_std`] reads them).
    pub fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let view = self.codebook.as_ref().map(Codebook::view);
        self.body.forward(x, view.as_ref())
    }

    /// What the outputs mean.
    pub fn head(&self) -> Head {
        self.head
    }

    /// The predictive mean and standard deviation `[batch, T]` of a regression network, in
    /// standardised target units, from its outputs `[batch, outputs]`
    /// ([`Head::mean_std`]); an error for a classifier.
    pub fn mean_std(&self, outputs: Tensor<2>) -> Result<(Tensor<2>, Tensor<2>), ModelError> {
        self.head.mean_std(outputs, self.noise_rho.as_ref())
    }

    /// Parameter counts, from shapes only.
    pub fn counts(&self) -> ParamCounts {
        count_params(self)
    }

    /// Path and shape of every float parameter (and running statistic), in visiting order,
    /// without reading or initialising any (paths as `bnn_layers::export_params`').
    pub fn param_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let mut shapes = ShapeVisitor::default();
        self.visit(&mut shapes);
        shapes.out
    }
}

/// The configuration of a classifier: everything needed to build it, saved with every model
/// file (as JSON), so that loading needs no other input.
///
/// An implementation stores the kind, the codebook length and the Bayesian options beside
/// its own fields, and builds its body from a [`LayerFactory`], which makes each layer
/// deterministic, Bayesian or shared as the factory's kind says.
pub trait Architecture:
    Clone + std::fmt::Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// The layers this configuration builds.
    type Body: ClassifierBody;

    /// Deterministic, Bayesian or shared.
    fn kind(&self) -> Kind;

    /// Number of shared Gaussians (0 unless shared).
    fn codebook_len(&self) -> usize;

    /// Options of the Bayesian and shared layers.
    fn bayes_options(&self) -> &BayesOptions;

    /// What the body's outputs mean: class logits (the default) or a Gaussian per regression
    /// target, whose body must then have [`Head::outputs`] outputs.
    fn head(&self) -> Head {
        Head::Categorical
    }

    /// The same configuration in another kind, with `codebook_len` shared Gaussians.
    fn to_kind(&self, kind: Kind, codebook_len: usize) -> Self;

    /// Builds the layers, each with `layers`' kind; an impossible size is an error.
    fn build(&self, layers: &mut LayerFactory<'_>) -> Result<Self::Body, ModelError>;

    /// Checks every size against its bound before anything is built; called on every
    /// configuration read from a file. The default accepts everything.
    fn validate(&self) -> Result<(), ModelError> {
        Ok(())
    }

    /// Builds a deterministic or Bayesian model. The shared kind needs a sharing plan: use
    /// [`Architecture::init_shared`].
    fn init(&self, device: &Device) -> Result<Classifier<Self::Body>, ModelError> {
        if self.kind() == Kind::Shared {
            return Err(ModelError::InvalidConfig(
                "the shared kind is built from a sharing plan with init_shared".into(),
            ));
        }
        self.validate()?;
        let mut f =
            LayerFactory::new(self.kind(), self.bayes_options().clone(), device).with_prefix(BODY);
        let body = self.build(&mut f)?;
        f.finish()?;
        let head = self.head();
        head.validate()?;
        Ok(Classifier {
            body,
            codebook: None,
            noise_rho: head.noise_param(device),
            head,
        })
    }

    /// Builds the shared kind: `share(path, shape)` gives the `WeightSource` of every weight of
    /// the layer at `path`, `codebook` the shared Gaussians. Biases and other parameters start
    /// from their initialisation; copy trained ones with `bnn_layers::shared_from_bayes` or
    /// `bnn_layers::import_params` (both by path).
    fn init_shared(
        &self,
        device: &Device,
        share: &mut ShareFn<'_>,
        codebook: Codebook,
    ) -> Result<Classifier<Self::Body>, ModelError> {
        self.validate()?;
        let len = codebook.len();
        let mut f = LayerFactory::shared(self.bayes_options().clone(), device, share, len)
            .with_prefix(BODY);
        let body = self.build(&mut f)?;
        f.finish()?;
        let head = self.head();
        head.validate()?;
        Ok(Classifier {
            body,
            codebook: Some(codebook),
            noise_rho: head.noise_param(device),
            head,
        })
    }

    /// Path and shape of every float parameter (and running statistic), in visiting order,
    /// without allocating the parameters (they stay lazy). The shared kind is listed as its
    /// Bayesian counterpart, whose weights the plan replaces.
    fn param_shapes(&self, device: &Device) -> Result<Vec<(String, Vec<usize>)>, ModelError> {
        self.validate()?;
        let kind = match self.kind() {
            Kind::Deterministic => Kind::Deterministic,
            Kind::Bayesian | Kind::Shared => Kind::Bayesian,
        };
        Ok(self.to_kind(kind, 0).init(device)?.param_shapes())
    }

    /// Paths of the layers with weights, in the stable order of the weight-sharing stages
    /// (nothing is allocated).
    fn layer_paths(&self, device: &Device) -> Result<Vec<String>, ModelError> {
        self.validate()?;
        let mut f = LayerFactory::new(Kind::Deterministic, self.bayes_options().clone(), device)
            .with_prefix(BODY);
        self.build(&mut f)?;
        f.finish()
    }

    /// Parameter counts of this configuration, without allocating the model. For the shared
    /// kind, every shareable weight is counted as shared in a codebook of `codebook_len`
    /// entries with no outliers (the plan decides the real split).
    fn counts(&self, device: &Device) -> Result<ParamCounts, ModelError> {
        self.validate()?;
        let kind = match self.kind() {
            Kind::Deterministic => Kind::Deterministic,
            Kind::Bayesian | Kind::Shared => Kind::Bayesian,
        };
        let mut c = self.to_kind(kind, 0).init(device)?.counts();
        if self.kind() == Kind::Shared {
            let k = self.codebook_len();
            c.trainable = c.trainable - 2 * c.bayes_weights + 2 * k;
            c.shared_weights = c.bayes_weights;
            c.bayes_weights = 0;
            c.codebook = k;
        }
        Ok(c)
    }
}

/// Collects `(path, shape)` of every float parameter without initialising lazy ones; paths as
/// `bnn_layers`' (enum variant names left out).
#[derive(Default)]
struct ShapeVisitor {
    path: bnn_layers::ModulePath,
    out: Vec<(String, Vec<usize>)>,
}

impl ModuleVisitor for ShapeVisitor {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.exit();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.out
            .push((self.path.joined(), param.lazy_shape().to_vec()));
    }
}
