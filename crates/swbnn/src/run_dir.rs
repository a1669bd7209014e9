//! A reproduction's output directory read back: its setup, each stage's model, their
//! predictions, the sharing plan and the corruption results, for `swbnn plot` and the report.
//!
//! A single-seed run keeps its stages in `<dir>/stages/<method>/`; a multi-seed run (`--seeds
//! N`) keeps one such tree per seed in `<dir>/seed-<i>/` and the mean tables in `<dir>`. Only
//! the fields of `setup.json` that locate data and models are read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bnn_data::{Dataset, DatasetId, Split};
use bnn_layers::export_bayes;
use bnn_metrics::{MetricsError, Predictive, Probabilities};
use bnn_models::{Arch, ModelConfig, Network};
use bnn_train::{Predictions, load_model, predict, write_atomic};
use burn::prelude::*;
use serde::{Deserialize, Serialize};
use swshare::burn_edges::{from_swb, table_from_tensors};
use swshare::{SharingPlan, WeightTable};

use crate::Error;
use crate::data::{eval_loader, open_ood, open_split, subset, subset_at_most};
use crate::experiment::{CorruptionRow, Row, SeedSummary};
use crate::figures::{CleanMetrics, ModelPredictions, method_label};

/// The methods of a run, in table order.
pub const METHODS: [&str; 3] = ["deterministic", "bbb", "2dgbnn"];

/// File name of the 2DGBNN sharing plan in the 2DGBNN stage directory.
pub const PLAN_FILE: &str = "sharing-plan.bin";

/// Seed of the Monte Carlo passes of the figures, so a figure is the same every time.
pub const FIGURE_SEED: u64 = 7;

/// File name of a stage's evaluation predictions (test and OOD sets) in its directory.
pub const PREDICTIONS_FILE: &str = "predictions.bin";

/// Largest predictions file read back: 1 GiB (ImageNet's 50,000 x 1,000 probabilities take
/// 200 MB), so a damaged length field cannot ask for more.
const PREDICTIONS_LIMIT: usize = 1 << 30;

#[derive(Serialize, Deserialize)]
struct StoredPredictive {
    classes: usize,
    probabilities: Vec<f32>,
    entropy: Vec<f64>,
    mutual_information: Option<Vec<f64>>,
    n_samples: usize,
}

#[derive(Serialize, Deserialize)]
struct StoredPredictions {
    samples: usize,
    test: (Vec<u32>, StoredPredictive),
    ood: Option<(Vec<u32>, StoredPredictive)>,
}

fn store(p: &Predictions) -> (Vec<u32>, StoredPredictive) {
    let q = &p.predictive;
    (
        p.labels.clone(),
        StoredPredictive {
            classes: q.probabilities().classes(),
            probabilities: q.probabilities().as_slice().to_vec(),
            entropy: q.entropy().to_vec(),
            mutual_information: q.mutual_information().map(<[f64]>::to_vec),
            n_samples: q.n_samples(),
        },
    )
}

fn restore((labels, s): (Vec<u32>, StoredPredictive)) -> Result<Predictions, MetricsError> {
    let n = labels.len();
    let probabilities = Probabilities::new(s.probabilities, n, s.classes)?;
    let predictive =
        Predictive::from_parts(probabilities, s.entropy, s.mutual_information, s.n_samples)?;
    Ok(Predictions { predictive, labels })
}

/// Writes a prediction set as NumPy arrays `<dir>/<prefix>-<what>.npy`, each atomically, for
/// tools outside Rust (NumPy, scikit-learn, Fortuna, MAPIE):
/// `probabilities` (`float32`, `[n, classes]`, the Monte Carlo mean of the softmax), `labels`
/// (`int64`, `[n]`), `entropy` (`float64`, `[n]`, of the mean, nats) and, when the set was
/// sampled, `mutual-information` (`float64`, `[n]`, nats).
pub fn save_predictions_npy(dir: &Path, prefix: &str, p: &Predictions) -> Result<(), Error> {
    use gmm_minibatch::npy::write;
    let q = &p.predictive;
    let n = p.labels.len();
    let file = |what: &str| dir.join(format!("{prefix}-{what}.npy"));
    write(
        file("probabilities"),
        &[n, q.probabilities().classes()],
        q.probabilities().as_slice(),
    )?;
    let labels: Vec<i64> = p.labels.iter().map(|&l| i64::from(l)).collect();
    write(file("labels"), &[n], &labels)?;
    write(file("entropy"), &[n], q.entropy())?;
    if let Some(mi) = q.mutual_information() {
        write(file("mutual-information"), &[n], mi)?;
    }
    Ok(())
}

/// Keeps a stage's evaluation predictions (`samples` Monte Carlo samples) in `dir`
/// ([`PREDICTIONS_FILE`], bincode, written atomically), so the report's figures show the
/// table's own predictions instead of drawing new ones; and as NumPy arrays
/// ([`save_predictions_npy`], prefixes `test` and `ood`).
pub fn save_predictions(
    dir: &Path,
    samples: usize,
    test: &Predictions,
    ood: Option<&Predictions>,
) -> Result<(), Error> {
    let stored = StoredPredictions {
        samples,
        test: store(test),
        ood: ood.map(store),
    };
    let bytes = bincode::serde::encode_to_vec(&stored, bincode::config::standard())
        .map_err(Error::PredictionsEncode)?;
    save_predictions_npy(dir, "test", test)?;
    if let Some(ood) = ood {
        save_predictions_npy(dir, "ood", ood)?;
    }
    Ok(write_atomic(&dir.join(PREDICTIONS_FILE), &bytes)?)
}

/// The predictions [`save_predictions`] kept in `dir`, if there are some for `samples`
/// samples: `Ok(None)` without a file or for another number of samples; an error naming the
/// file when it is damaged.
pub fn load_predictions(
    dir: &Path,
    samples: usize,
) -> Result<Option<(Predictions, Option<Predictions>)>, Error> {
    let path = dir.join(PREDICTIONS_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let bad = |e: Box<dyn std::error::Error + Send + Sync>| Error::Predictions {
        path: path.display().to_string(),
        source: e,
    };
    let config = bincode::config::standard().with_limit::<PREDICTIONS_LIMIT>();
    let (stored, used): (StoredPredictions, usize) =
        bincode::serde::decode_from_slice(&bytes, config).map_err(|e| bad(Box::new(e)))?;
    if used != bytes.len() {
        return Err(bad(format!("{} trailing bytes", bytes.len() - used).into()));
    }
    if stored.samples != samples {
        return Ok(None);
    }
    let test = restore(stored.test).map_err(|e| bad(Box::new(e)))?;
    let ood = stored
        .ood
        .map(restore)
        .transpose()
        .map_err(|e| bad(Box::new(e)))?;
    Ok(Some((test, ood)))
}

/// Writes the sharing plan into `dir` (bincode, written atomically), so the weights figure can
/// show the fates and Gaussians the model was built from.
pub fn save_plan(dir: &Path, plan: &SharingPlan) -> Result<(), Error> {
    let bytes = bincode::serde::encode_to_vec(plan, bincode::config::standard())
        .map_err(Error::PlanEncode)?;
    Ok(write_atomic(&dir.join(PLAN_FILE), &bytes)?)
}

/// Reads a plan written by [`save_plan`].
pub fn load_plan(dir: &Path) -> Result<SharingPlan, Error> {
    let path = dir.join(PLAN_FILE);
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    let (plan, _): (SharingPlan, usize) =
        bincode::serde::decode_from_slice(&bytes, bincode::config::standard())
            .map_err(|e| Error::plan(&path, e))?;
    plan.validate().map_err(|e| Error::plan(&path, e))?;
    Ok(plan)
}

#[derive(Deserialize)]
struct SetupFields {
    dataset: DatasetId,
    arch: Arch,
    #[serde(default)]
    data_dir: Option<PathBuf>,
    #[serde(default)]
    ood: Option<(DatasetId, PathBuf)>,
    #[serde(default)]
    test_subset: Option<usize>,
    samples: usize,
    #[serde(default)]
    workers: Option<usize>,
}

/// A run directory written by `cargo xtask reproduce`.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// The directory with `setup.json` and the tables (the mean tables of a multi-seed run).
    pub dir: PathBuf,
    /// The directory with the models: `dir` itself, or one seed's `dir/seed-<i>`.
    pub models: PathBuf,
    /// The seed directory chosen, if any: its tables replace `dir`'s.
    pub seed: Option<usize>,
    /// In-distribution data set.
    pub dataset: DatasetId,
    /// Architecture.
    pub arch: Arch,
    /// Where the data are.
    pub data_dir: Option<PathBuf>,
    /// OOD data set and its directory.
    pub ood: Option<(DatasetId, PathBuf)>,
    /// Test subset used by the run.
    pub test_subset: Option<usize>,
    /// Monte Carlo samples of the run's evaluation.
    pub samples: usize,
    workers: usize,
}

impl RunDir {
    /// Whether `path` is a run directory (it has a `setup.json`) or one seed's directory of a
    /// multi-seed run (`seed-<i>` with `stages/`, beside the run's `setup.json`).
    pub fn is_run(path: &Path) -> bool {
        path.join("setup.json").is_file() || Self::seed_of(path).is_some()
    }

    /// `(run directory, i)` when `path` is the `seed-<i>` directory of a multi-seed run.
    fn seed_of(path: &Path) -> Option<(PathBuf, usize)> {
        let i = path
            .file_name()?
            .to_str()?
            .strip_prefix("seed-")?
            .parse()
            .ok()?;
        let parent = path.parent()?;
        (path.join("stages").is_dir() && parent.join("setup.json").is_file())
            .then(|| (parent.to_path_buf(), i))
    }

    /// Opens a run directory, or one seed's directory of a multi-seed run. The models of a
    /// multi-seed run are those of `seed` (default 0); `seed` on a single-seed run must be
    /// `None` or 0.
    pub fn open(path: &Path, seed: Option<usize>) -> Result<Self, Error> {
        let (dir, seed) = match Self::seed_of(path) {
            Some((parent, i)) if !path.join("setup.json").is_file() => {
                if seed.is_some_and(|s| s != i) {
                    return Err(Error::Usage(format!(
                        "{}: the directory of seed {i}, not of seed {}",
                        path.display(),
                        seed.unwrap_or_default()
                    )));
                }
                (parent, Some(i))
            }
            _ => (path.to_path_buf(), seed),
        };
        let models = if dir.join("stages").is_dir() {
            if seed.is_some_and(|s| s != 0) {
                return Err(Error::Usage(format!(
                    "{}: a single-seed run has no seed {}",
                    dir.display(),
                    seed.unwrap_or_default()
                )));
            }
            dir.clone()
        } else {
            let s = dir.join(format!("seed-{}", seed.unwrap_or(0)));
            if !s.join("stages").is_dir() {
                return Err(Error::Usage(format!(
                    "{}: no stages/ (a single-seed run) and no {} (a multi-seed run); is the \
                     run finished?",
                    dir.display(),
                    s.display()
                )));
            }
            s
        };
        let path = dir.join("setup.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let f: SetupFields = serde_json::from_str(&text).map_err(|source| Error::Parse {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Self {
            dir,
            models,
            seed,
            dataset: f.dataset,
            arch: f.arch,
            data_dir: f.data_dir,
            ood: f.ood,
            test_subset: f.test_subset,
            samples: f.samples,
            workers: f.workers.unwrap_or(2),
        })
    }

    /// The directory of a method's stage.
    pub fn stage_dir(&self, method: &str) -> PathBuf {
        self.models.join("stages").join(method)
    }

    /// The `.swb` file of the 2DGBNN stage.
    pub fn swb_path(&self) -> PathBuf {
        self.stage_dir("2dgbnn").join("model.swb")
    }

    /// The architecture a stage saved beside its checkpoint.
    fn model_config(&self, method: &str) -> Result<ModelConfig, Error> {
        let path = self.stage_dir(method).join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        serde_json::from_str(&text).map_err(|source| Error::Parse {
            path: path.display().to_string(),
            source,
        })
    }

    /// Loads the model of `method` (one of [`METHODS`]) onto `device`.
    pub fn load(&self, method: &str, device: &Device) -> Result<Network, Error> {
        match method {
            "2dgbnn" => Ok(from_swb(&swshare::format::load(self.swb_path())?, device)?.0),
            "deterministic" | "bbb" => {
                let config = self.model_config(method)?;
                let path = self.stage_dir(method).join("model.bpk");
                Ok(load_model(&path, config.init(device)?)?)
            }
            other => Err(Error::Usage(format!(
                "unknown method {other:?} (deterministic, bbb or 2dgbnn)"
            ))),
        }
    }

    /// The Bayes-by-Backprop posterior the sharing plan was built from, as a weight table.
    pub fn bbb_table(&self, device: &Device) -> Result<WeightTable, Error> {
        let bayes = self.load("bbb", device)?;
        Ok(table_from_tensors(&export_bayes(&bayes, None))?)
    }

    /// The sharing plan the run saved.
    pub fn plan(&self) -> Result<SharingPlan, Error> {
        load_plan(&self.stage_dir("2dgbnn"))
    }

    /// The directory whose tables the figures show: the chosen seed's, else the run's (the
    /// means over seeds of a multi-seed run).
    fn tables_dir(&self) -> &Path {
        if self.seed.is_some() {
            &self.models
        } else {
            &self.dir
        }
    }

    /// Each method's clean test-set metrics from `table.json` (means over seeds for a
    /// multi-seed run unless a seed was chosen), in table order.
    pub fn clean_metrics(&self) -> Result<Vec<CleanMetrics>, Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Table {
            Rows(Vec<Row>),
            Seeds { summaries: Vec<SeedSummary> },
        }
        let path = self.tables_dir().join("table.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let table: Table = serde_json::from_str(&text).map_err(|source| Error::Parse {
            path: path.display().to_string(),
            source,
        })?;
        Ok(match table {
            Table::Rows(rows) => rows
                .into_iter()
                .map(|r| CleanMetrics {
                    method: r.method,
                    accuracy: r.accuracy,
                    nll: r.nll,
                    ece: r.ece,
                })
                .collect(),
            Table::Seeds { summaries } => summaries
                .into_iter()
                .map(|s| CleanMetrics {
                    method: s.method,
                    accuracy: s.accuracy.mean,
                    nll: s.nll.mean,
                    ece: s.ece.mean,
                })
                .collect(),
        })
    }

    /// The corruption results of `corruptions.json` (means over seeds for a multi-seed run
    /// unless a seed was chosen); `None` when the run evaluated no corruptions.
    pub fn corruption_rows(&self) -> Result<Option<Vec<CorruptionRow>>, Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Corruptions {
            Rows(Vec<CorruptionRow>),
            Seeds { means: Vec<CorruptionRow> },
        }
        let path = self.tables_dir().join("corruptions.json");
        if !path.is_file() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let c: Corruptions = serde_json::from_str(&text).map_err(|source| Error::Parse {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Some(match c {
            Corruptions::Rows(r) | Corruptions::Seeds { means: r } => r,
        }))
    }

    /// Test and OOD loaders as the experiment builds them.
    pub fn loaders(&self) -> Result<Loaders, Error> {
        Loaders::new(
            self.dataset,
            self.data_dir.as_deref(),
            self.ood
                .as_ref()
                .map(|(id, dir)| (*id, Some(dir.as_path()))),
            self.test_subset,
            self.workers,
        )
    }
}

/// The evaluation data of a figure.
pub struct Loaders {
    /// In-distribution data set.
    pub dataset: DatasetId,
    /// Test-set loader.
    pub test: bnn_data::DataLoader,
    /// The raw test set (for corrupted copies).
    pub test_data: Arc<dyn Dataset>,
    /// OOD data set and loader.
    pub ood: Option<(DatasetId, bnn_data::DataLoader)>,
    /// Loader threads.
    pub workers: usize,
}

impl Loaders {
    /// The test split of `dataset` (a stratified `subset` if given) and an OOD set: a
    /// directory as `swbnn eval --ood-dir` takes, or without one the OOD data set's test split
    /// found like the training data.
    pub fn new(
        dataset: DatasetId,
        data_dir: Option<&Path>,
        ood: Option<(DatasetId, Option<&Path>)>,
        subset_n: Option<usize>,
        workers: usize,
    ) -> Result<Self, Error> {
        let stats = dataset.norm_stats();
        let test_data = subset(
            open_split(dataset, Split::Test, data_dir)?,
            subset_n,
            2,
            "the test set",
        )?;
        let test = eval_loader(stats, test_data.clone(), 256, workers)?;
        let ood = match ood {
            Some((id, dir)) => {
                let data = match dir {
                    Some(dir) => open_ood(id, dir)?,
                    None => open_split(id, Split::Test, data_dir)?,
                };
                let data = subset_at_most(data, subset_n, 3)?;
                Some((id, eval_loader(stats, data, 256, workers)?))
            }
            None => None,
        };
        Ok(Self {
            dataset,
            test,
            test_data,
            ood,
            workers,
        })
    }

    /// Whether kept predictions cover these loaders' data: as many test examples with the same
    /// labels, and OOD predictions exactly when there is an OOD set, of its size.
    pub fn fit(&self, test: &Predictions, ood: Option<&Predictions>) -> bool {
        let same_test = test.labels.len() == self.test.dataset().len()
            && (0..test.labels.len())
                .all(|i| self.test.dataset().label(i).ok() == Some(test.labels[i]));
        let same_ood = match (&self.ood, ood) {
            (None, None) => true,
            (Some((_, loader)), Some(p)) => p.labels.len() == loader.dataset().len(),
            _ => false,
        };
        same_test && same_ood
    }

    /// Predictions of `model` on the test and OOD sets with `samples` Monte Carlo passes,
    /// seeded with [`FIGURE_SEED`].
    pub fn predict(
        &self,
        label: &str,
        model: &Network,
        device: &Device,
        samples: usize,
    ) -> Result<ModelPredictions, Error> {
        device.seed(FIGURE_SEED);
        let test = predict(model, &self.test, samples)?;
        let ood = match &self.ood {
            Some((_, loader)) => Some(predict(model, loader, samples)?),
            None => None,
        };
        Ok(ModelPredictions {
            label: label.to_string(),
            test,
            ood,
        })
    }
}

/// Predictions of every method of a run (those whose models exist), in table order.
pub fn run_predictions(
    run: &RunDir,
    loaders: &Loaders,
    methods: &[&str],
    device: &Device,
    samples: usize,
) -> Result<Vec<ModelPredictions>, Error> {
    methods
        .iter()
        .map(|m| {
            // A deterministic network gives the same answer every pass.
            let s = if *m == "deterministic" { 1 } else { samples };
            let label = method_label(m);
            if let Some((test, ood)) = load_predictions(&run.stage_dir(m), s)?
                && loaders.fit(&test, ood.as_ref())
            {
                return Ok(ModelPredictions { label, test, ood });
            }
            let model = run.load(m, device)?;
            loaders.predict(&label, &model, device, s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_metrics::McPredictive;

    fn predictions(samples: usize) -> Predictions {
        let mut mc = McPredictive::new(3, 2).unwrap();
        for s in 0..samples {
            let x = s as f32;
            mc.push_logits(&[x, 1.0, 0.0, x, 2.0, -x]).unwrap();
        }
        Predictions {
            predictive: mc.finish().unwrap(),
            labels: vec![0, 1, 1],
        }
    }

    #[test]
    fn kept_predictions_round_trip_for_their_number_of_samples_only() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            load_predictions(dir.path(), 4).unwrap().is_none(),
            "no file"
        );
        let (test, ood) = (predictions(4), predictions(4));
        save_predictions(dir.path(), 4, &test, Some(&ood)).unwrap();
        let (t, o) = load_predictions(dir.path(), 4).unwrap().unwrap();
        assert_eq!((t.predictive, t.labels), (test.predictive, test.labels));
        assert_eq!(o.unwrap().predictive, ood.predictive);
        assert!(load_predictions(dir.path(), 30).unwrap().is_none());

        let path = dir.path().join(PREDICTIONS_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.push(0);
        std::fs::write(&path, &bytes).unwrap();
        let e = load_predictions(dir.path(), 4).unwrap_err().to_string();
        assert!(
            e.contains("trailing") && e.contains(PREDICTIONS_FILE),
            "{e}"
        );
    }

    /// The kept predictions are also NumPy arrays: probabilities `<f4 [n, classes]`, labels
    /// `<i8 [n]`, entropy and mutual information `<f8 [n]`, for the test and the OOD set.
    #[test]
    fn kept_predictions_are_also_npy_arrays() {
        use gmm_minibatch::npy::read_f32;
        let dir = tempfile::tempdir().unwrap();
        let (test, ood) = (predictions(4), predictions(2));
        save_predictions(dir.path(), 4, &test, Some(&ood)).unwrap();
        for (prefix, p) in [("test", &test), ("ood", &ood)] {
            let file = |w: &str| dir.path().join(format!("{prefix}-{w}.npy"));
            let probs = read_f32(file("probabilities")).unwrap();
            assert_eq!(probs.shape, vec![3, 2]);
            assert_eq!(probs.data, p.predictive.probabilities().as_slice());
            let entropy = read_f32(file("entropy")).unwrap();
            let want: Vec<f32> = p.predictive.entropy().iter().map(|&e| e as f32).collect();
            assert_eq!(entropy.data, want);
            let mi = read_f32(file("mutual-information")).unwrap();
            assert_eq!(mi.shape, vec![3]);
            let labels = std::fs::read(file("labels")).unwrap();
            assert!(String::from_utf8_lossy(&labels[..64]).contains("'<i8'"));
            let payload: Vec<i64> = labels[labels.len() - 24..]
                .chunks(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                .collect();
            assert_eq!(payload, vec![0, 1, 1]);
        }
    }
}
