//! Explicit AVX2+FMA versions of the two hot kernels (x86_64; selected at run time). They
//! compute the same quantities as the portable versions in `score.rs` / `em.rs` (FMA changes
//! the last bits only; a given machine always takes the same path, so runs stay
//! reproducible).

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use crate::cells::CellStat;
use crate::lanes::{Lane, Packed};
use crate::math::Comp;

/// 4-wide version of [`crate::math::fast_exp`].
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp4(x: __m256d) -> __m256d {
    let x = _mm256_min_pd(
        _mm256_max_pd(x, _mm256_set1_pd(-708.0)),
        _mm256_set1_pd(709.0),
    );
    let magic = _mm256_set1_pd(6_755_399_441_055_744.0);
    let t = _mm256_fmadd_pd(x, _mm256_set1_pd(std::f64::consts::LOG2_E), magic);
    let n = _mm256_sub_pd(t, magic);
    let r = _mm256_fnmadd_pd(n, _mm256_set1_pd(0.693_147_180_369_123_8), x);
    let r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.908_214_929_270_587_7e-10), r);
    let c = |v: f64| _mm256_set1_pd(v);
    let mut p = c(1.0 / 39_916_800.0);
    for k in [
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
        1.0 / 40_320.0,
        1.0 / 5_040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = _mm256_fmadd_pd(p, r, c(k));
    }
    let bits = _mm256_slli_epi64::<52>(_mm256_add_epi64(
        _mm256_castpd_si256(t),
        _mm256_set1_epi64x(1023),
    ));
    _mm256_mul_pd(p, _mm256_castsi256_pd(bits))
}

#[inline]
#[target_feature(enable = "avx2,fma")]
fn hsum(v: __m256d) -> f64 {
    let mut a = [0.0f64; 4];
    // SAFETY: `a` holds four f64.
    unsafe { _mm256_storeu_pd(a.as_mut_ptr(), v) };
    (a[0] + a[1]) + (a[2] + a[3])
}

/// Log weighted densities of the four components of `ln` at `(zx, zy)`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn q4(zx: __m256d, zy: __m256d, half: __m256d, ln: &Lane) -> __m256d {
    // SAFETY: every load addresses a [f64; 4].
    unsafe {
        let dx = _mm256_sub_pd(zx, _mm256_loadu_pd(ln.mx.as_ptr()));
        let dy = _mm256_sub_pd(zy, _mm256_loadu_pd(ln.my.as_ptr()));
        let quad = _mm256_fmadd_pd(
            _mm256_loadu_pd(ln.pa.as_ptr()),
            _mm256_mul_pd(dx, dx),
            _mm256_fmadd_pd(
                _mm256_loadu_pd(ln.pb2.as_ptr()),
                _mm256_mul_pd(dx, dy),
                _mm256_mul_pd(_mm256_loadu_pd(ln.pc.as_ptr()), _mm256_mul_pd(dy, dy)),
            ),
        );
        _mm256_fnmadd_pd(half, quad, _mm256_loadu_pd(ln.logc.as_ptr()))
    }
}

/// Index (`4 * block + lane`) of the largest of the per-lane maxima `best` found in blocks
/// `best_j`; the lowest index on ties (each lane kept its first maximum).
#[inline]
#[target_feature(enable = "avx2,fma")]
fn first_max(best: __m256d, best_j: __m256d) -> usize {
    let mut bv = [0.0f64; 4];
    let mut bj = [0.0f64; 4];
    // SAFETY: both hold four f64.
    unsafe {
        _mm256_storeu_pd(bv.as_mut_ptr(), best);
        _mm256_storeu_pd(bj.as_mut_ptr(), best_j);
    }
    let mut arg = 0usize;
    let mut top = f64::NEG_INFINITY;
    for t in 0..4 {
        let i = 4 * bj[t] as usize + t;
        if bv[t] > top || (bv[t] == top && i < arg) {
            top = bv[t];
            arg = i;
        }
    }
    arg
}

/// Scoring kernel: the log weighted densities `q` at `z` (stored in `p.q` when `STORE`);
/// returns `sum exp(q - r)` and the index of the largest `q` (the lowest on ties).
#[target_feature(enable = "avx2,fma")]
pub(crate) fn point<const STORE: bool>(z: [f64; 2], p: &mut Packed, r: f64) -> (f64, usize) {
    let (zx, zy) = (_mm256_set1_pd(z[0]), _mm256_set1_pd(z[1]));
    let (half, rr) = (_mm256_set1_pd(0.5), _mm256_set1_pd(r));
    let one = _mm256_set1_pd(1.0);
    let mut acc = _mm256_setzero_pd();
    // Per lane: best value so far and the block holding it (strict >: first one wins).
    let mut best = _mm256_set1_pd(f64::NEG_INFINITY);
    let mut best_j = _mm256_setzero_pd();
    let mut j = _mm256_setzero_pd();
    for (ln, q) in p.lanes.iter().zip(p.q.iter_mut()) {
        // SAFETY: every load/store addresses a [f64; 4].
        unsafe {
            let v = q4(zx, zy, half, ln);
            if STORE {
                _mm256_storeu_pd(q.as_mut_ptr(), v);
            }
            let gt = _mm256_cmp_pd::<_CMP_GT_OQ>(v, best);
            best = _mm256_blendv_pd(best, v, gt);
            best_j = _mm256_blendv_pd(best_j, j, gt);
            j = _mm256_add_pd(j, one);
            acc = _mm256_add_pd(acc, exp4(_mm256_sub_pd(v, rr)));
        }
    }
    (hsum(acc), first_max(best, best_j))
}

/// Position in `list` of the largest log weighted density at `z` (the first on ties), with
/// exactly the arithmetic of [`point`] per component.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn best_of(z: [f64; 2], list: &[u32], comps: &[Comp]) -> usize {
    let mut best = (f64::NEG_INFINITY, 0);
    for (j, &k) in list.iter().enumerate() {
        let c = &comps[k as usize];
        let (dx, dy) = (z[0] - c.mx, z[1] - c.my);
        // As `q4`: fmadd(pa, dx dx, fmadd(2 pb, dx dy, pc (dy dy))), then logc - quad / 2.
        let quad =
            c.pa.mul_add(dx * dx, (2.0 * c.pb).mul_add(dx * dy, c.pc * (dy * dy)));
        let v = (-0.5f64).mul_add(quad, c.logc);
        if v > best.0 {
            best = (v, j);
        }
    }
    best.1
}

/// EM kernel: responsibilities of cell `c` accumulated into `acc` (`r * [1, x, y, xx, xy,
/// yy]`), returns `w * ln(sum_k exp(q_k))`.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn e_cell(c: &CellStat, p: &mut Packed, acc: &mut [Vec<[f64; 4]>; 6]) -> f64 {
    let (mx, my) = (_mm256_set1_pd(c.mx), _mm256_set1_pd(c.my));
    let (cxx, cxy, cyy) = (
        _mm256_set1_pd(c.cxx),
        _mm256_set1_pd(c.cxy),
        _mm256_set1_pd(c.cyy),
    );
    let half = _mm256_set1_pd(0.5);
    let mut m4 = _mm256_set1_pd(f64::NEG_INFINITY);
    for (ln, q) in p.lanes.iter().zip(p.q.iter_mut()) {
        // SAFETY: every load/store addresses a [f64; 4].
        unsafe {
            let dx = _mm256_sub_pd(mx, _mm256_loadu_pd(ln.mx.as_ptr()));
            let dy = _mm256_sub_pd(my, _mm256_loadu_pd(ln.my.as_ptr()));
            let d = _mm256_fmadd_pd(
                _mm256_loadu_pd(ln.pa.as_ptr()),
                _mm256_fmadd_pd(dx, dx, cxx),
                _mm256_fmadd_pd(
                    _mm256_loadu_pd(ln.pb2.as_ptr()),
                    _mm256_fmadd_pd(dx, dy, cxy),
                    _mm256_mul_pd(
                        _mm256_loadu_pd(ln.pc.as_ptr()),
                        _mm256_fmadd_pd(dy, dy, cyy),
                    ),
                ),
            );
            let v = _mm256_fnmadd_pd(half, d, _mm256_loadu_pd(ln.logc.as_ptr()));
            _mm256_storeu_pd(q.as_mut_ptr(), v);
            m4 = _mm256_max_pd(m4, v);
        }
    }
    let mut mm = [0.0f64; 4];
    // SAFETY: `mm` holds four f64.
    unsafe { _mm256_storeu_pd(mm.as_mut_ptr(), m4) };
    let m = mm[0].max(mm[1]).max(mm[2].max(mm[3]));
    let mv = _mm256_set1_pd(m);
    let mut s4 = _mm256_setzero_pd();
    for q in p.q.iter_mut() {
        // SAFETY: as above.
        unsafe {
            let e = exp4(_mm256_sub_pd(_mm256_loadu_pd(q.as_ptr()), mv));
            _mm256_storeu_pd(q.as_mut_ptr(), e);
            s4 = _mm256_add_pd(s4, e);
        }
    }
    let s = hsum(s4);
    let f = _mm256_set1_pd(c.w / s);
    let a = [
        _mm256_set1_pd(c.mx),
        _mm256_set1_pd(c.my),
        _mm256_set1_pd(c.cxx + c.mx * c.mx),
        _mm256_set1_pd(c.cxy + c.mx * c.my),
        _mm256_set1_pd(c.cyy + c.my * c.my),
    ];
    let [r0, r1, r2, r3, r4, r5] = acc;
    for (j, q) in p.q.iter().enumerate() {
        // SAFETY: accumulators have one [f64; 4] per lane, like `q`.
        unsafe {
            let r = _mm256_mul_pd(_mm256_loadu_pd(q.as_ptr()), f);
            let upd = |dst: &mut [f64; 4], v: __m256d| {
                _mm256_storeu_pd(
                    dst.as_mut_ptr(),
                    _mm256_add_pd(_mm256_loadu_pd(dst.as_ptr()), v),
                )
            };
            upd(&mut r0[j], r);
            upd(&mut r1[j], _mm256_mul_pd(r, a[0]));
            upd(&mut r2[j], _mm256_mul_pd(r, a[1]));
            upd(&mut r3[j], _mm256_mul_pd(r, a[2]));
            upd(&mut r4[j], _mm256_mul_pd(r, a[3]));
            upd(&mut r5[j], _mm256_mul_pd(r, a[4]));
        }
    }
    c.w * (m + s.ln())
}
