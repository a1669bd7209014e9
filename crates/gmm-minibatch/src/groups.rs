//! Points grouped by grid cell in bounded memory: the cells (in Morton order) are cut into
//! groups of about [`GROUP_POINTS`] points; each group's points are gathered, sorted by cell
//! and handed to a callback. Groups are gathered a part (about [`PART_POINTS`] points) at a
//! time, so the extra memory is 2 bytes per point (group keys) plus one part, instead of
//! several sorted copies of the whole input.
//!
//! Everything is stable (within a cell, points keep their input order) and the cuts depend
//! only on the data, never on the thread count, so any reduction over the groups' results
//! in group order is deterministic.

use std::ops::Range;

use rayon::prelude::*;

use crate::data::{CHUNK, Standardizer};
use crate::grid::{Geom, SyncPtr};

/// At most `2^16` coarse bins, so that group numbers fit a `u16`.
const COARSE_BITS_MAX: u32 = 16;
/// Points per group (a group is cut after the coarse bin that reaches this); small in the
/// unit tests so that they exercise many groups and parts.
const GROUP_POINTS: usize = if cfg!(test) { 1 << 11 } else { 1 << 17 };
/// Points gathered per part (at least one group): 256 MiB of gathered points.
const PART_POINTS: usize = if cfg!(test) { 1 << 15 } else { 1 << 25 };
/// Most input chunks of the gather (their per-group offsets are kept).
const MAX_CHUNKS: usize = 1024;

/// The points of one group, stably sorted by cell.
pub(crate) struct Group<'a> {
    /// Occupied cells (Morton codes), ascending.
    pub codes: &'a [u32],
    /// `pts[starts[c]..starts[c + 1]]` are the points of cell `codes[c]`.
    pub starts: &'a [usize],
    /// Standardised points.
    pub z: &'a [[f64; 2]],
    /// Their positions in the group taken in input order (ascending within a cell): a
    /// callback of [`Grouping::run_in_order`] puts point `j`'s result at `src[j]`.
    pub src: &'a [u32],
    /// Their weights (empty when unweighted).
    pub w: &'a [f32],
}

/// The group of every point and the cut of the coarse bins into groups.
pub(crate) struct Grouping {
    /// Group of each point.
    keys: Vec<u16>,
    /// Input chunk length of the gather.
    chunk: usize,
    /// Points of each group in each input chunk: `counts[chunk * groups + group]`.
    counts: Vec<u32>,
    /// Codes of the first cell of each occupied coarse bin, ascending.
    pub bin_codes: Vec<u32>,
    /// Coarse bins of each group.
    groups: Vec<Range<usize>>,
    /// Points of each group.
    group_len: Vec<usize>,
    /// `code >> shift` is the coarse bin.
    shift: u32,
}

/// Gathered points (and weights) of a part, reused from part to part.
#[derive(Default)]
struct PartBuf {
    pts: Vec<[f32; 2]>,
    w: Vec<f32>,
}

/// Sort buffers of one thread.
#[derive(Default)]
struct Scratch {
    z: Vec<[f64; 2]>,
    key: Vec<u32>,
    cnt: Vec<u32>,
    order: Vec<u64>,
    codes: Vec<u32>,
    starts: Vec<usize>,
    out_z: Vec<[f64; 2]>,
    src: Vec<u32>,
    w: Vec<f32>,
}

impl Grouping {
    /// Two passes: the coarse bin of every point (and a histogram), then, once the bins are
    /// cut into groups, each point's group and the groups' counts per input chunk.
    pub(crate) fn new(points: &[[f32; 2]], std: &Standardizer, geom: &Geom) -> Self {
        let n = points.len();
        let key_bits = 2 * geom.bits;
        let coarse_bits = key_bits.min(COARSE_BITS_MAX);
        let shift = key_bits - coarse_bits;
        let nb = 1usize << coarse_bits;
        let mut keys = vec![0u16; n];
        // Integer counts: the sum is exact whatever the split.
        let hist = points
            .par_chunks(CHUNK)
            .zip(keys.par_chunks_mut(CHUNK))
            .fold(
                || vec![0u32; nb],
                |mut h, (p, k)| {
                    for (q, key) in p.iter().zip(k.iter_mut()) {
                        let b = geom.cell_of(std.to_std(*q)) >> shift;
                        *key = b as u16;
                        h[b as usize] += 1;
                    }
                    h
                },
            )
            .reduce_with(|mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
                a
            })
            .unwrap_or_else(|| vec![0; nb]);
        let mut groups = Vec::new();
        let mut group_len = Vec::new();
        // Fewer groups than bins, so group numbers fit a u16 too.
        let mut group_of = vec![0u16; nb];
        let mut bin_codes = Vec::new();
        let (mut start, mut acc) = (0usize, 0usize);
        for (b, &h) in hist.iter().enumerate() {
            if h > 0 {
                bin_codes.push((b as u32) << shift);
                group_of[b] = groups.len() as u16;
                acc += h as usize;
            }
            if acc >= GROUP_POINTS || (b + 1 == nb && acc > 0) {
                groups.push(start..b + 1);
                group_len.push(acc);
                start = b + 1;
                acc = 0;
            }
        }
        let ng = groups.len();
        let chunk = n.div_ceil(MAX_CHUNKS).max(CHUNK);
        let mut counts = vec![0u32; n.div_ceil(chunk) * ng];
        keys.par_chunks_mut(chunk)
            .zip(counts.par_chunks_mut(ng.max(1)))
            .for_each(|(k, c)| {
                for key in k {
                    *key = group_of[*key as usize];
                    c[*key as usize] += 1;
                }
            });
        Self {
            keys,
            chunk,
            counts,
            bin_codes,
            groups,
            group_len,
            shift,
        }
    }

    /// Level (quadtree side `2^level` cells) of one coarse bin.
    pub(crate) fn bin_level(&self) -> u32 {
        self.shift / 2
    }

    /// Calls `f` on every group in Morton order and returns the results in that order.
    pub(crate) fn run<R: Send + Sync>(
        &self,
        points: &[[f32; 2]],
        weights: Option<&[f32]>,
        std: &Standardizer,
        geom: &Geom,
        f: &(impl Fn(&Group<'_>) -> R + Sync),
    ) -> Vec<R> {
        self.drive(points, weights, std, geom, f, None::<&fn(&R, usize, usize)>)
    }

    /// As [`Grouping::run`], then, group by group, `put(result, k, i)` for every point in
    /// input order: `i` is its index in the input, `k` its position in its group taken in
    /// input order ([`Group::src`]). Lets per-point results be stored in input order with
    /// sequential writes instead of one cache miss per point.
    pub(crate) fn run_in_order<R: Send + Sync>(
        &self,
        points: &[[f32; 2]],
        std: &Standardizer,
        geom: &Geom,
        f: &(impl Fn(&Group<'_>) -> R + Sync),
        put: &(impl Fn(&R, usize, usize) + Sync),
    ) -> Vec<R> {
        self.drive(points, None, std, geom, f, Some(put))
    }

    fn drive<R: Send + Sync, P: Fn(&R, usize, usize) + Sync>(
        &self,
        points: &[[f32; 2]],
        weights: Option<&[f32]>,
        std: &Standardizer,
        geom: &Geom,
        f: &(impl Fn(&Group<'_>) -> R + Sync),
        put: Option<&P>,
    ) -> Vec<R> {
        let mut out = Vec::with_capacity(self.groups.len());
        let mut buf = PartBuf::default();
        let mut g0 = 0;
        while g0 < self.groups.len() {
            // A part: consecutive groups up to PART_POINTS points (at least one group).
            let mut g1 = g0 + 1;
            let mut len = self.group_len[g0];
            while g1 < self.groups.len() && len + self.group_len[g1] <= PART_POINTS {
                len += self.group_len[g1];
                g1 += 1;
            }
            out.extend(self.run_part(points, weights, std, geom, g0..g1, len, f, put, &mut buf));
            g0 = g1;
        }
        out
    }

    /// Gathers the points of groups `gs` (stable, `len` points), processes the groups and
    /// puts their per-point results.
    #[allow(clippy::too_many_arguments)]
    fn run_part<R: Send + Sync, P: Fn(&R, usize, usize) + Sync>(
        &self,
        points: &[[f32; 2]],
        weights: Option<&[f32]>,
        std: &Standardizer,
        geom: &Geom,
        gs: Range<usize>,
        len: usize,
        f: &(impl Fn(&Group<'_>) -> R + Sync),
        put: Option<&P>,
        buf: &mut PartBuf,
    ) -> Vec<R> {
        let ng = gs.len();
        let ngt = self.groups.len();
        let (lo, hi) = (gs.start as u32, gs.end as u32);
        let chunk = self.chunk;
        // Where each input chunk writes the first point of each group of the part.
        let nc = self.counts.len() / ngt;
        let mut first = vec![0u32; nc * ng];
        let mut group_base = vec![0u32; ng];
        let mut base = 0u32;
        for (g, gb) in group_base.iter_mut().enumerate() {
            *gb = base;
            for c in 0..nc {
                first[c * ng + g] = base;
                base += self.counts[c * ngt + gs.start + g];
            }
        }
        debug_assert_eq!(base as usize, len);
        // One spare slot per chunk: points of other parts are written there, which is
        // cheaper than a mispredicted branch per point.
        let spare = len;
        let nc_chunks = points.len().div_ceil(chunk);
        // Every slot that is read is written first: grow only, no clearing.
        if buf.pts.len() < len + nc_chunks {
            buf.pts.resize(len + nc_chunks, [0.0; 2]);
        }
        if weights.is_some() && buf.w.len() < len + nc_chunks {
            buf.w.resize(len + nc_chunks, 0.0);
        }
        {
            let (pp, pw) = (SyncPtr(buf.pts.as_mut_ptr()), SyncPtr(buf.w.as_mut_ptr()));
            points
                .par_chunks(chunk)
                .zip(self.keys.par_chunks(chunk))
                .zip(first.par_chunks(ng))
                .enumerate()
                .for_each(|(ci, ((p, k), first))| {
                    let (pp, pw) = (pp, pw);
                    let mut off = first.to_vec();
                    off.push((spare + ci) as u32);
                    for (j, (q, &key)) in p.iter().zip(k).enumerate() {
                        let g = u32::from(key).wrapping_sub(lo);
                        let hit = g < hi - lo;
                        let o = &mut off[if hit { g as usize } else { ng }];
                        let pos = *o as usize;
                        *o += u32::from(hit);
                        // SAFETY: the (chunk, group) offset ranges and the chunks' spare
                        // slots are disjoint and within the buffers.
                        unsafe {
                            *pp.0.add(pos) = *q;
                            if let Some(ws) = weights {
                                *pw.0.add(pos) = ws[ci * chunk + j];
                            }
                        }
                    }
                });
        }
        let (pts, w) = (
            &buf.pts[..len],
            &buf.w[..if weights.is_some() { len } else { 0 }],
        );
        let has_w = weights.is_some();
        let results: Vec<R> = gs
            .clone()
            .into_par_iter()
            .map_init(Scratch::default, |s, g| {
                let a = group_base[g - gs.start] as usize;
                let r = a..a + self.group_len[g];
                let wr = if has_w { &w[r.clone()] } else { &w[..0] };
                let bins = &self.groups[g];
                let cells = (bins.start << self.shift) as u32..(bins.end << self.shift) as u32;
                sort_group(&pts[r], wr, cells, std, geom, s);
                f(&Group {
                    codes: &s.codes,
                    starts: &s.starts,
                    z: &s.out_z,
                    src: &s.src,
                    w: &s.w,
                })
            })
            .collect();
        if let Some(put) = put {
            // Replays the gather: chunk by chunk, each point's position in its group.
            self.keys
                .par_chunks(chunk)
                .zip(first.par_chunks(ng))
                .enumerate()
                .for_each(|(ci, (k, first))| {
                    let mut off = first.to_vec();
                    for (j, &key) in k.iter().enumerate() {
                        let key = u32::from(key);
                        if key < lo || key >= hi {
                            continue;
                        }
                        let g = (key - lo) as usize;
                        let at = (off[g] - group_base[g]) as usize;
                        off[g] += 1;
                        put(&results[g], at, ci * chunk + j);
                    }
                });
        }
        results
    }
}

/// Stable sort of one group's points (all in cells `cells`) by cell, into `s`.
fn sort_group(
    pts: &[[f32; 2]],
    w: &[f32],
    cells: Range<u32>,
    std: &Standardizer,
    geom: &Geom,
    s: &mut Scratch,
) {
    let n = pts.len();
    let Scratch {
        z,
        key,
        cnt,
        order,
        codes,
        starts,
        out_z,
        src: out_s,
        w: out_w,
    } = s;
    z.clear();
    z.extend(pts.iter().map(|p| std.to_std(*p)));
    key.clear();
    key.extend(z.iter().map(|z| geom.cell_of(*z) - cells.start));
    codes.clear();
    starts.clear();
    out_z.resize(n, [0.0; 2]);
    out_s.resize(n, 0);
    out_w.resize(w.len(), 0.0);
    let mut put = |src: usize, dst: usize| {
        out_z[dst] = z[src];
        out_s[dst] = src as u32;
        if !w.is_empty() {
            out_w[dst] = w[src];
        }
    };
    let range = (cells.end - cells.start) as usize;
    if range <= 4 * n + 1024 {
        // Counting sort over the group's cell range.
        cnt.clear();
        cnt.resize(range, 0);
        for &k in key.iter() {
            cnt[k as usize] += 1;
        }
        let mut run = 0u32;
        for (c, k) in cnt.iter_mut().enumerate() {
            let m = *k;
            *k = run;
            if m > 0 {
                codes.push(cells.start + c as u32);
                starts.push(run as usize);
            }
            run += m;
        }
        for (j, &k) in key.iter().enumerate() {
            let pos = cnt[k as usize] as usize;
            cnt[k as usize] += 1;
            put(j, pos);
        }
    } else {
        // Sparse group (few points over many cells): sort (cell, position) pairs.
        order.clear();
        order.extend(
            key.iter()
                .enumerate()
                .map(|(j, &k)| (u64::from(k) << 32) | j as u64),
        );
        order.sort_unstable();
        let mut last = u32::MAX;
        for (dst, &o) in order.iter().enumerate() {
            let k = (o >> 32) as u32;
            if k != last {
                codes.push(cells.start + k);
                starts.push(dst);
                last = k;
            }
            put(o as u32 as usize, dst);
        }
    }
    starts.push(n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::check_finite;

    use std::sync::atomic::{AtomicU32, Ordering};

    /// Every point is delivered once, in its cell, stably, with cells ascending overall, and
    /// `put` maps each group position back to its input index.
    fn check(pts: &[[f32; 2]], w: Option<&[f32]>, std: &Standardizer, geom: &Geom) {
        let g = Grouping::new(pts, std, geom);
        let hits: Vec<AtomicU32> = pts.iter().map(|_| AtomicU32::new(0)).collect();
        let res = g.drive(
            pts,
            w,
            std,
            geom,
            &|gr: &Group<'_>| {
                let mut by_src = vec![([0f64; 2], 0f32); gr.z.len()];
                for (c, &code) in gr.codes.iter().enumerate() {
                    let r = geom.rect(code, 0);
                    let cell = gr.starts[c]..gr.starts[c + 1];
                    assert!(!cell.is_empty());
                    assert!(
                        gr.src[cell.clone()].windows(2).all(|p| p[0] < p[1]),
                        "stable"
                    );
                    for j in cell {
                        let z = gr.z[j];
                        assert_eq!(geom.cell_of(z), code);
                        assert!(z[0] >= r.x0 && z[0] <= r.x1 && z[1] >= r.y0 && z[1] <= r.y1);
                        let wj = if w.is_some() { gr.w[j] } else { 0.0 };
                        by_src[gr.src[j] as usize] = (z, wj);
                    }
                }
                (by_src, gr.codes.to_vec())
            },
            Some(
                &|r: &(Vec<([f64; 2], f32)>, Vec<u32>), k: usize, i: usize| {
                    assert_eq!(r.0[k].0, std.to_std(pts[i]));
                    if let Some(w) = w {
                        assert_eq!(r.0[k].1, w[i]);
                    }
                    hits[i].fetch_add(1, Ordering::Relaxed);
                },
            ),
        );
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        let codes: Vec<u32> = res.iter().flat_map(|r| r.1.iter().copied()).collect();
        assert!(codes.windows(2).all(|p| p[0] < p[1]), "Morton order");
        let mut bins: Vec<u32> = codes.iter().map(|&c| (c >> g.shift) << g.shift).collect();
        bins.dedup();
        assert_eq!(bins, g.bin_codes);
        // Without `put`, the same groups.
        let plain = g.run(pts, w, std, geom, &|gr: &Group<'_>| gr.codes.to_vec());
        assert_eq!(plain, res.into_iter().map(|r| r.1).collect::<Vec<_>>());
    }

    #[test]
    fn groups_deliver_every_point_sorted_and_stable() {
        let pts: Vec<[f32; 2]> = (0..300_000)
            .map(|i| {
                let t = i as f32 * 0.37;
                // Dense core plus a sparse halo, and exact duplicates.
                let r = if i % 10 == 0 { 5.0 } else { 0.05 };
                if i % 97 == 0 {
                    [0.25, 3.0]
                } else {
                    [
                        t.sin() * r * (1.0 + (i % 7) as f32),
                        (t * 1.3).cos() * 0.01 + 3.0,
                    ]
                }
            })
            .chain([[1e6, -1e6]])
            .collect();
        let w: Vec<f32> = (0..pts.len()).map(|i| (i % 5) as f32).collect();
        let std = Standardizer {
            offset: [0.0, 3.0],
            scale: [2.0, 0.01],
        };
        for bits in [3, 6, 10, 11] {
            let geom = Geom::new(&pts, &std, bits, check_finite(&pts).unwrap());
            check(&pts, None, &std, &geom);
            check(&pts, Some(&w), &std, &geom);
        }
        let few = &pts[..50];
        let geom = Geom::new(few, &std, 10, check_finite(few).unwrap());
        check(few, None, &std, &geom);
    }
}
