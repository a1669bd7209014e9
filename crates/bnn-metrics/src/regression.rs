//! Regression predictive from Monte Carlo samples of a Gaussian head, and its metrics.
//!
//! A Bayesian regression network gives, per Monte Carlo sample `s = 1..S`, example `i` and
//! target `t`, a mean `mu_s` and a standard deviation `sigma_s > 0` (a heteroscedastic head; a
//! homoscedastic one passes the same `sigma` everywhere). The predictive distribution of
//! `y_it` is the equally weighted mixture
//!
//! `p(y) = (1/S) sum_s N(y; mu_s, sigma_s^2)`.
//!
//! Its mean is `mean_s mu_s`, and by the law of total variance
//! (`Var y = E[Var(y | s)] + Var(E[y | s])`, e.g. Kendall & Gal, "What uncertainties do we
//! need in Bayesian deep learning for computer vision?", NeurIPS 2017, eq. 9) its variance splits
//! into an aleatoric part `mean_s sigma_s^2` and an epistemic part `var_s mu_s` (population
//! variance, divisor `S`).
//!
//! Metrics against observed targets (all means over every example and target):
//! [`rmse`] of the predictive mean, [`gaussian_nll`] of the mixture, [`crps`] in closed form,
//! [`interval_coverage`] of central intervals, [`pit`] values and [`pit_calibration_error`],
//! [`regression_reliability`], and [`RegressionSummary`] for all of them.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{MetricsError, Result};
use crate::normal::{erf, normal_cdf, normal_pdf, normal_sf};
use crate::probabilities::{ROWS_PER_TASK, check_finite};

/// Levels of the central intervals reported by [`RegressionSummary`].
pub const DEFAULT_INTERVAL_LEVELS: [f64; 3] = [0.5, 0.9, 0.95];

/// Nominal levels `0.05, 0.10, ..., 0.95` for a regression reliability figure
/// ([`regression_reliability`]).
pub const DEFAULT_RELIABILITY_LEVELS: [f64; 19] = [
    0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85,
    0.9, 0.95,
];

/// Half-width of the bracket of a quantile search, in standard deviations of the widest
/// component: `Phi(-40)` is about `4e-350`, below the smallest `f64`.
const BRACKET_SIGMAS: f64 = 40.0;

/// Relative step (in units of the narrowest component's sigma) at which a quantile search stops.
const QUANTILE_TOLERANCE: f64 = 1e-12;

/// Enough iterations for bisection alone to shrink `80 sigma_max` below
/// `1e-12 sigma_min` for any ratio of `f32` standard deviations.
const QUANTILE_MAX_ITER: usize = 400;

/// `ln(2 pi) / 2`.
const HALF_LN_2PI: f64 = 0.918_938_533_204_672_8;

/// `1 / sqrt(pi)`.
const FRAC_1_SQRT_PI: f64 = 0.564_189_583_547_756_3;

/// Checks that a coverage level lies strictly in `(0, 1)`.
pub(crate) fn check_level(level: f64) -> Result<()> {
    if level > 0.0 && level < 1.0 {
        Ok(())
    } else {
        Err(MetricsError::InvalidParameter {
            name: "level",
            value: level,
            reason: "must lie strictly between 0 and 1",
        })
    }
}

/// Accumulates `S` Monte Carlo samples of a Gaussian regression head for the same `n`
/// examples and `targets` outputs, then builds the mixture predictive
/// ([`McRegression::finish`]).
///
/// Unlike the classification accumulator [`crate::McPredictive`], the mixture CDF, NLL and CRPS
/// need every component, so all samples are kept: the predictive holds
/// `8 * n * targets * S * 2` bytes (mean and standard deviation of every sample, in `f64`);
/// while pushing, the samples are kept as given (`f32`, half that), and
/// [`McRegression::finish`] needs both copies at once. With `S` around 30 that is about 1 KB
/// per output value; split huge test sets into mini-batches.
///
/// ```
/// use bnn_metrics::McRegression;
/// let mut mc = McRegression::new(1, 1)?;
/// mc.push(&[1.0], &[0.5])?;
/// mc.push(&[3.0], &[0.5])?;
/// let pred = mc.finish()?;
/// assert_eq!(pred.mean(), &[2.0]);
/// assert_eq!(pred.aleatoric_variance(), &[0.25]); // mean of sigma^2
/// assert_eq!(pred.epistemic_variance(), &[1.0]); // variance of the means
/// assert_eq!(pred.total_variance(), vec![1.25]);
/// # Ok::<(), bnn_metrics::MetricsError>(())
/// ```
#[derive(Debug, Clone)]
pub struct McRegression {
    n: usize,
    targets: usize,
    samples: usize,
    means: Vec<f32>,
    stds: Vec<f32>,
}

impl McRegression {
    /// An empty accumulator for `n` examples of `targets` outputs each.
    ///
    /// # Errors
    /// [`MetricsError::Empty`] if `n` or `targets` is zero.
    pub fn new(n: usize, targets: usize) -> Result<Self> {
        if n == 0 {
            return Err(MetricsError::Empty {
                what: "regression examples",
            });
        }
        if targets == 0 {
            return Err(MetricsError::Empty {
                what: "number of regression targets",
            });
        }
        Ok(Self {
            n,
            targets,
            samples: 0,
            means: Vec::new(),
            stds: Vec::new(),
        })
    }

    /// Number of examples.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of targets per example.
    pub fn targets(&self) -> usize {
        self.targets
    }

    /// Number of samples pushed so far.
    pub fn n_samples(&self) -> usize {
        self.samples
    }

    /// Adds one sample: row-major `[n, targets]` means and standard deviations. On error the
    /// state is unchanged.
    ///
    /// # Errors
    /// [`MetricsError::Shape`] for a wrong length, [`MetricsError::NonFinite`] for NaN or
    /// infinity, [`MetricsError::NonPositive`] for a standard deviation `<= 0`.
    pub fn push(&mut self, means: &[f32], stds: &[f32]) -> Result<()> {
        let (n, t) = (self.n, self.targets);
        check_cells("Monte Carlo regression means", means, n, t)?;
        check_cells("Monte Carlo regression standard deviations", stds, n, t)?;
        check_positive("Monte Carlo regression standard deviations", stds, t)?;
        self.means.extend_from_slice(means);
        self.stds.extend_from_slice(stds);
        self.samples += 1;
        Ok(())
    }

    /// The mixture predictive of the samples pushed.
    ///
    /// # Errors
    /// [`MetricsError::Empty`] if no sample was pushed.
    pub fn finish(self) -> Result<RegressionPredictive> {
        let s = self.samples;
        if s == 0 {
            return Err(MetricsError::Empty {
                what: "Monte Carlo regression samples (none pushed)",
            });
        }
        let cells = self.n * self.targets;
        // Component-major layout: the `S` components of cell `c` are `c * S .. (c + 1) * S`.
        let transpose = |src: &[f32]| -> Vec<f64> {
            let mut out = vec![0.0f64; cells * s];
            out.par_chunks_mut(s)
                .enumerate()
                .with_min_len(ROWS_PER_TASK)
                .for_each(|(c, dst)| {
                    for (k, d) in dst.iter_mut().enumerate() {
                        *d = f64::from(src[k * cells + c]);
                    }
                });
            out
        };
        let mu = transpose(&self.means);
        drop(self.means);
        let sigma = transpose(&self.stds);
        drop(self.stds);
        Ok(RegressionPredictive::from_components(
            self.n,
            self.targets,
            s,
            mu,
            sigma,
        ))
    }
}

fn check_cells(what: &'static str, values: &[f32], n: usize, targets: usize) -> Result<()> {
    let expected = n.saturating_mul(targets);
    if values.len() != expected {
        return Err(MetricsError::Shape {
            what,
            len: values.len(),
            rows: n,
            classes: targets,
            expected,
        });
    }
    check_finite(what, values, targets)
}

fn check_positive(what: &'static str, values: &[f32], targets: usize) -> Result<()> {
    match values.iter().position(|&v| v <= 0.0) {
        Some(at) => Err(MetricsError::NonPositive {
            what,
            row: at / targets,
            col: at % targets,
            value: f64::from(values[at]),
        }),
        None => Ok(()),
    }
}

/// The Gaussian-mixture predictive of a regression network: per example and target, the
/// mixture `(1/S) sum_s N(mu_s, sigma_s^2)` of the Monte Carlo samples.
///
/// Built by [`McRegression::finish`], or [`RegressionPredictive::from_gaussian`] for a single
/// Gaussian per output (a deterministic network, or any mean and standard deviation).
/// Per-output arrays are row-major `[n, targets]`.
#[derive(Debug, Clone, PartialEq)]
pub struct RegressionPredictive {
    n: usize,
    targets: usize,
    samples: usize,
    mu: Vec<f64>,
    sigma: Vec<f64>,
    mean: Vec<f64>,
    aleatoric: Vec<f64>,
    epistemic: Vec<f64>,
}

impl RegressionPredictive {
    /// One Gaussian `N(mean, std^2)` per output (`S = 1`; the epistemic variance is zero).
    ///
    /// ```
    /// use bnn_metrics::RegressionPredictive;
    /// let pred = RegressionPredictive::from_gaussian(&[0.0, 1.0], &[1.0, 2.0], 2, 1)?;
    /// assert_eq!(pred.std(), vec![1.0, 2.0]);
    /// assert!((pred.cdf(1, 0, 1.0)? - 0.5).abs() < 1e-15);
    /// # Ok::<(), bnn_metrics::MetricsError>(())
    /// ```
    ///
    /// # Errors
    /// As [`McRegression::new`] and [`McRegression::push`].
    pub fn from_gaussian(means: &[f32], stds: &[f32], n: usize, targets: usize) -> Result<Self> {
        let mut mc = McRegression::new(n, targets)?;
        mc.push(means, stds)?;
        mc.finish()
    }

    fn from_components(
        n: usize,
        targets: usize,
        samples: usize,
        mu: Vec<f64>,
        sigma: Vec<f64>,
    ) -> Self {
        let inv = 1.0 / samples as f64;
        let stats: Vec<(f64, f64, f64)> = mu
            .par_chunks(samples)
            .zip(sigma.par_chunks(samples))
            .with_min_len(ROWS_PER_TASK)
            .map(|(m, s)| {
                let mean = m.iter().sum::<f64>() * inv;
                let epi = m.iter().map(|&v| (v - mean) * (v - mean)).sum::<f64>() * inv;
                let alea = s.iter().map(|&v| v * v).sum::<f64>() * inv;
                (mean, alea, epi)
            })
            .collect();
        let mean = stats.iter().map(|v| v.0).collect();
        let aleatoric = stats.iter().map(|v| v.1).collect();
        let epistemic = stats.iter().map(|v| v.2).collect();
        Self {
            n,
            targets,
            samples,
            mu,
            sigma,
            mean,
            aleatoric,
            epistemic,
        }
    }

    /// Number of examples.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of targets per example.
    pub fn targets(&self) -> usize {
        self.targets
    }

    /// Number of mixture components `S` (Monte Carlo samples).
    pub fn n_samples(&self) -> usize {
        self.samples
    }

    /// Predictive mean `mean_s mu_s` per output.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// Aleatoric variance `mean_s sigma_s^2` per output (the expected noise variance).
    pub fn aleatoric_variance(&self) -> &[f64] {
        &self.aleatoric
    }

    /// Epistemic variance `(1/S) sum_s (mu_s - mean)^2` per output (population variance of the
    /// sampled means; zero for `S = 1`).
    pub fn epistemic_variance(&self) -> &[f64] {
        &self.epistemic
    }

    /// Total predictive variance, aleatoric + epistemic (law of total variance), per output.
    pub fn total_variance(&self) -> Vec<f64> {
        self.aleatoric
            .iter()
            .zip(&self.epistemic)
            .map(|(a, e)| a + e)
            .collect()
    }

    /// Predictive standard deviation `sqrt(total variance)` per output.
    pub fn std(&self) -> Vec<f64> {
        self.aleatoric
            .iter()
            .zip(&self.epistemic)
            .map(|(a, e)| (a + e).sqrt())
            .collect()
    }

    fn cell(&self, i: usize, t: usize) -> Result<Cell<'_>> {
        if i >= self.n {
            return Err(MetricsError::IndexOutOfRange {
                what: "regression example",
                index: i,
                len: self.n,
            });
        }
        if t >= self.targets {
            return Err(MetricsError::IndexOutOfRange {
                what: "regression target",
                index: t,
                len: self.targets,
            });
        }
        Ok(self.cell_at(i * self.targets + t))
    }

    fn cell_at(&self, c: usize) -> Cell<'_> {
        let s = self.samples;
        Cell {
            mu: &self.mu[c * s..(c + 1) * s],
            sigma: &self.sigma[c * s..(c + 1) * s],
            mean: self.mean[c],
        }
    }

    fn cells(&self) -> impl IndexedParallelIterator<Item = Cell<'_>> + '_ {
        (0..self.n * self.targets)
            .into_par_iter()
            .with_min_len(ROWS_PER_TASK)
            .map(|c| self.cell_at(c))
    }

    /// The mixture components of example `i`, target `t`: the sampled means and standard
    /// deviations (`S` each).
    ///
    /// # Errors
    /// [`MetricsError::IndexOutOfRange`].
    pub fn components(&self, i: usize, t: usize) -> Result<(&[f64], &[f64])> {
        let c = self.cell(i, t)?;
        Ok((c.mu, c.sigma))
    }

    /// The mixture CDF `F(y) = (1/S) sum_s Phi((y - mu_s) / sigma_s)` of example `i`, target
    /// `t`.
    ///
    /// # Errors
    /// [`MetricsError::IndexOutOfRange`], or [`MetricsError::InvalidParameter`] for a NaN `y`.
    pub fn cdf(&self, i: usize, t: usize, y: f64) -> Result<f64> {
        if y.is_nan() {
            return Err(MetricsError::InvalidParameter {
                name: "y",
                value: y,
                reason: "must not be NaN",
            });
        }
        Ok(self.cell(i, t)?.cdf(y))
    }

    /// The `p`-quantile `F^-1(p)` of example `i`, target `t`, for `0 < p < 1`: the root of the
    /// mixture CDF bracketed by `[min_s(mu_s - 40 sigma_s), max_s(mu_s + 40 sigma_s)]`, found
    /// by Newton steps safeguarded by bisection (`rtsafe`, Press et al., Numerical Recipes,
    /// section 9.4) to about `1e-12` times the narrowest component's sigma. Above the median,
    /// the survival function is solved instead, which keeps the upper tail accurate.
    ///
    /// # Errors
    /// [`MetricsError::IndexOutOfRange`], [`MetricsError::InvalidParameter`] unless `0 < p < 1`.
    pub fn quantile(&self, i: usize, t: usize, p: f64) -> Result<f64> {
        if !(p > 0.0 && p < 1.0) {
            return Err(MetricsError::InvalidParameter {
                name: "p",
                value: p,
                reason: "a quantile's probability must lie strictly between 0 and 1",
            });
        }
        let c = self.cell(i, t)?;
        Ok(if p <= 0.5 {
            c.quantile(p, false)
        } else {
            c.quantile(1.0 - p, true)
        })
    }

    /// The central interval at `level` of example `i`, target `t`: the mixture quantiles at
    /// `(1 - level) / 2` and `(1 + level) / 2` (see [`RegressionPredictive::quantile`]).
    ///
    /// ```
    /// use bnn_metrics::RegressionPredictive;
    /// let pred = RegressionPredictive::from_gaussian(&[0.0], &[1.0], 1, 1)?;
    /// let (lo, hi) = pred.interval(0, 0, 0.95)?;
    /// // scipy.stats.norm.ppf(0.975) = 1.959963984540054
    /// assert!((hi - 1.959963984540054).abs() < 1e-9 && (lo + hi).abs() < 1e-9);
    /// # Ok::<(), bnn_metrics::MetricsError>(())
    /// ```
    ///
    /// # Errors
    /// [`MetricsError::IndexOutOfRange`], [`MetricsError::InvalidParameter`] unless
    /// `0 < level < 1`.
    pub fn interval(&self, i: usize, t: usize, level: f64) -> Result<(f64, f64)> {
        check_level(level)?;
        Ok(self.cell(i, t)?.interval(level))
    }

    /// The central intervals at `level` of every output, row-major `[n, targets]`.
    ///
    /// # Errors
    /// [`MetricsError::InvalidParameter`] unless `0 < level < 1`.
    pub fn intervals(&self, level: f64) -> Result<Vec<(f64, f64)>> {
        check_level(level)?;
        Ok(self.cells().map(|c| c.interval(level)).collect())
    }

    /// Validates observed targets against this predictive's shape (shape, then finiteness).
    pub(crate) fn check_y(&self, y: &[f32]) -> Result<()> {
        check_cells("regression targets", y, self.n, self.targets)
    }

    /// Number of outputs `n * targets`.
    fn len(&self) -> usize {
        self.n * self.targets
    }
}

/// The `S` components of one output's mixture.
#[derive(Clone, Copy)]
struct Cell<'a> {
    mu: &'a [f64],
    sigma: &'a [f64],
    mean: f64,
}

impl Cell<'_> {
    fn weight(&self) -> f64 {
        1.0 / self.mu.len() as f64
    }

    /// The mixture's mean of `f((y - mu) / sigma, sigma)` over its components.
    fn mix(&self, y: f64, f: impl Fn(f64, f64) -> f64) -> f64 {
        let sum: f64 = self
            .mu
            .iter()
            .zip(self.sigma)
            .map(|(&m, &s)| f((y - m) / s, s))
            .sum();
        sum * self.weight()
    }

    fn cdf(&self, y: f64) -> f64 {
        self.mix(y, |z, _| normal_cdf(z))
    }

    fn sf(&self, y: f64) -> f64 {
        self.mix(y, |z, _| normal_sf(z))
    }

    fn pdf(&self, y: f64) -> f64 {
        self.mix(y, |z, s| normal_pdf(z) / s)
    }

    /// Lower tail (`upper == false`): the `x` with `F(x) = prob`; upper tail: the `x` with
    /// `1 - F(x) = prob`. `0 < prob <= 1/2`.
    fn quantile(&self, prob: f64, upper: bool) -> f64 {
        // g is increasing in x, with its root at the quantile.
        let g = |x: f64| {
            if upper {
                prob - self.sf(x)
            } else {
                self.cdf(x) - prob
            }
        };
        let (mut a, mut b, mut min_sigma) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY);
        for (&m, &s) in self.mu.iter().zip(self.sigma) {
            a = a.min(m - BRACKET_SIGMAS * s);
            b = b.max(m + BRACKET_SIGMAS * s);
            min_sigma = min_sigma.min(s);
        }
        let abs_tol = QUANTILE_TOLERANCE * min_sigma;
        let tol = |x: f64| abs_tol + 4.0 * f64::EPSILON * x.abs();
        if g(a) >= 0.0 {
            return a;
        }
        if g(b) <= 0.0 {
            return b;
        }
        // rtsafe (Numerical Recipes 9.4): Newton while it stays in the bracket and halves the
        // step, bisection otherwise; the bracket [a, b] always holds the root.
        let mut x = self.mean.clamp(a, b);
        let mut dx_old = b - a;
        let mut dx = dx_old;
        let mut gx = g(x);
        let mut d = self.pdf(x);
        for _ in 0..QUANTILE_MAX_ITER {
            if gx == 0.0 {
                return x;
            }
            if gx < 0.0 {
                a = x;
            } else {
                b = x;
            }
            let newton_leaves = ((x - b) * d - gx) * ((x - a) * d - gx) > 0.0;
            let newton_slow = (2.0 * gx).abs() > (dx_old * d).abs();
            dx_old = dx;
            if newton_leaves || newton_slow || d <= 0.0 {
                dx = 0.5 * (b - a);
                x = a + dx;
            } else {
                dx = gx / d;
                x -= dx;
            }
            if dx.abs() <= tol(x) || b - a <= tol(x) {
                return x;
            }
            gx = g(x);
            d = self.pdf(x);
        }
        x
    }

    fn interval(&self, level: f64) -> (f64, f64) {
        let tail = 0.5 * (1.0 - level);
        (self.quantile(tail, false), self.quantile(tail, true))
    }

    /// `-ln((1/S) sum_s N(y; mu_s, sigma_s^2))` by log-sum-exp.
    fn nll(&self, y: f64) -> f64 {
        let log_terms = self.mu.iter().zip(self.sigma).map(|(&m, &s)| {
            let z = (y - m) / s;
            -HALF_LN_2PI - s.ln() - 0.5 * z * z
        });
        let max = log_terms.clone().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = log_terms.map(|l| (l - max).exp()).sum();
        -(max + (sum * self.weight()).ln())
    }

    /// CRPS of the mixture in closed form (Grimit et al. 2006, eq. 4 with equal weights).
    fn crps(&self, y: f64) -> f64 {
        let w = self.weight();
        let mut first = 0.0;
        for (&m, &s) in self.mu.iter().zip(self.sigma) {
            first += crps_a(y - m, s * s);
        }
        // Diagonal terms A(0, 2 sigma^2) = 2 sqrt(2) sigma phi(0) = 2 sigma / sqrt(pi);
        // off-diagonal pairs appear twice.
        let mut pairs = 0.0;
        for (j, (&mj, &sj)) in self.mu.iter().zip(self.sigma).enumerate() {
            pairs += 2.0 * sj * FRAC_1_SQRT_PI;
            for (&mk, &sk) in self.mu[j + 1..].iter().zip(&self.sigma[j + 1..]) {
                pairs += 2.0 * crps_a(mj - mk, sj * sj + sk * sk);
            }
        }
        w * first - 0.5 * w * w * pairs
    }
}

/// `A(m, v) = 2 sqrt(v) phi(m / sqrt(v)) + m (2 Phi(m / sqrt(v)) - 1)`, the expected absolute
/// value of `N(m, v)`; `2 Phi(z) - 1 = erf(z / sqrt 2)`.
fn crps_a(m: f64, v: f64) -> f64 {
    let sd = v.sqrt();
    let z = m / sd;
    2.0 * sd * normal_pdf(z) + m * erf(z * std::f64::consts::FRAC_1_SQRT_2)
}

/// Mean over outputs of a per-output value, reduced sequentially (deterministic).
fn mean_over<F>(pred: &RegressionPredictive, y: &[f32], f: F) -> Result<f64>
where
    F: Fn(Cell<'_>, f64) -> f64 + Sync,
{
    pred.check_y(y)?;
    let values: Vec<f64> = pred
        .cells()
        .zip(y.par_iter())
        .map(|(c, &v)| f(c, f64::from(v)))
        .collect();
    Ok(values.iter().sum::<f64>() / values.len() as f64)
}

/// Root mean squared error of the predictive mean, over every example and target:
/// `sqrt(mean_it (y_it - mean_it)^2)`.
///
/// ```
/// use bnn_metrics::{RegressionPredictive, rmse};
/// let pred = RegressionPredictive::from_gaussian(&[0.0, 0.0], &[1.0, 1.0], 2, 1)?;
/// assert_eq!(rmse(&pred, &[3.0, -4.0])?, 12.5f64.sqrt());
/// # Ok::<(), bnn_metrics::MetricsError>(())
/// ```
///
/// # Errors
/// [`MetricsError::Shape`] or [`MetricsError::NonFinite`] for bad targets `y` (`[n, targets]`).
pub fn rmse(pred: &RegressionPredictive, y: &[f32]) -> Result<f64> {
    Ok(mean_over(pred, y, |c, v| (v - c.mean) * (v - c.mean))?.sqrt())
}

/// Mean negative log-likelihood (nats) of the mixture:
/// `mean_it -ln((1/S) sum_s N(y_it; mu_s, sigma_s^2))`, with log-sum-exp over the samples so
/// that far-off targets do not underflow.
///
/// # Errors
/// As [`rmse`].
pub fn gaussian_nll(pred: &RegressionPredictive, y: &[f32]) -> Result<f64> {
    mean_over(pred, y, |c, v| c.nll(v))
}

/// Mean continuous ranked probability score `CRPS(F, y) = int (F(x) - 1{x >= y})^2 dx`, in the
/// closed form for a Gaussian mixture with weights `w_s` (Grimit, Gneiting, Berrocal &
/// Johnson 2006, "The continuous ranked probability score for circular variables and its
/// application to mesoscale forecast ensemble verification", Q. J. R. Meteorol. Soc. 132):
///
/// `CRPS = sum_s w_s A(y - mu_s, sigma_s^2) - 1/2 sum_{s,r} w_s w_r A(mu_s - mu_r, sigma_s^2 + sigma_r^2)`,
/// `A(m, v) = 2 sqrt(v) phi(m / sqrt v) + m (2 Phi(m / sqrt v) - 1)`,
///
/// here with `w_s = 1/S`; `O(S^2)` per output. For `S = 1` it is the Gaussian CRPS of
/// Gneiting et al. 2005 (`properscoring.crps_gaussian`). Same units as `y`; lower is better.
///
/// # Errors
/// As [`rmse`].
pub fn crps(pred: &RegressionPredictive, y: &[f32]) -> Result<f64> {
    mean_over(pred, y, |c, v| c.crps(v))
}

/// Probability integral transform `F_it(y_it)` of every output, row-major `[n, targets]`.
/// Uniform on `[0, 1]` for a calibrated predictive.
///
/// # Errors
/// As [`rmse`].
pub fn pit(pred: &RegressionPredictive, y: &[f32]) -> Result<Vec<f64>> {
    pred.check_y(y)?;
    Ok(pred
        .cells()
        .zip(y.par_iter())
        .map(|(c, &v)| c.cdf(f64::from(v)))
        .collect())
}

/// Mean absolute calibration error of the PIT values: the mean over the 99 levels
/// `p = 0.01, 0.02, ..., 0.99` of `|#{PIT_it <= p} / (n targets) - p|`, in `[0, 0.5]`.
///
/// Kuleshov, Fenner & Ermon 2018 ("Accurate uncertainties for deep learning using calibrated
/// regression", ICML, eq. 9) define the calibration error with the *squared* gap (and weights);
/// this is the absolute form, as the mean absolute calibration error of Uncertainty Toolbox
/// (`mean_absolute_calibration_error` with `prop_type="quantile"`; it uses the grid
/// `linspace(0, 1, 100)`, where this uses the 99 interior levels), so that it reads as an
/// average coverage gap.
///
/// # Errors
/// As [`rmse`].
pub fn pit_calibration_error(pred: &RegressionPredictive, y: &[f32]) -> Result<f64> {
    Ok(pit_error(pit(pred, y)?))
}

fn pit_error(mut pit: Vec<f64>) -> f64 {
    pit.sort_unstable_by(f64::total_cmp);
    let total = pit.len() as f64;
    let gaps: f64 = (1..=99)
        .map(|k| {
            let p = f64::from(k) / 100.0;
            let below = pit.partition_point(|&v| v <= p) as f64;
            (below / total - p).abs()
        })
        .sum();
    gaps / 99.0
}

/// Observed coverage and mean width of the central intervals at one level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IntervalCoverage {
    /// Nominal level of the central interval.
    pub level: f64,
    /// Fraction of outputs whose target lies in its interval (bounds included).
    pub coverage: f64,
    /// Mean width `hi - lo` of the intervals.
    pub mean_width: f64,
}

/// One point of a regression reliability figure: observed coverage against nominal level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CoveragePoint {
    /// Nominal level of the central interval.
    pub level: f64,
    /// Fraction of outputs whose target lies in its central interval at `level`.
    pub coverage: f64,
}

/// Per output, `(F(y), 1 - F(y))`, each computed directly (no cancellation in the tails).
fn tails(pred: &RegressionPredictive, y: &[f32]) -> Result<Vec<(f64, f64)>> {
    pred.check_y(y)?;
    Ok(pred
        .cells()
        .zip(y.par_iter())
        .map(|(c, &v)| (c.cdf(f64::from(v)), c.sf(f64::from(v))))
        .collect())
}

/// `y` lies in the central interval at `level` exactly when `F(y) >= (1 - level)/2` and
/// `1 - F(y) >= (1 - level)/2` (F continuous and increasing), without solving for the bounds.
fn covered_fraction(tails: &[(f64, f64)], level: f64) -> f64 {
    let tail = 0.5 * (1.0 - level);
    let inside = tails
        .iter()
        .filter(|&&(lo, hi)| lo >= tail && hi >= tail)
        .count();
    inside as f64 / tails.len() as f64
}

/// Coverage and mean width of the central intervals at `level` (see
/// [`RegressionPredictive::interval`]), over every example and target.
///
/// A target is covered when `F(y) >= (1 - level)/2` and `1 - F(y) >= (1 - level)/2`, which is
/// `lo <= y <= hi` for the exact quantiles.
///
/// ```
/// use bnn_metrics::{RegressionPredictive, interval_coverage};
/// let pred = RegressionPredictive::from_gaussian(&[0.0, 0.0], &[1.0, 1.0], 2, 1)?;
/// let c = interval_coverage(&pred, &[0.5, 3.0], 0.9)?;
/// assert_eq!(c.coverage, 0.5); // 3 is outside +-1.645
/// assert!((c.mean_width - 2.0 * 1.6448536269514722).abs() < 1e-9);
/// # Ok::<(), bnn_metrics::MetricsError>(())
/// ```
///
/// # Errors
/// As [`rmse`], plus [`MetricsError::InvalidParameter`] unless `0 < level < 1`.
pub fn interval_coverage(
    pred: &RegressionPredictive,
    y: &[f32],
    level: f64,
) -> Result<IntervalCoverage> {
    check_level(level)?;
    let t = tails(pred, y)?;
    Ok(coverage_with_width(pred, &t, level))
}

fn coverage_with_width(
    pred: &RegressionPredictive,
    tails: &[(f64, f64)],
    level: f64,
) -> IntervalCoverage {
    let widths: Vec<f64> = pred
        .cells()
        .map(|c| {
            let (lo, hi) = c.interval(level);
            hi - lo
        })
        .collect();
    IntervalCoverage {
        level,
        coverage: covered_fraction(tails, level),
        mean_width: widths.iter().sum::<f64>() / widths.len() as f64,
    }
}

/// Observed coverage of the central intervals at each nominal level, for a reliability figure
/// (coverage against level; the diagonal is perfect calibration). Use
/// [`DEFAULT_RELIABILITY_LEVELS`] (`0.05, 0.10, ..., 0.95`) unless you have a reason not to.
///
/// # Errors
/// As [`rmse`], plus [`MetricsError::Empty`] without levels and
/// [`MetricsError::InvalidParameter`] for a level outside `(0, 1)`.
pub fn regression_reliability(
    pred: &RegressionPredictive,
    y: &[f32],
    levels: &[f64],
) -> Result<Vec<CoveragePoint>> {
    if levels.is_empty() {
        return Err(MetricsError::Empty {
            what: "reliability levels",
        });
    }
    for &l in levels {
        check_level(l)?;
    }
    let t = tails(pred, y)?;
    Ok(levels
        .iter()
        .map(|&level| CoveragePoint {
            level,
            coverage: covered_fraction(&t, level),
        })
        .collect())
}

/// All regression metrics of one predictive against its targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressionSummary {
    /// Root mean squared error of the predictive mean (see [`rmse`]).
    pub rmse: f64,
    /// Mean negative log-likelihood of the mixture, nats (see [`gaussian_nll`]).
    pub gaussian_nll: f64,
    /// Mean CRPS (see [`crps`]).
    pub crps: f64,
    /// Coverage and width of the central intervals at [`DEFAULT_INTERVAL_LEVELS`].
    pub intervals: Vec<IntervalCoverage>,
    /// Mean absolute PIT calibration error (see [`pit_calibration_error`]).
    pub pit_calibration_error: f64,
    /// Mean aleatoric variance over outputs.
    pub mean_aleatoric_variance: f64,
    /// Mean epistemic variance over outputs.
    pub mean_epistemic_variance: f64,
    /// Number of examples.
    pub n: usize,
    /// Number of targets per example.
    pub targets: usize,
    /// Number of Monte Carlo samples in the mixture.
    pub n_samples: usize,
}

impl RegressionSummary {
    /// Computes every metric of the summary.
    ///
    /// ```
    /// use bnn_metrics::{McRegression, RegressionSummary};
    /// let mut mc = McRegression::new(2, 1)?;
    /// mc.push(&[0.0, 1.0], &[1.0, 1.0])?;
    /// mc.push(&[0.2, 0.8], &[1.0, 1.0])?;
    /// let s = RegressionSummary::compute(&mc.finish()?, &[0.1, 0.9])?;
    /// assert!(s.rmse < 1e-7 && s.n_samples == 2 && s.intervals.len() == 3);
    /// # Ok::<(), bnn_metrics::MetricsError>(())
    /// ```
    ///
    /// # Errors
    /// As [`rmse`].
    pub fn compute(pred: &RegressionPredictive, y: &[f32]) -> Result<Self> {
        let t = tails(pred, y)?;
        let len = pred.len() as f64;
        Ok(Self {
            rmse: rmse(pred, y)?,
            gaussian_nll: gaussian_nll(pred, y)?,
            crps: crps(pred, y)?,
            intervals: DEFAULT_INTERVAL_LEVELS
                .iter()
                .map(|&l| coverage_with_width(pred, &t, l))
                .collect(),
            pit_calibration_error: pit_error(t.iter().map(|v| v.0).collect()),
            mean_aleatoric_variance: pred.aleatoric.iter().sum::<f64>() / len,
            mean_epistemic_variance: pred.epistemic.iter().sum::<f64>() / len,
            n: pred.n,
            targets: pred.targets,
            n_samples: pred.samples,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `|a - b| <= tol * max(1, |b|)`.
    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    fn assert_all_close(got: &[f64], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len());
        for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(close(g, w, tol), "[{k}]: got {g}, want {w}");
        }
    }

    // Reference case (every value exact in f32): S = 3 samples, n = 2 examples, 2 targets.
    // In Python: mu = np.array([[0.5, -1.25, 2.0, 10.0], [1.5, -0.75, 2.5, 4.0],
    // [-0.5, -1.0, 1.0, 7.0]]), sd = np.array([[1.0, 0.5, 0.25, 3.0], [0.75, 0.5, 2.0, 1.5],
    // [1.25, 0.125, 0.5, 2.5]]), y = np.array([0.75, -2.0, 2.25, 15.5]), one row per sample,
    // columns the row-major outputs; F(c, x) = np.mean(stats.norm.cdf(x, mu[:, c], sd[:, c])).
    const MU: [[f32; 4]; 3] = [
        [0.5, -1.25, 2.0, 10.0],
        [1.5, -0.75, 2.5, 4.0],
        [-0.5, -1.0, 1.0, 7.0],
    ];
    const SD: [[f32; 4]; 3] = [
        [1.0, 0.5, 0.25, 3.0],
        [0.75, 0.5, 2.0, 1.5],
        [1.25, 0.125, 0.5, 2.5],
    ];
    const Y: [f32; 4] = [0.75, -2.0, 2.25, 15.5];

    fn mixture() -> RegressionPredictive {
        let mut mc = McRegression::new(2, 2).unwrap();
        for (m, s) in MU.iter().zip(&SD) {
            mc.push(m, s).unwrap();
        }
        mc.finish().unwrap()
    }

    #[test]
    fn normal_cdf_and_erf_match_scipy() {
        // For x <= -12, Phi(x) from its asymptotic series in 60-digit decimal arithmetic
        // (scipy's ndtr is off by up to 1e-13 relative there, see `normal_cdf`): in Python,
        // getcontext().prec = 60; X = Decimal(-x); phi = (-(X*X)/2).exp() / (2*PI).sqrt();
        // float(phi / X * sum_k (-1)^k (2k-1)!! / X^(2k)), summed while the terms decrease.
        // For x >= -10, scipy.special.ndtr(x), SciPy 1.17.1.
        let ndtr = [
            (-37.0, 5.725571222524577e-300),
            (-35.0, 1.1249107064724062e-268),
            (-30.0, 4.906713927148187e-198),
            (-25.0, 3.056696706382561e-138),
            (-20.0, 2.7536241186062337e-89),
            (-15.0, 3.670966199312751e-51),
            (-12.0, 1.776482112077679e-33),
            (-10.0, 7.61985302416047e-24),
            (-8.5, 9.47953482220325e-18),
            (-5.0, 2.866515718791933e-07),
            (-3.0, 0.0013498980316300933),
            (-2.0, 0.022750131948179195),
            (-1.5, 0.06680720126885807),
            (-1.0, 0.15865525393145707),
            (-0.5, 0.3085375387259869),
            (-0.1, 0.460172162722971),
            (0.0, 0.5),
            (0.3, 0.6179114221889526),
            (0.7, 0.758036347776927),
            (1.0, 0.8413447460685429),
            (1.3, 0.9031995154143897),
            (2.0, 0.9772498680518208),
            (3.0, 0.9986501019683699),
            (5.0, 0.9999997133484281),
            (8.0, 0.9999999999999993),
        ];
        for (x, want) in ndtr {
            let got = normal_cdf(x);
            assert!(
                ((got - want) / want).abs() <= 1e-14,
                "Phi({x}) = {got:e}, scipy {want:e}"
            );
        }
        // scipy.special.erf(x).
        let erfs = [
            (-7.0, -1.0),
            (-3.0, -0.9999779095030014),
            (-1.0, -0.8427007929497148),
            (-0.5, -0.5204998778130465),
            (-1e-10, -1.1283791670955126e-10),
            (0.2, 0.22270258921047845),
            (0.8, 0.7421009647076605),
            (1.1, 0.8802050695740817),
            (2.0, 0.9953222650189527),
            (3.5, 0.9999992569016276),
            (6.5, 1.0),
        ];
        for (x, want) in erfs {
            let got = erf(x);
            assert!(
                ((got - want) / want).abs() <= 1e-14,
                "erf({x}) = {got:e}, scipy {want:e}"
            );
        }
        assert!(normal_cdf(f64::NAN).is_nan() && erf(f64::NAN).is_nan());
        assert_eq!(normal_cdf(f64::NEG_INFINITY), 0.0);
        assert_eq!(normal_cdf(f64::INFINITY), 1.0);
        assert_eq!(normal_sf(40.0), 0.0);
    }

    #[test]
    fn variance_split_follows_the_law_of_total_variance() {
        let p = mixture();
        assert_eq!((p.n(), p.targets(), p.n_samples()), (2, 2, 3));
        // mu.mean(0), (sd**2).mean(0), mu.var(0) (ddof = 0)
        assert_all_close(p.mean(), &[0.5, -1.0, 1.8333333333333333, 7.0], 1e-15);
        assert_all_close(
            p.aleatoric_variance(),
            &[1.0416666666666667, 0.171875, 1.4375, 5.833333333333333],
            1e-15,
        );
        assert_all_close(
            p.epistemic_variance(),
            &[
                0.6666666666666666,
                0.041666666666666664,
                0.38888888888888884,
                6.0,
            ],
            1e-15,
        );
        let total = p.total_variance();
        let std = p.std();
        for c in 0..4 {
            // Var of the mixture from its second moment: E[y^2] - E[y]^2.
            let (m, s) = (&p.mu[c * 3..c * 3 + 3], &p.sigma[c * 3..c * 3 + 3]);
            let second: f64 = m.iter().zip(s).map(|(m, s)| m * m + s * s).sum::<f64>() / 3.0;
            assert!(close(total[c], second - p.mean[c] * p.mean[c], 1e-13));
            assert!(close(std[c] * std[c], total[c], 1e-15));
        }
        let (m, s) = p.components(1, 1).unwrap();
        assert_eq!((m, s), (&[10.0, 4.0, 7.0][..], &[3.0, 1.5, 2.5][..]));
    }

    #[test]
    fn cdf_and_quantiles_match_brentq() {
        let p = mixture();
        // [F(c, y[c]) for c in range(4)]
        let cdf = [
            0.5329021085609745,
            0.024338955531544942,
            0.7617989519708847,
            0.988762187716499,
        ];
        for c in 0..4 {
            let got = p.cdf(c / 2, c % 2, f64::from(Y[c])).unwrap();
            assert!(close(got, cdf[c], 1e-14), "{c}: {got} vs {}", cdf[c]);
        }
        // optimize.brentq(lambda x: F(c, x) - p, lo, hi, xtol=1e-14, rtol=4 * eps) with
        // lo, hi = min(mu - 40 sd), max(mu + 40 sd) over the samples of output c.
        let quantiles = [
            (
                0.05,
                [
                    -1.847357044966845,
                    -1.8068002646330539,
                    0.09605934531947881,
                    2.2177098815208334,
                ],
            ),
            (
                0.25,
                [
                    -0.3536142984186229,
                    -1.2134408891641968,
                    1.0245829308578331,
                    4.305253636008248,
                ],
            ),
            (
                0.5,
                [
                    0.6393811167083764,
                    -1.0,
                    1.7869369262605683,
                    6.518559609702861,
                ],
            ),
            (
                0.95,
                [
                    2.411540958732743,
                    -0.1931997353669466,
                    4.5728667789914175,
                    13.195531555825914,
                ],
            ),
            (
                0.975,
                [
                    2.694588420665554,
                    -0.006670849719882147,
                    5.379062941876909,
                    14.353508035009627,
                ],
            ),
        ];
        for (prob, want) in quantiles {
            for (c, &w) in want.iter().enumerate() {
                let got = p.quantile(c / 2, c % 2, prob).unwrap();
                assert!(close(got, w, 1e-9), "q({prob}) of {c}: {got} vs {w}");
            }
        }
        let intervals = p.intervals(0.9).unwrap();
        for (c, &(lo, hi)) in intervals.iter().enumerate() {
            assert_eq!((lo, hi), p.interval(c / 2, c % 2, 0.9).unwrap());
            assert!(close(lo, quantiles[0].1[c], 1e-9));
            assert!(close(hi, quantiles[3].1[c], 1e-9));
        }
        // Quantiles deep in the tails still invert the CDF (and the survival function: the
        // upper tail probability is 1 - (1 - prob) as rounded, not prob).
        for prob in [1e-12, 1e-6, 0.3] {
            let lo = p.quantile(1, 1, prob).unwrap();
            let hi = p.quantile(1, 1, 1.0 - prob).unwrap();
            let tail = 1.0 - (1.0 - prob);
            let cell = p.cell(1, 1).unwrap();
            assert!(((cell.cdf(lo) - prob) / prob).abs() < 1e-9, "{prob}");
            assert!(((cell.sf(hi) - tail) / tail).abs() < 1e-9, "{prob}");
        }
    }

    #[test]
    fn nll_crps_rmse_match_independent_references() {
        let p = mixture();
        let y = Y;
        // np.mean([-(special.logsumexp(stats.norm.logpdf(y[c], mu[:, c], sd[:, c]))
        //   - np.log(3)) for c in range(4)]); per output 1.2007864094889498,
        //   2.322475630269727, 0.91557570212213, 4.77701578690846.
        assert!(close(
            gaussian_nll(&p, &y).unwrap(),
            2.303963382197317,
            1e-12
        ));
        // Per output: integrate.quad(lambda x: F(c, x)**2, lo, y[c]) +
        //   integrate.quad(lambda x: (1 - F(c, x))**2, y[c], hi) (epsabs=1e-14, epsrel=1e-13);
        //   0.3158262878333091, 0.7602481642349824, 0.35202659258933255, 6.581945281283186.
        let crps_each = [
            0.3158262878333091,
            0.7602481642349824,
            0.35202659258933255,
            6.581945281283186,
        ];
        for (c, &w) in crps_each.iter().enumerate() {
            let got = p.cell_at(c).crps(f64::from(y[c]));
            assert!(close(got, w, 1e-9), "{c}: {got} vs {w}");
        }
        assert!(close(crps(&p, &y).unwrap(), 2.0025115814852024, 1e-9));
        // np.sqrt(np.mean((y - mu.mean(0))**2))
        assert!(close(rmse(&p, &y).unwrap(), 4.286202022511046, 1e-14));
        // Coverage at 0.9: outputs 0 and 2 are inside; mean width
        // np.mean([q(c, 0.95) - q(c, 0.05) for c in range(4)]).
        let c = interval_coverage(&p, &y, 0.9).unwrap();
        assert_eq!(c.coverage, 0.5);
        assert!(close(c.mean_width, 5.331781910235678, 1e-9));
    }

    #[test]
    fn single_gaussian_crps_is_properscoring_crps_gaussian() {
        // z = (y - m) / s; s * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))
        // (properscoring.crps_gaussian) for m = [0, 1.5, -2], s = [1, 0.5, 3], y = [0.3, -1, 4].
        let p =
            RegressionPredictive::from_gaussian(&[0.0, 1.5, -2.0], &[1.0, 0.5, 3.0], 3, 1).unwrap();
        let y = [0.3f32, -1.0, 4.0];
        let want = [0.2693329006866635, 2.217905261687777, 4.35837546505771];
        for (c, &w) in want.iter().enumerate() {
            let v = [0.3f64, -1.0, 4.0][c];
            assert!(close(p.cell_at(c).crps(v), w, 1e-12), "{c}");
        }
        // 0.3 is not exact in f32: compare the mean with the f32 target.
        let mean = (crps_a_check(0.0, 1.0, f64::from(0.3f32)) + want[1] + want[2]) / 3.0;
        assert!(close(crps(&p, &y).unwrap(), mean, 1e-12));
        assert_eq!(p.epistemic_variance(), &[0.0, 0.0, 0.0]);
    }

    /// The Gaussian CRPS of Gneiting et al. 2005 (the properscoring formula), for one target.
    fn crps_a_check(m: f64, s: f64, y: f64) -> f64 {
        let z = (y - m) / s;
        s * (z * (2.0 * normal_cdf(z) - 1.0) + 2.0 * normal_pdf(z) - FRAC_1_SQRT_PI)
    }

    #[test]
    fn pit_and_its_calibration_error() {
        let p = RegressionPredictive::from_gaussian(&[0.0; 7], &[1.0; 7], 7, 1).unwrap();
        let y = [-2.0f32, -1.0, -0.5, 0.0, 0.3, 1.25, 2.5];
        let pits = pit(&p, &y).unwrap();
        // stats.norm.cdf(yy) with yy = np.array([-2, -1, -0.5, 0, 0.3, 1.25, 2.5])
        // (0.3 as f32 differs from 0.3 by 1.2e-8: its PIT is checked to 1e-8).
        let want = [
            0.022750131948179195,
            0.15865525393145707,
            0.3085375387259869,
            0.5,
            0.6179114221889526,
            0.8943502263331446,
            0.9937903346742238,
        ];
        for (k, (&g, &w)) in pits.iter().zip(&want).enumerate() {
            let tol = if k == 4 { 1e-8 } else { 1e-14 };
            assert!(close(g, w, tol), "{k}: {g} vs {w}");
        }
        // np.mean([abs(np.mean(pits <= k / 100) - k / 100) for k in range(1, 100)])
        let e = pit_calibration_error(&p, &y).unwrap();
        assert!(close(e, 0.060375180375180366, 1e-14), "{e}");
        // All PIT values at 1/2: the gap is |1{p >= 0.5} - p|, mean over the grid.
        let e = pit_calibration_error(&p, &[0.0; 7]).unwrap();
        let direct: f64 = (1..=99)
            .map(|k| {
                let q = f64::from(k) / 100.0;
                (if q >= 0.5 { 1.0 } else { 0.0 } - q).abs()
            })
            .sum::<f64>()
            / 99.0;
        assert!(close(e, direct, 1e-15) && e > 0.24);
    }

    #[test]
    fn reliability_coverage_agrees_with_the_intervals() {
        let p = mixture();
        let points = regression_reliability(&p, &Y, &DEFAULT_RELIABILITY_LEVELS).unwrap();
        assert_eq!(points.len(), 19);
        for pt in &points {
            let intervals = p.intervals(pt.level).unwrap();
            let inside = intervals
                .iter()
                .zip(&Y)
                .filter(|&(&(lo, hi), &y)| lo <= f64::from(y) && f64::from(y) <= hi)
                .count();
            assert_eq!(pt.coverage, inside as f64 / 4.0, "{}", pt.level);
        }
        let s = RegressionSummary::compute(&p, &Y).unwrap();
        assert_eq!(s.intervals.len(), 3);
        assert_eq!(s.intervals[1], interval_coverage(&p, &Y, 0.9).unwrap());
        assert_eq!(s.rmse, rmse(&p, &Y).unwrap());
        assert_eq!(s.crps, crps(&p, &Y).unwrap());
        assert_eq!(s.gaussian_nll, gaussian_nll(&p, &Y).unwrap());
        assert_eq!(
            s.pit_calibration_error,
            pit_calibration_error(&p, &Y).unwrap()
        );
        assert!(close(
            s.mean_epistemic_variance,
            (0.6666666666666666 + 0.041666666666666664 + 0.38888888888888884 + 6.0) / 4.0,
            1e-15
        ));
        assert_eq!((s.n, s.targets, s.n_samples), (2, 2, 3));
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(matches!(
            McRegression::new(0, 1),
            Err(MetricsError::Empty { .. })
        ));
        assert!(matches!(
            McRegression::new(1, 0),
            Err(MetricsError::Empty { .. })
        ));
        let mut mc = McRegression::new(2, 1).unwrap();
        assert!(matches!(
            mc.push(&[0.0], &[1.0, 1.0]),
            Err(MetricsError::Shape { len: 1, .. })
        ));
        assert!(matches!(
            mc.push(&[0.0, 0.0], &[1.0]),
            Err(MetricsError::Shape { len: 1, .. })
        ));
        assert!(matches!(
            mc.push(&[0.0, f32::NAN], &[1.0, 1.0]),
            Err(MetricsError::NonFinite { row: 1, .. })
        ));
        assert!(matches!(
            mc.push(&[0.0, 0.0], &[f32::INFINITY, 1.0]),
            Err(MetricsError::NonFinite { row: 0, .. })
        ));
        for bad in [0.0f32, -1.0, -0.0] {
            assert!(matches!(
                mc.push(&[0.0, 0.0], &[1.0, bad]),
                Err(MetricsError::NonPositive { row: 1, col: 0, .. })
            ));
        }
        assert_eq!(mc.n_samples(), 0);
        assert!(matches!(mc.finish(), Err(MetricsError::Empty { .. })));

        let p = mixture();
        assert!(matches!(
            rmse(&p, &[0.0; 3]),
            Err(MetricsError::Shape { .. })
        ));
        let nan = [0.0, 0.0, f32::NAN, 0.0];
        assert!(matches!(
            crps(&p, &nan),
            Err(MetricsError::NonFinite { row: 1, col: 0, .. })
        ));
        assert!(gaussian_nll(&p, &nan).is_err());
        assert!(pit(&p, &nan).is_err());
        assert!(pit_calibration_error(&p, &nan).is_err());
        assert!(RegressionSummary::compute(&p, &nan).is_err());
        for level in [0.0, 1.0, 1.5, -0.1, f64::NAN] {
            assert!(interval_coverage(&p, &Y, level).is_err(), "{level}");
            assert!(p.intervals(level).is_err(), "{level}");
            assert!(p.interval(0, 0, level).is_err(), "{level}");
            assert!(regression_reliability(&p, &Y, &[0.5, level]).is_err());
            assert!(p.quantile(0, 0, level).is_err(), "{level}");
        }
        assert!(matches!(
            regression_reliability(&p, &Y, &[]),
            Err(MetricsError::Empty { .. })
        ));
        assert!(matches!(
            p.cdf(2, 0, 0.0),
            Err(MetricsError::IndexOutOfRange { index: 2, .. })
        ));
        assert!(matches!(
            p.quantile(0, 2, 0.5),
            Err(MetricsError::IndexOutOfRange { index: 2, .. })
        ));
        assert!(p.cdf(0, 0, f64::NAN).is_err());
        assert!(p.components(5, 0).is_err());
    }

    #[test]
    fn nll_survives_far_targets_and_summary_round_trips() {
        let p = RegressionPredictive::from_gaussian(&[0.0], &[1.0], 1, 1).unwrap();
        // -norm.logpdf(1e4) = 0.5 * 1e8 + 0.5 * ln(2 pi)
        let nll = gaussian_nll(&p, &[1e4]).unwrap();
        assert!(close(nll, 0.5e8 + HALF_LN_2PI, 1e-15));
        let s = RegressionSummary::compute(&mixture(), &Y).unwrap();
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<RegressionSummary>(&json).unwrap(), s);
    }
}
