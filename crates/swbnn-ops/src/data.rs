//! Loading the data sets of an experiment with the paper's transforms.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bnn_data::{
    Compose, DataError, DataLoader, DataSource, Dataset, DatasetId, FileDigest, FolderImages,
    LoaderConfig, Locator, NormStats, Normalize, Published, RandomHorizontalFlip, Split, Subset,
    TileShuffled, by_name, digest_split, file_digests, load_idx_pair, open_dir, verify_split,
};

use bnn_models::{InputNorm, ModelConfig, TrainedOn};

use crate::Error;
use crate::split::ValidationSplit;

/// Opens `split` of `id`, searching `data_dir`, `$SWBNN_DATA`, the cache and
/// `/usr/share/datasets` (and downloading where allowed); checked as [`open_verified`].
pub fn open_split(
    id: DatasetId,
    split: Split,
    data_dir: Option<&Path>,
) -> Result<Arc<dyn Dataset>, Error> {
    Ok(open_verified(id, split, data_dir)?.data)
}

/// A split opened for a command: the data, the folder it was read from and the digests of
/// its files.
#[derive(Clone)]
pub struct OpenedSplit {
    /// The data set.
    pub data: Arc<dyn Dataset>,
    /// The folder it was read from.
    pub dir: PathBuf,
    /// The files it was read from ([`bnn_data::split_files`]; none for an image tree).
    pub files: Vec<FileDigest>,
}

impl OpenedSplit {
    /// SHA-256 of each file, by file name.
    pub fn digests(&self) -> BTreeMap<String, String> {
        by_name(&self.files)
    }
}

/// [`open_split`], with the folder and the file digests. Refused: files that are another data
/// set's published files (Fashion-MNIST's in a folder given as MNIST's), and images whose
/// shape is not the data set's (a data set of a fixed shape, all but ImageNet). Files that
/// differ from the published ones are named in a warning, once.
pub fn open_verified(
    id: DatasetId,
    split: Split,
    data_dir: Option<&Path>,
) -> Result<OpenedSplit, Error> {
    let locator = Locator::from_env(data_dir.map(Path::to_path_buf));
    let dir = locator.locate(id, split)?;
    let (files, note) = verify_split(id, split, &dir)?;
    if let Some(note) = note {
        warn_once(&note);
    }
    let data = open_dir(id, split, &dir)?;
    let (c, h, w) = data.shape();
    if id != DatasetId::ImageNet && (c, h, w) != id.shape() {
        let (ec, eh, ew) = id.shape();
        return Err(Error::Usage(format!(
            "the {id} files in {} hold {c}x{h}x{w} images, and {id}'s are {ec}x{eh}x{ew}: \
             they are not {id}'s files",
            dir.display()
        )));
    }
    Ok(OpenedSplit { data, dir, files })
}

/// Opens `split` of `source` for a command: a preset as [`open_verified`]; a user's `.npz`
/// (with its SHA-256) or class folders, their images brought to `images` (a model's input:
/// [`model_images`]; for training, the size asked for).
///
/// The training split of a user's data set comes with its test split checked
/// ([`check_test_split`]), so that a broken test split is refused before the work starts.
pub fn open_source(
    source: &DataSource,
    split: Split,
    data_dir: Option<&Path>,
    images: FolderImages,
) -> Result<OpenedSplit, Error> {
    let opened = open_one_split(source, split, data_dir, images)?;
    if split == Split::Train {
        check_test_split(source, &opened)?;
    }
    Ok(opened)
}

/// Loads the test split of a user's data set whose training split is `train`, when it has
/// one, brought to the training images' shape, and drops it: a test split that is empty,
/// holds NaN, a label beyond the training classes or images of another size is refused when
/// the data are opened, not by a later `eval` after the training. Presets: nothing to do (their
/// files are checked against the published ones).
pub fn check_test_split(source: &DataSource, train: &OpenedSplit) -> Result<(), Error> {
    if source.preset().is_some() || !source.has_test()? {
        return Ok(());
    }
    let (c, h, _) = train.data.shape();
    let images = FolderImages {
        size: Some(h),
        channels: Some(c),
    };
    let test = source.load(Split::Test, images)?;
    let (tc, th, tw) = test.shape();
    if test.shape() != train.data.shape() {
        let (ec, eh, ew) = train.data.shape();
        return Err(Error::Usage(format!(
            "the test split of {source} holds {tc}x{th}x{tw} images, and its training split \
             {ec}x{eh}x{ew}"
        )));
    }
    Ok(())
}

/// [`open_source`] without the check of the test split.
pub fn open_one_split(
    source: &DataSource,
    split: Split,
    data_dir: Option<&Path>,
    images: FolderImages,
) -> Result<OpenedSplit, Error> {
    match source {
        DataSource::Preset(id) => open_verified(*id, split, data_dir),
        DataSource::Npz(file) => {
            let data = source.load(split, images)?;
            let (sha256, _) = file_digests(file)?;
            Ok(OpenedSplit {
                data,
                dir: file.parent().map(Path::to_path_buf).unwrap_or_default(),
                files: vec![FileDigest {
                    path: file.clone(),
                    sha256,
                    published: Published::Unknown,
                }],
            })
        }
        DataSource::Folder(dir) => Ok(OpenedSplit {
            data: source.load(split, images)?,
            dir: dir.clone(),
            files: Vec::new(),
        }),
        DataSource::Csv(_) => Err(Error::Usage(format!(
            "{source} is a regression table; this reads labelled images (a regression \
             network's commands read tables: train, compress, calibrate, eval)"
        ))),
    }
}

/// How a user's images are shaped for the model of `config`: its side and channels.
pub fn model_images(config: &ModelConfig) -> FolderImages {
    FolderImages {
        size: Some(config.image_size),
        channels: Some(config.in_channels),
    }
}

/// The normalisation a model of `config` applies to raw images: the one it records, else
/// (files written before the record) the preset constants of `source`. A model without a
/// record given a user's data set is an error: its normalisation is unknown.
pub fn model_norm(config: &ModelConfig, source: &DataSource) -> Result<NormStats, Error> {
    match (&config.normalization, source.preset()) {
        (Some(n), _) => Ok(NormStats::new(n.mean.clone(), n.std.clone())?),
        (None, Some(id)) => Ok(id.norm_stats()),
        (None, None) => Err(Error::Usage(format!(
            "the model records no input normalisation (it predates the record), so it cannot \
             read {source}: evaluate it on the preset data set it was trained on"
        ))),
    }
}

/// The normalisation a model trained on `train` of `source` records: a preset's published
/// constants (the paper's), or the mean and std measured on `train`, the training images
/// without the validation split.
pub fn training_norm(source: &DataSource, train: &dyn Dataset) -> Result<NormStats, Error> {
    Ok(match source.preset() {
        Some(id) => id.norm_stats(),
        None => NormStats::measure(train)?,
    })
}

/// `stats` as a model records them.
pub fn norm_record(stats: &NormStats) -> InputNorm {
    InputNorm {
        mean: stats.mean.to_vec(),
        std: stats.std.to_vec(),
    }
}

/// Prints `note` as a warning on standard error, unless this process printed it already.
pub fn warn_once(note: &str) {
    static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if seen
        .get_or_insert_with(HashSet::new)
        .insert(note.to_string())
    {
        eprintln!("warning: {note}");
    }
}

/// What a model trained on the training split `train` of `id`, with `validation` held out,
/// records: the data set, its shape, the split, and the digests of the training files and of
/// the test files (which `eval` compares): `test`'s when the caller opened it, else those
/// beside the training files.
pub fn trained_on(
    source: &DataSource,
    train: &OpenedSplit,
    test: Option<&OpenedSplit>,
    validation: ValidationSplit,
) -> Result<TrainedOn, Error> {
    let (c, h, w) = train.data.shape();
    let mut files = train.digests();
    match (test, source.preset()) {
        (Some(test), _) => files.extend(test.digests()),
        (None, Some(id)) if id.is_present(&train.dir, Split::Test) => {
            files.extend(by_name(&digest_split(id, Split::Test, &train.dir)?));
        }
        _ => {}
    }
    Ok(TrainedOn {
        dataset: source.to_string(),
        shape: [c, h, w],
        validation: validation.size,
        validation_seed: validation.seed,
        files,
    })
}

/// Whether `source` may be the data set `recorded` (a [`TrainedOn::dataset`]): the same
/// preset; or, for a user's files, any other user's files (a test split may lie in another
/// file or folder than the training split; their digests, compared by file name, tell more).
/// A preset and a user's data set are never the same.
fn same_source(recorded: &str, source: &DataSource) -> bool {
    match (recorded.parse::<DataSource>(), source.preset()) {
        (Ok(DataSource::Preset(r)), Some(id)) => r == id,
        (Ok(DataSource::Preset(_)), None) | (Ok(_), Some(_)) | (Err(_), _) => false,
        (Ok(_), None) => true,
    }
}

/// Compares data handed to a command for the model of `config` (`model` names it) with the
/// data it was trained on: another data set, or files of the same name with other bytes, is
/// a warning naming both, printed once. A model without a record is not compared.
pub fn check_trained_on(
    model: &Path,
    config: &ModelConfig,
    source: &DataSource,
    data: &OpenedSplit,
) {
    let Some(record) = &config.trained_on else {
        return;
    };
    let id = source;
    if !same_source(&record.dataset, source) {
        warn_once(&format!(
            "{} was trained on {}, and is given {id} ({}): other data than it was trained on",
            model.display(),
            record.dataset,
            data.dir.display()
        ));
        return;
    }
    let differing = record.differing_files(&data.digests());
    if !differing.is_empty() {
        warn_once(&format!(
            "{} in {} differ{} from the {id} files {} was trained on (their SHA-256 differs)",
            differing.join(", "),
            data.dir.display(),
            if differing.len() == 1 { "s" } else { "" },
            model.display()
        ));
    }
}

/// Refuses an out-of-distribution set read from the same files as the test set: its AUROC
/// would score the test set against itself.
pub fn check_ood_not_test(test: &OpenedSplit, ood: &OpenedSplit) -> Result<(), Error> {
    let test_files: HashSet<&str> = test.files.iter().map(|f| f.sha256.as_str()).collect();
    if let Some(same) = ood
        .files
        .iter()
        .find(|f| test_files.contains(f.sha256.as_str()))
    {
        return Err(Error::Usage(format!(
            "the out-of-distribution set's {} has the same bytes as a file of the test set (in \
             {}): an OOD set must be other data than the test set",
            same.path.display(),
            test.dir.display()
        )));
    }
    Ok(())
}

/// Refuses an out-of-distribution set whose images are, for the most part, images of the
/// test set byte for byte (the same folder given twice, a copy of the test split under
/// another name), whatever kind of source either is: its AUROC would score the test set
/// against itself. A few shared images (blank ones) are allowed.
pub fn check_ood_images_not_test(test: &dyn Dataset, ood: &dyn Dataset) -> Result<(), Error> {
    use std::hash::{Hash, Hasher};
    if test.shape() != ood.shape() || ood.is_empty() {
        return Ok(());
    }
    let digest = |d: &dyn Dataset, i: usize| -> Result<u64, Error> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        d.get(i)?.pixels.hash(&mut h);
        Ok(h.finish())
    };
    let test_images = (0..test.len())
        .map(|i| digest(test, i))
        .collect::<Result<HashSet<u64>, Error>>()?;
    let mut shared = 0;
    for i in 0..ood.len() {
        shared += usize::from(test_images.contains(&digest(ood, i)?));
    }
    if 2 * shared > ood.len() {
        return Err(Error::Usage(format!(
            "{shared} of the {} out-of-distribution images are images of the test set, byte \
             for byte: an OOD set must be other data than the test set",
            ood.len()
        )));
    }
    Ok(())
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
    let shape = |(c, h, w): (usize, usize, usize), rows: bool| match rows {
        true => format!("rows of {w} features"),
        false => format!("{c}x{h}x{w} images"),
    };
    let (rows, model_rows) = (data.target_dim() > 0, config.tabular.is_some());
    if (c, h, w) != config.input_shape() || rows != model_rows {
        return Err(Error::DataMismatch {
            what: what.to_string(),
            found: shape((c, h, w), rows),
            expected: shape(config.input_shape(), model_rows),
        });
    }
    if data.target_dim() != config.head().targets() {
        return Err(Error::DataMismatch {
            what: what.to_string(),
            found: format!("{} targets per row", data.target_dim()),
            expected: format!("{}", config.head().targets()),
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
/// `labels-idx1-ubyte.gz` (the layout of the 10,000-digit MNIST sample), or the test split of
/// the standard layout of `id`.
pub fn open_ood(id: DatasetId, dir: &Path) -> Result<Arc<dyn Dataset>, Error> {
    Ok(open_ood_verified(id, dir)?.data)
}

/// [`open_ood`], with the digests of the files read (as [`open_verified`] checks them).
pub fn open_ood_verified(id: DatasetId, dir: &Path) -> Result<OpenedSplit, Error> {
    let images = dir.join("images-idx3-ubyte.gz");
    if images.exists() {
        let labels = dir.join("labels-idx1-ubyte.gz");
        let data = Arc::new(load_idx_pair(&images, &labels, 10)?);
        let files = [images, labels]
            .into_iter()
            .map(|path| {
                let (sha256, _) = file_digests(&path)?;
                Ok(FileDigest {
                    path,
                    sha256,
                    published: Published::Unknown,
                })
            })
            .collect::<Result<_, Error>>()?;
        return Ok(OpenedSplit {
            data,
            dir: dir.to_path_buf(),
            files,
        });
    }
    open_verified(id, Split::Test, Some(dir))
}

/// The data of an evaluation of a model: its test set and out-of-distribution set.
pub struct EvalData {
    /// The test split (a stratified subset of seed 2 when a subset size is given).
    pub test: Arc<dyn Dataset>,
    /// The out-of-distribution set, if one was asked for (subset of seed 3, cut to the test
    /// set's subset size when larger).
    pub ood: Option<Arc<dyn Dataset>>,
    /// Where the OOD set was read from: its folder and the SHA-256 of each file by name, so
    /// that a reported OOD number names its set (MNIST's test split and the 10,000-digit
    /// sample are both "mnist").
    pub ood_source: Option<(PathBuf, BTreeMap<String, String>)>,
}

/// Opens the test split of `dataset` (from `data_dir` or the usual search) and, when `ood` is
/// given, the OOD set (from `ood_dir`, else from the same search), for the model `model` of
/// `config`: each checked against the model's input shape, the data it was trained on
/// ([`check_trained_on`]), and each other ([`check_ood_not_test`]).
pub fn open_eval_data(
    model: &Path,
    config: &ModelConfig,
    dataset: &DataSource,
    data_dir: Option<&Path>,
    ood: Option<&DataSource>,
    ood_dir: Option<&Path>,
    n: Option<usize>,
) -> Result<EvalData, Error> {
    let opened = open_source(dataset, Split::Test, data_dir, model_images(config))?;
    check_trained_on(model, config, dataset, &opened);
    let test = subset(opened.data.clone(), n, 2, "the test set")?;
    // A user's test split numbers its classes by the labels it holds, so it may have fewer
    // than the model (a test file without the last class): every label must be a class of the
    // model. A preset has a fixed class count, which must be the model's.
    check_input(
        config,
        test.as_ref(),
        "test data",
        dataset.preset().is_some(),
    )?;
    if test.classes() > config.classes {
        return Err(Error::DataMismatch {
            what: "test data".into(),
            found: format!("{} classes", test.classes()),
            expected: format!("{}", config.classes),
        });
    }
    let ood_is_user = ood.is_some_and(|o| o.preset().is_none());
    let ood = match (ood, ood_dir) {
        (Some(DataSource::Preset(id)), Some(dir)) => Some(open_ood_verified(*id, dir)?),
        (Some(DataSource::Preset(id)), None) => Some(open_preset_ood(*id, data_dir)?),
        (Some(user), _) => Some(open_user_ood(user, config)?),
        (None, _) => None,
    };
    let ood_source = ood.as_ref().map(|o| (o.dir.clone(), o.digests()));
    let ood = match ood {
        Some(o) => {
            check_ood_not_test(&opened, &o)?;
            // Files tell presets apart; a folder has no file digests, and an `.npz` may hold
            // the test images under another name: compared image by image.
            if dataset.preset().is_none() || ood_is_user {
                check_ood_images_not_test(opened.data.as_ref(), o.data.as_ref())?;
            }
            let d = subset_at_most(o.data, n, 3)?;
            check_input(config, d.as_ref(), "out-of-distribution data", false)?;
            Some(d)
        }
        None => None,
    };
    Ok(EvalData {
        test,
        ood,
        ood_source,
    })
}

/// The test split of the preset `id` as an out-of-distribution set named without a folder: found
/// as `cargo xtask reproduce` finds it ([`OodSearch`]: `data_dir` or the standard search, then
/// the folder of 10,000 MNIST digits beside a checkout, `../shared/data/mnist-10k` from the
/// working directory), else downloaded where downloads are allowed. The folder read is named
/// with the result ([`EvalData::ood_source`]), so a sample is never taken for the test split.
pub fn open_preset_ood(id: DatasetId, data_dir: Option<&Path>) -> Result<OpenedSplit, Error> {
    open_preset_ood_in(id, data_dir, &OodSearch::from_env(Path::new(".")))
}

fn open_preset_ood_in(
    id: DatasetId,
    data_dir: Option<&Path>,
    search: &OodSearch,
) -> Result<OpenedSplit, Error> {
    if data_dir.is_none()
        && let Some(dir) = search.find(id)
    {
        return open_ood_verified(id, &dir);
    }
    open_verified(id, Split::Test, data_dir).map_err(|e| match e {
        Error::Data(e) if data_dir.is_none() => Error::Data(search.with_extra_searched(e)),
        other => other,
    })
}

/// A user's out-of-distribution set: its test split when it has one, else all its images (a
/// flat folder, a `.npz` without `x_test`), brought to the model's input shape.
pub fn open_user_ood(source: &DataSource, config: &ModelConfig) -> Result<OpenedSplit, Error> {
    let split = match source.has_test()? {
        true => Split::Test,
        false => Split::Train,
    };
    open_source(source, split, None, model_images(config))
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

/// Training loader: the paper's augmentation for a preset (a flip for Fashion-MNIST, none
/// for MNIST digits, else [`DatasetId::train_transform`]: crop with 4-pixel reflection padding
/// and flip for CIFAR, random resized crop to 224, flip and colour jitter for ImageNet,
/// normalisation only for SVHN, whose digits a flip would change), normalised. A user's data
/// set is normalised with `stats` and not augmented: no flip or crop is safe for every kind
/// of image (a flip changes digits and text).
pub fn train_loader(
    source: &DataSource,
    stats: &NormStats,
    data: Arc<dyn Dataset>,
    batch_size: usize,
    seed: u64,
    workers: usize,
) -> Result<DataLoader, Error> {
    let t = match source.preset() {
        Some(DatasetId::Mnist) | None => Compose::new().then(Normalize::new(stats.clone())),
        Some(DatasetId::FashionMnist) => Compose::new()
            .then(RandomHorizontalFlip::default())
            .then(Normalize::new(stats.clone())),
        Some(id) => id.train_transform(),
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
            extra: vec![beside_checkout(repo_root, "shared/data/mnist-10k")],
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
            None => Ok(self
                .locator
                .locate(ood, Split::Test)
                .map_err(|e| self.with_extra_searched(e))?),
        }
    }
}

/// The folder `rel` in the parent of the checkout at `repo_root`, said from the working
/// directory where it can be (`../shared/data/mnist-10k`): the path is written into a run's
/// `setup.json` and reports, which should not carry this machine's absolute paths.
fn beside_checkout(repo_root: &Path, rel: &str) -> PathBuf {
    let lexical = repo_root.join("..").join(rel);
    let (Ok(root), Ok(cwd)) = (
        repo_root.canonicalize(),
        std::env::current_dir().and_then(|d| d.canonicalize()),
    ) else {
        return lexical;
    };
    let Some(parent) = root.parent() else {
        return lexical;
    };
    let dir = parent.join(rel);
    pathdiff::diff_paths(&dir, &cwd).unwrap_or(dir)
}

impl OodSearch {
    /// Adds the folders of [`OodSearch::extra`] to a "not found" error's list of folders
    /// searched: [`OodSearch::find`] looked there too.
    fn with_extra_searched(&self, error: DataError) -> DataError {
        match error {
            DataError::NotFound {
                dataset,
                mut searched,
                remedies,
            } if self.locator.explicit.is_none() => {
                for dir in &self.extra {
                    searched.push_str(&format!("\n  {}", dir.display()));
                }
                DataError::NotFound {
                    dataset,
                    searched,
                    remedies,
                }
            }
            other => other,
        }
    }

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
/// An OOD search of `cache` (the cache's layout) and `extra` alone: no environment variable,
/// no system directory and no download, so that what it finds does not depend on the machine.
pub fn cache_only(cache: &Path, extra: Vec<PathBuf>) -> OodSearch {
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
    use crate::testing::{fake_mnist_test_split, write_idx};

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

    /// `eval --ood mnist` without `--ood-dir` reads the digits beside a checkout when the
    /// standard places have none, as `cargo xtask reproduce` does; it used to look only in
    /// the standard places and then try to download.
    #[test]
    fn a_preset_ood_set_is_found_beside_the_checkout() {
        let root = tempfile::tempdir().unwrap();
        let digits = root.path().join("shared/data/mnist-10k");
        std::fs::create_dir_all(&digits).unwrap();
        write_idx(
            &digits.join("images-idx3-ubyte.gz"),
            2051,
            &[2, 28, 28],
            &[9; 2 * 784],
        );
        write_idx(&digits.join("labels-idx1-ubyte.gz"), 2049, &[2], &[3, 4]);
        let search = cache_only(&root.path().join("cache"), vec![digits.clone()]);
        let opened = open_preset_ood_in(DatasetId::Mnist, None, &search).unwrap();
        assert_eq!(opened.dir, digits);
        assert_eq!(opened.data.len(), 2);
    }

    /// Without the digits anywhere, the error lists the folder beside the checkout with the
    /// standard places: it was searched too, and used to be left out of the list.
    #[test]
    fn a_missing_preset_ood_set_names_every_folder_searched() {
        let root = tempfile::tempdir().unwrap();
        let digits = root.path().join("shared/data/mnist-10k");
        let search = cache_only(&root.path().join("cache"), vec![digits.clone()]);
        let err = open_preset_ood_in(DatasetId::Mnist, None, &search)
            .err()
            .expect("no digits anywhere");
        let text = err.to_string();
        assert!(text.contains("not found"), "{text}");
        assert!(text.contains(&digits.display().to_string()), "{text}");
    }

    /// The digits beside a checkout are named from the working directory, not by an
    /// absolute path of this machine (the path lands in setup.json).
    #[test]
    fn the_folder_beside_the_checkout_is_relative_to_the_working_directory() {
        let cwd = std::env::current_dir().unwrap();
        let beside = beside_checkout(&cwd, "shared/data/mnist-10k");
        assert_eq!(beside, Path::new("../shared/data/mnist-10k"));
        let below = beside_checkout(&cwd.join("src/.."), "x");
        assert_eq!(below, Path::new("../x"));
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
