//! Standard-normal noise for the stochastic forward passes.
//!
//! Every reparameterised forward pass draws one `eps ~ N(0, 1)` per weight: 318k draws per step
//! for the MLP, 270k for ResNet-20. On CPU backends burn fills random tensors one element at a
//! time through a locked ChaCha12 generator and a per-element distribution object, which made
//! noise generation about a fifth of a Bayesian MLP step (`docs/benchmarks.md`). Where tensors
//! live in host memory (flex, ndarray) we draw the noise here instead: a ziggurat sampler on
//! xoshiro256++ streams, in parallel over fixed-size chunks. On other backends (wgpu) noise is
//! generated on the device by burn, since uploading it every step would cost more.
//!
//! Reproducibility: the chunk streams are seeded from one 64-bit value drawn from burn's own
//! generator, so `device.seed(s)` still fixes every draw, and the chunking does not depend on
//! the number of threads: same seed, same backend, same noise.

use std::cell::RefCell;

use burn::prelude::*;
use burn::tensor::{Distribution, TensorData};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::StandardNormal;
use rayon::prelude::*;

/// Values per independently seeded stream (and per parallel task).
const CHUNK: usize = 1 << 15;

/// Below this many values the burn generator is used directly: the seed draw would dominate.
const MIN_HOST_DRAW: usize = 4096;

/// Whether tensors on `device` live in host memory, so that noise drawn on the host costs no
/// transfer.
pub fn is_host_device(device: &Device) -> bool {
    let base = device.clone().without_autodiff();
    #[cfg(feature = "flex")]
    if base == Device::flex() {
        return true;
    }
    #[cfg(feature = "ndarray")]
    #[allow(deprecated)]
    if base == Device::ndarray() {
        return true;
    }
    let _ = base;
    false
}

/// Whether `device` is burn-flex's (with or without autodiff).
pub fn is_flex(device: &Device) -> bool {
    #[cfg(feature = "flex")]
    {
        device.clone().without_autodiff() == Device::flex()
    }
    #[cfg(not(feature = "flex"))]
    {
        let _ = device;
        false
    }
}

/// A source of noise that replaces the random draws: called with each draw's shape, it returns
/// that many values, row-major.
pub type NoiseSource = Box<dyn FnMut(&[usize]) -> Vec<f32>>;

thread_local! {
    static SOURCE: RefCell<Option<NoiseSource>> = const { RefCell::new(None) };
}

/// Runs `f` with every noise draw of the layers' forward passes on this thread, both
/// [`standard_normal`] and Flipout's sign flips (then the signs of the values, `+1` at 0),
/// taken from `source` instead of the random generators. Common random numbers: a test gives a
/// stacked forward and per-sample forwards the same noise this way
/// ([`crate::stack`]: a stacked draw is the per-sample draws concatenated along dimension 0).
///
/// # Panics
/// If `source` returns a number of values other than the draw's.
pub fn with_noise_source<R>(
    source: impl FnMut(&[usize]) -> Vec<f32> + 'static,
    f: impl FnOnce() -> R,
) -> R {
    /// Puts the previous source back, also when `f` panics.
    struct Restore(Option<NoiseSource>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            SOURCE.with(|s| *s.borrow_mut() = previous);
        }
    }
    let previous = SOURCE.with(|s| s.borrow_mut().replace(Box::new(source)));
    let _restore = Restore(previous);
    f()
}

/// Pseudo-normal value `i` of draw `call` of Monte-Carlo sample `s` (SplitMix64 through
/// Box-Muller): a pure function, so that two runs can be given the same noise.
fn common_value(call: usize, s: usize, i: usize) -> f32 {
    let mut z = ((call as u64) << 40) ^ ((s as u64) << 28) ^ i as u64;
    let mut next = || {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = z;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((x ^ (x >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let (u, v) = (next().max(1e-300), next());
    ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
}

/// A [`with_noise_source`] source for a stacked forward of `stack` Monte-Carlo samples
/// ([`crate::stack`]) that gives it the noise [`common_noise_sample`] gives each sample: each
/// draw is the `stack` per-sample draws concatenated along dimension 0. With it, block `s` of a
/// stacked forward's output can be checked against the per-sample forward of sample `s`.
pub fn common_noise_stacked(stack: usize) -> impl FnMut(&[usize]) -> Vec<f32> + 'static {
    let mut call = 0;
    move |shape| {
        let per = shape.iter().product::<usize>() / stack.max(1);
        let v = (0..stack)
            .flat_map(|s| (0..per).map(move |i| common_value(call, s, i)))
            .collect();
        call += 1;
        v
    }
}

/// A [`with_noise_source`] source for the per-sample forward of Monte-Carlo sample `s`: draw
/// number `k` of the forward gets the values of draw `k` of sample `s` of
/// [`common_noise_stacked`].
pub fn common_noise_sample(s: usize) -> impl FnMut(&[usize]) -> Vec<f32> + 'static {
    let mut call = 0;
    move |shape| {
        let n = shape.iter().product::<usize>();
        let v = (0..n).map(|i| common_value(call, s, i)).collect();
        call += 1;
        v
    }
}

/// The draw of [`with_noise_source`]'s source, if one is set on this thread.
pub(crate) fn from_source<const D: usize>(shape: [usize; D], device: &Device) -> Option<Tensor<D>> {
    SOURCE.with(|s| {
        let mut source = s.borrow_mut();
        let source = source.as_mut()?;
        let values = source(&shape);
        let n: usize = shape.iter().product();
        assert_eq!(
            values.len(),
            n,
            "noise source: {} values for a draw of shape {shape:?}",
            values.len()
        );
        Some(Tensor::from_data(TensorData::new(values, shape), device))
    })
}

/// A tensor of independent `N(0, 1)` draws of `shape` on `device`.
pub fn standard_normal<const D: usize>(shape: [usize; D], device: &Device) -> Tensor<D> {
    if let Some(t) = from_source(shape, device) {
        return t;
    }
    let n: usize = shape.iter().product();
    if n < MIN_HOST_DRAW || !is_host_device(device) {
        return Tensor::random(shape, Distribution::Normal(0.0, 1.0), device);
    }
    let seed = seed_from_burn(device);
    let mut values = vec![0.0f32; n];
    values
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(i, chunk)| fill_chunk(seed, i as u64, chunk));
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// A 64-bit seed from burn's seeded generator (three uniform draws of 24 bits each, folded and
/// mixed), so that `Device::seed` governs the host streams too.
fn seed_from_burn(device: &Device) -> u64 {
    let u = Tensor::<1>::random([3], Distribution::Default, device)
        .into_data()
        .convert::<f32>();
    let bits: Vec<u64> = u
        .as_slice::<f32>()
        .map(|s| s.iter().map(|&x| (x * 16_777_216.0) as u64).collect())
        .unwrap_or_default();
    bits.iter()
        .fold(0u64, |acc, &b| acc.wrapping_shl(24) ^ b)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn fill_chunk(seed: u64, index: u64, out: &mut [f32]) {
    // Distinct, well-mixed seeds per chunk: seed_from_u64 runs SplitMix64 over its input.
    let mut rng =
        Xoshiro256PlusPlus::seed_from_u64(seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03));
    for v in out {
        *v = rng.sample(StandardNormal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(v: &[f32]) -> (f64, f64) {
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        (mean, var)
    }

    #[test]
    fn host_noise_is_standard_normal_and_seeded() {
        let device = crate::test_device();
        device.seed(7);
        let a = standard_normal([300, 400], &device).into_data();
        device.seed(7);
        let b = standard_normal([300, 400], &device).into_data();
        assert_eq!(a, b, "same seed, same noise");
        let c = standard_normal([300, 400], &device).into_data();
        assert_ne!(a, c, "the next draw differs");
        let v = a.convert::<f32>().try_to_vec::<f32>().unwrap();
        let (mean, var) = moments(&v);
        // 120k draws: the standard error of the mean is 0.003, of the variance 0.004.
        assert!(mean.abs() < 0.015, "mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "variance {var}");
        let beyond_3: usize = v.iter().filter(|x| x.abs() > 3.0).count();
        // P(|z| > 3) = 0.0027: 324 expected.
        assert!((250..400).contains(&beyond_3), "{beyond_3} beyond 3 sigma");
    }

    #[test]
    fn chunks_are_independent_streams() {
        let mut a = vec![0.0f32; 64];
        let mut b = vec![0.0f32; 64];
        fill_chunk(1, 0, &mut a);
        fill_chunk(1, 1, &mut b);
        assert_ne!(a, b);
    }
}
