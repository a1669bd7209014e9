//! Stage 2, first step: cluster-size reduction (paper section 3.2, "Cluster Size
//! Reductions").
//!
//! Components with fewer than `N_min` plain-shared members are dropped and their members
//! become [`OutlierCause::SmallCluster`] outliers. The surviving mixing weights are
//! renormalised; with [`SmallClusterPolicy::DropAndRefit`] every survivor's mean and covariance
//! are re-estimated from its members (one hard M-step) and its mixing weight becomes its share
//! of the remaining members.

use gauss2d::{Gaussian2, Matrix2, Vector2};
use serde::{Deserialize, Serialize};

use crate::config::SmallClusterPolicy;
use crate::error::SwshareError;
use crate::fate::{OutlierCause, WeightFate};
use crate::plan::{CodebookEntry, SharingPlan};
use crate::table::WeightTable;

/// What the cluster-size reduction did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmallClusterOutcome {
    /// Components dropped.
    pub dropped: usize,
    /// Weights that became `SmallCluster` outliers.
    pub new_outliers: usize,
    /// Old component index -> new index (`None` for dropped components).
    pub map: Vec<Option<u32>>,
}

/// Drops the components of `plan` with fewer than `n_min` plain-shared members.
///
/// Must run before ellipse detection (an error otherwise), as in the paper's order. Errors if
/// every component would be dropped.
pub fn reduce_small_clusters(
    plan: &mut SharingPlan,
    table: &WeightTable,
    n_min: usize,
    policy: SmallClusterPolicy,
) -> Result<SmallClusterOutcome, SwshareError> {
    if !plan.ellipses.is_empty() {
        return Err(SwshareError::StageOrder(
            "the cluster-size reduction must run before ellipse detection",
        ));
    }
    if plan.n_weights() != table.n_shareable() {
        return Err(SwshareError::Mismatch {
            what: "shareable weights",
            plan: plan.n_weights(),
            input: table.n_shareable(),
        });
    }
    plan.recount();
    let k = plan.k();
    let mut map = vec![None; k];
    let mut kept = Vec::new();
    for (i, e) in plan.codebook.iter().enumerate() {
        if e.count as usize >= n_min {
            map[i] = Some(kept.len() as u32);
            kept.push(e.clone());
        }
    }
    if kept.is_empty() && k > 0 {
        return Err(SwshareError::NoComponentLeft { k, n_min });
    }
    let mut new_outliers = 0usize;
    for f in &mut plan.fates {
        if let WeightFate::Shared(c) = *f {
            match map.get(c as usize).copied().flatten() {
                Some(n) => *f = WeightFate::Shared(n),
                None => {
                    *f = WeightFate::Outlier(OutlierCause::SmallCluster);
                    new_outliers += 1;
                }
            }
        }
    }
    let total: f64 = kept.iter().map(|e| e.mixing_weight).sum();
    if total > 0.0 {
        for e in &mut kept {
            e.mixing_weight /= total;
        }
    }
    plan.codebook = kept;
    if policy == SmallClusterPolicy::DropAndRefit {
        refit_from_members(plan, table)?;
    }
    plan.recount();
    Ok(SmallClusterOutcome {
        dropped: k - plan.k(),
        new_outliers,
        map,
    })
}

/// Re-estimates every codebook entry from its plain-shared members: mean and (population)
/// covariance of their `(mu, sigma)`, mixing weight = member share. Entries without members
/// keep their Gaussian and get mixing weight 0. Near-singular covariances are floored by `gauss2d` (`1e-12`).
pub fn refit_from_members(plan: &mut SharingPlan, table: &WeightTable) -> Result<(), SwshareError> {
    let mu = table.gather_shareable(table.mu());
    let sigma = table.gather_shareable(table.sigma());
    let k = plan.k();
    // n, sum x, sum y, sum xx, sum xy, sum yy
    let mut acc = vec![[0f64; 6]; k];
    for (p, f) in plan.fates.iter().enumerate() {
        if let WeightFate::Shared(c) = *f
            && let Some(a) = acc.get_mut(c as usize)
        {
            let (x, y) = (f64::from(mu[p]), f64::from(sigma[p]));
            a[0] += 1.0;
            a[1] += x;
            a[2] += y;
            a[3] += x * x;
            a[4] += x * y;
            a[5] += y * y;
        }
    }
    let members: f64 = acc.iter().map(|a| a[0]).sum();
    for (c, (e, a)) in plan.codebook.iter_mut().zip(&acc).enumerate() {
        let n = a[0];
        if n == 0.0 {
            e.mixing_weight = 0.0;
            continue;
        }
        let (mx, my) = (a[1] / n, a[2] / n);
        let sxx = (a[3] / n - mx * mx).max(0.0);
        let syy = (a[5] / n - my * my).max(0.0);
        let sxy = a[4] / n - mx * my;
        let g = Gaussian2::new(Vector2::new(mx, my), Matrix2::new(sxx, sxy, sxy, syy)).map_err(
            |source| SwshareError::Gauss {
                context: format!("refitting component {c} from {n} members"),
                source,
            },
        )?;
        *e = CodebookEntry::new(g, n / members);
    }
    Ok(())
}
