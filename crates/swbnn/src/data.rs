//! Loading the data sets of an experiment with the paper's transforms.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bnn_data::{
    Compose, DataLoader, Dataset, DatasetId, LoaderConfig, Locator, NormStats, Normalize,
    RandomHorizontalFlip, Split, Subset, load_idx_pair, open, open_dir,
};

use bnn_models::ModelConfig;

use crate::Error;

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

/// The data of one experiment, opened once and shared by every stage and table: the training
/// subset, the test subset with its loader, and the OOD loader.
pub struct ExperimentData {
    /// Training examples (stratified subset of seed 1 when `train_subset` is set).
    pub train: Arc<dyn Dataset>,
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
    pub fn open(setup: &crate::experiment::Setup) -> Result<Self, Error> {
        let train = subset(
            open_split(setup.dataset, Split::Train, setup.data_dir.as_deref())?,
            setup.train_subset,
            1,
            "the training set",
        )?;
        let test = subset(
            open_split(setup.dataset, Split::Test, setup.data_dir.as_deref())?,
            setup.test_subset,
            2,
            "the test set",
        )?;
        let stats = setup.dataset.norm_stats();
        let test_loader = eval_loader(stats, test.clone(), 256, setup.workers)?;
        let ood_loader = match &setup.ood {
            Some((id, dir)) => {
                let data = subset_at_most(open_ood(*id, dir)?, setup.test_subset, 3)?;
                Some(eval_loader(stats, data, 256, setup.workers)?)
            }
            None => None,
        };
        Ok(Self {
            train,
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

/// The default OOD directory for a data set, if present: the 10,000 MNIST digits shipped in
/// `../shared/data/mnist-10k` beside a checkout, for Fashion-MNIST.
pub fn default_ood_dir(id: DatasetId, repo_root: &Path) -> Option<(DatasetId, PathBuf)> {
    match id {
        DatasetId::FashionMnist => {
            let dir = repo_root.join("../shared/data/mnist-10k");
            dir.exists().then_some((DatasetId::Mnist, dir))
        }
        _ => None,
    }
}
