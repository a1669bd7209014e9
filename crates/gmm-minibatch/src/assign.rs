//! Hard assignment. Every occupied cell of a fine grid gets the components that can be the
//! largest somewhere in it ([`Cut::Argmax`](crate::prune::Cut)): on weight clouds that is
//! about one component per cell, so most points need no evaluation at all. The points are
//! then visited in input order (sequential reads and writes) and each is evaluated against
//! its cell's list only. Extra memory: one bit and one `u32` per grid cell, plus the lists.

use rayon::prelude::*;

use crate::data::{CHUNK, Extremes, Standardizer};
use crate::em::has_avx2;
use crate::grid::Geom;
use crate::math::Comp;
use crate::prune::{Leaf, Pruner, traverse};
use crate::score::score_bits;

/// Lists of a run of cells: `(code, list length)` per cell and the lists back to back.
#[derive(Default)]
struct Lists {
    cells: Vec<(u32, u32)>,
    cands: Vec<u32>,
}

/// Index of the component with the largest weighted density at each point (the lowest
/// index on ties), for points already checked finite (extremes `ext`); `comps` are
/// standardised by `std`.
pub(crate) fn assign(
    points: &[[f32; 2]],
    ext: Extremes,
    std: &Standardizer,
    comps: &[Comp],
) -> Vec<u32> {
    let n = points.len();
    let t0 = std::time::Instant::now();
    let geom = Geom::new(points, std, score_bits(n), ext);
    let ncell = 1usize << (2 * geom.bits);
    // Occupied cells as a bitmap (OR is exact, so the split does not matter).
    let occupied = points
        .par_chunks(CHUNK)
        .fold(
            || vec![0u64; ncell.div_ceil(64)],
            |mut bits, chunk| {
                for p in chunk {
                    let c = geom.cell_of(std.to_std(*p)) as usize;
                    bits[c / 64] |= 1 << (c % 64);
                }
                bits
            },
        )
        .reduce_with(|mut a, b| {
            for (x, y) in a.iter_mut().zip(b) {
                *x |= y;
            }
            a
        })
        .unwrap_or_default();
    let mut codes = Vec::new();
    for (wi, &word) in occupied.iter().enumerate() {
        let mut w = word;
        while w != 0 {
            codes.push((wi * 64) as u32 + w.trailing_zeros());
            w &= w - 1;
        }
    }
    drop(occupied);
    let pruner = Pruner::argmax(&geom, comps);
    let parts = traverse(
        &pruner,
        &codes,
        &|i| i,
        &Lists::default,
        &|acc: &mut Lists, leaf: Leaf<'_>| {
            for &code in &codes[leaf.cells] {
                acc.cells.push((code, leaf.cands.len() as u32));
                acc.cands.extend_from_slice(leaf.cands);
            }
        },
    );
    // One entry per grid cell: `SINGLE | k` when component `k` is the only candidate (most
    // cells), else an index into `multi` (start and length in `cands`).
    let mut table = vec![0u32; ncell];
    let mut multi: Vec<(u32, u32)> = Vec::new();
    let mut cands: Vec<u32> = Vec::new();
    for p in &parts {
        let mut at = 0;
        for &(code, len) in &p.cells {
            let list = &p.cands[at..at + len as usize];
            at += len as usize;
            table[code as usize] = if let [k] = list {
                SINGLE | k
            } else {
                multi.push((cands.len() as u32, len));
                cands.extend_from_slice(list);
                (multi.len() - 1) as u32
            };
        }
    }
    drop(parts);
    crate::trace(|| {
        format!(
            "assign: {} cells ({} with several candidates, {} candidates), lists at {:.3}s",
            codes.len(),
            multi.len(),
            cands.len(),
            t0.elapsed().as_secs_f64()
        )
    });
    let avx2 = has_avx2();
    let mut out = vec![0u32; n];
    out.par_chunks_mut(CHUNK)
        .zip(points.par_chunks(CHUNK))
        .for_each(|(o, p)| {
            let mut z = [[0.0; 2]; BLOCK];
            let mut e = [0u32; BLOCK];
            for (o, p) in o.chunks_mut(BLOCK).zip(p.chunks(BLOCK)) {
                // Cells first, then a tight loop of independent table look-ups (their cache
                // misses overlap), then the (rare) evaluations.
                for (j, q) in p.iter().enumerate() {
                    z[j] = std.to_std(*q);
                    e[j] = geom.cell_of(z[j]);
                }
                for e in &mut e[..p.len()] {
                    *e = table[*e as usize];
                }
                for (j, o) in o.iter_mut().enumerate() {
                    *o = if e[j] & SINGLE != 0 {
                        e[j] & !SINGLE
                    } else {
                        let (s, len) = multi[e[j] as usize];
                        let list = &cands[s as usize..(s + len) as usize];
                        list.get(best_of(z[j], list, comps, avx2))
                            .copied()
                            .unwrap_or(0)
                    };
                }
            }
        });
    crate::trace(|| format!("assign: total {:.3}s", t0.elapsed().as_secs_f64()));
    out
}

/// Flag of a single-candidate table entry.
const SINGLE: u32 = 1 << 31;
/// Points per block of table look-ups.
const BLOCK: usize = 256;

/// Position in `list` of the largest log weighted density at `z` (the first on ties), with
/// the arithmetic of the scoring kernel (so assignments agree with [`crate::score`]).
#[inline]
fn best_of(z: [f64; 2], list: &[u32], comps: &[Comp], avx2: bool) -> usize {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: avx2 and fma are available (checked by the caller).
        return unsafe { crate::simd::best_of(z, list, comps) };
    }
    let _ = avx2;
    let mut best = (f64::NEG_INFINITY, 0);
    for (j, &k) in list.iter().enumerate() {
        let c = &comps[k as usize];
        let (dx, dy) = (z[0] - c.mx, z[1] - c.my);
        let pb2 = 2.0 * c.pb;
        let v = c.logc - 0.5 * (c.pa * dx * dx + pb2 * dx * dy + c.pc * dy * dy);
        if v > best.0 {
            best = (v, j);
        }
    }
    best.1
}
