//! Regression data from a NumPy `.npz` file with the keys of the image files ([`crate::load_npz`]):
//! `x_train`, `y_train` and, optionally, `x_test`, `y_test`, where the `y_*` are floating
//! point.
//!
//! - `y_*` are `float32` or `float64`, of shape `[n]` (one target) or `[n, t]`.
//! - `x_*` are floating point or integer (`uint8` images included), of any shape `[n, ...]`
//!   of rank 2 or more: `[n, d]` tables, or images `[n, h, w]`, `[n, h, w, c]`,
//!   `[n, c, h, w]`, each row flattened in its stored (row-major) order to `d` features.
//! - Every value must be finite, and a `float64` one within `f32`'s range: the error names
//!   the array, the row (counted from 0) and the column.
//! - The size checks are those of the image reader (the `.npy` header read first; a member
//!   whose zip entry declares another size than its shape needs, a compression ratio deflate
//!   cannot reach or a member named twice is refused), with the memory budget
//!   ([`crate::memory_budget`] with [`crate::MAX_NPY_BYTES`]) charged for each array's bytes
//!   and its `f32` copy before anything is inflated.
//!
//! [`npz_is_regression`] tells such a file from a classification one by `y_train`'s dtype.

use std::path::Path;

use crate::error::{DataError, Result};
use crate::memory::memory_budget;
use crate::npz::{
    Dtype, MAX_NPY_BYTES, NpyArray, NpyHeader, open_zip, read_arrays_charged, read_npy_header,
};
use crate::tabular::{TabularDataset, TabularSplits};

/// Whether the `.npz` at `path` is a regression file: `true` when its `y_train` is floating
/// point (read with [`read_npz_tabular`]), `false` when it is integer labels (read with
/// [`crate::load_npz`]). Only `y_train`'s header is read. A file without `y_train`, or not a
/// `.npz`, is an error naming it.
pub fn npz_is_regression(path: &Path) -> Result<bool> {
    let mut zip = open_zip(path)?;
    let mut entry = match zip.by_name("y_train.npy") {
        Ok(entry) => entry,
        Err(zip::result::ZipError::FileNotFound) => {
            return Err(DataError::format(
                path,
                "no `y_train` array (the keys of Keras' mnist.npz: x_train, y_train, and \
                 optionally x_test, y_test)",
            ));
        }
        Err(e) => return Err(DataError::format(path, format!("array `y_train`: {e}"))),
    };
    let sizes = (entry.size(), entry.compressed_size());
    let header = read_npy_header(&mut entry, sizes, path, "y_train")?;
    Ok(matches!(header.dtype, Dtype::F32 | Dtype::F64))
}

/// Reads the regression `.npz` at `path` (module docs): the training split and, when the file
/// has `x_test` and `y_test`, the test split, with the training split's feature and target
/// widths. Integer `y_train` (a classification file) is an error pointing to
/// [`crate::load_npz`]; so is a file with one of `x_test`, `y_test` and not the other.
pub fn read_npz_tabular(path: &Path) -> Result<TabularSplits> {
    read_npz_tabular_within(path, memory_budget(MAX_NPY_BYTES))
}

/// The bytes of an `f32` copy of the array `header` describes.
fn f32_copy(header: &NpyHeader) -> u64 {
    (header.data_bytes / header.dtype.size() as u64).saturating_mul(4)
}

/// [`read_npz_tabular`] with the arrays and their `f32` copies bounded by `budget` bytes.
fn read_npz_tabular_within(path: &Path, budget: u64) -> Result<TabularSplits> {
    let keys = ["x_train", "y_train", "x_test", "y_test"];
    let mut arrays = read_arrays_charged(path, &keys, budget, f32_copy)?.into_iter();
    let mut next = || arrays.next().flatten();
    let (x_train, y_train, x_test, y_test) = (next(), next(), next(), next());
    let (Some(x_train), Some(y_train)) = (x_train, y_train) else {
        return Err(DataError::format(
            path,
            "no `x_train` and `y_train` arrays (the keys of Keras' mnist.npz: x_train, \
             y_train, and optionally x_test, y_test)",
        ));
    };
    let train = pair(x_train, y_train, path, ("x_train", "y_train"))?;
    let test = match (x_test, y_test) {
        (Some(x), Some(y)) => {
            let test = pair(x, y, path, ("x_test", "y_test"))?;
            let (tr, te) = (
                (train.feature_dim(), train.target_dim()),
                (test.feature_dim(), test.target_dim()),
            );
            if tr != te {
                return Err(DataError::format(
                    path,
                    format!(
                        "the test split has {} features and {} targets per row, the training \
                         split {} and {}",
                        te.0, te.1, tr.0, tr.1
                    ),
                ));
            }
            Some(test)
        }
        (None, None) => None,
        (Some(_), None) => {
            return Err(DataError::format(
                path,
                "the file has `x_test` but no `y_test`: give both or neither",
            ));
        }
        (None, Some(_)) => {
            return Err(DataError::format(
                path,
                "the file has `y_test` but no `x_test`: give both or neither",
            ));
        }
    };
    Ok(TabularSplits { train, test })
}

/// The `(x, y)` arrays `keys` as a data set.
fn pair(x: NpyArray, y: NpyArray, path: &Path, keys: (&str, &str)) -> Result<TabularDataset> {
    let bad =
        |key: &str, reason: String| DataError::format(path, format!("array `{key}`: {reason}"));
    if !matches!(y.dtype, Dtype::F32 | Dtype::F64) {
        return Err(bad(
            keys.1,
            "regression targets must be floating point (float32 or float64); integer labels \
             make a classification file, read as images with their classes (load_npz)"
                .into(),
        ));
    }
    let t = match y.shape[..] {
        [_] => 1,
        [_, t] => t,
        _ => {
            return Err(bad(
                keys.1,
                format!(
                    "shape {:?}: targets are [n] (one per row) or [n, t]",
                    y.shape
                ),
            ));
        }
    };
    if x.shape.len() < 2 {
        return Err(bad(
            keys.0,
            format!(
                "shape {:?}: features are [n, d] (or images [n, h, w], [n, h, w, c]); one \
                 feature per row is [n, 1] (`x[:, None]`)",
                x.shape
            ),
        ));
    }
    let (n, ny) = (x.shape[0], y.shape[0]);
    if n != ny {
        return Err(DataError::format(
            path,
            format!(
                "`{}` has {n} rows and `{}` {ny}: one row of targets per row of features",
                keys.0, keys.1
            ),
        ));
    }
    if n == 0 {
        return Err(bad(keys.0, "no rows".into()));
    }
    // The shape's product is below the array's byte count, checked against the budget.
    let d: usize = x.shape[1..].iter().product();
    if d == 0 {
        return Err(bad(
            keys.0,
            format!("shape {:?} holds no features", x.shape),
        ));
    }
    if t == 0 {
        return Err(bad(keys.1, format!("shape {:?} holds no targets", y.shape)));
    }
    let features = to_f32(&x, d, path, keys.0, "feature")?;
    drop(x);
    let targets = to_f32(&y, t, path, keys.1, "target")?;
    TabularDataset::build(Some(path), features, targets, (d, t), None, None)
}

/// The values of `a` (rows of `width`) as finite `f32`s; a NaN, an infinity or a `float64`
/// beyond `f32`'s range is an error naming the array, the row and the column (`kind`).
fn to_f32(a: &NpyArray, width: usize, path: &Path, key: &str, kind: &str) -> Result<Vec<f32>> {
    let bad = |at: usize, v: f64| {
        DataError::format(
            path,
            format!(
                "array `{key}`: row {} (counted from 0), {kind} {}: {v:e} is not a finite f32 \
                 (NaN, infinity and values beyond ±3.4e38 are refused)",
                at / width,
                at % width
            ),
        )
    };
    let mut out = Vec::with_capacity(a.data.len() / a.dtype.size());
    match a.dtype {
        Dtype::U8 => out.extend(a.data.iter().map(|&b| b as f32)),
        Dtype::F32 => {
            for (at, b) in a.data.chunks_exact(4).enumerate() {
                let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                if !v.is_finite() {
                    return Err(bad(at, v as f64));
                }
                out.push(v);
            }
        }
        Dtype::F64 => {
            for (at, b) in a.data.chunks_exact(8).enumerate() {
                let v = f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                let w = v as f32;
                if !w.is_finite() {
                    return Err(bad(at, v));
                }
                out.push(w);
            }
        }
        Dtype::Int { bytes, signed } => out.extend(a.data.chunks_exact(bytes).map(|b| {
            let mut raw = [0u8; 8];
            raw[..bytes].copy_from_slice(b);
            let v = u64::from_le_bytes(raw);
            match signed {
                // Sign-extend from `bytes` wide.
                true => (((v << (64 - 8 * bytes)) as i64) >> (64 - 8 * bytes)) as f32,
                false => v as f32,
            }
        })),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Split;
    use crate::npz::tests::{npy, npz};

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn f64s(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn images_with_one_target_and_tables_with_two_are_read() {
        let dir = tempfile::tempdir().unwrap();
        // Three 2x2 grey uint8 images, y of shape [3] (float32); test: one image.
        let p = dir.path().join("images.npz");
        let pixels: Vec<u8> = (0..12).collect();
        npz(
            &p,
            &[
                ("x_train", npy("|u1", &[3, 2, 2], &pixels)),
                ("y_train", npy("<f4", &[3], &f32s(&[0.5, -1.0, 2.0]))),
                ("x_test", npy("|u1", &[1, 2, 2], &[9, 8, 7, 6])),
                ("y_test", npy("<f4", &[1], &f32s(&[4.0]))),
            ],
        );
        assert!(npz_is_regression(&p).unwrap());
        let s = read_npz_tabular(&p).unwrap();
        assert_eq!(
            (s.train.len(), s.train.feature_dim(), s.train.target_dim()),
            (3, 4, 1)
        );
        assert_eq!(
            s.train.row(2).unwrap(),
            (&[8.0, 9.0, 10.0, 11.0][..], &[2.0][..])
        );
        assert_eq!(s.train.targets(), &[0.5, -1.0, 2.0]);
        assert_eq!(s.train.source(), Some(p.as_path()));
        let test = s.test.unwrap();
        assert_eq!(
            (test.features(), test.targets()),
            (&[9.0, 8.0, 7.0, 6.0][..], &[4.0][..])
        );

        // Channels-last RGB images [2, 2, 2, 3] as float64, y [2, 2] as float64, no test split.
        let p = dir.path().join("rgb.npz");
        let x: Vec<f64> = (0..24).map(|i| i as f64 / 10.0).collect();
        npz(
            &p,
            &[
                ("x_train", npy("<f8", &[2, 2, 2, 3], &f64s(&x))),
                ("y_train", npy("<f8", &[2, 2], &f64s(&[1.0, 2.0, 3.0, 4.0]))),
            ],
        );
        let s = read_npz_tabular(&p).unwrap();
        assert!(s.test.is_none());
        assert_eq!((s.train.feature_dim(), s.train.target_dim()), (12, 2));
        assert_eq!(s.train.row(1).unwrap().1, &[3.0, 4.0]);
        assert_eq!(s.train.features()[13], 1.3);

        // A table [n, d] of int16 features with y [n, 2] float32.
        let p = dir.path().join("table.npz");
        let x: Vec<u8> = [-3i16, 4, 5, -6]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        npz(
            &p,
            &[
                ("x_train", npy("<i2", &[2, 2], &x)),
                ("y_train", npy("<f4", &[2, 2], &f32s(&[0.0, 1.0, 2.0, 3.0]))),
            ],
        );
        let s = read_npz_tabular(&p).unwrap();
        assert_eq!(s.train.features(), &[-3.0, 4.0, 5.0, -6.0]);
        assert_eq!(s.train.targets(), &[0.0, 1.0, 2.0, 3.0]);
    }

    #[test]
    fn a_classification_file_is_told_apart_and_still_reads_as_images() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("mnist.npz");
        npz(
            &p,
            &[
                ("x_train", npy("|u1", &[2, 2, 2], &[0; 8])),
                ("y_train", npy("|u1", &[2], &[0, 1])),
            ],
        );
        assert!(!npz_is_regression(&p).unwrap());
        assert_eq!(crate::load_npz(&p, Split::Train).unwrap().labels(), &[0, 1]);
        let e = read_npz_tabular(&p).unwrap_err().to_string();
        assert!(e.contains("y_train") && e.contains("floating point"), "{e}");
        let q = dir.path().join("no_y.npz");
        npz(&q, &[("x_train", npy("|u1", &[2, 2, 2], &[0; 8]))]);
        let e = npz_is_regression(&q).unwrap_err().to_string();
        assert!(
            e.contains("y_train") && e.contains(&q.display().to_string()),
            "{e}"
        );
    }

    #[test]
    fn bad_files_are_refused_naming_the_file_array_row_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.npz");
        let p_text = p.display().to_string();
        let x = npy("<f4", &[2, 2], &f32s(&[0.0, 1.0, 2.0, 3.0]));
        let y = npy("<f4", &[2], &f32s(&[0.0, 1.0]));
        let case = |arrays: &[(&str, Vec<u8>)], want: &[&str]| {
            npz(&p, arrays);
            let e = read_npz_tabular(&p).map(|_| ()).unwrap_err().to_string();
            assert!(e.contains(&p_text), "{e}");
            for w in want {
                assert!(e.contains(w), "`{w}` missing from: {e}");
            }
        };
        let nan = npy("<f4", &[2, 2], &f32s(&[0.0, 1.0, 2.0, f32::NAN]));
        case(
            &[("x_train", nan), ("y_train", y.clone())],
            &["x_train", "row 1", "feature 1", "NaN"],
        );
        let big = npy("<f8", &[2], &f64s(&[0.0, 1e300]));
        case(
            &[("x_train", x.clone()), ("y_train", big)],
            &["y_train", "row 1", "target 0", "1e300"],
        );
        case(
            &[
                ("x_train", npy("<f4", &[4], &f32s(&[0.0; 4]))),
                ("y_train", y.clone()),
            ],
            &["x_train", "[n, d]"],
        );
        case(
            &[
                ("x_train", x.clone()),
                ("y_train", npy("<f4", &[2, 1, 1], &f32s(&[0.0; 2]))),
            ],
            &["y_train", "[n, t]"],
        );
        case(
            &[
                ("x_train", x.clone()),
                ("y_train", npy("<f4", &[3], &f32s(&[0.0; 3]))),
            ],
            &["2 rows", "`y_train` 3"],
        );
        case(
            &[
                ("x_train", npy("<f4", &[0, 2], &[])),
                ("y_train", npy("<f4", &[0], &[])),
            ],
            &["no rows"],
        );
        case(
            &[
                ("x_train", npy("<f4", &[2, 0], &[])),
                ("y_train", y.clone()),
            ],
            &["no features"],
        );
        case(
            &[
                ("x_train", x.clone()),
                ("y_train", y.clone()),
                ("x_test", npy("<f4", &[1, 3], &f32s(&[0.0; 3]))),
                ("y_test", npy("<f4", &[1], &f32s(&[0.0]))),
            ],
            &["3 features", "training split 2"],
        );
        case(
            &[
                ("x_train", x.clone()),
                ("y_train", y.clone()),
                ("x_test", x.clone()),
            ],
            &["no `y_test`"],
        );
        case(&[("y_train", y.clone())], &["no `x_train`"]);
    }

    /// The budget holds each array's bytes and its f32 copy: 64 uint8 images of 32x32 take
    /// 65,536 bytes and 262,144 more as f32.
    #[test]
    fn arrays_and_their_f32_copies_are_held_within_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.npz");
        npz(
            &p,
            &[
                ("x_train", npy("|u1", &[64, 32, 32], &[0; 64 * 1024])),
                ("y_train", npy("<f4", &[64], &f32s(&[0.5; 64]))),
            ],
        );
        let e = read_npz_tabular_within(&p, 100_000)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x_train") && e.contains("327680 bytes") && e.contains("100000"),
            "{e}"
        );
        assert!(read_npz_tabular_within(&p, 327_680 + 512).is_ok());
        assert!(read_npz_tabular_within(&p, 327_680 + 511).is_err());
    }
}
