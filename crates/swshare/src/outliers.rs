//! Stage 1: outlier detection (paper section 3.1, "Outliers vs. Inliers Classification").
//!
//! Works on the shareable weights only, in shareable-position order. A weight is an outlier
//! when
//! * `|mu| > max(tau_w, tau_sd * sd_l)` ([`OutlierCause::MeanThreshold`]), `sd_l` the
//!   standard deviation of the means of the weight's layer (`tau_sd = 0`, the default: the
//!   paper's `|mu| > tau_w`); compared in `f32`, the table's precision, with the threshold
//!   rounded to `f32`, or
//! * its `|d loss / d mu|` is among the `floor(P_g * n_shareable)` largest of all shareable
//!   weights ([`OutlierCause::Gradient`]).
//!
//! When both hold, the cause recorded is `MeanThreshold` (checked first). The gradient ranking
//! is over *all* shareable weights, as in the paper ("top 1 % of {|grad w_j|}, j = 1..n_w"),
//! so the number of `Gradient` outliers can be smaller than `floor(P_g * n)` when some of the
//! top weights are already mean outliers.
//!
//! **Ties**: exactly `floor(P_g * n)` weights are ranked top. Among weights with equal `|grad|`
//! at the boundary, the ones with the lower shareable position are taken, so the result is
//! deterministic. The selection is exact (`select_nth_unstable_by`, O(n)), not an
//! approximate quantile.

use crate::config::OutlierConfig;
use crate::error::SwshareError;
use crate::fate::OutlierCause;
use crate::table::WeightTable;

/// Per shareable position: `None` for an inlier, else the outlier's cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlierMask {
    causes: Vec<Option<OutlierCause>>,
    mean_threshold: usize,
    gradient: usize,
}

impl OutlierMask {
    /// Builds a mask from causes (counts are derived).
    pub fn from_causes(causes: Vec<Option<OutlierCause>>) -> Self {
        let count = |c: OutlierCause| causes.iter().filter(|x| **x == Some(c)).count();
        let mean_threshold = count(OutlierCause::MeanThreshold);
        let gradient = count(OutlierCause::Gradient);
        Self {
            causes,
            mean_threshold,
            gradient,
        }
    }
    /// The cause per shareable position.
    pub fn causes(&self) -> &[Option<OutlierCause>] {
        &self.causes
    }
    /// Number of shareable positions.
    pub fn len(&self) -> usize {
        self.causes.len()
    }
    /// Whether the mask covers no weight.
    pub fn is_empty(&self) -> bool {
        self.causes.is_empty()
    }
    /// Number of inliers.
    pub fn n_inliers(&self) -> usize {
        self.causes.len() - self.n_outliers()
    }
    /// Number of outliers (all causes).
    pub fn n_outliers(&self) -> usize {
        self.causes.iter().filter(|c| c.is_some()).count()
    }
    /// Number of [`OutlierCause::MeanThreshold`] outliers.
    pub fn n_mean_threshold(&self) -> usize {
        self.mean_threshold
    }
    /// Number of [`OutlierCause::Gradient`] outliers.
    pub fn n_gradient(&self) -> usize {
        self.gradient
    }
}

/// Number of gradient outliers ranked top: `floor(fraction * n)`.
pub fn gradient_top_count(fraction: f64, n: usize) -> usize {
    // The small epsilon keeps e.g. 0.01 * 300 = 3.0000000000000004 (or 2.9999999999999996)
    // from losing a weight to floating-point rounding.
    let raw = fraction * n as f64;
    ((raw + 1e-9 * raw.max(1.0)).floor() as usize).min(n)
}

/// Shareable positions of the `count` largest `|g|`, ties broken by lower position.
/// `abs_grad` must be finite (the table guarantees it).
pub fn top_abs_positions(grad: &[f32], count: usize) -> Vec<u32> {
    if count == 0 {
        return Vec::new();
    }
    let mut keyed: Vec<(f32, u32)> = grad
        .iter()
        .enumerate()
        .map(|(i, g)| (g.abs(), i as u32))
        .collect();
    // Descending |g|, then ascending position.
    let cmp = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    if count < keyed.len() {
        keyed.select_nth_unstable_by(count - 1, cmp);
        keyed.truncate(count);
    }
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// The mean threshold of a layer whose means are `mu`: `max(tau_w, tau_sd * sd(mu))` in
/// `f32` (the population standard deviation, accumulated in `f64`).
pub fn mean_threshold(mu: &[f32], cfg: &OutlierConfig) -> f32 {
    if cfg.tau_sd == 0.0 || mu.is_empty() {
        return cfg.tau_w as f32;
    }
    let n = mu.len() as f64;
    let mean = mu.iter().map(|&m| f64::from(m)).sum::<f64>() / n;
    let var = mu
        .iter()
        .map(|&m| (f64::from(m) - mean).powi(2))
        .sum::<f64>()
        / n;
    cfg.tau_w.max(cfg.tau_sd * var.sqrt()) as f32
}

/// Stage 1: classifies every shareable weight of `table` as inlier or outlier.
///
/// Without gradients in the table the gradient criterion is skipped.
pub fn detect_outliers(
    table: &WeightTable,
    cfg: &OutlierConfig,
) -> Result<OutlierMask, SwshareError> {
    cfg.validate()?;
    // Compared in f32, the table's precision: a stored mean equal to `tau_w as f32` (e.g.
    // 0.2f32, which is slightly above 0.2) is not an outlier.
    let mut causes: Vec<Option<OutlierCause>> = Vec::with_capacity(table.n_shareable());
    for r in table.shareable_ranges() {
        let mu = &table.mu()[r];
        let tau = mean_threshold(mu, cfg);
        causes.extend(
            mu.iter()
                .map(|&m| (m.abs() > tau).then_some(OutlierCause::MeanThreshold)),
        );
    }
    if let Some(grad) = table.grad_mu() {
        let g = table.gather_shareable(grad);
        let count = gradient_top_count(cfg.grad_top_fraction, g.len());
        for p in top_abs_positions(&g, count) {
            let c = &mut causes[p as usize];
            if c.is_none() {
                *c = Some(OutlierCause::Gradient);
            }
        }
    }
    Ok(OutlierMask::from_causes(causes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::WeightTableBuilder;

    fn table(mu: &[f32], grad: Option<&[f32]>) -> WeightTable {
        let mut b = WeightTableBuilder::new();
        let n = mu.len();
        b.push_layer(
            "bias",
            &[2],
            false,
            &[5.0, 5.0],
            &[0.1; 2],
            grad.map(|_| &[9.0f32, 9.0][..]),
        )
        .push_layer("w", &[n], true, mu, &vec![0.01; n], grad);
        b.build().unwrap()
    }

    #[test]
    fn mean_threshold_is_strict() {
        let mu = [0.2, -0.2, 0.2001, -0.2001, 0.0, 0.19];
        let m = detect_outliers(&table(&mu, None), &OutlierConfig::default()).unwrap();
        let want = [false, false, true, true, false, false];
        for (c, w) in m.causes().iter().zip(want) {
            assert_eq!(c.is_some(), w);
        }
        assert_eq!(m.n_mean_threshold(), 2);
        assert_eq!(m.n_gradient(), 0);
        // The unshareable layer (|mu| = 5) is not part of the mask.
        assert_eq!(m.len(), 6);
    }

    #[test]
    fn the_threshold_follows_each_layers_spread() {
        // Layer a: sd 0.2236 (mean 0); layer b: sd 0.1083 (mean 0.0625).
        let (a, b) = ([-0.3f32, -0.1, 0.1, 0.3], [0.0f32, 0.0, 0.0, 0.25]);
        let mut builder = WeightTableBuilder::new();
        builder
            .push_layer("a", &[4], true, &a, &[0.01; 4], None)
            .push_layer("b", &[4], true, &b, &[0.01; 4], None);
        let t = builder.build().unwrap();
        let outliers = |tau_sd: f64| -> Vec<usize> {
            let cfg = OutlierConfig {
                tau_sd,
                ..OutlierConfig::default()
            };
            let m = detect_outliers(&t, &cfg).unwrap();
            (0..8).filter(|&i| m.causes()[i].is_some()).collect()
        };
        // The paper's rule: |mu| > 0.2.
        assert_eq!(outliers(0.0), vec![0, 3, 7]);
        // 1.2 * 0.2236 = 0.268 < 0.3: a's tails stay; b's 1.2 * 0.108 < tau_w keeps 0.2.
        assert_eq!(outliers(1.2), vec![0, 3, 7]);
        // 1.5 * 0.2236 = 0.335 > 0.3: a has none; b's threshold is still tau_w.
        assert_eq!(outliers(1.5), vec![7]);
        let cfg = |tau_sd| OutlierConfig {
            tau_sd,
            ..OutlierConfig::default()
        };
        assert!((mean_threshold(&a, &cfg(1.5)) - 1.5 * 0.05f32.sqrt()).abs() < 1e-6);
        assert_eq!(mean_threshold(&b, &cfg(1.5)), 0.2f32);
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            assert!(detect_outliers(&t, &cfg(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn gradient_top_fraction_is_exact() {
        // 300 weights, |grad| = position (all distinct): top 1 % = 3 weights, 297..=299.
        let mu = vec![0.0f32; 300];
        let grad: Vec<f32> = (0..300)
            .map(|i| if i % 2 == 0 { i as f32 } else { -(i as f32) })
            .collect();
        let m = detect_outliers(&table(&mu, Some(&grad)), &OutlierConfig::default()).unwrap();
        let got: Vec<usize> = (0..300).filter(|&i| m.causes()[i].is_some()).collect();
        assert_eq!(got, vec![297, 298, 299]);
        assert!(m.causes()[299] == Some(OutlierCause::Gradient));
    }

    #[test]
    fn gradient_ties_take_lower_positions() {
        let mu = vec![0.0f32; 200];
        let mut grad = vec![0.0f32; 200];
        for i in [10, 50, 120, 190] {
            grad[i] = 1.0;
        }
        // floor(0.01 * 200) = 2 of the four tied maxima: positions 10 and 50.
        let m = detect_outliers(&table(&mu, Some(&grad)), &OutlierConfig::default()).unwrap();
        let got: Vec<usize> = (0..200).filter(|&i| m.causes()[i].is_some()).collect();
        assert_eq!(got, vec![10, 50]);
    }

    #[test]
    fn mean_cause_wins_over_gradient() {
        let mut mu = vec![0.0f32; 100];
        mu[7] = 0.5;
        let mut grad = vec![0.0f32; 100];
        grad[7] = 3.0;
        let m = detect_outliers(&table(&mu, Some(&grad)), &OutlierConfig::default()).unwrap();
        assert_eq!(m.causes()[7], Some(OutlierCause::MeanThreshold));
        assert_eq!(m.n_gradient(), 0);
        assert_eq!(m.n_outliers(), 1);
    }

    #[test]
    fn top_count_rounding() {
        assert_eq!(gradient_top_count(0.01, 300), 3);
        assert_eq!(gradient_top_count(0.01, 299), 2);
        assert_eq!(gradient_top_count(0.01, 99), 0);
        assert_eq!(gradient_top_count(0.0, 1000), 0);
        assert_eq!(gradient_top_count(1.0, 7), 7);
        assert_eq!(top_abs_positions(&[1.0, -3.0, 2.0], 3).len(), 3);
    }
}
