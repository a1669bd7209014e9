//! Mixture parameters in the standardised space and their sufficient statistics.

use crate::math::{Comp, floor_cov, sym_eig};

/// Sufficient statistics of one component: `[W, Sx, Sy, Sxx, Sxy, Syy]` (raw moments).
pub(crate) type Stat = [f64; 6];

/// Mixture in the standardised space; every weight is positive.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mix {
    pub weight: Vec<f64>,
    pub mean: Vec<[f64; 2]>,
    pub cov: Vec<[f64; 3]>,
}

impl Mix {
    pub(crate) fn len(&self) -> usize {
        self.weight.len()
    }

    /// Flat tables for the hot loops (weights normalised).
    pub(crate) fn comps(&self) -> Vec<Comp> {
        let tot: f64 = self.weight.iter().sum();
        (0..self.len())
            .map(|k| {
                Comp::new(self.weight[k] / tot, self.mean[k], self.cov[k]).unwrap_or(Comp {
                    // Unreachable for a validated mixture; a component that can never win.
                    logc: f64::NEG_INFINITY,
                    pa: 1.0,
                    pc: 1.0,
                    ..Comp::default()
                })
            })
            .collect()
    }

    /// M-step: parameters from statistics (all entries must have `W > 0`).
    pub(crate) fn from_stats(stats: &[Stat], floor: f64) -> Self {
        let mut m = Mix {
            weight: Vec::with_capacity(stats.len()),
            mean: Vec::with_capacity(stats.len()),
            cov: Vec::with_capacity(stats.len()),
        };
        for s in stats {
            let w = s[0];
            let (mx, my) = (s[1] / w, s[2] / w);
            let c = floor_cov(
                s[3] / w - mx * mx,
                s[4] / w - mx * my,
                s[5] / w - my * my,
                floor,
            );
            m.weight.push(w);
            m.mean.push([mx, my]);
            m.cov.push(c);
        }
        m
    }

    /// Statistics of component `k` (inverse of [`Mix::from_stats`] up to the floor).
    pub(crate) fn stat_of(w: f64, mean: [f64; 2], cov: [f64; 3]) -> Stat {
        let [mx, my] = mean;
        [
            w,
            w * mx,
            w * my,
            w * (cov[0] + mx * mx),
            w * (cov[1] + mx * my),
            w * (cov[2] + my * my),
        ]
    }
}

/// Handles empty components in `stats` (`W < min_mass`): if `reseed`, each is replaced by
/// half of the currently heaviest component, split along its major axis (deterministic);
/// otherwise it is removed. Returns `(reseeded, dropped)`.
pub(crate) fn fix_empty(
    stats: &mut Vec<Stat>,
    min_mass: f64,
    floor: f64,
    reseed: bool,
) -> (usize, usize) {
    let empty: Vec<usize> = (0..stats.len())
        .filter(|&k| !(stats[k][0] >= min_mass))
        .collect();
    if empty.is_empty() {
        return (0, 0);
    }
    if !reseed {
        let before = stats.len();
        stats.retain(|s| s[0] >= min_mass);
        return (0, before - stats.len());
    }
    let mut reseeded = 0;
    for &k in &empty {
        // Heaviest component (lowest index on ties).
        let j = (0..stats.len())
            .max_by(|&a, &b| stats[a][0].total_cmp(&stats[b][0]).then(b.cmp(&a)))
            .unwrap_or(0);
        let sj = stats[j];
        if !(sj[0] >= 2.0 * min_mass) || j == k {
            continue;
        }
        let w = sj[0];
        let (mx, my) = (sj[1] / w, sj[2] / w);
        let c = floor_cov(
            sj[3] / w - mx * mx,
            sj[4] / w - mx * my,
            sj[5] / w - my * my,
            floor,
        );
        let (l1, _, v) = sym_eig(c[0], c[1], c[2]);
        let d = 0.5 * l1.max(0.0).sqrt();
        // Halves with means +-d along the major axis; their mixture keeps the total moments.
        let nc = floor_cov(
            c[0] - d * d * v[0] * v[0],
            c[1] - d * d * v[0] * v[1],
            c[2] - d * d * v[1] * v[1],
            floor,
        );
        stats[j] = Mix::stat_of(0.5 * w, [mx - d * v[0], my - d * v[1]], nc);
        stats[k] = Mix::stat_of(0.5 * w, [mx + d * v[0], my + d * v[1]], nc);
        reseeded += 1;
    }
    // Anything that could not be reseeded is removed.
    let before = stats.len();
    stats.retain(|s| s[0] >= min_mass);
    (reseeded, before - stats.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_round_trip_and_split_keeps_moments() {
        let s = Mix::stat_of(3.0, [1.0, -2.0], [0.5, 0.1, 0.2]);
        let m = Mix::from_stats(&[s], 1e-9);
        assert!((m.mean[0][0] - 1.0).abs() < 1e-12 && (m.cov[0][1] - 0.1).abs() < 1e-12);
        let mut stats = vec![s, [0.0; 6]];
        let (r, d) = fix_empty(&mut stats, 1e-6, 1e-12, true);
        assert_eq!((r, d), (1, 0));
        let tot: Vec<f64> = (0..6).map(|t| stats[0][t] + stats[1][t]).collect();
        for t in 0..6 {
            assert!((tot[t] - s[t]).abs() < 1e-9, "moment {t}");
        }
        let mut stats = vec![s, [0.0; 6]];
        assert_eq!(fix_empty(&mut stats, 1e-6, 1e-12, false), (0, 1));
        assert_eq!(stats.len(), 1);
    }
}
