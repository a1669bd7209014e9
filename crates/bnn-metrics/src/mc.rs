//! Monte Carlo predictive distribution: average the class *probabilities* of `N_s` stochastic
//! forward passes, and keep what is needed for entropy and mutual information.

use rayon::prelude::*;

use crate::error::{MetricsError, Result};
use crate::probabilities::{Probabilities, ROWS_PER_TASK, check_finite};
use crate::uncertainty::{entropy, predictive_entropy};

/// Default number of Monte Carlo samples `N_s` (as in the 2DGBNN paper).
pub const DEFAULT_MC_SAMPLES: usize = 30;

/// Accumulates `N_s` sample batches of logits or probabilities for the same `n` examples.
///
/// Each logit sample is turned into probabilities with a stable softmax (shift by the row
/// maximum, log-sum-exp in `f64`); the predictive distribution is the *mean of probabilities*
/// (not of logits). Per example it also accumulates the entropy of every sample, so that
/// [`McPredictive::finish`] can report the mutual information. Memory: `8 * n * (classes + 1)`
/// bytes, independent of the number of samples; to bound it for huge test sets, use one
/// accumulator per mini-batch and concatenate.
///
/// ```
/// use bnn_metrics::McPredictive;
/// let mut mc = McPredictive::new(1, 2)?;
/// mc.push_logits(&[10.0, -10.0])?; // confident in class 0
/// mc.push_logits(&[-10.0, 10.0])?; // confident in class 1
/// let pred = mc.finish()?;
/// assert!((pred.probabilities().as_slice()[0] - 0.5).abs() < 1e-6);
/// // Samples disagree: nearly all of the entropy (ln 2) is epistemic.
/// let mi = pred.mutual_information().unwrap()[0];
/// assert!((mi - 2f64.ln()).abs() < 1e-6);
/// # Ok::<(), bnn_metrics::MetricsError>(())
/// ```
#[derive(Debug, Clone)]
pub struct McPredictive {
    n: usize,
    classes: usize,
    samples: usize,
    sum_probs: Vec<f64>,
    sum_entropy: Vec<f64>,
}

impl McPredictive {
    /// An empty accumulator for `n` examples of `classes` classes.
    ///
    /// # Errors
    /// [`MetricsError::Empty`] if `n` or `classes` is zero.
    pub fn new(n: usize, classes: usize) -> Result<Self> {
        if n == 0 {
            return Err(MetricsError::Empty {
                what: "Monte Carlo examples",
            });
        }
        if classes == 0 {
            return Err(MetricsError::Empty {
                what: "number of classes",
            });
        }
        Ok(Self {
            n,
            classes,
            samples: 0,
            sum_probs: vec![0.0; n * classes],
            sum_entropy: vec![0.0; n],
        })
    }

    /// Runs `sample(s)` for `s = 0..n_samples`, each returning row-major `[n, classes]` logits,
    /// and returns the predictive distribution. Use [`DEFAULT_MC_SAMPLES`] for `n_samples`
    /// unless you have a reason not to.
    ///
    /// # Errors
    /// [`MetricsError::Empty`] if `n_samples == 0`, plus anything [`McPredictive::push_logits`]
    /// reports.
    pub fn collect_logits<F>(
        n: usize,
        classes: usize,
        n_samples: usize,
        mut sample: F,
    ) -> Result<Predictive>
    where
        F: FnMut(usize) -> Vec<f32>,
    {
        let mut acc = Self::new(n, classes)?;
        for s in 0..n_samples {
            acc.push_logits(&sample(s))?;
        }
        acc.finish()
    }

    /// An accumulator holding `samples` samples given by their sums, as accumulated elsewhere
    /// (on a GPU, say): per example the sum over samples of the class probabilities
    /// (`sum_probs`, row-major `[n, classes]`) and of each sample's entropy in nats
    /// (`sum_entropy`, `[n]`). [`McPredictive::finish`] then gives their predictive.
    ///
    /// # Errors
    /// [`MetricsError::Empty`] if `n`, `classes` or `samples` is zero,
    /// [`MetricsError::LengthMismatch`] if a length differs from `n * classes` or `n`,
    /// [`MetricsError::NonFinite`] for a non-finite sum.
    pub fn from_sums(
        n: usize,
        classes: usize,
        samples: usize,
        sum_probs: Vec<f64>,
        sum_entropy: Vec<f64>,
    ) -> Result<Self> {
        let mut acc = Self::new(n, classes)?;
        if samples == 0 {
            return Err(MetricsError::Empty {
                what: "Monte Carlo samples (0 summed)",
            });
        }
        for (what, values, expected) in [
            ("Monte Carlo probability sums", &sum_probs, n * classes),
            ("Monte Carlo entropy sums", &sum_entropy, n),
        ] {
            if values.len() != expected {
                return Err(MetricsError::LengthMismatch {
                    what,
                    expected,
                    got: values.len(),
                });
            }
            let width = if expected == n { 1 } else { classes };
            if let Some(at) = values.iter().position(|v| !v.is_finite()) {
                return Err(MetricsError::NonFinite {
                    what,
                    row: at / width,
                    col: at % width,
                    value: values[at],
                });
            }
        }
        acc.samples = samples;
        acc.sum_probs = sum_probs;
        acc.sum_entropy = sum_entropy;
        Ok(acc)
    }

    /// Number of examples.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Number of samples pushed so far.
    pub fn n_samples(&self) -> usize {
        self.samples
    }

    fn check_len(&self, what: &'static str, len: usize) -> Result<()> {
        if len != self.n * self.classes {
            return Err(MetricsError::Shape {
                what,
                len,
                rows: self.n,
                classes: self.classes,
                expected: self.n * self.classes,
            });
        }
        Ok(())
    }

    /// Adds one sample of row-major `[n, classes]` logits. On error the state is unchanged.
    ///
    /// # Errors
    /// [`MetricsError::Shape`] or [`MetricsError::NonFinite`].
    pub fn push_logits(&mut self, logits: &[f32]) -> Result<()> {
        self.check_len("Monte Carlo logits", logits.len())?;
        check_finite("Monte Carlo logits", logits, self.classes)?;
        let c = self.classes;
        self.sum_probs
            .par_chunks_mut(c)
            .zip(self.sum_entropy.par_iter_mut())
            .zip(logits.par_chunks(c))
            .with_min_len(ROWS_PER_TASK)
            .for_each_init(
                || Vec::with_capacity(c),
                |exps: &mut Vec<f64>, ((acc, h), x)| {
                    // One exponential per entry: e_k = exp(x_k - m), p_k = e_k / s and
                    // H = -sum p ln p = ln s - sum_k p_k (x_k - m).
                    let m = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                    let m = f64::from(m);
                    exps.clear();
                    exps.extend(x.iter().map(|&v| (f64::from(v) - m).exp()));
                    let s: f64 = exps.iter().sum();
                    let inv = 1.0 / s;
                    let mut pz = 0.0;
                    for ((a, &e), &v) in acc.iter_mut().zip(exps.iter()).zip(x) {
                        let p = e * inv;
                        *a += p;
                        pz += p * (f64::from(v) - m);
                    }
                    *h += s.ln() - pz;
                },
            );
        self.samples += 1;
        Ok(())
    }

    /// Adds one sample of probabilities. On error the state is unchanged.
    ///
    /// # Errors
    /// [`MetricsError::LengthMismatch`] if the shape differs from the accumulator's.
    pub fn push_probabilities(&mut self, probs: &Probabilities) -> Result<()> {
        if probs.n() != self.n {
            return Err(MetricsError::LengthMismatch {
                what: "Monte Carlo sample rows",
                expected: self.n,
                got: probs.n(),
            });
        }
        if probs.classes() != self.classes {
            return Err(MetricsError::LengthMismatch {
                what: "Monte Carlo sample classes",
                expected: self.classes,
                got: probs.classes(),
            });
        }
        let c = self.classes;
        self.sum_probs
            .par_chunks_mut(c)
            .zip(self.sum_entropy.par_iter_mut())
            .zip(probs.as_slice().par_chunks(c))
            .with_min_len(ROWS_PER_TASK)
            .for_each(|((acc, h), p)| {
                for (a, &v) in acc.iter_mut().zip(p) {
                    *a += f64::from(v);
                }
                *h += entropy(p);
            });
        self.samples += 1;
        Ok(())
    }

    /// The predictive distribution (mean probabilities), its entropy, and the mutual information.
    ///
    /// # Errors
    /// [`MetricsError::Empty`] if no sample was pushed.
    pub fn finish(self) -> Result<Predictive> {
        if self.samples == 0 {
            return Err(MetricsError::Empty {
                what: "Monte Carlo samples (none pushed)",
            });
        }
        let s = self.samples as f64;
        let c = self.classes;
        let (entropy, mi): (Vec<f64>, Vec<f64>) = self
            .sum_probs
            .par_chunks(c)
            .zip(self.sum_entropy.par_iter())
            .with_min_len(ROWS_PER_TASK)
            .map(|(acc, &h_sum)| {
                let h_mean: f64 = -acc
                    .iter()
                    .map(|&a| {
                        let p = a / s;
                        if p > 0.0 { p * p.ln() } else { 0.0 }
                    })
                    .sum::<f64>();
                (h_mean, h_mean - h_sum / s)
            })
            .unzip();
        let data: Vec<f32> = self.sum_probs.iter().map(|&a| (a / s) as f32).collect();
        Ok(Predictive {
            probabilities: Probabilities::from_trusted(data, self.n, c),
            entropy,
            mutual_information: Some(mi),
            n_samples: self.samples,
        })
    }
}

/// A predictive distribution with per-example uncertainties.
///
/// Built by [`McPredictive::finish`] (mutual information available) or
/// [`Predictive::from_probabilities`] for a deterministic network (no mutual information).
#[derive(Debug, Clone, PartialEq)]
pub struct Predictive {
    probabilities: Probabilities,
    entropy: Vec<f64>,
    mutual_information: Option<Vec<f64>>,
    n_samples: usize,
}

impl Predictive {
    /// Wraps a single (deterministic) prediction; entropy is computed, mutual information is not
    /// available.
    pub fn from_probabilities(probabilities: Probabilities) -> Self {
        let entropy = predictive_entropy(&probabilities);
        Self {
            probabilities,
            entropy,
            mutual_information: None,
            n_samples: 1,
        }
    }

    /// Rebuilds a predictive from its parts (as read back from a file): `entropy` and
    /// `mutual_information` need one finite value per example of `probabilities` (the mutual
    /// information of identical samples can round to a tiny negative number), and `n_samples`
    /// at least 1.
    pub fn from_parts(
        probabilities: Probabilities,
        entropy: Vec<f64>,
        mutual_information: Option<Vec<f64>>,
        n_samples: usize,
    ) -> Result<Self> {
        let n = probabilities.n();
        if n_samples == 0 {
            return Err(MetricsError::Empty {
                what: "Monte Carlo samples (0 recorded)",
            });
        }
        for (what, values) in [
            ("predictive entropy", Some(&entropy)),
            ("mutual information", mutual_information.as_ref()),
        ] {
            let Some(values) = values else { continue };
            if values.len() != n {
                return Err(MetricsError::LengthMismatch {
                    what,
                    expected: n,
                    got: values.len(),
                });
            }
            if let Some(row) = values.iter().position(|v| !v.is_finite()) {
                return Err(MetricsError::NonFinite {
                    what,
                    row,
                    col: 0,
                    value: values[row],
                });
            }
        }
        Ok(Self {
            probabilities,
            entropy,
            mutual_information,
            n_samples,
        })
    }

    /// Mean predictive probabilities.
    pub fn probabilities(&self) -> &Probabilities {
        &self.probabilities
    }

    /// Predictive entropy `H(mean_s p_s)` per example (nats). For MC predictions it is computed
    /// from the `f64` mean, before rounding the probabilities to `f32`.
    pub fn entropy(&self) -> &[f64] {
        &self.entropy
    }

    /// Mutual information per example (nats), or `None` for a deterministic prediction.
    pub fn mutual_information(&self) -> Option<&[f64]> {
        self.mutual_information.as_deref()
    }

    /// Expected entropy `mean_s H(p_s)` per example (aleatoric part), or `None` without MC samples.
    pub fn expected_entropy(&self) -> Option<Vec<f64>> {
        let mi = self.mutual_information.as_ref()?;
        Some(self.entropy.iter().zip(mi).map(|(h, m)| h - m).collect())
    }

    /// Number of samples averaged (1 for [`Predictive::from_probabilities`]).
    pub fn n_samples(&self) -> usize {
        self.n_samples
    }

    /// Gives the probabilities back.
    pub fn into_probabilities(self) -> Probabilities {
        self.probabilities
    }
}

/// Mutual information between the prediction and the weights, per example, from `S` Monte Carlo
/// samples of class probabilities (all `[n, classes]`):
///
/// `MI_i = H(mean_s p_s,i) - mean_s H(p_s,i)` (entropy of the mean minus expected entropy),
///
/// the BALD / epistemic term of the predictive entropy. Non-negative by Jensen's inequality;
/// computed in `f64` and not clamped, so tiny negative values of order `1e-16` are rounding.
///
/// # Errors
/// [`MetricsError::Empty`] without samples, [`MetricsError::LengthMismatch`] if shapes differ.
pub fn mutual_information(samples: &[Probabilities]) -> Result<Vec<f64>> {
    let first = samples.first().ok_or(MetricsError::Empty {
        what: "Monte Carlo samples",
    })?;
    let mut acc = McPredictive::new(first.n(), first.classes())?;
    for s in samples {
        acc.push_probabilities(s)?;
    }
    Ok(acc
        .finish()?
        .mutual_information()
        .unwrap_or_default()
        .to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mi_zero_for_identical_samples_and_ln2_for_disagreeing_certain_ones() {
        let a = Probabilities::new(vec![0.3, 0.7], 1, 2).unwrap();
        let mi = mutual_information(&[a.clone(), a.clone()]).unwrap();
        assert!(mi[0].abs() < 1e-12);
        let b = Probabilities::new(vec![1.0, 0.0], 1, 2).unwrap();
        let c = Probabilities::new(vec![0.0, 1.0], 1, 2).unwrap();
        let mi = mutual_information(&[b, c]).unwrap();
        assert!((mi[0] - 2f64.ln()).abs() < 1e-12);
        assert!(matches!(
            mutual_information(&[]),
            Err(MetricsError::Empty { .. })
        ));
        let d = Probabilities::new(vec![1.0, 0.0, 1.0, 0.0], 2, 2).unwrap();
        assert!(matches!(
            mutual_information(&[a, d]),
            Err(MetricsError::LengthMismatch { .. })
        ));
    }

    #[test]
    fn from_parts_round_trips_and_refuses_bad_parts() {
        let mut mc = McPredictive::new(2, 3).unwrap();
        mc.push_logits(&[1.0, 2.0, 3.0, 0.0, 0.0, 1.0]).unwrap();
        mc.push_logits(&[0.5, 2.0, 1.0, 1.0, 0.0, 0.0]).unwrap();
        let p = mc.finish().unwrap();
        let parts = |p: &Predictive| {
            (
                p.probabilities().clone(),
                p.entropy().to_vec(),
                p.mutual_information().map(<[f64]>::to_vec),
                p.n_samples(),
            )
        };
        let (probs, h, mi, s) = parts(&p);
        assert_eq!(
            Predictive::from_parts(probs.clone(), h.clone(), mi.clone(), s).unwrap(),
            p
        );
        assert!(Predictive::from_parts(probs.clone(), vec![0.1], mi.clone(), s).is_err());
        assert!(Predictive::from_parts(probs.clone(), vec![0.1, f64::NAN], None, s).is_err());
        assert!(
            Predictive::from_parts(probs.clone(), h.clone(), Some(vec![f64::INFINITY, 0.0]), s)
                .is_err()
        );
        assert!(Predictive::from_parts(probs, h, mi, 0).is_err());
    }

    #[test]
    fn logits_and_probabilities_paths_agree() {
        let logits = [
            [1.0f32, 2.0, 3.0, -1.0, 0.5, 0.0],
            [0.0, 0.0, 0.0, 5.0, -5.0, 2.0],
        ];
        let mut a = McPredictive::new(2, 3).unwrap();
        let mut b = McPredictive::new(2, 3).unwrap();
        for l in &logits {
            a.push_logits(l).unwrap();
            b.push_probabilities(&Probabilities::from_logits(l.to_vec(), 2, 3).unwrap())
                .unwrap();
        }
        let (a, b) = (a.finish().unwrap(), b.finish().unwrap());
        assert_eq!(a.n_samples(), 2);
        for (x, y) in a.entropy().iter().zip(b.entropy()) {
            assert!((x - y).abs() < 1e-6);
        }
        let (ma, mb) = (
            a.mutual_information().unwrap(),
            b.mutual_information().unwrap(),
        );
        for (x, y) in ma.iter().zip(mb) {
            assert!((x - y).abs() < 1e-6);
        }
    }

    #[test]
    fn errors_leave_state_unchanged() {
        let mut a = McPredictive::new(1, 2).unwrap();
        assert!(matches!(
            a.push_logits(&[0.0]),
            Err(MetricsError::Shape { .. })
        ));
        assert!(matches!(
            a.push_logits(&[0.0, f32::NAN]),
            Err(MetricsError::NonFinite { col: 1, .. })
        ));
        assert_eq!(a.n_samples(), 0);
        assert!(matches!(a.finish(), Err(MetricsError::Empty { .. })));
        assert!(matches!(
            McPredictive::collect_logits(1, 2, 0, |_| vec![0.0, 0.0]),
            Err(MetricsError::Empty { .. })
        ));
        assert!(McPredictive::new(0, 2).is_err());
    }

    #[test]
    fn deterministic_prediction_has_no_mi() {
        let p = Probabilities::new(vec![0.5, 0.5], 1, 2).unwrap();
        let pred = Predictive::from_probabilities(p);
        assert!(pred.mutual_information().is_none());
        assert!(pred.expected_entropy().is_none());
        assert!((pred.entropy()[0] - 2f64.ln()).abs() < 1e-12);
    }
}
