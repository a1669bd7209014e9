//! Uniform 2-D grid in the standardised space with cells numbered in Morton (Z-) order, so
//! every quadtree node is a contiguous range of cell codes.

use crate::data::{Extremes, Standardizer};

/// `x` with a zero bit inserted above each of its low 16 bits.
#[inline(always)]
pub(crate) fn part1by1(x: u32) -> u32 {
    let mut x = x & 0xffff;
    x = (x | (x << 8)) & 0x00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f;
    x = (x | (x << 2)) & 0x3333_3333;
    x = (x | (x << 1)) & 0x5555_5555;
    x
}

/// Inverse of [`part1by1`] (takes the even bits).
#[inline(always)]
pub(crate) fn compact1by1(x: u32) -> u32 {
    let mut x = x & 0x5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333;
    x = (x | (x >> 2)) & 0x0f0f_0f0f;
    x = (x | (x >> 4)) & 0x00ff_00ff;
    x = (x | (x >> 8)) & 0x0000_ffff;
    x
}

/// Axis-aligned rectangle in the standardised space.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rect {
    pub x0: f64,
    pub x1: f64,
    pub y0: f64,
    pub y1: f64,
}

/// Grid geometry: `G = 2^bits` cells per axis over `[lo, lo + G w]`; points outside fall in
/// the border cells, whose rectangles are widened to the data extremes `zmin`/`zmax`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geom {
    pub bits: u32,
    pub lo: [f64; 2],
    pub w: [f64; 2],
    pub inv_w: [f64; 2],
    pub zmin: [f64; 2],
    pub zmax: [f64; 2],
}

/// Quantile of the robust range (each side) and its relative padding.
const RANGE_Q: f64 = 1e-4;
const RANGE_PAD: f64 = 0.02;
const RANGE_SAMPLE: usize = 1 << 16;

impl Geom {
    /// Geometry for `points` standardised by `std`, whose raw extremes are `ext`: range from
    /// the `1e-4` / `1 - 1e-4` quantiles of a strided sample, padded by 2 %, clipped to the
    /// data extremes.
    pub(crate) fn new(points: &[[f32; 2]], std: &Standardizer, bits: u32, ext: Extremes) -> Self {
        let n = points.len();
        let stride = n.div_ceil(RANGE_SAMPLE).max(1);
        let sample: Vec<[f64; 2]> = points
            .iter()
            .step_by(stride)
            .map(|p| std.to_std(*p))
            .collect();
        // Standardising is monotone per axis, so the extremes map exactly.
        let (a, b) = (std.to_std(ext.min), std.to_std(ext.max));
        let zmin = [a[0].min(b[0]), a[1].min(b[1])];
        let zmax = [a[0].max(b[0]), a[1].max(b[1])];
        let g = f64::from(1u32 << bits);
        let mut lo = [0.0; 2];
        let mut w = [0.0; 2];
        for a in 0..2 {
            let mut v: Vec<f64> = sample.iter().map(|z| z[a]).collect();
            v.sort_by(f64::total_cmp);
            let m = v.len();
            let i0 = ((RANGE_Q * m as f64).floor() as usize).min(m - 1);
            let i1 = (((1.0 - RANGE_Q) * m as f64).ceil() as usize).clamp(1, m) - 1;
            let (q0, q1) = (v[i0], v[i1.max(i0)]);
            let pad = RANGE_PAD * (q1 - q0);
            let (mut a0, mut a1) = ((q0 - pad).max(zmin[a]), (q1 + pad).min(zmax[a]));
            if !(a1 - a0 > 1e-9 * (1.0 + a0.abs())) {
                // Degenerate axis: a unit-wide range around the value.
                a0 = zmin[a] - 0.5;
                a1 = a0 + 1.0;
            }
            lo[a] = a0;
            w[a] = (a1 - a0) / g;
        }
        Self {
            bits,
            lo,
            w,
            inv_w: [1.0 / w[0], 1.0 / w[1]],
            zmin,
            zmax,
        }
    }

    /// Cells per axis.
    #[inline(always)]
    pub(crate) fn side(&self) -> u32 {
        1 << self.bits
    }

    /// Morton code of the cell holding standardised point `z`.
    #[inline(always)]
    pub(crate) fn cell_of(&self, z: [f64; 2]) -> u32 {
        let last = self.side() - 1;
        // `as u32` saturates: negative -> 0; the min clamps the top.
        let ix = (((z[0] - self.lo[0]) * self.inv_w[0]) as u32).min(last);
        let iy = (((z[1] - self.lo[1]) * self.inv_w[1]) as u32).min(last);
        part1by1(ix) | (part1by1(iy) << 1)
    }

    /// Rectangle of the quadtree node whose first cell has code `code0` and side `2^s` cells;
    /// padded so that rounding in [`Geom::cell_of`] can never put a point outside it.
    pub(crate) fn rect(&self, code0: u32, s: u32) -> Rect {
        let side = 1u32 << s;
        let ix = compact1by1(code0);
        let iy = compact1by1(code0 >> 1);
        let edge = |a: usize, i: u32| -> (f64, f64) {
            let mut l = self.lo[a] + f64::from(i) * self.w[a];
            let mut h = self.lo[a] + f64::from(i + side) * self.w[a];
            if i == 0 {
                l = l.min(self.zmin[a]);
            }
            if i + side >= self.side() {
                h = h.max(self.zmax[a]);
            }
            let pad = 1e-9 * self.w[a] + 1e-12 * (l.abs() + h.abs());
            (l - pad, h + pad)
        };
        let (x0, x1) = edge(0, ix);
        let (y0, y1) = edge(1, iy);
        Rect { x0, x1, y0, y1 }
    }
}

#[derive(Clone, Copy)]
pub(crate) struct SyncPtr<T>(pub *mut T);
// SAFETY: used only to write disjoint indices of one buffer from several threads.
unsafe impl<T> Send for SyncPtr<T> {}
unsafe impl<T> Sync for SyncPtr<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn morton_round_trip() {
        for (x, y) in [(0u32, 0u32), (5, 9), (1023, 1), (4095, 4095)] {
            let c = part1by1(x) | (part1by1(y) << 1);
            assert_eq!((compact1by1(c), compact1by1(c >> 1)), (x, y));
        }
    }
}
