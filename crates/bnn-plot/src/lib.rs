//! Figures for (Bayesian) neural networks, classifiers and regression networks, and
//! weight-shared models, on plain data.
//!
//! No deep-learning framework: inputs are slices, [`bnn_metrics`] results and small structs.
//! One function per figure, each taking the data, a [`Size`] and an output path; the path's
//! extension picks PNG or SVG, drawn by one code path (plotters' bitmap and SVG backends).
//! Text uses an embedded copy of DejaVu Sans, so nothing is needed from the system at run
//! time. Colours come from the Okabe-Ito palette, which readers with colour-vision
//! deficiencies can tell apart.
//!
//! * [`reliability`]: accuracy per confidence bin with the gap bars, the confidence histogram
//!   under it, ECE in the title; one column per model.
//! * [`ood`]: in- vs out-of-distribution histograms of max-probability, predictive entropy and
//!   mutual information, and the ROC curves with their AUROC.
//! * [`weights`]: the `(mu, sigma)` plane of a Bayesian network's weights coloured by fate,
//!   with the 1- and 2-sigma ellipses of the shared Gaussians; stays fast for millions of
//!   weights (see [`WeightsOptions`]).
//! * [`per_class`]: box plots of the confidence per class, with each class's mean above its box.
//! * [`corruptions`]: accuracy, NLL and ECE against corruption severity, one line per method.
//! * [`coverage`]: a regression network's reliability figure, the observed coverage of its
//!   central predictive intervals against their nominal level, one line per model.
//! * [`size_quality`]: NLL and OOD AUROC against the model file's bytes (log scale), one point
//!   per method and seed.
//! * [`search`]: a compression search's candidates, validation NLL and OOD-proxy AUROC against
//!   the file's bytes, with the source network's values, the margins and the file written.
//!
//! Files are written to a temporary name and renamed into place. Bad input is a
//! [`PlotError`], never a panic.
//!
//! ```
//! use bnn_metrics::{Probabilities, reliability_diagram};
//! use bnn_plot::{ReliabilityPanel, Size, reliability};
//!
//! // Four predictions of two classes and their labels.
//! let probs = Probabilities::new(vec![0.9, 0.1, 0.2, 0.8, 0.6, 0.4, 0.3, 0.7], 4, 2)?;
//! let diagram = reliability_diagram(&probs, &[0u32, 1, 1, 1], 10)?;
//! let out = tempfile::tempdir()?.keep().join("reliability.svg");
//! let panel = ReliabilityPanel { name: "my model", diagram: &diagram };
//! reliability(&[panel], Size { width: 450, height: 600 }, &out)?;
//! assert!(std::fs::read_to_string(&out)?.contains("<svg"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod corruptions;
mod coverage;
mod error;
mod ood;
mod output;
mod per_class;
mod reliability;
mod search;
mod size_quality;
mod style;
mod text;
mod weights;

pub use corruptions::{CorruptionSeries, corruptions};
pub use coverage::{CoverageSeries, coverage};
pub use error::{PlotError, Result};
pub use ood::{OodPlot, Uncertainties, ood};
pub use output::{Format, MAX_SIDE, Size};
pub use per_class::{PerClassPlot, per_class};
pub use reliability::{ReliabilityPanel, reliability};
pub use search::{SearchFigure, SearchPoint, Written, search};
pub use size_quality::{SizePoint, size_quality};
pub use style::okabe_ito;
pub use weights::{
    DEFAULT_DOT_LIMIT, DEFAULT_MARKS_LIMIT, DEFAULT_MAX_ELLIPSES, Gaussian, PointFate, SigmaAxis,
    WeightsOptions, WeightsPlot, weights,
};

/// Compiles and runs the README example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
