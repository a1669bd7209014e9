//! Summaries over seeds: the mean and sample standard deviation of one metric ([`MeanSd`]),
//! shared by the test tables ([`crate::results`]) and the validation rows
//! ([`crate::validation`]).

use serde::{Deserialize, Serialize};

/// Mean and sample standard deviation of one metric over seeds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanSd {
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (`n - 1`; 0 for one value).
    pub sd: f64,
}

impl MeanSd {
    /// Of `values` (`None` if empty).
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let sd = if values.len() > 1 {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        Some(Self { mean, sd })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_sd() {
        let m = MeanSd::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!((m.mean - 2.5).abs() < 1e-12);
        assert!((m.sd - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(MeanSd::of(&[7.0]).unwrap().sd, 0.0);
        assert!(MeanSd::of(&[]).is_none());
    }
}
