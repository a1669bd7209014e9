//! Loading the data sets of an experiment with the paper's transforms.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bnn_data::{
    Compose, DataLoader, Dataset, DatasetId, LoaderConfig, Locator, NormStats, Normalize,
    RandomCrop, RandomHorizontalFlip, Split, Subset, load_idx_pair, open, open_dir,
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

/// The first `n` examples of a stratified random subset (all if `n` is `None` or too large).
pub fn subset(
    data: Arc<dyn Dataset>,
    n: Option<usize>,
    seed: u64,
) -> Result<Arc<dyn Dataset>, Error> {
    match n {
        Some(n) if n < data.len() => Ok(Arc::new(Subset::stratified(data, n, seed)?)),
        _ => Ok(data),
    }
}

/// Training loader: the paper's augmentation for the data set (flip for Fashion-MNIST, crop with
/// 4-pixel reflection padding and flip for CIFAR/SVHN, none for MNIST digits), normalised.
pub fn train_loader(
    id: DatasetId,
    data: Arc<dyn Dataset>,
    batch_size: usize,
    seed: u64,
    workers: usize,
) -> Result<DataLoader, Error> {
    let (_, h, _) = data.shape();
    let t = match id {
        DatasetId::Mnist => Compose::new(),
        DatasetId::FashionMnist => Compose::new().then(RandomHorizontalFlip::default()),
        _ => Compose::new()
            .then(RandomCrop::reflect(h, 4))
            .then(RandomHorizontalFlip::default()),
    }
    .then(Normalize::new(id.norm_stats()));
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
