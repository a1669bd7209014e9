//! `swbnn plot <what> MODEL_OR_RUN --out FILE.{png,svg}`: one figure from a reproduction run
//! directory, a `.swb` file or a training directory (`size-quality`: a run directory's
//! `tables.json`; `search`: the `*.search.json` of `swbnn compress --auto`).

use std::path::{Path, PathBuf};

use bnn_data::{Corruption, DataSource};
use bnn_models::{Kind, Network};
use bnn_plot::{SigmaAxis, Size, WeightsOptions};
use bnn_train::evaluate;
use burn::prelude::*;
use swshare::burn_edges::from_swb;

use crate::Error;
use crate::experiment::evaluate_corruptions;
use crate::figures::{self, CleanMetrics, ModelPredictions};
use crate::method::Method;
use crate::run_dir::{FIGURE_SEED, Loaders, RunDir, run_predictions};
use crate::store::ModelDir;

/// Which figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Figure {
    /// Reliability diagram(s) with the confidence histogram; ECE in the title.
    Reliability,
    /// In- vs out-of-distribution max-probability, entropy, mutual information; ROC curves.
    Ood,
    /// (mu, sigma) of the weights by fate, with the Gaussians' 1- and 2-sigma ellipses.
    Weights,
    /// Confidence box plots per class, mean above each box.
    PerClass,
    /// Accuracy, NLL and ECE against corruption severity (mean over the kinds), one line per
    /// method: a run's `corruptions.json` (`reproduce --corruptions`), or for a model file all
    /// 15 corruptions of `bnn_data::Corruption::all` evaluated here.
    Corruptions,
    /// Model file bytes (log scale) against NLL and against OOD AUROC by predictive entropy,
    /// one point per method and seed: the equal-size table of a run's `tables.json`
    /// (`cargo xtask reproduce --tables equal-size`).
    SizeQuality,
    /// File bytes (log scale) against validation NLL and against OOD-proxy AUROC of every
    /// candidate `swbnn compress --auto` evaluated, with the source network's values, its
    /// margins and the file written: the search's `*.search.json`.
    Search,
    /// A regression network's reliability figure: the observed coverage of its central
    /// predictive intervals against their nominal level (0.05 to 0.95) on the test rows of
    /// --dataset, with the diagonal.
    Coverage,
}

/// Scale of the weights figure's sigma axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SigmaScale {
    /// Logarithmic when sigma spans more than a factor of 30 (1st to 99th percentile).
    Auto,
    /// Linear.
    Linear,
    /// Logarithmic.
    Log,
}

/// A figure to draw: what [`run`] draws, from what and where (the `swbnn plot` flags build
/// this).
#[derive(Debug, Clone)]
pub struct PlotRequest {
    /// The figure.
    pub what: Figure,
    /// A run directory of `cargo xtask reproduce` (with setup.json; or one seed's `seed-<i>`
    /// of a multi-seed run), a .swb file, a directory with model.swb (a run's 2DGBNN stage),
    /// or a training directory (model.bpk and config.json). size-quality: a run directory
    /// with tables.json. search: the `*.search.json` of `swbnn compress --auto`.
    pub model: PathBuf,
    /// Seed of a multi-seed run whose models are drawn (default 0); its tables then replace
    /// the means over seeds in the corruptions figure, and size-quality draws its points
    /// only (default: every seed's).
    pub seed: Option<usize>,
    /// Output file; .png or .svg (an existing one only with --force).
    pub out: PathBuf,
    /// Replace an existing --out.
    pub force: bool,
    /// Method of a run directory: deterministic, bbb or 2dgbnn. Default: all three for
    /// reliability and corruptions, 2dgbnn for the others.
    pub method: Option<String>,
    /// Data set of a .swb file or training directory (a run directory knows its own): a
    /// preset, folder:DIR or npz:FILE.
    pub dataset: Option<DataSource>,
    /// Out-of-distribution data set (a preset, whose directory --ood-dir gives, or folder:DIR
    /// or npz:FILE).
    pub ood: Option<DataSource>,
    /// Directory of the OOD data set.
    pub ood_dir: Option<PathBuf>,
    /// Data directory.
    pub data: Option<PathBuf>,
    /// Stratified test subset (and OOD subset, cut to it when larger) of this many examples;
    /// more than the test set has is an error.
    pub subset: Option<usize>,
    /// Monte Carlo samples (default: the run's, else 30; at most 1,000).
    pub samples: Option<usize>,
    /// Weights: one layer, by path (e.g. body.conv2.weight for LeNet-5; an unknown path is an
    /// error that lists the model's). Default: all shareable layers.
    pub layer: Option<String>,
    /// Weights of a run directory: the retrained model's (.swb) instead of the BBB posterior
    /// with the sharing plan.
    pub after_retraining: bool,
    /// Weights: most Gaussians drawn as ellipses (the most used).
    pub max_ellipses: usize,
    /// Weights: sigma axis scale.
    pub sigma_axis: SigmaScale,
    /// Figure width in pixels (default: the report's; at most 16,384).
    pub width: Option<u32>,
    /// Figure height in pixels (default: the report's; at most 16,384).
    pub height: Option<u32>,
}

impl PlotRequest {
    /// Checks the numbers a caller sets: a subset of at least one image, samples as
    /// [`check_samples`](swbnn_ops::limits::check_samples) allows, and sides of 1 to
    /// [`bnn_plot::MAX_SIDE`] pixels (each figure's own minimum is checked when it is drawn).
    pub fn check(&self) -> Result<(), Error> {
        if self.subset == Some(0) {
            return Err(Error::Usage("--subset 0: at least 1".into()));
        }
        if let Some(n) = self.samples {
            swbnn_ops::limits::check_samples(n, 0, "").map_err(Error::Usage)?;
        }
        for (flag, side) in [("--width", self.width), ("--height", self.height)] {
            if let Some(v) = side
                && !(1..=bnn_plot::MAX_SIDE).contains(&v)
            {
                return Err(Error::Usage(format!(
                    "{flag} {v}: 1 to {}",
                    bnn_plot::MAX_SIDE
                )));
            }
        }
        Ok(())
    }

    /// The flags a figure drawn from a file alone does not read, among those given: the
    /// search figure takes none of the data, model or sampling flags.
    fn unused_flags(&self) -> Vec<&'static str> {
        if self.what != Figure::Search {
            return Vec::new();
        }
        let defaults = (bnn_plot::DEFAULT_MAX_ELLIPSES, SigmaScale::Auto);
        [
            ("--seed", self.seed.is_some()),
            ("--method", self.method.is_some()),
            ("--dataset", self.dataset.is_some()),
            ("--ood", self.ood.is_some()),
            ("--ood-dir", self.ood_dir.is_some()),
            ("--data", self.data.is_some()),
            ("--subset", self.subset.is_some()),
            ("--samples", self.samples.is_some()),
            ("--layer", self.layer.is_some()),
            ("--after-retraining", self.after_retraining),
            (
                "--max-ellipses or --sigma-axis",
                (self.max_ellipses, self.sigma_axis) != defaults,
            ),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }

    fn size(&self, default: Size) -> Size {
        Size::new(
            self.width.unwrap_or(default.width),
            self.height.unwrap_or(default.height),
        )
    }

    fn weights_options(&self) -> WeightsOptions {
        WeightsOptions {
            sigma_axis: match self.sigma_axis {
                SigmaScale::Auto => SigmaAxis::Auto,
                SigmaScale::Linear => SigmaAxis::Linear,
                SigmaScale::Log => SigmaAxis::Log,
            },
            max_ellipses: self.max_ellipses,
            ..Default::default()
        }
    }
}

/// What `MODEL_OR_RUN` names.
enum Source {
    Run(Box<RunDir>),
    Model {
        model: Box<Network>,
        config: Box<bnn_models::ModelConfig>,
        label: String,
        /// The `.swb` file it was loaded from, if any.
        swb: Option<PathBuf>,
    },
}

fn open_source(args: &PlotRequest, device: &Device) -> Result<Source, Error> {
    let path = &args.model;
    if crate::regression::is_regression_run(path) {
        return Err(Error::Usage(format!(
            "{} is the run of a regression table: its figure is `coverage` (swbnn plot \
             coverage {} --out FILE)",
            path.display(),
            path.display()
        )));
    }
    if RunDir::is_run(path) {
        return Ok(Source::Run(Box::new(RunDir::open(path, args.seed)?)));
    }
    if args.seed.is_some() {
        return Err(Error::Usage(format!(
            "--seed: {} is not a run directory",
            path.display()
        )));
    }
    let swb = if path.is_dir() {
        Some(ModelDir::new(path).swb_path()).filter(|p| p.is_file())
    } else {
        Some(path.clone()).filter(|p| p.extension().is_some_and(|e| e == "swb"))
    };
    if let Some(swb) = swb {
        let data = swshare::format::load(&swb)?;
        let (model, config) = from_swb(&data, device)?;
        return Ok(Source::Model {
            model: Box::new(model),
            config: Box::new(config),
            label: Method::Gbnn2d.label().into(),
            swb: Some(swb),
        });
    }
    let dir = ModelDir::new(path);
    if dir.has_weights() {
        let (model, config) = dir.load(device)?;
        let label = match config.kind {
            Kind::Deterministic => Method::Deterministic.label(),
            Kind::Bayesian => Method::Bbb.label(),
            Kind::Shared => Method::Gbnn2d.label(),
        };
        return Ok(Source::Model {
            model: Box::new(model),
            config: Box::new(config),
            label: label.into(),
            swb: None,
        });
    }
    Err(Error::Usage(format!(
        "{}: neither a run directory (setup.json), a .swb file, a directory with model.swb nor \
         a training directory (model.bpk and config.json)",
        path.display()
    )))
}

/// Data of a single model: from the arguments.
fn model_loaders(
    args: &PlotRequest,
    need_ood: bool,
    config: &bnn_models::ModelConfig,
) -> Result<Loaders, Error> {
    let dataset = args.dataset.as_ref().ok_or_else(|| {
        Error::Usage("--dataset is needed to evaluate a model file or directory".into())
    })?;
    if need_ood && args.ood.is_none() {
        return Err(Error::Usage(
            "the OOD figure needs --ood (and --ood-dir for a directory of images)".into(),
        ));
    }
    let ood = args.ood.clone().map(|id| (id, args.ood_dir.as_deref()));
    Loaders::new(
        dataset,
        args.data.as_deref(),
        ood,
        args.subset,
        2,
        Some(config),
    )
}

fn run_loaders(args: &PlotRequest, run: &RunDir) -> Result<Loaders, Error> {
    let setup = &run.setup;
    let ood = setup
        .ood
        .as_ref()
        .map(|(id, d)| ((*id).into(), Some(d.as_path())));
    let config = run.data_config()?;
    Loaders::new(
        &setup.dataset,
        args.data.as_deref().or(setup.data_dir.as_deref()),
        ood,
        args.subset.or(setup.test_subset),
        2,
        config.as_ref(),
    )
}

fn methods(args: &PlotRequest, all: bool) -> Result<Vec<Method>, Error> {
    match args.method.as_deref() {
        Some(m) => Method::MAIN
            .into_iter()
            .find(|k| k.name() == m)
            .map(|k| vec![k])
            .ok_or_else(|| {
                Error::Usage(format!("--method {m}: one of deterministic, bbb, 2dgbnn"))
            }),
        None if all => Ok(Method::MAIN.to_vec()),
        None => Ok(vec![Method::Gbnn2d]),
    }
}

/// What [`run`] drew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plotted {
    /// The file written.
    pub out: PathBuf,
    /// The folder a preset OOD set was read from, when the figure read one.
    pub ood_dir: Option<PathBuf>,
}

/// Draws the figure `args.what` into `args.out`; says what it wrote and read.
pub fn run(args: &PlotRequest, device: &Device) -> Result<Plotted, Error> {
    // Every argument is checked before a model is loaded or a sample drawn.
    args.check()?;
    bnn_plot::Format::from_path(&args.out).map_err(crate::plot_error)?;
    let unused = args.unused_flags();
    if !unused.is_empty() {
        return Err(Error::Usage(format!(
            "the search figure is drawn from {} alone and takes no {}",
            args.model.display(),
            unused.join(", ")
        )));
    }
    let out = crate::checks::output_target("--out", &args.out, Some(args.force), &[&args.model])?;
    methods(args, true)?;
    if args.what == Figure::Search {
        // Drawn from the search file alone: no model is loaded.
        let report = figures::read_search_report(&args.model)?;
        // The file's name leads the error of a report that cannot be drawn.
        let in_file = |why: String| Error::Usage(format!("{}: {why}", args.model.display()));
        let data = figures::search_data(&report).map_err(|e| match e {
            Error::Usage(why) => in_file(why),
            e => e,
        })?;
        bnn_plot::search(&data, args.size(figures::SEARCH_SIZE), &out).map_err(|e| match e {
            bnn_plot::PlotError::BadInput { .. } => in_file(e.to_string()),
            e => crate::plot_error(e),
        })?;
        return Ok(Plotted {
            out: args.out.clone(),
            ood_dir: None,
        });
    }
    if args.what == Figure::Coverage {
        coverage(args, device, &out)?;
        return Ok(Plotted {
            out: args.out.clone(),
            ood_dir: None,
        });
    }
    if args.what == Figure::SizeQuality {
        // Drawn from the tables alone: no model is loaded.
        let points = figures::size_quality_points(&args.model, args.seed)?;
        figures::size_quality(&points, args.size(figures::SIZE_QUALITY_SIZE), &out)?;
        return Ok(Plotted {
            out: args.out.clone(),
            ood_dir: None,
        });
    }
    let mut ood_dir = None;
    let source = open_source(args, device)?;
    let samples = |run_samples: Option<usize>| args.samples.or(run_samples).unwrap_or(30);
    let out = out.as_path();
    match (args.what, source) {
        (Figure::Weights, source) => weights(args, source, device, out)?,
        (what, Source::Run(run)) => {
            let all = matches!(what, Figure::Reliability | Figure::Corruptions);
            let ms = methods(args, all)?;
            if what == Figure::Corruptions {
                let rows = run.corruption_rows()?.ok_or_else(|| {
                    Error::Usage(format!(
                        "{}: no corruptions.json; run `cargo xtask reproduce` with --corruptions",
                        run.dir.display()
                    ))
                })?;
                let rows: Vec<_> = rows
                    .into_iter()
                    .filter(|r| ms.iter().any(|m| *m == r.method.as_str()))
                    .collect();
                let series = figures::corruption_series(&run.clean_metrics()?, &rows)?;
                figures::corruptions(&series, args.size(figures::CORRUPTIONS_SIZE), out)?;
            } else {
                let loaders = run_loaders(args, &run)?;
                let n = samples(Some(run.setup.samples));
                let preds = run_predictions(&run, &loaders, &ms, device, n)?;
                draw_predictions(args, what, &preds, &loaders, out)?;
                ood_dir = loaders.ood_dir;
            }
        }
        (
            what,
            Source::Model {
                model,
                config,
                label,
                ..
            },
        ) => {
            let loaders = model_loaders(args, what == Figure::Ood, &config)?;
            let n = samples(None);
            if what == Figure::Corruptions {
                let series = model_corruptions(&label, &model, &loaders, device, n)?;
                figures::corruptions(&series, args.size(figures::CORRUPTIONS_SIZE), out)?;
            } else {
                let preds = loaders.predict(&label, &model, device, n)?;
                draw_predictions(args, what, &[preds], &loaders, out)?;
                ood_dir = loaders.ood_dir;
            }
        }
    }
    Ok(Plotted {
        out: args.out.clone(),
        // Only the OOD figure shows the set; the others may load it without drawing it.
        ood_dir: ood_dir.filter(|_| args.what == Figure::Ood),
    })
}

/// One model on the clean test set and on every corruption of [`Corruption::all`].
fn model_corruptions(
    label: &str,
    model: &Network,
    loaders: &Loaders,
    device: &Device,
    samples: usize,
) -> Result<Vec<bnn_plot::CorruptionSeries>, Error> {
    device.seed(FIGURE_SEED);
    let clean = evaluate(model, &loaders.test, None, samples)?.summary;
    let rows = evaluate_corruptions(
        model,
        label,
        &loaders.test_data,
        loaders.stats.clone(),
        &Corruption::all(),
        samples,
        loaders.workers,
        None,
    )?;
    let clean = CleanMetrics {
        method: label.to_string(),
        accuracy: clean.accuracy,
        nll: clean.nll,
        ece: clean.ece,
    };
    figures::corruption_series(&[clean], &rows)
}

fn draw_predictions(
    args: &PlotRequest,
    what: Figure,
    preds: &[ModelPredictions],
    loaders: &Loaders,
    out: &Path,
) -> Result<(), Error> {
    match what {
        Figure::Reliability => figures::reliability(
            preds,
            args.size(figures::reliability_size(preds.len())),
            out,
        ),
        Figure::Ood => {
            let ood = loaders
                .ood
                .as_ref()
                .map_or("OOD".to_string(), |(id, _)| figures::dataset_label(id));
            figures::ood(
                &preds[0],
                &figures::dataset_label(&loaders.dataset),
                &ood,
                args.size(figures::OOD_SIZE),
                out,
            )
        }
        Figure::PerClass => figures::per_class(
            &preds[0],
            &figures::class_names(&loaders.dataset, loaders.test.dataset().classes())?,
            args.size(figures::PER_CLASS_SIZE),
            out,
        ),
        Figure::Weights
        | Figure::Corruptions
        | Figure::SizeQuality
        | Figure::Search
        | Figure::Coverage => unreachable!("drawn without predictions"),
    }
}

/// The coverage figure of a regression network's file: its test rows evaluated as `swbnn eval`
/// evaluates them, the reliability points drawn.
fn coverage(args: &PlotRequest, device: &Device, out: &Path) -> Result<(), Error> {
    if crate::regression::is_regression_run(&args.model) {
        // A reproduction's run: its rows hold each method's points.
        let rows = crate::regression::read_rows(&args.model, args.seed)?;
        return crate::regression::draw_coverage(&rows, args.size(figures::COVERAGE_SIZE), out);
    }
    let dataset = args.dataset.clone().ok_or_else(|| {
        Error::Usage("the coverage figure evaluates the model on --dataset's test rows".into())
    })?;
    let request = swbnn_ops::commands::EvalRequest {
        samples: args.samples.unwrap_or(30),
        data_dir: args.data.clone(),
        subset: args.subset,
        seed: FIGURE_SEED,
        ..swbnn_ops::commands::EvalRequest::new(args.model.clone(), dataset)
    };
    let outcome = swbnn_ops::commands::eval(&request, device)?;
    let reg = outcome.regression.ok_or_else(|| {
        Error::Usage(format!(
            "{} is a classifier: the coverage figure is a regression network's (a classifier's \
             is `reliability`)",
            args.model.display()
        ))
    })?;
    let label = match swbnn_ops::load::load_model(&args.model, device)?
        .config
        .kind
    {
        Kind::Deterministic => Method::Deterministic.label(),
        Kind::Bayesian => Method::Bbb.label(),
        Kind::Shared => Method::Gbnn2d.label(),
    };
    let series = [bnn_plot::CoverageSeries {
        name: label,
        points: &reg.reliability,
    }];
    bnn_plot::coverage(&series, args.size(figures::COVERAGE_SIZE), out).map_err(crate::plot_error)
}

fn weights(args: &PlotRequest, source: Source, device: &Device, out: &Path) -> Result<(), Error> {
    let size = args.size(figures::WEIGHTS_SIZE);
    let options = args.weights_options();
    let layer = args.layer.as_deref();
    let scope = layer.unwrap_or("all layers");
    match source {
        Source::Run(run) if !args.after_retraining => {
            let table = run.bbb_table(device)?;
            let plan = run.plan()?;
            let title = format!(
                "{}, {scope}: BBB posterior, fates and Gaussians",
                run.setup.arch
            );
            figures::weights_from_plan(&table, &plan, layer, &title, &options, size, out)
        }
        Source::Run(run) => {
            let data = swshare::format::load(run.swb_path())?;
            let title = format!("{}, {scope}: 2DGBNN after retraining", run.setup.arch);
            figures::weights_from_swb(&data, layer, &title, &options, size, out)
        }
        Source::Model { swb: Some(swb), .. } => {
            let data = swshare::format::load(&swb)?;
            let title = format!("{scope}: 2DGBNN after retraining");
            figures::weights_from_swb(&data, layer, &title, &options, size, out)
        }
        Source::Model { swb: None, .. } => Err(Error::Usage(format!(
            "{}: the weights figure needs a sharing plan: give a run directory of `cargo \
             xtask reproduce` or a .swb file",
            args.model.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Row;
    use crate::tables::{TableId, TableRow};

    fn args(model: &Path, out: PathBuf) -> PlotRequest {
        PlotRequest {
            what: Figure::SizeQuality,
            model: model.to_path_buf(),
            seed: None,
            out,
            force: false,
            method: None,
            dataset: None,
            ood: None,
            ood_dir: None,
            data: None,
            subset: None,
            samples: None,
            layer: None,
            after_retraining: false,
            max_ellipses: bnn_plot::DEFAULT_MAX_ELLIPSES,
            sigma_axis: SigmaScale::Auto,
            width: Some(1000),
            height: Some(420),
        }
    }

    /// A row as `row.json` holds it (read through serde, so that fields added later with
    /// defaults need no change here).
    fn row(method: Method, bytes: u64, nll: f64, auroc: Option<f64>) -> Row {
        serde_json::from_value(serde_json::json!({
            "arch": "mlp", "method": method, "accuracy": 0.8, "nll": nll, "ece": 0.02,
            "mean_confidence": 0.85, "outliers": null, "ellipses": null, "gaussians": null,
            "parameters": 1_000, "compression_ratio": null, "model_bytes": bytes,
            "ood_auroc": auroc, "ood_auroc_entropy": auroc, "train_seconds": 1.0,
            "uncertainty": bnn_train::UncertaintyDiagnostics::default(),
            "weights": []
        }))
        .unwrap()
    }

    /// One seed's rows: three of the equal-size table (one without an OOD AUROC) and one of
    /// the main table, which the figure leaves out.
    fn seed_rows(shift: f64) -> Vec<TableRow> {
        let equal = |label: &str, row: Row| TableRow {
            table: TableId::EqualSize,
            label: label.into(),
            row,
        };
        vec![
            TableRow {
                table: TableId::Main,
                label: "deterministic".into(),
                row: row(Method::Deterministic, 400_000, 0.5, Some(0.7)),
            },
            equal(
                "2dgbnn",
                row(Method::Gbnn2d, 21_000, 0.41 + shift, Some(0.88)),
            ),
            equal(
                "1-D sharing (mu only, K = 16)",
                row(Method::Gbnn2d, 19_500, 0.52 + shift, None),
            ),
            equal(
                "bbb (f32)",
                row(Method::Bbb, 1_700_000, 0.38 + shift, Some(0.9 - shift)),
            ),
        ]
    }

    /// `tables.json` as `cargo xtask reproduce --seeds 2 --tables equal-size` lays it out.
    fn write_tables(dir: &Path) {
        let json = serde_json::json!({
            "command": "cargo xtask reproduce fashion-mnist --quick --seeds 2 --tables equal-size",
            "backend": "flex",
            "seeds": [
                {"tables": [TableId::Main, TableId::EqualSize], "rows": seed_rows(0.0), "timing": []},
                {"tables": [TableId::Main, TableId::EqualSize], "rows": seed_rows(0.02), "timing": []},
            ],
        });
        std::fs::write(
            dir.join(crate::store::TABLES_JSON),
            serde_json::to_string_pretty(&json).unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn size_quality_draws_the_equal_size_rows_of_every_seed() {
        let run = tempfile::tempdir().unwrap();
        write_tables(run.path());
        let points = figures::size_quality_points(run.path(), None).unwrap();
        assert_eq!(points.len(), 6, "{points:?}");
        assert_eq!(points[0].method, "2DGBNN");
        assert_eq!(points[1].ood_auroc, None);
        assert_eq!(points[5].bytes, 1_700_000);
        let one = figures::size_quality_points(run.path(), Some(1)).unwrap();
        assert_eq!(one.len(), 3);
        assert!((one[0].nll - 0.43).abs() < 1e-12);
        let e = figures::size_quality_points(run.path(), Some(2)).unwrap_err();
        assert!(
            e.to_string().contains("--seed 2") && e.to_string().contains("2 seeds"),
            "{e}"
        );

        let figs = tempfile::tempdir().unwrap();
        let device = bnn_layers::test_device();
        for ext in ["png", "svg"] {
            let out = figs.path().join(format!("size-quality.{ext}"));
            let written = run_args(&args(run.path(), out.clone()), &device);
            assert_eq!(written, out);
            let bytes = std::fs::read(&out).unwrap();
            if ext == "png" {
                let img = image::load_from_memory(&bytes).unwrap();
                assert_eq!((img.width(), img.height()), (1000, 420));
            } else {
                let svg = String::from_utf8(bytes).unwrap();
                assert!(svg.contains("bbb (f32)") && svg.contains("2DGBNN"), "{svg}");
                assert!(
                    !svg.contains("deterministic"),
                    "main-table rows are left out"
                );
            }
        }
    }

    fn run_args(a: &PlotRequest, device: &Device) -> PathBuf {
        run(a, device)
            .unwrap_or_else(|e| panic!("{}: {e}", a.out.display()))
            .out
    }

    /// A search as `swbnn compress --auto` reports it: a quantised BNN chosen, two sharing
    /// candidates outside the margins (one without an AUROC) and one not tried.
    fn search_report() -> swbnn_ops::search::SearchReport {
        use swbnn_ops::search::{
            Candidate, CandidateMethod, SearchConfig, SearchReport, ValidationMetrics, Verdict,
        };
        let metrics = |nll: f64, ood_auroc: Option<f64>| ValidationMetrics {
            accuracy: 0.89,
            nll,
            ece: 0.015,
            ood_auroc,
        };
        let candidate = |method, k, int8_outliers, bytes, validation, verdict| Candidate {
            method,
            k,
            codebook: k,
            sigma_bits: (method == CandidateMethod::Qbnn).then_some(1),
            int8_outliers,
            bytes,
            parameters: 2_000,
            validation,
            seconds: 1.0,
            retrain_steps: 10,
            verdict,
        };
        SearchReport {
            config: SearchConfig::default(),
            source: metrics(0.2855, Some(0.745)),
            source_parameters: 123_412,
            validation_images: 5_000,
            candidates: vec![
                candidate(
                    CandidateMethod::MuOnly,
                    Some(31),
                    true,
                    39_667,
                    Some(metrics(0.31, None)),
                    Verdict::Outside(vec!["NLL 0.3100 > 0.2955".into()]),
                ),
                candidate(
                    CandidateMethod::Gbnn2d,
                    Some(31),
                    true,
                    49_543,
                    Some(metrics(0.2845, Some(0.698))),
                    Verdict::Outside(vec!["OOD AUROC 0.6980 < 0.7350".into()]),
                ),
                candidate(
                    CandidateMethod::Gbnn2d,
                    Some(62),
                    false,
                    55_935,
                    None,
                    Verdict::NotTried("the budget was spent".into()),
                ),
                candidate(
                    CandidateMethod::Qbnn,
                    None,
                    false,
                    72_482,
                    Some(metrics(0.281, Some(0.767))),
                    Verdict::Chosen,
                ),
            ],
            written: Some(3),
            within_margins: true,
            seconds: 10.0,
        }
    }

    fn search_args(file: &Path, out: PathBuf) -> PlotRequest {
        PlotRequest {
            what: Figure::Search,
            ..args(file, out)
        }
    }

    #[test]
    fn search_draws_the_evaluated_candidates_of_a_search_file() {
        let report = search_report();
        let data = figures::search_data(&report).unwrap();
        // The evaluated three, 2DGBNN first; the not-tried one is left out.
        let methods: Vec<&str> = data.points.iter().map(|p| p.method.as_str()).collect();
        assert_eq!(methods, ["2DGBNN", "1-D sharing (mu only)", "QBNN"]);
        assert_eq!(data.points[1].ood_auroc, None);
        assert!(data.points[0].int8 && !data.points[2].int8);
        let written: Vec<_> = data.points.iter().map(|p| p.written).collect();
        assert_eq!(written, [None, None, Some(bnn_plot::Written::Chosen)]);
        assert!((data.source_nll - 0.2855).abs() < 1e-12);
        assert_eq!(data.nll_margin, report.config.margins.nll);

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.search.json");
        std::fs::write(&file, serde_json::to_string_pretty(&report).unwrap()).unwrap();
        let device = bnn_layers::test_device();
        for ext in ["png", "svg"] {
            let out = dir.path().join(format!("search.{ext}"));
            assert_eq!(run_args(&search_args(&file, out.clone()), &device), out);
            let bytes = std::fs::read(&out).unwrap();
            if ext == "png" {
                let img = image::load_from_memory(&bytes).unwrap();
                assert_eq!((img.width(), img.height()), (1000, 420));
            } else {
                let svg = String::from_utf8(bytes).unwrap();
                assert!(svg.contains("QBNN") && svg.contains("chosen"), "{svg}");
            }
        }
        // The report's own entry point draws it at the report's size.
        let out = dir.path().join("report-search.png");
        figures::search_figure(&report, &out).unwrap();
        let img = image::load_from_memory(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(
            (img.width(), img.height()),
            (figures::SEARCH_SIZE.width, figures::SEARCH_SIZE.height)
        );

        // Flags the figure does not read are refused, naming them.
        let out = dir.path().join("refused.png");
        let mut a = search_args(&file, out.clone());
        a.samples = Some(5);
        a.method = Some("bbb".into());
        let e = run(&a, &device).unwrap_err().to_string();
        assert!(e.contains("--method, --samples"), "{e}");
        assert!(!out.exists());
    }

    #[test]
    fn a_search_file_that_cannot_be_drawn_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.search.json");
        let out = dir.path().join("search.png");
        let device = bnn_layers::test_device();
        let refused = |text: &str| {
            std::fs::write(&file, text).unwrap();
            let e = run(&search_args(&file, out.clone()), &device)
                .unwrap_err()
                .to_string();
            assert!(e.contains(&file.display().to_string()), "{e}");
            e
        };
        refused("{\"config\": ");
        refused("{\"rows\": []}");
        let mut report = search_report();
        report.written = Some(7);
        let e = refused(&serde_json::to_string(&report).unwrap());
        assert!(e.contains("number 7") && e.contains("lists 4"), "{e}");
        let mut report = search_report();
        report.written = Some(1);
        let e = refused(&serde_json::to_string(&report).unwrap());
        assert!(e.contains("not chosen or nearest"), "{e}");
        let mut report = search_report();
        for c in &mut report.candidates {
            c.validation = None;
        }
        report.written = None;
        let e = refused(&serde_json::to_string(&report).unwrap());
        assert!(e.contains("nothing to draw"), "{e}");
        let mut report = search_report();
        report.candidates[0].validation.as_mut().unwrap().nll = -1.0;
        let e = refused(&serde_json::to_string(&report).unwrap());
        assert!(
            e.contains("candidate 0 (mu-only K = 31") && e.contains("NLL -1"),
            "{e}"
        );
        // A missing file is named too.
        std::fs::remove_file(&file).unwrap();
        let e = run(&search_args(&file, out.clone()), &device)
            .unwrap_err()
            .to_string();
        assert!(e.contains("m.search.json"), "{e}");
        assert!(!out.exists(), "nothing is written on an error");
    }

    #[test]
    fn size_quality_without_tables_json_names_the_file() {
        let run_dir = tempfile::tempdir().unwrap();
        let out = run_dir.path().join("figure.png");
        let device = bnn_layers::test_device();
        let e = run(&args(run_dir.path(), out.clone()), &device)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tables.json") && e.contains("--tables equal-size"),
            "{e}"
        );
        // A run made without the equal-size table: its rows are not there.
        let json = serde_json::json!({"seeds": [{"rows": [TableRow {
            table: TableId::Main,
            label: "bbb".into(),
            row: row(Method::Bbb, 1_000, 0.4, None),
        }]}]});
        std::fs::write(run_dir.path().join("tables.json"), json.to_string()).unwrap();
        let e = run(&args(run_dir.path(), out.clone()), &device)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no equal-size rows"), "{e}");
        assert!(!out.exists(), "nothing is written on an error");
    }
}
