//! Image data for Bayesian neural network training: loaders for MNIST, Fashion-MNIST,
//! CIFAR-10/100, SVHN and ImageNet folders, the 2DGBNN paper's augmentations, and a
//! deterministic multi-threaded batch loader.
//!
//! The crate knows nothing of tensors: it yields [`Batch`]es of plain `f32` values laid out
//! `[B, C, H, W]` (row-major) plus `u32` labels, for another crate to upload.
//!
//! - Data sets implement [`Dataset`] (`len`, `classes`, `shape`, `get`); IDX, CIFAR and
//!   SVHN are held in memory ([`InMemoryDataset`]), ImageNet folders decode lazily
//!   ([`ImageFolder`]). [`Subset`] picks the first, random or stratified `n`, or holds out a
//!   stratified validation split ([`Subset::holdout`]).
//! - [`Transform`]s ([`RandomCrop`], [`RandomHorizontalFlip`], [`RandomResizedCrop`],
//!   [`ColorJitter`], [`Normalize`], …) compose with [`Compose`]; every random choice is
//!   drawn from a generator seeded by `(seed, epoch, sample index)`.
//! - [`Corrupted`] wraps a data set with one of 15 deterministic [`Corruption`]s (rotation,
//!   Gaussian noise, contrast, translation, blur at severities 1–3, in the manner of
//!   CIFAR-10-C and MNIST-C) for evaluation under distribution shift. [`TileShuffled`] makes
//!   an out-of-distribution set from in-distribution images (their tiles shuffled).
//! - [`DataLoader`] shuffles per epoch, batches, and prefetches with worker threads; the
//!   batches are the same for any number of workers.
//! - A user's own images: class folders of PNG/JPEG files ([`load_class_folders`]) or a NumPy
//!   `.npz` ([`load_npz`]), named on a command line as a [`DataSource`] (`folder:DIR`,
//!   `npz:FILE`); [`NormStats::measure`] gives their normalisation.
//! - [`Locator`] finds a data set (`--data DIR`, `$SWBNN_DATA`, the user cache,
//!   `/usr/share/datasets`) or downloads it with checksum verification.
//!
//! # Tabular (regression) data
//!
//! A [`TabularDataset`] holds `f32` features `[n, d]` and `f32` targets `[n, t]` (row-major,
//! every value finite, optional column names); [`TabularDataset::split_last`] takes a
//! validation split from the end. It is read from:
//!
//! - CSV files, named as a [`CsvSource`]: `csv:TRAIN.csv` or `csv:TRAIN.csv,test=TEST.csv`
//!   (the test file after `,test=`, with the same header). A header row names the columns;
//!   the caller names the target columns (`--target NAME`, repeatable) and every other column
//!   is a feature ([`read_csv`], [`CsvSource::load`]).
//! - A NumPy `.npz` whose `y_train` (and `y_test`) are floating point, `[n]` or `[n, t]`, with
//!   `x_*` tables `[n, d]` or images `[n, h, w(, c)]` flattened to `d` features
//!   ([`read_npz_tabular`]); [`npz_is_regression`] tells such a file from an image
//!   classification one ([`load_npz`]) by `y_train`'s dtype.
//!
//! A [`Standardizer`] fitted on the training split (per-column mean and population standard
//! deviation) standardises features and targets, and brings predictions and predictive
//! standard deviations back to the original units.
//!
//! ```
//! use bnn_data::{Compose, DataLoader, Dataset, InMemoryDataset, LoaderConfig, NormStats,
//!                Normalize, RandomCrop, RandomHorizontalFlip};
//!
//! // 10 tiny 3×8×8 images whose pixels all equal their index, labelled index % 2.
//! let pixels: Vec<u8> = (0..10u8).flat_map(|i| std::iter::repeat(i).take(3 * 8 * 8)).collect();
//! let labels: Vec<u32> = (0..10).map(|i| i % 2).collect();
//! let data = InMemoryDataset::new(pixels, labels, (3, 8, 8), 2)?;
//!
//! let augment = Compose::new()
//!     .then(RandomCrop::reflect(8, 2))
//!     .then(RandomHorizontalFlip::default())
//!     .then(Normalize::new(NormStats::CIFAR10));
//! let config = LoaderConfig { batch_size: 4, seed: 42, workers: 2, ..Default::default() };
//! let loader = DataLoader::new(data, augment, config)?;
//!
//! let batches: Vec<_> = loader.epoch(0).collect::<Result<_, _>>()?;
//! assert_eq!(batches.len(), 3);
//! assert_eq!(batches[0].shape, [4, 3, 8, 8]);
//! assert_eq!(batches[2].shape, [2, 3, 8, 8]); // the last, partial batch
//! let mut seen: Vec<usize> = batches.iter().flat_map(|b| b.indices.clone()).collect();
//! seen.sort();
//! assert_eq!(seen, (0..10).collect::<Vec<_>>());
//! # Ok::<(), bnn_data::DataError>(())
//! ```
#![warn(missing_docs)]

mod cifar;
mod class_folders;
mod corrupt;
mod corruption_kind;
mod dataset;
mod download;
mod error;
mod folder;
mod id;
mod identity;
mod idx;
mod loader;
mod locate;
mod mat;
mod memory;
mod npz;
mod npz_tabular;
mod rng;
mod source;
mod standardize;
mod subset;
mod svhn;
mod tabular;
mod tabular_csv;
mod tiles;
mod transform;

pub use cifar::{
    CIFAR_IMAGE_BYTES, CIFAR10_SUBDIR, CIFAR100_SUBDIR, Cifar100Label, cifar10_files,
    cifar100_file, load_cifar10, load_cifar100, read_cifar_file,
};
pub use class_folders::{
    FolderImages, MAX_IMAGE_SIDE, folder_classes, folder_has_test, load_class_folders, split_dir,
};
pub use corrupt::{
    BLUR_SIGMA, CONTRAST_FACTOR, Corrupted, Corruption, CorruptionKind, MAX_SEVERITY, NOISE_SIGMA,
    ROTATION_DEGREES, TRANSLATION_PIXELS,
};
pub use dataset::{Dataset, InMemoryDataset, MAX_CLASSES, Sample, Split};
pub use download::{
    Checksum, RemoteFile, download_verified, extract_tar_gz, fetch_files, file_digest,
};
pub use error::{DataError, Result};
pub use folder::{FolderConfig, ImageFolder, MAX_DECODE_BYTES, MAX_DECODE_SIDE};
pub use id::DatasetId;
pub use identity::{
    FileDigest, Published, by_name, compare_published, digest_split, file_digests, split_files,
    verify_split,
};
pub use idx::{
    IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC, IdxArray, idx_file_stems, load_idx_dir, load_idx_pair,
    parse_idx, read_idx,
};
pub use loader::{Batch, DataLoader, EpochIter, LoaderConfig};
pub use locate::{DATA_ENV, Locator, default_cache_dir, open, open_dir};
pub use mat::{MatArray, MatData, parse_mat, read_mat};
pub use memory::{MEMORY_SHARE_DIVISOR, available_memory, memory_budget, memory_left};
pub use npz::{
    MAX_COMPRESSION_RATIO, MAX_NPY_BYTES, MAX_NPY_HEADER_BYTES, SPARSE_LABEL_SLACK, load_npz,
    npz_has_test,
};
pub use npz_tabular::{npz_is_regression, read_npz_tabular};
pub use rng::{SampleRng, derive_seed};
pub use source::DataSource;
pub use standardize::{ColumnRole, Standardizer};
pub use subset::{ClassSubset, Subset};
pub use svhn::{load_svhn, load_svhn_mat, svhn_file};
pub use tabular::{MAX_TABULAR_BYTES, TabularDataset, TabularSplits};
pub use tabular_csv::{CsvSource, read_csv};
pub use tiles::{TILE_GRID, TileShuffled};
pub use transform::{
    CenterCrop, ColorJitter, Compose, HorizontalFlip, Image, NormStats, Normalize, PadMode,
    RandomCrop, RandomHorizontalFlip, RandomResizedCrop, Transform, adjust_brightness,
    adjust_contrast, adjust_hue, adjust_saturation, gaussian_blur, hsv_to_rgb, resize_bilinear,
    rgb_to_hsv, rotate_bilinear, translate,
};
