//! The whole of stages 1-2 in one call, and re-merging between retraining epochs.

use std::time::Instant;

use gauss2d::{Gaussian2, Vector2};
use serde::{Deserialize, Serialize};

use crate::config::{MergeConfig, SwshareConfig};
use crate::ellipse::detect_ellipses;
use crate::error::SwshareError;
use crate::gmm_stage::fit_gmm;
use crate::merge::{merge_components, merge_gaussians, remap_plan};
use crate::outliers::detect_outliers;
use crate::plan::{CodebookEntry, SharingPlan};
use crate::refine::reduce_small_clusters;
use crate::report::CompressionReport;
use crate::table::WeightTable;

/// Runs stages 1 and 2 on `table`: outliers, GMM fit, cluster-size reduction, ellipse
/// weights, merging. Returns the validated plan and its report (with per-stage timings).
///
/// Deterministic for a fixed `cfg.gmm.seed` and thread count (every stage after the GMM fit is
/// deterministic for any thread count). Nothing is printed.
pub fn build_plan(
    table: &WeightTable,
    cfg: &SwshareConfig,
) -> Result<(SharingPlan, CompressionReport), SwshareError> {
    cfg.validate()?;
    let t_all = Instant::now();
    let t = Instant::now();
    let mask = detect_outliers(table, &cfg.outliers)?;
    let outliers_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let mut plan = fit_gmm(table, &mask, &cfg.gmm)?;
    let gmm_s = t.elapsed().as_secs_f64();
    let k_fit = plan.k();

    let t = Instant::now();
    reduce_small_clusters(
        &mut plan,
        table,
        cfg.refine.n_min,
        cfg.refine.small_clusters,
    )?;
    let small_clusters_s = t.elapsed().as_secs_f64();
    let k_before_merge = plan.k();

    let t = Instant::now();
    detect_ellipses(&mut plan, table, &cfg.refine.ellipse)?;
    let ellipse_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let merged = merge_gaussians(&mut plan, table, &cfg.refine.merge)?;
    let merge_s = t.elapsed().as_secs_f64();

    plan.validate()?;
    let mut report =
        CompressionReport::from_plan(table, &plan, k_fit, k_before_merge, merged.passes);
    report.timings.outliers_s = outliers_s;
    report.timings.gmm_s = gmm_s;
    report.timings.small_clusters_s = small_clusters_s;
    report.timings.ellipse_s = ellipse_s;
    report.timings.merge_s = merge_s;
    report.timings.total_s = t_all.elapsed().as_secs_f64();
    Ok((plan, report))
}

/// Result of [`remerge`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemergeOutcome {
    /// The new plan; its codebook's `init_mu` / `init_sigma` are the parameters to continue
    /// training from (for an entry that did not merge: the trained values; for a merged one:
    /// the merge rule's mean, e.g. the average of the trained values for the paper's rule).
    pub plan: SharingPlan,
    /// Old codebook index -> new codebook index.
    pub map: Vec<u32>,
    /// Pairwise merges performed.
    pub merges: usize,
    /// Passes run.
    pub passes: usize,
}

/// Re-merges codebook entries after (some) stage-3 training.
///
/// `trained[k] = (mu_k, sigma_k)` are the current trainable parameters of entry `k`. Each
/// entry's Gaussian is moved to that mean (its covariance is kept) and merging runs with
/// `cfg`'s `tau_d` and rule. The gradient and variance criteria need per-weight data that no
/// longer exists once weights share parameters, so they are skipped here. The input plan is
/// not changed.
pub fn remerge(
    plan: &SharingPlan,
    trained: &[(f32, f32)],
    cfg: &MergeConfig,
) -> Result<RemergeOutcome, SwshareError> {
    if trained.len() != plan.k() {
        return Err(SwshareError::Mismatch {
            what: "trained codebook parameters",
            plan: plan.k(),
            input: trained.len(),
        });
    }
    let mut comps = Vec::with_capacity(plan.k());
    for (k, (e, &(m, s))) in plan.codebook.iter().zip(trained).enumerate() {
        let g = Gaussian2::new(Vector2::new(f64::from(m), f64::from(s)), e.gaussian.cov())
            .map_err(|source| SwshareError::Gauss {
                context: format!("codebook entry {k} moved to trained ({m}, {s})"),
                source,
            })?;
        comps.push(g);
    }
    let mix: Vec<f64> = plan.codebook.iter().map(|e| e.mixing_weight).collect();
    let (c, w, _, map, passes, merges) = merge_components(&comps, &mix, &[], false, cfg)?;
    let mut new_plan = plan.clone();
    let codebook = c
        .into_iter()
        .zip(w)
        .zip(&map_survivors(&map, trained))
        .map(|((g, w), keep)| {
            let mut e = CodebookEntry::new(g, w);
            // An entry that did not merge keeps its exact trained values (no f64 round trip).
            if let Some((m, s)) = keep {
                e.init_mu = *m;
                e.init_sigma = *s;
            }
            e
        })
        .collect();
    remap_plan(&mut new_plan, &map, codebook);
    new_plan.validate()?;
    Ok(RemergeOutcome {
        plan: new_plan,
        map,
        merges,
        passes,
    })
}

/// Per new entry: the trained values of its single old entry, or `None` if it merged.
fn map_survivors(map: &[u32], trained: &[(f32, f32)]) -> Vec<Option<(f32, f32)>> {
    let k_new = map.iter().map(|&n| n as usize + 1).max().unwrap_or(0);
    let mut count = vec![0usize; k_new];
    let mut first = vec![None; k_new];
    for (old, &n) in map.iter().enumerate() {
        count[n as usize] += 1;
        first[n as usize].get_or_insert(trained[old]);
    }
    first
        .into_iter()
        .zip(count)
        .map(|(t, c)| if c == 1 { t } else { None })
        .collect()
}
