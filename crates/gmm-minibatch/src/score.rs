//! Exact scoring of points against a mixture with provable pruning: points are bucketed on
//! a fine grid, each occupied cell gets the components that are not provably negligible over
//! its rectangle (see [`crate::prune`]), and every point is evaluated against that list.

use rayon::prelude::*;

use crate::GmmError;
use crate::data::Standardizer;
use crate::em::has_avx2;
use crate::grid::{Geom, bucket};
use crate::math::{Comp, fast_exp};
use crate::prune::{Leaf, traverse};

/// What to compute per point.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Want {
    pub assign: bool,
    pub loglik: bool,
    pub topk: usize,
}

/// Outputs (empty vectors for what was not wanted).
#[derive(Debug, Default)]
pub(crate) struct Scored {
    pub assign: Vec<u32>,
    pub loglik: Vec<f64>,
    pub topk_idx: Vec<u32>,
    pub topk_resp: Vec<f32>,
    /// Sum of the per-point log-likelihoods (data units), when `loglik` or `mean` wanted.
    pub loglik_sum: f64,
}

/// Grid resolution of the scoring pass: ~6 points per cell on a square grid, 8..2048 cells.
fn score_bits(n: usize) -> u32 {
    let side = ((n as f64 / 6.0).sqrt()).max(8.0);
    (side.log2().ceil() as u32).clamp(3, 11)
}

#[derive(Default)]
struct Packed {
    mx: Vec<f64>,
    my: Vec<f64>,
    pa: Vec<f64>,
    pb2: Vec<f64>,
    pc: Vec<f64>,
    logc: Vec<f64>,
    q: Vec<f64>,
}

impl Packed {
    fn load(&mut self, cands: &[u32], comps: &[Comp]) {
        let l = cands.len();
        for v in [
            &mut self.mx,
            &mut self.my,
            &mut self.pa,
            &mut self.pb2,
            &mut self.pc,
            &mut self.logc,
            &mut self.q,
        ] {
            v.clear();
            v.resize(l, 0.0);
        }
        for (j, &k) in cands.iter().enumerate() {
            let c = &comps[k as usize];
            self.mx[j] = c.mx;
            self.my[j] = c.my;
            self.pa[j] = c.pa;
            self.pb2[j] = 2.0 * c.pb;
            self.pc[j] = c.pc;
            self.logc[j] = c.logc;
        }
    }
}

/// Fills `p.q` with the log weighted densities at `z` and returns `sum exp(q - r)`.
#[inline(always)]
fn point_body(z: [f64; 2], p: &mut Packed, r: f64) -> f64 {
    let l = p.q.len();
    let (mx, my, pa, pb2, pc, logc) = (
        &p.mx[..l],
        &p.my[..l],
        &p.pa[..l],
        &p.pb2[..l],
        &p.pc[..l],
        &p.logc[..l],
    );
    let q = &mut p.q[..l];
    let mut s4 = [0.0f64; 4];
    let mut j = 0;
    while j + 4 <= l {
        for t in 0..4 {
            let dx = z[0] - mx[j + t];
            let dy = z[1] - my[j + t];
            let v = logc[j + t] - 0.5 * (pa[j + t] * dx * dx + pb2[j + t] * dx * dy + pc[j + t] * dy * dy);
            q[j + t] = v;
            s4[t] += fast_exp(v - r);
        }
        j += 4;
    }
    let mut s = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    while j < l {
        let dx = z[0] - mx[j];
        let dy = z[1] - my[j];
        let v = logc[j] - 0.5 * (pa[j] * dx * dx + pb2[j] * dx * dy + pc[j] * dy * dy);
        q[j] = v;
        s += fast_exp(v - r);
        j += 1;
    }
    s
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn point_avx2(z: [f64; 2], p: &mut Packed, r: f64) -> f64 {
    point_body(z, p, r)
}

#[inline]
fn point(z: [f64; 2], p: &mut Packed, r: f64, avx2: bool) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: avx2 and fma are available (checked by the caller).
        return unsafe { point_avx2(z, p, r) };
    }
    let _ = avx2;
    point_body(z, p, r)
}

#[derive(Clone, Copy)]
struct Out<T>(*mut T);
// SAFETY: each point index is written by exactly one task (the buckets are a permutation).
unsafe impl<T> Send for Out<T> {}
unsafe impl<T> Sync for Out<T> {}

/// Checks that all coordinates are finite (error names the first bad index).
pub(crate) fn check_finite(points: &[[f32; 2]]) -> Result<(), GmmError> {
    if points.len() > u32::MAX as usize {
        return Err(GmmError::TooManyPoints(points.len()));
    }
    let bad = points
        .par_chunks(crate::data::CHUNK)
        .enumerate()
        .find_map_first(|(c, ch)| {
            ch.iter().enumerate().find_map(|(j, p)| {
                (0..2)
                    .find(|&a| !p[a].is_finite())
                    .map(|a| (c * crate::data::CHUNK + j, a, p[a]))
            })
        });
    match bad {
        Some((index, axis, value)) => Err(GmmError::NonFinitePoint { index, axis, value }),
        None => Ok(()),
    }
}

/// Scores `points` (already checked finite, non-empty) against `comps` (standardised by
/// `std`); per-point log-likelihoods are exact to within `eps` nats.
pub(crate) fn score(points: &[[f32; 2]], std: &Standardizer, comps: &[Comp], eps: f64, want: Want) -> Scored {
    let n = points.len();
    let geom = Geom::new(points, std, score_bits(n));
    let b = bucket(points, std, &geom);
    let log_jac = std.log_jacobian();
    let kk = want.topk.min(comps.len());
    let mut out = Scored {
        assign: if want.assign { vec![0; n] } else { Vec::new() },
        loglik: if want.loglik { vec![0.0; n] } else { Vec::new() },
        topk_idx: vec![0; n * kk],
        topk_resp: vec![0.0; n * kk],
        loglik_sum: 0.0,
    };
    let pa = Out(out.assign.as_mut_ptr());
    let pl = Out(out.loglik.as_mut_ptr());
    let pti = Out(out.topk_idx.as_mut_ptr());
    let ptr = Out(out.topk_resp.as_mut_ptr());
    let avx2 = has_avx2();
    let starts = &b.starts;
    let sums = traverse(
        &geom,
        &b.codes,
        comps,
        eps,
        0,
        &|i| starts[i],
        &|| (0.0f64, Packed::default(), Vec::<(f64, u32)>::new()),
        &|acc: &mut (f64, Packed, Vec<(f64, u32)>), leaf: Leaf<'_>| {
            let (pa, pl, pti, ptr) = (pa, pl, pti, ptr);
            let (sum, p, top) = acc;
            p.load(leaf.cands, comps);
            for c in leaf.cells.clone() {
                for &i in &b.perm[b.starts[c]..b.starts[c + 1]] {
                    let i = i as usize;
                    let z = std.to_std(points[i]);
                    let s = point(z, p, leaf.ref_ub, avx2);
                    let ll = if s > 1e-280 && s.is_finite() {
                        leaf.ref_ub + s.ln()
                    } else {
                        // Far outside every component: recentre on the true maximum.
                        let m = p.q.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v));
                        m + p.q.iter().map(|&v| (v - m).exp()).sum::<f64>().ln()
                    } + log_jac;
                    *sum += ll;
                    if want.loglik {
                        // SAFETY: i < n and each i is visited once.
                        unsafe { *pl.0.add(i) = ll };
                    }
                    if want.assign {
                        let mut best = 0;
                        for (j, &v) in p.q.iter().enumerate() {
                            if v > p.q[best] {
                                best = j;
                            }
                        }
                        // SAFETY: as above.
                        unsafe { *pa.0.add(i) = leaf.cands[best] };
                    }
                    if kk > 0 {
                        top.clear();
                        top.extend(p.q.iter().zip(leaf.cands.iter()).map(|(&v, &k)| (v, k)));
                        let m = kk.min(top.len());
                        if m < top.len() {
                            top.select_nth_unstable_by(m - 1, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                            top.truncate(m);
                        }
                        top.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                        let qmax = top[0].0;
                        let tot: f64 = top.iter().map(|t| (t.0 - qmax).exp()).sum();
                        for r in 0..kk {
                            // Padding (fewer candidates than k): best index, zero weight.
                            let (k, w) = match top.get(r) {
                                Some(t) => (t.1, ((t.0 - qmax).exp() / tot) as f32),
                                None => (top[0].1, 0.0),
                            };
                            // SAFETY: i * kk + r < n * kk, written once.
                            unsafe {
                                *pti.0.add(i * kk + r) = k;
                                *ptr.0.add(i * kk + r) = w;
                            }
                        }
                    }
                }
            }
        },
    );
    out.loglik_sum = sums.iter().map(|s| s.0).sum();
    out
}
