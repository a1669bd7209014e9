//! `softplus(x) = ln(1 + e^x)` and its derivative `sigmoid(x)` on host slices, vectorised.
//!
//! A Bayesian step computes `sigma = softplus(rho)` for every weight, forward and backward; on
//! burn-flex that is glibc's scalar `log1pf` and `expf` per element, which were 40 % of a
//! Bayesian MLP step (perf). Here `exp` and `ln` are Cephes' single-precision polynomials
//! (range reduction, then a degree-6 and a degree-9 polynomial, about 1 ulp), written branch-free
//! so that the loops vectorise, and compiled twice: for AVX2 + FMA, picked at run time, and for
//! the baseline target.

use rayon::prelude::*;

/// Elements per parallel task.
const CHUNK: usize = 1 << 14;

/// `e^x` for `x` in `[-87, 0]` (Cephes `expf`); the argument is clamped to that range, where
/// the result stays a normal float.
#[inline(always)]
fn exp_neg(x: f32) -> f32 {
    let x = x.clamp(-87.0, 0.0);
    // n = round(x / ln 2) by the 1.5 * 2^23 trick (no `round` call on the baseline target):
    // `shifted` is 1.5 * 2^23 + n exactly, so its bits are those of 1.5 * 2^23 plus n.
    const MAGIC: f32 = 12_582_912.0;
    let shifted = x * std::f32::consts::LOG2_E + MAGIC;
    let n = shifted - MAGIC;
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let p = ((((1.987_569_1e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 0.166_666_65)
        * r
        + 0.5;
    let p = p * r * r + r + 1.0;
    // 2^n from the integer bits of `shifted`: the low 9 bits of its bits plus 127 are n + 127
    // (in 1..=127 here), the biased exponent; the shift drops the rest. Integer ops only, and
    // wrapping: with a float-to-int cast and a checked add here (overflow checks are on in
    // the dev profile) this loop compiled to scalar code.
    p * f32::from_bits(shifted.to_bits().wrapping_add(127) << 23)
}

/// `ln(u)` for `u` in `[1, 2]` (Cephes `logf`).
#[inline(always)]
fn ln_1_2(u: f32) -> f32 {
    // u = m 2^e with m in [sqrt(1/2), sqrt(2)).
    let big = u > std::f32::consts::SQRT_2;
    let (m, e) = if big { (u * 0.5, 1.0) } else { (u, 0.0) };
    let x = m - 1.0;
    let z = x * x;
    let mut y =
        ((((((((7.037_683_6e-2 * x - 0.115_146_1) * x + 0.116_769_98) * x - 0.124_201_41) * x
            + 0.142_493_23)
            * x
            - 0.166_680_57)
            * x
            + 0.200_007_15)
            * x
            - 0.249_999_94)
            * x
            + 0.333_333_3)
            * x
            * z;
    y += -2.121_944_4e-4 * e;
    y += -0.5 * z;
    x + y + 0.693_359_4 * e
}

/// `softplus(x) = max(x, 0) + ln(1 + e^-|x|)`, with `ln(1 + t)` exact for tiny `t` (where
/// `1 + t` rounds to 1, it is `t`: `softplus(-40) = e^-40`, not 0).
#[inline(always)]
fn softplus_one(x: f32) -> f32 {
    let t = exp_neg(-x.abs());
    let u = 1.0 + t;
    let d = u - 1.0;
    let ln1p = if d == 0.0 { t } else { ln_1_2(u) * (t / d) };
    x.max(0.0) + ln1p
}

/// `sigmoid(x) = 1 / (1 + e^-x)`, for either sign of `x` without overflow.
#[inline(always)]
fn sigmoid_one(x: f32) -> f32 {
    let t = exp_neg(-x.abs());
    let s = 1.0 / (1.0 + t);
    if x >= 0.0 { s } else { t * s }
}

macro_rules! dispatch {
    ($name:ident, $plain:ident, $avx2:ident, ($($arg:ident: $ty:ty),*), $body:expr) => {
        #[inline(always)]
        fn $plain($($arg: $ty),*) {
            $body
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        fn $avx2($($arg: $ty),*) {
            $body
        }

        fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                // SAFETY: the CPU has the features the function was compiled for.
                return unsafe { $avx2($($arg),*) };
            }
            $plain($($arg),*)
        }
    };
}

dispatch!(
    softplus_chunk,
    softplus_plain,
    softplus_avx2,
    (x: &[f32], out: &mut [f32]),
    for (o, &v) in out.iter_mut().zip(x) {
        *o = softplus_one(v);
    }
);

dispatch!(
    softplus_grad_chunk,
    softplus_grad_plain,
    softplus_grad_avx2,
    (x: &[f32], dy: &[f32], out: &mut [f32]),
    for (o, (&v, &g)) in out.iter_mut().zip(x.iter().zip(dy)) {
        *o = g * sigmoid_one(v);
    }
);

/// `softplus` of every element.
pub fn softplus(x: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; x.len()];
    out.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(o, x)| softplus_chunk(x, o));
    out
}

/// The gradient of `sum(dy * softplus(x))` with respect to `x`: `dy * sigmoid(x)`.
pub fn softplus_backward(x: &[f32], dy: &[f32]) -> Vec<f32> {
    assert_eq!(x.len(), dy.len(), "softplus gradient");
    let mut out = vec![0.0f32; x.len()];
    out.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK).zip(dy.par_chunks(CHUNK)))
        .for_each(|(o, (x, g))| softplus_grad_chunk(x, g, o));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Vec<f32> {
        (-8000..8000)
            .map(|i| i as f32 * 0.01)
            .chain([-87.0, -60.0, -40.0, 40.0, 60.0, 100.0])
            .collect()
    }

    #[test]
    fn softplus_is_accurate_over_the_range_of_rho() {
        let x = grid();
        for (impl_name, y) in [
            ("dispatched", softplus(&x)),
            ("baseline", {
                let mut o = vec![0.0; x.len()];
                softplus_plain(&x, &mut o);
                o
            }),
        ] {
            for (&v, &s) in x.iter().zip(&y) {
                let want = (v as f64).exp().ln_1p();
                let want = if v > 30.0 {
                    v as f64 + (-(v as f64)).exp()
                } else {
                    want
                };
                assert!(s > 0.0, "{impl_name}: softplus({v}) = {s}");
                let rel = ((s as f64 - want) / want).abs();
                assert!(
                    rel < 4e-7,
                    "{impl_name}: softplus({v}) = {s}, want {want} (rel {rel})"
                );
            }
        }
    }

    #[test]
    fn the_scale_is_two_to_the_n_over_the_whole_range() {
        // Every exponent inside the clamp, also near the rounding boundaries between two n.
        for n in -125..=0i32 {
            for x in [
                n as f32 * std::f32::consts::LN_2,
                (n as f32 - 0.49) * std::f32::consts::LN_2,
            ] {
                let want = (x as f64).exp();
                let got = exp_neg(x) as f64;
                assert!(
                    ((got - want) / want).abs() < 3e-7,
                    "exp({x}) = {got}, want {want}"
                );
            }
        }
        assert_eq!(exp_neg(1.0), 1.0, "clamped to 0");
    }

    #[test]
    fn the_vectorised_and_the_baseline_loops_agree_bit_for_bit() {
        let x = grid();
        let dy: Vec<f32> = x.iter().map(|v| 1.0 - v * 0.003).collect();
        let (mut a, mut b) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        softplus_chunk(&x, &mut a);
        softplus_plain(&x, &mut b);
        assert!(a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()));
        softplus_grad_chunk(&x, &dy, &mut a);
        softplus_grad_plain(&x, &dy, &mut b);
        assert!(a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()));
    }

    #[test]
    fn the_gradient_is_the_sigmoid() {
        let x = grid();
        let dy: Vec<f32> = x.iter().map(|v| 1.0 + v.abs() * 0.01).collect();
        let g = softplus_backward(&x, &dy);
        for ((&v, &d), &gv) in x.iter().zip(&dy).zip(&g) {
            let want = d as f64 / (1.0 + (-(v as f64)).exp());
            let err = (gv as f64 - want).abs();
            assert!(
                err <= 4e-7 * want.abs() + 1e-37,
                "grad at {v}: {gv} vs {want}"
            );
        }
    }
}
