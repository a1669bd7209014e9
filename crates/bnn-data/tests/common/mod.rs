//! Writers for small files in the real formats, shared by the integration tests.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;

/// A deterministic byte pattern: pixel `k` of image `i`.
pub fn pixel(i: usize, k: usize) -> u8 {
    ((i * 131 + k * 7 + (k / 97) * 3) % 256) as u8
}

/// Writes a CIFAR binary file of `n` records, label `labels(i)` bytes then 3072 pixels.
pub fn write_cifar(path: &Path, n: usize, first_index: usize, labels: impl Fn(usize) -> Vec<u8>) {
    let mut bytes = Vec::new();
    for i in first_index..first_index + n {
        bytes.extend(labels(i));
        bytes.extend((0..3072).map(|k| pixel(i, k)));
    }
    std::fs::write(path, bytes).unwrap();
}

/// One MAT v5 data element with 8-byte padding.
pub fn mat_element(ty: u32, data: &[u8]) -> Vec<u8> {
    let mut v = ty.to_le_bytes().to_vec();
    v.extend((data.len() as u32).to_le_bytes());
    v.extend_from_slice(data);
    while !v.len().is_multiple_of(8) {
        v.push(0);
    }
    v
}

/// An `miMATRIX` element of class `class`, dims, name, with data stored as type `storage`.
pub fn mat_matrix(name: &str, class: u8, dims: &[u32], storage: u32, data: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut flags = (class as u32).to_le_bytes().to_vec();
    flags.extend([0u8; 4]);
    body.extend(mat_element(6, &flags));
    let dims_bytes: Vec<u8> = dims
        .iter()
        .flat_map(|d| (*d as i32).to_le_bytes())
        .collect();
    body.extend(mat_element(5, &dims_bytes));
    if name.len() <= 4 {
        // Small data element format, as MATLAB writes short names.
        let mut small = (((name.len() as u32) << 16) | 1).to_le_bytes().to_vec();
        let mut padded = name.as_bytes().to_vec();
        padded.resize(4, 0);
        small.extend(padded);
        body.extend(small);
    } else {
        body.extend(mat_element(1, name.as_bytes()));
    }
    body.extend(mat_element(storage, data));
    mat_element(14, &body)
}

/// A MAT v5 file: 128-byte header plus `elements`.
pub fn mat_file(elements: &[Vec<u8>]) -> Vec<u8> {
    let mut header = b"MATLAB 5.0 MAT-file, written by bnn-data tests".to_vec();
    header.resize(116, b' ');
    header.extend([0u8; 8]);
    header.extend(0x0100u16.to_le_bytes());
    header.extend(b"IM");
    for e in elements {
        header.extend(e);
    }
    header
}

/// Wraps an element in an `miCOMPRESSED` (zlib) element.
pub fn mat_compressed(element: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(element).unwrap();
    let z = enc.finish().unwrap();
    let mut v = 15u32.to_le_bytes().to_vec();
    v.extend((z.len() as u32).to_le_bytes());
    v.extend(z);
    v
}

/// SVHN-layout arrays for `n` images: X uint8 [32,32,3,n] column-major, y labels 1..=10.
pub fn svhn_arrays(n: usize) -> (Vec<u8>, Vec<u8>) {
    let mut x = vec![0u8; 32 * 32 * 3 * n];
    for i in 0..n {
        for ch in 0..3 {
            for r in 0..32 {
                for c in 0..32 {
                    // Column-major index of (r, c, ch, i); value = our CHW pixel pattern.
                    x[r + 32 * c + 1024 * ch + 3072 * i] = pixel(i, ch * 1024 + r * 32 + c);
                }
            }
        }
    }
    let y = (0..n).map(|i| (i % 10 + 1) as u8).collect();
    (x, y)
}

/// Writes a tiny JPEG of `w × h` filled with `rgb`.
pub fn write_jpeg(path: &Path, w: u32, h: u32, rgb: [u8; 3]) {
    let img = image::RgbImage::from_pixel(w, h, image::Rgb(rgb));
    img.save_with_format(path, image::ImageFormat::Jpeg)
        .unwrap();
}

/// Gzips `data`.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// An IDX file: magic, dims, data.
pub fn idx(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut v = magic.to_be_bytes().to_vec();
    for d in dims {
        v.extend(d.to_be_bytes());
    }
    v.extend_from_slice(data);
    v
}
