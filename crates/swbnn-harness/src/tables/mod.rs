//! The paper's other tables in one run: the quantised-BNN and deep-ensemble baselines, the
//! ablations and sweeps of 2DGBNN, and the timings, written as one Markdown report
//! (`tables.md`) and every row as JSON (`tables.json`).
//!
//! The main experiment ([`experiment::run`]) trains once; every other table reuses its
//! stages: the Bayes-by-Backprop model feeds the quantised BNN, every 2DGBNN variant and
//! sweep, and the deterministic network is the ensemble's first member. Each new row has its
//! own stage directory under `out/stages/` with a checkpoint and a cached `row.json`, so a run
//! resumes (`Setup::resume`) from where it stopped. A resumed run must use the setup the
//! directory was made with (`tables-setup.json`), else it stops with an error.
//!
//! | table | rows |
//! |---|---|
//! | `main` | deterministic, Bayes by Backprop, 2DGBNN (the paper's columns) |
//! | `equal-size` | 2DGBNN against baselines of about its size, each retrained with its stage-3 settings and stop rule: 1-D sharing (`mu` only), stage 3 without sharing (the BBB itself), SNR pruning to its parameters and to its bytes, the quantised BNNs; and BBB (f32) |
//! | `quant` | BBB (f32), the quantised BNN with int8 means and sigma at each of [`TablesConfig::sigma_bits`], 2DGBNN |
//! | `ensemble` | deterministic, the M-member deep ensemble, BBB, 2DGBNN |
//! | `ablation` | 2DGBNN with and without ellipse weights and outliers |
//! | `gmm-k` | 2DGBNN at each GMM size of [`TablesConfig::gmm_k`] |
//! | `tau-w` | 2DGBNN at each `tau_w` of [`TablesConfig::tau_w`] |
//! | `merge` | 2DGBNN before (merging off) and after merging |
//! | `timing` | training seconds per epoch, MC inference images/s |

pub mod auto;
pub mod plan;
mod report;
mod timing;
mod variants;

use std::time::Instant;

use bnn_models::{ModelConfig, Network};
use bnn_train::evaluate_tempered;
use burn::prelude::*;
use serde::{Deserialize, Serialize};
use swshare::compress::CompressConfig;
use swshare::snr_prune::PruneTarget;

pub use report::{TableSummary, markdown, summarise};
pub use timing::{TimingConfig, TimingRow};
pub use variants::{Variant, variants};

use crate::Error;
use crate::baselines::{ensemble, qbnn};
use crate::data::ExperimentData;
use crate::experiment::{
    self, Progress, SNR_PRUNE_STAGES, calibrate_stage, calibration_split, evaluation_seed,
    gbnn_stage, open_gbnn_stage, weight_stats,
};
use crate::method::Method;
use crate::results::{Outcome, Row};
use crate::setup::Setup;
use crate::store::{self, StageDir};

/// One table of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TableId {
    /// Deterministic, BBB and 2DGBNN.
    Main,
    /// 2DGBNN against simpler compressions retrained the same way.
    EqualSize,
    /// The quantised BNN (Subedar et al.) beside 2DGBNN.
    Quant,
    /// The deep ensemble.
    Ensemble,
    /// 2DGBNN without ellipses / outliers / both.
    Ablation,
    /// The GMM size K.
    GmmK,
    /// The `tau_w` sweep.
    TauW,
    /// Before and after merging.
    Merge,
    /// Training and inference times.
    Timing,
    /// `compress --auto`: the smallest file within the margins on validation, on test.
    Auto,
}

impl TableId {
    /// Every table, in report order.
    pub const ALL: [TableId; 10] = [
        TableId::Main,
        TableId::EqualSize,
        TableId::Quant,
        TableId::Ensemble,
        TableId::Ablation,
        TableId::GmmK,
        TableId::TauW,
        TableId::Merge,
        TableId::Timing,
        TableId::Auto,
    ];

    /// The paper's tables and the baselines: what `all` asks for. `auto` (a search, the
    /// costliest stage) is asked for by name.
    pub const PAPER: [TableId; 9] = [
        TableId::Main,
        TableId::EqualSize,
        TableId::Quant,
        TableId::Ensemble,
        TableId::Ablation,
        TableId::GmmK,
        TableId::TauW,
        TableId::Merge,
        TableId::Timing,
    ];

    /// The table's name on the command line and in `tables.json`.
    pub fn name(self) -> &'static str {
        match self {
            TableId::Main => "main",
            TableId::EqualSize => "equal-size",
            TableId::Quant => "quant",
            TableId::Ensemble => "ensemble",
            TableId::Ablation => "ablation",
            TableId::GmmK => "gmm-k",
            TableId::TauW => "tau-w",
            TableId::Merge => "merge",
            TableId::Timing => "timing",
            TableId::Auto => "auto",
        }
    }

    /// Parses a list of names (`all` for the paper's tables, [`TableId::PAPER`]; `ablation` brings `gmm-k` with it, the
    /// issue's "choice of GMM K" ablation) into report order without repeats.
    pub fn parse_list<S: AsRef<str>>(names: &[S]) -> Result<Vec<TableId>, Error> {
        let mut chosen = Vec::new();
        for name in names {
            let name = name.as_ref().trim();
            match name {
                "all" => chosen.extend(TableId::PAPER),
                "ablation" => chosen.extend([TableId::Ablation, TableId::GmmK]),
                _ => chosen.push(
                    TableId::ALL
                        .into_iter()
                        .find(|t| t.name() == name)
                        .ok_or_else(|| {
                            Error::Usage(format!(
                                "unknown table `{name}` (known: {}, all)",
                                TableId::ALL.map(TableId::name).join(", ")
                            ))
                        })?,
                ),
            }
        }
        if chosen.is_empty() {
            return Err(Error::Usage("--tables needs at least one table".into()));
        }
        Ok(TableId::ALL
            .into_iter()
            .filter(|t| chosen.contains(t))
            .collect())
    }
}

impl std::fmt::Display for TableId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Test images (and as many OOD images) every row is evaluated on in a `--quick --tables`
/// run: with all tables that is about 20 Monte-Carlo evaluations of 30 samples, which on the
/// full 10,000 + 10,000 images would alone take longer than the run's 15-minute budget on two
/// cores.
pub const QUICK_TEST_SUBSET: usize = 2_000;

/// The quick preset's changes for a run with tables: [`QUICK_TEST_SUBSET`] test images.
pub fn quick_overrides(setup: &mut Setup) {
    setup.test_subset = Some(QUICK_TEST_SUBSET);
}

/// What the tables sweep, beside the [`Setup`] of the main experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TablesConfig {
    /// Bits of the quantised BNN's standard deviations, one row each (the issue's 8, 4, 2, 1;
    /// the paper's table has 4, 2 and 1).
    pub sigma_bits: Vec<u8>,
    /// Members of the deep ensemble.
    pub ensemble_members: usize,
    /// `tau_w` values of the sweep (the paper's tau_w table: 0.1, 0.2, 0.4, 0.6).
    pub tau_w: Vec<f64>,
    /// GMM sizes K of the `gmm-k` table; empty: a quarter, half, one and three times the
    /// setup's K ([`TablesConfig::for_setup`]), which spans the paper's 2,000 and 6,000.
    pub gmm_k: Vec<usize>,
    /// The inference-speed measurement.
    pub timing: TimingConfig,
}

impl Default for TablesConfig {
    fn default() -> Self {
        Self {
            sigma_bits: vec![8, 4, 2, 1],
            ensemble_members: ensemble::DEFAULT_MEMBERS,
            tau_w: vec![0.1, 0.2, 0.4, 0.6],
            gmm_k: Vec::new(),
            timing: TimingConfig::default(),
        }
    }
}

impl TablesConfig {
    /// The default sweeps for `setup`, with the K values around its GMM size.
    pub fn for_setup(setup: &Setup) -> Self {
        Self {
            gmm_k: Self::default_k(setup.compress.sharing.gmm.k),
            ..Self::default()
        }
    }

    /// A quarter, half, one and three times `k` (at least 2 each, without repeats).
    pub fn default_k(k: usize) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        for v in [k / 4, k / 2, k, 3 * k] {
            let v = v.max(2);
            if !out.contains(&v) {
                out.push(v);
            }
        }
        out
    }

    /// Range checks, naming the field.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |field: &str, why: String| Err(Error::Usage(format!("tables.{field}: {why}")));
        if let Some(b) = self.sigma_bits.iter().find(|b| !(1..=8).contains(*b)) {
            return bad("sigma_bits", format!("{b} is not in 1..=8"));
        }
        if self.ensemble_members < 2 {
            return bad(
                "ensemble_members",
                format!("{} (an ensemble needs 2 or more)", self.ensemble_members),
            );
        }
        if let Some(t) = self.tau_w.iter().find(|t| !(t.is_finite() && **t >= 0.0)) {
            return bad("tau_w", format!("{t} is not finite and >= 0"));
        }
        if self.gmm_k.contains(&0) {
            return bad("gmm_k", "0 components".into());
        }
        self.timing.validate()
    }
}

/// One row of one table: the evaluated model and its setting (`tables.json` holds a list).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableRow {
    /// The table.
    pub table: TableId,
    /// The row's setting as the report prints it (e.g. `sigma 4 bits`, `K = 50`).
    pub label: String,
    /// The model's metrics, parameters and bytes.
    pub row: Row,
}

/// The results of [`run`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TablesOutcome {
    /// The tables produced, in report order.
    pub tables: Vec<TableId>,
    /// The main experiment (its rows and the 2DGBNN compression report).
    pub main: Outcome,
    /// Every row of every table.
    pub rows: Vec<TableRow>,
    /// The timing table.
    pub timing: Vec<TimingRow>,
    /// The search of the `auto` table (absent in runs without it, and in files written
    /// before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<auto::AutoOutcome>,
}

/// How the report introduces itself: the command that made it and the backend it ran on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportContext {
    /// The command line.
    pub command: String,
    /// The backend's name (`flex`, `ndarray`, `wgpu`, ...).
    pub backend: String,
}

/// Loads the model a stage of the main experiment trained (`out/stages/<name>/`: its
/// `config.json` and last checkpoint) onto `device`.
pub fn load_stage_model(
    setup: &Setup,
    name: &str,
    device: &Device,
) -> Result<(Network, ModelConfig), Error> {
    StageDir::existing(store::stage_path(&setup.out_dir, name)).trained_model(device)
}

fn fingerprint(setup: &Setup, cfg: &TablesConfig) -> Result<serde_json::Value, Error> {
    let mut s = setup.clone();
    // Neither changes a result.
    s.resume = false;
    s.workers = 0;
    Ok(serde_json::json!({
        "setup": serde_json::to_value(&s).map_err(Error::json)?,
        "tables": serde_json::to_value(cfg).map_err(Error::json)?,
    }))
}

/// Pins the run directory's setup ([`store::TABLES_SETUP_FILE`]): a resumed run with another
/// setup is refused.
fn check_fingerprint(setup: &Setup, cfg: &TablesConfig) -> Result<(), Error> {
    let path = setup.out_dir.join(store::TABLES_SETUP_FILE);
    let now = fingerprint(setup, cfg)?;
    if setup.resume && path.exists() {
        let before: serde_json::Value = store::read_json(&path)?;
        if before != now {
            return Err(Error::Usage(format!(
                "{}: this directory was made with another setup; --resume would mix the two \
                 runs' stages. Rerun without --resume, or choose another --out",
                path.display()
            )));
        }
    }
    std::fs::create_dir_all(&setup.out_dir).map_err(|e| Error::io(&setup.out_dir, e))?;
    store::write_json(&path, &now)
}

/// The 2DGBNN row of a variant configuration, trained in its own stage from the BBB model
/// ([`gbnn_stage`], as the main table's row; cached and resumable like every stage).
#[allow(clippy::too_many_arguments)]
fn variant_row(
    setup: &Setup,
    stage_name: &str,
    cfg: &CompressConfig,
    bayes: &Network,
    bayes_config: &ModelConfig,
    data: &ExperimentData,
    device: &Device,
    progress: &mut dyn Progress,
) -> Result<Row, Error> {
    let stage = open_gbnn_stage(setup, stage_name, cfg)?;
    // Unlike the main table, nothing here needs the model once its row is known.
    if let Some(r) = stage.cached_row()? {
        return Ok(r);
    }
    progress.stage(stage_name);
    store::write_json(&stage.path().join(store::COMPRESS_CONFIG_FILE), cfg)?;
    let g = gbnn_stage(
        setup,
        stage,
        cfg,
        bayes,
        bayes_config,
        data,
        device,
        progress,
    )?;
    progress.row(&g.row);
    Ok(g.row)
}

/// The rows of `table`'s 2DGBNN configurations ([`variants`]), with their labels; a
/// configuration already in `computed` (trained in this run) is not trained again, and each
/// new one is added to it.
#[allow(clippy::too_many_arguments)]
fn variant_rows(
    setup: &Setup,
    cfg: &TablesConfig,
    table: TableId,
    (bayes, bayes_config): (&Network, &ModelConfig),
    data: &ExperimentData,
    device: &Device,
    computed: &mut Vec<(CompressConfig, Row)>,
    progress: &mut dyn Progress,
) -> Result<Vec<(String, Row)>, Error> {
    let mut out = Vec::new();
    for v in variants(setup, cfg, table) {
        let found = computed
            .iter()
            .find(|(c, _)| *c == v.compress)
            .map(|(_, r)| r.clone());
        let r = match found {
            Some(r) => r,
            None => {
                let r = variant_row(
                    setup,
                    &v.stage,
                    &v.compress,
                    bayes,
                    bayes_config,
                    data,
                    device,
                    progress,
                )?;
                computed.push((v.compress.clone(), r.clone()));
                r
            }
        };
        out.push((v.label, r));
    }
    Ok(out)
}

/// What the quantised rows are made from.
struct QuantInputs<'a> {
    bayes: (&'a Network, &'a ModelConfig),
    data: &'a ExperimentData,
    device: &'a Device,
    bbb_params: usize,
}

/// The quantised BNN's row at each of `cfg.sigma_bits`, labelled; a row already in `done`
/// (made for another table of this run) is not made again, and each new one is kept there.
fn quant_rows(
    done: &mut Vec<(u8, Row)>,
    setup: &Setup,
    cfg: &TablesConfig,
    q: &QuantInputs<'_>,
    progress: &mut dyn Progress,
) -> Result<Vec<(String, Row)>, Error> {
    let mut out = Vec::new();
    for &bits in &cfg.sigma_bits {
        let r = match done.iter().find(|(b, _)| *b == bits) {
            Some((_, r)) => r.clone(),
            None => {
                progress.stage(&format!("qbnn-sigma{bits}"));
                let (bayes, config) = q.bayes;
                let r = qbnn_row(setup, bits, bayes, config, q.data, q.device, q.bbb_params)?;
                progress.row(&r);
                done.push((bits, r.clone()));
                r
            }
        };
        out.push((format!("qbnn int8 mu, sigma {bits} bit"), r));
    }
    Ok(out)
}

/// The quantised-BNN row at `bits`: quantise, write the `.qbnn` file, rebuild the model from
/// its bytes, fit its temperature on the validation split (kept in the file), evaluate (stage
/// `qbnn-sigma<bits>`).
fn qbnn_row(
    setup: &Setup,
    bits: u8,
    bayes: &Network,
    bayes_config: &ModelConfig,
    data: &ExperimentData,
    device: &Device,
    bbb_params: usize,
) -> Result<Row, Error> {
    let stage = StageDir::open(setup, &format!("qbnn-sigma{bits}"))?;
    stage.row(|| {
        let started = Instant::now();
        let file = qbnn::quantize(bayes, bayes_config, bits)?;
        let path = stage.path().join(store::QBNN_FILE);
        let mut bytes = swshare::format::qbnn::save(&path, &file)?;
        let seconds = started.elapsed().as_secs_f64();
        let (model, _) = qbnn::from_qbnn(&swshare::format::qbnn::load(&path)?, device)?;
        let fit = calibrate_stage(
            &stage,
            &model,
            calibration_split(data),
            setup.samples,
            device,
            evaluation_seed(setup, Method::Qbnn),
        )?;
        let t = fit.as_ref().map(|c| c.temperature);
        if let Some(c) = &fit {
            // The file carries its temperature; its size is the row's.
            let with_t = swshare::format::qbnn::QbnnData {
                temperature: Some(c.temperature),
                ..file
            };
            bytes = swshare::format::qbnn::save(&path, &with_t)?;
        }
        // Seeded, as every stage's evaluation: a resumed run gives the same row.
        device.seed(evaluation_seed(setup, Method::Qbnn));
        let mut evs = evaluate_tempered(
            &model,
            &data.test_loader,
            data.ood_loader.as_ref(),
            setup.samples,
            &std::iter::once(1.0).chain(t).collect::<Vec<_>>(),
        )?
        .into_iter()
        .map(|(ev, _, _)| ev);
        let ev = evs
            .next()
            .ok_or_else(|| Error::Usage("no evaluation at temperature 1".into()))?;
        let mut r = Row::new(
            setup.arch,
            Method::Qbnn,
            ev,
            bbb_params,
            bytes,
            seconds,
            weight_stats(&model)?,
        );
        r.compression_ratio = Some(0.0);
        if let Some((t, cal)) = t.zip(evs.next()) {
            r = r.with_calibrated(t, &cal);
        }
        Ok(r)
    })
}

/// The main experiment's row of `method`.
pub(crate) fn main_row(main: &Outcome, method: Method) -> Result<&Row, Error> {
    main.rows
        .iter()
        .find(|r| r.method == method)
        .ok_or_else(|| Error::MissingRow {
            method: method.to_string(),
        })
}

/// Runs the main experiment and every table of `tables` for one seed, writes `tables.md` and
/// `tables.json` into `setup.out_dir`, and returns the rows.
pub fn run(
    setup: &Setup,
    cfg: &TablesConfig,
    tables: &[TableId],
    device: &Device,
    context: &ReportContext,
    progress: &mut dyn Progress,
) -> Result<TablesOutcome, Error> {
    cfg.validate()?;
    check_fingerprint(setup, cfg)?;
    let main = experiment::run(setup, device, progress)?;
    store::write_tables(&setup.out_dir, &main)?;
    let [det_row, bbb_row, gbnn_row] = Method::MAIN.map(|method| main_row(&main, method));
    let (det_row, bbb_row, gbnn_row) = (det_row?, bbb_row?, gbnn_row?);
    let labelled = |table, label: &str, row: &Row| TableRow {
        table,
        label: label.to_string(),
        row: row.clone(),
    };
    let mut rows: Vec<TableRow> = Vec::new();
    let needs_data = tables.iter().any(|t| *t != TableId::Main);
    let data = match needs_data {
        true => Some(ExperimentData::open(setup)?),
        false => None,
    };
    let ad = device.clone().autodiff();
    let needs_bbb = tables.iter().any(|t| {
        matches!(
            t,
            TableId::EqualSize
                | TableId::Quant
                | TableId::Ablation
                | TableId::GmmK
                | TableId::TauW
                | TableId::Merge
                | TableId::Auto
        )
    });
    let bbb = match needs_bbb {
        true => Some(load_stage_model(setup, Method::Bbb.name(), &ad)?),
        false => None,
    };
    let bbb_params = bbb_row.parameters;
    // Rows of 2DGBNN configurations computed in this run, so a configuration two tables share
    // trains once; the main configuration is the main table's row.
    let mut computed: Vec<(CompressConfig, Row)> = vec![(setup.compress.clone(), gbnn_row.clone())];
    // The quantised BNNs' rows, made once for the tables that show them.
    let mut qbnn_rows: Vec<(u8, Row)> = Vec::new();
    let mut ensemble_row = None;
    let mut auto_outcome = None;
    for &table in tables {
        match table {
            TableId::Main => {
                for r in [det_row, bbb_row, gbnn_row] {
                    rows.push(labelled(table, r.method.name(), r));
                }
            }
            TableId::Quant => {
                let (bayes, bayes_config) = bbb.as_ref().expect("loaded for quant");
                let data = data.as_ref().expect("opened");
                rows.push(labelled(table, "bbb (f32)", bbb_row));
                let quant = QuantInputs {
                    bayes: (bayes, bayes_config),
                    data,
                    device,
                    bbb_params,
                };
                for (label, r) in quant_rows(&mut qbnn_rows, setup, cfg, &quant, progress)? {
                    rows.push(labelled(table, &label, &r));
                }
                rows.push(labelled(table, Method::Gbnn2d.name(), gbnn_row));
            }
            TableId::Ensemble => {
                progress.stage(Method::Ensemble.name());
                let data = data.as_ref().expect("opened");
                let r =
                    ensemble::run(setup, data, det_row, cfg.ensemble_members, device, progress)?;
                progress.row(&r);
                rows.push(labelled(table, Method::Deterministic.name(), det_row));
                rows.push(labelled(
                    table,
                    &format!("ensemble of {}", cfg.ensemble_members),
                    &r,
                ));
                rows.push(labelled(table, Method::Bbb.name(), bbb_row));
                rows.push(labelled(table, Method::Gbnn2d.name(), gbnn_row));
                ensemble_row = Some(r);
            }
            TableId::EqualSize => {
                let (bayes, bayes_config) = bbb.as_ref().expect("loaded for equal-size");
                let data = data.as_ref().expect("opened");
                for (label, r) in variant_rows(
                    setup,
                    cfg,
                    table,
                    (bayes, bayes_config),
                    data,
                    &ad,
                    &mut computed,
                    progress,
                )? {
                    rows.push(labelled(table, &label, &r));
                }
                let r = experiment::unshared_retrain_row(
                    setup,
                    bayes,
                    bayes_config,
                    data,
                    &ad,
                    progress,
                )?;
                rows.push(labelled(table, "stage 3 without sharing", &r));
                let targets = [
                    (
                        "SNR pruning, 2DGBNN's parameters",
                        PruneTarget::Parameters(gbnn_row.parameters),
                    ),
                    (
                        "SNR pruning, 2DGBNN's bytes",
                        PruneTarget::Bytes(gbnn_row.model_bytes),
                    ),
                ];
                for ((label, target), stage) in targets.into_iter().zip(SNR_PRUNE_STAGES) {
                    let r = experiment::snr_pruned_row(
                        setup,
                        stage,
                        target,
                        bayes,
                        bayes_config,
                        data,
                        &ad,
                        progress,
                    )?;
                    rows.push(labelled(table, label, &r));
                }
                let quant = QuantInputs {
                    bayes: (bayes, bayes_config),
                    data,
                    device,
                    bbb_params,
                };
                for (label, r) in quant_rows(&mut qbnn_rows, setup, cfg, &quant, progress)? {
                    rows.push(labelled(table, &label, &r));
                }
                rows.push(labelled(table, "bbb (f32)", bbb_row));
            }
            TableId::Ablation | TableId::GmmK | TableId::TauW | TableId::Merge => {
                let (bayes, bayes_config) = bbb.as_ref().expect("loaded for variants");
                let data = data.as_ref().expect("opened");
                for (label, r) in variant_rows(
                    setup,
                    cfg,
                    table,
                    (bayes, bayes_config),
                    data,
                    &ad,
                    &mut computed,
                    progress,
                )? {
                    rows.push(labelled(table, &label, &r));
                }
            }
            TableId::Timing => {}
            TableId::Auto => {
                let (bayes, bayes_config) = bbb.as_ref().expect("loaded for auto");
                let data = data.as_ref().expect("opened");
                let (r, o) = auto::auto_row(setup, (bayes, bayes_config), data, device, progress)?;
                rows.push(labelled(table, "bbb (f32)", bbb_row));
                rows.push(labelled(
                    table,
                    &format!("2dgbnn (K = {})", setup.compress.sharing.gmm.k),
                    gbnn_row,
                ));
                rows.push(labelled(table, auto::AUTO_LABEL, &r));
                auto_outcome = Some(o);
            }
        }
    }
    let timing = match tables.contains(&TableId::Timing) {
        true => {
            progress.stage("timing");
            timing::measure(
                setup,
                cfg,
                data.as_ref().expect("opened"),
                &main,
                ensemble_row.is_some().then_some(cfg.ensemble_members),
                device,
            )?
        }
        false => Vec::new(),
    };
    let outcome = TablesOutcome {
        tables: tables.to_vec(),
        main,
        rows,
        timing,
        auto: auto_outcome,
    };
    write_report(setup, cfg, context, std::slice::from_ref(&outcome))?;
    Ok(outcome)
}

/// [`run`] for seeds `0..seeds` (each in `out_dir/seed-<i>`, see [`Setup::for_seed`]), then
/// the report over all seeds (mean ± sd) in `out_dir`. One seed runs in `out_dir` itself.
pub fn run_seeds(
    setup: &Setup,
    cfg: &TablesConfig,
    tables: &[TableId],
    seeds: usize,
    device: &Device,
    context: &ReportContext,
    progress: &mut dyn Progress,
) -> Result<Vec<TablesOutcome>, Error> {
    if seeds <= 1 {
        return Ok(vec![run(setup, cfg, tables, device, context, progress)?]);
    }
    let mut outcomes = Vec::with_capacity(seeds);
    for i in 0..seeds as u64 {
        progress.stage(&format!("seed {} of {seeds}", i + 1));
        let s = setup.for_seed(i);
        // Each seed's directory records its own seed number.
        store::write_setup(&s.out_dir, &s)?;
        outcomes.push(run(&s, cfg, tables, device, context, progress)?);
    }
    write_report(setup, cfg, context, &outcomes)?;
    let validation: Vec<_> = outcomes.iter().map(|o| o.main.validation.clone()).collect();
    store::write_seed_validation(&setup.out_dir, &validation)?;
    Ok(outcomes)
}

/// Writes `tables.md` and `tables.json` for the outcomes of one or more seeds.
fn write_report(
    setup: &Setup,
    cfg: &TablesConfig,
    context: &ReportContext,
    outcomes: &[TablesOutcome],
) -> Result<(), Error> {
    // The search of the first seed, which the report's auto section shows.
    if let Some(a) = outcomes.first().and_then(|o| o.auto.as_ref()) {
        let dir = setup.out_dir.join("figures");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        crate::search_figure::search_figure(&a.search, &dir.join(auto::SEARCH_FIGURE))?;
    }
    let md = markdown(setup, cfg, context, outcomes);
    let summaries = summarise(outcomes);
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "command": context.command,
        "backend": context.backend,
        "setup": setup,
        "tables_config": cfg,
        "summaries": summaries,
        "seeds": outcomes,
    }))
    .map_err(Error::json)?;
    store::write_text(&setup.out_dir.join(store::TABLES_MD), &md)?;
    store::write_text(&setup.out_dir.join(store::TABLES_JSON), &json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_parse_in_report_order() {
        let t = TableId::parse_list(&["timing", "quant", "main"]).unwrap();
        assert_eq!(t, [TableId::Main, TableId::Quant, TableId::Timing]);
        assert_eq!(TableId::parse_list(&["all"]).unwrap(), TableId::PAPER);
        assert_eq!(
            TableId::parse_list(&["all", "auto"]).unwrap(),
            TableId::ALL,
            "auto by name, last in report order"
        );
        assert_eq!(
            TableId::parse_list(&["ablation"]).unwrap(),
            [TableId::Ablation, TableId::GmmK]
        );
        let e = TableId::parse_list(&["mian"]).unwrap_err().to_string();
        assert!(e.contains("mian") && e.contains("tau-w"), "{e}");
        assert!(TableId::parse_list::<&str>(&[]).is_err());
    }

    #[test]
    fn default_k_spans_the_papers_values_and_config_is_checked() {
        assert_eq!(TablesConfig::default_k(2000), [500, 1000, 2000, 6000]);
        assert_eq!(TablesConfig::default_k(4), [2, 4, 12]);
        let mut c = TablesConfig::default();
        c.validate().unwrap();
        c.sigma_bits.push(9);
        assert!(c.validate().unwrap_err().to_string().contains("sigma_bits"));
        let c = TablesConfig {
            ensemble_members: 1,
            ..TablesConfig::default()
        };
        assert!(c.validate().is_err());
        let c: Result<TablesConfig, _> = serde_json::from_str(r#"{"tau": [0.1]}"#);
        assert!(c.is_err(), "unknown fields are errors");
    }
}
