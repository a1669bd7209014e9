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

/// Shifted one-pass statistics per occupied cell, in cell order;
/// cells of zero weight are left out. Returns the kept cells' codes and statistics.
pub(crate) fn cell_stats(std: &Standardizer, b: &Buckets) -> (Vec<u32>, Vec<CellStat>) {
    let stats: Vec<CellStat> = (0..b.codes.len())
        .into_par_iter()
        .with_min_len(1024)
        .map(|c| {
            let range = b.starts[c]..b.starts[c + 1];
            // One pass with moments about the cell's first point (shift keeps them accurate).
            let r = std.to_std(b.pts[range.start]);
            let (mut sw, mut sx, mut sy, mut sxx, mut sxy, mut syy) =
                (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
            for j in range {
                let z = std.to_std(b.pts[j]);
                let w = if b.w.is_empty() {
                    1.0
                } else {
                    f64::from(b.w[j])
                };
                let (dx, dy) = (z[0] - r[0], z[1] - r[1]);
                sw += w;
                sx += w * dx;
                sy += w * dy;
                sxx += w * dx * dx;
                sxy += w * dx * dy;
                syy += w * dy * dy;
            }
            if !(sw > 0.0) {
                return CellStat::default();
            }
            let (mx, my) = (sx / sw, sy / sw);
            CellStat {
                w: sw,
                mx: r[0] + mx,
                my: r[1] + my,
                cxx: (sxx / sw - mx * mx).max(0.0),
                cxy: sxy / sw - mx * my,
                cyy: (syy / sw - my * my).max(0.0),
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
