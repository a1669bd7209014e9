//! EM on the cell summaries: each cell is treated as a blob with its exact weight, mean and
//! covariance. The E-step uses the expected log-density over the blob,
//! `E[ln N_k(x)] = c_k - (d^T P_k d + tr(P_k C_cell)) / 2`, i.e. variational EM on the
//! Jensen lower bound of the cell's log-likelihood (tight as cells shrink); the M-step uses
//! the exact cell moments, so a component can never be narrower than the data it explains.

use std::ops::Range;

use rayon::prelude::*;

use crate::cells::CellStat;
use crate::grid::Geom;
use crate::math::{Comp, fast_exp};
use crate::mixture::Stat;
use crate::prune::{Leaf, traverse};

/// Leaves of the EM traversal are `2^EM_LEAF_S` cells wide (cells are then evaluated against
/// the leaf's list: pruning every single cell would cost as much as evaluating it).
const EM_LEAF_S: u32 = 2;

/// Candidate lists of one task group: `cells[i]` uses `cands[offs[i]..offs[i + 1]]`.
#[derive(Default)]
pub(crate) struct LeafLists {
    cells: Vec<Range<usize>>,
    offs: Vec<usize>,
    cands: Vec<u32>,
}

/// Builds the pruned candidate lists for the current components.
pub(crate) fn leaf_lists(geom: &Geom, codes: &[u32], comps: &[Comp], eps: f64) -> Vec<LeafLists> {
    let leaf_s = EM_LEAF_S.min(geom.bits);
    traverse(
        geom,
        codes,
        comps,
        eps,
        leaf_s,
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

#[derive(Default)]
struct Packed {
    mx: Vec<f64>,
    my: Vec<f64>,
    pa: Vec<f64>,
    pb2: Vec<f64>,
    pc: Vec<f64>,
    logc: Vec<f64>,
    q: Vec<f64>,
    acc: [Vec<f64>; 6],
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
        for a in &mut self.acc {
            a.clear();
            a.resize(l, 0.0);
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

/// E-step of one cell against the packed list; adds its responsibilities times its moments
/// to `p.acc` and returns `w * ln(sum_k exp(q_k))`.
#[inline(always)]
fn e_cell_body(c: &CellStat, p: &mut Packed) -> f64 {
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
    for j in 0..l {
        let dx = c.mx - mx[j];
        let dy = c.my - my[j];
        let e = pa[j] * (dx * dx + c.cxx) + pb2[j] * (dx * dy + c.cxy) + pc[j] * (dy * dy + c.cyy);
        q[j] = logc[j] - 0.5 * e;
    }
    let mut m4 = [f64::NEG_INFINITY; 4];
    let mut chunks = q.chunks_exact(4);
    for ch in &mut chunks {
        for t in 0..4 {
            m4[t] = if ch[t] > m4[t] { ch[t] } else { m4[t] };
        }
    }
    let mut m = m4[0].max(m4[1]).max(m4[2].max(m4[3]));
    for &v in chunks.remainder() {
        m = m.max(v);
    }
    let mut s4 = [0.0f64; 4];
    let mut chunks = q.chunks_exact_mut(4);
    for ch in &mut chunks {
        for t in 0..4 {
            ch[t] = fast_exp(ch[t] - m);
            s4[t] += ch[t];
        }
    }
    let mut s = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    for v in chunks.into_remainder() {
        *v = fast_exp(*v - m);
        s += *v;
    }
    let f = c.w / s;
    let (a1, a2) = (c.mx, c.my);
    let (a3, a4, a5) = (c.cxx + c.mx * c.mx, c.cxy + c.mx * c.my, c.cyy + c.my * c.my);
    let [r0, r1, r2, r3, r4, r5] = &mut p.acc;
    let (r0, r1, r2, r3, r4, r5) = (
        &mut r0[..l],
        &mut r1[..l],
        &mut r2[..l],
        &mut r3[..l],
        &mut r4[..l],
        &mut r5[..l],
    );
    for j in 0..l {
        let r = q[j] * f;
        r0[j] += r;
        r1[j] += r * a1;
        r2[j] += r * a2;
        r3[j] += r * a3;
        r4[j] += r * a4;
        r5[j] += r * a5;
    }
    c.w * (m + s.ln())
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn e_cell_avx2(c: &CellStat, p: &mut Packed) -> f64 {
    e_cell_body(c, p)
}

#[inline]
fn e_cell(c: &CellStat, p: &mut Packed, avx2: bool) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: the CPU supports avx2 and fma (checked by the caller).
        return unsafe { e_cell_avx2(c, p) };
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
            let mut p = Packed::default();
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
                            s[t] += a[j];
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
