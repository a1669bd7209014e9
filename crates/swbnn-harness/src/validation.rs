//! The metrics that choices are made on: each method evaluated on the validation split and
//! against the validation OOD sets (the tile-shuffled validation images,
//! [`crate::data::validation_ood`], and half A of the OOD set where the setup splits it,
//! [`crate::setup::Setup::ood_halves`]), kept apart from the test
//! rows of the tables (`validation.json` and `validation.md` in a run directory, never in
//! `table.json`), so that a default can be decided on validation alone and reported on test.

use bnn_train::Evaluation;
use serde::{Deserialize, Serialize};

use crate::method::Method;
use crate::stats::MeanSd;

/// One method on the validation split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationRow {
    /// The method.
    pub method: Method,
    /// Validation images evaluated.
    pub images: usize,
    /// Monte Carlo samples (1 for a deterministic net).
    pub samples: usize,
    /// Top-1 accuracy (fraction).
    pub accuracy: f64,
    /// Mean negative log-likelihood of the MC-mean predictive.
    pub nll: f64,
    /// Expected calibration error, 15 bins.
    pub ece: f64,
    /// Mean confidence.
    pub mean_confidence: f64,
    /// AUROC of validation against validation OOD images, predictive-entropy score.
    pub ood_auroc_entropy: Option<f64>,
    /// The same with the mutual-information score (sampled models only).
    pub ood_auroc_mutual_information: Option<f64>,
    /// AUROC of validation against half A of the OOD set, predictive-entropy score (`None`
    /// when the setup does not split its OOD set, and in rows written before the halves).
    #[serde(default)]
    pub ood_half_a_auroc_entropy: Option<f64>,
    /// The same with the mutual-information score (sampled models only).
    #[serde(default)]
    pub ood_half_a_auroc_mutual_information: Option<f64>,
}

impl ValidationRow {
    /// The row of `method`'s evaluation `ev` on the validation split against the tile-shuffled
    /// validation OOD set, with `half_a`, the same predictions' evaluation against half A of
    /// the OOD set, where there is one.
    pub fn new(method: Method, ev: &Evaluation, half_a: Option<&Evaluation>) -> Self {
        Self {
            method,
            images: ev.summary.n,
            samples: ev.samples,
            accuracy: ev.summary.accuracy,
            nll: ev.summary.nll,
            ece: ev.summary.ece,
            mean_confidence: ev.summary.mean_confidence,
            ood_auroc_entropy: ev.ood_entropy.as_ref().map(|o| o.auroc),
            ood_auroc_mutual_information: ev.uncertainty.ood_auroc_mutual_information,
            ood_half_a_auroc_entropy: half_a.and_then(|a| a.ood_entropy.as_ref().map(|o| o.auroc)),
            ood_half_a_auroc_mutual_information: half_a
                .and_then(|a| a.uncertainty.ood_auroc_mutual_information),
        }
    }
}

/// One method's validation metrics over seeds (mean and sample sd).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationSummary {
    /// The method.
    pub method: Method,
    /// Seeds aggregated.
    pub seeds: usize,
    /// Accuracy.
    pub accuracy: MeanSd,
    /// NLL.
    pub nll: MeanSd,
    /// ECE.
    pub ece: MeanSd,
    /// OOD AUROC, entropy score.
    pub ood_auroc_entropy: Option<MeanSd>,
    /// OOD AUROC, mutual-information score.
    pub ood_auroc_mutual_information: Option<MeanSd>,
    /// OOD AUROC against half A of the OOD set, entropy score.
    #[serde(default)]
    pub ood_half_a_auroc_entropy: Option<MeanSd>,
    /// OOD AUROC against half A of the OOD set, mutual-information score.
    #[serde(default)]
    pub ood_half_a_auroc_mutual_information: Option<MeanSd>,
}

/// Aggregates per-seed rows (`runs[seed][row]`) into one summary per method, in the first
/// seed's order; a method missing from a seed is left out of that method's values.
pub fn summarise(runs: &[Vec<ValidationRow>]) -> Vec<ValidationSummary> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|r0| {
            let rows: Vec<&ValidationRow> = runs
                .iter()
                .filter_map(|run| run.iter().find(|r| r.method == r0.method))
                .collect();
            let of = |f: &dyn Fn(&ValidationRow) -> f64| {
                MeanSd::of(&rows.iter().map(|r| f(r)).collect::<Vec<_>>())
                    .unwrap_or(MeanSd { mean: 0.0, sd: 0.0 })
            };
            let opt = |f: &dyn Fn(&ValidationRow) -> Option<f64>| {
                let v: Option<Vec<f64>> = rows.iter().map(|r| f(r)).collect();
                v.and_then(|v| MeanSd::of(&v))
            };
            ValidationSummary {
                method: r0.method,
                seeds: rows.len(),
                accuracy: of(&|r| r.accuracy),
                nll: of(&|r| r.nll),
                ece: of(&|r| r.ece),
                ood_auroc_entropy: opt(&|r| r.ood_auroc_entropy),
                ood_auroc_mutual_information: opt(&|r| r.ood_auroc_mutual_information),
                ood_half_a_auroc_entropy: opt(&|r| r.ood_half_a_auroc_entropy),
                ood_half_a_auroc_mutual_information: opt(&|r| {
                    r.ood_half_a_auroc_mutual_information
                }),
            }
        })
        .collect()
}

const HEADER: &str = "| Method | Accuracy | NLL | ECE | Val-OOD AUROC (entropy) | Val-OOD AUROC (MI) \
                      | OOD half A AUROC (entropy) | OOD half A AUROC (MI) |\n\
                      |---|---|---|---|---|---|---|---|\n";

/// One run's validation rows as a Markdown table.
pub fn markdown(rows: &[ValidationRow]) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    let mut s = String::from(HEADER);
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.2}% | {:.3} | {:.4} | {} | {} | {} | {} |\n",
            r.method,
            100.0 * r.accuracy,
            r.nll,
            r.ece,
            opt(r.ood_auroc_entropy),
            opt(r.ood_auroc_mutual_information),
            opt(r.ood_half_a_auroc_entropy),
            opt(r.ood_half_a_auroc_mutual_information)
        ));
    }
    s
}

/// The summaries over seeds as a Markdown table (mean ± sd).
pub fn markdown_seeds(summaries: &[ValidationSummary]) -> String {
    let pm = |m: &MeanSd, d: usize| format!("{:.d$} ± {:.d$}", m.mean, m.sd);
    let opt = |m: &Option<MeanSd>| m.as_ref().map_or("-".to_string(), |m| pm(m, 3));
    let mut s = String::from(HEADER);
    for r in summaries {
        let acc = MeanSd {
            mean: 100.0 * r.accuracy.mean,
            sd: 100.0 * r.accuracy.sd,
        };
        s.push_str(&format!(
            "| {} ({} seeds) | {}% | {} | {} | {} | {} | {} | {} |\n",
            r.method,
            r.seeds,
            pm(&acc, 2),
            pm(&r.nll, 3),
            pm(&r.ece, 4),
            opt(&r.ood_auroc_entropy),
            opt(&r.ood_auroc_mutual_information),
            opt(&r.ood_half_a_auroc_entropy),
            opt(&r.ood_half_a_auroc_mutual_information)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(method: Method, accuracy: f64, mi: Option<f64>) -> ValidationRow {
        ValidationRow {
            method,
            images: 100,
            samples: 4,
            accuracy,
            nll: 0.5,
            ece: 0.02,
            mean_confidence: 0.8,
            ood_auroc_entropy: Some(0.7),
            ood_auroc_mutual_information: mi,
            ood_half_a_auroc_entropy: None,
            ood_half_a_auroc_mutual_information: mi,
        }
    }

    #[test]
    fn seeds_are_summarised_per_method() {
        let runs = vec![
            vec![
                row(Method::Deterministic, 0.8, None),
                row(Method::Bbb, 0.9, Some(0.6)),
            ],
            vec![
                row(Method::Bbb, 0.7, Some(0.8)),
                row(Method::Deterministic, 0.6, None),
            ],
        ];
        let s = summarise(&runs);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].method, s[0].seeds), (Method::Deterministic, 2));
        assert!((s[0].accuracy.mean - 0.7).abs() < 1e-12);
        assert!(s[0].ood_auroc_mutual_information.is_none());
        let mi = s[1].ood_auroc_mutual_information.unwrap();
        assert!((mi.mean - 0.7).abs() < 1e-12 && (mi.sd - 0.02f64.sqrt()).abs() < 1e-12);
        let md = markdown_seeds(&s);
        assert!(md.contains("| bbb (2 seeds) | 80.00 ± 14.14% |"), "{md}");
        let one = markdown(&runs[0]);
        assert!(
            one.contains("| deterministic | 80.00% | 0.500 | 0.0200 | 0.700 | - | - | - |"),
            "{one}"
        );
    }
}
