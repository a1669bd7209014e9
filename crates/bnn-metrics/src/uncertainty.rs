//! Predictive entropy, in nats (mutual information, which needs the Monte Carlo samples, is
//! [`crate::mutual_information`] in the Monte Carlo module).

use rayon::prelude::*;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_values() {
        assert_eq!(entropy(&[1.0, 0.0]), 0.0);
        assert!((entropy(&[0.25; 4]) - 4f64.ln()).abs() < 1e-12);
    }
}
