//! An out-of-distribution set made from in-distribution images alone: every image cut into a
//! [`TILE_GRID`] × [`TILE_GRID`] grid of tiles, and the tiles put back in a shuffled order (a
//! "jigsaw" image).
//!
//! Why this one: a choice made by looking at OOD detection must not look at the OOD set that
//! is reported (the MNIST digits for Fashion-MNIST, SVHN for CIFAR). Tile shuffling keeps each
//! image's pixel values, colours and local texture, so the set cannot be told apart by its
//! pixel statistics alone; what it breaks is the global shape a classifier of the data set
//! relies on. It needs no other data set, works on any `(C, H, W)` image of at least
//! [`TILE_GRID`] pixels a side, and each image's order is drawn from `(seed, index)`, so the set
//! is the same on every run and machine.

use crate::dataset::{Dataset, Sample};
use crate::error::{DataError, Result};
use crate::rng::SampleRng;

/// Tiles per side: 4 × 4 = 16 tiles (7 × 7 pixels on a 28 × 28 image, 8 × 8 on 32 × 32).
pub const TILE_GRID: usize = 4;

/// `inner` with each image's tiles shuffled ([`TILE_GRID`] × [`TILE_GRID`] tiles of
/// `H / TILE_GRID` × `W / TILE_GRID` pixels; the `H % TILE_GRID` bottom rows and
/// `W % TILE_GRID` right columns stay where they are). Labels are `inner`'s (an OOD set's
/// labels are not used). Every image's order differs from the original one.
#[derive(Debug, Clone)]
pub struct TileShuffled<D> {
    inner: D,
    seed: u64,
}

impl<D: Dataset> TileShuffled<D> {
    /// Wraps `inner`; each image's tile order is drawn from `(seed, index)`. Images smaller
    /// than [`TILE_GRID`] pixels a side have no tiles to shuffle: an error naming their shape.
    pub fn new(inner: D, seed: u64) -> Result<Self> {
        let (c, h, w) = inner.shape();
        if h < TILE_GRID || w < TILE_GRID {
            return Err(DataError::Config(format!(
                "tile shuffling needs images of at least {TILE_GRID}x{TILE_GRID} pixels; these \
                 are {c}x{h}x{w}"
            )));
        }
        Ok(Self { inner, seed })
    }

    /// The order of the tiles of image `index`: tile `k` of the result (row-major) is tile
    /// `order[k]` of the original. Never the identity.
    pub fn order(&self, index: usize) -> Vec<usize> {
        let mut rng = SampleRng::for_sample(self.seed, 0, index as u64);
        let mut order: Vec<usize> = (0..TILE_GRID * TILE_GRID).collect();
        rng.shuffle(&mut order);
        if order.iter().enumerate().all(|(k, &t)| k == t) {
            // One draw in 16!: a fixed derangement keeps "every image is shuffled" true.
            order.rotate_left(1);
        }
        order
    }

    /// The wrapped data set.
    pub fn inner(&self) -> &D {
        &self.inner
    }
}

impl<D: Dataset> Dataset for TileShuffled<D> {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn classes(&self) -> usize {
        self.inner.classes()
    }
    fn shape(&self) -> (usize, usize, usize) {
        self.inner.shape()
    }
    fn get(&self, index: usize) -> Result<Sample> {
        let sample = self.inner.get(index)?;
        let (c, h, w) = sample.shape();
        let (th, tw) = (h / TILE_GRID, w / TILE_GRID);
        let mut pixels = sample.pixels.clone();
        for (k, &from) in self.order(index).iter().enumerate() {
            let (ty, tx) = (k / TILE_GRID, k % TILE_GRID);
            let (fy, fx) = (from / TILE_GRID, from % TILE_GRID);
            for ch in 0..c {
                for row in 0..th {
                    let dst = ch * h * w + (ty * th + row) * w + tx * tw;
                    let src = ch * h * w + (fy * th + row) * w + fx * tw;
                    pixels[dst..dst + tw].copy_from_slice(&sample.pixels[src..src + tw]);
                }
            }
        }
        Ok(Sample { pixels, ..sample })
    }
    fn label(&self, index: usize) -> Result<u32> {
        self.inner.label(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::InMemoryDataset;

    /// Three 2x9x10 images whose pixel values spell their position (and image).
    fn images() -> InMemoryDataset {
        let (c, h, w) = (2, 9, 10);
        let pixels = (0..3 * c * h * w).map(|i| (i % 251) as u8).collect();
        InMemoryDataset::new(pixels, vec![0, 1, 2], (c, h, w), 3).unwrap()
    }

    #[test]
    fn tiles_move_whole_and_the_rest_stays() {
        let data = TileShuffled::new(images(), 7).unwrap();
        let (c, h, w) = (2, 9, 10);
        let (th, tw) = (h / TILE_GRID, w / TILE_GRID);
        for i in 0..3 {
            let before = data.inner().get(i).unwrap();
            let after = data.get(i).unwrap();
            assert_eq!((after.shape(), after.label), (before.shape(), before.label));
            assert_ne!(after.pixels, before.pixels, "image {i} is shuffled");
            let order = data.order(i);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..16).collect::<Vec<_>>(), "a permutation");
            let at = |p: &[u8], ch: usize, y: usize, x: usize| p[ch * h * w + y * w + x];
            for ch in 0..c {
                for y in 0..h {
                    for x in 0..w {
                        let (ty, tx) = (y / th, x / tw);
                        let want = if ty >= TILE_GRID || tx >= TILE_GRID {
                            // The remainder row and columns are not moved.
                            at(&before.pixels, ch, y, x)
                        } else {
                            let from = order[ty * TILE_GRID + tx];
                            let (fy, fx) = (from / TILE_GRID, from % TILE_GRID);
                            at(&before.pixels, ch, fy * th + y % th, fx * tw + x % tw)
                        };
                        assert_eq!(at(&after.pixels, ch, y, x), want, "{i} {ch} {y} {x}");
                    }
                }
            }
            // The same seed and index give the same image; another seed another one.
            assert_eq!(data.get(i).unwrap(), after);
        }
        let other = TileShuffled::new(images(), 8).unwrap();
        assert!((0..3).any(|i| other.order(i) != data.order(i)));
    }

    #[test]
    fn images_too_small_for_the_grid_are_an_error() {
        let tiny = InMemoryDataset::new(vec![0; 3 * 8], vec![0], (1, 3, 8), 1).unwrap();
        let e = TileShuffled::new(tiny, 0).unwrap_err().to_string();
        assert!(e.contains("1x3x8") && e.contains("4x4"), "{e}");
    }
}
