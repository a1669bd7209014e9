//! The whole of stages 1-2 in one call.

use std::time::Instant;

use crate::config::{SharingSpace, SwshareConfig};
use crate::ellipse::detect_ellipses;
use crate::error::SwshareError;
use crate::gmm_stage::fit_gmm;
use crate::merge::merge_gaussians;
use crate::mu_only::fit_mu_only;
use crate::outliers::detect_outliers;
use crate::plan::SharingPlan;
use crate::report::CompressionReport;
use crate::small_clusters::reduce_small_clusters;
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
    let mut plan = match cfg.space {
        SharingSpace::MuSigma => fit_gmm(table, &mask, &cfg.gmm)?,
        SharingSpace::MuOnly => fit_mu_only(table, &mask, cfg.gmm.k)?,
    };
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

    // Ellipses and merging live in the (mu, sigma) plane: the 1-D baseline has neither.
    let in_plane = cfg.space == SharingSpace::MuSigma;
    let t = Instant::now();
    if in_plane {
        detect_ellipses(&mut plan, table, &cfg.refine.ellipse)?;
    }
    let ellipse_s = t.elapsed().as_secs_f64();

    let t = Instant::now();
    let merge_passes = match in_plane {
        true => merge_gaussians(&mut plan, table, &cfg.refine.merge)?.passes,
        false => 0,
    };
    let merge_s = t.elapsed().as_secs_f64();

    plan.validate()?;
    let mut report =
        CompressionReport::from_plan(table, &plan, k_fit, k_before_merge, merge_passes);
    report.timings.outliers_s = outliers_s;
    report.timings.gmm_s = gmm_s;
    report.timings.small_clusters_s = small_clusters_s;
    report.timings.ellipse_s = ellipse_s;
    report.timings.merge_s = merge_s;
    report.timings.total_s = t_all.elapsed().as_secs_f64();
    Ok((plan, report))
}
