//! The results of a run: the table rows ([`Row`], [`CorruptionRow`]), their statistics over
//! seeds ([`MeanSd`], [`SeedSummary`]) and their Markdown tables. A row evaluated with a
//! fitted temperature also carries its calibrated metrics ([`CalibratedMetrics`],
//! [`CalibratedShift`]), which the tables show beside the raw ones, never instead.

use bnn_data::Corruption;
use bnn_metrics::WeightStats;
use bnn_models::Arch;
use bnn_train::{Evaluation, UncertaintyDiagnostics};
use serde::{Deserialize, Serialize};

pub use crate::stats::MeanSd;
use crate::validation::ValidationRow;
pub use swbnn_ops::corruptions::{CalibratedShift, CorruptionRow};
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
    /// The metrics at the temperature fitted on the validation split; `None` for a row made
    /// without one (rows written before calibration existed among them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrated: Option<CalibratedMetrics>,
    /// How far the weight sigmas moved in training from their initial values (the BBB row:
    /// whether its posterior's uncertainty was trained at all); `None` for other rows and
    /// rows written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma_movement: Option<bnn_metrics::SigmaMovement>,
}

/// A model's test metrics at its fitted temperature (post-hoc calibration,
/// [`crate::calibration`]). The accuracy is the raw row's: scaling never changes the arg-max.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibratedMetrics {
    /// The temperature, fitted on the validation split.
    pub temperature: f64,
    /// Mean negative log-likelihood.
    pub nll: f64,
    /// Expected calibration error, 15 bins.
    pub ece: f64,
    /// Mean confidence on the test set.
    pub mean_confidence: f64,
    /// OOD AUROC with the max-probability score, if an OOD set was given.
    pub ood_auroc: Option<f64>,
    /// OOD AUROC with the predictive-entropy score.
    pub ood_auroc_entropy: Option<f64>,
}

impl CalibratedMetrics {
    /// The metrics of `ev`, an evaluation at `temperature`.
    pub fn new(temperature: f64, ev: &Evaluation) -> Self {
        Self {
            temperature,
            nll: ev.summary.nll,
            ece: ev.summary.ece,
            mean_confidence: ev.summary.mean_confidence,
            ood_auroc: ev.ood_max_prob.as_ref().map(|o| o.auroc),
            ood_auroc_entropy: ev.ood_entropy.as_ref().map(|o| o.auroc),
        }
    }
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

/// The mean over seeds of each (method, corruption) pair's metrics; the calibrated metrics
/// (and the temperatures) are averaged when every seed has them, else left out.
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
                m.calibrated = match (m.calibrated, r.calibrated) {
                    (Some(a), Some(b)) => Some(CalibratedShift {
                        temperature: a.temperature + b.temperature,
                        nll: a.nll + b.nll,
                        ece: a.ece + b.ece,
                        mean_confidence: a.mean_confidence + b.mean_confidence,
                    }),
                    _ => None,
                };
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
            if let Some(c) = m.calibrated.as_mut() {
                c.temperature /= n;
                c.nll /= n;
                c.ece /= n;
                c.mean_confidence /= n;
            }
            m
        })
        .collect()
}

/// The corruption rows as a Markdown table: one line per corruption, accuracy / NLL / ECE of
/// each method side by side; a method with calibrated rows also gets its calibrated NLL and
/// ECE columns ("cal."), right after its raw ones.
pub fn markdown_corruptions(rows: &[CorruptionRow]) -> String {
    let mut methods: Vec<(&str, bool)> = Vec::new();
    let mut corruptions: Vec<Corruption> = Vec::new();
    for r in rows {
        match methods.iter_mut().find(|(m, _)| *m == r.method) {
            Some((_, cal)) => *cal |= r.calibrated.is_some(),
            None => methods.push((&r.method, r.calibrated.is_some())),
        }
        if !corruptions.contains(&r.corruption) {
            corruptions.push(r.corruption);
        }
    }
    let mut s = String::from("| Corruption |");
    let mut rule = String::from("|---|");
    for (m, cal) in &methods {
        s.push_str(&format!(" {m} acc | {m} NLL | {m} ECE |"));
        rule.push_str("---|---|---|");
        if *cal {
            s.push_str(&format!(" {m} cal. NLL | {m} cal. ECE |"));
            rule.push_str("---|---|");
        }
    }
    s.push('\n');
    s.push_str(&rule);
    s.push('\n');
    for c in corruptions {
        s.push_str(&format!("| {c} |"));
        for (m, cal) in &methods {
            let row = rows.iter().find(|r| r.corruption == c && r.method == *m);
            match row {
                Some(r) => s.push_str(&format!(
                    " {:.2}% | {:.3} | {:.4} |",
                    100.0 * r.accuracy,
                    r.nll,
                    r.ece
                )),
                None => s.push_str(" - | - | - |"),
            }
            if *cal {
                match row.and_then(|r| r.calibrated) {
                    Some(k) => s.push_str(&format!(" {:.3} | {:.4} |", k.nll, k.ece)),
                    None => s.push_str(" - | - |"),
                }
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
            calibrated: None,
            sigma_movement: None,
        }
    }

    /// The row with its metrics at the fitted `temperature` (`ev`, the evaluation there).
    pub fn with_calibrated(mut self, temperature: f64, ev: &Evaluation) -> Row {
        self.calibrated = Some(CalibratedMetrics::new(temperature, ev));
        self
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

/// The rows as a Markdown table in the paper's columns; a row with calibrated metrics is
/// followed by its calibrated row (`<method>, T = <temperature>`: same accuracy, its own
/// NLL, ECE, confidence and OOD AUROC).
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
        if let Some(c) = &r.calibrated {
            let ood = match (c.ood_auroc, c.ood_auroc_entropy) {
                (Some(a), Some(b)) => format!("{a:.3} / {b:.3}"),
                _ => "-".into(),
            };
            s.push_str(&format!(
                "| {} | {}, T = {:.3} | {:.2}% | {:.3} | {:.4} | {:.4} | - | - | - | - | - | {} | - |\n",
                r.arch,
                r.method,
                c.temperature,
                100.0 * r.accuracy,
                c.nll,
                c.ece,
                c.mean_confidence,
                ood,
            ));
        }
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
    /// The calibrated metrics over seeds, when every seed's row has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrated: Option<CalibratedSummary>,
}

/// [`CalibratedMetrics`] over seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibratedSummary {
    /// The fitted temperature.
    pub temperature: MeanSd,
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
}

/// The calibrated metrics of `rows` over seeds, if every row has them.
pub(crate) fn summarise_calibrated(rows: &[&Row]) -> Option<CalibratedSummary> {
    let cal: Vec<&CalibratedMetrics> = rows
        .iter()
        .map(|r| r.calibrated.as_ref())
        .collect::<Option<_>>()?;
    let of = |f: &dyn Fn(&CalibratedMetrics) -> f64| {
        MeanSd::of(&cal.iter().map(|c| f(c)).collect::<Vec<_>>())
    };
    let opt = |f: &dyn Fn(&CalibratedMetrics) -> Option<f64>| {
        let v: Option<Vec<f64>> = cal.iter().map(|c| f(c)).collect();
        v.and_then(|v| MeanSd::of(&v))
    };
    Some(CalibratedSummary {
        temperature: of(&|c| c.temperature)?,
        nll: of(&|c| c.nll)?,
        ece: of(&|c| c.ece)?,
        mean_confidence: of(&|c| c.mean_confidence)?,
        ood_auroc: opt(&|c| c.ood_auroc),
        ood_auroc_entropy: opt(&|c| c.ood_auroc_entropy),
    })
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
                calibrated: summarise_calibrated(&rows),
            }
        })
        .collect()
}

/// The per-method summaries as a Markdown table (mean ± sd over seeds); a method with
/// calibrated metrics gets a second row, `<method>, T = <mean ± sd>`.
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
        if let Some(c) = &r.calibrated {
            s.push_str(&format!(
                "| {} | {}, T = {} | {} | {}% | {} | {} | {} | {} | {} | - | - |\n",
                r.arch,
                r.method,
                pm(&c.temperature, 3),
                r.seeds,
                pm(&acc, 2),
                pm(&c.nll, 3),
                pm(&c.ece, 4),
                pm(&c.mean_confidence, 4),
                opt(&c.ood_auroc),
                opt(&c.ood_auroc_entropy),
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_data::CorruptionKind;

    fn shift(method: &str, nll: f64, calibrated: Option<(f64, f64)>) -> CorruptionRow {
        CorruptionRow {
            method: method.into(),
            corruption: Corruption::new(CorruptionKind::GaussianNoise, 2).unwrap(),
            accuracy: 0.5,
            nll,
            ece: 0.1,
            mean_confidence: 0.7,
            calibrated: calibrated.map(|(temperature, nll)| CalibratedShift {
                temperature,
                nll,
                ece: 0.05,
                mean_confidence: 0.6,
            }),
        }
    }

    /// The calibrated columns appear beside the raw ones, for the methods that have them, and
    /// the means over seeds keep them only when every seed has them.
    #[test]
    fn calibrated_corruption_columns_sit_beside_the_raw_ones() {
        let rows = [
            shift("bbb", 1.0, Some((2.0, 0.8))),
            shift("deterministic", 1.5, None),
        ];
        let md = markdown_corruptions(&rows);
        let header = md.lines().next().unwrap();
        assert!(
            header.contains("bbb NLL | bbb ECE | bbb cal. NLL | bbb cal. ECE | deterministic acc"),
            "{md}"
        );
        assert!(!header.contains("deterministic cal."), "{md}");
        let line = md.lines().nth(2).unwrap();
        assert!(line.contains("| 1.000 | 0.1000 | 0.800 | 0.0500 |"), "{md}");
        assert_eq!(
            md.lines().nth(1).unwrap().matches("---").count(),
            header.matches('|').count() - 1
        );

        let means = mean_corruptions(&[
            shift("bbb", 1.0, Some((2.0, 0.8))),
            shift("bbb", 2.0, Some((4.0, 0.6))),
        ]);
        let c = means[0].calibrated.unwrap();
        assert_eq!((means[0].nll, c.temperature, c.nll), (1.5, 3.0, 0.7));
        let mixed =
            mean_corruptions(&[shift("bbb", 1.0, Some((2.0, 0.8))), shift("bbb", 2.0, None)]);
        assert_eq!(mixed[0].calibrated, None);
    }

    /// A row as `row.json` held it before calibration existed, with `calibrated` optionally
    /// added.
    fn row(calibrated: Option<serde_json::Value>) -> Row {
        let mut v = serde_json::json!({
            "arch": "lenet5", "method": "bbb", "accuracy": 0.9, "nll": 0.3, "ece": 0.02,
            "mean_confidence": 0.93, "outliers": null, "ellipses": null, "gaussians": null,
            "parameters": 10, "compression_ratio": null, "model_bytes": 100,
            "ood_auroc": 0.8, "ood_auroc_entropy": 0.85, "train_seconds": 1.0,
            "uncertainty": {
                "mean_entropy": 0.2, "mean_mutual_information": null,
                "ood_mean_confidence": null, "ood_mean_entropy": null,
                "ood_mean_mutual_information": null, "ood_auroc_mutual_information": null
            },
            "weights": []
        });
        if let Some(c) = calibrated {
            v["calibrated"] = c;
        }
        serde_json::from_value(v).unwrap()
    }

    /// Old rows read back without calibrated metrics and print as before; a calibrated row is
    /// followed by its calibrated row, the raw one unchanged; over seeds the calibrated
    /// summary needs every seed.
    #[test]
    fn calibrated_rows_follow_the_raw_ones() {
        let old = row(None);
        assert_eq!(old.calibrated, None);
        let cal = row(Some(serde_json::json!({
            "temperature": 1.25, "nll": 0.25, "ece": 0.01, "mean_confidence": 0.9,
            "ood_auroc": 0.81, "ood_auroc_entropy": 0.86
        })));
        let raw_md = markdown(std::slice::from_ref(&old));
        let md = markdown(std::slice::from_ref(&cal));
        assert!(md.starts_with(&raw_md), "{md}");
        let extra = &md[raw_md.len()..];
        assert!(
            extra.starts_with("| lenet5 | bbb, T = 1.250 | 90.00% | 0.250 | 0.0100 | 0.9000 |"),
            "{extra}"
        );
        assert!(extra.contains("0.810 / 0.860"), "{extra}");
        let back: Row = serde_json::from_str(&serde_json::to_string(&cal).unwrap()).unwrap();
        assert_eq!(back, cal);
        assert!(!serde_json::to_string(&old).unwrap().contains("calibrated"));

        let both = summarise(&[vec![cal.clone()], vec![cal.clone()]]);
        let c = both[0].calibrated.as_ref().unwrap();
        assert_eq!((c.temperature.mean, c.temperature.sd), (1.25, 0.0));
        assert!(markdown_seeds(&both).contains("| bbb, T = 1.250 ± 0.000 | 2 |"));
        assert_eq!(summarise(&[vec![cal], vec![old]])[0].calibrated, None);
    }
}
