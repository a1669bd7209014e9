//! The clap types of `swbnn plot`; they build the harness's request.

use std::path::PathBuf;

use bnn_data::DataSource;
use swbnn_harness::plot::{Figure, PlotRequest, SigmaScale};

/// Arguments of `swbnn plot`.
#[derive(Debug, Clone, clap::Args)]
pub struct PlotArgs {
    /// The figure.
    #[arg(value_enum)]
    pub what: Figure,
    /// A run directory of `cargo xtask reproduce` (with setup.json; or one seed's `seed-<i>`
    /// of a multi-seed run), a .swb file, a directory with model.swb (a run's 2DGBNN stage),
    /// or a training directory (model.bpk and config.json). size-quality: a run directory
    /// with tables.json. search: the `*.search.json` of `swbnn compress --auto`.
    pub model: PathBuf,
    /// Seed of a multi-seed run whose models are drawn (default 0); its tables then replace
    /// the means over seeds in the corruptions figure, and size-quality draws its points
    /// only (default: every seed's).
    #[arg(long)]
    pub seed: Option<usize>,
    /// Output file; .png or .svg (an existing one only with --force).
    #[arg(long)]
    pub out: PathBuf,
    /// Replace an existing --out.
    #[arg(long)]
    pub force: bool,
    /// Method of a run directory: deterministic, bbb or 2dgbnn. Default: all three for
    /// reliability and corruptions, 2dgbnn for the others.
    #[arg(long)]
    pub method: Option<String>,
    /// Data set of a .swb file or training directory (a run directory knows its own): a
    /// preset, folder:DIR or npz:FILE.
    #[arg(long, value_name = "NAME|folder:DIR|npz:FILE")]
    pub dataset: Option<DataSource>,
    /// Out-of-distribution data set (a preset, whose directory --ood-dir gives, or folder:DIR
    /// or npz:FILE).
    #[arg(long, value_name = "NAME|folder:DIR|npz:FILE")]
    pub ood: Option<DataSource>,
    /// Directory of the OOD data set.
    #[arg(long)]
    pub ood_dir: Option<PathBuf>,
    /// Data directory.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Stratified test subset (and OOD subset, cut to it when larger) of this many examples;
    /// more than the test set has is an error.
    #[arg(long, value_parser = swbnn::args::positive)]
    pub subset: Option<usize>,
    /// Monte Carlo samples (default: the run's, else 30; at most 1,000).
    #[arg(long, value_parser = swbnn::args::samples)]
    pub samples: Option<usize>,
    /// Weights: one layer, by path (e.g. body.conv2.weight for LeNet-5; an unknown path is an
    /// error that lists the model's). Default: all shareable layers.
    #[arg(long)]
    pub layer: Option<String>,
    /// Weights of a run directory: the retrained model's (.swb) instead of the BBB posterior
    /// with the sharing plan.
    #[arg(long)]
    pub after_retraining: bool,
    /// Weights: most Gaussians drawn as ellipses (the most used).
    #[arg(long, default_value_t = bnn_plot::DEFAULT_MAX_ELLIPSES)]
    pub max_ellipses: usize,
    /// Weights: sigma axis scale.
    #[arg(long, value_enum, default_value = "auto")]
    pub sigma_axis: SigmaScale,
    /// Figure width in pixels (default: the report's; at most 16,384).
    #[arg(long, value_parser = swbnn::args::side)]
    pub width: Option<u32>,
    /// Figure height in pixels (default: the report's; at most 16,384).
    #[arg(long, value_parser = swbnn::args::side)]
    pub height: Option<u32>,
}

impl PlotArgs {
    /// The harness's request.
    pub fn request(&self) -> PlotRequest {
        PlotRequest {
            what: self.what,
            model: self.model.clone(),
            seed: self.seed,
            out: self.out.clone(),
            force: self.force,
            method: self.method.clone(),
            dataset: self.dataset.clone(),
            ood: self.ood.clone(),
            ood_dir: self.ood_dir.clone(),
            data: self.data.clone(),
            subset: self.subset,
            samples: self.samples,
            layer: self.layer.clone(),
            after_retraining: self.after_retraining,
            max_ellipses: self.max_ellipses,
            sigma_axis: self.sigma_axis,
            width: self.width,
            height: self.height,
        }
    }
}
