//! Temperature scaling: post-hoc calibration by one scalar fitted on held-out data.
//!
//! Guo et al., "On Calibration of Modern Neural Networks" (ICML 2017), section 4.2: the logits
//! `z` are divided by a temperature `T > 0` before the softmax, and `T` minimises the negative
//! log-likelihood on a validation set. `T > 1` softens over-confident predictions, `T < 1`
//! sharpens under-confident ones; the arg-max, and so the accuracy, never changes.
//!
//! For a Monte-Carlo predictive (`S` stochastic forward passes), `T` divides each sample's
//! logits before the softmax, and the probabilities are then averaged, as
//! [`McPredictive`] averages them: `p(y | x) = 1/S sum_s softmax(z_s / T)_y`. With `S = 1` this
//! is Guo et al.'s scaling of a deterministic network.

use crate::classification::NLL_EPSILON;
use crate::error::{MetricsError, Result};
use crate::mc::{McPredictive, Predictive};
use crate::probabilities::{Label, check_finite, check_labels};

/// The range searched for `T`: a model whose best temperature lies outside it is badly broken,
/// and the fit reports that `T` sits on the bound ([`TemperatureFit::at_bound`]).
pub const TEMPERATURE_RANGE: (f64, f64) = (0.05, 20.0);

/// The golden-section search stops when the bracket of `ln T` is narrower than this
/// (a relative precision of `T` of about 1e-6).
const LOG_T_TOLERANCE: f64 = 1e-6;

/// Monte-Carlo logits of `n` examples: `samples` passes of row-major `[n, classes]` logits,
/// one pass after the other (`[samples, n, classes]`).
#[derive(Debug, Clone, Copy)]
pub struct McLogits<'a> {
    logits: &'a [f32],
    samples: usize,
    n: usize,
    classes: usize,
}

impl<'a> McLogits<'a> {
    /// Checks the shape (`samples * n * classes` values, none of them zero) and that every
    /// logit is finite.
    pub fn new(logits: &'a [f32], samples: usize, n: usize, classes: usize) -> Result<Self> {
        for (what, v) in [("samples", samples), ("examples", n), ("classes", classes)] {
            if v == 0 {
                return Err(MetricsError::Empty { what });
            }
        }
        let rows = samples.saturating_mul(n);
        let expected = rows.saturating_mul(classes);
        if logits.len() != expected {
            return Err(MetricsError::Shape {
                what: "Monte Carlo logits",
                len: logits.len(),
                rows,
                classes,
                expected,
            });
        }
        check_finite("Monte Carlo logits", logits, classes)?;
        Ok(Self {
            logits,
            samples,
            n,
            classes,
        })
    }

    /// Number of Monte-Carlo samples.
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// Number of examples.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// The predictive at temperature `t`: each sample's logits divided by `t`, softmax, mean
    /// over samples ([`McPredictive`], so `t = 1` gives exactly its result).
    pub fn predictive(&self, t: f64) -> Result<Predictive> {
        check_temperature(t)?;
        let mut mc = McPredictive::new(self.n, self.classes)?;
        let inv = 1.0 / t;
        let mut scaled = vec![0.0f32; self.n * self.classes];
        for pass in self.logits.chunks_exact(self.n * self.classes) {
            for (s, &z) in scaled.iter_mut().zip(pass) {
                *s = (f64::from(z) * inv) as f32;
            }
            mc.push_logits(&scaled)?;
        }
        mc.finish()
    }

    /// The negative log-likelihood of the predictive at temperature `t` (mean over examples,
    /// clamped at [`NLL_EPSILON`] as [`crate::nll`]), computed in `f64`.
    fn nll(&self, labels: &[usize], t: f64) -> f64 {
        let (n, c) = (self.n, self.classes);
        let inv = 1.0 / t;
        let mut p_true = vec![0.0f64; n];
        for pass in self.logits.chunks_exact(n * c) {
            for ((row, &y), p) in pass.chunks_exact(c).zip(labels).zip(p_true.iter_mut()) {
                let max = row
                    .iter()
                    .fold(f64::NEG_INFINITY, |m, &z| m.max(f64::from(z)));
                let sum: f64 = row
                    .iter()
                    .map(|&z| ((f64::from(z) - max) * inv).exp())
                    .sum();
                *p += ((f64::from(row[y]) - max) * inv).exp() / sum;
            }
        }
        let s = self.samples as f64;
        p_true
            .iter()
            .map(|&p| -(p / s).max(NLL_EPSILON).ln())
            .sum::<f64>()
            / n as f64
    }
}

/// The result of [`fit_temperature`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TemperatureFit {
    /// The fitted temperature.
    pub temperature: f64,
    /// The NLL at `T = 1` on the fitting data.
    pub nll_before: f64,
    /// The NLL at the fitted temperature on the fitting data (never above `nll_before`).
    pub nll_after: f64,
    /// Whether `temperature` lies on a bound of [`TEMPERATURE_RANGE`].
    pub at_bound: bool,
}

/// Fits the temperature that minimises the NLL of `logits` against `labels` (held-out data,
/// never the test set the model is reported on).
///
/// A golden-section search over `ln T` in [`TEMPERATURE_RANGE`] down to a relative precision of
/// about 1e-6; `T = 1` is kept unless a temperature lowers the NLL. For `S = 1` the NLL is
/// convex in `1/T`, so the search finds the global minimum; with `S > 1` it finds a local one
/// in the bracket.
pub fn fit_temperature<L: Label>(logits: &McLogits<'_>, labels: &[L]) -> Result<TemperatureFit> {
    let labels = check_labels(labels, logits.n, logits.classes)?;
    let f = |log_t: f64| logits.nll(&labels, log_t.exp());
    let (mut a, mut b) = (TEMPERATURE_RANGE.0.ln(), TEMPERATURE_RANGE.1.ln());
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let mut x1 = b - ratio * (b - a);
    let mut x2 = a + ratio * (b - a);
    let (mut f1, mut f2) = (f(x1), f(x2));
    while b - a > LOG_T_TOLERANCE {
        if f1 <= f2 {
            b = x2;
            x2 = x1;
            f2 = f1;
            x1 = b - ratio * (b - a);
            f1 = f(x1);
        } else {
            a = x1;
            x1 = x2;
            f1 = f2;
            x2 = a + ratio * (b - a);
            f2 = f(x2);
        }
    }
    let nll_before = f(0.0);
    let (log_t, nll_at) = if f1 <= f2 { (x1, f1) } else { (x2, f2) };
    let (temperature, nll_after) = if nll_at < nll_before {
        (log_t.exp(), nll_at)
    } else {
        (1.0, nll_before)
    };
    let near = |bound: f64| (temperature.ln() - bound.ln()).abs() < 10.0 * LOG_T_TOLERANCE;
    Ok(TemperatureFit {
        temperature,
        nll_before,
        nll_after,
        at_bound: near(TEMPERATURE_RANGE.0) || near(TEMPERATURE_RANGE.1),
    })
}

/// Checks a temperature read from a file or given by a user: finite and within
/// [`TEMPERATURE_RANGE`] (the only temperatures [`fit_temperature`] returns), so a damaged or
/// absurd value (NaN, `<= 0`, `1e30`) is refused instead of silently flattening or sharpening
/// every prediction. Returns `t`.
pub fn validate_temperature(t: f64) -> Result<f64> {
    let (lo, hi) = TEMPERATURE_RANGE;
    if !t.is_finite() || t <= 0.0 {
        return Err(MetricsError::InvalidParameter {
            name: "temperature",
            value: t,
            reason: "must be finite and > 0",
        });
    }
    if !(lo..=hi).contains(&t) {
        return Err(MetricsError::InvalidParameter {
            name: "temperature",
            value: t,
            reason: "must lie in the fitted range [0.05, 20]",
        });
    }
    Ok(t)
}

/// `t` must be finite and positive.
fn check_temperature(t: f64) -> Result<()> {
    if t.is_finite() && t > 0.0 {
        Ok(())
    } else {
        Err(MetricsError::InvalidParameter {
            name: "temperature",
            value: t,
            reason: "must be finite and > 0",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EvalSummary, nll};

    /// A small deterministic generator (SplitMix64) so that the tests need no RNG crate.
    struct SplitMix(u64);

    impl SplitMix {
        fn next_f64(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// `n` examples of `classes` logits whose labels are drawn from `softmax(z / t_true)`:
    /// the NLL-optimal temperature of this data tends to `t_true`.
    fn drawn_at(t_true: f64, n: usize, classes: usize, seed: u64) -> (Vec<f32>, Vec<u32>) {
        let mut rng = SplitMix(seed);
        let mut logits = Vec::with_capacity(n * classes);
        let mut labels = Vec::with_capacity(n);
        for _ in 0..n {
            let row: Vec<f64> = (0..classes).map(|_| 6.0 * rng.next_f64() - 3.0).collect();
            let w: Vec<f64> = row.iter().map(|z| (z / t_true).exp()).collect();
            let total: f64 = w.iter().sum();
            let mut u = rng.next_f64() * total;
            let mut y = classes - 1;
            for (k, wk) in w.iter().enumerate() {
                if u < *wk {
                    y = k;
                    break;
                }
                u -= wk;
            }
            logits.extend(row.iter().map(|&z| z as f32));
            labels.push(y as u32);
        }
        (logits, labels)
    }

    #[test]
    fn recovers_the_temperature_the_labels_were_drawn_at() {
        for t_true in [0.5, 2.0] {
            let (z, y) = drawn_at(t_true, 20_000, 5, 7);
            let fit = fit_temperature(&McLogits::new(&z, 1, 20_000, 5).unwrap(), &y).unwrap();
            assert!(
                (fit.temperature / t_true - 1.0).abs() < 0.05,
                "{t_true}: {fit:?}"
            );
            assert!(fit.nll_after < fit.nll_before && !fit.at_bound, "{fit:?}");
        }
    }

    #[test]
    fn the_fit_is_the_minimum_of_the_nll_that_crate_nll_reports() {
        let (z, y) = drawn_at(1.7, 3_000, 4, 3);
        let logits = McLogits::new(&z, 1, 3_000, 4).unwrap();
        let fit = fit_temperature(&logits, &y).unwrap();
        let at = |t: f64| nll(logits.predictive(t).unwrap().probabilities(), &y).unwrap();
        assert!((at(fit.temperature) - fit.nll_after).abs() < 1e-6);
        assert!((at(1.0) - fit.nll_before).abs() < 1e-6);
        for t in [0.9, 0.99, 1.01, 1.1].map(|r| r * fit.temperature) {
            assert!(at(t) >= fit.nll_after - 1e-7, "T = {t}");
        }
    }

    #[test]
    fn mc_samples_are_scaled_before_the_average_and_t_1_is_mcpredictive() {
        // Two passes for one example: the average of the tempered softmaxes, not the softmax
        // of tempered averaged logits.
        let z = [2.0f32, 0.0, 0.0, 2.0];
        let logits = McLogits::new(&z, 2, 1, 2).unwrap();
        let p = logits.predictive(2.0).unwrap();
        let s = 1.0 / (1.0 + (-1.0f64).exp());
        let row = p.probabilities().row(0).unwrap();
        assert!((f64::from(row[0]) - (s + (1.0 - s)) / 2.0).abs() < 1e-6);
        let mut mc = McPredictive::new(1, 2).unwrap();
        mc.push_logits(&z[..2]).unwrap();
        mc.push_logits(&z[2..]).unwrap();
        let direct = mc.finish().unwrap();
        assert_eq!(
            logits.predictive(1.0).unwrap().probabilities(),
            direct.probabilities()
        );
    }

    #[test]
    fn scaling_keeps_the_accuracy() {
        let (z, y) = drawn_at(0.3, 2_000, 6, 11);
        let logits = McLogits::new(&z, 1, 2_000, 6).unwrap();
        let fit = fit_temperature(&logits, &y).unwrap();
        let acc = |t: f64| {
            EvalSummary::compute(logits.predictive(t).unwrap().probabilities(), &y)
                .unwrap()
                .accuracy
        };
        assert_eq!(acc(1.0), acc(fit.temperature));
    }

    #[test]
    fn a_stored_temperature_must_be_finite_positive_and_in_the_fitted_range() {
        for t in [TEMPERATURE_RANGE.0, 0.7, 1.0, 3.5, TEMPERATURE_RANGE.1] {
            assert_eq!(validate_temperature(t).unwrap(), t);
        }
        for t in [f64::NAN, f64::INFINITY, 0.0, -1.0, 0.01, 25.0, 1e30] {
            let e = validate_temperature(t).unwrap_err().to_string();
            assert!(e.contains("temperature"), "{t}: {e}");
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        let z = [0.0f32; 6];
        assert!(matches!(
            McLogits::new(&z, 1, 2, 2),
            Err(MetricsError::Shape { .. })
        ));
        assert!(matches!(
            McLogits::new(&z, 0, 3, 2),
            Err(MetricsError::Empty { .. })
        ));
        let nan = [0.0f32, f32::NAN];
        assert!(matches!(
            McLogits::new(&nan, 1, 1, 2),
            Err(MetricsError::NonFinite { .. })
        ));
        let logits = McLogits::new(&z, 1, 3, 2).unwrap();
        assert!(matches!(
            fit_temperature(&logits, &[0u8, 1, 2]),
            Err(MetricsError::LabelOutOfRange { .. })
        ));
        assert!(matches!(
            fit_temperature(&logits, &[0u8, 1]),
            Err(MetricsError::LengthMismatch { .. })
        ));
        for t in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(logits.predictive(t).is_err(), "{t}");
        }
    }
}
