//! CIFAR-10 and CIFAR-100, binary ("suitable for C programs") versions.
//!
//! CIFAR-10: `data_batch_1.bin` … `data_batch_5.bin`, `test_batch.bin`; each record is one
//! label byte then 3072 pixel bytes (1024 red, 1024 green, 1024 blue, row-major 32×32).
//! CIFAR-100: `train.bin`, `test.bin`; each record is a coarse label byte, a fine label
//! byte, then the same 3072 pixel bytes.

use std::path::{Path, PathBuf};

use crate::dataset::{InMemoryDataset, Split};
use crate::error::{DataError, Result};

/// Pixel bytes of one CIFAR image (3 × 32 × 32).
pub const CIFAR_IMAGE_BYTES: usize = 3 * 32 * 32;

/// Which CIFAR-100 label to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cifar100Label {
    /// The 100 fine classes (the usual benchmark, and the paper's).
    #[default]
    Fine,
    /// The 20 coarse super-classes.
    Coarse,
}

/// The folder the tarball extracts to, for CIFAR-10.
pub const CIFAR10_SUBDIR: &str = "cifar-10-batches-bin";
/// The folder the tarball extracts to, for CIFAR-100.
pub const CIFAR100_SUBDIR: &str = "cifar-100-binary";

/// File names of a CIFAR-10 split.
pub fn cifar10_files(split: Split) -> Vec<String> {
    match split {
        Split::Train => (1..=5).map(|i| format!("data_batch_{i}.bin")).collect(),
        Split::Test => vec!["test_batch.bin".to_string()],
    }
}

/// File name of a CIFAR-100 split.
pub fn cifar100_file(split: Split) -> &'static str {
    match split {
        Split::Train => "train.bin",
        Split::Test => "test.bin",
    }
}

/// `dir` itself when it holds `probe`, else `dir/subdir` when that does.
fn resolve(dir: &Path, subdir: &str, probe: &str) -> PathBuf {
    if dir.join(probe).is_file() {
        dir.to_path_buf()
    } else {
        dir.join(subdir)
    }
}

/// Appends the records of one CIFAR binary file to `pixels`/`labels`.
///
/// `label_bytes` is 1 (CIFAR-10) or 2 (CIFAR-100); `label_at` picks which label byte.
pub fn read_cifar_file(
    path: &Path,
    label_bytes: usize,
    label_at: usize,
    classes: usize,
    pixels: &mut Vec<u8>,
    labels: &mut Vec<u32>,
) -> Result<()> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    let record = label_bytes + CIFAR_IMAGE_BYTES;
    if bytes.is_empty() || !bytes.len().is_multiple_of(record) {
        return Err(DataError::format(
            path,
            format!(
                "size {} is not a positive multiple of the {record}-byte CIFAR record \
                 (file truncated, or CIFAR-10/CIFAR-100 mixed up?)",
                bytes.len()
            ),
        ));
    }
    pixels.reserve(bytes.len() / record * CIFAR_IMAGE_BYTES);
    for (i, rec) in bytes.chunks_exact(record).enumerate() {
        let label = rec[label_at];
        if label as usize >= classes {
            return Err(DataError::format(
                path,
                format!("record {i}: label {label} is not below {classes}"),
            ));
        }
        labels.push(label as u32);
        pixels.extend_from_slice(&rec[label_bytes..]);
    }
    Ok(())
}

/// Loads a CIFAR-10 split from `dir` (either the folder of `.bin` files or its parent
/// holding `cifar-10-batches-bin/`).
pub fn load_cifar10(dir: impl AsRef<Path>, split: Split) -> Result<InMemoryDataset> {
    let files = cifar10_files(split);
    let dir = resolve(dir.as_ref(), CIFAR10_SUBDIR, &files[0]);
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    for f in &files {
        read_cifar_file(&dir.join(f), 1, 0, 10, &mut pixels, &mut labels)?;
    }
    InMemoryDataset::new(pixels, labels, (3, 32, 32), 10)
}

/// Loads a CIFAR-100 split from `dir` (either the folder of `.bin` files or its parent
/// holding `cifar-100-binary/`), with fine (100) or coarse (20) labels.
pub fn load_cifar100(
    dir: impl AsRef<Path>,
    split: Split,
    label: Cifar100Label,
) -> Result<InMemoryDataset> {
    let file = cifar100_file(split);
    let dir = resolve(dir.as_ref(), CIFAR100_SUBDIR, file);
    let (at, classes) = match label {
        Cifar100Label::Coarse => (0, 20),
        Cifar100Label::Fine => (1, 100),
    };
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    read_cifar_file(&dir.join(file), 2, at, classes, &mut pixels, &mut labels)?;
    InMemoryDataset::new(pixels, labels, (3, 32, 32), classes)
}
