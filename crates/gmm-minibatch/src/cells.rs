//! Exact per-cell moments (weight, mean, covariance) of the bucketed points.

use rayon::prelude::*;

use crate::data::Standardizer;
use crate::grid::Buckets;

/// Weighted moments of the points in one grid cell, standardised space.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[repr(C)]
pub(crate) struct CellStat {
    pub w: f64,
    pub mx: f64,
    pub my: f64,
    pub cxx: f64,
    pub cxy: f64,
    pub cyy: f64,
}

/// Two-pass (mean, then centred second moments) statistics per occupied cell, in cell order;
/// cells of zero weight are left out. Returns the kept cells' codes and statistics.
pub(crate) fn cell_stats(
    points: &[[f32; 2]],
    weights: Option<&[f32]>,
    std: &Standardizer,
    b: &Buckets,
) -> (Vec<u32>, Vec<CellStat>) {
    let stats: Vec<CellStat> = (0..b.codes.len())
        .into_par_iter()
        .with_min_len(1024)
        .map(|c| {
            let idx = &b.perm[b.starts[c]..b.starts[c + 1]];
            let wt = |i: u32| weights.map_or(1.0, |w| f64::from(w[i as usize]));
            let (mut sw, mut sx, mut sy) = (0.0, 0.0, 0.0);
            for &i in idx {
                let z = std.to_std(points[i as usize]);
                let w = wt(i);
                sw += w;
                sx += w * z[0];
                sy += w * z[1];
            }
            if !(sw > 0.0) {
                return CellStat::default();
            }
            let (mx, my) = (sx / sw, sy / sw);
            let (mut cxx, mut cxy, mut cyy) = (0.0, 0.0, 0.0);
            for &i in idx {
                let z = std.to_std(points[i as usize]);
                let w = wt(i);
                let (dx, dy) = (z[0] - mx, z[1] - my);
                cxx += w * dx * dx;
                cxy += w * dx * dy;
                cyy += w * dy * dy;
            }
            CellStat {
                w: sw,
                mx,
                my,
                cxx: cxx / sw,
                cxy: cxy / sw,
                cyy: cyy / sw,
            }
        })
        .collect();
    let mut codes = Vec::with_capacity(stats.len());
    let mut kept = Vec::with_capacity(stats.len());
    for (c, s) in stats.into_iter().enumerate() {
        if s.w > 0.0 {
            codes.push(b.codes[c]);
            kept.push(s);
        }
    }
    (codes, kept)
}
