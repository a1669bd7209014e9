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

/// What a pruned list must keep.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cut {
    /// Every component whose weighted density can exceed `e^ln_eps / L` times the mixture's
    /// somewhere in the node (`L` = parent list length): the dropped ones sum to at most
    /// `e^ln_eps` times the mixture density at every point (a union bound; used by EM).
    Density { ln_eps: f64 },
    /// As [`Cut::Density`] with the dropped bounds summed exactly: the components below
    /// `e^ln_eps / (2L)` go (at most half the budget), then the smallest of the rest while
    /// their bounds sum to at most the other half. Keeps fewer components.
    Sum { ln_eps: f64 },
    /// Every component that can be the largest somewhere in the node: one whose upper bound
    /// is below another's lower bound never is.
    Argmax,
}

/// Safety margin (nats) of [`Cut::Argmax`] against rounding in the bounds and the kernel.
const ARGMAX_MARGIN: f64 = 1e-7;

/// Buffers of [`filter`].
#[derive(Default)]
pub(crate) struct FilterBufs {
    ub: Vec<f64>,
    near: Vec<(f64, u32)>,
}

/// Filters `parent` to the components that are not provably negligible over `r` (see
/// [`Cut`]); returns the largest upper bound `c_k - q_min/2` of the kept ones (a reference
/// for `exp`).
///
/// Cheap first: the upper bound uses `q_min >= lambda_min(P) * dist(mean, R)^2`, and the
/// lower bound `LB` is only refined by components whose upper bound exceeds it (a max over
/// any subset is still a valid lower bound). Survivors of the cheap test are re-checked with
/// the exact `q_min`.
pub(crate) fn filter(
    r: &Rect,
    parent: &[u32],
    comps: &[Comp],
    cut: Cut,
    out: &mut Vec<u32>,
    bufs: &mut FilterBufs,
) -> f64 {
    let ub = &mut bufs.ub;
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
    let ln_l = (parent.len().max(1) as f64).ln();
    let thr = match cut {
        Cut::Density { ln_eps } => lb + ln_eps - ln_l,
        Cut::Sum { ln_eps } => lb + ln_eps - ln_l - std::f64::consts::LN_2,
        Cut::Argmax => lb - ARGMAX_MARGIN * (1.0 + lb.abs()),
    };
    // Exact upper bounds of the survivors of the cheap test; NaN marks a dropped one.
    for (&k, u) in parent.iter().zip(ub.iter_mut()) {
        if *u >= thr {
            let c = &comps[k as usize];
            *u = c.logc - 0.5 * quad_min(r, c);
        }
        if !(*u >= thr) {
            *u = f64::NAN;
        }
    }
    if let Cut::Sum { ln_eps } = cut {
        // Half the budget went to the components below `thr`; drop the smallest of the rest
        // while their bounds (relative to LB) sum to at most the other half.
        let half = 0.5 * ln_eps.exp();
        let top = lb + ln_eps - std::f64::consts::LN_2;
        let near = &mut bufs.near;
        near.clear();
        near.extend(
            ub.iter()
                .enumerate()
                .filter(|(_, u)| **u < top)
                .map(|(j, &u)| (u, j as u32)),
        );
        near.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut spent = 0.0;
        for &(u, j) in near.iter() {
            spent += (u - lb).exp();
            if spent > half {
                break;
            }
            ub[j as usize] = f64::NAN;
        }
    }
    out.clear();
    let mut best = f64::NEG_INFINITY;
    for (&k, &u) in parent.iter().zip(ub.iter()) {
        if !u.is_nan() {
            out.push(k);
            best = best.max(u);
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

/// A node at the task level (or above, if its list emptied) with its filtered list.
pub(crate) struct Task {
    code0: u32,
    s: u32,
    /// Cells of the code list the tasks were collected from, under this node.
    cells: Range<usize>,
    kept: Vec<u32>,
    ref_ub: f64,
}

impl Task {
    /// One past the node's last cell code.
    fn end(&self) -> u64 {
        u64::from(self.code0) + (1u64 << (2 * self.s))
    }
}

/// Quadtree pruning of one mixture over one grid.
pub(crate) struct Pruner<'a> {
    geom: &'a Geom,
    comps: &'a [Comp],
    /// Cuts at the leaf level and above it.
    leaf_cut: Cut,
    inner_cut: Cut,
    leaf_s: u32,
}

struct Scratch {
    bufs: Vec<Vec<u32>>,
    filter: FilterBufs,
}

impl Scratch {
    fn new(bits: u32) -> Self {
        Self {
            bufs: vec![Vec::new(); bits as usize + 1],
            filter: FilterBufs::default(),
        }
    }
}

/// Lists are re-filtered every `FILTER_STRIDE` quadtree levels (each filtering level
/// halves the node side twice), which halves the bound evaluations at little cost.
const FILTER_STRIDE: u32 = 2;

/// Fixed number of task groups (independent of the thread count, for determinism).
const GROUPS: usize = 64;

impl<'a> Pruner<'a> {
    /// EM's pruning of `comps` over `geom`'s quadtree down to leaves of side `2^leaf_s`
    /// cells ([`Cut::Density`], the budget `eps` split evenly over the levels).
    pub(crate) fn em(geom: &'a Geom, comps: &'a [Comp], eps: f64, leaf_s: u32) -> Self {
        // Filtering levels: the collection levels above the tasks filter every level, the
        // rest every FILTER_STRIDE levels; count them all (upper bound) for the error budget.
        let levels = geom.bits - leaf_s + 1;
        let cut = Cut::Density {
            ln_eps: (eps / f64::from(levels)).ln(),
        };
        Self {
            geom,
            comps,
            leaf_cut: cut,
            inner_cut: cut,
            leaf_s,
        }
    }

    /// Scoring's pruning down to single cells, omitting at most a relative density `eps`
    /// at every point ([`Cut::Sum`]): half the budget for the leaves, whose lists are the
    /// ones evaluated, half shared by the (at most `bits`) filtering levels above them.
    pub(crate) fn density(geom: &'a Geom, comps: &'a [Comp], eps: f64) -> Self {
        let inner = f64::from(geom.bits.max(1));
        Self {
            geom,
            comps,
            leaf_cut: Cut::Sum {
                ln_eps: (0.5 * eps).ln(),
            },
            inner_cut: Cut::Sum {
                ln_eps: (0.5 * eps / inner).ln(),
            },
            leaf_s: 0,
        }
    }

    /// Pruning that keeps, for every point, the component of largest weighted density
    /// (and every component tied with it); leaves are single cells.
    pub(crate) fn argmax(geom: &'a Geom, comps: &'a [Comp]) -> Self {
        Self {
            geom,
            comps,
            leaf_cut: Cut::Argmax,
            inner_cut: Cut::Argmax,
            leaf_s: 0,
        }
    }

    /// The cut of the filter at level `s`.
    fn cut_at(&self, s: u32) -> Cut {
        if s == self.leaf_s {
            self.leaf_cut
        } else {
            self.inner_cut
        }
    }

    /// Level of the task nodes: side `2^level` cells.
    pub(crate) fn task_level(&self) -> u32 {
        self.leaf_s.max(self.geom.bits.saturating_sub(5))
    }

    /// Filters the lists from the root down to the task level, over the nodes holding
    /// `codes` (ascending cell codes). The tasks come in Morton order.
    pub(crate) fn tasks(&self, codes: &[u32]) -> Vec<Task> {
        let mut tasks = Vec::new();
        if codes.is_empty() {
            return tasks;
        }
        let all: Vec<u32> = (0..self.comps.len() as u32).collect();
        let mut st = Scratch::new(self.geom.bits);
        self.collect(
            codes,
            0,
            self.geom.bits,
            0..codes.len(),
            &all,
            &mut st,
            &mut tasks,
        );
        tasks
    }

    /// Visits every cell of `codes` (ascending, all under nodes of `tasks`) once, in leaves
    /// of side `2^leaf_s`, with the components not provably negligible there.
    pub(crate) fn visit<A>(
        &self,
        tasks: &[Task],
        codes: &[u32],
        acc: &mut A,
        visit: &impl Fn(&mut A, Leaf<'_>),
    ) {
        let (Some(&first), Some(&last)) = (codes.first(), codes.last()) else {
            return;
        };
        let mut st = Scratch::new(self.geom.bits);
        let t0 = tasks.partition_point(|t| t.end() <= u64::from(first));
        let mut a = 0;
        for t in &tasks[t0..] {
            if t.code0 > last {
                break;
            }
            let b = a + codes[a..].partition_point(|&c| u64::from(c) < t.end());
            if b > a {
                self.after_filter(
                    codes,
                    t.code0,
                    t.s,
                    a..b,
                    &t.kept,
                    t.ref_ub,
                    &mut st,
                    acc,
                    visit,
                );
            }
            a = b;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn descend<A>(
        &self,
        codes: &[u32],
        code0: u32,
        s: u32,
        cells: Range<usize>,
        parent: &[u32],
        parent_ref: f64,
        st: &mut Scratch,
        acc: &mut A,
        visit: &impl Fn(&mut A, Leaf<'_>),
    ) {
        if !(s - self.leaf_s).is_multiple_of(FILTER_STRIDE) {
            // Not a filtering level: the parent's list and reference stay valid here.
            self.after_filter(codes, code0, s, cells, parent, parent_ref, st, acc, visit);
            return;
        }
        let rect = self.geom.rect(code0, s);
        let mut kept = std::mem::take(&mut st.bufs[s as usize]);
        let ref_ub = filter(
            &rect,
            parent,
            self.comps,
            self.cut_at(s),
            &mut kept,
            &mut st.filter,
        );
        self.after_filter(codes, code0, s, cells, &kept, ref_ub, st, acc, visit);
        st.bufs[s as usize] = kept;
    }

    #[allow(clippy::too_many_arguments)]
    fn after_filter<A>(
        &self,
        codes: &[u32],
        code0: u32,
        s: u32,
        cells: Range<usize>,
        kept: &[u32],
        ref_ub: f64,
        st: &mut Scratch,
        acc: &mut A,
        visit: &impl Fn(&mut A, Leaf<'_>),
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
            let b = a + codes[a..cells.end].partition_point(|&c| c < c1);
            if b > a {
                self.descend(
                    codes,
                    code0 + ch * span,
                    s - 1,
                    a..b,
                    kept,
                    ref_ub,
                    st,
                    acc,
                    visit,
                );
            }
            a = b;
        }
    }

    /// Depth-first down to the task level, collecting task nodes with their filtered lists.
    #[allow(clippy::too_many_arguments)]
    fn collect(
        &self,
        codes: &[u32],
        code0: u32,
        s: u32,
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
            self.cut_at(s),
            &mut kept,
            &mut st.filter,
        );
        if s == self.task_level() || kept.is_empty() {
            out.push(Task {
                code0,
                s,
                cells,
                kept,
                ref_ub,
            });
            return;
        }
        let span = 1u32 << (2 * (s - 1));
        let mut a = cells.start;
        for ch in 0..4 {
            let c1 = code0 + (ch + 1) * span;
            let b = a + codes[a..cells.end].partition_point(|&c| c < c1);
            if b > a {
                self.collect(codes, code0 + ch * span, s - 1, a..b, &kept, st, out);
            }
            a = b;
        }
    }
}

/// Visits every occupied cell once, grouped in leaves of side `2^leaf_s` cells, with the
/// components `pruner` keeps there. Work is split into a fixed set of groups balanced by
/// `cost_prefix` (`cost_prefix(i)` = cost of cells `0..i`); each group folds into its own
/// accumulator from `init`, and the accumulators are returned in group order, so any
/// reduction over them is deterministic.
pub(crate) fn traverse<A: Send>(
    pruner: &Pruner<'_>,
    codes: &[u32],
    cost_prefix: &(impl Fn(usize) -> usize + Sync),
    init: &(impl Fn() -> A + Sync),
    visit: &(impl Fn(&mut A, Leaf<'_>) + Sync),
) -> Vec<A> {
    let tasks = pruner.tasks(codes);
    if tasks.is_empty() {
        return Vec::new();
    }
    // Group consecutive tasks to about equal cost.
    let total = cost_prefix(codes.len()).max(1);
    let mut groups: Vec<Range<usize>> = Vec::new();
    let mut start = 0;
    for (t, task) in tasks.iter().enumerate() {
        let done = cost_prefix(task.cells.end);
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
            let mut st = Scratch::new(pruner.geom.bits);
            for t in &tasks[g.clone()] {
                pruner.after_filter(
                    codes,
                    t.code0,
                    t.s,
                    t.cells.clone(),
                    &t.kept,
                    t.ref_ub,
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
