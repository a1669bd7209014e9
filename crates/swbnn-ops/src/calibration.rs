//! Post-hoc calibration: temperature scaling fitted on the validation split and stored with
//! the model.
//!
//! Every method gets one temperature `T` (Guo et al. 2017; [`bnn_metrics::fit_temperature`]):
//! each Monte-Carlo sample's logits (an ensemble member's, a deterministic network's single
//! pass) are divided by `T` before the softmax, the probabilities averaged, and `T` minimises
//! the validation NLL. Accuracy never changes; confidence, NLL, ECE and OOD scores do.
//!
//! Where `T` is kept ([`ModelFile`]):
//! - a `.swb` file (2DGBNN) and a full-BNN file: the file's calibration section
//!   (`docs/swb-format.md`);
//! - a `.qbnn` file: its calibration section;
//! - a model directory (`config.json` and `model.bpk`: the deterministic network, Bayes by
//!   Backprop, an ensemble's stage): [`CALIBRATION_FILE`] beside the weights.
//!
//! A model without a stored `T` is evaluated as it is (`T = 1`); asking for its calibrated
//! evaluation is an error that says how to fit one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bnn_data::{DataLoader, DataSource, Dataset};
use bnn_metrics::{
    ApsCalibration, ConformalCalibration, TemperatureFit, conformal_min_n, validate_temperature,
};
use bnn_models::{ModelConfig, Network};
use bnn_train::{LogitSamples, predict_ensemble_logits, predict_logits};
use serde::{Deserialize, Serialize};
use swshare::format::{self, qbnn};

use crate::Error;
use crate::data::training_split;
use crate::run_record::{RunRecord, SETUP_FILE, read_run_record};
use crate::split::ValidationSplit;
use bnn_train::{ModelDir, QBNN_FILE, read_json, write_json};

pub use bnn_train::CALIBRATION_FILE;

/// A temperature fitted on held-out data, with what the fit saw, and the conformal calibration
/// fitted after it on the same split, if one was asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The fitted temperature (within [`bnn_metrics::TEMPERATURE_RANGE`]).
    pub temperature: f64,
    /// Validation NLL at `T = 1`.
    pub nll_before: f64,
    /// Validation NLL at the fitted temperature (never above `nll_before`).
    pub nll_after: f64,
    /// Whether the temperature lies on a bound of the searched range: a sign of a broken model
    /// or of validation data unlike the training data.
    pub at_bound: bool,
    /// Validation images the temperature was fitted on.
    pub images: usize,
    /// Monte-Carlo passes per image (ensemble members for an ensemble; 1 for a deterministic
    /// network).
    pub samples: usize,
    /// The split-conformal calibration (`swbnn calibrate --conformal LEVEL`), fitted on the
    /// predictive at `temperature`; absent when none was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conformal: Option<ConformalCalibration>,
}

impl Calibration {
    /// The calibration of a fit on `logits` (no conformal calibration).
    pub fn of(fit: &TemperatureFit, logits: &LogitSamples) -> Self {
        Self {
            temperature: fit.temperature,
            nll_before: fit.nll_before,
            nll_after: fit.nll_after,
            at_bound: fit.at_bound,
            images: logits.n,
            samples: logits.samples,
            conformal: None,
        }
    }
}

/// Fits adaptive prediction sets at `level` on `logits` (the validation split's Monte-Carlo
/// logits) at `temperature`: each pass's logits divided by it, the probabilities averaged
/// over passes, then [`ApsCalibration::fit`] with uniforms from `seed`. Why APS: its sets
/// follow the predictive's own ranking and shape (a confident image gets one class, an
/// ambiguous one several), it needs no tuning parameter, and randomised it covers with
/// probability in `[level, level + 1/(n + 1)]` whatever the model (Romano, Sesia & Candes
/// 2020); RAPS adds a size penalty with two parameters that would need their own split.
pub fn fit_aps(
    logits: &LogitSamples,
    temperature: f64,
    level: f64,
    seed: u64,
) -> Result<ConformalCalibration, Error> {
    let predictive = logits.mc()?.predictive(temperature)?;
    let aps = ApsCalibration::fit(predictive.probabilities(), &logits.labels, level, seed)?;
    Ok(ConformalCalibration::aps(aps, temperature))
}

/// The fewest validation images a conformal `level` needs, `ceil(1 / (1 - level))`
/// ([`conformal_min_n`]); a level outside `(0, 1)` is refused.
pub fn check_conformal_level(level: f64) -> Result<usize, Error> {
    conformal_min_n(level).map_err(|_| {
        Error::Usage(format!(
            "--conformal {level}: the coverage level must lie strictly between 0 and 1 \
             (0.9 asks that 90% of prediction sets hold the true class)"
        ))
    })
}

/// Refuses a conformal `level` outside `(0, 1)` and a validation split of fewer images than
/// it needs ([`check_conformal_level`]), before any work.
pub fn check_conformal_split(level: f64, split: ValidationSplit) -> Result<(), Error> {
    let needed = check_conformal_level(level)?;
    if split.size < needed {
        return Err(Error::Usage(format!(
            "--conformal {level} needs at least {needed} validation images (1 / (1 - level)); \
             the validation split holds {}",
            split.size
        )));
    }
    Ok(())
}

/// Fits the temperature of `model` on `validation` with `samples` Monte-Carlo passes (one for
/// a deterministic network). The device's generator draws the weight samples: seed it first
/// for a reproducible fit.
pub fn fit(model: &Network, validation: &DataLoader, samples: usize) -> Result<Calibration, Error> {
    fit_with_conformal(model, validation, samples, None, 0)
}

/// [`fit`], then, with a `conformal` level, adaptive prediction sets on the same Monte-Carlo
/// logits at the fitted temperature ([`fit_aps`], uniforms from `seed`): temperature first.
pub fn fit_with_conformal(
    model: &Network,
    validation: &DataLoader,
    samples: usize,
    conformal: Option<f64>,
    seed: u64,
) -> Result<Calibration, Error> {
    let logits = predict_logits(model, validation, samples)?;
    let mut fit = Calibration::of(&logits.fit_temperature()?, &logits);
    if let Some(level) = conformal {
        fit.conformal = Some(fit_aps(&logits, fit.temperature, level, seed)?);
    }
    Ok(fit)
}

/// Fits one temperature for a deep ensemble on `validation`: each member's logits are divided
/// by it, as the Monte-Carlo samples of a Bayesian model are.
pub fn fit_ensemble(members: &[Network], validation: &DataLoader) -> Result<Calibration, Error> {
    let logits = predict_ensemble_logits(members, validation)?;
    Ok(Calibration::of(&logits.fit_temperature()?, &logits))
}

/// The validation split of the training split `full`: the images [`training_split`] holds out
/// for `split`, as a run, `swbnn train` and `swbnn compress` hold them out. An empty split, or
/// one that leaves no training data, is an error.
pub fn validation_split(
    full: Arc<dyn Dataset>,
    split: ValidationSplit,
) -> Result<Arc<dyn Dataset>, Error> {
    if split.size == 0 {
        return Err(Error::Usage(
            "a temperature is fitted on a validation split, and this one is empty (--validation 0)"
                .into(),
        ));
    }
    check_fit_size(split)?;
    Ok(training_split(full, split, None)?.1)
}

/// Refuses a split of fewer than [`MIN_FIT_IMAGES`] images.
fn check_fit_size(split: ValidationSplit) -> Result<(), Error> {
    if split.size < MIN_FIT_IMAGES {
        return Err(Error::Usage(format!(
            "a temperature is fitted on at least {MIN_FIT_IMAGES} validation images; \
             --validation {} is too few for a fit that does not follow a handful of images",
            split.size
        )));
    }
    Ok(())
}

/// The fewest validation images a stored temperature is fitted on. A fit on one image
/// stored the search's bound (T = 0.05); the presets hold out 5,000.
pub const MIN_FIT_IMAGES: usize = 500;

/// The validation split a model records ([`bnn_models::TrainedOn`]), if it records one.
pub fn recorded_split(config: &ModelConfig) -> Option<ValidationSplit> {
    config.trained_on.as_ref().map(|r| ValidationSplit {
        size: r.validation,
        seed: r.validation_seed,
    })
}

/// Refuses to fit `model`'s calibration on `split` when the model records that it trained on
/// those examples (it held out none, `--validation 0`, or another split, whose examples it may
/// have trained on), and a temperature (`temperature`) on fewer than [`MIN_FIT_IMAGES`]
/// images (a conformal calibration's own bound is [`check_conformal_split`]'s). A model
/// without a record is checked for the size alone.
pub fn check_split_held_out(
    model: &Path,
    config: &ModelConfig,
    split: ValidationSplit,
    temperature: bool,
) -> Result<(), Error> {
    let size = |split| match temperature {
        true => check_fit_size(split),
        false => Ok(()),
    };
    let Some(held_out) = recorded_split(config) else {
        return size(split);
    };
    if held_out.is_none() {
        return Err(Error::Usage(format!(
            "{} was trained with --validation 0, on every training example: a calibration \
             fitted on them would be fitted on its training data. Train with a validation split \
             to calibrate",
            model.display()
        )));
    }
    size(split)?;
    if held_out != split {
        return Err(Error::Usage(format!(
            "{} held out {} validation images (seed {}) and trained on the rest; a split of {} \
             (seed {}) would hold images it trained on. Leave out --validation and \
             --validation-seed to use its own",
            model.display(),
            held_out.size,
            held_out.seed,
            split.size,
            split.seed
        )));
    }
    Ok(())
}

/// The run directory `model` lies in (the nearest directory at or above it holding
/// [`SETUP_FILE`]) and what it records; `None` for a model outside a run.
pub fn run_of(model: &Path) -> Result<Option<(PathBuf, RunRecord)>, Error> {
    let start = if model.is_dir() {
        model
    } else {
        model.parent().unwrap_or(model)
    };
    for dir in start.ancestors() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if dir.join(SETUP_FILE).is_file() {
            return Ok(Some((dir.to_path_buf(), read_run_record(dir)?)));
        }
    }
    Ok(None)
}

/// The validation split of `model`'s temperature fit: its run's ([`run_of`]; a `size` or
/// `seed` given besides must agree with it, and a run that held none out is an error), else
/// `size` (default [`ValidationSplit::DEFAULT_SIZE`], as `swbnn train` holds out) with `seed`
/// (default [`ValidationSplit::SEED`]). Returns the split and the run directory, if any.
pub fn split_for(
    model: &Path,
    dataset: &DataSource,
    size: Option<usize>,
    seed: Option<u64>,
) -> Result<(ValidationSplit, Option<PathBuf>), Error> {
    let Some((dir, setup)) = run_of(model)? else {
        let split = ValidationSplit {
            size: size.unwrap_or(ValidationSplit::DEFAULT_SIZE),
            seed: seed.unwrap_or(ValidationSplit::SEED),
        };
        return Ok((split, None));
    };
    let run = setup.validation;
    let named = dir.join(SETUP_FILE);
    if setup.dataset != *dataset {
        return Err(Error::Usage(format!(
            "{} belongs to the run in {}, which trained on {}, not {dataset}",
            model.display(),
            dir.display(),
            setup.dataset
        )));
    }
    if run.size == 0 {
        return Err(Error::Usage(format!(
            "the run in {} held out no validation split (its {} trained on every training              image), so no image is left to fit a temperature on",
            dir.display(),
            named.display()
        )));
    }
    for (flag, given, recorded) in [
        ("--validation", size.map(|v| v as u64), run.size as u64),
        ("--validation-seed", seed, run.seed),
    ] {
        if given.is_some_and(|g| g != recorded) {
            return Err(Error::Usage(format!(
                "{flag} {} differs from the split of the run in {} ({recorded}, in {}); leave                  it out to use the run's",
                given.unwrap_or_default(),
                dir.display(),
                named.display()
            )));
        }
    }
    Ok((run, Some(dir)))
}

/// Where a model and its temperature are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelFile {
    /// A `.swb` file (a 2DGBNN model).
    Swb(PathBuf),
    /// A `.qbnn` file (a quantised BNN).
    Qbnn(PathBuf),
    /// A model directory with `config.json` and `model.bpk`.
    Dir(ModelDir),
}

impl ModelFile {
    /// The model at `path`: a directory holding [`SWB_FILE`](bnn_train::SWB_FILE) is that file, one holding
    /// [`QBNN_FILE`] that file, any other directory a model directory; a file is a `.qbnn` file
    /// when its first bytes are the `.qbnn` magic, else a `.swb` file (whose reader names
    /// anything else as "not a .swb file").
    pub fn at(path: &Path) -> Self {
        if path.is_dir() {
            let dir = ModelDir::new(path);
            let qbnn = path.join(QBNN_FILE);
            return if dir.swb_path().is_file() {
                ModelFile::Swb(dir.swb_path())
            } else if qbnn.is_file() {
                ModelFile::Qbnn(qbnn)
            } else {
                ModelFile::Dir(dir)
            };
        }
        if starts_with(path, &qbnn::QBNN_MAGIC) {
            ModelFile::Qbnn(path.to_path_buf())
        } else {
            ModelFile::Swb(path.to_path_buf())
        }
    }

    /// The file or directory.
    pub fn path(&self) -> &Path {
        match self {
            ModelFile::Swb(p) | ModelFile::Qbnn(p) => p,
            ModelFile::Dir(d) => d.path(),
        }
    }

    /// The stored temperature; `None` when none was fitted (files written before calibration
    /// existed among them). A stored value that is not finite or outside
    /// [`bnn_metrics::TEMPERATURE_RANGE`] is an error naming the file.
    pub fn temperature(&self) -> Result<Option<f64>, Error> {
        Ok(match self {
            ModelFile::Swb(p) => format::load(p)?.temperature,
            ModelFile::Qbnn(p) => qbnn::load(p)?.temperature,
            ModelFile::Dir(d) => d.read_calibration()?.map(|c| c.temperature),
        })
    }

    /// The stored conformal calibration; `None` when none was fitted. A stored one that fails
    /// [`ConformalCalibration::validate`] is an error naming the file.
    pub fn conformal(&self) -> Result<Option<ConformalCalibration>, Error> {
        Ok(match self {
            ModelFile::Swb(p) => format::load(p)?.conformal,
            ModelFile::Qbnn(p) => qbnn::load(p)?.conformal,
            ModelFile::Dir(d) => d.read_calibration()?.and_then(|c| c.conformal),
        })
    }

    /// Stores `calibration` with the model (its temperature and its conformal calibration,
    /// replacing both: a file holds what the last `swbnn calibrate` fitted), atomically: in the `.swb` or `.qbnn`
    /// file (the model's bytes unchanged), or as [`CALIBRATION_FILE`] in a model directory. A
    /// file in a run's stage directory, whose [`CALIBRATION_FILE`] records the run's fit, gets
    /// that record replaced too, so a resumed run keeps the new temperature.
    pub fn store(&self, calibration: &Calibration) -> Result<(), Error> {
        validate_temperature(calibration.temperature)?;
        // A link is written through: the file it names gets the temperature, the link stays.
        match self {
            ModelFile::Swb(p) => {
                let p = crate::checks::resolve_links("the model", p)?;
                format::set_calibration(
                    &p,
                    Some(calibration.temperature),
                    calibration.conformal.as_ref(),
                )?
            }
            ModelFile::Qbnn(p) => {
                let p = crate::checks::resolve_links("the model", p)?;
                let data = qbnn::QbnnData {
                    temperature: Some(calibration.temperature),
                    conformal: calibration.conformal.clone(),
                    ..qbnn::load(&p)?
                };
                qbnn::save(&p, &data)?;
            }
            ModelFile::Dir(d) => d.write_calibration(calibration)?,
        }
        if let ModelFile::Swb(p) | ModelFile::Qbnn(p) = self
            && let Some(dir) = p.parent().map(ModelDir::new)
            && dir.calibration_path().is_file()
        {
            dir.write_calibration(calibration)?;
        }
        Ok(())
    }

    /// The temperature `eval --calibrated` applies: the stored one, or an error that names the
    /// model and the command that fits one.
    pub fn require_temperature(&self) -> Result<f64, Error> {
        self.temperature()?.ok_or_else(|| {
            Error::Usage(format!(
                "{} holds no fitted temperature; fit one on the validation split with \
                 `swbnn calibrate {} --dataset ...` (or give one with --temperature)",
                self.path().display(),
                self.path().display()
            ))
        })
    }
}

/// Whether the file at `path` starts with `magic` (unreadable or shorter: no).
fn starts_with(path: &Path, magic: &[u8]) -> bool {
    use std::io::Read;
    // Opening a FIFO would block: only a regular file is sniffed (the reader then names
    // anything else).
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = vec![0u8; magic.len()];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head == magic)
}

/// A model directory's fitted calibration ([`CALIBRATION_FILE`]), read and written with its
/// checks.
pub trait StoredCalibration {
    /// The directory's fitted calibration, `None` when it has none; a temperature that is not
    /// finite or outside [`bnn_metrics::TEMPERATURE_RANGE`] is an error naming the file.
    fn read_calibration(&self) -> Result<Option<Calibration>, Error>;
    /// Writes `calibration` as the directory's [`CALIBRATION_FILE`], atomically.
    fn write_calibration(&self, calibration: &Calibration) -> Result<(), Error>;
}

impl StoredCalibration for ModelDir {
    /// The directory's fitted calibration, `None` when it has none; a temperature that is not
    /// finite or outside [`bnn_metrics::TEMPERATURE_RANGE`] is an error naming the file.
    fn read_calibration(&self) -> Result<Option<Calibration>, Error> {
        let path = self.calibration_path();
        if !path.exists() {
            return Ok(None);
        }
        let c: Calibration = read_json(&path)?;
        validate_temperature(c.temperature)
            .map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
        if let Some(conformal) = &c.conformal {
            conformal.validate().map_err(|e| {
                Error::Usage(format!("{}: conformal calibration: {e}", path.display()))
            })?;
        }
        Ok(Some(c))
    }

    /// Writes `calibration` as the directory's [`CALIBRATION_FILE`], atomically.
    fn write_calibration(&self, calibration: &Calibration) -> Result<(), Error> {
        validate_temperature(calibration.temperature)?;
        if let Some(c) = &calibration.conformal {
            c.validate()?;
        }
        std::fs::create_dir_all(self.path()).map_err(|e| Error::io(self.path(), e))?;
        Ok(write_json(&self.calibration_path(), calibration)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_train::SWB_FILE;

    fn calibration(t: f64) -> Calibration {
        Calibration {
            temperature: t,
            conformal: None,
            nll_before: 0.5,
            nll_after: 0.4,
            at_bound: false,
            images: 100,
            samples: 3,
        }
    }

    #[test]
    fn a_model_directory_keeps_its_temperature_beside_the_weights() {
        let dir = tempfile::tempdir().unwrap();
        let file = ModelFile::at(dir.path());
        assert!(matches!(file, ModelFile::Dir(_)));
        assert_eq!(file.temperature().unwrap(), None);
        let e = file.require_temperature().unwrap_err().to_string();
        assert!(
            e.contains("swbnn calibrate") && e.contains("no fitted temperature"),
            "{e}"
        );
        file.store(&calibration(1.5)).unwrap();
        assert_eq!(file.temperature().unwrap(), Some(1.5));
        assert_eq!(
            ModelDir::new(dir.path()).read_calibration().unwrap(),
            Some(calibration(1.5))
        );
        for bad in [0.0, -1.0, f64::NAN, 1e9] {
            assert!(file.store(&calibration(bad)).is_err(), "{bad}");
        }
        assert_eq!(file.temperature().unwrap(), Some(1.5));
        // A damaged file names itself.
        let path = dir.path().join(CALIBRATION_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("1.5", "-3.0")).unwrap();
        let e = file.temperature().unwrap_err().to_string();
        assert!(
            e.contains(CALIBRATION_FILE) && e.contains("temperature"),
            "{e}"
        );
    }

    /// A `.swb` and a `.qbnn` file keep the temperature in the file, the model unchanged.
    #[test]
    fn model_files_keep_their_temperature_inside() {
        use swshare::format::qbnn::{QTensor, QValues, QbnnData};
        use swshare::format::{LayerShape, SaveOptions, SharedModelData};
        use swshare::{OutlierCause, WeightFate};
        let dir = tempfile::tempdir().unwrap();
        let swb = dir.path().join("m.swb");
        let model = SharedModelData {
            arch: "{}".into(),
            codebook_mu: vec![-0.1, 0.1],
            codebook_rho: vec![-5.0, -4.0],
            layers: vec![LayerShape {
                path: "fc.weight".into(),
                shape: vec![2],
            }],
            fates: vec![
                WeightFate::Shared(1),
                WeightFate::Outlier(OutlierCause::Gradient),
            ],
            ellipses: vec![],
            outlier_mu: vec![0.7],
            outlier_rho: vec![-3.0],
            outlier_causes: vec![OutlierCause::Gradient],
            unshared: vec![],
            temperature: None,
            conformal: None,
        };
        format::save(&swb, &model, &SaveOptions::default()).unwrap();
        let file = ModelFile::at(&swb);
        assert_eq!(file, ModelFile::Swb(swb.clone()));
        assert_eq!(file.temperature().unwrap(), None);
        file.store(&calibration(2.25)).unwrap();
        assert_eq!(file.temperature().unwrap(), Some(2.25));
        assert_eq!(
            format::load(&swb).unwrap(),
            SharedModelData {
                temperature: Some(2.25),
                ..model
            }
        );

        let q = dir.path().join("m.qbnn");
        let data = QbnnData {
            arch: "{}".into(),
            sigma_bits: 4,
            tensors: vec![QTensor {
                path: "fc.bias".into(),
                shape: vec![2],
                values: QValues::F32(vec![0.5, -0.5]),
            }],
            folded_norms: vec![],
            temperature: None,
            conformal: None,
        };
        qbnn::save(&q, &data).unwrap();
        let file = ModelFile::at(&q);
        assert_eq!(file, ModelFile::Qbnn(q.clone()));
        assert_eq!(file.temperature().unwrap(), None);
        file.store(&calibration(0.75)).unwrap();
        assert_eq!(
            qbnn::load(&q).unwrap(),
            QbnnData {
                temperature: Some(0.75),
                ..data
            }
        );
        assert!(file.store(&calibration(f64::NAN)).is_err());
        assert_eq!(file.temperature().unwrap(), Some(0.75));
        // In a stage directory that records a fit, the record follows the file.
        let dir_model = ModelDir::new(dir.path());
        dir_model.write_calibration(&calibration(3.0)).unwrap();
        ModelFile::at(&swb).store(&calibration(1.75)).unwrap();
        assert_eq!(
            dir_model.read_calibration().unwrap(),
            Some(calibration(1.75))
        );
    }

    #[test]
    fn the_file_kind_is_told_by_directory_content_and_magic() {
        let dir = tempfile::tempdir().unwrap();
        let q = dir.path().join("m.bin");
        std::fs::write(&q, qbnn::QBNN_MAGIC).unwrap();
        assert_eq!(ModelFile::at(&q), ModelFile::Qbnn(q.clone()));
        let s = dir.path().join("m.swb");
        std::fs::write(&s, b"SWBNN").unwrap();
        assert_eq!(ModelFile::at(&s), ModelFile::Swb(s.clone()));
        std::fs::write(dir.path().join(SWB_FILE), b"").unwrap();
        assert_eq!(
            ModelFile::at(dir.path()),
            ModelFile::Swb(dir.path().join(SWB_FILE))
        );
    }
}
