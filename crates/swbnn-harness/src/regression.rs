//! The experiment of a regression table (`csv:FILE` with target columns, or an `.npz` whose
//! `y_*` are floating point): a deterministic net, Bayes by Backprop and 2DGBNN, each trained
//! or compressed by the command of [`swbnn_ops::commands`] that a user runs by hand, in its
//! stage directory; then split-conformal intervals fitted on the validation split
//! (`calibrate --conformal`) and the test rows evaluated (`eval`). A row holds RMSE, the
//! Monte-Carlo mixture's NLL, CRPS, the central 90 % interval's coverage and width, the PIT
//! error, the conformal coverage and width, parameters and bytes, and the reliability points.
//! Over seeds the table is mean ± sd ([`REGRESSION_MD`], [`REGRESSION_JSON`]); `report.md`
//! holds it and the coverage figure of the first seed.
//!
//! Because the stages are the commands, a table's setup sets what the commands take: each
//! stage's epochs and seed, the whole compression (`compress`), the BBB recipe, the gradient
//! estimator, the validation split, the Monte-Carlo samples, the targets, the noise model and
//! the MLP's widths. [`check_setup`] refuses any other change (an optimiser setting, an OOD
//! set, corruptions, subsets), naming the field, rather than run without it.

use std::path::{Path, PathBuf};

use bnn_layers::count_params;
use bnn_metrics::CoveragePoint;
use bnn_train::{Checkpointer, ModelDir, TrainConfig};
use burn::prelude::*;
use serde::{Deserialize, Serialize};
use swbnn_ops::commands::{
    CalibrateRequest, CompressRequest, CompressSettings, ConformalEvaluation, EvalRequest,
    TrainKind, TrainRequest, calibrate, compress, eval, train,
};
use swbnn_ops::defaults::BbbRecipe;

use crate::Error;
use crate::experiment::{Progress, evaluation_seed};
use crate::figures::COVERAGE_SIZE;
use crate::method::Method;
use crate::setup::Setup;
use crate::stats::MeanSd;
use crate::store::{self, REGRESSION_JSON, REGRESSION_MD, REGRESSION_ROW_FILE};

/// The level of the conformal intervals every row is calibrated at.
pub const CONFORMAL_LEVEL: f64 = 0.9;

/// The level of the central predictive interval a row reports (coverage and width).
pub const INTERVAL_LEVEL: f64 = 0.9;

/// One method's metrics on the test rows of one seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressionRow {
    /// The method.
    pub method: Method,
    /// Root mean squared error of the predictive mean (user's units).
    pub rmse: f64,
    /// Gaussian NLL of the Monte-Carlo mixture, per row and target.
    pub nll: f64,
    /// Continuous ranked probability score (user's units).
    pub crps: f64,
    /// Observed coverage of the central [`INTERVAL_LEVEL`] predictive interval.
    pub coverage_90: f64,
    /// Mean width of that interval (user's units).
    pub width_90: f64,
    /// PIT calibration error.
    pub pit_error: f64,
    /// The conformal intervals' level ([`CONFORMAL_LEVEL`]).
    pub conformal_level: f64,
    /// Their observed coverage on the test rows.
    pub conformal_coverage: f64,
    /// Their mean width (user's units).
    pub conformal_width: f64,
    /// Trainable parameters of the model.
    pub parameters: usize,
    /// Bytes of its file (`model.bpk` of a model directory, the `.swb` of 2DGBNN).
    pub bytes: u64,
    /// Test rows evaluated.
    pub test_rows: usize,
    /// Observed coverage of the central intervals at nominal levels (the coverage figure).
    pub reliability: Vec<CoveragePoint>,
}

/// One method's metrics over seeds: mean ± sd of each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressionMeans {
    /// The method.
    pub method: Method,
    /// Seeds summarised.
    pub seeds: usize,
    /// RMSE.
    pub rmse: MeanSd,
    /// NLL of the mixture.
    pub nll: MeanSd,
    /// CRPS.
    pub crps: MeanSd,
    /// Coverage of the central 90 % interval.
    pub coverage_90: MeanSd,
    /// Width of the central 90 % interval.
    pub width_90: MeanSd,
    /// PIT calibration error.
    pub pit_error: MeanSd,
    /// Coverage of the conformal intervals.
    pub conformal_coverage: MeanSd,
    /// Width of the conformal intervals.
    pub conformal_width: MeanSd,
    /// Trainable parameters.
    pub parameters: MeanSd,
    /// File bytes.
    pub bytes: MeanSd,
}

/// What a regression reproduction ran and wrote.
#[derive(Debug, Clone)]
pub struct RegressionReproduction {
    /// Each seed's rows, one per method of [`Method::MAIN`].
    pub runs: Vec<Vec<RegressionRow>>,
    /// Each method's mean ± sd over the seeds.
    pub summaries: Vec<RegressionMeans>,
    /// The table ([`REGRESSION_MD`]).
    pub table: PathBuf,
    /// The report with the coverage figure.
    pub report: PathBuf,
}

/// The top-level fields of two values' JSON that differ, each as `prefix.field`.
fn differing(prefix: &str, given: &impl Serialize, expected: &impl Serialize) -> Vec<String> {
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) =
        (serde_json::to_value(given), serde_json::to_value(expected))
    else {
        return vec![prefix.to_string()];
    };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{prefix}.{k}"))
        .collect()
}

/// The BBB recipe whose training, start and sigma initialisation `setup` holds (what
/// [`crate::presets::apply_recipe`] writes), or the fields that differ from the default one.
fn recipe_of(setup: &Setup) -> Result<BbbRecipe, Vec<String>> {
    let expected = |r: BbbRecipe| {
        let mut bbb = r.train_config(setup.bbb.epochs);
        bbb.seed = setup.bbb.seed;
        let mut bayes = bnn_models::BayesOptions::new();
        bayes.estimator = setup.bayes.estimator;
        (bayes.weight_sigma, bayes.bias_sigma) = r.sigma_init();
        (bbb, bayes)
    };
    let differences = |r: BbbRecipe| {
        let (bbb, bayes) = expected(r);
        let mut d = differing("bbb", &setup.bbb, &bbb);
        d.extend(differing("bayes", &setup.bayes, &bayes));
        if setup.bbb_from_deterministic != r.from_deterministic() {
            d.push("bbb_from_deterministic".into());
        }
        d
    };
    [BbbRecipe::Pretrained, BbbRecipe::Reference]
        .into_iter()
        .find(|r| differences(*r).is_empty())
        .ok_or_else(|| differences(BbbRecipe::Pretrained))
}

/// Checks that a table's `setup` asks only for what the regression experiment runs (see the
/// module's documentation), and returns the BBB recipe it holds. The error names every field
/// that differs.
pub fn check_setup(setup: &Setup) -> Result<BbbRecipe, Error> {
    let mut fields = Vec::new();
    let mut det = TrainConfig::deterministic_regression(setup.deterministic.epochs);
    det.seed = setup.deterministic.seed;
    fields.extend(differing("deterministic", &setup.deterministic, &det));
    let recipe = match recipe_of(setup) {
        Ok(r) => Some(r),
        Err(d) => {
            fields.extend(d);
            None
        }
    };
    for (set, name) in [
        (setup.ood.is_some(), "ood"),
        (!setup.held_out_classes.is_empty(), "held_out_classes"),
        (!setup.corruptions.is_empty(), "corruptions"),
        (setup.train_subset.is_some(), "train_subset"),
        (setup.test_subset.is_some(), "test_subset"),
        (setup.data_dir.is_some(), "data_dir"),
    ] {
        if set {
            fields.push(name.into());
        }
    }
    match recipe {
        Some(r) if fields.is_empty() => Ok(r),
        _ => Err(Error::Usage(format!(
            "{} is a regression table, whose experiment runs the command line's stages \
             (train, compress, calibrate --conformal, eval): it sets each stage's epochs and \
             seed, the compression, the BBB recipe (--recipe), the estimator, the validation \
             split, the samples, the targets, the noise and the MLP's widths, and nothing \
             else. The setup changes {}: leave them at the table's defaults",
            setup.dataset,
            fields.join(", ")
        ))),
    }
}

/// Trains, compresses and evaluates the three methods on `setup`'s table (a seed's setup)
/// into `setup.out_dir`; a stage whose row an earlier run cached is kept when `setup.resume`,
/// and an interrupted training goes on from its checkpoint. Without `resume`, the stages an
/// earlier run left are removed first.
pub fn run(
    setup: &Setup,
    device: &Device,
    progress: &mut dyn Progress,
) -> Result<Vec<RegressionRow>, Error> {
    let recipe = check_setup(setup)?;
    store::clear_stages_unless_resuming(setup)?;
    let mut rows = Vec::with_capacity(Method::MAIN.len());
    for method in Method::MAIN {
        progress.stage(method.name());
        let dir = store::stage_path(&setup.out_dir, method.name());
        let cached = dir.join(REGRESSION_ROW_FILE);
        let row = if setup.resume && cached.is_file() {
            store::read_json(&cached)?
        } else {
            let model = run_stage(setup, method, recipe, &dir, device, progress)?;
            let row = evaluate(setup, method, &model, device)?;
            store::write_json(&cached, &row)?;
            row
        };
        rows.push(row);
    }
    Ok(rows)
}

/// Trains (deterministic, BBB) or compresses (2DGBNN) one method into `dir`; returns the
/// model's path (the directory, or the `.swb` file in it).
fn run_stage(
    setup: &Setup,
    method: Method,
    recipe: BbbRecipe,
    dir: &Path,
    device: &Device,
    progress: &mut dyn Progress,
) -> Result<PathBuf, Error> {
    let train_request = |kind: TrainKind, epochs: usize, seed: u64| {
        let mut r = TrainRequest::new(setup.dataset.clone(), setup.arch, kind, dir.into());
        r.targets = setup.targets.clone();
        r.noise = setup.noise;
        r.mlp_hidden = setup.mlp_hidden.clone();
        r.epochs = epochs;
        r.validation = setup.validation;
        r.estimator = setup.bayes.estimator;
        r.seed = seed;
        r.workers = setup.workers;
        // An interrupted stage goes on from its last epoch.
        r.resume = setup.resume && dir.join(Checkpointer::STATE_FILE).is_file();
        r
    };
    let bbb_dir = store::stage_path(&setup.out_dir, Method::Bbb.name());
    match method {
        Method::Deterministic => {
            let r = train_request(
                TrainKind::Deterministic,
                setup.deterministic.epochs,
                setup.deterministic.seed,
            );
            train(&r, device, progress)?;
            Ok(dir.into())
        }
        Method::Bbb => {
            let mut r = train_request(TrainKind::Bayesian, setup.bbb.epochs, setup.bbb.seed);
            r.recipe = Some(recipe);
            if recipe.from_deterministic() {
                r.from = Some(store::stage_path(
                    &setup.out_dir,
                    Method::Deterministic.name(),
                ));
            }
            train(&r, device, progress)?;
            Ok(dir.into())
        }
        Method::Gbnn2d => {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            let swb = ModelDir::new(dir).swb_path();
            let mut r = CompressRequest::new(bbb_dir, setup.dataset.clone(), swb.clone());
            // The file is this stage's own, from an earlier run that ended before its row.
            r.force = true;
            r.settings = CompressSettings::Json(
                serde_json::to_string(&setup.compress).map_err(Error::json)?,
            );
            r.validation = setup.validation;
            r.workers = setup.workers;
            compress(&r, device, progress)?;
            Ok(swb)
        }
        Method::Qbnn | Method::Ensemble => Err(Error::Usage(format!(
            "`{method}` is a baseline of the image tables, not a stage of the regression \
             experiment"
        ))),
    }
}

/// Fits the conformal intervals of the model at `model` on the validation split and
/// evaluates it on the test rows, as `swbnn calibrate --conformal` and `swbnn eval` do.
fn evaluate(
    setup: &Setup,
    method: Method,
    model: &Path,
    device: &Device,
) -> Result<RegressionRow, Error> {
    let seed = evaluation_seed(setup, method);
    let mut c = CalibrateRequest::new(model.into(), setup.dataset.clone());
    c.conformal = Some(CONFORMAL_LEVEL);
    c.samples = setup.samples;
    c.seed = seed;
    c.workers = setup.workers;
    calibrate(&c, device)?;
    let mut e = EvalRequest::new(model.into(), setup.dataset.clone());
    e.samples = setup.samples;
    e.seed = seed;
    e.workers = setup.workers;
    let outcome = eval(&e, device)?;
    let not_regression = || {
        Error::Usage(format!(
            "{}: the evaluation holds no regression metrics",
            model.display()
        ))
    };
    let reg = outcome.regression.ok_or_else(not_regression)?;
    let interval = reg
        .summary
        .intervals
        .iter()
        .find(|i| (i.level - INTERVAL_LEVEL).abs() < 1e-9)
        .ok_or_else(not_regression)?;
    let Some(ConformalEvaluation::Intervals { summary: conf, .. }) = outcome.conformal else {
        return Err(Error::Usage(format!(
            "{}: the evaluation holds no conformal intervals",
            model.display()
        )));
    };
    let net = swbnn_ops::load::load_model(model, device)?.net;
    let file = match model.is_dir() {
        true => ModelDir::new(model).weights_path(),
        false => model.into(),
    };
    let bytes = std::fs::metadata(&file)
        .map_err(|e| Error::io(&file, e))?
        .len();
    Ok(RegressionRow {
        method,
        rmse: reg.summary.rmse,
        nll: reg.summary.gaussian_nll,
        crps: reg.summary.crps,
        coverage_90: interval.coverage,
        width_90: interval.mean_width,
        pit_error: reg.summary.pit_calibration_error,
        conformal_level: conf.level,
        conformal_coverage: conf.coverage,
        conformal_width: conf.mean_width,
        parameters: count_params(&net).trainable,
        bytes,
        test_rows: reg.summary.n,
        reliability: reg.reliability,
    })
}

/// Each method's mean ± sd over `runs` (one row per method per run).
pub fn summarise(runs: &[Vec<RegressionRow>]) -> Vec<RegressionMeans> {
    Method::MAIN
        .into_iter()
        .filter_map(|method| {
            let rows: Vec<&RegressionRow> = runs
                .iter()
                .flat_map(|r| r.iter().filter(|row| row.method == method))
                .collect();
            let of = |f: fn(&RegressionRow) -> f64| {
                MeanSd::of(&rows.iter().map(|r| f(r)).collect::<Vec<_>>())
            };
            Some(RegressionMeans {
                method,
                seeds: rows.len(),
                rmse: of(|r| r.rmse)?,
                nll: of(|r| r.nll)?,
                crps: of(|r| r.crps)?,
                coverage_90: of(|r| r.coverage_90)?,
                width_90: of(|r| r.width_90)?,
                pit_error: of(|r| r.pit_error)?,
                conformal_coverage: of(|r| r.conformal_coverage)?,
                conformal_width: of(|r| r.conformal_width)?,
                parameters: of(|r| r.parameters as f64)?,
                bytes: of(|r| r.bytes as f64)?,
            })
        })
        .collect()
}

/// The table in Markdown: one line per method, mean ± sd (the value alone for one seed).
pub fn markdown(summaries: &[RegressionMeans]) -> String {
    let cell = |m: MeanSd, digits: usize| match summaries.first().map_or(1, |s| s.seeds) {
        1 => format!("{:.digits$}", m.mean),
        _ => format!("{:.digits$} ± {:.digits$}", m.mean, m.sd),
    };
    let mut out = format!(
        "| Method | RMSE | NLL | CRPS | 90 % coverage | 90 % width | PIT error | conformal \
         {level:.0} % coverage | conformal width | parameters | bytes |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
        level = CONFORMAL_LEVEL * 100.0
    );
    for s in summaries {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            s.method.label(),
            cell(s.rmse, 3),
            cell(s.nll, 3),
            cell(s.crps, 3),
            cell(s.coverage_90, 3),
            cell(s.width_90, 3),
            cell(s.pit_error, 3),
            cell(s.conformal_coverage, 3),
            cell(s.conformal_width, 3),
            cell(s.parameters, 0),
            cell(s.bytes, 0),
        ));
    }
    out
}

/// What [`REGRESSION_JSON`] holds.
#[derive(Serialize)]
struct StoredTable<'a> {
    summaries: &'a [RegressionMeans],
    runs: &'a [Vec<RegressionRow>],
}

/// [`StoredTable`] read back.
#[derive(Deserialize)]
struct ReadTable {
    runs: Vec<Vec<RegressionRow>>,
}

/// Whether `dir` is the run directory of a regression experiment (it holds [`REGRESSION_JSON`]).
pub fn is_regression_run(dir: &Path) -> bool {
    dir.join(REGRESSION_JSON).is_file()
}

/// The rows of seed `seed` (the first when `None`) of the regression run in `dir`, as its
/// [`REGRESSION_JSON`] holds them. Errors: no such file, or no such seed (naming how many the
/// run has).
pub fn read_rows(dir: &Path, seed: Option<usize>) -> Result<Vec<RegressionRow>, Error> {
    let table: ReadTable = store::read_json(&dir.join(REGRESSION_JSON))?;
    let i = seed.unwrap_or(0);
    let n = table.runs.len();
    table.runs.into_iter().nth(i).ok_or_else(|| {
        Error::Usage(format!(
            "--seed {i}: the regression run in {} has {n} seed(s)",
            dir.display()
        ))
    })
}

/// Draws the coverage figure of `rows` (one series per method) into `out`.
pub fn draw_coverage(
    rows: &[RegressionRow],
    size: bnn_plot::Size,
    out: &Path,
) -> Result<(), Error> {
    let series: Vec<bnn_plot::CoverageSeries> = rows
        .iter()
        .map(|r| bnn_plot::CoverageSeries {
            name: r.method.label(),
            points: &r.reliability,
        })
        .collect();
    bnn_plot::coverage(&series, size, out).map_err(crate::plot_error)
}

/// Writes the table of `runs` into `dir` ([`REGRESSION_MD`], [`REGRESSION_JSON`]); returns
/// the summaries and the Markdown file's path.
fn write_table(
    dir: &Path,
    runs: &[Vec<RegressionRow>],
) -> Result<(Vec<RegressionMeans>, PathBuf), Error> {
    let summaries = summarise(runs);
    let md = dir.join(REGRESSION_MD);
    store::write_text(&md, &markdown(&summaries))?;
    store::write_json(
        &dir.join(REGRESSION_JSON),
        &StoredTable {
            summaries: &summaries,
            runs,
        },
    )?;
    Ok((summaries, md))
}

/// Writes `report.md` into `setup.out_dir`: the table and the coverage figure of `rows`
/// (the first seed's), whose file is `figures/coverage.png`.
fn write_report(
    setup: &Setup,
    summaries: &[RegressionMeans],
    rows: &[RegressionRow],
    seeds: usize,
) -> Result<PathBuf, Error> {
    let figures = setup.out_dir.join(crate::report::FIGURE_DIR);
    std::fs::create_dir_all(&figures).map_err(|e| Error::io(&figures, e))?;
    draw_coverage(rows, COVERAGE_SIZE, &figures.join("coverage.png"))?;
    let over = match seeds {
        1 => "one seed".to_string(),
        n => format!("mean ± sd over {n} seeds"),
    };
    let text = format!(
        "# Regression on {dataset}\n\n\
         Deterministic net, Bayes by Backprop and 2DGBNN on the test rows ({over}). NLL is the \
         Gaussian NLL of the Monte-Carlo mixture per row and target; RMSE, CRPS and widths are \
         in the targets' units. The conformal intervals are fitted on the validation split at \
         level {level}.\n\n{table}\n\
         ## Coverage\n\nObserved coverage of the central predictive intervals against their \
         nominal level{first}; a calibrated model lies on the diagonal.\n\n\
         ![coverage]({dir}/coverage.png)\n",
        dataset = setup.dataset,
        level = CONFORMAL_LEVEL,
        table = markdown(summaries),
        first = if seeds > 1 { " (the first seed)" } else { "" },
        dir = crate::report::FIGURE_DIR,
    );
    let path = setup.out_dir.join("report.md");
    store::write_text(&path, &text)?;
    Ok(path)
}

/// Runs [`run`] for seeds `0..seeds` (one seed in `setup.out_dir`, several in
/// `out_dir/seed-<i>` with their own `setup.json` and table, as the image experiment does),
/// then writes the table over seeds and the report into `setup.out_dir`.
pub fn run_seeds(
    setup: &Setup,
    seeds: usize,
    device: &Device,
    progress: &mut dyn Progress,
) -> Result<RegressionReproduction, Error> {
    // Refused before any stage of any seed runs.
    check_setup(setup)?;
    let mut runs = Vec::with_capacity(seeds);
    if seeds <= 1 {
        runs.push(run(setup, device, progress)?);
    } else {
        for i in 0..seeds as u64 {
            progress.stage(&format!("seed {} of {seeds}", i + 1));
            let s = setup.for_seed(i);
            store::write_setup(&s.out_dir, &s)?;
            let rows = run(&s, device, progress)?;
            write_table(&s.out_dir, std::slice::from_ref(&rows))?;
            runs.push(rows);
        }
    }
    let (summaries, table) = write_table(&setup.out_dir, &runs)?;
    let first = runs.first().map(Vec::as_slice).unwrap_or_default();
    let report = write_report(setup, &summaries, first, runs.len())?;
    Ok(RegressionReproduction {
        runs,
        summaries,
        table,
        report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::{self, apply_recipe};

    fn row(method: Method, rmse: f64, parameters: usize) -> RegressionRow {
        RegressionRow {
            method,
            rmse,
            nll: 1.0,
            crps: 0.5,
            coverage_90: 0.9,
            width_90: 3.0,
            pit_error: 0.01,
            conformal_level: CONFORMAL_LEVEL,
            conformal_coverage: 0.9,
            conformal_width: 3.1,
            parameters,
            bytes: 100,
            test_rows: 10,
            reliability: Vec::new(),
        }
    }

    #[test]
    fn the_table_is_each_methods_mean_and_sample_sd() {
        let runs = vec![
            vec![
                row(Method::Deterministic, 1.0, 10),
                row(Method::Bbb, 2.0, 20),
                row(Method::Gbnn2d, 4.0, 2),
            ],
            vec![
                row(Method::Deterministic, 3.0, 10),
                row(Method::Bbb, 2.0, 20),
                row(Method::Gbnn2d, 6.0, 4),
            ],
        ];
        let s = summarise(&runs);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].method, Method::Deterministic);
        assert_eq!((s[0].rmse.mean, s[0].seeds), (2.0, 2));
        assert!((s[0].rmse.sd - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!((s[2].parameters.mean, s[1].rmse.sd), (3.0, 0.0));
        let md = markdown(&s);
        assert!(md.contains("| Deterministic | 2.000 ± 1.414 |"), "{md}");
        assert!(md.contains("| 2DGBNN | 5.000 ± 1.414 |"), "{md}");
        // One seed: the values alone.
        let one = markdown(&summarise(&runs[..1]));
        assert!(
            one.contains("| BBB | 2.000 | 1.000 |") && !one.contains('±'),
            "{one}"
        );
    }

    /// A table-like setup without reading a table: the regression recipes' training.
    fn table_like() -> Setup {
        let mut s = presets::setup(
            bnn_data::DatasetId::FashionMnist,
            Some(bnn_models::Arch::Mlp),
            true,
            &crate::data::OodSearch::from_env(Path::new(".")),
            "out".into(),
        );
        s.ood = None;
        let seed = s.deterministic.seed;
        s.deterministic = TrainConfig::deterministic_regression(7);
        s.deterministic.seed = seed;
        apply_recipe(BbbRecipe::Pretrained, &mut s);
        s
    }

    #[test]
    fn either_bbb_recipe_is_run_and_other_changes_are_named() {
        let s = table_like();
        assert_eq!(check_setup(&s).unwrap(), BbbRecipe::Pretrained);
        let mut reference = s.clone();
        apply_recipe(BbbRecipe::Reference, &mut reference);
        assert_eq!(check_setup(&reference).unwrap(), BbbRecipe::Reference);
        // Epochs and seeds are the stages' own settings.
        let mut longer = s.clone();
        longer.deterministic.epochs = 300;
        longer.bbb.epochs = 2;
        longer.bbb.seed = 77;
        assert!(check_setup(&longer).is_ok());

        let mut changed = s.clone();
        changed.bbb.lr *= 2.0;
        changed.deterministic.batch_size = 7;
        changed.test_subset = Some(5);
        let e = check_setup(&changed).unwrap_err().to_string();
        for field in ["bbb.lr", "deterministic.batch_size", "test_subset"] {
            assert!(e.contains(field), "{field}: {e}");
        }
        assert!(!e.contains("bbb.epochs"), "{e}");
    }
}
