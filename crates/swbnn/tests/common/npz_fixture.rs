//! Small data sets in Keras' `.npz` layout for the tests (the integration tests include it as
//! `common::npz_fixture`, the library's unit tests by path). Not every test uses every helper.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;

/// `n` grey `side x side` images of 3 classes: class `c` lights rows `c * side / 3 ..`, on
/// seeded noise. Returns `(pixels, labels)`.
pub fn images(n: usize, side: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as u32
    };
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    for i in 0..n {
        let c = i % 3;
        labels.push(c as u8);
        for r in 0..side {
            for _ in 0..side {
                let lit = (r * 3 / side == c) && next() % 4 != 0;
                pixels.push(if lit { 160 } else { 0 } + (next() % 90) as u8);
            }
        }
    }
    (pixels, labels)
}

/// The `.npy` bytes of a uint8 array of `shape`.
pub fn npy(shape: &[usize], data: &[u8]) -> Vec<u8> {
    npy_of("|u1", shape, data)
}

/// The `.npy` bytes of a little-endian float32 array of `shape`.
pub fn npy_f32(shape: &[usize], data: &[f32]) -> Vec<u8> {
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    npy_of("<f4", shape, &bytes)
}

/// The `.npy` bytes of an array of NumPy dtype `descr` and `shape` holding `data`.
fn npy_of(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// A `.npz` of the named `.npy` arrays.
pub fn write_npz(path: &Path, arrays: &[(&str, Vec<u8>)]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in arrays {
        zip.start_file(format!("{name}.npy"), options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

/// A `.npz` of `train` and (when `test > 0`) `test` grey `side x side` images of [`images`].
pub fn write_image_npz(path: &Path, train: usize, test: usize, side: usize) {
    let (xtr, ytr) = images(train, side, 1);
    let mut arrays = vec![
        ("x_train", npy(&[train, side, side], &xtr)),
        ("y_train", npy(&[train], &ytr)),
    ];
    if test > 0 {
        let (xte, yte) = images(test, side, 2);
        arrays.push(("x_test", npy(&[test, side, side], &xte)));
        arrays.push(("y_test", npy(&[test], &yte)));
    }
    write_npz(path, &arrays);
}
