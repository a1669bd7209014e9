//! f32 batch normalisation over the batch and spatial dimensions of NCHW tensors, forward and
//! backward, on host slices.
//!
//! burn's default `batch_norm_train` (which burn-flex 0.22 keeps) swaps the batch and channel
//! dimensions and reshapes, which copies the activation, then composes a dozen element-wise
//! operations, each a pass over memory with a fresh buffer; its backward does the same. Here a
//! channel's statistics are one task's sums over its `batch` contiguous planes (fixed order:
//! the same bits on any thread count), and the normalisation is one pass over the planes.

use std::mem::MaybeUninit;

use rayon::prelude::*;

/// Sum of `f(a[i], b[i])`, in eight lanes of f32 added up in f64.
#[inline]
fn lane_sum(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) -> f64 {
    let mut lanes = [0.0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(&x, &y)| f(x, y) as f64)
        .sum();
    for (xa, xb) in ac.zip(bc) {
        for l in 0..8 {
            lanes[l] += f(xa[l], xb[l]);
        }
    }
    lanes.iter().map(|&v| v as f64).sum::<f64>() + tail
}

/// Per-channel sums over the `batch` planes of two `[batch, channels, plane]` tensors, one
/// task per channel, planes in order: `term(c)` gives channel `c`'s summand `f(a, b)` (a
/// closure over that channel's constants, so the plane loop vectorises).
fn channel_sums<F: Fn(f32, f32) -> f32>(
    [batch, channels, plane]: [usize; 3],
    a: &[f32],
    b: &[f32],
    term: impl Fn(usize) -> F + Sync,
) -> Vec<f64> {
    (0..channels)
        .into_par_iter()
        .map(|c| {
            let f = term(c);
            (0..batch)
                .map(|n| {
                    let at = (n * channels + c) * plane;
                    lane_sum(&a[at..at + plane], &b[at..at + plane], &f)
                })
                .sum()
        })
        .collect()
}

/// Batch statistics and normalised output of `x` (`[batch, channels, plane]`):
/// `y = (x - mean) / sqrt(var + eps) * gamma + beta`, with the biased variance, as burn's
/// `batch_norm_train`. Returns `(y, mean, var)`.
pub fn forward_train(
    [batch, channels, plane]: [usize; 3],
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    epsilon: f64,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    assert_eq!(x.len(), batch * channels * plane, "batch norm input");
    assert_eq!(gamma.len(), channels, "batch norm gamma");
    assert_eq!(beta.len(), channels, "batch norm beta");
    let dims = [batch, channels, plane];
    let count = (batch * plane).max(1) as f64;
    let mean: Vec<f64> = channel_sums(dims, x, x, |_| |v, _| v)
        .into_iter()
        .map(|s| s / count)
        .collect();
    let mean32: Vec<f32> = mean.iter().map(|&m| m as f32).collect();
    let var: Vec<f64> = channel_sums(dims, x, x, |c| {
        let m = mean32[c];
        move |v, _| (v - m) * (v - m)
    })
    .into_iter()
    .map(|s| s / count)
    .collect();
    let scale: Vec<f32> = (0..channels)
        .map(|c| (gamma[c] as f64 / (var[c] + epsilon).sqrt()) as f32)
        .collect();
    let y = map_planes(x, channels, plane, |c| {
        let (m, sc, b) = (mean32[c], scale[c], beta[c]);
        move |v| (v - m) * sc + b
    });
    (y, mean32, var.iter().map(|&v| v as f32).collect())
}

/// Inference-mode batch norm of `x` (`[batch, channels, plane]`) with given statistics,
/// `y = (x - mean) / sqrt(var + eps) * gamma + beta`, followed by a ReLU when `relu` is set, in
/// one pass. Each element takes burn's own f32 operations in burn's order (its default
/// `batch_norm` is four broadcast passes: subtract, divide, multiply, add; flex's ReLU keeps
/// NaN), so the result is bit for bit burn's.
#[allow(clippy::too_many_arguments)]
pub fn forward_eval(
    [batch, channels, plane]: [usize; 3],
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    mean: &[f32],
    var: &[f32],
    epsilon: f64,
    relu: bool,
) -> Vec<f32> {
    assert_eq!(x.len(), batch * channels * plane, "batch norm input");
    for (what, v) in [
        ("gamma", gamma),
        ("beta", beta),
        ("mean", mean),
        ("variance", var),
    ] {
        assert_eq!(v.len(), channels, "batch norm {what}");
    }
    let eps = epsilon as f32;
    let std: Vec<f32> = var.iter().map(|&v| (v + eps).sqrt()).collect();
    map_planes(x, channels, plane, |c| {
        let (m, sd, g, b) = (mean[c], std[c], gamma[c], beta[c]);
        move |v| {
            let y = (v - m) / sd * g + b;
            if !relu || y.is_nan() || y > 0.0 {
                y
            } else {
                0.0
            }
        }
    })
}

/// `term(channel)(value)` over every element of a `[batch, channels, plane]` tensor, in
/// parallel over planes, into a new tensor.
fn map_planes<F: Fn(f32) -> f32>(
    x: &[f32],
    channels: usize,
    plane: usize,
    term: impl Fn(usize) -> F + Sync,
) -> Vec<f32> {
    let mut y: Vec<f32> = Vec::with_capacity(x.len());
    if plane > 0 {
        y.spare_capacity_mut()[..x.len()]
            .par_chunks_mut(plane)
            .zip(x.par_chunks(plane))
            .enumerate()
            .for_each(
                |(k, (out, src)): (usize, (&mut [MaybeUninit<f32>], &[f32]))| {
                    let f = term(k % channels);
                    for (o, &v) in out.iter_mut().zip(src) {
                        o.write(f(v));
                    }
                },
            );
    }
    // SAFETY: every plane of the first x.len() slots was written above (none when plane == 0,
    // where x is empty).
    unsafe { y.set_len(x.len()) };
    y
}

/// Gradients of [`forward_train`] with respect to `x`, `gamma` and `beta`, given the output
/// gradient `dy` and the statistics `forward_train` returned.
pub fn backward_train(
    [batch, channels, plane]: [usize; 3],
    x: &[f32],
    gamma: &[f32],
    mean: &[f32],
    var: &[f32],
    epsilon: f64,
    dy: &[f32],
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    assert_eq!(x.len(), batch * channels * plane, "batch norm input");
    assert_eq!(dy.len(), x.len(), "batch norm output gradient");
    for (what, v) in [("gamma", gamma), ("mean", mean), ("variance", var)] {
        assert_eq!(v.len(), channels, "batch norm {what}");
    }
    let dims = [batch, channels, plane];
    let count = (batch * plane).max(1) as f64;
    let inv_std: Vec<f64> = var
        .iter()
        .map(|&v| 1.0 / (v as f64 + epsilon).sqrt())
        .collect();
    let sum_dy = channel_sums(dims, dy, dy, |_| |g, _| g);
    let sum_dy_xc = channel_sums(dims, dy, x, |c| {
        let m = mean[c];
        move |g, v| g * (v - m)
    });
    // dgamma = sum(dy * x_hat), dbeta = sum(dy);
    // dx = gamma / std * (dy - dbeta / M - x_hat * dgamma / M).
    let dgamma: Vec<f64> = (0..channels).map(|c| sum_dy_xc[c] * inv_std[c]).collect();
    let a: Vec<f32> = (0..channels)
        .map(|c| (gamma[c] as f64 * inv_std[c]) as f32)
        .collect();
    let b: Vec<f32> = (0..channels)
        .map(|c| (gamma[c] as f64 * inv_std[c] * sum_dy[c] / count) as f32)
        .collect();
    let k: Vec<f32> = (0..channels)
        .map(|c| (gamma[c] as f64 * inv_std[c] * inv_std[c] * dgamma[c] / count) as f32)
        .collect();
    let mut dx: Vec<f32> = Vec::with_capacity(x.len());
    if plane > 0 {
        dx.spare_capacity_mut()[..x.len()]
            .par_chunks_mut(plane)
            .zip(x.par_chunks(plane).zip(dy.par_chunks(plane)))
            .enumerate()
            .for_each(|(i, (out, (xs, gs)))| {
                let c = i % channels;
                let (a, b, k, m) = (a[c], b[c], k[c], mean[c]);
                for (o, (&xv, &g)) in out.iter_mut().zip(xs.iter().zip(gs)) {
                    o.write(a * g - b - k * (xv - m));
                }
            });
    }
    // SAFETY: every plane of the first x.len() slots was written above.
    unsafe { dx.set_len(x.len()) };
    (
        dx,
        dgamma.iter().map(|&v| v as f32).collect(),
        sum_dy.iter().map(|&v| v as f32).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let v = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8;
                (v % 2001) as f32 / 500.0 - 1.5
            })
            .collect()
    }

    #[test]
    fn gradients_match_finite_differences_of_the_forward() {
        let dims = [3, 2, 13];
        let x = values(78, 1);
        let gamma = vec![1.5, -0.7];
        let beta = vec![0.2, 0.3];
        let r = values(78, 2);
        let eps = 1e-5;
        // L = sum(y * r), in f64 through the f32 forward: central differences with a step
        // large enough for f32 rounding.
        let loss = |x: &[f32], gamma: &[f32], beta: &[f32]| {
            let (y, _, _) = forward_train(dims, x, gamma, beta, eps);
            y.iter()
                .zip(&r)
                .map(|(a, b)| *a as f64 * *b as f64)
                .sum::<f64>()
        };
        let (_, mean, var) = forward_train(dims, &x, &gamma, &beta, eps);
        let (dx, dg, db) = backward_train(dims, &x, &gamma, &mean, &var, eps, &r);
        let h = 1e-2f32;
        for i in 0..x.len() {
            let (mut up, mut down) = (x.clone(), x.clone());
            up[i] += h;
            down[i] -= h;
            let fd = (loss(&up, &gamma, &beta) - loss(&down, &gamma, &beta)) / (2.0 * h as f64);
            assert!(
                (fd - dx[i] as f64).abs() < 2e-3,
                "dx[{i}]: {fd} vs {}",
                dx[i]
            );
        }
        for c in 0..2 {
            let bump = |v: &[f32], by: f32| {
                let mut v = v.to_vec();
                v[c] += by;
                v
            };
            let fd = (loss(&x, &bump(&gamma, h), &beta) - loss(&x, &bump(&gamma, -h), &beta))
                / (2.0 * h as f64);
            assert!(
                (fd - dg[c] as f64).abs() < 2e-3,
                "dgamma[{c}]: {fd} vs {}",
                dg[c]
            );
            let fd = (loss(&x, &gamma, &bump(&beta, h)) - loss(&x, &gamma, &bump(&beta, -h)))
                / (2.0 * h as f64);
            assert!(
                (fd - db[c] as f64).abs() < 2e-3,
                "dbeta[{c}]: {fd} vs {}",
                db[c]
            );
        }
    }

    #[test]
    fn statistics_are_the_batch_mean_and_biased_variance() {
        let x = [1.0, 3.0, 10.0, 20.0, 5.0, 7.0, 30.0, 40.0];
        let (y, mean, var) = forward_train([2, 2, 2], &x, &[1.0, 1.0], &[0.0, 0.0], 0.0);
        assert_eq!(mean, vec![4.0, 25.0]);
        assert_eq!(var, vec![5.0, 125.0]);
        let want = -3.0 / 5f32.sqrt();
        assert!((y[0] - want).abs() < 1e-6, "{y:?}");
    }
}
