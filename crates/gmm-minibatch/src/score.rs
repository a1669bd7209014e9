//! Exact scoring of points against a mixture with provable pruning: points are bucketed on
//! a fine grid, each occupied cell gets the components that are not provably negligible over
//! its rectangle (see [`crate::prune`]), and every point is evaluated against that list.

use crate::data::{Extremes, Standardizer};
use crate::em::has_avx2;
use crate::grid::{Geom, SyncPtr};
use crate::groups::{Group, Grouping};
use crate::lanes::Packed;
use crate::math::{Comp, fast_exp};
use crate::prune::{Leaf, Pruner};

/// What to compute per point (the sum of the log-likelihoods always).
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
    /// Sum of the per-point log-likelihoods (data units).
    pub loglik_sum: f64,
}

/// Grid resolution of the scoring pass: ~6 points per cell on a square grid, 8..2048 cells.
pub(crate) fn score_bits(n: usize) -> u32 {
    let side = ((n as f64 / 6.0).sqrt()).max(8.0);
    (side.log2().ceil() as u32).clamp(3, 11)
}

/// Log weighted densities at `z` into `p.q`; returns `sum exp(q - r)` and the index of
/// the largest `q` (the lowest on ties).
#[inline(always)]
fn point_body(z: [f64; 2], p: &mut Packed, r: f64) -> (f64, usize) {
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
    let q = p.q();
    let mut best = 0;
    for (j, &v) in q.iter().enumerate() {
        if v > q[best] {
            best = j;
        }
    }
    ((s4[0] + s4[1]) + (s4[2] + s4[3]), best)
}

/// [`point_body`] on the fastest path; `p.q` is only filled when `STORE` (always on the
/// portable path).
#[inline]
fn point<const STORE: bool>(z: [f64; 2], p: &mut Packed, r: f64, avx2: bool) -> (f64, usize) {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: avx2 and fma are available (checked by the caller).
        return unsafe { crate::simd::point::<STORE>(z, p, r) };
    }
    let _ = avx2;
    point_body(z, p, r)
}

/// Per-group scratch and results; per-point results in the group's input order.
#[derive(Default)]
struct Acc {
    sum: f64,
    evals: usize,
    p: Packed,
    top: Vec<(f64, u32)>,
    assign: Vec<u32>,
    loglik: Vec<f64>,
    topk_idx: Vec<u32>,
    topk_resp: Vec<f32>,
}

/// Scores `points` (already checked finite, non-empty, with extremes `ext`) against `comps`
/// (standardised by `std`); per-point log-likelihoods are exact to within `eps` nats.
pub(crate) fn score(
    points: &[[f32; 2]],
    ext: Extremes,
    std: &Standardizer,
    comps: &[Comp],
    eps: f64,
    want: Want,
) -> Scored {
    let n = points.len();
    let t0 = std::time::Instant::now();
    let geom = Geom::new(points, std, score_bits(n), ext);
    crate::trace(|| "score: geom".into());
    let grouping = Grouping::new(points, std, &geom);
    crate::trace(|| "score: keys".into());
    let kk = want.topk.min(comps.len());
    let pruner = Pruner::density(&geom, comps, eps);
    debug_assert!(pruner.task_level() >= grouping.bin_level());
    let tasks = pruner.tasks(&grouping.bin_codes);
    crate::trace(|| {
        format!(
            "score: keys and top lists {:.3}s, {} coarse bins",
            t0.elapsed().as_secs_f64(),
            grouping.bin_codes.len()
        )
    });
    let log_jac = std.log_jacobian();
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
    let pa = SyncPtr(out.assign.as_mut_ptr());
    let pl = SyncPtr(out.loglik.as_mut_ptr());
    let pti = SyncPtr(out.topk_idx.as_mut_ptr());
    let ptr = SyncPtr(out.topk_resp.as_mut_ptr());
    let avx2 = has_avx2();
    let score_group = |g: &Group<'_>| {
        let m = g.z.len();
        let mut acc = Acc {
            assign: if want.assign { vec![0; m] } else { Vec::new() },
            loglik: if want.loglik {
                vec![0.0; m]
            } else {
                Vec::new()
            },
            topk_idx: vec![0; m * kk],
            topk_resp: vec![0.0; m * kk],
            ..Acc::default()
        };
        pruner.visit(
            &tasks,
            g.codes,
            &mut acc,
            &|acc: &mut Acc, leaf: Leaf<'_>| {
                let pts = g.starts[leaf.cells.start]..g.starts[leaf.cells.end];
                acc.evals += leaf.cands.len() * pts.len();
                acc.p.load(leaf.cands, comps);
                for j in pts {
                    let i = g.src[j] as usize;
                    let z = g.z[j];
                    let p = &mut acc.p;
                    let (s, best) = if kk > 0 {
                        point::<true>(z, p, leaf.ref_ub, avx2)
                    } else {
                        point::<false>(z, p, leaf.ref_ub, avx2)
                    };
                    let ll = if s > 1e-280 && s.is_finite() {
                        leaf.ref_ub + s.ln()
                    } else {
                        // Far outside every component: recentre on the true maximum.
                        if kk == 0 {
                            let _ = point::<true>(z, p, leaf.ref_ub, avx2);
                        }
                        let m = p.q().iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v));
                        m + p.q().iter().map(|&v| (v - m).exp()).sum::<f64>().ln()
                    } + log_jac;
                    acc.sum += ll;
                    if want.loglik {
                        acc.loglik[i] = ll;
                    }
                    if want.assign {
                        acc.assign[i] = leaf.cands.get(best).copied().unwrap_or(0);
                    }
                    if kk > 0 {
                        let top = &mut acc.top;
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
                            acc.topk_idx[i * kk + r] = k;
                            acc.topk_resp[i * kk + r] = w;
                        }
                    }
                }
            },
        );
        acc.p = Packed::default();
        acc.top = Vec::new();
        acc
    };
    let put = |acc: &Acc, k: usize, i: usize| {
        let (pa, pl, pti, ptr) = (pa, pl, pti, ptr);
        // SAFETY: i < n and every point is put once.
        unsafe {
            if want.assign {
                *pa.0.add(i) = acc.assign[k];
            }
            if want.loglik {
                *pl.0.add(i) = acc.loglik[k];
            }
            for r in 0..kk {
                *pti.0.add(i * kk + r) = acc.topk_idx[k * kk + r];
                *ptr.0.add(i * kk + r) = acc.topk_resp[k * kk + r];
            }
        }
    };
    let sums = grouping.run_in_order(points, std, &geom, &score_group, &put);
    out.loglik_sum = sums.iter().map(|s| s.sum).sum();
    crate::trace(|| {
        let ev: usize = sums.iter().map(|s| s.evals).sum();
        format!(
            "score: total {:.3}s, {:.1} components per point",
            t0.elapsed().as_secs_f64(),
            ev as f64 / n as f64
        )
    });
    out
}
