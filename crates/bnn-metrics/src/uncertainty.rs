//! Predictive entropy and mutual information (epistemic uncertainty), in nats.

use rayon::prelude::*;

use crate::error::{MetricsError, Result};
use crate::probabilities::{Probabilities, ROWS_PER_TASK};

/// Shannon entropy `-sum_k p_k ln p_k` (nats) of one row, with `0 ln 0 = 0`.
pub fn entropy(row: &[f32]) -> f64 {
    -row.iter()
        .map(|&p| {
            let p = f64::from(p);
            if p > 0.0 { p * p.ln() } else { 0.0 }
        })
        .sum::<f64>()
}

/// Entropy of each row of `probs` (nats); at most `ln(classes)` (up to rounding).
pub fn predictive_entropy(probs: &Probabilities) -> Vec<f64> {
    probs
        .as_slice()
        .par_chunks(probs.classes())
        .with_min_len(ROWS_PER_TASK)
        .map(entropy)
        .collect()
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
    let mut acc = crate::mc::McPredictive::new(first.n(), first.classes())?;
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
    fn entropy_values() {
        assert_eq!(entropy(&[1.0, 0.0]), 0.0);
        assert!((entropy(&[0.25; 4]) - 4f64.ln()).abs() < 1e-12);
    }

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
}
