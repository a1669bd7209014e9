//! The model zoo of stochastic weight sharing: ResNet-18/20/50/101, WRN-28-10, ViT-B/16 and
//! small models for tests (MLP, LeNet-5, a tiny ViT), each written once and built in three
//! kinds: deterministic, Bayesian (mean-field) and weight-shared.
//!
//! The zoo's [`ModelConfig`] is one [`Architecture`]: a classifier of your own, written from
//! the layers of [`LayerFactory`], is built in the three kinds the same way ([`classifier`]).
//!
//! ```
//! use bnn_models::{Arch, Kind, ModelConfig};
//! use burn::prelude::*;
//!
//! let device = bnn_layers::test_device();
//! let config = ModelConfig::for_input(Arch::Lenet5, Kind::Bayesian, 10, 1, 28);
//! let model = config.init(&device).unwrap();
//! let logits = model.forward(Tensor::zeros([2, 1, 28, 28], &device));
//! assert_eq!(logits.dims(), [2, 10]);
//! assert_eq!(model.counts().bayes_weights, 61_470);
//! ```
#![warn(missing_docs)]

pub mod classifier;
mod error;
pub mod head;
mod kind;
pub mod layers;
pub mod lenet;
pub mod mlp;
mod network;
pub mod resnet;
pub mod torch_names;
mod trained_on;
pub mod vit;
pub mod wrn;

pub use bnn_layers::BayesOptions;
pub use classifier::{Architecture, Classifier, ClassifierBody};
pub use error::ModelError;
pub use head::{Head, MAX_TARGETS, MIN_STD, Noise};
pub use kind::{Arch, Kind};
pub use layers::{Conv, Dense, LayerFactory, ShareFn};
pub use network::{
    Body, MAX_CLASSES, MAX_CODEBOOK_LEN, MAX_IMAGE_SIZE, MAX_IN_CHANNELS, MAX_MLP_LAYERS,
    MAX_MLP_WIDTH, MAX_WIDTH, ModelConfig, Network, share_all_first,
};
pub use trained_on::{InputNorm, MAX_FEATURES, TabularInput, TrainedOn};
