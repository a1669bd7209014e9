//! One reproduction, whatever it asks for: the main table or the other tables, over one seed
//! or several. `cargo xtask reproduce` parses its flags into a [`Setup`] and calls
//! [`reproduce`].
//!
//! One seed convention holds for every kind: one seed runs in `setup.out_dir` itself; `N > 1`
//! seeds run in `out_dir/seed-<i>` (seed `i`'s setup is [`Setup::for_seed`]), with the tables
//! over seeds (mean ± sd) in `out_dir`.

use std::path::PathBuf;

use burn::prelude::*;

use crate::Error;
use crate::experiment::{self, Progress};
use crate::regression::RegressionReproduction;
use crate::results::{Outcome, SeedSummary};
use crate::setup::Setup;
use crate::store;
use crate::tables::{self, ReportContext, TableId, TablesConfig, TablesOutcome};

/// What [`reproduce`] ran and wrote.
#[derive(Debug, Clone)]
pub enum Reproduction {
    /// The main table of one seed, and the figures' report (`report.md`).
    Main {
        /// The rows and the compression report.
        outcome: Box<Outcome>,
        /// The report's path.
        report: PathBuf,
    },
    /// The main table over several seeds, and the figures' report (of seed 0 and the means).
    Seeds {
        /// Each method's mean ± sd.
        summaries: Vec<SeedSummary>,
        /// Each seed's rows.
        outcomes: Vec<Outcome>,
        /// The report's path.
        report: PathBuf,
    },
    /// The tables of `--tables` (the main table among them), one outcome per seed.
    Tables(Vec<TablesOutcome>),
    /// The regression experiment of a table: its rows per seed, the table and the report.
    Regression(Box<RegressionReproduction>),
}

/// Runs a reproduction into `setup.out_dir`: writes its `setup.json` first, then the main
/// experiment with the figures' report when `tables` is empty, else the tables (`tables.md`
/// and `tables.json`), over `seeds` seeds. `setup.resume` continues an interrupted run.
/// The setup's values are checked where they are used; an error names what is wrong.
///
/// A user's data set (`setup.dataset` a `folder:DIR` or `npz:FILE`, as
/// [`crate::presets::setup_for_source`] makes it) runs the main experiment and its report;
/// `tables` (the paper's tables) and `setup.data_dir` (where presets are found) are refused
/// for it. A regression table (`csv:FILE`, or an `.npz` with floating-point `y_*`) runs the
/// regression experiment ([`crate::regression::run_seeds`]) and its report.
#[allow(clippy::too_many_arguments)]
pub fn reproduce(
    setup: &Setup,
    tables: &[TableId],
    tables_config: &TablesConfig,
    seeds: usize,
    device: &Device,
    context: &ReportContext,
    progress: &mut dyn Progress,
) -> Result<Reproduction, Error> {
    if seeds == 0 {
        return Err(Error::Usage("--seeds must be at least 1".into()));
    }
    setup.check()?;
    if !tables.is_empty() && setup.dataset.preset().is_none() {
        return Err(Error::Usage(format!(
            "--tables makes the paper's tables of a preset data set; {} is a user's data set: \
             leave out --tables to run the main experiment (deterministic, Bayes by Backprop, \
             2DGBNN) and its report on it",
            setup.dataset
        )));
    }
    if let (Some(path), Some(dir)) = (setup.dataset.path(), &setup.data_dir) {
        return Err(Error::Usage(format!(
            "--data (`data_dir` {}) locates a preset data set; {} names its own data: leave \
             out --data",
            dir.display(),
            path.display()
        )));
    }
    if setup.resume {
        store::check_resume(&setup.out_dir, setup)?;
    }
    let regression = setup.dataset.is_regression()?;
    if regression {
        crate::regression::check_setup(setup)?;
    }
    store::write_setup(&setup.out_dir, setup)?;
    if regression {
        return Ok(Reproduction::Regression(Box::new(
            crate::regression::run_seeds(setup, seeds, device, progress)?,
        )));
    }
    if !tables.is_empty() {
        return Ok(Reproduction::Tables(tables::run_seeds(
            setup,
            tables_config,
            tables,
            seeds,
            device,
            context,
            progress,
        )?));
    }
    let (summaries, mut outcomes) = experiment::run_seeds(setup, seeds, device, progress)?;
    progress.stage("figures");
    let report = crate::report::write_report(&setup.out_dir, device)?;
    if seeds == 1
        && outcomes.len() == 1
        && let Some(outcome) = outcomes.pop()
    {
        return Ok(Reproduction::Main {
            outcome: Box::new(outcome),
            report,
        });
    }
    Ok(Reproduction::Seeds {
        summaries,
        outcomes,
        report,
    })
}
