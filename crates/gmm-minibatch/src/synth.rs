//! Synthetic (mu, sigma) clouds shaped like a trained BNN's weights.

use rayon::prelude::*;

use crate::rng::Rng;

/// Points per independently seeded chunk (fixed, so the cloud does not depend on thread count).
const CHUNK: usize = 1 << 16;

/// Generates `n` points `[mu, sigma]` (float32) shaped like a trained network's weight cloud:
///
/// * `mu` = 95 % Laplace(0, 0.03) + 5 % Normal(0, 0.15);
/// * `sigma = softplus(rho)`, `rho = -6 + 0.5 (0.3 z + sqrt(1 - 0.09) n)`, where `z` is `|mu|`
///   standardised over the generated sample and `n ~ N(0, 1)`.
///
/// Deterministic in `(n, seed)`, independent of the thread count.
///
/// ```
/// let cloud = gmm_minibatch::synthetic_cloud(1000, 3);
/// assert_eq!(cloud.len(), 1000);
/// assert!(cloud.iter().all(|p| p[1] > 0.0));
/// assert_eq!(cloud, gmm_minibatch::synthetic_cloud(1000, 3));
/// ```
pub fn synthetic_cloud(n: usize, seed: u64) -> Vec<[f32; 2]> {
    let mut pts = vec![[0f32; 2]; n];
    // Pass 1: mu, plus per-chunk sums of |mu| for the standardisation of z.
    let sums: Vec<(f64, f64)> = pts
        .par_chunks_mut(CHUNK)
        .enumerate()
        .map(|(c, chunk)| {
            let mut rng = Rng::stream(seed, 2 * c as u64);
            let (mut s1, mut s2) = (0.0, 0.0);
            for p in chunk.iter_mut() {
                let mu = if rng.uniform() < 0.95 {
                    let v = rng.uniform_open() - 0.5;
                    -0.03 * v.signum() * (1.0 - 2.0 * v.abs()).ln()
                } else {
                    0.15 * rng.normal()
                };
                let mu = mu as f32;
                p[0] = mu;
                let a = f64::from(mu.abs());
                s1 += a;
                s2 += a * a;
            }
            (s1, s2)
        })
        .collect();
    let (s1, s2) = sums
        .iter()
        .fold((0.0, 0.0), |acc, s| (acc.0 + s.0, acc.1 + s.1));
    let nf = n.max(1) as f64;
    let mean = s1 / nf;
    let std = (s2 / nf - mean * mean).max(0.0).sqrt();
    let inv_std = if std > 0.0 { 1.0 / std } else { 0.0 };
    let coef = (1.0f64 - 0.09).sqrt();
    // Pass 2: sigma.
    pts.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut rng = Rng::stream(seed, 2 * c as u64 + 1);
            for p in chunk.iter_mut() {
                let z = (f64::from(p[0].abs()) - mean) * inv_std;
                let rho = -6.0 + 0.5 * (0.3 * z + coef * rng.normal());
                p[1] = softplus(rho) as f32;
            }
        });
    pts
}

/// `ln(1 + e^x)` without overflow.
fn softplus(x: f64) -> f64 {
    if x > 30.0 { x } else { x.exp().ln_1p() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_of_cloud() {
        let c = synthetic_cloud(200_000, 1);
        let n = c.len() as f64;
        let med_abs_mu = {
            let mut a: Vec<f32> = c.iter().map(|p| p[0].abs()).collect();
            a.sort_by(f32::total_cmp);
            a[a.len() / 2]
        };
        // Median |mu| of the mixture is close to the Laplace one, 0.03 ln 2 (slightly larger).
        assert!(med_abs_mu > 0.019 && med_abs_mu < 0.026, "{med_abs_mu}");
        let mean_log_sigma = c.iter().map(|p| f64::from(p[1]).ln()).sum::<f64>() / n;
        assert!((mean_log_sigma + 6.0).abs() < 0.01, "{mean_log_sigma}");
    }
}
