//! `swbnn compress`: the method's stages 1-3 on a trained Bayesian model, saved as `.swb`.

use std::io::Write;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use bnn_data::{DataLoader, DataSource, Dataset, NormStats, Split};
use bnn_models::{ModelConfig, Network};
use bnn_train::Observer;
use burn::prelude::*;
use swshare::CompressionReport;
use swshare::compress::CompressConfig;

use super::{require, within};
use crate::Error;
use crate::checks;
use crate::data::{
    check_input, check_trained_on, eval_loader, model_images, model_norm, open_source,
    train_loader, training_split, warn_once,
};
use crate::search::{SearchConfig, SearchInputs, SearchProgress, SearchReport};
use crate::split::ValidationSplit;
use crate::table::{open_model_table, standardized, table_loader};
use bnn_train::ModelDir;

/// Where the compression settings come from.
#[derive(Debug, Clone, Default)]
pub enum CompressSettings {
    /// The command line's defaults ([`crate::defaults::command_line_compress`]).
    #[default]
    Defaults,
    /// A JSON file (`{"sharing": {...}, "retrain": {...}, ...}`; missing fields take the
    /// library's defaults).
    File(PathBuf),
    /// The same JSON, as text.
    Json(String),
}

/// What `swbnn compress` does: every field a flag of the command.
#[derive(Debug, Clone)]
pub struct CompressRequest {
    /// A model directory written by `swbnn train --kind bayesian`.
    pub model: PathBuf,
    /// The data set it was trained on (its training split retrains stage 3).
    pub dataset: DataSource,
    /// The `.swb` file written; `-` writes its bytes to standard output instead.
    pub out: PathBuf,
    /// Replace an existing `out`.
    pub force: bool,
    /// The settings, before `k` and `epochs` override them.
    pub settings: CompressSettings,
    /// Number of GMM components.
    pub k: Option<usize>,
    /// Most stage-3 epochs.
    pub epochs: Option<usize>,
    /// The folder of a preset data set (used alone).
    pub data_dir: Option<PathBuf>,
    /// A stratified subset of the training examples.
    pub subset: Option<usize>,
    /// The validation split held out of the training split (stage 3's stop rule reads it).
    pub validation: ValidationSplit,
    /// Loader threads.
    pub workers: usize,
}

impl CompressRequest {
    /// A request with the command line's defaults.
    pub fn new(model: PathBuf, dataset: DataSource, out: PathBuf) -> Self {
        CompressRequest {
            model,
            dataset,
            out,
            force: false,
            settings: CompressSettings::Defaults,
            k: None,
            epochs: None,
            data_dir: None,
            subset: None,
            validation: ValidationSplit::standard(),
            workers: 2,
        }
    }

    /// The settings: read, overridden by `k` and `epochs`, and validated.
    pub fn config(&self) -> Result<CompressConfig, Error> {
        let mut cfg = match &self.settings {
            CompressSettings::Defaults => crate::defaults::command_line_compress(),
            CompressSettings::File(p) => {
                let bytes = bnn_metrics::file::read_bounded(p, bnn_train::MAX_JSON_BYTES, "JSON")
                    .map_err(within(format_args!("--config {}", p.display())))?;
                let text = String::from_utf8(bytes).map_err(|_| {
                    Error::Usage(format!("--config {}: not UTF-8 text", p.display()))
                })?;
                CompressConfig::from_json(&text)
                    .map_err(within(format_args!("in {}", p.display())))?
            }
            CompressSettings::Json(text) => CompressConfig::from_json(text)?,
        };
        if let Some(k) = self.k {
            cfg.sharing.gmm.k = k;
        }
        if let Some(e) = self.epochs {
            cfg.retrain.epochs = e;
        }
        cfg.validate()
            .map_err(within("the compression settings (--config, --k, --epochs)"))?;
        // As `--epochs` requires: stage 3 is the method's, a config may not skip it.
        require(cfg.retrain.epochs >= 1, || {
            "the compression settings (--config, --k, --epochs): retrain.epochs = 0; stage 3 \
             retrains the shared model for at least 1 epoch"
                .into()
        })?;
        Ok(cfg)
    }
}

/// Runs `request` on `device` (autodiff is added here), reporting stage 3's steps to
/// `observer`; writes `request.out` (standard output for `-`) and returns the compression
/// report. The output is checked, and the settings validated, before the model is loaded.
pub fn compress(
    request: &CompressRequest,
    device: &Device,
    observer: &mut dyn Observer,
) -> Result<CompressionReport, Error> {
    let r = request;
    let out = match r.out == Path::new(STDOUT) {
        true => None,
        false => Some(checked_output(r, "--out", &r.out)?),
    };
    let cfg = r.config()?;
    let o = open(r, &cfg, device)?;
    let compressed = swshare::compress::compress(
        &o.bayes,
        &o.bayes_config,
        &o.loader,
        o.validation.as_ref(),
        &cfg,
        None,
        observer,
    )?;
    let bytes = swshare::format::to_bytes(&compressed.file, &compressed.save_options)?;
    write_output(out.as_deref(), &bytes, r.force)?;
    Ok(compressed.report)
}

/// `swbnn compress --auto`: searches sizes and methods on the validation split
/// ([`crate::search`]), with `request`'s settings as the sharing candidates' base; writes
/// the smallest file within `search.margins` to `request.out` and the whole search beside it
/// ([`search_file`]). When no candidate qualifies, the search file is written and the result
/// is an error, unless `request.force` asks for the nearest candidate's file.
pub fn compress_auto(
    request: &CompressRequest,
    search: &SearchConfig,
    device: &Device,
    progress: &mut dyn SearchProgress,
) -> Result<SearchReport, Error> {
    let r = request;
    search.check()?;
    require(r.k.is_none(), || {
        "--auto searches K (and the method); --k fixes it: give one of the two".into()
    })?;
    require(r.out != Path::new(STDOUT), || {
        "--auto writes the search beside --out, so --out must be a file, not `-`".into()
    })?;
    require(r.validation.size > 0, || {
        "--auto judges every candidate on the validation split: --validation 0 leaves none".into()
    })?;
    require(
        r.validation.size >= crate::search::MIN_VALIDATION_IMAGES,
        || {
            format!(
                "--validation {}: --auto needs at least {} validation images to hold ECE to a \
             margin",
                r.validation.size,
                crate::search::MIN_VALIDATION_IMAGES
            )
        },
    )?;
    // The search judges on the validation split: a model that trained on those images would
    // be judged on its training data.
    let config = ModelDir::new(&r.model).read_config()?;
    if let Some(held_out) = crate::calibration::recorded_split(&config)
        && held_out != r.validation
    {
        return Err(Error::Usage(match held_out.size {
            0 => format!(
                "{} was trained with --validation 0, on every training image: --auto would \
                 judge its candidates on images it trained on. Train with a validation split",
                r.model.display()
            ),
            n => format!(
                "{} held out {n} validation images (seed {}) and trained on the rest; \
                 --validation {} would judge the candidates on images it trained on. Give \
                 --validation {n}",
                r.model.display(),
                held_out.seed,
                r.validation.size
            ),
        }));
    }
    require(!config.head().is_regression(), || {
        format!(
            "{} is a regression network; --auto judges its candidates by a classifier's \
             accuracy, NLL, ECE and OOD AUROC: compress it with a K of your choice (--k)",
            r.model.display()
        )
    })?;
    let search_path = search_file(&r.out);
    let out = checked_output(r, "--out", &r.out)?;
    let search_out = checked_output(r, "the search file", &search_path)?;
    let cfg = r.config()?;
    let o = open(r, &cfg, device)?;
    let validation = o
        .validation
        .as_ref()
        .ok_or_else(|| Error::Usage("--auto needs a validation split".into()))?;
    let stats = o
        .stats
        .as_ref()
        .ok_or_else(|| Error::Usage("--auto needs images".into()))?;
    let ood = eval_loader(
        stats.clone(),
        crate::data::validation_ood(o.validation_data.clone())?,
        256,
        r.workers,
    )?;
    let inputs = SearchInputs {
        bayes: &o.bayes,
        bayes_config: &o.bayes_config,
        train: &o.loader,
        validation,
        validation_ood: &ood,
        validation_images: o.validation_data.len(),
    };
    let (report, file) = crate::search::search(&inputs, &cfg, search, r.force, progress)?;
    let json = serde_json::to_vec_pretty(&report).map_err(Error::json)?;
    bnn_io::write_atomic(&search_out, &json, bnn_io::Replace::from_force(r.force))
        .map_err(swshare::format::file_error)?;
    match file {
        Some(f) => write_output(Some(&out), f.bytes(), r.force)?,
        None => {
            return Err(Error::Usage(format!(
                "no candidate of the search is within the margins on validation (each \
                 candidate's verdict is in {}); --force writes the one nearest them",
                search_path.display()
            )));
        }
    }
    Ok(report)
}

/// Where `compress --auto` writes its search: `out` with its extension replaced by
/// `search.json` (`m.swb` -> `m.search.json`).
pub fn search_file(out: &Path) -> PathBuf {
    out.with_extension("search.json")
}

/// `path` checked as an output of `request` (an existing file only with `force`; not one of
/// the inputs).
fn checked_output(request: &CompressRequest, flag: &str, path: &Path) -> Result<PathBuf, Error> {
    let inputs: Vec<&Path> = std::iter::once(request.model.as_path())
        .chain(match &request.settings {
            CompressSettings::File(p) => Some(p.as_path()),
            _ => None,
        })
        .collect();
    // Checked here, before the work, and again by the final write (a file that appears
    // meanwhile is not replaced without --force).
    checks::output_target(flag, path, Some(request.force), &inputs)
}

/// What compression reads, opened and checked.
struct Opened {
    bayes: Network,
    bayes_config: ModelConfig,
    loader: DataLoader,
    validation: Option<DataLoader>,
    validation_data: Arc<dyn Dataset>,
    /// The images' normalisation (`None` for a table).
    stats: Option<NormStats>,
}

/// Loads the model of `r` onto `device`'s autodiff and opens its data with `cfg`'s stage-3
/// batch size and seed.
fn open(r: &CompressRequest, cfg: &CompressConfig, device: &Device) -> Result<Opened, Error> {
    require(r.subset != Some(0), || "subset must be at least 1".into())?;
    let ad = device.clone().autodiff();
    let (bayes, bayes_config) = ModelDir::new(&r.model).load(&ad)?;
    if bayes_config.tabular.is_some() {
        return open_table_data(r, cfg, bayes, bayes_config);
    }
    let opened = open_source(
        &r.dataset,
        Split::Train,
        r.data_dir.as_deref(),
        model_images(&bayes_config),
    )?;
    check_trained_on(&r.model, &bayes_config, &r.dataset, &opened);
    warn_other_split(r, &bayes_config);
    let stats = model_norm(&bayes_config, &r.dataset)?;
    check_input(&bayes_config, opened.data.as_ref(), "training data", true)?;
    let (train_data, validation_data) = training_split(opened.data, r.validation, r.subset)?;
    let loader = train_loader(
        &r.dataset,
        &stats,
        train_data,
        cfg.retrain.batch_size,
        cfg.retrain.seed,
        r.workers,
    )?;
    // Stage 3's stop rule reads the validation split; without one it is an error.
    let validation = match r.validation.size {
        0 => None,
        _ => Some(eval_loader(
            stats.clone(),
            validation_data.clone(),
            256,
            r.workers,
        )?),
    };
    Ok(Opened {
        bayes,
        bayes_config,
        loader,
        validation,
        validation_data,
        stats: Some(stats),
    })
}

/// Warns when `r.validation` is not the split the model held out: stage 3's stop rule would
/// read examples the model may have trained on.
fn warn_other_split(r: &CompressRequest, config: &ModelConfig) {
    if let Some(held_out) = crate::calibration::recorded_split(config)
        && held_out != r.validation
    {
        warn_once(&format!(
            "{} held out {} validation examples (seed {}), --validation is {}: stage 3's stop \
             rule reads examples the model may have trained on",
            r.model.display(),
            held_out.size,
            held_out.seed,
            r.validation.size
        ));
    }
}

/// [`open`] for a regression network: the table's training rows (less the validation split)
/// retrain stage 3, standardised with the network's own record, and the validation rows are
/// the stop rule's probe.
fn open_table_data(
    r: &CompressRequest,
    cfg: &CompressConfig,
    bayes: Network,
    bayes_config: ModelConfig,
) -> Result<Opened, Error> {
    let tabular = bayes_config
        .tabular
        .clone()
        .ok_or_else(|| Error::Usage("a regression network without its input record".into()))?;
    let table = open_model_table(&r.model, &bayes_config, &r.dataset, "the training data")?;
    warn_other_split(r, &bayes_config);
    let (train_data, validation_data) =
        training_split(table.train.data.clone(), r.validation, r.subset)?;
    let loader = table_loader(
        standardized(train_data.as_ref(), &tabular, true)?,
        cfg.retrain.batch_size,
        true,
        cfg.retrain.seed,
        r.workers,
    )?;
    let validation = match r.validation.size {
        0 => None,
        _ => Some(table_loader(
            standardized(validation_data.as_ref(), &tabular, true)?,
            256,
            false,
            0,
            r.workers,
        )?),
    };
    Ok(Opened {
        bayes,
        bayes_config,
        loader,
        validation,
        validation_data,
        stats: None,
    })
}

/// The `--out` that means standard output (as for `swbnn export`).
const STDOUT: &str = "-";

/// Writes the `.swb` `bytes` to `out` atomically (an existing file only with `force`: one
/// that appeared while the command ran is not replaced either), or to standard output for
/// `None`.
fn write_output(out: Option<&Path>, bytes: &[u8], force: bool) -> Result<(), Error> {
    let Some(out) = out else {
        let mut stdout = std::io::stdout().lock();
        return stdout
            .write_all(bytes)
            .and_then(|()| stdout.flush())
            .map_err(|source| Error::Io {
                path: "standard output".into(),
                source,
            });
    };
    bnn_io::write_atomic(out, bytes, bnn_io::Replace::from_force(force)).map_err(|e| {
        if e.is_exists() {
            Error::Usage(format!(
                "--out {e} (it appeared while this command ran; nothing was replaced)"
            ))
        } else {
            swshare::format::file_error(e).into()
        }
    })
}
