//! Stochastic weight sharing for Bayesian neural networks (2DGBNN).
//!
//! This is the burn-free core of the method: plain functions over flat arrays.
//!
//! 1. **Outliers** ([`detect_outliers`]): shareable weights with `|mu| > tau_w` or a top-`P_g`
//!    `|d loss / d mu|` keep their own distribution.
//! 2. **GMM** ([`fit_gmm`]): a `K`-component 2-D GMM (via `gmm-minibatch`) over the inliers'
//!    `(mu, sigma)`; every inlier is hard-assigned to a component.
//! 3. **Refinement**: cluster-size reduction ([`reduce_small_clusters`]), ellipse weights with
//!    alpha-blending ([`detect_ellipses`]) and merging of close Gaussians
//!    ([`merge_gaussians`]).
//!
//! [`build_plan`] runs them all and returns a [`SharingPlan`] (codebook, one [`WeightFate`]
//! per shareable weight, ellipse blends) and a [`CompressionReport`]. Every threshold is a
//! field of [`SwshareConfig`] with the paper's value as default; the crate README explains the
//! choices where the paper contradicts itself.
//!
//! ```
//! use swshare::{build_plan, SwshareConfig, WeightFate, WeightTableBuilder};
//!
//! // A tiny synthetic "network": one shareable layer of 600 weights around two (mu, sigma)
//! // clusters plus two large weights, and an unshareable bias.
//! let mut mu = Vec::new();
//! let mut sigma = Vec::new();
//! for i in 0..600 {
//!     let t = (i as f32 * 0.618).fract() - 0.5; // deterministic spread in [-0.5, 0.5)
//!     let s = (i as f32 * 0.414).fract() - 0.5;
//!     let centre = if i % 2 == 0 { -0.05 } else { 0.08 };
//!     mu.push(centre + 0.01 * t);
//!     sigma.push(0.010 + 0.001 * s);
//! }
//! mu[0] = 0.9; // |mu| > tau_w = 0.2: an outlier
//! mu[1] = -0.7;
//! let mut b = WeightTableBuilder::new();
//! b.push_layer("fc.weight", &[20, 30], true, &mu, &sigma, None)
//!     .push_layer("fc.bias", &[20], false, &[0.0; 20], &[0.01; 20], None);
//! let table = b.build()?;
//!
//! let mut cfg = SwshareConfig::default();
//! cfg.gmm.k = 4; // the paper's K = 2000 needs a real network
//! cfg.refine.n_min = 5;
//! let (plan, report) = build_plan(&table, &cfg)?;
//!
//! plan.validate()?;
//! assert_eq!(plan.fates.len(), 600); // shareable weights only
//! assert!(matches!(plan.fates[0], WeightFate::Outlier(_)));
//! assert_eq!(
//!     report.outliers + report.plain_shared + report.ellipse_weights,
//!     report.shareable_weights
//! );
//! assert!(report.gaussians_after_merge <= 4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

#[cfg(feature = "burn")]
pub mod burn_edges;
#[cfg(feature = "burn")]
pub mod compress;
pub mod config;
pub mod ellipse;
pub mod error;
pub mod fate;
pub mod format;
pub mod gmm_stage;
pub mod merge;
pub mod mu_only;
pub mod outliers;
pub mod pipeline;
pub mod plan;
pub mod report;
#[cfg(feature = "burn")]
pub mod retrain_stop;
#[cfg(feature = "burn")]
pub mod safetensors_file;
pub mod small_clusters;
#[cfg(feature = "burn")]
pub mod snr_prune;
pub mod synth;
pub mod table;

/// The README's examples, compiled and run as doctests.
#[cfg(all(doctest, feature = "burn"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use config::{
    EllipseConfig, MergeConfig, MergeRule, OutlierConfig, RefineConfig, SharingSpace,
    SmallClusterPolicy, SwshareConfig,
};
pub use ellipse::detect_ellipses;
pub use error::SwshareError;
pub use fate::{OutlierCause, WeightFate};
pub use format::{
    EllipseEntry, FileSizes, FormatError, LayerShape, NamedTensor, SaveOptions, SharedModelData,
    SwbError,
};
pub use gmm_stage::fit_gmm;
pub use merge::{MergeOutcome, merge_gaussians};
pub use outliers::{OutlierMask, detect_outliers};
pub use pipeline::build_plan;
pub use plan::{CodebookEntry, EllipseWeight, FateCounts, MAX_BLEND, PlanError, SharingPlan};
pub use report::{CompressionReport, ConfidenceCheck, RetrainStopTrace, StageTimings};
pub use small_clusters::{SmallClusterOutcome, reduce_small_clusters};
pub use table::{LayerInfo, TableError, WeightTable, WeightTableBuilder};
