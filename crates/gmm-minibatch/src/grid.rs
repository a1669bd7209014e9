//! Uniform 2-D grid in the standardised space, points bucketed by a stable parallel counting
//! sort in Morton (Z-) order, so every quadtree node is a contiguous range of cells.

use rayon::prelude::*;

use crate::data::Standardizer;

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
    /// Geometry for `points` standardised by `std`: range from the `1e-4` / `1 - 1e-4`
    /// quantiles of a strided sample, padded by 2 %, clipped to the data extremes.
    pub(crate) fn new(points: &[[f32; 2]], std: &Standardizer, bits: u32) -> Self {
        let n = points.len();
        let stride = n.div_ceil(RANGE_SAMPLE).max(1);
        let sample: Vec<[f64; 2]> = points
            .iter()
            .step_by(stride)
            .map(|p| std.to_std(*p))
            .collect();
        let mut zmin = [f64::INFINITY; 2];
        let mut zmax = [f64::NEG_INFINITY; 2];
        // Exact extremes (cheap, parallel, order-independent).
        let ext = points
            .par_chunks(crate::data::CHUNK)
            .map(|c| {
                let mut mn = [f64::INFINITY; 2];
                let mut mx = [f64::NEG_INFINITY; 2];
                for p in c {
                    let z = std.to_std(*p);
                    for a in 0..2 {
                        mn[a] = mn[a].min(z[a]);
                        mx[a] = mx[a].max(z[a]);
                    }
                }
                (mn, mx)
            })
            .collect::<Vec<_>>();
        for (mn, mx) in ext {
            for a in 0..2 {
                zmin[a] = zmin[a].min(mn[a]);
                zmax[a] = zmax[a].max(mx[a]);
            }
        }
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

/// Points sorted by cell (Morton order): `pts[starts[c]..starts[c + 1]]` are the points of
/// occupied cell `codes[c]`, `idx` their original indices (ascending within a cell: the sort
/// is stable), `w` their weights when the input was weighted.
pub(crate) struct Buckets {
    pub codes: Vec<u32>,
    pub starts: Vec<usize>,
    pub pts: Vec<[f32; 2]>,
    pub idx: Vec<u32>,
    pub w: Vec<f32>,
}

#[derive(Clone, Copy)]
pub(crate) struct SyncPtr<T>(pub *mut T);
// SAFETY: used only to write disjoint indices of one buffer from several threads.
unsafe impl<T> Send for SyncPtr<T> {}
unsafe impl<T> Sync for SyncPtr<T> {}

/// Splits `v` into consecutive mutable pieces of the given lengths.
fn split_lens<'a, T>(mut v: &'a mut [T], lens: &[usize]) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(lens.len());
    for &l in lens {
        let (a, b) = v.split_at_mut(l);
        out.push(a);
        v = b;
    }
    out
}

/// Stable two-pass radix sort of the points by Morton cell: a coarse pass scatters into at
/// most 4096 sequential streams, a fine pass sorts each coarse bucket locally (in cache).
/// Cache-friendly, unlike a single scatter over millions of cells, and independent of the
/// thread count (stability fixes the order).
pub(crate) fn bucket(
    points: &[[f32; 2]],
    weights: Option<&[f32]>,
    std: &Standardizer,
    geom: &Geom,
) -> Buckets {
    let n = points.len();
    let key_bits = 2 * geom.bits;
    let coarse_bits = key_bits.min(12);
    let shift = key_bits - coarse_bits;
    let nb = 1usize << coarse_bits;
    let chunk = n.div_ceil(rayon::current_num_threads().max(1)).max(1 << 14);
    // Pass A: codes and coarse counts per chunk.
    let mut codes = vec![0u32; n];
    let mut counts: Vec<Vec<u32>> = points
        .par_chunks(chunk)
        .zip(codes.par_chunks_mut(chunk))
        .map(|(p, c)| {
            let mut cnt = vec![0u32; nb];
            for (q, code) in p.iter().zip(c.iter_mut()) {
                *code = geom.cell_of(std.to_std(*q));
                cnt[(*code >> shift) as usize] += 1;
            }
            cnt
        })
        .collect();
    let mut bucket_len = vec![0usize; nb];
    let mut running = 0u32;
    for (b, len) in bucket_len.iter_mut().enumerate() {
        let start = running;
        for cnt in counts.iter_mut() {
            let k = cnt[b];
            cnt[b] = running;
            running += k;
        }
        *len = (running - start) as usize;
    }
    let mut t_code = vec![0u32; n];
    let mut t_pts = vec![[0f32; 2]; n];
    let mut t_idx = vec![0u32; n];
    let mut t_w = vec![0f32; if weights.is_some() { n } else { 0 }];
    {
        let (pc, pp, pi, pw) = (
            SyncPtr(t_code.as_mut_ptr()),
            SyncPtr(t_pts.as_mut_ptr()),
            SyncPtr(t_idx.as_mut_ptr()),
            SyncPtr(t_w.as_mut_ptr()),
        );
        points
            .par_chunks(chunk)
            .zip(codes.par_chunks(chunk))
            .zip(counts.par_iter_mut())
            .enumerate()
            .for_each(|(ci, ((p, c), off))| {
                let (pc, pp, pi, pw) = (pc, pp, pi, pw);
                let base = ci * chunk;
                for (j, (q, &code)) in p.iter().zip(c.iter()).enumerate() {
                    let b = (code >> shift) as usize;
                    let pos = off[b] as usize;
                    off[b] += 1;
                    // SAFETY: (chunk, bucket) offset ranges are disjoint and within 0..n.
                    unsafe {
                        *pc.0.add(pos) = code;
                        *pp.0.add(pos) = *q;
                        *pi.0.add(pos) = (base + j) as u32;
                        if let Some(w) = weights {
                            *pw.0.add(pos) = w[base + j];
                        }
                    }
                }
            });
    }
    drop(codes);
    drop(counts);
    // Pass B: local counting sort of each coarse bucket by the fine bits.
    let mut pts = vec![[0f32; 2]; n];
    let mut idx = vec![0u32; n];
    let mut w = vec![0f32; t_w.len()];
    let fine = 1usize << shift;
    let wl: Vec<usize> = if weights.is_some() {
        bucket_len.clone()
    } else {
        vec![0; nb]
    };
    let occ: Vec<(Vec<u32>, Vec<usize>)> = split_lens(&mut pts, &bucket_len)
        .into_par_iter()
        .zip(split_lens(&mut idx, &bucket_len))
        .zip(split_lens(&mut w, &wl))
        .zip(split_lens(&mut t_code, &bucket_len))
        .zip(split_lens(&mut t_pts, &bucket_len))
        .zip(split_lens(&mut t_idx, &bucket_len))
        .zip(split_lens(&mut t_w, &wl))
        .enumerate()
        .map(|(b, ((((((op, oi), ow), tc), tp), ti), tw))| {
            let mut codes = Vec::new();
            let mut starts = Vec::new();
            if tc.is_empty() {
                return (codes, starts);
            }
            let base: usize = 0;
            let mut cnt = vec![0u32; fine];
            for &c in tc.iter() {
                cnt[(c as usize) & (fine - 1)] += 1;
            }
            let mut run = 0u32;
            for (f, c) in cnt.iter_mut().enumerate() {
                let k = *c;
                *c = run;
                if k > 0 {
                    codes.push(((b << shift) | f) as u32);
                    starts.push(base + run as usize);
                }
                run += k;
            }
            for j in 0..tc.len() {
                let f = (tc[j] as usize) & (fine - 1);
                let pos = cnt[f] as usize;
                cnt[f] += 1;
                op[pos] = tp[j];
                oi[pos] = ti[j];
                if !tw.is_empty() {
                    ow[pos] = tw[j];
                }
            }
            (codes, starts)
        })
        .collect();
    let mut codes = Vec::new();
    let mut starts = Vec::new();
    let mut offset = 0usize;
    for (b, (c, s)) in occ.into_iter().enumerate() {
        codes.extend(c);
        starts.extend(s.into_iter().map(|x| x + offset));
        offset += bucket_len[b];
    }
    starts.push(n);
    Buckets {
        codes,
        starts,
        pts,
        idx,
        w,
    }
}

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

    #[test]
    fn buckets_are_consistent_and_rects_contain_points() {
        let pts: Vec<[f32; 2]> = (0..5000)
            .map(|i| {
                let t = i as f32 * 0.37;
                [
                    t.sin() * (1.0 + (i % 7) as f32),
                    (t * 1.3).cos() * 0.01 + 3.0,
                ]
            })
            .chain([[1e6, -1e6]])
            .collect();
        let std = Standardizer {
            offset: [0.0, 3.0],
            scale: [2.0, 0.01],
        };
        let geom = Geom::new(&pts, &std, 6);
        let b = bucket(&pts, None, &std, &geom);
        assert_eq!(b.idx.len(), pts.len());
        let mut seen = vec![false; pts.len()];
        for (c, &code) in b.codes.iter().enumerate() {
            let r = geom.rect(code, 0);
            let idx = &b.idx[b.starts[c]..b.starts[c + 1]];
            assert!(idx.windows(2).all(|w| w[0] < w[1]), "stable");
            for (j, &i) in idx.iter().enumerate() {
                seen[i as usize] = true;
                assert_eq!(b.pts[b.starts[c] + j], pts[i as usize]);
                let z = std.to_std(pts[i as usize]);
                assert_eq!(geom.cell_of(z), code);
                assert!(z[0] >= r.x0 && z[0] <= r.x1 && z[1] >= r.y0 && z[1] <= r.y1);
            }
        }
        assert!(seen.iter().all(|&s| s));
        assert!(b.codes.windows(2).all(|w| w[0] < w[1]));
    }
}
