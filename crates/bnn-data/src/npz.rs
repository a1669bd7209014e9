//! Labelled images from a NumPy `.npz` file with the keys of Keras' `mnist.npz`: `x_train`,
//! `y_train` and, optionally, `x_test`, `y_test` (`np.savez` or `np.savez_compressed`).
//!
//! - Images are `uint8` (0-255) or `float32`: floats hold values in `[0, 1]` (scaled by 255)
//!   or in `[0, 255]` (taken as they are), told apart by their largest value, and are rounded
//!   to bytes, the precision every loader of the crate keeps.
//! - Layouts `[n, h, w]` (grey), `[n, h, w, c]` and `[n, c, h, w]` with `c` 1 or 3, told apart
//!   by which axis is 1 or 3; a shape where both could be is refused as ambiguous.
//! - Images are square (`h == w`): the models take `n x n` inputs.
//! - Labels are integers `0..classes`, one per image; the class count is the largest training
//!   label plus one, at most [`crate::MAX_CLASSES`] and at most twice the distinct labels
//!   present plus [`SPARSE_LABEL_SLACK`] (a label far above the others is an error naming it).
//! - Sizes are checked before anything is inflated: the `.npy` header is read first, and a
//!   member whose zip entry declares another size than its shape needs, a compression ratio
//!   deflate cannot reach ([`MAX_COMPRESSION_RATIO`]), or more than the memory budget
//!   ([`crate::memory_budget`]) is refused; so is a member named twice.
//!
//! The `.npy` header is read as NumPy's format description gives it
//! (<https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>).

use std::io::Read;
use std::path::Path;

use crate::dataset::{InMemoryDataset, MAX_CLASSES, Split};
use crate::error::{DataError, Result};
use crate::memory::memory_budget;

/// The most bytes the arrays of one `.npz` may take uncompressed, on any machine: a ceiling
/// over the memory budget ([`crate::memory_budget`], a quarter of the memory available), which
/// is what bounds a read on a machine with less.
pub const MAX_NPY_BYTES: u64 = 16 << 30;

/// How far a training split's class count (its largest label plus one) may exceed twice the
/// number of distinct labels it holds. A file may lack some classes (a subset of a data set:
/// labels {0, 9} give 10 classes), but a count far above the labels present is one wrong
/// label (a label of 60,000 among digits made a 60,001-class model). 16 lets the smallest
/// files through: any count up to 2 x distinct + 16 is taken.
pub const SPARSE_LABEL_SLACK: usize = 16;

/// The element types the reader takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dtype {
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

    pub(crate) fn size(self) -> usize {
        match self {
            Dtype::U8 => 1,
            Dtype::F32 => 4,
            Dtype::F64 => 8,
            Dtype::Int { bytes, .. } => bytes,
        }
    }
}

/// One array of a `.npz`: its type, shape and raw little-endian bytes.
pub(crate) struct NpyArray {
    pub(crate) dtype: Dtype,
    pub(crate) shape: Vec<usize>,
    pub(crate) data: Vec<u8>,
}

/// The longest `.npy` header read, in bytes: NumPy's own default limit when it loads one
/// (`max_header_size` of `numpy.load`); the headers `np.savez` writes take 128.
pub const MAX_NPY_HEADER_BYTES: usize = 10_000;

/// The largest ratio of a member's declared (uncompressed) size to its stored size: deflate,
/// the method of `np.savez_compressed`, cannot exceed about 1032:1 (a 258-byte match coded in
/// 2 bits), and a stored member is 1:1. A member declaring more is a corrupt or forged entry,
/// refused before it is inflated.
pub const MAX_COMPRESSION_RATIO: u64 = 1032;

/// The type, shape and byte length of one `.npy` array, from its header.
pub(crate) struct NpyHeader {
    pub(crate) dtype: Dtype,
    pub(crate) descr: String,
    pub(crate) shape: Vec<usize>,
    /// Bytes of the array's data: the shape's product times the element size.
    pub(crate) data_bytes: u64,
}

/// Parses the text of a `.npy` header (the dictionary after the magic and the length).
fn parse_header(header: &str, bad: &dyn Fn(String) -> DataError) -> Result<NpyHeader> {
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
    let data_bytes = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d as u64))
        .and_then(|n| n.checked_mul(dtype.size() as u64))
        .ok_or_else(|| bad(format!("shape {shape:?} is too large")))?;
    Ok(NpyHeader {
        dtype,
        descr: descr.to_string(),
        shape,
        data_bytes,
    })
}

/// Reads up to `n` bytes of `reader` (fewer at its end).
fn read_up_to(reader: &mut impl Read, n: u64, out: &mut Vec<u8>) -> std::io::Result<()> {
    reader.take(n).read_to_end(out).map(|_| ())
}

/// Reads the `.npy` header of the member `key` (`entry`) of the `.npz` at `path`, leaving
/// `entry` at the start of the array's data. Before anything is inflated past the header: the
/// entry's declared size (`sizes`: declared, stored) must be one deflate can reach from its
/// stored size ([`MAX_COMPRESSION_RATIO`]) and the one the header's shape and dtype need.
pub(crate) fn read_npy_header(
    entry: &mut impl Read,
    sizes: (u64, u64),
    path: &Path,
    key: &str,
) -> Result<NpyHeader> {
    let bad = |reason: String| DataError::format(path, format!("array `{key}`: {reason}"));
    let (declared, stored) = sizes;
    if declared > stored.saturating_mul(MAX_COMPRESSION_RATIO) {
        return Err(bad(format!(
            "the zip entry declares {declared} bytes stored in {stored}: a compression ratio \
             above deflate's {MAX_COMPRESSION_RATIO}:1, a corrupt or forged entry"
        )));
    }
    let io = |e: std::io::Error| bad(format!("{e}"));
    let mut head = Vec::with_capacity(12);
    read_up_to(entry, 10, &mut head).map_err(io)?;
    if head.len() < 10 || &head[..6] != b"\x93NUMPY" {
        return Err(bad("not a .npy array (no NUMPY magic)".into()));
    }
    let header_len = match head[6] {
        1 => u16::from_le_bytes([head[8], head[9]]) as usize,
        2 | 3 => {
            read_up_to(entry, 2, &mut head).map_err(io)?;
            if head.len() < 12 {
                return Err(bad("the header runs past the end of the array".into()));
            }
            u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize
        }
        v => return Err(bad(format!(".npy format version {v} is not supported"))),
    };
    if header_len > MAX_NPY_HEADER_BYTES {
        return Err(bad(format!(
            "a header of {header_len} bytes, more than the {MAX_NPY_HEADER_BYTES} read"
        )));
    }
    let start = head.len();
    read_up_to(entry, header_len as u64, &mut head).map_err(io)?;
    if head.len() < start + header_len {
        return Err(bad("the header runs past the end of the array".into()));
    }
    let text =
        std::str::from_utf8(&head[start..]).map_err(|_| bad("the header is not text".into()))?;
    let header = parse_header(text, &bad)?;
    let needs = header.data_bytes;
    let total = needs.saturating_add(head.len() as u64);
    if declared != total {
        return Err(bad(format!(
            "the zip entry declares {declared} bytes, and shape {:?} of {} needs {needs} bytes \
             after its {}-byte header ({total}): a corrupt or forged entry",
            header.shape,
            header.descr,
            head.len()
        )));
    }
    Ok(header)
}

/// What a reader holds in memory besides an array's own bytes, charged to the budget with
/// them: nothing for images (converted within the same size), an `f32` copy of every element
/// for tabular data.
pub(crate) type ExtraCost = fn(&NpyHeader) -> u64;

/// Reads the member `key` (`entry`) of the `.npz` at `path`, within `budget` bytes (lowered by
/// what it takes: its data plus `extra` of its header). Before anything is inflated past its
/// header ([`read_npy_header`]) the bytes are checked against the budget; then no more than the
/// header declares is read.
fn read_member(
    entry: &mut impl Read,
    sizes: (u64, u64),
    path: &Path,
    key: &str,
    budget: &mut u64,
    extra: ExtraCost,
) -> Result<NpyArray> {
    let bad = |reason: String| DataError::format(path, format!("array `{key}`: {reason}"));
    let io = |e: std::io::Error| bad(format!("{e}"));
    let header = read_npy_header(entry, sizes, path, key)?;
    let needs = header.data_bytes;
    let copy = extra(&header);
    let charged = needs.saturating_add(copy);
    if charged > *budget {
        let what = match copy {
            0 => format!("{needs} bytes"),
            _ => format!("{charged} bytes ({needs} stored, {copy} converted)"),
        };
        return Err(bad(format!(
            "{what} (shape {:?} of {}), more than the {} bytes a data set may take on \
             this machine (a quarter of its available memory, at most {MAX_NPY_BYTES})",
            header.shape, header.descr, *budget
        )));
    }
    *budget -= charged;
    // Grown in steps, never past what the header declares: a stream that inflates to more is
    // cut there, and its extra bytes are an error below.
    let needs = needs as usize;
    let mut data = Vec::with_capacity(needs.min(1 << 20));
    while data.len() < needs {
        let step = (needs - data.len()).min(data.len().max(1 << 20));
        data.reserve_exact(step);
        let before = data.len();
        read_up_to(entry, step as u64, &mut data).map_err(io)?;
        if data.len() - before < step {
            break;
        }
    }
    if data.len() != needs {
        return Err(bad(format!(
            "shape {:?} of {} needs {needs} bytes, the file holds {}",
            header.shape,
            header.descr,
            data.len()
        )));
    }
    let mut rest = Vec::new();
    read_up_to(entry, 1, &mut rest).map_err(io)?;
    if !rest.is_empty() {
        return Err(bad(format!(
            "more bytes than shape {:?} of {} needs ({needs})",
            header.shape, header.descr
        )));
    }
    Ok(NpyArray {
        dtype: header.dtype,
        shape: header.shape,
        data,
    })
}

/// The names of the members of the zip at `path` whose central directory starts at `start`,
/// read from the directory itself (the archive's index keeps one entry per name).
fn central_names(path: &Path, start: u64) -> Vec<String> {
    let Ok(mut file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut dir = Vec::new();
    if std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(start)).is_err()
        || read_up_to(&mut file, 1 << 20, &mut dir).is_err()
    {
        return Vec::new();
    }
    let mut names = Vec::new();
    let mut at = 0;
    while at + 46 <= dir.len() && dir[at..].starts_with(b"PK\x01\x02") {
        let le = |o: usize| u16::from_le_bytes([dir[at + o], dir[at + o + 1]]) as usize;
        let (name, extra, comment) = (le(28), le(30), le(32));
        let Some(bytes) = dir.get(at + 46..at + 46 + name) else {
            break;
        };
        names.push(String::from_utf8_lossy(bytes).into_owned());
        at += 46 + name + extra + comment;
    }
    names
}

/// Opens the `.npz` at `path` as a zip archive; a member named twice is an error naming it
/// (the archive would read only one copy).
pub(crate) fn open_zip(path: &Path) -> Result<zip::ZipArchive<std::io::BufReader<std::fs::File>>> {
    let file = std::fs::File::open(path).map_err(|e| DataError::io(path, e))?;
    let zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .map_err(|e| DataError::format(path, format!("not a .npz file (a zip archive): {e}")))?;
    if zip.has_duplicate_names() {
        let names = central_names(path, zip.central_directory_start());
        let twice = names
            .iter()
            .enumerate()
            .find(|(i, n)| names[..*i].contains(n))
            .map_or_else(|| "a member".to_string(), |(_, n)| format!("member `{n}`"));
        return Err(DataError::format(
            path,
            format!("{twice} appears twice in the archive: which copy is meant is unknown"),
        ));
    }
    Ok(zip)
}

/// Reads the arrays named `keys` from the `.npz` at `path` (`None` for a key it lacks), all of
/// them within `budget` bytes.
fn read_arrays(path: &Path, keys: &[&str], budget: u64) -> Result<Vec<Option<NpyArray>>> {
    read_arrays_charged(path, keys, budget, |_| 0)
}

/// [`read_arrays`] with `extra` bytes of each array's header charged to the budget besides its
/// data ([`ExtraCost`]).
pub(crate) fn read_arrays_charged(
    path: &Path,
    keys: &[&str],
    budget: u64,
    extra: ExtraCost,
) -> Result<Vec<Option<NpyArray>>> {
    let mut zip = open_zip(path)?;
    let mut budget = budget;
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
        let sizes = (entry.size(), entry.compressed_size());
        out.push(Some(read_member(
            &mut entry,
            sizes,
            path,
            key,
            &mut budget,
            extra,
        )?));
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

/// The image array `x` as channel-major bytes. Images must be square: the models take
/// `n x n` inputs (as class folders, which are refused otherwise too).
fn image_bytes(x: NpyArray, path: &Path, key: &str) -> Result<(Vec<u8>, (usize, usize, usize))> {
    let ((c, h, w), channels_last) = image_layout(&x.shape, path, key)?;
    if h == 0 || w == 0 {
        return Err(DataError::format(
            path,
            format!("array `{key}`: images of {h}x{w} pixels"),
        ));
    }
    if h != w {
        return Err(DataError::format(
            path,
            format!(
                "array `{key}`: images of {h}x{w} pixels (shape {:?}): the models take square \
                 images; resize or crop them to n x n before saving",
                x.shape
            ),
        ));
    }
    // Bytes in the file's order first: uint8 as stored, floats checked and rounded (two
    // passes over the array, no wider copy of it).
    let stored: Vec<u8> = match x.dtype {
        Dtype::U8 => x.data,
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

/// The class count of the training labels `ys` of `key`: the largest plus one, refused (naming
/// the label and its image) above [`MAX_CLASSES`] or far above the distinct labels present
/// ([`SPARSE_LABEL_SLACK`]), before anything is sized by it.
fn class_count(ys: &[i64], path: &Path, key: &str) -> Result<usize> {
    let Some((at, &largest)) = ys.iter().enumerate().rev().max_by_key(|&(_, l)| *l) else {
        return Ok(0);
    };
    if largest >= MAX_CLASSES as i64 {
        return Err(DataError::format(
            path,
            format!(
                "`{key}`: label {largest} of image {at} would make {} classes, more than the \
                 {MAX_CLASSES} a data set may have (labels are class numbers 0, 1, 2, ...)",
                largest as i128 + 1
            ),
        ));
    }
    let classes = largest as usize + 1;
    let mut present = vec![false; classes];
    for &l in ys {
        present[l as usize] = true;
    }
    let distinct = present.iter().filter(|&&p| p).count();
    if classes > 2 * distinct + SPARSE_LABEL_SLACK {
        return Err(DataError::format(
            path,
            format!(
                "`{key}`: label {largest} of image {at} makes {classes} classes, and the labels \
                 hold only {distinct} distinct values: a wrong label? (labels are class numbers \
                 0, 1, 2, ...; number them without gaps)"
            ),
        ));
    }
    Ok(classes)
}

/// The `(x, y)` pair `x_key`, `y_key` as a data set of `classes` classes (the training
/// labels' [`class_count`] when `None`).
fn pair(
    x: NpyArray,
    y: &NpyArray,
    path: &Path,
    keys: (&str, &str),
    classes: Option<usize>,
) -> Result<InMemoryDataset> {
    let ys = labels(y, path, keys.1)?;
    let n = x.shape.first().copied().unwrap_or(0);
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
    let classes = match classes {
        Some(c) => c,
        None => class_count(&ys, path, keys.1)?,
    };
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
    let (pixels, shape) = image_bytes(x, path, keys.0)?;
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
///
/// Nothing is inflated past what the memory budget allows ([`crate::memory_budget`] with
/// [`MAX_NPY_BYTES`]): a member whose zip entry, `.npy` header and budget disagree is refused
/// before its data is read, and so is a member named twice.
pub fn load_npz(path: &Path, split: Split) -> Result<InMemoryDataset> {
    load_npz_within(path, split, memory_budget(MAX_NPY_BYTES))
}

/// [`load_npz`] with the arrays' bytes bounded by `budget`.
fn load_npz_within(path: &Path, split: Split, budget: u64) -> Result<InMemoryDataset> {
    let keys = ["x_train", "y_train", "x_test", "y_test"];
    let want: &[&str] = match split {
        Split::Train => &keys[..2],
        Split::Test => &keys,
    };
    let mut arrays = read_arrays(path, want, budget)?.into_iter();
    let (x_train, y_train) = (arrays.next().flatten(), arrays.next().flatten());
    let (Some(x_train), Some(y_train)) = (x_train, y_train) else {
        return Err(DataError::format(
            path,
            "no `x_train` and `y_train` arrays (the keys of Keras' mnist.npz: x_train, \
             y_train, and optionally x_test, y_test)",
        ));
    };
    let train = pair(x_train, &y_train, path, ("x_train", "y_train"), None)?;
    match split {
        Split::Train => Ok(train),
        Split::Test => match (arrays.next().flatten(), arrays.next().flatten()) {
            (Some(x), Some(y)) => {
                let test = pair(
                    x,
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
pub(crate) mod tests {
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
        let y: Vec<u8> = [0i64, 2, 0, 2]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        for x in [unit, bytes] {
            let p = dir.path().join("f.npz");
            npz(
                &p,
                &[
                    ("x_train", npy("<f4", &[4, 1, 1], &x)),
                    ("y_train", npy("<i8", &[4], &y)),
                ],
            );
            let d = load_npz(&p, Split::Train).unwrap();
            assert_eq!(d.pixels(), &[0, 128, 255, 64]);
            assert_eq!((d.shape(), d.classes()), ((1, 1, 1), 3));
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

    /// `bytes` with every occurrence of `from` replaced by `to` (same length).
    fn patched(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
        assert_eq!(from.len(), to.len());
        let mut out = bytes.to_vec();
        let mut found = 0;
        for i in 0..=out.len().saturating_sub(from.len()) {
            if out[i..].starts_with(from) {
                out[i..i + from.len()].copy_from_slice(to);
                found += 1;
            }
        }
        assert!(found > 0, "nothing to patch");
        out
    }

    /// Sets the uncompressed size of every member of the zip `bytes` (the local headers'
    /// and the central directory's 32-bit fields) to `size`.
    fn declare_size(bytes: &mut [u8], size: u32) {
        for i in 0..bytes.len().saturating_sub(30) {
            if bytes[i..].starts_with(b"PK\x03\x04") {
                bytes[i + 22..i + 26].copy_from_slice(&size.to_le_bytes());
            } else if bytes[i..].starts_with(b"PK\x01\x02") {
                bytes[i + 24..i + 28].copy_from_slice(&size.to_le_bytes());
            }
        }
    }

    fn labels_i64(values: &[i64]) -> Vec<u8> {
        npy(
            "<i8",
            &[values.len()],
            &values
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<_>>(),
        )
    }

    /// One wrong label used to set the class count (10^9 + 1 classes, sized per class later:
    /// 51 GB for 2^31 - 1); a label far above the others is refused naming it and its image.
    #[test]
    fn a_label_far_above_the_others_is_refused_naming_it_and_its_image() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("labels.npz");
        let mut values: Vec<i64> = (0..12).map(|i| i % 10).collect();
        for wrong in [
            1_000_000_000i64,
            i32::MAX as i64,
            60_000,
            (MAX_CLASSES + 5) as i64,
        ] {
            values[7] = wrong;
            npz(
                &p,
                &[
                    ("x_train", npy("|u1", &[12, 2, 2], &[0; 48])),
                    ("y_train", labels_i64(&values)),
                ],
            );
            let e = load_npz(&p, Split::Train)
                .map(|_| ())
                .expect_err("refused")
                .to_string();
            assert!(
                e.contains(&format!("label {wrong}")) && e.contains("image 7"),
                "{wrong}: {e}"
            );
            assert!(e.contains(&p.display().to_string()), "{e}");
        }
        // As int32, the probe's 2^31 - 1.
        let y: Vec<u8> = [0i32, 1, i32::MAX]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        npz(
            &p,
            &[
                ("x_train", npy("|u1", &[3, 2, 2], &[0; 12])),
                ("y_train", npy("<i4", &[3], &y)),
            ],
        );
        let e = load_npz(&p, Split::Train)
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("label 2147483647") && e.contains("image 2"),
            "{e}"
        );
        // Classes missing from a training file are fine within the rule: labels {0, 9}.
        npz(
            &p,
            &[
                ("x_train", npy("|u1", &[2, 2, 2], &[0; 8])),
                ("y_train", labels_i64(&[0, 9])),
            ],
        );
        assert_eq!(load_npz(&p, Split::Train).unwrap().classes(), 10);
    }

    /// `x_train` of [n, 28, 20] made an MLP of the wrong input width (a panic in the backend):
    /// the models take square images, refused here as class folders refuse them.
    #[test]
    fn images_that_are_not_square_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("wide.npz");
        npz(
            &p,
            &[
                ("x_train", npy("|u1", &[2, 4, 3], &[0; 24])),
                ("y_train", npy("|u1", &[2], &[0, 1])),
            ],
        );
        let e = load_npz(&p, Split::Train)
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("x_train") && e.contains("4x3") && e.contains("square"),
            "{e}"
        );
    }

    /// A duplicated member used to be read as its last copy: refused, naming it.
    #[test]
    fn a_duplicated_member_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("twice.npz");
        npz(
            &p,
            &[
                ("x_train", npy("|u1", &[2, 2, 2], &[0; 8])),
                ("y_train", npy("|u1", &[2], &[0, 1])),
                ("y_traim", npy("|u1", &[2], &[1, 0])),
            ],
        );
        let bytes = patched(&std::fs::read(&p).unwrap(), b"y_traim.npy", b"y_train.npy");
        std::fs::write(&p, bytes).unwrap();
        let e = load_npz(&p, Split::Train)
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(e.contains("y_train.npy") && e.contains("twice"), "{e}");
    }

    /// A member whose zip entry declares another size than its `.npy` header's shape, or
    /// a compression ratio deflate cannot reach, is refused before it is inflated.
    #[test]
    fn members_whose_sizes_disagree_or_cannot_be_are_refused_before_inflating() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bomb.npz");
        let y = npy("|u1", &[2], &[0, 1]);
        // The header of 5,000,000 images of 28x28 (3.9 GB) over 16 bytes of data, the entry
        // declaring the 3.9 GB: a ratio of millions to one.
        let x = npy("|u1", &[5_000_000, 28, 28], &[0; 16]);
        let header = x.len() - 16;
        npz(&p, &[("x_train", x), ("y_train", y.clone())]);
        let mut bytes = std::fs::read(&p).unwrap();
        // Only x_train's entry is patched: the first local header and central record.
        let declared = (header + 5_000_000 * 784) as u32;
        let mut first_local = true;
        let mut first_central = true;
        for i in 0..bytes.len() - 30 {
            if first_local && bytes[i..].starts_with(b"PK\x03\x04") {
                bytes[i + 22..i + 26].copy_from_slice(&declared.to_le_bytes());
                first_local = false;
            } else if first_central && bytes[i..].starts_with(b"PK\x01\x02") {
                bytes[i + 24..i + 28].copy_from_slice(&declared.to_le_bytes());
                first_central = false;
            }
        }
        std::fs::write(&p, &bytes).unwrap();
        let e = load_npz(&p, Split::Train)
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("x_train") && e.contains("compression ratio"),
            "{e}"
        );

        // The entry declares 100 bytes more than the header's shape needs.
        npz(
            &p,
            &[
                ("x_train", npy("|u1", &[2, 2, 2], &[0; 8])),
                ("y_train", y.clone()),
            ],
        );
        let mut bytes = std::fs::read(&p).unwrap();
        declare_size(&mut bytes, 64 + 8 + 100);
        std::fs::write(&p, &bytes).unwrap();
        let e = load_npz(&p, Split::Train)
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("x_train") && e.contains("172 bytes") && e.contains("needs 8"),
            "{e}"
        );
    }

    /// A member larger than the memory budget is refused before it is inflated, with the
    /// budget named.
    #[test]
    fn a_member_over_the_memory_budget_is_refused_before_inflating() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.npz");
        npz(
            &p,
            &[
                ("x_train", npy("|u1", &[64, 32, 32], &[0; 64 * 1024])),
                ("y_train", npy("|u1", &[64], &[0, 1].repeat(32))),
            ],
        );
        let e = load_npz_within(&p, Split::Train, 10_000)
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("x_train") && e.contains("65536 bytes") && e.contains("10000"),
            "{e}"
        );
        assert!(load_npz_within(&p, Split::Train, 1 << 20).is_ok());
    }
}
