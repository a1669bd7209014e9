//! The results of a run: the table rows ([`Row`], [`CorruptionRow`]), their statistics over
//! seeds ([`MeanSd`], [`SeedSummary`]) and their Markdown tables.

use bnn_data::Corruption;
use bnn_metrics::WeightStats;
use bnn_models::Arch;
use bnn_train::{Evaluation, UncertaintyDiagnostics};
use serde::{Deserialize, Serialize};

pub use crate::stats::MeanSd;
use crate::validation::ValidationRow;
use swshare::CompressionReport;

use crate::method::Method;

/// One row of the results table (`table.json` is a list of these).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Architecture name.
    pub arch: String,
    /// The method.
    pub method: Method,
    /// Top-1 accuracy (fraction).
    pub accuracy: f64,
    /// Mean negative log-likelihood.
    pub nll: f64,
    /// Expected calibration error, 15 bins.
    pub ece: f64,
    /// Mean confidence on the test set (above the accuracy: over-confident).
    pub mean_confidence: f64,
    /// Outlier weights (2DGBNN).
    pub outliers: Option<usize>,
    /// Ellipse weights (2DGBNN).
    pub ellipses: Option<usize>,
    /// Shared Gaussians after merging (2DGBNN).
    pub gaussians: Option<usize>,
    /// Trainable parameters.
    pub parameters: usize,
    /// `1 - parameters / parameters(BBB)`, the paper's compression ratio.
    pub compression_ratio: Option<f64>,
    /// Size of the saved model file in bytes.
    pub model_bytes: u64,
    /// OOD AUROC with the max-probability score, if an OOD set was given.
    pub ood_auroc: Option<f64>,
    /// OOD AUROC with the predictive-entropy score.
    pub ood_auroc_entropy: Option<f64>,
    /// Seconds spent training this row's own stage.
    pub train_seconds: f64,
    /// Entropy and mutual information on the test and OOD sets.
    pub uncertainty: UncertaintyDiagnostics,
    /// Posterior statistics per weight tensor (Bayesian rows).
    pub weights: Vec<WeightStats>,
}

/// The results of [`crate::experiment::run`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    /// Table rows: deterministic, bbb, 2dgbnn.
    pub rows: Vec<Row>,
    /// The 2DGBNN compression report.
    pub report: CompressionReport,
    /// Every method on every corruption of [`crate::setup::Setup::corruptions`].
    #[serde(default)]
    pub corruptions: Vec<CorruptionRow>,
    /// Every method on the validation split, for choices (empty without one). Written to its
    /// own file ([`crate::store::VALIDATION_JSON`]), never beside the test rows.
    #[serde(default, skip_serializing)]
    pub validation: Vec<ValidationRow>,
}

/// One method on one corrupted test set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorruptionRow {
    /// The method's name ([`Method::name`]), or what else was evaluated (`swbnn eval`: `model`;
    /// `swbnn plot` of a model file: its label).
    pub method: String,
    /// The corruption (kind and severity).
    pub corruption: Corruption,
    /// Accuracy.
    pub accuracy: f64,
    /// Mean negative log-likelihood.
    pub nll: f64,
    /// ECE, 15 bins.
    pub ece: f64,
    /// Mean confidence.
    pub mean_confidence: f64,
}

/// The mean over seeds of each (method, corruption) pair's metrics.
pub fn mean_corruptions(rows: &[CorruptionRow]) -> Vec<CorruptionRow> {
    let mut out: Vec<(CorruptionRow, usize)> = Vec::new();
    for r in rows {
        match out
            .iter_mut()
            .find(|(m, _)| m.method == r.method && m.corruption == r.corruption)
        {
            Some((m, n)) => {
                m.accuracy += r.accuracy;
                m.nll += r.nll;
                m.ece += r.ece;
                m.mean_confidence += r.mean_confidence;
                *n += 1;
            }
            None => out.push((r.clone(), 1)),
        }
    }
    out.into_iter()
        .map(|(mut m, n)| {
            let n = n as f64;
            m.accuracy /= n;
            m.nll /= n;
            m.ece /= n;
            m.mean_confidence /= n;
            m
        })
        .collect()
}

/// The corruption rows as a Markdown table: one line per corruption, accuracy / NLL / ECE of
/// each method side by side.
pub fn markdown_corruptions(rows: &[CorruptionRow]) -> String {
    let mut methods: Vec<&str> = Vec::new();
    let mut corruptions: Vec<Corruption> = Vec::new();
    for r in rows {
        if !methods.contains(&r.method.as_str()) {
            methods.push(&r.method);
        }
        if !corruptions.contains(&r.corruption) {
            corruptions.push(r.corruption);
        }
    }
    let mut s = String::from("| Corruption |");
    for m in &methods {
        s.push_str(&format!(" {m} acc | {m} NLL | {m} ECE |"));
    }
    s.push_str("\n|---|");
    s.push_str(&"---|---|---|".repeat(methods.len()));
    s.push('\n');
    for c in corruptions {
        s.push_str(&format!("| {c} |"));
        for m in &methods {
            match rows.iter().find(|r| r.corruption == c && r.method == *m) {
                Some(r) => s.push_str(&format!(
                    " {:.2}% | {:.3} | {:.4} |",
                    100.0 * r.accuracy,
                    r.nll,
                    r.ece
                )),
                None => s.push_str(" - | - | - |"),
            }
        }
        s.push('\n');
    }
    s
}

impl Row {
    /// The row of an evaluation of `method`'s model on `arch`: its metrics, trainable
    /// `parameters`, file `bytes` and training `seconds`, and the posterior statistics of its
    /// weight tensors (empty for a deterministic model).
    pub fn new(
        arch: Arch,
        method: Method,
        ev: Evaluation,
        parameters: usize,
        bytes: u64,
        seconds: f64,
        weights: Vec<WeightStats>,
    ) -> Row {
        Row {
            arch: arch.name().to_string(),
            method,
            accuracy: ev.summary.accuracy,
            nll: ev.summary.nll,
            ece: ev.summary.ece,
            mean_confidence: ev.summary.mean_confidence,
            outliers: None,
            ellipses: None,
            gaussians: None,
            parameters,
            compression_ratio: None,
            model_bytes: bytes,
            ood_auroc: ev.ood_max_prob.as_ref().map(|o| o.auroc),
            ood_auroc_entropy: ev.ood_entropy.as_ref().map(|o| o.auroc),
            train_seconds: seconds,
            uncertainty: ev.uncertainty,
            weights,
        }
    }

    /// The row with the 2DGBNN plan's counts (outliers, ellipses, Gaussians, compression).
    pub fn with_plan(mut self, report: &CompressionReport) -> Row {
        self.outliers = Some(report.outliers);
        self.ellipses = Some(report.ellipse_weights);
        self.gaussians = Some(report.gaussians_after_merge);
        self.compression_ratio = Some(report.compression_ratio);
        self
    }
}

/// The rows as a Markdown table in the paper's columns.
pub fn markdown(rows: &[Row]) -> String {
    let opt = |v: Option<usize>| v.map_or("-".to_string(), |v| v.to_string());
    let mut s = String::from(
        "| Architecture | Method | Accuracy | NLL | ECE | Confidence | #Outliers | #Ellipses | #Gaussians | #Parameters(M) / Compression | Model bytes | OOD AUROC (max-prob / entropy) | Train s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let ratio = r
            .compression_ratio
            .map_or("-".to_string(), |c| format!("{:.1}%", 100.0 * c));
        let ood = match (r.ood_auroc, r.ood_auroc_entropy) {
            (Some(a), Some(b)) => format!("{a:.3} / {b:.3}"),
            _ => "-".into(),
        };
        s.push_str(&format!(
            "| {} | {} | {:.2}% | {:.3} | {:.4} | {:.4} | {} | {} | {} | {:.4}M / {} | {} | {} | {:.0} |\n",
            r.arch,
            r.method,
            100.0 * r.accuracy,
            r.nll,
            r.ece,
            r.mean_confidence,
            opt(r.outliers),
            opt(r.ellipses),
            opt(r.gaussians),
            r.parameters as f64 / 1e6,
            ratio,
            r.model_bytes,
            ood,
            r.train_seconds
        ));
    }
    s
}

/// One method's metrics over seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedSummary {
    /// Architecture name.
    pub arch: String,
    /// Method.
    pub method: Method,
    /// Seeds aggregated.
    pub seeds: usize,
    /// Accuracy.
    pub accuracy: MeanSd,
    /// NLL.
    pub nll: MeanSd,
    /// ECE.
    pub ece: MeanSd,
    /// Mean confidence.
    pub mean_confidence: MeanSd,
    /// OOD AUROC, max-probability score.
    pub ood_auroc: Option<MeanSd>,
    /// OOD AUROC, entropy score.
    pub ood_auroc_entropy: Option<MeanSd>,
    /// Trainable parameters (of the first seed; they differ only for 2DGBNN).
    pub parameters: usize,
    /// Compression ratio (mean).
    pub compression_ratio: Option<f64>,
    /// Model bytes (mean).
    pub model_bytes: f64,
}

/// Aggregates per-seed rows (`runs[seed][row]`, rows in the same method order) into one
/// summary per method.
pub fn summarise(runs: &[Vec<Row>]) -> Vec<SeedSummary> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(i, r0)| {
            let rows: Vec<&Row> = runs.iter().filter_map(|r| r.get(i)).collect();
            let of = |f: &dyn Fn(&Row) -> f64| {
                MeanSd::of(&rows.iter().map(|r| f(r)).collect::<Vec<_>>())
                    .unwrap_or(MeanSd { mean: 0.0, sd: 0.0 })
            };
            let opt = |f: &dyn Fn(&Row) -> Option<f64>| {
                let v: Option<Vec<f64>> = rows.iter().map(|r| f(r)).collect();
                v.and_then(|v| MeanSd::of(&v))
            };
            SeedSummary {
                arch: r0.arch.clone(),
                method: r0.method,
                seeds: rows.len(),
                accuracy: of(&|r| r.accuracy),
                nll: of(&|r| r.nll),
                ece: of(&|r| r.ece),
                mean_confidence: of(&|r| r.mean_confidence),
                ood_auroc: opt(&|r| r.ood_auroc),
                ood_auroc_entropy: opt(&|r| r.ood_auroc_entropy),
                parameters: r0.parameters,
                compression_ratio: opt(&|r| r.compression_ratio).map(|m| m.mean),
                model_bytes: of(&|r| r.model_bytes as f64).mean,
            }
        })
        .collect()
}

/// The per-method summaries as a Markdown table (mean ± sd over seeds).
pub fn markdown_seeds(summaries: &[SeedSummary]) -> String {
    let pm = |m: &MeanSd, d: usize| format!("{:.d$} ± {:.d$}", m.mean, m.sd);
    let mut s = String::from(
        "| Architecture | Method | Seeds | Accuracy | NLL | ECE | Confidence | OOD AUROC (max-prob) | OOD AUROC (entropy) | #Parameters / Compression | Model bytes |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in summaries {
        let acc = MeanSd {
            mean: 100.0 * r.accuracy.mean,
            sd: 100.0 * r.accuracy.sd,
        };
        let opt = |m: &Option<MeanSd>| m.as_ref().map_or("-".into(), |m| pm(m, 3));
        let ratio = r
            .compression_ratio
            .map_or("-".to_string(), |c| format!("{:.1}%", 100.0 * c));
        s.push_str(&format!(
            "| {} | {} | {} | {}% | {} | {} | {} | {} | {} | {} / {} | {:.0} |\n",
            r.arch,
            r.method,
            r.seeds,
            pm(&acc, 2),
            pm(&r.nll, 3),
            pm(&r.ece, 4),
            pm(&r.mean_confidence, 4),
            opt(&r.ood_auroc),
            opt(&r.ood_auroc_entropy),
            r.parameters,
            ratio,
            r.model_bytes,
        ));
    }
    s
}
