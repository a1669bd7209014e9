//! Small data files in the real formats for the tests of this crate and of the crates above
//! it. Not part of the API: the helpers panic on an I/O error, as a test should.

use std::path::{Path, PathBuf};

/// An uncompressed IDX file (the loader reads `NAME` or `NAME.gz`).
pub fn write_idx(path: &Path, magic: u32, dims: &[u32], data: &[u8]) {
    let mut raw = magic.to_be_bytes().to_vec();
    for d in dims {
        raw.extend_from_slice(&d.to_be_bytes());
    }
    raw.extend_from_slice(data);
    std::fs::write(path, raw).unwrap();
}

/// Three MNIST-shaped test images in `cache/mnist`, the cache layout.
pub fn fake_mnist_test_split(cache: &Path) -> PathBuf {
    let dir = cache.join("mnist");
    std::fs::create_dir_all(&dir).unwrap();
    write_idx(
        &dir.join("t10k-images-idx3-ubyte"),
        2051,
        &[3, 28, 28],
        &[7; 3 * 784],
    );
    write_idx(&dir.join("t10k-labels-idx1-ubyte"), 2049, &[3], &[0, 1, 2]);
    dir
}
