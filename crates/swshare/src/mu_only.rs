//! The 1-D sharing baseline: a `K`-component clustering of the inliers' `mu` alone, each
//! component taking the mean `sigma` of its members (one `sigma` per component). It isolates
//! what the second dimension of the 2-D GMM contributes: the outlier rules, the cluster-size
//! reduction and stage 3 stay those of the method ([`crate::SharingSpace::MuOnly`]).
//!
//! The clustering is Lloyd's k-means in one dimension (Lloyd 1982), started from the values
//! at evenly spaced ranks: deterministic, and exact on sorted values (each cluster is an
//! interval, its boundaries the midpoints between neighbouring centres).

use gauss2d::{Gaussian2, Matrix2, Vector2};

use crate::error::SwshareError;
use crate::gmm_stage::{inlier_points, plan_from_fit};
use crate::outliers::OutlierMask;
use crate::plan::SharingPlan;
use crate::table::WeightTable;

/// Most Lloyd iterations; it stops earlier once no centre moves.
const MAX_ITERATIONS: usize = 200;

/// Variance floor of a component's Gaussian in each coordinate (a cluster of equal values).
const VARIANCE_FLOOR: f64 = 1e-12;

/// Clusters the inliers of `mask` by `mu` into at most `k` components and returns the initial
/// plan: every inlier `Shared` with its nearest centre, each codebook entry at
/// `(mean mu, mean sigma)` of its members. Fewer than `k` components come back when there
/// are fewer distinct values. Errors with [`SwshareError::TooFewInliers`] when there are
/// fewer inliers than `k`.
pub fn fit_mu_only(
    table: &WeightTable,
    mask: &OutlierMask,
    k: usize,
) -> Result<SharingPlan, SwshareError> {
    let (positions, points) = inlier_points(table, mask)?;
    if k == 0 || points.len() < k {
        return Err(SwshareError::TooFewInliers {
            k,
            inliers: points.len(),
        });
    }
    let mus: Vec<f64> = points.iter().map(|p| f64::from(p[0])).collect();
    let centres = lloyd_1d(&mus, k);
    let assign: Vec<u32> = mus.iter().map(|&x| nearest(&centres, x)).collect();
    // Component statistics; empty clusters (possible only with ties) are dropped.
    let n = centres.len();
    let (mut count, mut sum, mut sum2) =
        (vec![0usize; n], vec![[0.0f64; 2]; n], vec![[0.0f64; 2]; n]);
    for (p, &a) in points.iter().zip(&assign) {
        let a = a as usize;
        count[a] += 1;
        for d in 0..2 {
            let v = f64::from(p[d]);
            sum[a][d] += v;
            sum2[a][d] += v * v;
        }
    }
    let mut remap = vec![u32::MAX; n];
    let (mut components, mut mixing) = (Vec::new(), Vec::new());
    for c in 0..n {
        if count[c] == 0 {
            continue;
        }
        let m = count[c] as f64;
        let mean = [sum[c][0] / m, sum[c][1] / m];
        let var = |d: usize| (sum2[c][d] / m - mean[d] * mean[d]).max(VARIANCE_FLOOR);
        let g = Gaussian2::new(
            Vector2::new(mean[0], mean[1]),
            Matrix2::new(var(0), 0.0, 0.0, var(1)),
        )
        .map_err(|source| SwshareError::Gauss {
            context: format!("1-D sharing component {c}"),
            source,
        })?;
        remap[c] = components.len() as u32;
        components.push(g);
        mixing.push(m / points.len() as f64);
    }
    let assign: Vec<u32> = assign.iter().map(|&a| remap[a as usize]).collect();
    plan_from_fit(mask, &positions, &assign, &components, &mixing)
}

/// Lloyd's k-means of `values` into at most `k` centres, sorted ascending.
fn lloyd_1d(values: &[f64], k: usize) -> Vec<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    // Start at the values of evenly spaced ranks (the middle of each of k equal-count bins).
    let mut centres: Vec<f64> = (0..k).map(|i| sorted[(2 * i + 1) * n / (2 * k)]).collect();
    centres.dedup();
    // Prefix sums give each interval's mean in O(1).
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0.0f64);
    for &v in &sorted {
        prefix.push(prefix[prefix.len() - 1] + v);
    }
    for _ in 0..MAX_ITERATIONS {
        let mut next = Vec::with_capacity(centres.len());
        let mut start = 0;
        for j in 0..centres.len() {
            let end = match centres.get(j + 1) {
                Some(&right) => {
                    let boundary = 0.5 * (centres[j] + right);
                    start + sorted[start..].partition_point(|&v| v <= boundary)
                }
                None => n,
            };
            if end > start {
                next.push((prefix[end] - prefix[start]) / (end - start) as f64);
            }
            start = end;
        }
        next.dedup();
        if next == centres {
            break;
        }
        centres = next;
    }
    centres
}

/// Index of the centre nearest `x` (the lower one on a tie), `centres` sorted ascending.
fn nearest(centres: &[f64], x: f64) -> u32 {
    let i = centres.partition_point(|&c| c < x);
    let best = match (i.checked_sub(1), centres.get(i)) {
        (Some(l), Some(&r)) if x - centres[l] <= r - x => l,
        (Some(_), Some(_)) => i,
        (Some(l), None) => l,
        (None, _) => 0,
    };
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OutlierConfig;
    use crate::outliers::detect_outliers;
    use crate::table::WeightTableBuilder;
    use crate::{SharingSpace, SwshareConfig, WeightFate, build_plan};

    #[test]
    fn lloyd_finds_well_separated_groups() {
        let values = [-1.0, -1.1, -0.9, 2.0, 2.2, 1.8, 5.0, 5.1];
        let c = lloyd_1d(&values, 3);
        let want = [-1.0, 2.0, 5.05];
        assert_eq!(c.len(), 3);
        for (a, b) in c.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{c:?}");
        }
        assert_eq!(nearest(&c, 0.4), 0);
        assert_eq!(nearest(&c, 0.6), 1);
        assert_eq!(nearest(&c, 9.0), 2);
        // Fewer distinct values than k: as many centres as values.
        assert_eq!(lloyd_1d(&[0.5; 10], 4), vec![0.5]);
    }

    /// Two groups with equal `mu` but very different `sigma` share one component (the
    /// second dimension is what 1-D sharing leaves out), whose sigma is their mean.
    #[test]
    fn components_ignore_sigma_and_take_its_mean() {
        let mu: Vec<f32> = (0..400)
            .map(|i| if i < 200 { -0.05 } else { 0.05 })
            .collect();
        let sigma: Vec<f32> = (0..400)
            .map(|i| if i % 2 == 0 { 0.01 } else { 0.03 })
            .collect();
        let mut b = WeightTableBuilder::new();
        b.push_layer("fc.weight", &[20, 20], true, &mu, &sigma, None);
        let table = b.build().unwrap();
        let oc = OutlierConfig {
            grad_top_fraction: 0.0,
            ..Default::default()
        };
        let mask = detect_outliers(&table, &oc).unwrap();
        let plan = fit_mu_only(&table, &mask, 2).unwrap();
        assert_eq!(plan.k(), 2);
        for e in &plan.codebook {
            assert!((e.init_sigma - 0.02).abs() < 1e-6, "{e:?}");
            assert!((e.init_mu.abs() - 0.05).abs() < 1e-6, "{e:?}");
        }
        assert_eq!(plan.fates[0], plan.fates[1]);

        // Through build_plan: the same outlier rule, no ellipses, no merging.
        let mut cfg = SwshareConfig {
            space: SharingSpace::MuOnly,
            ..Default::default()
        };
        cfg.gmm.k = 2;
        cfg.outliers.grad_top_fraction = 0.0;
        cfg.refine.n_min = 5;
        let (plan, report) = build_plan(&table, &cfg).unwrap();
        assert_eq!(plan.ellipses.len(), 0);
        assert_eq!(report.gaussians_after_merge, 2);
        assert!(
            plan.fates
                .iter()
                .all(|f| matches!(f, WeightFate::Shared(_)))
        );
    }
}
