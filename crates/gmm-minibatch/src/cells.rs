//! Exact per-cell moments (weight, mean, covariance) of the points.

use crate::data::Standardizer;
use crate::grid::Geom;
use crate::groups::{Group, Grouping};

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

/// Moments of every occupied cell of `geom`'s grid in cell-code (Morton) order; cells of
/// zero weight are left out. Returns the kept cells' codes and statistics. Each cell is
/// summed in input order, so the result does not depend on the thread count.
pub(crate) fn cell_stats(
    points: &[[f32; 2]],
    weights: Option<&[f32]>,
    std: &Standardizer,
    geom: &Geom,
) -> (Vec<u32>, Vec<CellStat>) {
    let grouping = Grouping::new(points, std, geom);
    let per_group = grouping.run(points, weights, std, geom, &group_stats);
    let mut codes = Vec::new();
    let mut cells = Vec::new();
    for (c, s) in per_group {
        codes.extend(c);
        cells.extend(s);
    }
    (codes, cells)
}

/// Shifted one-pass statistics of the occupied cells of one group.
fn group_stats(g: &Group<'_>) -> (Vec<u32>, Vec<CellStat>) {
    let mut codes = Vec::with_capacity(g.codes.len());
    let mut cells = Vec::with_capacity(g.codes.len());
    for (c, &code) in g.codes.iter().enumerate() {
        let range = g.starts[c]..g.starts[c + 1];
        // One pass with moments about the cell's first point (shift keeps them accurate).
        let r = g.z[range.start];
        let (mut sw, mut sx, mut sy, mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for j in range {
            let z = g.z[j];
            let w = if g.w.is_empty() {
                1.0
            } else {
                f64::from(g.w[j])
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
            continue;
        }
        let (mx, my) = (sx / sw, sy / sw);
        codes.push(code);
        cells.push(CellStat {
            w: sw,
            mx: r[0] + mx,
            my: r[1] + my,
            cxx: (sxx / sw - mx * mx).max(0.0),
            cxy: sxy / sw - mx * my,
            cyy: (syy / sw - my * my).max(0.0),
        });
    }
    (codes, cells)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::check_finite;

    /// Same statistics as a direct computation, whatever the number of threads.
    #[test]
    fn moments_match_direct_sums_for_any_thread_count() {
        let pts: Vec<[f32; 2]> = (0..60_000)
            .map(|i| {
                let t = i as f32 * 0.37;
                let r = if i % 10 == 0 { 5.0 } else { 0.05 };
                [
                    t.sin() * r * (1.0 + (i % 7) as f32),
                    (t * 1.3).cos() * 0.01 + 3.0,
                ]
            })
            .chain([[1e6, -1e6]])
            .collect();
        let w: Vec<f32> = (0..pts.len()).map(|i| (i % 5) as f32).collect();
        let std = Standardizer {
            offset: [0.0, 3.0],
            scale: [2.0, 0.01],
        };
        let geom = Geom::new(&pts, &std, 6, check_finite(&pts).unwrap());
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| cell_stats(&pts, Some(&w), &std, &geom))
        };
        let (codes, cells) = run(1);
        for t in [2, 3, 7] {
            assert_eq!(run(t), (codes.clone(), cells.clone()), "{t} threads");
        }
        assert!(codes.windows(2).all(|c| c[0] < c[1]));
        // Direct two-pass moments per cell.
        for (code, c) in codes.iter().zip(&cells) {
            let members: Vec<([f64; 2], f64)> = pts
                .iter()
                .zip(&w)
                .map(|(p, &wi)| (std.to_std(*p), f64::from(wi)))
                .filter(|(z, _)| geom.cell_of(*z) == *code)
                .collect();
            let sw: f64 = members.iter().map(|m| m.1).sum();
            let mx = members.iter().map(|m| m.1 * m.0[0]).sum::<f64>() / sw;
            let my = members.iter().map(|m| m.1 * m.0[1]).sum::<f64>() / sw;
            let cxy = members
                .iter()
                .map(|m| m.1 * (m.0[0] - mx) * (m.0[1] - my))
                .sum::<f64>()
                / sw;
            let tol = 1e-9 * (1.0 + mx.abs() + my.abs());
            assert!((c.w - sw).abs() < 1e-9 * sw, "{code}");
            assert!((c.mx - mx).abs() < tol && (c.my - my).abs() < tol, "{code}");
            assert!((c.cxy - cxy).abs() < 1e-9 * (1.0 + cxy.abs()), "{code}");
        }
        // Cells holding only zero-weight points are left out.
        let occupied = pts
            .iter()
            .zip(&w)
            .filter(|(_, wi)| **wi > 0.0)
            .map(|(p, _)| geom.cell_of(std.to_std(*p)))
            .collect::<std::collections::BTreeSet<_>>();
        assert_eq!(codes, occupied.into_iter().collect::<Vec<_>>());
    }
}
