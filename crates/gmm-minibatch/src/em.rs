//! EM on the cell summaries: each cell is treated as a blob with its exact weight, mean and
//! covariance. The E-step uses the expected log-density over the blob,
//! `E[ln N_k(x)] = c_k - (d^T P_k d + tr(P_k C_cell)) / 2`, i.e. variational EM on the
//! Jensen lower bound of the cell's log-likelihood (tight as cells shrink); the M-step uses
//! the exact cell moments, so a component can never be narrower than the data it explains.

use std::ops::Range;

use rayon::prelude::*;

use crate::cells::CellStat;
use crate::grid::Geom;
use crate::lanes::Packed;
use crate::math::{Comp, fast_exp};
use crate::mixture::Stat;
use crate::prune::{Leaf, Pruner, traverse};

/// Leaves of the EM traversal are `2^EM_LEAF_S` cells wide (cells are then evaluated against
/// the leaf's list: pruning every single cell would cost as much as evaluating it).
const EM_LEAF_S: u32 = 2;

/// Candidate lists of one task group: `cells[i]` uses `cands[offs[i]..offs[i + 1]]`.
#[derive(Default)]
pub(crate) struct LeafLists {
    pub(crate) cells: Vec<Range<usize>>,
    offs: Vec<usize>,
    pub(crate) cands: Vec<u32>,
}

/// Builds the pruned candidate lists for the current components.
pub(crate) fn leaf_lists(geom: &Geom, codes: &[u32], comps: &[Comp], eps: f64) -> Vec<LeafLists> {
    let pruner = Pruner::em(geom, comps, eps, EM_LEAF_S.min(geom.bits));
    traverse(
        &pruner,
        codes,
        &|i| i,
        &|| LeafLists {
            offs: vec![0],
            ..Default::default()
        },
        &|acc: &mut LeafLists, leaf: Leaf<'_>| {
            acc.cells.push(leaf.cells);
            acc.cands.extend_from_slice(leaf.cands);
            acc.offs.push(acc.cands.len());
        },
    )
}

/// Result of one E-pass.
pub(crate) struct EPass {
    pub stats: Vec<Stat>,
    /// `sum_c w_c * bound_c` over the visited cells (standardised space).
    pub objective: f64,
    /// Weight of the visited cells.
    pub weight: f64,
}

/// Packed candidates plus per-candidate accumulators of `r * [1, x, y, xx, xy, yy]`.
#[derive(Default)]
struct EmPacked {
    p: Packed,
    acc: [Vec<[f64; 4]>; 6],
}

impl EmPacked {
    fn load(&mut self, cands: &[u32], comps: &[Comp]) {
        self.p.load(cands, comps);
        for a in &mut self.acc {
            a.clear();
            a.resize(self.p.lanes.len(), [0.0; 4]);
        }
    }
}

/// E-step of one cell against the packed list; adds its responsibilities times its moments
/// to the accumulators and returns `w * ln(sum_k exp(q_k))`.
#[inline(always)]
fn e_cell_body(c: &CellStat, e: &mut EmPacked) -> f64 {
    let p = &mut e.p;
    let mut m4 = [f64::NEG_INFINITY; 4];
    for (ln, q) in p.lanes.iter().zip(p.q.iter_mut()) {
        for t in 0..4 {
            let dx = c.mx - ln.mx[t];
            let dy = c.my - ln.my[t];
            let d = ln.pa[t] * (dx * dx + c.cxx)
                + ln.pb2[t] * (dx * dy + c.cxy)
                + ln.pc[t] * (dy * dy + c.cyy);
            let v = ln.logc[t] - 0.5 * d;
            q[t] = v;
            m4[t] = if v > m4[t] { v } else { m4[t] };
        }
    }
    let m = m4[0].max(m4[1]).max(m4[2].max(m4[3]));
    let mut s4 = [0.0f64; 4];
    for q in p.q.iter_mut() {
        for t in 0..4 {
            q[t] = fast_exp(q[t] - m);
            s4[t] += q[t];
        }
    }
    let s = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    let f = c.w / s;
    let a = [
        1.0,
        c.mx,
        c.my,
        c.cxx + c.mx * c.mx,
        c.cxy + c.mx * c.my,
        c.cyy + c.my * c.my,
    ];
    let [r0, r1, r2, r3, r4, r5] = &mut e.acc;
    for (j, q) in p.q.iter().enumerate() {
        let (r0, r1, r2, r3, r4, r5) = (
            &mut r0[j], &mut r1[j], &mut r2[j], &mut r3[j], &mut r4[j], &mut r5[j],
        );
        for t in 0..4 {
            let r = q[t] * f;
            r0[t] += r * a[0];
            r1[t] += r * a[1];
            r2[t] += r * a[2];
            r3[t] += r * a[3];
            r4[t] += r * a[4];
            r5[t] += r * a[5];
        }
    }
    c.w * (m + s.ln())
}

#[inline]
fn e_cell(c: &CellStat, p: &mut EmPacked, avx2: bool) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: the CPU supports avx2 and fma (checked by the caller).
        return unsafe { crate::simd::e_cell(c, &mut p.p, &mut p.acc) };
    }
    let _ = avx2;
    e_cell_body(c, p)
}

/// Whether the AVX2+FMA kernels can run on this CPU.
pub(crate) fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// E-pass over the cells accepted by `keep` (all when `None`), reusing `lists`.
pub(crate) fn e_pass(
    lists: &[LeafLists],
    cells: &[CellStat],
    comps: &[Comp],
    keep: Option<&(dyn Fn(usize) -> bool + Sync)>,
) -> EPass {
    let k = comps.len();
    let avx2 = has_avx2();
    let parts: Vec<EPass> = lists
        .par_iter()
        .map(|ll| {
            let mut out = EPass {
                stats: vec![[0.0; 6]; k],
                objective: 0.0,
                weight: 0.0,
            };
            let mut p = EmPacked::default();
            for (i, range) in ll.cells.iter().enumerate() {
                let cands = &ll.cands[ll.offs[i]..ll.offs[i + 1]];
                if cands.is_empty() {
                    continue;
                }
                let mut loaded = false;
                for ci in range.clone() {
                    if let Some(f) = keep
                        && !f(ci)
                    {
                        continue;
                    }
                    if !loaded {
                        p.load(cands, comps);
                        loaded = true;
                    }
                    out.objective += e_cell(&cells[ci], &mut p, avx2);
                    out.weight += cells[ci].w;
                }
                if loaded {
                    for (j, &kk) in cands.iter().enumerate() {
                        let s = &mut out.stats[kk as usize];
                        for (t, a) in p.acc.iter().enumerate() {
                            s[t] += a[j / 4][j % 4];
                        }
                    }
                }
            }
            out
        })
        .collect();
    let mut tot = EPass {
        stats: vec![[0.0; 6]; k],
        objective: 0.0,
        weight: 0.0,
    };
    for p in parts {
        tot.objective += p.objective;
        tot.weight += p.weight;
        for (a, b) in tot.stats.iter_mut().zip(p.stats.iter()) {
            for t in 0..6 {
                a[t] += b[t];
            }
        }
    }
    tot
}
