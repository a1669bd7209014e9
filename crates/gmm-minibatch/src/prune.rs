//! Provable spatial pruning of components over a quadtree of grid cells.
//!
//! For a rectangle `R` and component `k` with log-weight-and-normaliser `c_k` and precision
//! `P_k`, the log of its weighted density over `R` lies in `[c_k - q_max/2, c_k - q_min/2]`,
//! where `q_min`/`q_max` are the exact minimum/maximum of the Mahalanobis form over `R`
//! (maximum at a corner, convexity; minimum 0 inside, else on the boundary where each edge
//! is a clamped 1-D quadratic). With `LB = max_k (c_k - q_max/2)` a lower bound of the
//! mixture's log-density everywhere in `R`, a child keeps exactly the components with
//! `c_k - q_min/2 >= LB + ln(eps_level) - ln(L)` (`L` = parent list length), so the dropped
//! ones sum to at most `eps_level` times the density at every point of `R`. Summed over the
//! `levels` refinements of the quadtree (`eps_level = eps / levels`), the log-density from the
//! kept list is below the full one by at most `-ln(1 - eps) ~ eps` nats at every point.

use std::ops::Range;

use rayon::prelude::*;

use crate::grid::{Geom, Rect};
use crate::math::Comp;

/// Exact maximum of `d^T P d` over the rectangle (at a corner: the form is convex).
#[inline(always)]
fn quad_max(r: &Rect, c: &Comp) -> f64 {
    let dx0 = r.x0 - c.mx;
    let dx1 = r.x1 - c.mx;
    let dy0 = r.y0 - c.my;
    let dy1 = r.y1 - c.my;
    c.quad(dx0, dy0)
        .max(c.quad(dx0, dy1))
        .max(c.quad(dx1, dy0))
        .max(c.quad(dx1, dy1))
}

/// Exact minimum of `d^T P d` over the rectangle: 0 inside, else the smallest of the four
/// edge minima (each a 1-D quadratic minimised and clamped to the edge).
#[inline(always)]
fn quad_min(r: &Rect, c: &Comp) -> f64 {
    let dx0 = r.x0 - c.mx;
    let dx1 = r.x1 - c.mx;
    let dy0 = r.y0 - c.my;
    let dy1 = r.y1 - c.my;
    if dx0 <= 0.0 && dx1 >= 0.0 && dy0 <= 0.0 && dy1 >= 0.0 {
        return 0.0;
    }
    let ey = |dx: f64| c.quad(dx, (c.rx * dx).clamp(dy0, dy1));
    let ex = |dy: f64| c.quad((-c.pb * dy / c.pa).clamp(dx0, dx1), dy);
    ey(dx0).min(ey(dx1)).min(ex(dy0)).min(ex(dy1)).max(0.0)
}

/// Exact minimum and maximum of `d^T P d` over the rectangle (d = x - mean).
#[cfg(test)]
pub(crate) fn quad_bounds(r: &Rect, c: &Comp) -> (f64, f64) {
    (quad_min(r, c), quad_max(r, c))
}

/// Filters `parent` to the components that are not provably negligible over `r`; returns the
/// largest upper bound `c_k - q_min/2` of the kept ones (a reference for `exp`).
///
/// Cheap first: the upper bound uses `q_min >= lambda_min(P) * dist(mean, R)^2`, and the
/// lower bound `LB` is only refined by components whose upper bound exceeds it (a max over
/// any subset is still a valid lower bound). Survivors of the cheap test are re-checked with
/// the exact `q_min`.
pub(crate) fn filter(
    r: &Rect,
    parent: &[u32],
    comps: &[Comp],
    ln_eps_level: f64,
    out: &mut Vec<u32>,
    ub: &mut Vec<f64>,
) -> f64 {
    ub.clear();
    let mut lb = f64::NEG_INFINITY;
    for &k in parent {
        let c = &comps[k as usize];
        let ex = (r.x0 - c.mx).max(c.mx - r.x1).max(0.0);
        let ey = (r.y0 - c.my).max(c.my - r.y1).max(0.0);
        let u = c.logc - 0.5 * c.lmin * (ex * ex + ey * ey);
        ub.push(u);
        if u > lb {
            lb = lb.max(c.logc - 0.5 * quad_max(r, c));
        }
    }
    let thr = lb + ln_eps_level - (parent.len().max(1) as f64).ln();
    out.clear();
    let mut best = f64::NEG_INFINITY;
    for (&k, &u) in parent.iter().zip(ub.iter()) {
        if u >= thr {
            let c = &comps[k as usize];
            let exact = c.logc - 0.5 * quad_min(r, c);
            if exact >= thr {
                out.push(k);
                best = best.max(exact);
            }
        }
    }
    best
}

/// A leaf of the traversal: occupied cells `cells` (indices into the code list) under one
/// node, with the components that are not provably negligible there.
pub(crate) struct Leaf<'a> {
    pub cells: Range<usize>,
    pub cands: &'a [u32],
    /// Upper bound of every kept component's log weighted density over the node.
    pub ref_ub: f64,
}

/// A task node: first code, level, cells, filtered list, reference bound.
type Task = (u32, u32, Range<usize>, Vec<u32>, f64);

struct Ctx<'a> {
    geom: &'a Geom,
    codes: &'a [u32],
    comps: &'a [Comp],
    ln_eps: f64,
    leaf_s: u32,
}

struct Scratch {
    bufs: Vec<Vec<u32>>,
    ub: Vec<f64>,
}

/// Lists are re-filtered every `FILTER_STRIDE` quadtree levels (each filtering level
/// halves the node side twice), which halves the bound evaluations at little cost.
const FILTER_STRIDE: u32 = 2;

/// Fixed number of task groups (independent of the thread count, for determinism).
const GROUPS: usize = 64;

impl Ctx<'_> {
    #[allow(clippy::too_many_arguments)]
    fn descend<A>(
        &self,
        code0: u32,
        s: u32,
        cells: Range<usize>,
        parent: &[u32],
        parent_ref: f64,
        st: &mut Scratch,
        acc: &mut A,
        visit: &(impl Fn(&mut A, Leaf<'_>) + Sync),
    ) {
        if !(s - self.leaf_s).is_multiple_of(FILTER_STRIDE) {
            // Not a filtering level: the parent's list and reference stay valid here.
            self.after_filter(code0, s, cells, parent, parent_ref, st, acc, visit);
            return;
        }
        let rect = self.geom.rect(code0, s);
        let mut kept = std::mem::take(&mut st.bufs[s as usize]);
        let ref_ub = filter(
            &rect,
            parent,
            self.comps,
            self.ln_eps,
            &mut kept,
            &mut st.ub,
        );
        self.after_filter(code0, s, cells, &kept, ref_ub, st, acc, visit);
        st.bufs[s as usize] = kept;
    }

    #[allow(clippy::too_many_arguments)]
    fn after_filter<A>(
        &self,
        code0: u32,
        s: u32,
        cells: Range<usize>,
        kept: &[u32],
        ref_ub: f64,
        st: &mut Scratch,
        acc: &mut A,
        visit: &(impl Fn(&mut A, Leaf<'_>) + Sync),
    ) {
        if s == self.leaf_s || kept.is_empty() {
            visit(
                acc,
                Leaf {
                    cells,
                    cands: kept,
                    ref_ub,
                },
            );
            return;
        }
        let span = 1u32 << (2 * (s - 1));
        let mut a = cells.start;
        for ch in 0..4 {
            let c1 = code0 + (ch + 1) * span;
            let b = a + self.codes[a..cells.end].partition_point(|&c| c < c1);
            if b > a {
                self.descend(code0 + ch * span, s - 1, a..b, kept, ref_ub, st, acc, visit);
            }
            a = b;
        }
    }

    /// Depth-first down to level `s_task`, collecting task nodes with their filtered lists.
    #[allow(clippy::too_many_arguments)]
    fn collect(
        &self,
        code0: u32,
        s: u32,
        s_task: u32,
        cells: Range<usize>,
        parent: &[u32],
        st: &mut Scratch,
        out: &mut Vec<Task>,
    ) {
        let rect = self.geom.rect(code0, s);
        let mut kept = Vec::new();
        let ref_ub = filter(
            &rect,
            parent,
            self.comps,
            self.ln_eps,
            &mut kept,
            &mut st.ub,
        );
        if s == s_task || kept.is_empty() {
            out.push((code0, s, cells, kept, ref_ub));
            return;
        }
        let span = 1u32 << (2 * (s - 1));
        let mut a = cells.start;
        for ch in 0..4 {
            let c1 = code0 + (ch + 1) * span;
            let b = a + self.codes[a..cells.end].partition_point(|&c| c < c1);
            if b > a {
                self.collect(code0 + ch * span, s - 1, s_task, a..b, &kept, st, out);
            }
            a = b;
        }
    }
}

/// Visits every occupied cell once, grouped in leaves of side `2^leaf_s` cells, with the
/// components that are not provably negligible there (total omitted relative density at most
/// `eps` at every point). Work is split into a fixed set of groups balanced by `cost_prefix`
/// (`cost_prefix(i)` = cost of cells `0..i`); each group folds into its own accumulator from
/// `init`, and the accumulators are returned in group order, so any reduction over them is
/// deterministic.
#[allow(clippy::too_many_arguments)]
pub(crate) fn traverse<A: Send>(
    geom: &Geom,
    codes: &[u32],
    comps: &[Comp],
    eps: f64,
    leaf_s: u32,
    cost_prefix: &(impl Fn(usize) -> usize + Sync),
    init: &(impl Fn() -> A + Sync),
    visit: &(impl Fn(&mut A, Leaf<'_>) + Sync),
) -> Vec<A> {
    if codes.is_empty() {
        return Vec::new();
    }
    // Filtering levels: the collection levels above the tasks filter every level, the rest
    // every FILTER_STRIDE levels; count them all (upper bound) for the error budget.
    let levels = geom.bits - leaf_s + 1;
    let ctx = Ctx {
        geom,
        codes,
        comps,
        ln_eps: (eps / f64::from(levels)).ln(),
        leaf_s,
    };
    let all: Vec<u32> = (0..comps.len() as u32).collect();
    let s_task = leaf_s.max(geom.bits.saturating_sub(5));
    let mut st = Scratch {
        bufs: vec![Vec::new(); geom.bits as usize + 1],
        ub: Vec::new(),
    };
    let mut tasks = Vec::new();
    ctx.collect(
        0,
        geom.bits,
        s_task,
        0..codes.len(),
        &all,
        &mut st,
        &mut tasks,
    );
    // Group consecutive tasks to about equal cost.
    let total = cost_prefix(codes.len()).max(1);
    let mut groups: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    for (t, task) in tasks.iter().enumerate() {
        let done = cost_prefix(task.2.end);
        let target = total * (groups.len() + 1) / GROUPS;
        if done >= target || t + 1 == tasks.len() {
            groups.push(start..t + 1);
            start = t + 1;
        }
    }
    groups
        .par_iter()
        .map(|g| {
            let mut acc = init();
            let mut st = Scratch {
                bufs: vec![Vec::new(); geom.bits as usize + 1],
                ub: Vec::new(),
            };
            for (code0, s, cells, kept, ref_ub) in &tasks[g.clone()] {
                ctx.after_filter(
                    *code0,
                    *s,
                    cells.clone(),
                    kept,
                    *ref_ub,
                    &mut st,
                    &mut acc,
                    visit,
                );
            }
            acc
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::Comp;

    fn brute(r: &Rect, c: &Comp) -> (f64, f64) {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        let n = 300;
        for i in 0..=n {
            for j in 0..=n {
                let x = r.x0 + (r.x1 - r.x0) * i as f64 / n as f64;
                let y = r.y0 + (r.y1 - r.y0) * j as f64 / n as f64;
                let q = c.quad(x - c.mx, y - c.my);
                lo = lo.min(q);
                hi = hi.max(q);
            }
        }
        (lo, hi)
    }

    #[test]
    fn bounds_match_brute_force() {
        let r = Rect {
            x0: -0.3,
            x1: 0.5,
            y0: 1.0,
            y1: 1.4,
        };
        for (mx, my, cov) in [
            (0.0, 0.0, [1.0, 0.9, 1.0]),
            (0.1, 1.2, [0.5, -0.2, 0.3]),
            (2.0, -1.0, [0.01, 0.0, 4.0]),
            (-1.0, 3.0, [2.0, -1.9, 2.0]),
            (1.5, -0.5, [1.35, 0.1, 0.01]),
            (-2.0, 2.5, [0.02, -0.1, 3.0]),
        ] {
            let c = Comp::new(1.0, [mx, my], cov).unwrap();
            let (lo, hi) = quad_bounds(&r, &c);
            let (blo, bhi) = brute(&r, &c);
            assert!(
                lo <= blo + 1e-12 && blo - lo < 1e-3 * (1.0 + blo),
                "{lo} vs {blo}"
            );
            assert!(
                hi >= bhi - 1e-12 && hi - bhi < 1e-9 * (1.0 + bhi),
                "{hi} vs {bhi}"
            );
        }
    }
}
