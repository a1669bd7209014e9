//! What the stages did, in numbers: the compression report.
//!
//! Definitions (every count is a number of Bayesian weights, i.e. `(mu, sigma)` pairs, unless
//! it says parameters):
//! * `total_weights` = every weight of the table = `shareable_weights + unshared_weights`.
//! * `shareable_weights` = weights of shareable layers, the ones the plan covers;
//!   `shareable_weights = outliers + plain_shared + ellipse_weights` (by construction, since
//!   every plan position has exactly one fate).
//! * `unshared_weights` = weights of unshareable layers (biases, normalisation parameters);
//!   they keep their own `(mu, sigma)` and are not outliers.
//! * `outliers = outliers_mean_threshold + outliers_gradient + outliers_small_cluster`.
//! * `gaussians_fitted` = K of the GMM fit; `gaussians_before_merge` = K after the
//!   cluster-size reduction; `gaussians_after_merge` = the final codebook size.
//! * `shared_model_params` = trainable parameters of the shared model:
//!   `2 * gaussians_after_merge` (each codebook entry's trainable `(mu_k, sigma_k)`) `+ 2 *
//!   outliers + 2 * unshared_weights`. Ellipse alphas and the index of which entry each weight
//!   uses are fixed, not trainable, and not counted (they are in the file sizes).
//! * `full_model_params` = `2 * total_weights` (a mean-field BNN trains `mu` and `sigma` of
//!   every weight).
//! * `compression_ratio` = `1 - shared_model_params / full_model_params`, as a fraction (the
//!   paper's "Compression Ratio (%)" is this times 100).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::format::FileSizes;
use crate::plan::SharingPlan;
use crate::table::WeightTable;

/// Wall-clock seconds per stage (0 for a stage that was not run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StageTimings {
    /// Stage 1: outlier detection.
    pub outliers_s: f64,
    /// GMM fit (including gathering the inlier points).
    pub gmm_s: f64,
    /// Cluster-size reduction (and optional refit).
    pub small_clusters_s: f64,
    /// Ellipse detection and alpha-blending.
    pub ellipse_s: f64,
    /// Merging.
    pub merge_s: f64,
    /// Everything, end to end.
    pub total_s: f64,
}

/// Counts, parameters and timings of one plan; see the module docs for every definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompressionReport {
    /// All Bayesian weights of the table.
    pub total_weights: usize,
    /// Weights of shareable layers (covered by the plan).
    pub shareable_weights: usize,
    /// Weights of unshareable layers (biases, normalisation parameters).
    pub unshared_weights: usize,
    /// All outliers.
    pub outliers: usize,
    /// Outliers with `|mu| > tau_w`.
    pub outliers_mean_threshold: usize,
    /// Outliers with a top-`P_g` gradient.
    pub outliers_gradient: usize,
    /// Members of components smaller than `N_min`.
    pub outliers_small_cluster: usize,
    /// Alpha-blended weights.
    pub ellipse_weights: usize,
    /// Weights sharing exactly one codebook entry.
    pub plain_shared: usize,
    /// Whether the table had gradients (else there are no gradient outliers and no gradient
    /// merge criterion).
    pub gradients_available: bool,
    /// K of the GMM fit.
    pub gaussians_fitted: usize,
    /// K after the cluster-size reduction, before merging.
    pub gaussians_before_merge: usize,
    /// K after merging (codebook size).
    pub gaussians_after_merge: usize,
    /// Merge passes run (including the final one that merged nothing).
    pub merge_passes: usize,
    /// Trainable parameters of the shared model.
    pub shared_model_params: usize,
    /// Trainable parameters of the full mean-field BNN (`2 * total_weights`).
    pub full_model_params: usize,
    /// `1 - shared_model_params / full_model_params` (fraction; 0 for an empty table).
    pub compression_ratio: f64,
    /// Seconds per stage.
    pub timings: StageTimings,
    /// Bytes of the saved model file by part, once written.
    pub file_sizes: Option<FileSizes>,
    /// What the stage-3 stopping rule measured, when one was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrain_stop: Option<RetrainStopTrace>,
    /// The weight of one inlier's KL (a plain or ellipse shared weight) in stage 3's
    /// objective, where the per-weight ELBO gives each weight's KL weight 1: `1 / (plain +
    /// ellipse)` under the mixture KL (the inliers together weigh as one weight), 1 under the
    /// per-weight and codebook KLs (bnn-layers' `SharedKl`). Set by stage 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inlier_kl_weight: Option<f64>,
}

/// The measurements of a confidence-recovered stopping rule for stage 3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetrainStopTrace {
    /// Validation images in the probe.
    pub probe_images: usize,
    /// The source BNN's mean confidence on the probe (the target).
    pub source_confidence: f64,
    /// The shared model's mean confidence on the probe at each check this run made.
    pub checks: Vec<ConfidenceCheck>,
    /// Epochs trained, fractional inside an epoch, when the rule ended stage 3 (`None`: it
    /// ran all its epochs).
    pub stopped_after: Option<f64>,
}

/// One check of the stopping rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConfidenceCheck {
    /// Epochs of retraining behind the model, fractional inside an epoch.
    pub epochs_done: f64,
    /// Its mean confidence on the probe.
    pub confidence: f64,
}

impl CompressionReport {
    /// Builds the report of `plan` over `table`. `gaussians_fitted`, `gaussians_before_merge`
    /// and `merge_passes` come from the stages; timings default to zero.
    pub fn from_plan(
        table: &WeightTable,
        plan: &SharingPlan,
        gaussians_fitted: usize,
        gaussians_before_merge: usize,
        merge_passes: usize,
    ) -> Self {
        let c = plan.counts();
        let unshared = table.n_unshared();
        let k = plan.k();
        let shared_model_params = 2 * k + 2 * c.outliers() + 2 * unshared;
        let full_model_params = 2 * table.len();
        let compression_ratio = if full_model_params == 0 {
            0.0
        } else {
            1.0 - shared_model_params as f64 / full_model_params as f64
        };
        Self {
            total_weights: table.len(),
            shareable_weights: table.n_shareable(),
            unshared_weights: unshared,
            outliers: c.outliers(),
            outliers_mean_threshold: c.outlier_mean,
            outliers_gradient: c.outlier_gradient,
            outliers_small_cluster: c.outlier_small_cluster,
            ellipse_weights: c.ellipse,
            plain_shared: c.plain_shared,
            gradients_available: table.grad_mu().is_some(),
            gaussians_fitted,
            gaussians_before_merge,
            gaussians_after_merge: k,
            merge_passes,
            shared_model_params,
            full_model_params,
            compression_ratio,
            timings: StageTimings::default(),
            file_sizes: None,
            retrain_stop: None,
            inlier_kl_weight: None,
        }
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        // Plain numbers and options only: serialisation cannot fail (non-finite floats
        // become null).
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

impl fmt::Display for CompressionReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |n: usize, d: usize| {
            if d == 0 {
                0.0
            } else {
                100.0 * n as f64 / d as f64
            }
        };
        let s = self.shareable_weights;
        let rows: [(&str, usize, Option<f64>); 13] = [
            ("Bayesian weights (total)", self.total_weights, None),
            ("  unshared (biases, norms)", self.unshared_weights, None),
            ("  shareable", s, None),
            (
                "    plain shared",
                self.plain_shared,
                Some(pct(self.plain_shared, s)),
            ),
            (
                "    ellipse (alpha-blended)",
                self.ellipse_weights,
                Some(pct(self.ellipse_weights, s)),
            ),
            ("    outliers", self.outliers, Some(pct(self.outliers, s))),
            ("      mean threshold", self.outliers_mean_threshold, None),
            ("      gradient", self.outliers_gradient, None),
            ("      small cluster", self.outliers_small_cluster, None),
            ("Gaussians fitted", self.gaussians_fitted, None),
            ("Gaussians before merge", self.gaussians_before_merge, None),
            ("Gaussians after merge", self.gaussians_after_merge, None),
            ("Merge passes", self.merge_passes, None),
        ];
        writeln!(f, "{:<30} {:>14} {:>9}", "quantity", "count", "% share")?;
        for (name, n, p) in rows {
            match p {
                Some(p) => writeln!(f, "{name:<30} {n:>14} {p:>8.2}%")?,
                None => writeln!(f, "{name:<30} {n:>14}")?,
            }
        }
        writeln!(
            f,
            "{:<30} {:>14}",
            "Trainable params (shared)", self.shared_model_params
        )?;
        writeln!(
            f,
            "{:<30} {:>14}",
            "Trainable params (full BNN)", self.full_model_params
        )?;
        writeln!(
            f,
            "{:<30} {:>13.3}%",
            "Compression ratio",
            100.0 * self.compression_ratio
        )?;
        if let Some(w) = self.inlier_kl_weight {
            writeln!(
                f,
                "{:<30} {:>14.3e} (per-weight ELBO: 1)",
                "KL weight of one inlier", w
            )?;
        }
        if !self.gradients_available {
            writeln!(f, "(no gradients: gradient criteria skipped)")?;
        }
        let t = &self.timings;
        writeln!(
            f,
            "Timings (s): outliers {:.3}, gmm {:.3}, small clusters {:.3}, ellipse {:.3}, merge {:.3}, total {:.3}",
            t.outliers_s, t.gmm_s, t.small_clusters_s, t.ellipse_s, t.merge_s, t.total_s
        )?;
        if let Some(fs) = &self.file_sizes {
            writeln!(
                f,
                "File bytes: codebook {}, index {}, alphas {}, outliers {}, unshared {}, total {}",
                fs.codebook, fs.index, fs.alphas, fs.outliers, fs.unshared, fs.total
            )?;
        }
        if let Some(r) = &self.retrain_stop {
            let checks: Vec<String> = r
                .checks
                .iter()
                .map(|c| format!("{}: {:.4}", epochs(c.epochs_done), c.confidence))
                .collect();
            let end = match r.stopped_after {
                Some(n) => format!(
                    "stopped after {} epoch{}",
                    epochs(n),
                    if n == 1.0 { "" } else { "s" }
                ),
                None => "ran every epoch".to_string(),
            };
            writeln!(
                f,
                "Stage 3 {end}: confidence on {} probe images, source BNN {:.4}, shared model by epochs done {}",
                r.probe_images,
                r.source_confidence,
                checks.join(", ")
            )?;
        }
        Ok(())
    }
}

/// Epochs for a person: `1`, `0.25`, `1.38` (two decimals: checks come at fractions of an
/// epoch's steps).
fn epochs(n: f64) -> String {
    let s = format!("{n:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::epochs;

    #[test]
    fn epochs_print_with_at_most_two_decimals() {
        for (n, want) in [
            (0.0, "0"),
            (1.0, "1"),
            (10.0, "10"),
            (0.1237, "0.12"),
            (0.2495, "0.25"),
            (1.5, "1.5"),
        ] {
            assert_eq!(epochs(n), want, "{n}");
        }
    }
}
