//! Colour jitter (torchvision `ColorJitter`, tensor implementation).

use super::{Image, Transform};
use crate::error::{DataError, Result};
use crate::rng::SampleRng;

/// Randomly changes brightness, contrast, saturation and hue, in a random order.
///
/// Factors are drawn as in torchvision: brightness, contrast and saturation uniformly in
/// `[max(0, 1 - x), 1 + x]`, hue shift uniformly in `[-hue, hue]` (fraction of a turn,
/// `hue <= 0.5`). Saturation and hue act on 3-channel images only; grey images keep them
/// unchanged, as torchvision does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColorJitter {
    /// Brightness jitter strength.
    pub brightness: f32,
    /// Contrast jitter strength.
    pub contrast: f32,
    /// Saturation jitter strength.
    pub saturation: f32,
    /// Hue jitter strength, in `[0, 0.5]`.
    pub hue: f32,
}

impl ColorJitter {
    /// The paper's ImageNet setting: (0.4, 0.4, 0.4, 0.1).
    pub fn paper() -> Self {
        ColorJitter {
            brightness: 0.4,
            contrast: 0.4,
            saturation: 0.4,
            hue: 0.1,
        }
    }
}

fn grey(r: f32, g: f32, b: f32) -> f32 {
    // ITU-R 601-2 luma, as torchvision's rgb_to_grayscale.
    0.299 * r + 0.587 * g + 0.114 * b
}

/// Multiplies every value by `factor`, clamped to `[0, 1]`.
pub fn adjust_brightness(img: &mut Image, factor: f32) {
    for v in &mut img.data {
        *v = (*v * factor).clamp(0.0, 1.0);
    }
}

/// Blends with the mean grey level of the image (3 channels: ITU-R 601 luma), clamped to `[0, 1]`.
pub fn adjust_contrast(img: &mut Image, factor: f32) {
    let plane = img.height * img.width;
    let mean = if img.channels == 3 {
        let (r, rest) = img.data.split_at(plane);
        let (g, b) = rest.split_at(plane);
        let sum: f64 = (0..plane).map(|i| grey(r[i], g[i], b[i]) as f64).sum();
        (sum / plane as f64) as f32
    } else {
        (img.data.iter().map(|&v| v as f64).sum::<f64>() / img.data.len().max(1) as f64) as f32
    };
    for v in &mut img.data {
        *v = (factor * *v + (1.0 - factor) * mean).clamp(0.0, 1.0);
    }
}

/// Blends each pixel with its grey level, clamped to `[0, 1]` (RGB only; grey images are unchanged).
pub fn adjust_saturation(img: &mut Image, factor: f32) {
    if img.channels != 3 {
        return;
    }
    let plane = img.height * img.width;
    for i in 0..plane {
        let (r, g, b) = (img.data[i], img.data[plane + i], img.data[2 * plane + i]);
        let l = grey(r, g, b);
        for (k, v) in [r, g, b].into_iter().enumerate() {
            img.data[k * plane + i] = (factor * v + (1.0 - factor) * l).clamp(0.0, 1.0);
        }
    }
}

/// RGB in `[0, 1]` to HSV with hue in `[0, 1)` (torchvision's `_rgb2hsv`).
pub fn rgb_to_hsv(r: f32, g: f32, b: f32) -> (f32, f32, f32) {
    let maxc = r.max(g).max(b);
    let minc = r.min(g).min(b);
    let cr = maxc - minc;
    if cr == 0.0 {
        return (0.0, 0.0, maxc);
    }
    let s = cr / maxc;
    let (rc, gc, bc) = ((maxc - r) / cr, (maxc - g) / cr, (maxc - b) / cr);
    let h = if maxc == r {
        bc - gc
    } else if maxc == g {
        2.0 + rc - bc
    } else {
        4.0 + gc - rc
    };
    ((h / 6.0 + 1.0).rem_euclid(1.0), s, maxc)
}

/// HSV (hue in `[0, 1)`) back to RGB (torchvision's `_hsv2rgb`).
pub fn hsv_to_rgb(h: f32, s: f32, v: f32) -> (f32, f32, f32) {
    let i = (h * 6.0).floor();
    let f = h * 6.0 - i;
    let p = (v * (1.0 - s)).clamp(0.0, 1.0);
    let q = (v * (1.0 - s * f)).clamp(0.0, 1.0);
    let t = (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0);
    match (i as i64).rem_euclid(6) {
        0 => (v, t, p),
        1 => (q, v, p),
        2 => (p, v, t),
        3 => (p, q, v),
        4 => (t, p, v),
        _ => (v, p, q),
    }
}

/// Rotates the hue by `shift` turns (RGB only; grey images are unchanged).
pub fn adjust_hue(img: &mut Image, shift: f32) {
    if img.channels != 3 {
        return;
    }
    let plane = img.height * img.width;
    for i in 0..plane {
        let (h, s, v) = rgb_to_hsv(img.data[i], img.data[plane + i], img.data[2 * plane + i]);
        let (r, g, b) = hsv_to_rgb((h + shift).rem_euclid(1.0), s, v);
        img.data[i] = r;
        img.data[plane + i] = g;
        img.data[2 * plane + i] = b;
    }
}

impl Transform for ColorJitter {
    fn apply(&self, mut image: Image, rng: &mut SampleRng) -> Result<Image> {
        let ok = |x: f32| x.is_finite() && x >= 0.0;
        if !(ok(self.brightness) && ok(self.contrast) && ok(self.saturation) && ok(self.hue))
            || self.hue > 0.5
        {
            return Err(DataError::Config(format!(
                "ColorJitter strengths must be finite and >= 0 (hue <= 0.5): {self:?}"
            )));
        }
        let mut order = [0usize, 1, 2, 3];
        rng.shuffle(&mut order);
        let factor = |x: f32, rng: &mut SampleRng| {
            rng.uniform_range((1.0 - x as f64).max(0.0), 1.0 + x as f64) as f32
        };
        // Draw in a fixed order (b, c, s, h) so the permutation and factors are independent.
        let b = (self.brightness > 0.0).then(|| factor(self.brightness, rng));
        let c = (self.contrast > 0.0).then(|| factor(self.contrast, rng));
        let s = (self.saturation > 0.0).then(|| factor(self.saturation, rng));
        let h =
            (self.hue > 0.0).then(|| rng.uniform_range(-self.hue as f64, self.hue as f64) as f32);
        for op in order {
            match (op, b, c, s, h) {
                (0, Some(f), ..) => adjust_brightness(&mut image, f),
                (1, _, Some(f), ..) => adjust_contrast(&mut image, f),
                (2, _, _, Some(f), _) => adjust_saturation(&mut image, f),
                (3, _, _, _, Some(f)) => adjust_hue(&mut image, f),
                _ => {}
            }
        }
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hsv_round_trip() {
        for &(r, g, b) in &[
            (0.1, 0.5, 0.9),
            (0.9, 0.2, 0.2),
            (0.3, 0.3, 0.3),
            (0.0, 1.0, 0.5),
        ] {
            let (h, s, v) = rgb_to_hsv(r, g, b);
            let (r2, g2, b2) = hsv_to_rgb(h, s, v);
            assert!((r - r2).abs() < 1e-5 && (g - g2).abs() < 1e-5 && (b - b2).abs() < 1e-5);
        }
    }

    #[test]
    fn unit_factors_change_nothing() {
        let mut img = Image {
            channels: 3,
            height: 1,
            width: 2,
            data: vec![0.1, 0.7, 0.4, 0.2, 0.9, 0.0],
        };
        let before = img.clone();
        adjust_brightness(&mut img, 1.0);
        adjust_contrast(&mut img, 1.0);
        adjust_saturation(&mut img, 1.0);
        adjust_hue(&mut img, 0.0);
        for (a, b) in img.data.iter().zip(&before.data) {
            assert!((a - b).abs() < 1e-6);
        }
    }
}
