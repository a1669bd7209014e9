//! Loading the data sets of an experiment with the paper's transforms.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bnn_data::{
    Compose, DataLoader, Dataset, DatasetId, LoaderConfig, Locator, NormStats, Normalize,
    RandomHorizontalFlip, Split, Subset, TileShuffled, load_idx_pair, open, open_dir,
};

use bnn_models::ModelConfig;

use crate::Error;
use crate::setup::ValidationSplit;

/// Opens `split` of `id`, searching `data_dir`, `$SWBNN_DATA`, the cache and
/// `/usr/share/datasets` (and downloading where allowed).
pub fn open_split(
    id: DatasetId,
    split: Split,
    data_dir: Option<&Path>,
) -> Result<Arc<dyn Dataset>, Error> {
    let locator = Locator::from_env(data_dir.map(Path::to_path_buf));
    Ok(open(id, split, &locator)?)
}

/// Checks that `data` fits a model of `config`: the image shape and, when `same_classes`, the
/// number of classes (an out-of-distribution set may have others). A mismatch is an error
/// naming both, where it used to panic inside the backend.
pub fn check_input(
    config: &ModelConfig,
    data: &dyn Dataset,
    what: &str,
    same_classes: bool,
) -> Result<(), Error> {
    let (c, h, w) = data.shape();
    let (mc, ms) = (config.in_channels, config.image_size);
    if (c, h, w) != (mc, ms, ms) {
        return Err(Error::DataMismatch {
            what: what.to_string(),
            found: format!("{c}x{h}x{w} images"),
            expected: format!("{mc}x{ms}x{ms}"),
        });
    }
    if same_classes && data.classes() != config.classes {
        return Err(Error::DataMismatch {
            what: what.to_string(),
            found: format!("{} classes", data.classes()),
            expected: format!("{}", config.classes),
        });
    }
    Ok(())
}

/// Opens an out-of-distribution set: a directory with `images-idx3-ubyte.gz` /
/// `labels-idx1-ubyte.gz` (the layout of the bundled 10,000 MNIST digits), or the test split of
/// the standard layout of `id`.
pub fn open_ood(id: DatasetId, dir: &Path) -> Result<Arc<dyn Dataset>, Error> {
    let images = dir.join("images-idx3-ubyte.gz");
    if images.exists() {
        let data = load_idx_pair(&images, dir.join("labels-idx1-ubyte.gz"), 10)?;
        return Ok(Arc::new(data));
    }
    Ok(open_dir(id, Split::Test, dir)?)
}

/// A stratified random subset of `n` examples of `data` (all of it if `n` is `None` or the
/// data set's size). A subset larger than the data set is an error naming `what` (e.g. "the
/// training set") and both sizes, never a silent cut.
pub fn subset(
    data: Arc<dyn Dataset>,
    n: Option<usize>,
    seed: u64,
    what: &str,
) -> Result<Arc<dyn Dataset>, Error> {
    match n {
        Some(n) if n > data.len() => Err(Error::Usage(format!(
            "a subset of {n} examples is larger than {what}, which has {}",
            data.len()
        ))),
        _ => subset_at_most(data, n, seed),
    }
}

/// [`subset`], taking all of `data` when it has `n` examples or fewer: for an
/// out-of-distribution set, which the test set's subset size bounds but need not reach.
pub fn subset_at_most(
    data: Arc<dyn Dataset>,
    n: Option<usize>,
    seed: u64,
) -> Result<Arc<dyn Dataset>, Error> {
    match n {
        Some(n) if n < data.len() => Ok(Arc::new(Subset::stratified(data, n, seed)?)),
        _ => Ok(data),
    }
}

/// The training examples and the validation split, as [`training_split`] returns them.
pub type TrainAndValidation = (Arc<dyn Dataset>, Arc<dyn Dataset>);

/// Splits a training split `full` in two: the validation split `validation` (held out first,
/// [`Subset::holdout`]: stratified, seeded, the same images on every run) and the training
/// examples, the rest or a stratified subset of `train_subset` of the rest (seed 1). Returned as
/// `(train, validation)`; they never share an example.
///
/// A validation split as large as the training split (no training data left) is an error
/// naming both sizes, and so is a `train_subset` larger than what the split leaves.
pub fn training_split(
    full: Arc<dyn Dataset>,
    validation: ValidationSplit,
    train_subset: Option<usize>,
) -> Result<TrainAndValidation, Error> {
    let n = full.len();
    if validation.size >= n && validation.size > 0 {
        return Err(Error::Usage(format!(
            "a validation split of {} examples leaves no training data: the training set has {n} \
             (choose a smaller --validation)",
            validation.size
        )));
    }
    let (rest, held_out) = Subset::holdout(full, validation.size, validation.seed)?;
    let what = match validation.size {
        0 => "the training set".to_string(),
        v => format!("the training set less its {v}-example validation split"),
    };
    let train = subset(Arc::new(rest), train_subset, 1, &what)?;
    Ok((train, Arc::new(held_out)))
}

/// Seed of the validation OOD set's tile orders: fixed, so every run and method sees the same
/// images.
pub const VALIDATION_OOD_SEED: u64 = 0x7_11e5;

/// The validation OOD set made from `validation` alone ([`TileShuffled`]: each image cut into
/// a 4 x 4 grid of tiles, the tiles shuffled, with [`VALIDATION_OOD_SEED`]): images of the
/// training distribution's pixels and textures without its shapes. Selection reads it so that
/// the reported OOD set (the MNIST digits for Fashion-MNIST, SVHN for CIFAR) stays for the
/// final report.
pub fn validation_ood(validation: Arc<dyn Dataset>) -> Result<Arc<dyn Dataset>, Error> {
    Ok(Arc::new(TileShuffled::new(
        validation,
        VALIDATION_OOD_SEED,
    )?))
}

/// The data of one experiment, opened once and shared by every stage and table: the training
/// examples, the validation split with its loader, the test subset with its loader, and the OOD
/// loader.
pub struct ExperimentData {
    /// Training examples: the training split less the validation split (a stratified subset
    /// of seed 1 of the rest when `train_subset` is set), see [`training_split`].
    pub train: Arc<dyn Dataset>,
    /// The validation split ([`crate::setup::Setup::validation`]), held out of the training
    /// split and never trained on; empty when the setup has none.
    pub validation: Arc<dyn Dataset>,
    /// Evaluation loader over `validation`: the test set's normalisation, data-set order.
    pub validation_loader: DataLoader,
    /// Evaluation loader over the validation OOD set ([`validation_ood`]: the validation
    /// images with their tiles shuffled), normalised as `validation`; `None` without a
    /// validation split. Choices that look at OOD detection read it, never the reported OOD
    /// set.
    pub validation_ood_loader: Option<DataLoader>,
    /// Test examples (stratified subset of seed 2 when `test_subset` is set).
    pub test: Arc<dyn Dataset>,
    /// Evaluation loader over `test`.
    pub test_loader: DataLoader,
    /// Evaluation loader over the OOD set (subset of seed 3), normalised with the
    /// in-distribution statistics as a deployed model would be.
    pub ood_loader: Option<DataLoader>,
    /// Normalisation of the data set.
    pub stats: NormStats,
}

impl ExperimentData {
    /// Opens the data of `setup`.
    pub fn open(setup: &crate::setup::Setup) -> Result<Self, Error> {
        let (train, validation) = training_split(
            open_split(setup.dataset, Split::Train, setup.data_dir.as_deref())?,
            setup.validation,
            setup.train_subset,
        )?;
        let test = subset(
            open_split(setup.dataset, Split::Test, setup.data_dir.as_deref())?,
            setup.test_subset,
            2,
            "the test set",
        )?;
        let stats = setup.dataset.norm_stats();
        let test_loader = eval_loader(stats, test.clone(), 256, setup.workers)?;
        let validation_loader = eval_loader(stats, validation.clone(), 256, setup.workers)?;
        let validation_ood_loader = match validation.is_empty() {
            true => None,
            false => Some(eval_loader(
                stats,
                validation_ood(validation.clone())?,
                256,
                setup.workers,
            )?),
        };
        let ood_loader = match &setup.ood {
            Some((id, dir)) => {
                let data = subset_at_most(open_ood(*id, dir)?, setup.test_subset, 3)?;
                Some(eval_loader(stats, data, 256, setup.workers)?)
            }
            None => None,
        };
        Ok(Self {
            train,
            validation,
            validation_loader,
            validation_ood_loader,
            test,
            test_loader,
            ood_loader,
            stats,
        })
    }
}

/// Training loader: the paper's augmentation for the data set (a flip for Fashion-MNIST, none
/// for MNIST digits, else [`DatasetId::train_transform`]: crop with 4-pixel reflection padding
/// and flip for CIFAR, random resized crop to 224, flip and colour jitter for ImageNet,
/// normalisation only for SVHN, whose digits a flip would change), normalised.
pub fn train_loader(
    id: DatasetId,
    data: Arc<dyn Dataset>,
    batch_size: usize,
    seed: u64,
    workers: usize,
) -> Result<DataLoader, Error> {
    let t = match id {
        DatasetId::Mnist => Compose::new().then(Normalize::new(id.norm_stats())),
        DatasetId::FashionMnist => Compose::new()
            .then(RandomHorizontalFlip::default())
            .then(Normalize::new(id.norm_stats())),
        _ => id.train_transform(),
    };
    let config = LoaderConfig {
        batch_size,
        shuffle: true,
        drop_last: false,
        seed,
        workers,
        prefetch: 4,
    };
    Ok(DataLoader::from_arcs(data, Arc::new(t), config)?)
}

/// Evaluation loader: normalisation only, data-set order.
pub fn eval_loader(
    stats: NormStats,
    data: Arc<dyn Dataset>,
    batch_size: usize,
    workers: usize,
) -> Result<DataLoader, Error> {
    let t = Compose::new().then(Normalize::new(stats));
    let config = LoaderConfig {
        batch_size,
        shuffle: false,
        drop_last: false,
        seed: 0,
        workers,
        prefetch: 4,
    };
    Ok(DataLoader::from_arcs(data, Arc::new(t), config)?)
}

/// The out-of-distribution set the presets pair with a data set: the MNIST digits for
/// Fashion-MNIST (the classic pair), SVHN for CIFAR (the paper's appendix, "Out of
/// Distribution Detection Task") and CIFAR-10 for SVHN.
pub fn paired_ood(id: DatasetId) -> Option<DatasetId> {
    match id {
        DatasetId::FashionMnist => Some(DatasetId::Mnist),
        DatasetId::Cifar10 | DatasetId::Cifar100 => Some(DatasetId::Svhn),
        DatasetId::Svhn => Some(DatasetId::Cifar10),
        DatasetId::Mnist | DatasetId::ImageNet => None,
    }
}

/// Where the presets look for the test split of their out-of-distribution set: like any data
/// set (`$SWBNN_DATA`, the cache, the system folder, then a checksummed download where the
/// locator allows it), with `extra` folders tried before the download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OodSearch {
    /// The standard search; its `explicit` folder, when set, is the only place it looks.
    pub locator: Locator,
    /// Further folders, tried after the locator's and before its download.
    pub extra: Vec<PathBuf>,
}

impl OodSearch {
    /// The standard search from the environment, plus the folder of 10,000 MNIST digits that
    /// a checkout at `repo_root` may have beside it (`../shared/data/mnist-10k`).
    pub fn from_env(repo_root: &Path) -> Self {
        OodSearch {
            locator: Locator::from_env(None),
            extra: vec![repo_root.join("../shared/data/mnist-10k")],
        }
    }

    /// The folder holding the test split of `ood` on this machine, without downloading.
    pub fn find(&self, ood: DatasetId) -> Option<PathBuf> {
        let local = match &self.locator.explicit {
            Some(_) => self.locator.candidates(ood),
            None => {
                let mut c = self.locator.candidates(ood);
                c.extend(self.extra.iter().cloned());
                c
            }
        };
        local.into_iter().find(|d| holds_ood_test_split(ood, d))
    }

    /// The set paired with `dataset` ([`paired_ood`]) and its folder, when found without
    /// downloading.
    pub fn find_paired(&self, dataset: DatasetId) -> Option<(DatasetId, PathBuf)> {
        let id = paired_ood(dataset)?;
        self.find(id).map(|dir| (id, dir))
    }

    /// As [`OodSearch::find`], then the locator's checksummed download; the error names the
    /// folders searched and how to get the data.
    pub fn fetch(&self, ood: DatasetId) -> Result<PathBuf, Error> {
        match self.find(ood) {
            Some(dir) => Ok(dir),
            None => Ok(self.locator.locate(ood, Split::Test)?),
        }
    }
}

impl OodSearch {
    /// One line for a run that goes on without its OOD set `ood`: where to put it.
    pub fn missing_hint(&self, ood: DatasetId) -> String {
        let name = ood.name();
        let place = match (&self.locator.explicit, &self.locator.cache_dir) {
            (Some(dir), _) => dir.join(name),
            (None, Some(cache)) => cache.join(name),
            (None, None) => self.locator.system_dir.join(name),
        };
        let files = ood
            .remote_files(Split::Test)
            .into_iter()
            .map(|f| f.name)
            .collect::<Vec<_>>()
            .join(" and ");
        format!(
            "no {name} test split found or downloaded, so the OOD columns stay empty: put {files} \
             in {} (or set {}=DIR)",
            place.display(),
            bnn_data::DATA_ENV
        )
    }
}

/// A search that sees only the cache folder `cache` and the `extra` folders (no environment,
/// no system folder, no download): for tests.
#[cfg(test)]
pub(crate) fn cache_only(cache: &Path, extra: Vec<PathBuf>) -> OodSearch {
    OodSearch {
        locator: Locator {
            explicit: None,
            env_dir: None,
            cache_dir: Some(cache.to_path_buf()),
            system_dir: PathBuf::from("/nonexistent"),
            download: false,
        },
        extra,
    }
}

/// Whether `dir` holds what [`open_ood`] reads for `id`.
fn holds_ood_test_split(id: DatasetId, dir: &Path) -> bool {
    (id == DatasetId::Mnist && dir.join("images-idx3-ubyte.gz").is_file())
        || id.is_present(dir, Split::Test)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An uncompressed IDX file (the loader reads `NAME` or `NAME.gz`).
    pub(crate) fn write_idx(path: &Path, magic: u32, dims: &[u32], data: &[u8]) {
        let mut raw = magic.to_be_bytes().to_vec();
        for d in dims {
            raw.extend_from_slice(&d.to_be_bytes());
        }
        raw.extend_from_slice(data);
        std::fs::write(path, raw).unwrap();
    }

    /// Three MNIST-shaped test images in `cache/mnist`, the cache layout.
    pub(crate) fn fake_mnist_test_split(cache: &Path) -> PathBuf {
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

    #[test]
    fn mnist_in_the_cache_alone_is_found_and_opens_as_the_ood_set() {
        let cache = tempfile::tempdir().unwrap();
        let dir = fake_mnist_test_split(cache.path());
        let search = cache_only(cache.path(), Vec::new());
        assert_eq!(search.find(DatasetId::Mnist), Some(dir.clone()));
        assert_eq!(search.fetch(DatasetId::Mnist).unwrap(), dir);
        assert_eq!(open_ood(DatasetId::Mnist, &dir).unwrap().len(), 3);
    }

    #[test]
    fn without_a_copy_or_a_download_the_error_says_where_it_looked() {
        let cache = tempfile::tempdir().unwrap();
        let search = cache_only(cache.path(), Vec::new());
        assert_eq!(search.find(DatasetId::Mnist), None);
        let e = search.fetch(DatasetId::Mnist).unwrap_err().to_string();
        let place = cache.path().join("mnist").display().to_string();
        assert!(e.contains(&place), "{e}");
        let hint = search.missing_hint(DatasetId::Mnist);
        assert!(!hint.contains('\n') && hint.contains(&place), "{hint}");
        assert!(hint.contains("t10k-images-idx3-ubyte.gz"), "{hint}");
    }

    #[test]
    fn the_bundled_digits_layout_counts_for_mnist_only() {
        let root = tempfile::tempdir().unwrap();
        let digits = root.path().join("digits");
        std::fs::create_dir_all(&digits).unwrap();
        std::fs::write(digits.join("images-idx3-ubyte.gz"), b"").unwrap();
        let search = cache_only(root.path(), vec![digits.clone()]);
        assert_eq!(search.find(DatasetId::Mnist), Some(digits));
        assert_eq!(search.find(DatasetId::Svhn), None);
    }

    /// `n` images of 2x1 pixels that spell their own index, in `classes` classes.
    fn numbered(n: usize, classes: usize) -> Arc<dyn Dataset> {
        let pixels = (0..n)
            .flat_map(|i| [(i % 256) as u8, (i / 256) as u8])
            .collect();
        let labels = (0..n).map(|i| (i % classes) as u32).collect();
        Arc::new(bnn_data::InMemoryDataset::new(pixels, labels, (1, 2, 1), classes).unwrap())
    }

    /// The index each image of `data` spells.
    fn indices(data: &dyn Dataset) -> Vec<usize> {
        (0..data.len())
            .map(|i| {
                let p = data.get(i).unwrap().pixels;
                p[0] as usize + 256 * p[1] as usize
            })
            .collect()
    }

    #[test]
    fn the_validation_split_is_never_trained_on_and_is_the_same_every_time() {
        let full = numbered(600, 3);
        let split = ValidationSplit::new(90);
        let (train, val) = training_split(full.clone(), split, None).unwrap();
        let (t, v) = (indices(train.as_ref()), indices(val.as_ref()));
        assert_eq!((t.len(), v.len()), (510, 90));
        assert!(v.iter().all(|i| !t.contains(i)), "disjoint");
        let mut all = [t.clone(), v.clone()].concat();
        all.sort_unstable();
        assert_eq!(
            all,
            (0..600).collect::<Vec<_>>(),
            "together, the training split"
        );
        // Stratified: 30 of each class.
        for c in 0..3 {
            assert_eq!(v.iter().filter(|&&i| i % 3 == c).count(), 30);
        }
        let (train2, val2) = training_split(full.clone(), split, None).unwrap();
        assert_eq!(indices(val2.as_ref()), v);
        assert_eq!(indices(train2.as_ref()), t);
        let (_, other) =
            training_split(full.clone(), ValidationSplit { seed: 9, ..split }, None).unwrap();
        assert_ne!(indices(other.as_ref()), v, "the seed picks the images");

        // A training subset is drawn from what the split leaves.
        let (sub, val3) = training_split(full.clone(), split, Some(300)).unwrap();
        let s = indices(sub.as_ref());
        assert_eq!((s.len(), indices(val3.as_ref())), (300, v.clone()));
        assert!(s.iter().all(|i| !v.contains(i)));

        // No split: everything trains, nothing is held out.
        let (all_train, none) = training_split(full, ValidationSplit::none(), None).unwrap();
        assert_eq!((all_train.len(), none.len()), (600, 0));
    }

    #[test]
    fn a_validation_split_that_leaves_no_training_data_is_an_error() {
        let full = numbered(600, 3);
        for size in [600, 601, 10_000] {
            let e = training_split(full.clone(), ValidationSplit::new(size), None)
                .err()
                .unwrap()
                .to_string();
            assert!(
                e.contains(&format!("{size} examples")) && e.contains("no training data"),
                "{e}"
            );
        }
        let e = training_split(full, ValidationSplit::new(100), Some(501))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("501") && e.contains("validation split") && e.contains("500"),
            "{e}"
        );
    }
}
