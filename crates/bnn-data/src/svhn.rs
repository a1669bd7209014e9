//! SVHN cropped digits (`train_32x32.mat`, `test_32x32.mat`, `extra_32x32.mat`).
//!
//! Each file holds `X`: `uint8 [32, 32, 3, N]` (column-major: row, column, channel, image)
//! and `y`: `[N, 1]` labels 1..=10, where 10 stands for the digit 0.

use std::path::Path;

use crate::dataset::{InMemoryDataset, Split};
use crate::error::{DataError, Result};
use crate::mat::{MatData, read_mat};

/// File name of an SVHN split.
pub fn svhn_file(split: Split) -> &'static str {
    match split {
        Split::Train => "train_32x32.mat",
        Split::Test => "test_32x32.mat",
    }
}

/// Loads an SVHN `.mat` file into `[3, H, W]` images with labels 0..=9.
pub fn load_svhn_mat(path: impl AsRef<Path>) -> Result<InMemoryDataset> {
    let path = path.as_ref();
    let arrays = read_mat(path)?;
    let find = |name: &str| {
        arrays
            .iter()
            .find(|a| a.name == name)
            .ok_or_else(|| DataError::format(path, format!("no variable `{name}` in the file")))
    };
    let x = find("X")?;
    let y = find("y")?;
    if x.dims.len() != 4 || x.dims[2] != 3 {
        return Err(DataError::format(
            path,
            format!("`X` has dimensions {:?}, expected [H, W, 3, N]", x.dims),
        ));
    }
    let (h, w, n) = (x.dims[0], x.dims[1], x.dims[3]);
    if y.data.len() != n {
        return Err(DataError::format(
            path,
            format!("`y` has {} labels for {n} images", y.data.len()),
        ));
    }
    let mut labels = Vec::with_capacity(n);
    for i in 0..n {
        let v = y.data.get_f64(i).unwrap_or(f64::NAN);
        if !(v.fract() == 0.0 && (0.0..=10.0).contains(&v)) {
            return Err(DataError::format(
                path,
                format!("label {v} of image {i} is not an integer in 1..=10"),
            ));
        }
        // SVHN writes the digit 0 as class 10.
        labels.push(if v == 10.0 { 0 } else { v as u32 });
    }
    let plane = h * w;
    let mut pixels = vec![0u8; n * 3 * plane];
    let bytes: std::borrow::Cow<[u8]> = match &x.data {
        MatData::U8(v) => std::borrow::Cow::Borrowed(v),
        MatData::F64(v) => {
            let mut out = Vec::with_capacity(v.len());
            for (k, &f) in v.iter().enumerate() {
                if !((0.0..=255.0).contains(&f) && f.fract() == 0.0) {
                    return Err(DataError::format(
                        path,
                        format!("`X` value {f} at element {k} is not a byte"),
                    ));
                }
                out.push(f as u8);
            }
            std::borrow::Cow::Owned(out)
        }
    };
    // Column-major (r, c, ch, i) -> row-major CHW per image.
    for (src, dst) in bytes
        .chunks_exact(plane)
        .zip(pixels.chunks_exact_mut(plane))
    {
        for c in 0..w {
            for r in 0..h {
                dst[r * w + c] = src[c * h + r];
            }
        }
    }
    InMemoryDataset::new(pixels, labels, (3, h, w), 10)
}

/// Loads an SVHN split from a folder holding `train_32x32.mat` / `test_32x32.mat`.
pub fn load_svhn(dir: impl AsRef<Path>, split: Split) -> Result<InMemoryDataset> {
    load_svhn_mat(dir.as_ref().join(svhn_file(split)))
}
