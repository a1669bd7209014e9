//! A reproduction's `report.md`: the tables and, under them, the figures, drawn from the
//! models the run saved. It opens in any Markdown viewer (figures are PNG files in
//! `figures/`, linked relatively).
//!
//! The figures show the predictions the table's evaluation kept in each stage's directory
//! ([`crate::store::PREDICTIONS_FILE`]), so their ECE and AUROC are the table's. A stage
//! without them (a run directory of an older version, or another number of samples) is
//! predicted again by a second Monte Carlo pass over its saved model, seeded with
//! [`FIGURE_SEED`]. A multi-seed run's figures show seed 0's models; its corruptions figure
//! shows the means over seeds, as its tables do.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use bnn_plot::{DEFAULT_DOT_LIMIT, WeightsOptions};
use burn::prelude::*;
use swshare::CompressionReport;

use crate::Error;
use crate::figures::{self, CORRUPTIONS_SIZE, OOD_SIZE, PER_CLASS_SIZE, WEIGHTS_SIZE};
use crate::method::Method;
use crate::run_dir::{FIGURE_SEED, RunDir, run_predictions};
use crate::store::{self, PREDICTIONS_FILE};

/// Folder of the figures inside the run directory.
pub const FIGURE_DIR: &str = "figures";

/// Draws the figures of the run in `dir` into `dir/figures/` and writes `dir/report.md` with
/// `dir/table.md` (and the compression report, and the corruptions table and figure when the
/// run evaluated corruptions) above them. Returns the path of `report.md`.
pub fn write_report(dir: &Path, device: &Device) -> Result<PathBuf, Error> {
    let run = RunDir::open(dir, None)?;
    let fig_dir = dir.join(FIGURE_DIR);
    std::fs::create_dir_all(&fig_dir).map_err(|e| Error::io(&fig_dir, e))?;
    let loaders = run.loaders()?;
    let preds = run_predictions(&run, &loaders, &Method::MAIN, device, run.setup.samples)?;
    let dataset = figures::dataset_label(&run.setup.dataset);
    let arch = run.setup.arch.name();
    let multi_seed = run.models != run.dir;

    let mut md = String::new();
    let _ = writeln!(md, "# Reproduction report: {dataset}, {arch}\n");
    let _ = writeln!(
        md,
        "Written by `cargo xtask reproduce`; the setup is in [`setup.json`](setup.json), the \
         rows in [`table.json`](table.json).\n"
    );
    let _ = writeln!(md, "## Results\n");
    let table_path = dir.join(store::TABLE_MD);
    let table = std::fs::read_to_string(&table_path).map_err(|e| Error::io(&table_path, e))?;
    let _ = writeln!(md, "{}", table.trim_end());
    if let Ok(text) = std::fs::read_to_string(run.models.join(store::REPORT_JSON))
        && let Ok(report) = serde_json::from_str::<CompressionReport>(&text)
    {
        let whose = if multi_seed { " (seed 0)" } else { "" };
        let _ = writeln!(
            md,
            "\n### 2DGBNN compression{whose}\n\n```text\n{}```",
            report
        );
    }
    if let Some(m) = std::fs::read_to_string(run.models.join(store::TABLE_JSON))
        .ok()
        .and_then(|t| serde_json::from_str::<Vec<crate::results::Row>>(&t).ok())
        .and_then(|rows| rows.into_iter().find_map(|r| r.sigma_movement))
    {
        let whose = if multi_seed { " (seed 0)" } else { "" };
        let _ = writeln!(
            md,
            "\n### How far the BBB sigmas moved{whose}\n\n`log10(sigma / initial sigma)` over \
             the {} weights (5 %, 50 %, 95 % quantiles {:.3}, {:.3}, {:.3}); a posterior left \
             in the middle bin has hardly been trained in its uncertainty.\n\n{}",
            m.n,
            m.quantiles[0],
            m.quantiles[1],
            m.quantiles[2],
            m.markdown().trim_end()
        );
    }
    let corruptions = run.corruption_rows()?;
    if let Some(rows) = &corruptions {
        let mean = if multi_seed { ", mean over seeds" } else { "" };
        let _ = writeln!(
            md,
            "\n### Corruptions{mean}\n\n{}",
            crate::results::markdown_corruptions(rows).trim_end()
        );
    }
    // Apart from the test rows: what choices are made on.
    if let Ok(text) = std::fs::read_to_string(dir.join(store::VALIDATION_MD)) {
        let _ = writeln!(
            md,
            "\n### Validation split (for choices, not for reporting)\n\nThe validation split \
             held out of the training set, against its tile-shuffled copy as the OOD set and, \
             where the OOD set is split in halves, against half A \
             ([`validation.json`](validation.json)).\n\n{}",
            text.trim_end()
        );
    }
    let models = if multi_seed {
        " of seed 0 (`seed-0/`; `swbnn plot --seed I` draws another seed's)"
    } else {
        ""
    };
    let _ = writeln!(
        md,
        "\n## Figures\n\nDrawn from the predictions of the table's evaluation{models} ({} \
         samples), kept in each stage's `{PREDICTIONS_FILE}`; a stage without them is predicted \
         again (seed {FIGURE_SEED}). `swbnn plot <what> RUN_DIR --out FILE.svg`, with this \
         directory as `RUN_DIR`, draws any of them again as SVG or PNG (`swbnn plot --help`).\n",
        run.setup.samples,
    );
    figures::reliability(
        &preds,
        figures::reliability_size(preds.len()),
        &fig_dir.join("reliability.png"),
    )?;
    let _ = writeln!(
        md,
        "### Calibration\n\nAccuracy per confidence bin (15 bins) with the gap to the bin's \
         mean confidence; under it, how many test examples fall in each bin. Bars below the \
         diagonal are over-confident.\n\n![Reliability diagrams](figures/reliability.png)\n"
    );

    // The OOD set: the one the setup names, or the classes a held-out run holds out.
    let held_out = run.held_out_class_names()?;
    let ood_set = match &run.setup.ood {
        Some((ood_id, _)) => Some((
            figures::dataset_label(&(*ood_id).into()),
            match run.setup.ood_halves {
                true => " (half B; half A is for choices)",
                false => "",
            },
        )),
        None if !held_out.is_empty() => Some((
            format!("held-out classes ({})", held_out.join(", ")),
            " (test images of the classes left out of training)",
        )),
        None => None,
    };
    if let Some((ood_name, note)) = ood_set {
        let _ = writeln!(
            md,
            "### Out-of-distribution detection: {dataset} vs {ood_name}{note}\n\nMaximum \
             probability, predictive entropy and mutual information on the test set and on the \
             OOD set, and each one's ROC curve as an OOD detector (in-distribution positive).\n",
        );
        for (m, p) in Method::MAIN.iter().zip(&preds) {
            let name = format!("ood-{m}.png");
            figures::ood(p, &dataset, &ood_name, OOD_SIZE, &fig_dir.join(&name))?;
            let _ = writeln!(md, "![OOD, {}](figures/{name})\n", p.label);
        }
    }

    let names = run.class_names()?;
    let _ = writeln!(
        md,
        "### Confidence per class\n\nThe test set's confidence (maximum probability) grouped \
         by true class; the number above each box is the class's mean confidence.\n"
    );
    for (m, p) in Method::MAIN.iter().zip(&preds) {
        let name = format!("per-class-{m}.png");
        figures::per_class(p, &names, PER_CLASS_SIZE, &fig_dir.join(&name))?;
        let _ = writeln!(md, "![Confidence per class, {}](figures/{name})\n", p.label);
    }

    let _ = writeln!(md, "### Weights\n");
    match (run.plan(), run.bbb_table(device)) {
        (Ok(plan), Ok(table)) => {
            let title =
                format!("{arch}: BBB posterior of the shareable weights, fates and Gaussians");
            figures::weights_from_plan(
                &table,
                &plan,
                None,
                &title,
                &WeightsOptions::default(),
                WEIGHTS_SIZE,
                &fig_dir.join("weights.png"),
            )?;
            let _ = writeln!(
                md,
                "Every shareable weight at its Bayes-by-Backprop `(μ, σ)`, the posterior the \
                 sharing plan was built from: plain shared weights coloured by their Gaussian \
                 (a density beyond {DEFAULT_DOT_LIMIT} weights), ellipse weights and outliers \
                 marked, and the 1σ and 2σ ellipses of the most used Gaussians.\n\n\
                 ![Weights and Gaussians](figures/weights.png)\n"
            );
        }
        (plan, table) => {
            let why = plan
                .err()
                .or(table.err())
                .map(|e| e.to_string())
                .unwrap_or_default();
            let _ = writeln!(md, "No sharing plan to draw ({why}).\n");
        }
    }
    let swb = swshare::format::load(run.swb_path())?;
    let title = format!("{arch}: 2DGBNN after retraining (from the .swb file)");
    figures::weights_from_swb(
        &swb,
        None,
        &title,
        &WeightsOptions::default(),
        WEIGHTS_SIZE,
        &fig_dir.join("weights-posterior.png"),
    )?;
    let _ = writeln!(
        md,
        "After stage-3 retraining, as the `.swb` file stores it: a plain shared weight sits at \
         its Gaussian's trained `(μ, σ)`, an ellipse weight at its moment-matched blend, an \
         outlier at its own.\n\n![Weights after retraining](figures/weights-posterior.png)\n"
    );

    if let Some(rows) = &corruptions {
        let series = figures::corruption_series(&run.clean_metrics()?, rows)?;
        figures::corruptions(&series, CORRUPTIONS_SIZE, &fig_dir.join("corruptions.png"))?;
        let mut kinds: Vec<&str> = rows.iter().map(|r| r.corruption.kind().name()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        let mean = if multi_seed { " and over seeds" } else { "" };
        let _ = writeln!(
            md,
            "### Accuracy, NLL and ECE under corruption\n\nSeverity 0 is the clean test set; \
             each higher severity is the mean over the corruption kinds ({}){mean}, from the \
             corruptions table above.\n\n![Corruptions](figures/corruptions.png)\n",
            kinds.join(", ")
        );
    }

    let path = dir.join("report.md");
    bnn_train::write_atomic(&path, md.as_bytes())?;
    Ok(path)
}
