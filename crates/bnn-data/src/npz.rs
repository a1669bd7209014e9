//! Labelled images from a NumPy `.npz` file with the keys of Keras' `mnist.npz`: `x_train`,
//! `y_train` and, optionally, `x_test`, `y_test` (`np.savez` or `np.savez_compressed`).
//!
//! - Images are `uint8` (0-255) or `float32`: floats hold values in `[0, 1]` (scaled by 255)
//!   or in `[0, 255]` (taken as they are), told apart by their largest value, and are rounded
//!   to bytes, the precision every loader of the crate keeps.
//! - Layouts `[n, h, w]` (grey), `[n, h, w, c]` and `[n, c, h, w]` with `c` 1 or 3, told apart
//!   by which axis is 1 or 3; a shape where both could be is refused as ambiguous.
//! - Labels are integers `0..classes`, one per image; the class count is the largest training
//!   label plus one.
//!
//! The `.npy` header is read as NumPy's format description gives it
//! (<https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>).

use std::io::Read;
use std::path::Path;

use crate::dataset::{InMemoryDataset, Split};
use crate::error::{DataError, Result};

/// The largest `.npz` read (bytes of one stored array, uncompressed): bounds a corrupt or
/// hostile header before any allocation.
pub const MAX_NPY_BYTES: u64 = 16 << 30;

/// The element types the reader takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dtype {
    U8,
    F32,
    F64,
    /// Integers of `bytes` width, signed or not, little-endian.
    Int {
        bytes: usize,
        signed: bool,
    },
}

impl Dtype {
    fn parse(descr: &str) -> Option<Self> {
        let d = descr.trim_start_matches(['<', '|', '=']);
        Some(match d {
            "u1" => Dtype::U8,
            "f4" => Dtype::F32,
            "f8" => Dtype::F64,
            "i1" => Dtype::Int {
                bytes: 1,
                signed: true,
            },
            "i2" | "u2" | "i4" | "u4" | "i8" | "u8" => Dtype::Int {
                bytes: d[1..].parse().ok()?,
                signed: d.starts_with('i'),
            },
            _ => return None,
        })
    }

    fn size(self) -> usize {
        match self {
            Dtype::U8 => 1,
            Dtype::F32 => 4,
            Dtype::F64 => 8,
            Dtype::Int { bytes, .. } => bytes,
        }
    }
}

/// One array of a `.npz`: its type, shape and raw little-endian bytes.
struct NpyArray {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

/// Parses the `.npy` bytes of array `key` in `path`.
fn parse_npy(bytes: Vec<u8>, path: &Path, key: &str) -> Result<NpyArray> {
    let bad = |reason: String| DataError::format(path, format!("array `{key}`: {reason}"));
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("not a .npy array (no NUMPY magic)".into()));
    }
    let (header_len, start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(format!(".npy format version {v} is not supported"))),
    };
    let end = start
        .checked_add(header_len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| bad("the header runs past the end of the array".into()))?;
    let header = String::from_utf8(bytes[start..end].to_vec())
        .map_err(|_| bad("the header is not text".into()))?;
    let field = |name: &str| -> Option<&str> {
        let at = header.find(&format!("'{name}'"))? + name.len() + 2;
        let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
        Some(rest)
    };
    let descr = field("descr")
        .and_then(|r| r.strip_prefix('\'')?.split('\'').next())
        .ok_or_else(|| bad("the header has no dtype (`descr`)".into()))?;
    if descr.starts_with('>') && descr != ">u1" {
        return Err(bad(format!(
            "big-endian dtype {descr}: save it little-endian (`x.astype('<{}')`)",
            &descr[1..]
        )));
    }
    let dtype = Dtype::parse(descr).ok_or_else(|| {
        bad(format!(
            "dtype {descr} is not supported (uint8 or float32 images, integer labels)"
        ))
    })?;
    if field("fortran_order").is_some_and(|r| r.starts_with("True")) {
        return Err(bad(
            "the array is stored in Fortran order: save `np.ascontiguousarray(x)`".into(),
        ));
    }
    let shape_text = field("shape")
        .and_then(|r| r.strip_prefix('('))
        .and_then(|r| r.split(')').next())
        .ok_or_else(|| bad("the header has no shape".into()))?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|_| bad(format!("unreadable shape ({shape_text})")))?;
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or_else(|| bad(format!("shape {shape:?} is too large")))?;
    let mut data = bytes;
    data.drain(..end);
    if data.len() != count {
        return Err(bad(format!(
            "shape {shape:?} of {descr} needs {count} bytes, the file holds {}",
            data.len()
        )));
    }
    Ok(NpyArray { dtype, shape, data })
}

/// Reads the arrays named `keys` from the `.npz` at `path` (`None` for a key it lacks).
fn read_arrays(path: &Path, keys: &[&str]) -> Result<Vec<Option<NpyArray>>> {
    let file = std::fs::File::open(path).map_err(|e| DataError::io(path, e))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .map_err(|e| DataError::format(path, format!("not a .npz file (a zip archive): {e}")))?;
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let name = format!("{key}.npy");
        let mut entry = match zip.by_name(&name) {
            Ok(entry) => entry,
            Err(zip::result::ZipError::FileNotFound) => {
                out.push(None);
                continue;
            }
            Err(e) => return Err(DataError::format(path, format!("array `{key}`: {e}"))),
        };
        if entry.size() > MAX_NPY_BYTES {
            return Err(DataError::format(
                path,
                format!(
                    "array `{key}` is {} bytes, more than the {MAX_NPY_BYTES} read",
                    entry.size()
                ),
            ));
        }
        // The declared size is not trusted for the allocation: a corrupt header could claim
        // gigabytes; the vector grows with what the entry really holds.
        let mut bytes = Vec::with_capacity(entry.size().min(64 << 20) as usize);
        (&mut entry)
            .take(MAX_NPY_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| DataError::format(path, format!("array `{key}`: {e}")))?;
        out.push(Some(parse_npy(bytes, path, key)?));
    }
    Ok(out)
}

/// `(channels, height, width)` and whether the channel axis is last, from an image array's
/// shape.
fn image_layout(shape: &[usize], path: &Path, key: &str) -> Result<((usize, usize, usize), bool)> {
    let is_c = |d: usize| d == 1 || d == 3;
    let bad = |reason: String| DataError::format(path, format!("array `{key}`: {reason}"));
    match *shape {
        [_, h, w] => Ok(((1, h, w), false)),
        [_, a, h, b] if is_c(b) && !is_c(a) => Ok(((b, a, h), true)),
        [_, a, h, w] if is_c(a) && !is_c(w) => Ok(((a, h, w), false)),
        [_, a, _, b] if is_c(a) && is_c(b) => Err(bad(format!(
            "shape {shape:?} is ambiguous: [n, h, w, c] and [n, c, h, w] both fit; transpose \
             it to [n, h, w] (grey) or use images larger than 3 pixels"
        ))),
        [..] => Err(bad(format!(
            "shape {shape:?} is not [n, h, w], [n, h, w, c] or [n, c, h, w] with 1 or 3 channels"
        ))),
    }
}

/// The image array `x` as channel-major bytes.
fn image_bytes(x: &NpyArray, path: &Path, key: &str) -> Result<(Vec<u8>, (usize, usize, usize))> {
    let ((c, h, w), channels_last) = image_layout(&x.shape, path, key)?;
    if h == 0 || w == 0 {
        return Err(DataError::format(
            path,
            format!("array `{key}`: images of {h}x{w} pixels"),
        ));
    }
    // Bytes in the file's order first: uint8 as stored, floats checked and rounded (two
    // passes over the array, no wider copy of it).
    let stored: Vec<u8> = match x.dtype {
        Dtype::U8 => x.data.clone(),
        Dtype::F32 | Dtype::F64 => {
            let width = x.dtype.size();
            let value = |b: &[u8]| match width {
                4 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                _ => f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            };
            let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
            for (i, b) in x.data.chunks_exact(width).enumerate() {
                let v = value(b);
                if !v.is_finite() {
                    return Err(DataError::format(
                        path,
                        format!(
                            "array `{key}`: image {} holds {v} (NaN or infinity)",
                            i / (c * h * w)
                        ),
                    ));
                }
                (lo, hi) = (lo.min(v), hi.max(v));
            }
            if lo < 0.0 || hi > 255.0 {
                return Err(DataError::format(
                    path,
                    format!(
                        "array `{key}`: float images must hold values in [0, 1] or [0, 255]; \
                         these range over [{lo}, {hi}] (pass the raw images: the model's \
                         normalisation is measured and applied for you)"
                    ),
                ));
            }
            let scale = if hi <= 1.0 { 255.0 } else { 1.0 };
            x.data
                .chunks_exact(width)
                .map(|b| (value(b) * scale).round() as u8)
                .collect()
        }
        Dtype::Int { .. } => {
            return Err(DataError::format(
                path,
                format!("array `{key}`: images must be uint8 or float32, not integers"),
            ));
        }
    };
    if !channels_last {
        return Ok((stored, (c, h, w)));
    }
    let (per, plane) = (c * h * w, h * w);
    let mut bytes = vec![0u8; stored.len()];
    for (image, out) in stored.chunks(per).zip(bytes.chunks_mut(per)) {
        for p in 0..plane {
            for ch in 0..c {
                out[ch * plane + p] = image[p * c + ch];
            }
        }
    }
    Ok((bytes, (c, h, w)))
}

/// The label array `y` as class indices.
fn labels(y: &NpyArray, path: &Path, key: &str) -> Result<Vec<i64>> {
    let bad = |reason: String| DataError::format(path, format!("array `{key}`: {reason}"));
    if y.shape.len() != 1 && !(y.shape.len() == 2 && y.shape[1] == 1) {
        return Err(bad(format!(
            "labels must be one integer per image, shape [n]; found {:?} (one-hot labels: \
             pass `y.argmax(1)`)",
            y.shape
        )));
    }
    match y.dtype {
        Dtype::U8 => Ok(y.data.iter().map(|&b| b as i64).collect()),
        Dtype::Int { bytes, signed } => Ok(y
            .data
            .chunks_exact(bytes)
            .map(|b| {
                let mut raw = [0u8; 8];
                raw[..bytes].copy_from_slice(b);
                let v = u64::from_le_bytes(raw);
                match signed {
                    // Sign-extend from `bytes` wide.
                    true => ((v << (64 - 8 * bytes)) as i64) >> (64 - 8 * bytes),
                    false => v as i64,
                }
            })
            .collect()),
        _ => Err(bad("labels must be integers".into())),
    }
}

/// The `(x, y)` pair `x_key`, `y_key` as a data set of `classes` classes (the training
/// labels' largest plus one when `None`).
fn pair(
    x: &NpyArray,
    y: &NpyArray,
    path: &Path,
    keys: (&str, &str),
    classes: Option<usize>,
) -> Result<InMemoryDataset> {
    let (pixels, shape) = image_bytes(x, path, keys.0)?;
    let ys = labels(y, path, keys.1)?;
    let n = x.shape[0];
    if ys.len() != n {
        return Err(DataError::format(
            path,
            format!(
                "`{}` has {n} images and `{}` {} labels: one label per image",
                keys.0,
                keys.1,
                ys.len()
            ),
        ));
    }
    if n == 0 {
        return Err(DataError::format(
            path,
            format!("`{}` holds no images", keys.0),
        ));
    }
    if let Some((i, l)) = ys.iter().enumerate().find(|&(_, &l)| l < 0) {
        return Err(DataError::format(
            path,
            format!("`{}`: label {l} of image {i} is negative", keys.1),
        ));
    }
    let classes = classes.unwrap_or_else(|| ys.iter().max().map_or(0, |&m| m as usize + 1));
    if let Some((i, l)) = ys.iter().enumerate().find(|&(_, &l)| l as usize >= classes) {
        return Err(DataError::format(
            path,
            format!(
                "`{}`: label {l} of image {i} is out of range: the training labels give {classes} \
                 classes (0..{classes})",
                keys.1
            ),
        ));
    }
    if classes < 2 {
        return Err(DataError::format(
            path,
            format!("`{}` holds a single class: a classifier needs two", keys.1),
        ));
    }
    InMemoryDataset::new(
        pixels,
        ys.into_iter().map(|l| l as u32).collect(),
        shape,
        classes,
    )
}

/// Whether the `.npz` at `path` holds a test split (`x_test` and `y_test`).
pub fn npz_has_test(path: &Path) -> Result<bool> {
    let file = std::fs::File::open(path).map_err(|e| DataError::io(path, e))?;
    let zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .map_err(|e| DataError::format(path, format!("not a .npz file (a zip archive): {e}")))?;
    let names: Vec<String> = zip
        .file_names()
        .filter_map(|n| n.ok().map(|n| n.into_owned()))
        .collect();
    Ok(["x_test.npy", "y_test.npy"]
        .iter()
        .all(|k| names.iter().any(|n| n == k)))
}

/// Loads `split` of the `.npz` at `path` (module docs). The test split takes the class
/// count of the training labels, so a test label the training split never has is an error;
/// asking for a test split of a file without `x_test` is an error naming the file.
pub fn load_npz(path: &Path, split: Split) -> Result<InMemoryDataset> {
    let keys = ["x_train", "y_train", "x_test", "y_test"];
    let want: &[&str] = match split {
        Split::Train => &keys[..2],
        Split::Test => &keys,
    };
    let mut arrays = read_arrays(path, want)?.into_iter();
    let (x_train, y_train) = (arrays.next().flatten(), arrays.next().flatten());
    let (Some(x_train), Some(y_train)) = (x_train, y_train) else {
        return Err(DataError::format(
            path,
            "no `x_train` and `y_train` arrays (the keys of Keras' mnist.npz: x_train, \
             y_train, and optionally x_test, y_test)",
        ));
    };
    let train = pair(&x_train, &y_train, path, ("x_train", "y_train"), None)?;
    match split {
        Split::Train => Ok(train),
        Split::Test => match (arrays.next().flatten(), arrays.next().flatten()) {
            (Some(x), Some(y)) => {
                let test = pair(
                    &x,
                    &y,
                    path,
                    ("x_test", "y_test"),
                    Some(crate::Dataset::classes(&train)),
                )?;
                let (ts, es) = (crate::Dataset::shape(&train), crate::Dataset::shape(&test));
                if ts != es {
                    return Err(DataError::format(
                        path,
                        format!(
                            "`x_test` holds {}x{}x{} images and `x_train` {}x{}x{}",
                            es.0, es.1, es.2, ts.0, ts.1, ts.2
                        ),
                    ));
                }
                Ok(test)
            }
            _ => Err(DataError::format(
                path,
                "no test split: the file has no `x_test` and `y_test` arrays",
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dataset;
    use std::io::Write;

    /// The `.npy` bytes of an array with `descr`, `shape` and raw `data`.
    pub(crate) fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        let shape = match dims.len() {
            1 => format!("({},)", dims[0]),
            _ => format!("({})", dims.join(", ")),
        };
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
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

    /// A `.npz` (deflated, as `np.savez_compressed` writes) of `arrays`.
    pub(crate) fn npz(path: &Path, arrays: &[(&str, Vec<u8>)]) {
        let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in arrays {
            zip.start_file(format!("{name}.npy"), options).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
    }

    #[test]
    fn channels_last_and_first_give_the_same_channel_major_images() {
        let dir = tempfile::tempdir().unwrap();
        // Two 2x2 RGB images: pixel value = 100 * channel + 10 * image + position.
        let value = |i: usize, c: usize, p: usize| (100 * c + 10 * i + p) as u8;
        let hwc: Vec<u8> = (0..2)
            .flat_map(|i| (0..4).flat_map(move |p| (0..3).map(move |c| value(i, c, p))))
            .collect();
        let chw: Vec<u8> = (0..2)
            .flat_map(|i| (0..3).flat_map(move |c| (0..4).map(move |p| value(i, c, p))))
            .collect();
        let y = npy("|u1", &[2], &[0, 1]);
        let a = dir.path().join("hwc.npz");
        npz(
            &a,
            &[
                ("x_train", npy("|u1", &[2, 2, 2, 3], &hwc)),
                ("y_train", y.clone()),
            ],
        );
        let b = dir.path().join("chw.npz");
        npz(
            &b,
            &[("x_train", npy("|u1", &[2, 3, 2, 2], &chw)), ("y_train", y)],
        );
        let (a, b) = (
            load_npz(&a, Split::Train).unwrap(),
            load_npz(&b, Split::Train).unwrap(),
        );
        assert_eq!(a.shape(), (3, 2, 2));
        assert_eq!(a.pixels(), chw.as_slice());
        assert_eq!(b.pixels(), chw.as_slice());
        assert_eq!((a.classes(), a.labels()), (2, &[0u32, 1][..]));
    }

    #[test]
    fn float_images_in_either_range_and_wide_labels_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let unit: Vec<u8> = [0.0f32, 0.5, 1.0, 0.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let bytes: Vec<u8> = [0.0f32, 127.5, 255.0, 63.75]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let y: Vec<u8> = [0i64, 2].iter().flat_map(|v| v.to_le_bytes()).collect();
        for x in [unit, bytes] {
            let p = dir.path().join("f.npz");
            npz(
                &p,
                &[
                    ("x_train", npy("<f4", &[2, 1, 2], &x)),
                    ("y_train", npy("<i8", &[2], &y)),
                ],
            );
            let d = load_npz(&p, Split::Train).unwrap();
            assert_eq!(d.pixels(), &[0, 128, 255, 64]);
            assert_eq!((d.shape(), d.classes()), ((1, 1, 2), 3));
        }
    }

    #[test]
    fn bad_files_are_refused_naming_the_file_and_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.npz");
        let p_text = p.display().to_string();
        let x = npy("|u1", &[2, 4, 4], &[0; 32]);
        let case = |arrays: &[(&str, Vec<u8>)], split: Split, expect: &[&str]| {
            npz(&p, arrays);
            let e = load_npz(&p, split).unwrap_err().to_string();
            assert!(e.contains(&p_text), "{e}");
            for want in expect {
                assert!(e.contains(want), "`{want}` missing from: {e}");
            }
        };
        case(
            &[
                ("x_train", x.clone()),
                ("y_train", npy("|u1", &[3], &[0, 1, 1])),
            ],
            Split::Train,
            &["2 images", "3 labels"],
        );
        case(
            &[
                ("x_train", x.clone()),
                ("y_train", npy("<i2", &[2], &[0, 0, 255, 255])),
            ],
            Split::Train,
            &["label -1", "negative"],
        );
        case(
            &[
                ("x_train", x.clone()),
                ("y_train", npy("|u1", &[2], &[0, 1])),
                ("x_test", x.clone()),
                ("y_test", npy("|u1", &[2], &[0, 7])),
            ],
            Split::Test,
            &["label 7", "out of range", "2 classes"],
        );
        let nan: Vec<u8> = (0..32)
            .flat_map(|i| if i == 20 { f32::NAN } else { 0.5f32 }.to_le_bytes())
            .collect();
        case(
            &[
                ("x_train", npy("<f4", &[2, 4, 4], &nan)),
                ("y_train", npy("|u1", &[2], &[0, 1])),
            ],
            Split::Train,
            &["image 1", "NaN"],
        );
        case(
            &[
                ("x_train", npy("|u1", &[2, 3, 4, 3], &[0; 72])),
                ("y_train", npy("|u1", &[2], &[0, 1])),
            ],
            Split::Train,
            &["ambiguous"],
        );
        case(
            &[
                ("x_train", npy("|u1", &[2, 5, 4, 4], &[0; 160])),
                ("y_train", npy("|u1", &[2], &[0, 1])),
            ],
            Split::Train,
            &["1 or 3 channels"],
        );
        case(
            &[
                ("x_train", x.clone()),
                ("y_train", npy("|u1", &[2], &[0, 1])),
            ],
            Split::Test,
            &["no test split"],
        );
        case(&[("images", x.clone())], Split::Train, &["x_train"]);
        case(
            &[
                ("x_train", x.clone()),
                ("y_train", npy("<f4", &[2], &[0; 8])),
            ],
            Split::Train,
            &["integers"],
        );
        // A header whose shape promises more bytes than the array holds.
        case(
            &[
                ("x_train", npy("|u1", &[2000, 4, 4], &[0; 32])),
                ("y_train", npy("|u1", &[2], &[0, 1])),
            ],
            Split::Train,
            &["needs 32000 bytes"],
        );
        std::fs::write(&p, b"not a zip").unwrap();
        let e = load_npz(&p, Split::Train).unwrap_err().to_string();
        assert!(e.contains(&p_text) && e.contains("not a .npz"), "{e}");
    }
}
