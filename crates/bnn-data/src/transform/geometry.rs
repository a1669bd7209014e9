//! Crops, flips, shifts, rotations and resizing.

use super::{Image, Transform};
use crate::error::{DataError, Result};
use crate::rng::SampleRng;

/// How [`RandomCrop`] fills the padding.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PadMode {
    /// Mirror without repeating the edge pixel (`dcb|abcd|cba`), torchvision's `reflect`.
    Reflect,
    /// A constant value (torchvision's default is 0).
    Constant(f32),
}

/// Mirrors `i` into `0..n` the way `reflect` padding does (no edge repeat).
fn reflect(mut i: isize, n: usize) -> usize {
    let n = n as isize;
    if n == 1 {
        return 0;
    }
    // Folding repeatedly handles padding wider than the image.
    loop {
        if i < 0 {
            i = -i;
        } else if i >= n {
            i = 2 * (n - 1) - i;
        } else {
            return i as usize;
        }
    }
}

/// Pads by `padding` pixels on every side, then cuts a random `height × width` window
/// (torchvision `RandomCrop(size, padding, padding_mode)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomCrop {
    /// Output height.
    pub height: usize,
    /// Output width.
    pub width: usize,
    /// Pixels added on each side before cropping.
    pub padding: usize,
    /// How the padding is filled.
    pub mode: PadMode,
}

impl RandomCrop {
    /// A `size × size` crop after `padding` pixels of reflection padding (the paper's CIFAR setting: 32, 4).
    pub fn reflect(size: usize, padding: usize) -> Self {
        RandomCrop {
            height: size,
            width: size,
            padding,
            mode: PadMode::Reflect,
        }
    }

    /// Crops the window whose top-left corner, in padded coordinates, is `(top, left)`.
    pub fn crop_at(&self, image: &Image, top: usize, left: usize) -> Image {
        let p = self.padding as isize;
        let mut out = Image::zeros(image.channels, self.height, self.width);
        for c in 0..image.channels {
            for y in 0..self.height {
                let sy = top as isize + y as isize - p;
                for x in 0..self.width {
                    let sx = left as isize + x as isize - p;
                    let inside = sy >= 0
                        && sx >= 0
                        && (sy as usize) < image.height
                        && (sx as usize) < image.width;
                    let v = match (inside, self.mode) {
                        (true, _) => image.at(c, sy as usize, sx as usize),
                        (false, PadMode::Constant(v)) => v,
                        (false, PadMode::Reflect) => {
                            image.at(c, reflect(sy, image.height), reflect(sx, image.width))
                        }
                    };
                    out.data[(c * self.height + y) * self.width + x] = v;
                }
            }
        }
        out
    }
}

impl Transform for RandomCrop {
    fn apply(&self, image: Image, rng: &mut SampleRng) -> Result<Image> {
        let (ph, pw) = (
            image.height + 2 * self.padding,
            image.width + 2 * self.padding,
        );
        if ph < self.height || pw < self.width || image.height == 0 || image.width == 0 {
            return Err(DataError::Config(format!(
                "RandomCrop {}x{} does not fit a padded {ph}x{pw} image",
                self.height, self.width
            )));
        }
        let top = rng.below((ph - self.height + 1) as u64) as usize;
        let left = rng.below((pw - self.width + 1) as u64) as usize;
        Ok(self.crop_at(&image, top, left))
    }
}

/// Shifts the content `dy` pixels down and `dx` pixels right (negative: up, left); the
/// uncovered border takes `fill`. The output has the input's shape.
///
/// This is [`RandomCrop::crop_at`] with constant padding `max(|dy|, |dx|)` and the window
/// placed at `(padding - dy, padding - dx)`.
pub fn translate(image: &Image, dy: isize, dx: isize, fill: f32) -> Image {
    let padding = dy.unsigned_abs().max(dx.unsigned_abs());
    let window = RandomCrop {
        height: image.height,
        width: image.width,
        padding,
        mode: PadMode::Constant(fill),
    };
    let p = padding as isize;
    // Both offsets lie in 0..=2p, the padded image's valid window corners.
    window.crop_at(image, (p - dy) as usize, (p - dx) as usize)
}

/// Rotates by `degrees` counter-clockwise (as seen on screen, rows running down) about the
/// image centre `((H - 1) / 2, (W - 1) / 2)`, with bilinear interpolation; sample
/// positions outside the image read `fill` (torchvision `rotate(..., BILINEAR, fill)`,
/// scikit-image `warp(order=1, mode="constant", cval=fill)`).
///
/// Fails on a non-finite angle.
pub fn rotate_bilinear(image: &Image, degrees: f32, fill: f32) -> Result<Image> {
    if !degrees.is_finite() {
        return Err(DataError::Config(format!(
            "rotation angle {degrees} is not finite"
        )));
    }
    let (sin, cos) = (degrees as f64).to_radians().sin_cos();
    let (h, w) = (image.height, image.width);
    let (cy, cx) = ((h as f64 - 1.0) / 2.0, (w as f64 - 1.0) / 2.0);
    // For every output pixel, where it comes from (the inverse rotation) as a bilinear
    // stencil: top-left source pixel (may lie outside) and the fractional offsets.
    let mut stencil = Vec::with_capacity(h * w);
    for y in 0..h {
        let v = y as f64 - cy;
        for x in 0..w {
            let u = x as f64 - cx;
            let sx = u * cos - v * sin + cx;
            let sy = u * sin + v * cos + cy;
            let (x0, y0) = (sx.floor(), sy.floor());
            stencil.push((y0 as isize, x0 as isize, (sy - y0) as f32, (sx - x0) as f32));
        }
    }
    let mut out = Image::zeros(image.channels, h, w);
    for c in 0..image.channels {
        let p = |y: isize, x: isize| {
            if y >= 0 && x >= 0 && (y as usize) < h && (x as usize) < w {
                image.at(c, y as usize, x as usize)
            } else {
                fill
            }
        };
        let plane = &mut out.data[c * h * w..(c + 1) * h * w];
        for (o, &(y0, x0, ly, lx)) in plane.iter_mut().zip(&stencil) {
            let top = p(y0, x0) * (1.0 - lx) + p(y0, x0 + 1) * lx;
            let bottom = p(y0 + 1, x0) * (1.0 - lx) + p(y0 + 1, x0 + 1) * lx;
            *o = top * (1.0 - ly) + bottom * ly;
        }
    }
    Ok(out)
}

/// Mirrors the image left–right, always.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HorizontalFlip;

impl HorizontalFlip {
    /// The mirrored image.
    pub fn flip(mut image: Image) -> Image {
        let w = image.width;
        for row in image.data.chunks_exact_mut(w.max(1)) {
            row.reverse();
        }
        image
    }
}

impl Transform for HorizontalFlip {
    fn apply(&self, image: Image, _rng: &mut SampleRng) -> Result<Image> {
        Ok(Self::flip(image))
    }
}

/// Mirrors the image left–right with probability `p` (torchvision `RandomHorizontalFlip`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomHorizontalFlip {
    /// Probability of flipping.
    pub p: f64,
}

impl Default for RandomHorizontalFlip {
    fn default() -> Self {
        RandomHorizontalFlip { p: 0.5 }
    }
}

impl Transform for RandomHorizontalFlip {
    fn apply(&self, image: Image, rng: &mut SampleRng) -> Result<Image> {
        Ok(if rng.bernoulli(self.p) {
            HorizontalFlip::flip(image)
        } else {
            image
        })
    }
}

/// Cuts the centred `height × width` window (torchvision `CenterCrop`, without padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CenterCrop {
    /// Output height.
    pub height: usize,
    /// Output width.
    pub width: usize,
}

impl Transform for CenterCrop {
    fn apply(&self, image: Image, _rng: &mut SampleRng) -> Result<Image> {
        if image.height < self.height || image.width < self.width {
            return Err(DataError::Config(format!(
                "CenterCrop {}x{} is larger than the {}x{} image",
                self.height, self.width, image.height, image.width
            )));
        }
        // torchvision rounds the offset: int(round((h - th) / 2)).
        let top = ((image.height - self.height) as f64 / 2.0).round() as usize;
        let left = ((image.width - self.width) as f64 / 2.0).round() as usize;
        Ok(crop(&image, top, left, self.height, self.width))
    }
}

fn crop(image: &Image, top: usize, left: usize, h: usize, w: usize) -> Image {
    let mut out = Image::zeros(image.channels, h, w);
    for c in 0..image.channels {
        for y in 0..h {
            let src = (c * image.height + top + y) * image.width + left;
            let dst = (c * h + y) * w;
            out.data[dst..dst + w].copy_from_slice(&image.data[src..src + w]);
        }
    }
    out
}

/// Bilinear resize of the `(top, left, h, w)` window of `image` to `out_h × out_w`, with
/// half-pixel centres (PyTorch `interpolate(mode="bilinear", align_corners=False)`,
/// no antialiasing).
pub fn resize_bilinear(
    image: &Image,
    (top, left, h, w): (usize, usize, usize, usize),
    out_h: usize,
    out_w: usize,
) -> Image {
    let axis = |in_len: usize, out_len: usize| -> Vec<(usize, usize, f32)> {
        let scale = in_len as f64 / out_len as f64;
        (0..out_len)
            .map(|d| {
                let src = ((d as f64 + 0.5) * scale - 0.5).max(0.0);
                let i0 = (src.floor() as usize).min(in_len - 1);
                let i1 = if i0 + 1 < in_len { i0 + 1 } else { i0 };
                (i0, i1, (src - i0 as f64) as f32)
            })
            .collect()
    };
    let ys = axis(h, out_h);
    let xs = axis(w, out_w);
    let mut out = Image::zeros(image.channels, out_h, out_w);
    for c in 0..image.channels {
        for (oy, &(y0, y1, ly)) in ys.iter().enumerate() {
            for (ox, &(x0, x1, lx)) in xs.iter().enumerate() {
                let p = |y: usize, x: usize| image.at(c, top + y, left + x);
                let top_row = p(y0, x0) * (1.0 - lx) + p(y0, x1) * lx;
                let bottom_row = p(y1, x0) * (1.0 - lx) + p(y1, x1) * lx;
                out.data[(c * out_h + oy) * out_w + ox] = top_row * (1.0 - ly) + bottom_row * ly;
            }
        }
    }
    out
}

/// Crops a random area and aspect ratio, then resizes to `size × size`
/// (torchvision `RandomResizedCrop`, same parameter sampling and fallback).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomResizedCrop {
    /// Output side length.
    pub size: usize,
    /// Range of the crop's area as a fraction of the image's.
    pub scale: (f64, f64),
    /// Range of the crop's aspect ratio (width / height).
    pub ratio: (f64, f64),
}

impl RandomResizedCrop {
    /// torchvision's defaults: scale (0.08, 1), ratio (3/4, 4/3).
    pub fn new(size: usize) -> Self {
        RandomResizedCrop {
            size,
            scale: (0.08, 1.0),
            ratio: (3.0 / 4.0, 4.0 / 3.0),
        }
    }

    /// The crop window `(top, left, height, width)` for an `height × width` image.
    pub fn params(
        &self,
        height: usize,
        width: usize,
        rng: &mut SampleRng,
    ) -> (usize, usize, usize, usize) {
        let area = (height * width) as f64;
        let (lr0, lr1) = (self.ratio.0.ln(), self.ratio.1.ln());
        for _ in 0..10 {
            let target = area * rng.uniform_range(self.scale.0, self.scale.1);
            let aspect = rng.uniform_range(lr0, lr1).exp();
            let w = (target * aspect).sqrt().round() as usize;
            let h = (target / aspect).sqrt().round() as usize;
            if 0 < w && w <= width && 0 < h && h <= height {
                let top = rng.below((height - h + 1) as u64) as usize;
                let left = rng.below((width - w + 1) as u64) as usize;
                return (top, left, h, w);
            }
        }
        // Fallback: the largest centred crop whose ratio lies in range.
        let in_ratio = width as f64 / height as f64;
        let (h, w) = if in_ratio < self.ratio.0 {
            (((width as f64) / self.ratio.0).round() as usize, width)
        } else if in_ratio > self.ratio.1 {
            (height, ((height as f64) * self.ratio.1).round() as usize)
        } else {
            (height, width)
        };
        let (h, w) = (h.clamp(1, height), w.clamp(1, width));
        ((height - h) / 2, (width - w) / 2, h, w)
    }
}

impl Transform for RandomResizedCrop {
    fn apply(&self, image: Image, rng: &mut SampleRng) -> Result<Image> {
        if image.height == 0 || image.width == 0 || self.size == 0 {
            return Err(DataError::Config(
                "RandomResizedCrop needs a non-empty image and size".into(),
            ));
        }
        if !(self.scale.0 > 0.0
            && self.scale.0 <= self.scale.1
            && self.ratio.0 > 0.0
            && self.ratio.0 <= self.ratio.1)
        {
            return Err(DataError::Config(format!(
                "RandomResizedCrop scale {:?} / ratio {:?} must be positive, increasing ranges",
                self.scale, self.ratio
            )));
        }
        let window = self.params(image.height, image.width, rng);
        Ok(resize_bilinear(&image, window, self.size, self.size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect_matches_torch_reflect_padding() {
        // numpy.pad(arange(4), 2, mode="reflect") == [2, 1, 0, 1, 2, 3, 2, 1]
        let got: Vec<usize> = (-2..6).map(|i| reflect(i, 4)).collect();
        assert_eq!(got, vec![2, 1, 0, 1, 2, 3, 2, 1]);
    }

    fn ramp(c: usize, h: usize, w: usize) -> Image {
        let n = c * h * w;
        Image {
            channels: c,
            height: h,
            width: w,
            data: (0..n).map(|k| k as f32 / n as f32).collect(),
        }
    }

    #[test]
    fn translate_moves_content_and_fills_the_border() {
        let img = ramp(1, 3, 4);
        let out = translate(&img, 1, -2, 9.0);
        for y in 0..3 {
            for x in 0..4 {
                let (sy, sx) = (y as isize - 1, x as isize + 2);
                let want = if (0..3).contains(&sy) && (0..4).contains(&sx) {
                    img.at(0, sy as usize, sx as usize)
                } else {
                    9.0
                };
                assert_eq!(out.at(0, y, x), want, "({y}, {x})");
            }
        }
        assert_eq!(translate(&img, 0, 0, 9.0), img);
        // A shift past the image leaves only fill.
        assert!(translate(&img, 0, 7, 0.5).data.iter().all(|&v| v == 0.5));
    }

    #[test]
    fn rotation_by_zero_is_identity_and_by_quarter_turns_permutes() {
        let img = ramp(2, 5, 5);
        assert_eq!(rotate_bilinear(&img, 0.0, 0.0).unwrap(), img);
        // 90° counter-clockwise: out(y, x) = in(x, W - 1 - y).
        let quarter = rotate_bilinear(&img, 90.0, 0.0).unwrap();
        for c in 0..2 {
            for y in 0..5 {
                for x in 0..5 {
                    let want = img.at(c, x, 4 - y);
                    assert!((quarter.at(c, y, x) - want).abs() < 1e-5, "({c}, {y}, {x})");
                }
            }
        }
        let full = rotate_bilinear(&img, 360.0, 0.0).unwrap();
        for (a, b) in full.data.iter().zip(&img.data) {
            assert!((a - b).abs() < 1e-5);
        }
        assert!(rotate_bilinear(&img, f32::NAN, 0.0).is_err());
    }

    #[test]
    fn rotation_interpolates_and_fills_outside() {
        // A constant image rotated by 45° keeps its value inside the disc that stays
        // covered, and blends towards the fill only at the corners.
        let flat = Image {
            channels: 1,
            height: 9,
            width: 9,
            data: vec![0.8; 81],
        };
        let out = rotate_bilinear(&flat, 45.0, 0.0).unwrap();
        assert!((out.at(0, 4, 4) - 0.8).abs() < 1e-6);
        assert!((out.at(0, 4, 0) - 0.8).abs() < 1e-6);
        assert!(out.at(0, 0, 0) < 0.05, "{}", out.at(0, 0, 0));
        assert!(out.data.iter().all(|&v| (0.0..=0.8 + 1e-6).contains(&v)));
    }

    #[test]
    fn resize_identity_and_constant() {
        let img = Image {
            channels: 1,
            height: 2,
            width: 3,
            data: vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        };
        assert_eq!(resize_bilinear(&img, (0, 0, 2, 3), 2, 3), img);
        let flat = Image {
            channels: 1,
            height: 3,
            width: 3,
            data: vec![0.25; 9],
        };
        let up = resize_bilinear(&flat, (0, 0, 3, 3), 7, 5);
        assert!(up.data.iter().all(|&v| (v - 0.25).abs() < 1e-6));
    }
}
