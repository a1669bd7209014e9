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

/// Upper edges of [`SigmaMovement`]'s bins of `log10(sigma / initial sigma)`; the last bin is
/// open above. `|log10| < 0.01` is a change of less than 2.3 %.
pub const SIGMA_MOVEMENT_EDGES: [f64; 8] = [-1.0, -0.3, -0.1, -0.01, 0.01, 0.1, 0.3, 1.0];

/// How far a Bayesian model's weight sigmas moved in training from their initial values: a
/// histogram of `log10(sigma / initial sigma)` over every weight, with its quantiles. A
/// posterior whose sigmas sit in the middle bin has barely been trained in its uncertainty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SigmaMovement {
    /// Weights compared.
    pub n: usize,
    /// Weights per bin: below [`SIGMA_MOVEMENT_EDGES`]`[0]`, then between consecutive edges
    /// (lower edge included), then from the last edge up.
    pub counts: Vec<usize>,
    /// The 5 %, 50 % and 95 % quantiles of `log10(sigma / initial sigma)` (nearest rank).
    pub quantiles: [f64; 3],
}

impl SigmaMovement {
    /// The movement from `initial` to `trained`, weight by weight.
    ///
    /// # Errors
    /// [`MetricsError::LengthMismatch`], [`MetricsError::Empty`], or
    /// [`MetricsError::NonFinite`] for a sigma that is not finite and positive.
    pub fn between(initial: &[f32], trained: &[f32]) -> Result<Self> {
        if initial.len() != trained.len() {
            return Err(MetricsError::LengthMismatch {
                what: "trained sigmas vs initial sigmas",
                expected: initial.len(),
                got: trained.len(),
            });
        }
        if initial.is_empty() {
            return Err(MetricsError::Empty { what: "sigmas" });
        }
        for (what, v) in [("initial sigmas", initial), ("trained sigmas", trained)] {
            if let Some(i) = v.iter().position(|&s| !(s.is_finite() && s > 0.0)) {
                return Err(MetricsError::NonFinite {
                    what,
                    row: i,
                    col: 0,
                    value: f64::from(v[i]),
                });
            }
        }
        let mut ratios: Vec<f64> = initial
            .iter()
            .zip(trained)
            .map(|(&a, &b)| (f64::from(b) / f64::from(a)).log10())
            .collect();
        let mut counts = vec![0; SIGMA_MOVEMENT_EDGES.len() + 1];
        for &r in &ratios {
            counts[SIGMA_MOVEMENT_EDGES.partition_point(|&e| e <= r)] += 1;
        }
        ratios.sort_by(f64::total_cmp);
        let at =
            |q: f64| ratios[((q * ratios.len() as f64).ceil() as usize).clamp(1, ratios.len()) - 1];
        Ok(Self {
            n: ratios.len(),
            counts,
            quantiles: [at(0.05), at(0.5), at(0.95)],
        })
    }

    /// The histogram as a Markdown table (bin, weights, share).
    pub fn markdown(&self) -> String {
        let e = SIGMA_MOVEMENT_EDGES;
        let mut s =
            String::from("| log10(sigma / initial sigma) | weights | share |\n|---|---|---|\n");
        for (i, &c) in self.counts.iter().enumerate() {
            let bin = match i {
                0 => format!("< {}", e[0]),
                i if i == e.len() => format!(">= {}", e[e.len() - 1]),
                i => format!("[{}, {})", e[i - 1], e[i]),
            };
            let share = 100.0 * c as f64 / self.n.max(1) as f64;
            s.push_str(&format!("| {bin} | {c} | {share:.1}% |\n"));
        }
        s
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

    #[test]
    fn sigma_movement_bins_and_quantiles_known_values() {
        // Ratios 0.05, 1, 1.001, 1.5, 20: log10 -1.30, 0, 0.0004, 0.176, 1.30 (bins 0, 4, 4, 6, 8).
        let init = [0.2f32, 0.1, 1.0, 0.2, 0.01];
        let trained = [0.01f32, 0.1, 1.001, 0.3, 0.2];
        let m = SigmaMovement::between(&init, &trained).unwrap();
        assert_eq!(m.n, 5);
        assert_eq!(m.counts, vec![1, 0, 0, 0, 2, 0, 1, 0, 1]);
        assert!((m.quantiles[0] - 0.05f64.log10()).abs() < 1e-6);
        assert!(m.quantiles[1].abs() < 1e-3);
        assert!((m.quantiles[2] - 20f64.log10()).abs() < 1e-6);
        let md = m.markdown();
        assert!(md.contains("| [-0.01, 0.01) | 2 | 40.0% |"), "{md}");
        assert!(
            md.contains("| < -1 | 1 | 20.0% |") && md.contains("| >= 1 | 1 |"),
            "{md}"
        );
        assert!(SigmaMovement::between(&[0.1], &[0.1, 0.2]).is_err());
        assert!(SigmaMovement::between(&[], &[]).is_err());
        assert!(SigmaMovement::between(&[0.0], &[0.1]).is_err());
        assert!(SigmaMovement::between(&[0.1], &[f32::NAN]).is_err());
    }
}
