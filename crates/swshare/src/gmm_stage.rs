//! Stage 1 (end): the GMM over the inliers' `(mu, sigma)` (paper section 3.2, equation 2),
//! fitted with `gmm-minibatch`, and the initial plan with every inlier hard-assigned to its
//! most responsible component.

use gauss2d::Gaussian2;

use crate::error::SwshareError;
use crate::fate::WeightFate;
use crate::outliers::OutlierMask;
use crate::plan::{CodebookEntry, SharingPlan};
use crate::table::WeightTable;

/// The inliers' `(mu, sigma)` points and their shareable positions, in order.
pub fn inlier_points(
    table: &WeightTable,
    mask: &OutlierMask,
) -> Result<(Vec<u32>, Vec<[f32; 2]>), SwshareError> {
    if mask.len() != table.n_shareable() {
        return Err(SwshareError::Mismatch {
            what: "shareable weights (outlier mask)",
            plan: mask.len(),
            input: table.n_shareable(),
        });
    }
    let mu = table.gather_shareable(table.mu());
    let sigma = table.gather_shareable(table.sigma());
    let mut pos = Vec::with_capacity(mask.n_inliers());
    let mut pts = Vec::with_capacity(mask.n_inliers());
    for (p, c) in mask.causes().iter().enumerate() {
        if c.is_none() {
            pos.push(p as u32);
            pts.push([mu[p], sigma[p]]);
        }
    }
    Ok((pos, pts))
}

/// Builds a plan from fitted components: outliers from `mask`, every inlier `Shared(assign)`.
pub fn plan_from_fit(
    mask: &OutlierMask,
    positions: &[u32],
    assign: &[u32],
    components: &[Gaussian2],
    mixing: &[f64],
) -> Result<SharingPlan, SwshareError> {
    if positions.len() != assign.len() || components.len() != mixing.len() {
        return Err(SwshareError::Mismatch {
            what: "inlier assignments / mixing weights",
            plan: positions.len(),
            input: assign.len(),
        });
    }
    let mut fates: Vec<WeightFate> = mask
        .causes()
        .iter()
        .map(|c| match c {
            Some(c) => WeightFate::Outlier(*c),
            None => WeightFate::Shared(u32::MAX),
        })
        .collect();
    for (&p, &k) in positions.iter().zip(assign) {
        if k as usize >= components.len() {
            return Err(SwshareError::Mismatch {
                what: "assigned component index vs K",
                plan: k as usize,
                input: components.len(),
            });
        }
        fates[p as usize] = WeightFate::Shared(k);
    }
    let mut plan = SharingPlan {
        codebook: components
            .iter()
            .zip(mixing)
            .map(|(g, &w)| CodebookEntry::new(*g, w))
            .collect(),
        fates,
        ellipses: Vec::new(),
    };
    plan.recount();
    plan.validate()?;
    Ok(plan)
}

/// Fits the GMM to the inliers of `mask` and returns the initial plan.
///
/// Errors with [`SwshareError::TooFewInliers`] when there are fewer inliers than `cfg.k`.
/// The fit may return fewer than `cfg.k` components (e.g. fewer distinct locations than K,
/// see `gmm_minibatch::KReason`); the plan's codebook has as many entries as the fit.
pub fn fit_gmm(
    table: &WeightTable,
    mask: &OutlierMask,
    cfg: &gmm_minibatch::GmmConfig,
) -> Result<SharingPlan, SwshareError> {
    let (positions, points) = inlier_points(table, mask)?;
    if cfg.k == 0 || points.len() < cfg.k {
        return Err(SwshareError::TooFewInliers {
            k: cfg.k,
            inliers: points.len(),
        });
    }
    let fit = gmm_minibatch::fit(&points, None, cfg)?;
    let assign = fit.assign(&points)?;
    plan_from_fit(mask, &positions, &assign, &fit.components, &fit.weights)
}
