//! Input validation, weighted summary statistics and the standardising transform.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::GmmError;

/// Fixed chunk length of deterministic parallel reductions over points.
pub(crate) const CHUNK: usize = 1 << 16;

/// Affine map between the data space and the standardised space the fit runs in:
/// `z = (x - offset) / scale` per axis (axis 0 = mu, axis 1 = sigma).
///
/// A density in the standardised space converts to the data space by adding
/// [`Standardizer::log_jacobian`] `= -ln(scale_0 * scale_1)` to its log.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Standardizer {
    /// Subtracted first (the weighted mean of the data).
    pub offset: [f64; 2],
    /// Divided by next (the weighted standard deviation; 1 for a zero-variance axis).
    pub scale: [f64; 2],
}

impl Standardizer {
    /// Standardised coordinates of a point.
    #[inline(always)]
    pub fn to_std(&self, p: [f32; 2]) -> [f64; 2] {
        [
            (f64::from(p[0]) - self.offset[0]) / self.scale[0],
            (f64::from(p[1]) - self.offset[1]) / self.scale[1],
        ]
    }

    /// `-ln(scale_0 * scale_1)`: add to a standardised log-density to get the data-space one.
    pub fn log_jacobian(&self) -> f64 {
        -(self.scale[0].ln() + self.scale[1].ln())
    }

    /// Builds from a mean and a variance per axis; a zero (or non-finite) variance gives
    /// scale 1 so that a degenerate axis is left in its own units.
    pub(crate) fn from_moments(mean: [f64; 2], var: [f64; 2]) -> Self {
        let s = |v: f64, m: f64| {
            let sd = v.max(0.0).sqrt();
            // Variance at the rounding level of the values counts as zero.
            if sd.is_finite() && sd > 1e-12 * m.abs().max(f64::MIN_POSITIVE) && sd > 0.0 {
                sd
            } else {
                1.0
            }
        };
        Self {
            offset: mean,
            scale: [s(var[0], mean[0]), s(var[1], mean[1])],
        }
    }
}

/// Smallest and largest coordinate per axis of (finite) points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Extremes {
    pub min: [f32; 2],
    pub max: [f32; 2],
}

impl Extremes {
    const EMPTY: Self = Self {
        min: [f32::INFINITY; 2],
        max: [f32::NEG_INFINITY; 2],
    };

    fn add(&mut self, p: [f32; 2]) {
        self.min = [self.min[0].min(p[0]), self.min[1].min(p[1])];
        self.max = [self.max[0].max(p[0]), self.max[1].max(p[1])];
    }

    fn merge(&mut self, o: &Self) {
        self.add(o.min);
        self.add(o.max);
    }
}

/// Checks that all coordinates are finite (the error names the first bad index) and returns
/// their extremes.
pub(crate) fn check_finite(points: &[[f32; 2]]) -> Result<Extremes, GmmError> {
    if points.len() > u32::MAX as usize {
        return Err(GmmError::TooManyPoints(points.len()));
    }
    let parts: Vec<Result<Extremes, GmmError>> = points
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(c, ch)| {
            let mut e = Extremes::EMPTY;
            let mut finite = true;
            for p in ch {
                // `min`/`max` skip NaN, so finiteness is checked on its own.
                finite &= p[0].is_finite() & p[1].is_finite();
                e.add(*p);
            }
            let bad = (!finite)
                .then(|| {
                    ch.iter().enumerate().find_map(|(j, p)| {
                        (0..2)
                            .find(|&a| !p[a].is_finite())
                            .map(|a| (c * CHUNK + j, a, p[a]))
                    })
                })
                .flatten();
            match bad {
                Some((index, axis, value)) => Err(GmmError::NonFinitePoint { index, axis, value }),
                None => Ok(e),
            }
        })
        .collect();
    // In chunk order, so that the error names the first bad index.
    let mut ext = Extremes::EMPTY;
    for part in parts {
        ext.merge(&part?);
    }
    Ok(ext)
}

/// Weighted summary of validated input.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Summary {
    /// Total weight.
    pub total_w: f64,
    pub mean: [f64; 2],
    pub var: [f64; 2],
    pub ext: Extremes,
}

#[derive(Clone, Copy)]
struct Partial {
    bad_point: Option<(usize, usize, f32)>,
    bad_weight: Option<(usize, f32)>,
    n_pos: usize,
    sw: f64,
    s1: [f64; 2],
    s2: [f64; 2],
    min: [f64; 2],
    max: [f64; 2],
}

/// Validates points (finite) and weights (length, finite, >= 0, not all zero) and computes
/// the weighted moments. Errors name the first offending index.
pub(crate) fn summarize(points: &[[f32; 2]], weights: Option<&[f32]>) -> Result<Summary, GmmError> {
    let n = points.len();
    if n == 0 {
        return Err(GmmError::EmptyInput);
    }
    if n > u32::MAX as usize {
        return Err(GmmError::TooManyPoints(n));
    }
    if let Some(w) = weights
        && w.len() != n
    {
        return Err(GmmError::WeightLength {
            weights: w.len(),
            points: n,
        });
    }
    // Shift by a reference point to keep the variance accurate for offset data.
    let r = [
        f64::from(points[0][0]).clamp(-1e300, 1e300),
        f64::from(points[0][1]).clamp(-1e300, 1e300),
    ];
    let partials: Vec<Partial> = points
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(c, chunk)| {
            let base = c * CHUNK;
            let mut p = Partial {
                bad_point: None,
                bad_weight: None,
                n_pos: 0,
                sw: 0.0,
                s1: [0.0; 2],
                s2: [0.0; 2],
                min: [f64::INFINITY; 2],
                max: [f64::NEG_INFINITY; 2],
            };
            for (j, pt) in chunk.iter().enumerate() {
                let i = base + j;
                #[allow(clippy::needless_range_loop)]
                for a in 0..2 {
                    if !pt[a].is_finite() && p.bad_point.is_none() {
                        p.bad_point = Some((i, a, pt[a]));
                    }
                }
                let w = match weights {
                    Some(ws) => {
                        let w = ws[i];
                        if !(w.is_finite() && w >= 0.0) {
                            if p.bad_weight.is_none() {
                                p.bad_weight = Some((i, w));
                            }
                            continue;
                        }
                        f64::from(w)
                    }
                    None => 1.0,
                };
                if p.bad_point.is_some() {
                    continue;
                }
                for a in 0..2 {
                    let x = f64::from(pt[a]);
                    p.min[a] = p.min[a].min(x);
                    p.max[a] = p.max[a].max(x);
                    let d = x - r[a];
                    p.s1[a] += w * d;
                    p.s2[a] += w * d * d;
                }
                if w > 0.0 {
                    p.n_pos += 1;
                }
                p.sw += w;
            }
            p
        })
        .collect();
    if let Some((index, axis, value)) = partials.iter().find_map(|p| p.bad_point) {
        return Err(GmmError::NonFinitePoint { index, axis, value });
    }
    if let Some((index, value)) = partials.iter().find_map(|p| p.bad_weight) {
        return Err(GmmError::BadWeight { index, value });
    }
    let mut t = partials[0];
    for p in &partials[1..] {
        t.n_pos += p.n_pos;
        t.sw += p.sw;
        for a in 0..2 {
            t.s1[a] += p.s1[a];
            t.s2[a] += p.s2[a];
            t.min[a] = t.min[a].min(p.min[a]);
            t.max[a] = t.max[a].max(p.max[a]);
        }
    }
    if !(t.sw > 0.0) {
        return Err(GmmError::ZeroTotalWeight);
    }
    let mut mean = [0.0; 2];
    let mut var = [0.0; 2];
    for a in 0..2 {
        let m = t.s1[a] / t.sw;
        mean[a] = r[a] + m;
        var[a] = (t.s2[a] / t.sw - m * m).max(0.0);
    }
    Ok(Summary {
        total_w: t.sw,
        mean,
        var,
        ext: Extremes {
            min: [t.min[0] as f32, t.min[1] as f32],
            max: [t.max[0] as f32, t.max[1] as f32],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_and_errors() {
        let pts = [[1.0f32, 10.0], [3.0, 10.0], [5.0, 10.0]];
        let s = summarize(&pts, None).unwrap();
        assert!((s.mean[0] - 3.0).abs() < 1e-12 && (s.var[0] - 8.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.var[1], 0.0);
        let st = Standardizer::from_moments(s.mean, s.var);
        assert_eq!(st.scale[1], 1.0);
        let w = [0.0f32, 1.0, 1.0];
        let s = summarize(&pts, Some(&w)).unwrap();
        assert!((s.mean[0] - 4.0).abs() < 1e-12);
        assert!(matches!(
            summarize(&pts, Some(&w[..2])),
            Err(GmmError::WeightLength {
                weights: 2,
                points: 3
            })
        ));
        assert!(matches!(
            summarize(&pts, Some(&[1.0, -1.0, 1.0])),
            Err(GmmError::BadWeight { index: 1, .. })
        ));
        assert!(matches!(
            summarize(&pts, Some(&[0.0, 0.0, 0.0])),
            Err(GmmError::ZeroTotalWeight)
        ));
        let bad = [[1.0f32, 1.0], [1.0, f32::INFINITY]];
        assert!(matches!(
            summarize(&bad, None),
            Err(GmmError::NonFinitePoint {
                index: 1,
                axis: 1,
                ..
            })
        ));
        assert!(matches!(summarize(&[], None), Err(GmmError::EmptyInput)));
    }

    /// Extremes equal the direct ones (and the summary's, weight-0 points included); the
    /// error names the first bad point even when later chunks hold bad points too.
    #[test]
    fn extremes_and_first_bad_point() {
        let n = 3 * CHUNK + 7;
        let mut pts: Vec<[f32; 2]> = (0..n)
            .map(|i| [(i as f32 * 0.37).sin() * 3.0, (i % 1013) as f32 - 500.0])
            .collect();
        pts[2 * CHUNK + 3] = [-7.5, 0.0];
        let e = check_finite(&pts).unwrap();
        let fold =
            |f: fn(f32, f32) -> f32, a: usize, init: f32| pts.iter().map(|p| p[a]).fold(init, f);
        assert_eq!(
            e.min,
            [
                fold(f32::min, 0, f32::INFINITY),
                fold(f32::min, 1, f32::INFINITY)
            ]
        );
        assert_eq!(
            e.max,
            [
                fold(f32::max, 0, f32::NEG_INFINITY),
                fold(f32::max, 1, f32::NEG_INFINITY)
            ]
        );
        assert_eq!(e.min[0], -7.5);
        let mut w = vec![1.0f32; n];
        w[2 * CHUNK + 3] = 0.0;
        assert_eq!(summarize(&pts, Some(&w)).unwrap().ext, e);
        pts[2 * CHUNK + 1][0] = f32::INFINITY;
        pts[CHUNK + 5][1] = f32::NAN;
        assert!(matches!(
            check_finite(&pts),
            Err(GmmError::NonFinitePoint { index, axis: 1, .. }) if index == CHUNK + 5
        ));
    }
}
