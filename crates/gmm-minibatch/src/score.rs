//! Exact scoring of points against a mixture with provable pruning: points are bucketed on
//! a fine grid, each occupied cell gets the components that are not provably negligible over
//! its rectangle (see [`crate::prune`]), and every point is evaluated against that list.

use rayon::prelude::*;

use crate::GmmError;
use crate::data::Standardizer;
use crate::em::has_avx2;
use crate::grid::{Geom, bucket};
use crate::lanes::Packed;
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

/// Fills `p.q` with the log weighted densities at `z` and returns `sum exp(q - r)`.
#[inline(always)]
fn point_body(z: [f64; 2], p: &mut Packed, r: f64) -> f64 {
    let mut s4 = [0.0f64; 4];
    for (ln, q) in p.lanes.iter().zip(p.q.iter_mut()) {
        for t in 0..4 {
            let dx = z[0] - ln.mx[t];
            let dy = z[1] - ln.my[t];
            let v =
                ln.logc[t] - 0.5 * (ln.pa[t] * dx * dx + ln.pb2[t] * dx * dy + ln.pc[t] * dy * dy);
            q[t] = v;
            s4[t] += fast_exp(v - r);
        }
    }
    (s4[0] + s4[1]) + (s4[2] + s4[3])
}

#[inline]
fn point(z: [f64; 2], p: &mut Packed, r: f64, avx2: bool) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: avx2 and fma are available (checked by the caller).
        return unsafe { crate::simd::point(z, p, r) };
    }
    let _ = avx2;
    point_body(z, p, r)
}

#[derive(Clone, Copy)]
struct Out<T>(*mut T);
// SAFETY: each point index is written by exactly one task (the buckets are a permutation).
unsafe impl<T> Send for Out<T> {}
unsafe impl<T> Sync for Out<T> {}

/// `out[idx[j]] = v[j]` for rows of `width` values (empty stays empty).
fn unpermute<T: Copy + Default + Send + Sync>(idx: &[u32], v: Vec<T>, width: usize) -> Vec<T> {
    if v.is_empty() || width == 0 {
        return v;
    }
    let mut out = vec![T::default(); v.len()];
    let po = Out(out.as_mut_ptr());
    v.par_chunks(width * 4096)
        .zip(idx.par_chunks(4096))
        .for_each(|(vc, ic)| {
            // Capture the whole Send/Sync wrapper, not its raw-pointer field.
            #[allow(clippy::redundant_locals)]
            let po = po;
            for (row, &i) in vc.chunks_exact(width).zip(ic) {
                for (t, &x) in row.iter().enumerate() {
                    // SAFETY: idx is a permutation of 0..n, so rows are written once.
                    unsafe { *po.0.add(i as usize * width + t) = x };
                }
            }
        });
    out
}

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
pub(crate) fn score(
    points: &[[f32; 2]],
    std: &Standardizer,
    comps: &[Comp],
    eps: f64,
    want: Want,
) -> Scored {
    let n = points.len();
    let t0 = std::time::Instant::now();
    let geom = Geom::new(points, std, score_bits(n));
    let b = bucket(points, None, std, &geom);
    crate::trace(|| {
        format!(
            "score: bucket {:.3}s, {} cells",
            t0.elapsed().as_secs_f64(),
            b.codes.len()
        )
    });
    let log_jac = std.log_jacobian();
    let kk = want.topk.min(comps.len());
    // Results in sorted (cell) order first: sequential writes; un-permuted at the end.
    let mut out = Scored {
        assign: if want.assign { vec![0; n] } else { Vec::new() },
        loglik: if want.loglik {
            vec![0.0; n]
        } else {
            Vec::new()
        },
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
        &|| (0.0f64, Packed::default(), Vec::<(f64, u32)>::new(), 0usize),
        &|acc: &mut (f64, Packed, Vec<(f64, u32)>, usize), leaf: Leaf<'_>| {
            let (pa, pl, pti, ptr) = (pa, pl, pti, ptr);
            let (sum, p, top, evals) = acc;
            *evals += leaf.cands.len() * (b.starts[leaf.cells.end] - b.starts[leaf.cells.start]);
            p.load(leaf.cands, comps);
            for c in leaf.cells.clone() {
                for i in b.starts[c]..b.starts[c + 1] {
                    let z = std.to_std(b.pts[i]);
                    let s = point(z, p, leaf.ref_ub, avx2);
                    let ll = if s > 1e-280 && s.is_finite() {
                        leaf.ref_ub + s.ln()
                    } else {
                        // Far outside every component: recentre on the true maximum.
                        let m = p.q().iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v));
                        m + p.q().iter().map(|&v| (v - m).exp()).sum::<f64>().ln()
                    } + log_jac;
                    *sum += ll;
                    if want.loglik {
                        // SAFETY: i < n and each i is visited once.
                        unsafe { *pl.0.add(i) = ll };
                    }
                    if want.assign {
                        let q = p.q();
                        let mut best = 0;
                        for (j, &v) in q.iter().enumerate() {
                            if v > q[best] {
                                best = j;
                            }
                        }
                        // SAFETY: as above.
                        unsafe { *pa.0.add(i) = leaf.cands[best] };
                    }
                    if kk > 0 {
                        top.clear();
                        top.extend(p.q().iter().zip(leaf.cands.iter()).map(|(&v, &k)| (v, k)));
                        let m = kk.min(top.len());
                        if m < top.len() {
                            top.select_nth_unstable_by(m - 1, |a, b| {
                                b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
                            });
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
    let t1 = std::time::Instant::now();
    out.assign = unpermute(&b.idx, out.assign, 1);
    out.loglik = unpermute(&b.idx, out.loglik, 1);
    out.topk_idx = unpermute(&b.idx, out.topk_idx, kk);
    out.topk_resp = unpermute(&b.idx, out.topk_resp, kk);
    crate::trace(|| format!("score: unpermute {:.3}s", t1.elapsed().as_secs_f64()));
    crate::trace(|| {
        let ev: usize = sums.iter().map(|s| s.3).sum();
        format!(
            "score: total {:.3}s, {:.1} components per point",
            t0.elapsed().as_secs_f64(),
            ev as f64 / n as f64
        )
    });
    out
}
