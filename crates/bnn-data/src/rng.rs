//! A small, version-stable random number generator.
//!
//! Augmentations and shuffles must be reproducible from `(seed, epoch, index)` across
//! releases and worker counts, so the crate uses its own SplitMix64 stream instead of a
//! generator whose output may change between versions of an external crate.

/// SplitMix64 generator (Steele, Lea & Flood 2014): 64-bit state, full period.
#[derive(Debug, Clone)]
pub struct SampleRng {
    state: u64,
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Combines a seed, an epoch and a stream index into one well-mixed 64-bit seed.
///
/// Each argument passes through the mixer, so nearby inputs give unrelated streams.
pub fn derive_seed(seed: u64, epoch: u64, index: u64) -> u64 {
    let a = mix(seed.wrapping_add(GOLDEN));
    let b = mix(a ^ epoch.wrapping_mul(GOLDEN).wrapping_add(0x1234_5678));
    mix(b ^ index
        .wrapping_mul(0xD1B5_4A32_D192_ED03)
        .wrapping_add(GOLDEN))
}

impl SampleRng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        SampleRng { state: seed }
    }

    /// The generator for one sample of one epoch: identical whichever thread asks.
    pub fn for_sample(seed: u64, epoch: u64, index: u64) -> Self {
        SampleRng::new(derive_seed(seed, epoch, index))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[lo, hi)`; returns `lo` when `hi <= lo`.
    pub fn uniform_range(&mut self, lo: f64, hi: f64) -> f64 {
        if hi <= lo {
            lo
        } else {
            lo + (hi - lo) * self.uniform()
        }
    }

    /// Uniform integer in `0..n` (Lemire's multiply-shift with rejection, no modulo bias);
    /// returns 0 when `n == 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// `true` with probability `p`.
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    /// Standard normal draw (Box–Muller, cosine branch; two uniforms per call, so the stream
    /// stays a plain function of the call count).
    pub fn normal(&mut self) -> f64 {
        // 1 - U lies in (0, 1], so the logarithm is finite.
        let radius = (-2.0 * (1.0 - self.uniform()).ln()).sqrt();
        radius * (std::f64::consts::TAU * self.uniform()).cos()
    }

    /// Fisher–Yates shuffle in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = SampleRng::new(7);
        let mut seen = [0usize; 5];
        for _ in 0..5000 {
            let v = rng.below(5) as usize;
            seen[v] += 1;
        }
        for &count in &seen {
            assert!((800..1200).contains(&count), "{seen:?}");
        }
    }

    #[test]
    fn uniform_mean_is_about_half() {
        let mut rng = SampleRng::new(1);
        let mean: f64 = (0..20000).map(|_| rng.uniform()).sum::<f64>() / 20000.0;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
    }

    #[test]
    fn normal_has_zero_mean_unit_variance() {
        let mut rng = SampleRng::new(5);
        let draws: Vec<f64> = (0..20000).map(|_| rng.normal()).collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let var = draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / draws.len() as f64;
        assert!(mean.abs() < 0.03, "{mean}");
        assert!((var - 1.0).abs() < 0.05, "{var}");
        assert!(draws.iter().all(|d| d.is_finite()));
    }

    #[test]
    fn derived_seeds_differ_per_argument() {
        let base = derive_seed(1, 2, 3);
        assert_ne!(base, derive_seed(2, 2, 3));
        assert_ne!(base, derive_seed(1, 3, 3));
        assert_ne!(base, derive_seed(1, 2, 4));
        assert_eq!(base, derive_seed(1, 2, 3));
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v: Vec<usize> = (0..100).collect();
        SampleRng::new(3).shuffle(&mut v);
        let mut sorted = v.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        assert_ne!(v, sorted);
    }
}
