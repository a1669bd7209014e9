//! 8-bit affine quantisation of the outliers' `mu` and `rho` (optional, lossy).
//!
//! Each vector is quantised as a whole: with `lo = min(x)` and `hi = max(x)`, the value `x` is
//! stored as the code `q = round((x - lo) / s)` in `0..=255`, where `s = (hi - lo) / 255`, and
//! restored as `lo + q * s` (computed in `f64`, rounded to `f32`).
//!
//! **Error bound.** Every restored value is within `(hi - lo) / 510` of the original (half a
//! quantisation step), plus one `f32` rounding of the result, i.e.
//! `|x - x'| <= (hi - lo) / 510 + max(|lo|, |hi|) * f32::EPSILON`
//! ([`QuantizedU8::error_bound`]). `lo` and `hi` themselves are restored exactly. For `rho` the
//! error carries over to `sigma = softplus(rho)` damped by `sigmoid(rho) < 1`, so the sigma
//! error obeys the same bound.

use serde::{Deserialize, Serialize};

/// Number of quantisation steps between the smallest and the largest value.
const STEPS: f64 = 255.0;

/// A vector quantised to one byte per value (affine, per vector).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuantizedU8 {
    /// Smallest original value (restored exactly by code 0).
    pub lo: f32,
    /// Largest original value (restored exactly by code 255 up to `f32` rounding).
    pub hi: f32,
    /// One code per value.
    pub codes: Vec<u8>,
}

impl QuantizedU8 {
    /// Quantises `values`; fails (naming the first offender) if a value is NaN or infinite.
    pub fn quantize(values: &[f32]) -> Result<Self, String> {
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(format!(
                "value {i} is {} and cannot be quantised to 8 bits",
                values[i]
            ));
        }
        let lo = values.iter().copied().fold(f32::INFINITY, f32::min);
        let hi = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if values.is_empty() {
            return Ok(Self {
                lo: 0.0,
                hi: 0.0,
                codes: Vec::new(),
            });
        }
        let step = step(lo, hi);
        let codes = values
            .iter()
            .map(|&x| {
                if step == 0.0 {
                    0
                } else {
                    ((f64::from(x) - f64::from(lo)) / step)
                        .round()
                        .clamp(0.0, STEPS) as u8
                }
            })
            .collect();
        Ok(Self { lo, hi, codes })
    }

    /// Restores the values (see the module docs for the error bound).
    pub fn dequantize(&self) -> Vec<f32> {
        let step = step(self.lo, self.hi);
        self.codes
            .iter()
            .map(|&q| (f64::from(self.lo) + f64::from(q) * step) as f32)
            .collect()
    }

    /// The largest possible `|x - dequantize(quantize(x))|` for this vector.
    pub fn error_bound(&self) -> f32 {
        let half_step = step(self.lo, self.hi) / 2.0;
        let max_abs = self.lo.abs().max(self.hi.abs());
        (half_step * (1.0 + 1e-9)) as f32 + max_abs * f32::EPSILON
    }

    /// Checks that a decoded header is usable: finite `lo <= hi`.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.lo.is_finite() && self.hi.is_finite() && self.lo <= self.hi {
            Ok(())
        } else {
            Err(format!("bad quantisation range [{}, {}]", self.lo, self.hi))
        }
    }
}

fn step(lo: f32, hi: f32) -> f64 {
    (f64::from(hi) - f64::from(lo)) / STEPS
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn extremes_are_exact_and_constant_vectors_lossless() {
        let q = QuantizedU8::quantize(&[-0.5, 0.1, 2.0]).unwrap();
        let back = q.dequantize();
        assert_eq!(back[0], -0.5);
        assert_eq!(back[2], 2.0);
        assert!((back[1] - 0.1).abs() <= 2.5 / 510.0 + 1e-6);
        let c = QuantizedU8::quantize(&[3.25; 4]).unwrap();
        assert_eq!(c.dequantize(), vec![3.25; 4]);
        assert!(QuantizedU8::quantize(&[]).unwrap().dequantize().is_empty());
    }

    #[test]
    fn non_finite_values_are_rejected() {
        assert!(QuantizedU8::quantize(&[1.0, f32::NAN]).is_err());
        assert!(QuantizedU8::quantize(&[f32::INFINITY]).is_err());
    }

    proptest! {
        #[test]
        fn round_trip_within_documented_bound(
            values in prop::collection::vec(-1e6f32..1e6f32, 0..200),
            scale in prop::sample::select(vec![1e-6f32, 1e-3, 1.0, 1e3]),
        ) {
            let values: Vec<f32> = values.iter().map(|v| v * scale).collect();
            let q = QuantizedU8::quantize(&values).unwrap();
            let bound = q.error_bound();
            // The documented bound, computed independently of the implementation's step.
            let (lo, hi) = (q.lo, q.hi);
            let documented = (hi - lo) / 510.0 * (1.0 + 1e-6) + lo.abs().max(hi.abs()) * f32::EPSILON;
            prop_assert!(bound <= documented);
            for (x, y) in values.iter().zip(q.dequantize()) {
                prop_assert!((x - y).abs() <= bound, "x={} y={} bound={}", x, y, bound);
            }
        }
    }
}
