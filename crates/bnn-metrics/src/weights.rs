//! Posterior statistics of a weight tensor: where a Bayesian model's uncertainty sits.

use serde::{Deserialize, Serialize};

use crate::error::{MetricsError, Result};

/// Summary of one tensor's posterior `N(mu_i, sigma_i^2)`.
///
/// `sigma_over_rms_mu` is the noise-to-signal ratio of the layer: how large the weights'
/// standard deviations are against the typical size of their means. Comparing it between a
/// Bayes-by-Backprop model and its compressed form shows what compression did to the
/// uncertainty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WeightStats {
    /// The tensor's path in its model.
    pub path: String,
    /// Number of weights.
    pub n: usize,
    /// `sqrt(mean(mu^2))`.
    pub rms_mu: f64,
    /// `mean(sigma)`.
    pub mean_sigma: f64,
    /// Median of `sigma` (the lower middle value for an even count).
    pub median_sigma: f64,
    /// `mean_sigma / rms_mu` (infinite when every mean is 0).
    pub sigma_over_rms_mu: f64,
}

impl WeightStats {
    /// Statistics of the weights `(mu[i], sigma[i])` of the tensor at `path`.
    ///
    /// # Errors
    /// [`MetricsError::LengthMismatch`], [`MetricsError::Empty`], or
    /// [`MetricsError::NonFinite`] for a NaN or infinite value (or a negative sigma).
    pub fn compute(path: impl Into<String>, mu: &[f32], sigma: &[f32]) -> Result<Self> {
        if mu.len() != sigma.len() {
            return Err(MetricsError::LengthMismatch {
                what: "weight sigmas vs means",
                expected: mu.len(),
                got: sigma.len(),
            });
        }
        if mu.is_empty() {
            return Err(MetricsError::Empty { what: "weights" });
        }
        for (what, v) in [("weight means", mu), ("weight sigmas", sigma)] {
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                return Err(MetricsError::NonFinite {
                    what,
                    row: i,
                    col: 0,
                    value: f64::from(v[i]),
                });
            }
        }
        if let Some(i) = sigma.iter().position(|&s| s < 0.0) {
            return Err(MetricsError::NonFinite {
                what: "weight sigmas (negative)",
                row: i,
                col: 0,
                value: f64::from(sigma[i]),
            });
        }
        let n = mu.len() as f64;
        let rms_mu = (mu.iter().map(|&m| f64::from(m).powi(2)).sum::<f64>() / n).sqrt();
        let mean_sigma = sigma.iter().map(|&s| f64::from(s)).sum::<f64>() / n;
        let mut sorted = sigma.to_vec();
        sorted.sort_by(f32::total_cmp);
        let median_sigma = f64::from(sorted[(sorted.len() - 1) / 2]);
        Ok(Self {
            path: path.into(),
            n: mu.len(),
            rms_mu,
            mean_sigma,
            median_sigma,
            sigma_over_rms_mu: mean_sigma / rms_mu,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let s = WeightStats::compute("w", &[3.0, -4.0, 0.0, 0.0], &[0.1, 0.4, 0.2, 0.3]).unwrap();
        assert_eq!(s.n, 4);
        assert!((s.rms_mu - 2.5).abs() < 1e-12); // sqrt((9 + 16) / 4)
        assert!((s.mean_sigma - 0.25).abs() < 1e-7);
        assert!((s.median_sigma - 0.2).abs() < 1e-7);
        assert!((s.sigma_over_rms_mu - 0.1).abs() < 1e-7);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(WeightStats::compute("w", &[], &[]).is_err());
        assert!(WeightStats::compute("w", &[1.0], &[0.1, 0.2]).is_err());
        assert!(WeightStats::compute("w", &[f32::NAN], &[0.1]).is_err());
        assert!(WeightStats::compute("w", &[1.0], &[-0.1]).is_err());
    }
}
