//! `swbnn train`: a deterministic or Bayes-by-Backprop model, checkpointed every epoch.

use std::path::PathBuf;

use bnn_data::{DataSource, FolderImages, Split};
use bnn_layers::{Estimator, bayes_from_deterministic};
use bnn_models::{Arch, Kind, ModelConfig, Network, Noise};
use bnn_train::{Checkpointer, DataParallel, EpochStats, Observer, train_data_parallel};
use burn::prelude::*;

use super::{require, within};
use crate::Error;
use crate::checks;
use crate::data::{
    check_input, check_trained_on, norm_record, open_source, train_loader, trained_on,
    training_norm, training_split,
};
use crate::defaults::BbbRecipe;
use crate::split::ValidationSplit;
use crate::table::{
    check_columns, check_table_arch, check_table_options, fit_tabular, open_table, standardized,
    table_loader,
};
use bnn_interop::ExportAs;
use bnn_train::ModelDir;

/// A deterministic network, or a Bayesian one trained by Bayes by Backprop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainKind {
    /// A deterministic network (its weights can start a Bayesian one, `from`).
    Deterministic,
    /// A Bayesian network trained by Bayes by Backprop.
    Bayesian,
}

impl TrainKind {
    /// Every kind's name, as [`FromStr`](std::str::FromStr) reads it.
    pub const NAMES: [&'static str; 2] = ["deterministic", "bayesian"];
}

impl std::str::FromStr for TrainKind {
    type Err = String;

    /// `deterministic` or `bayesian`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "deterministic" => Ok(TrainKind::Deterministic),
            "bayesian" => Ok(TrainKind::Bayesian),
            _ => Err(format!("unknown kind {s:?} (deterministic or bayesian)")),
        }
    }
}

/// What `swbnn train` does: every field a flag of the command (`swbnn train --help`).
#[derive(Debug, Clone)]
pub struct TrainRequest {
    /// The data set: a preset, `folder:DIR` or `npz:FILE` (images), or a regression table
    /// (`csv:FILE`, or `npz:FILE` with floating-point `y_*`).
    pub dataset: DataSource,
    /// The target columns of a CSV data set (`--target`, at least one there; none elsewhere).
    pub targets: Vec<String>,
    /// The noise model of a regression network (default heteroscedastic; image data sets do
    /// not take it).
    pub noise: Option<Noise>,
    /// Resize a folder data set's images to this square side (default: the first image's).
    pub image_size: Option<usize>,
    /// The architecture.
    pub arch: Arch,
    /// The MLP's hidden widths (`None`: the architecture's default, `[400, 400]`); the MLP
    /// only.
    pub mlp_hidden: Option<Vec<usize>>,
    /// Deterministic or Bayesian.
    pub kind: TrainKind,
    /// Training epochs (at least 1).
    pub epochs: usize,
    /// The model directory written.
    pub out: PathBuf,
    /// A trained model directory to start a Bayesian run from.
    pub from: Option<PathBuf>,
    /// How a Bayesian model is trained (default [`BbbRecipe::Pretrained`]).
    pub recipe: Option<BbbRecipe>,
    /// Also write the Bayesian model's start to this `.safetensors` file.
    pub save_init: Option<PathBuf>,
    /// Continue the checkpoint in `out`.
    pub resume: bool,
    /// The folder of a preset data set (used alone).
    pub data_dir: Option<PathBuf>,
    /// A stratified subset of the training examples (at least 1).
    pub subset: Option<usize>,
    /// The validation split held out of the training split.
    pub validation: ValidationSplit,
    /// The Bayesian layers' gradient estimator.
    pub estimator: Estimator,
    /// Seed of the initialisation, the data order and the weight noise.
    pub seed: u64,
    /// Data-parallel devices (`cuda:0,cuda:1`); `None`: the given device alone.
    pub devices: Option<String>,
    /// Loader threads.
    pub workers: usize,
}

impl TrainRequest {
    /// A request with the command line's defaults: 5 epochs, the standard validation split,
    /// the reparameterisation estimator, seed 0, 2 loader threads.
    pub fn new(dataset: DataSource, arch: Arch, kind: TrainKind, out: PathBuf) -> Self {
        TrainRequest {
            dataset,
            targets: Vec::new(),
            noise: None,
            image_size: None,
            arch,
            mlp_hidden: None,
            kind,
            epochs: 5,
            out,
            from: None,
            recipe: None,
            save_init: None,
            resume: false,
            data_dir: None,
            subset: None,
            validation: ValidationSplit::standard(),
            estimator: Estimator::Reparameterization,
            seed: 0,
            devices: None,
            workers: 2,
        }
    }

    /// Checks every setting that needs no data: ranges, flags that go together, the output
    /// directory, the start model's kind and architecture.
    pub fn check(&self) -> Result<(), Error> {
        require((1..=bnn_train::MAX_EPOCHS).contains(&self.epochs), || {
            format!(
                "epochs = {} is out of range: 1 to {}",
                self.epochs,
                bnn_train::MAX_EPOCHS
            )
        })?;
        if let Some(size) = self.image_size {
            require((1..=checks::MAX_IMAGE_SIZE).contains(&size), || {
                format!(
                    "--image-size {size} is out of range: 1 to {} pixels",
                    checks::MAX_IMAGE_SIZE
                )
            })?;
        }
        require(self.subset != Some(0), || {
            "subset must be at least 1".into()
        })?;
        require(self.workers >= 1, || "workers must be at least 1".into())?;
        let deterministic = self.kind == TrainKind::Deterministic;
        require(!(self.from.is_some() && deterministic), || {
            "--from starts a Bayesian model from a trained one; a deterministic run does not \
             take it (pass --kind bayesian)"
                .into()
        })?;
        require(!(self.recipe.is_some() && deterministic), || {
            "--recipe sets how a Bayesian model is trained; a deterministic run does not take \
             it (pass --kind bayesian)"
                .into()
        })?;
        require(!(self.save_init.is_some() && deterministic), || {
            "--save-init writes a Bayesian model's start in bayesian-torch's names; a \
             deterministic run does not take it (pass --kind bayesian)"
                .into()
        })?;
        check_table_options(
            &self.dataset,
            &self.targets,
            self.noise,
            self.arch,
            self.mlp_hidden.as_deref(),
        )?;
        require(
            self.image_size.is_none() || matches!(self.dataset, DataSource::Folder(_)),
            || {
                format!(
                    "--image-size resizes the images of a folder: data set; {} has a fixed size",
                    self.dataset
                )
            },
        )?;
        if self.resume {
            checks::resumable_checkpoint(&self.out)?;
        }
        checks::output_dir("--out", &self.out)?;
        if let Some(file) = &self.save_init {
            checks::output_target("--save-init", file, None, &[])?;
        }
        if let Some(dir) = &self.from {
            let start = ModelDir::new(dir)
                .read_config()
                .map_err(within(format_args!("--from {}", dir.display())))?;
            check_start(&start, self.arch)
                .map_err(within(format_args!("--from {}", dir.display())))?;
        }
        Ok(())
    }
}

/// Bytes per trainable parameter in training: the value, its gradient and the optimiser's
/// two moments (Adam's; SGD with momentum keeps one), `f32` each, and one more for the weight
/// noise a Bayesian layer draws per step.
const TRAIN_BYTES_PER_PARAMETER: u64 = 5 * 4;

/// What a folder data set read at `size` pixels takes in memory, counted before any image is
/// decoded: one byte per pixel of every image of its training split (grey; colour images take
/// three times that).
fn folder_estimate(root: &std::path::Path, size: usize) -> Result<checks::MemoryEstimate, Error> {
    let dir = bnn_data::split_dir(root, Split::Train)?;
    let mut images = 0u64;
    for class in bnn_data::folder_classes(root)? {
        let Ok(entries) = std::fs::read_dir(dir.join(&class)) else {
            continue;
        };
        images += entries
            .flatten()
            .filter(|e| {
                let p = e.path();
                p.is_file()
                    && p.extension().and_then(|x| x.to_str()).is_some_and(|x| {
                        ["png", "jpg", "jpeg"].contains(&x.to_ascii_lowercase().as_str())
                    })
            })
            .count() as u64;
    }
    let mut estimate = checks::MemoryEstimate::default();
    estimate.add(
        format!("{images} images of {size}x{size} pixels"),
        images.saturating_mul((size * size) as u64),
    );
    Ok(estimate)
}

/// What training a model of `config` on `data` takes in memory, roughly, before the model is
/// built: the images, the parameters with their gradients and optimiser state
/// ([`TRAIN_BYTES_PER_PARAMETER`]), and a batch of the first layer's outputs with their
/// gradients (`f32`).
fn run_estimate(
    config: &ModelConfig,
    data: &dyn bnn_data::Dataset,
    batch_size: usize,
    device: &Device,
) -> Result<checks::MemoryEstimate, Error> {
    let (c, h, w) = data.shape();
    // A batch is at most the data set.
    let batch_size = batch_size.min(data.len());
    let mut estimate = checks::MemoryEstimate::default();
    estimate.add(
        format!("{} images", data.len()),
        (data.len() as u64).saturating_mul((c * h * w) as u64),
    );
    let counts = config.counts(device)?;
    estimate.add(
        format!("{} parameters in training", counts.trainable),
        (counts.trainable as u64).saturating_mul(TRAIN_BYTES_PER_PARAMETER),
    );
    // The first layer with a weight: a convolution `[out, in, k, k]` (a ViT's patch embedding
    // strides by its kernel, an ImageNet stem of 7 x 7 by 2) or a dense layer `[out, in]`.
    let shapes = config.param_shapes(device)?;
    let first = shapes
        .iter()
        .find(|(_, s)| s.len() >= 2)
        .map(|(_, s)| s.clone());
    let outputs = match first.as_deref() {
        Some(&[out, _, k, _]) => {
            let vit = matches!(config.arch, Arch::VitB16 | Arch::VitTiny);
            let stride = if vit {
                k.max(1)
            } else if k >= 7 {
                2
            } else {
                1
            };
            let side = (h / stride).max(1);
            out * side * side
        }
        Some(&[out, _]) => out,
        _ => 0,
    };
    estimate.add(
        format!("a batch of {batch_size} of the first layer's outputs"),
        (outputs as u64)
            .saturating_mul(batch_size as u64)
            .saturating_mul(2 * 4),
    );
    Ok(estimate)
}

/// Says on standard error what resuming the checkpoint `state` in `out` for `epochs` does:
/// nothing left to train, or the epochs it extends the run by. Fewer epochs than it has
/// trained is an error: a run is never shortened.
fn resume_note(
    out: &std::path::Path,
    state: &bnn_train::CheckpointState,
    epochs: usize,
) -> Result<(), Error> {
    let done = state.complete_epochs();
    require(done <= epochs, || {
        format!(
            "--resume --epochs {epochs}: the checkpoint in {} has trained {done} epochs \
             already; give --epochs {done} (to keep it) or more (to extend it)",
            out.display()
        )
    })?;
    let planned = state.planned_epochs().unwrap_or(epochs);
    if done == epochs {
        eprintln!(
            "resumed {} at epoch {done} of {epochs}: nothing to train",
            out.display()
        );
    } else if epochs > planned {
        eprintln!(
            "resuming {} after epoch {done}: extending the run from {planned} to {epochs} epochs",
            out.display()
        );
    } else {
        eprintln!("resuming {} after epoch {done} of {epochs}", out.display());
    }
    Ok(())
}

/// Whether a model of `config` can start a Bayesian run of `arch`: a deterministic or
/// Bayesian model of that architecture; a weight-shared one has no weight of its own.
fn check_start(config: &ModelConfig, arch: Arch) -> Result<(), Error> {
    require(config.kind != Kind::Shared, || {
        "a weight-shared (2DGBNN) model cannot start a Bayesian run; start from the Bayesian \
         model it was compressed from"
            .into()
    })?;
    require(config.arch == arch, || {
        format!("the model is a {}, --arch is {}", config.arch, arch)
    })
}

/// `model` with every parameter (means, rhos, batch norm and its running statistics) of the
/// Bayesian model `start`, which must have them all, with the same shapes.
fn continue_bayesian(start: &Network, model: Network) -> Result<Network, Error> {
    let params = bnn_layers::export_params(start);
    let expected = bnn_layers::export_params(&model).len();
    let (model, copied) = bnn_layers::import_params(model, &params)?;
    require(copied == expected, || {
        format!("it set {copied} of the model's {expected} parameters: not the same network")
    })?;
    Ok(model)
}

/// The training data of a run and the configuration of its model, before the kind is set.
struct TrainingData {
    /// The training split as opened (the validation split still in it).
    opened: crate::data::OpenedSplit,
    /// The training examples (the validation split held out), in the user's units.
    train: std::sync::Arc<dyn bnn_data::Dataset>,
    /// A deterministic model for them, with what it was trained on, and its input
    /// normalisation (images) or standardisation (tables, measured on `train`).
    config: ModelConfig,
    /// The images' normalisation (`None` for a table).
    stats: Option<bnn_data::NormStats>,
}

/// Opens the training split of `r.dataset`, holds out the validation split and sizes the
/// model: a classifier of the images, or a regression MLP of the table's columns.
fn training_data(r: &TrainRequest) -> Result<TrainingData, Error> {
    if r.dataset.is_regression()? {
        check_table_arch(r.arch)?;
        let table = open_table(&r.dataset, &r.targets)?;
        let record = trained_on(&r.dataset, &table.train, None, r.validation)?;
        let (train, _) = training_split(table.train.data.clone(), r.validation, r.subset)?;
        let tabular = fit_tabular(train.as_ref(), &table.feature_names, &table.target_names)?;
        let mut config =
            ModelConfig::regression(Kind::Deterministic, tabular, r.noise.unwrap_or_default());
        config.trained_on = Some(record);
        config.validate()?;
        return Ok(TrainingData {
            opened: table.train,
            train,
            config,
            stats: None,
        });
    }
    let images = FolderImages {
        size: r.image_size,
        channels: None,
    };
    if let (DataSource::Folder(root), Some(size)) = (&r.dataset, r.image_size) {
        folder_estimate(root, size)?.check("reading the training images")?;
    }
    let opened = open_source(&r.dataset, Split::Train, r.data_dir.as_deref(), images)?;
    let record = trained_on(&r.dataset, &opened, None, r.validation)?;
    let (train, _) = training_split(opened.data.clone(), r.validation, r.subset)?;
    let stats = training_norm(&r.dataset, train.as_ref())?;
    let (c, h, _) = train.shape();
    let mut config = ModelConfig::for_input(r.arch, Kind::Deterministic, train.classes(), c, h);
    config.trained_on = Some(record);
    config.normalization = Some(norm_record(&stats));
    Ok(TrainingData {
        opened,
        train,
        config,
        stats: Some(stats),
    })
}

/// Runs `request` on `device` (autodiff is added here), reporting each step to `observer`;
/// returns the epoch history. The model, its `config.json` (with the data it was trained on
/// and its input normalisation) and a checkpoint each epoch go to `request.out`.
pub fn train(
    request: &TrainRequest,
    device: &Device,
    observer: &mut dyn Observer,
) -> Result<Vec<EpochStats>, Error> {
    request.check()?;
    let r = request;
    let (ad, parallel) = match &r.devices {
        None => (
            device.clone().autodiff(),
            DataParallel::single(device.clone()),
        ),
        Some(list) => {
            let parallel =
                DataParallel::parse(list).map_err(within(format_args!("--devices {list}")))?;
            (parallel.devices()[0].clone().autodiff(), parallel)
        }
    };
    let TrainingData {
        opened,
        train: train_data,
        mut config,
        stats,
    } = training_data(r)?;
    config.bayes.estimator = r.estimator;
    if let Some(widths) = &r.mlp_hidden {
        config.mlp_hidden = widths.clone();
        config.validate()?;
    }
    let mut tc = match r.kind {
        TrainKind::Deterministic if config.head().is_regression() => {
            bnn_train::TrainConfig::deterministic_regression(r.epochs)
        }
        TrainKind::Deterministic => bnn_train::TrainConfig::deterministic(r.epochs),
        TrainKind::Bayesian => {
            let recipe = r.recipe.unwrap_or(BbbRecipe::Pretrained);
            config = config.with_kind(Kind::Bayesian);
            (config.bayes.weight_sigma, config.bayes.bias_sigma) = recipe.sigma_init();
            recipe.train_config(r.epochs)
        }
    };
    tc.seed = r.seed;
    parallel
        .check_batch_size(tc.batch_size)
        .map_err(within(format_args!(
            "--devices {}",
            r.devices.as_deref().unwrap_or("")
        )))?;
    run_estimate(&config, opened.data.as_ref(), tc.batch_size, device)?.check("training")?;
    ad.seed(r.seed);
    let mut model = config.init(&ad)?;
    if let Some(dir) = &r.from {
        let from = |e: Error| within(format_args!("--from {}", dir.display()))(e);
        let (start, start_config) = ModelDir::new(dir).load(&ad)?;
        check_trained_on(dir, &start_config, &r.dataset, &opened);
        check_input(&start_config, train_data.as_ref(), "training data", true).map_err(from)?;
        if let (Some(mine), Some(theirs)) = (&config.tabular, &start_config.tabular) {
            check_columns(
                &start_config,
                &mine.feature_names,
                &mine.target_names,
                "--from",
            )?;
            // The same training rows give the same statistics; the start's record is kept so
            // that both networks see the same scale bit for bit.
            if mine != theirs {
                config.tabular = Some(theirs.clone());
                model = config.init(&ad)?;
            }
        }
        require(start_config.head() == config.head(), || {
            format!(
                "the model in {} has a {:?} head, this run a {:?} one (--noise)",
                dir.display(),
                start_config.head(),
                config.head()
            )
        })
        .map_err(from)?;
        model = match start_config.kind {
            Kind::Bayesian => continue_bayesian(&start, model),
            _ => bayes_from_deterministic(&start, model)
                .map(|(m, _)| m)
                .map_err(Error::from),
        }
        .map_err(from)?;
    }
    let loader = match (&config.tabular, &stats) {
        (Some(tabular), _) => table_loader(
            standardized(train_data.as_ref(), tabular, true)?,
            tc.batch_size,
            true,
            r.seed,
            r.workers,
        )?,
        (None, Some(stats)) => train_loader(
            &r.dataset,
            stats,
            train_data,
            tc.batch_size,
            r.seed,
            r.workers,
        )?,
        (None, None) => return Err(Error::Usage("no input normalisation".into())),
    };
    // Everything that must match to resume is checked before anything is written.
    let mut run = serde_json::json!({
        "dataset": r.dataset.to_string(),
        "subset": r.subset,
    });
    // Named only when there is one: a checkpoint made before validation splits resumes with
    // no split, on the images it trained on.
    if r.validation.size > 0 {
        run["validation"] = serde_json::json!(r.validation);
    }
    let ck = Checkpointer::new(&r.out)?
        .with_run(run)
        .with_world_size(parallel.world_size());
    let state = match r.resume {
        true => ck.check(&model, &loader, &tc)?,
        false => ck.state()?,
    };
    require(
        r.resume || (state.is_none() && !ck.model_path().exists()),
        || {
            format!(
                "{} already holds a model; resume to continue it (--resume)",
                r.out.display()
            )
        },
    )?;
    if let Some(s) = &state {
        resume_note(&r.out, s, r.epochs)?;
    }
    let model_dir = ModelDir::new(&r.out);
    if r.resume {
        model_dir.check_resume(&config)?;
    }
    if !(r.resume && model_dir.config_path().exists()) {
        model_dir.write_config(&config)?;
    }
    if let Some(file) = &r.save_init {
        bnn_interop::write_export(
            &model,
            &config,
            ExportAs::Convention(bnn_models::torch_names::Convention::BayesianTorch),
            file,
            false,
        )
        .map_err(within(format_args!("--save-init {}", file.display())))?;
    }
    if let Some(s) = &state
        && !s.is_exact()
    {
        crate::data::warn_once(&format!(
            "the checkpoint in {} predates saved optimiser states; it resumes with fresh \
             Adam/momentum moments (not bit-identical to an uninterrupted run)",
            r.out.display()
        ));
    }
    let (_, history) = train_data_parallel(model, &loader, &tc, &parallel, Some(&ck), observer)?;
    Ok(history)
}
