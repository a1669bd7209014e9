//! Deterministic synthetic weight tables for tests, examples and benchmarks.
//!
//! The clouds resemble a trained mean-field BNN: most means near 0 (a narrow Gaussian plus a
//! few denser "modes"), a heavy tail beyond `|mu| = 0.2`, log-normal standard deviations
//! around `0.01`, and (optionally) gradients with a heavy tail. Each shareable layer is followed
//! by a small unshareable bias layer.

use crate::table::{TableError, WeightTable, WeightTableBuilder};

/// SplitMix64: a tiny, fast, seedable generator (no dependency, stable across versions).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// Shape of a synthetic table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SynthSpec {
    /// Shareable weights in total (split over `layers` layers).
    pub n_shareable: usize,
    /// Number of shareable layers (each gets a bias layer of 16 unshareable weights).
    pub layers: usize,
    /// Fraction of means drawn from the wide tail `N(0, 0.3^2)`.
    pub tail_fraction: f64,
    /// Whether to generate gradients.
    pub gradients: bool,
    /// Seed.
    pub seed: u64,
}

impl Default for SynthSpec {
    fn default() -> Self {
        Self {
            n_shareable: 50_000,
            layers: 5,
            tail_fraction: 0.02,
            gradients: true,
            seed: 42,
        }
    }
}

/// Builds the synthetic table described by `spec`.
pub fn synthetic_table(spec: &SynthSpec) -> Result<WeightTable, TableError> {
    let mut rng = SplitMix64::new(spec.seed);
    let layers = spec.layers.max(1);
    let modes = [-0.08, -0.03, 0.0, 0.04, 0.1];
    let mut b = WeightTableBuilder::new();
    for l in 0..layers {
        let n = spec.n_shareable / layers + usize::from(l < spec.n_shareable % layers);
        let (mut mu, mut sigma, mut grad) =
            (Vec::with_capacity(n), Vec::with_capacity(n), Vec::new());
        for _ in 0..n {
            let u = rng.uniform();
            let m = if u < spec.tail_fraction {
                0.3 * rng.normal()
            } else if u < 0.5 {
                0.05 * rng.normal()
            } else {
                let c = modes[(rng.next_u64() % modes.len() as u64) as usize];
                c + 0.006 * rng.normal()
            };
            let s = 0.01 * (0.3 * rng.normal()).exp() * (1.0 + 2.0 * m.abs());
            mu.push(m as f32);
            sigma.push(s as f32);
            if spec.gradients {
                // Heavy tail: a normal scaled by a log-normal.
                grad.push((1e-3 * rng.normal() * (rng.normal()).exp()) as f32);
            }
        }
        let g = spec.gradients.then_some(&grad[..]);
        b.push_layer(format!("layer{l}.weight"), &[n], true, &mu, &sigma, g);
        let bias_mu: Vec<f32> = (0..16).map(|_| (0.1 * rng.normal()) as f32).collect();
        let bias_grad = [0.0f32; 16];
        b.push_layer(
            format!("layer{l}.bias"),
            &[16],
            false,
            &bias_mu,
            &[0.01; 16],
            spec.gradients.then_some(&bias_grad[..]),
        );
    }
    b.build()
}
