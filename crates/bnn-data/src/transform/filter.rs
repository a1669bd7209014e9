//! Linear filters.

use super::Image;
use crate::error::{DataError, Result};

/// The normalised 1-D Gaussian kernel of standard deviation `sigma`, truncated at
/// `round(4 sigma)` taps each side (scipy's `gaussian_filter` default, `truncate=4.0`, which
/// scikit-image's `gaussian` uses).
fn gaussian_kernel(sigma: f64) -> Vec<f32> {
    let radius = (4.0 * sigma + 0.5) as isize;
    let weights: Vec<f64> = (-radius..=radius)
        .map(|k| (-0.5 * (k as f64 / sigma).powi(2)).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| (w / total) as f32).collect()
}

/// Gaussian blur of every channel with standard deviation `sigma` pixels: a separable,
/// normalised kernel truncated at 4 sigma, edges extended with the nearest pixel
/// (scikit-image `filters.gaussian(image, sigma)`, its default `mode="nearest"`).
///
/// `sigma == 0` returns the image unchanged; a negative or non-finite `sigma` is an error.
pub fn gaussian_blur(image: &Image, sigma: f32) -> Result<Image> {
    if !(sigma.is_finite() && sigma >= 0.0) {
        return Err(DataError::Config(format!(
            "blur sigma {sigma} must be finite and >= 0"
        )));
    }
    if sigma == 0.0 || image.data.is_empty() {
        return Ok(image.clone());
    }
    let kernel = gaussian_kernel(sigma as f64);
    let radius = (kernel.len() / 2) as isize;
    let (h, w) = (image.height, image.width);
    let clamp = |i: isize, n: usize| i.clamp(0, n as isize - 1) as usize;
    let mut rows = Image::zeros(image.channels, h, w);
    let mut out = Image::zeros(image.channels, h, w);
    for c in 0..image.channels {
        let base = c * h * w;
        // Along rows, then along columns.
        for y in 0..h {
            for x in 0..w {
                rows.data[base + y * w + x] = kernel
                    .iter()
                    .enumerate()
                    .map(|(k, &g)| {
                        g * image.data[base + y * w + clamp(x as isize + k as isize - radius, w)]
                    })
                    .sum();
            }
        }
        for y in 0..h {
            for x in 0..w {
                out.data[base + y * w + x] = kernel
                    .iter()
                    .enumerate()
                    .map(|(k, &g)| {
                        g * rows.data[base + clamp(y as isize + k as isize - radius, h) * w + x]
                    })
                    .sum();
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_is_normalised_symmetric_and_truncated_at_four_sigma() {
        for (sigma, taps) in [(0.5, 5), (1.0, 9), (1.5, 13)] {
            let k = gaussian_kernel(sigma);
            assert_eq!(k.len(), taps, "sigma {sigma}");
            assert!((k.iter().sum::<f32>() - 1.0).abs() < 1e-6);
            for i in 0..k.len() {
                assert_eq!(k[i], k[k.len() - 1 - i]);
            }
        }
        // Known values: sigma = 1, centre tap 1 / sum_{|k|<=4} exp(-k²/2) = 0.398943...
        let k = gaussian_kernel(1.0);
        assert!((k[4] - 0.398_943_5).abs() < 1e-4, "{}", k[4]);
    }

    #[test]
    fn blur_keeps_constants_and_sums_and_spreads_an_impulse() {
        let flat = Image {
            channels: 2,
            height: 4,
            width: 5,
            data: vec![0.3; 40],
        };
        let out = gaussian_blur(&flat, 1.5).unwrap();
        assert!(out.data.iter().all(|&v| (v - 0.3).abs() < 1e-6));

        let mut impulse = Image::zeros(1, 9, 9);
        impulse.data[4 * 9 + 4] = 1.0;
        let out = gaussian_blur(&impulse, 1.0).unwrap();
        // Far from the border nothing leaks: the total is kept and the peak spreads.
        assert!((out.data.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        let k = gaussian_kernel(1.0);
        assert!((out.at(0, 4, 4) - k[4] * k[4]).abs() < 1e-6);
        assert!((out.at(0, 4, 5) - k[4] * k[5]).abs() < 1e-6);

        assert_eq!(gaussian_blur(&impulse, 0.0).unwrap(), impulse);
        assert!(gaussian_blur(&impulse, -1.0).is_err());
        assert!(gaussian_blur(&impulse, f32::NAN).is_err());
    }
}
