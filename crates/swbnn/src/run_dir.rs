//! A reproduction's output directory read back: its setup, each stage's model, their
//! predictions and the sharing plan, for `swbnn plot` and the report.
//!
//! Only the fields of `setup.json` that locate data and models are read, so runs written by
//! older and newer versions of the experiment open alike.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bnn_data::{Dataset, DatasetId, Split};
use bnn_layers::export_bayes;
use bnn_train::{load_model, predict, write_atomic};
use burn::prelude::*;
use models::{Arch, Kind, ModelConfig, Network};
use serde::Deserialize;
use swshare::burn_edges::{from_swb, table_from_tensors};
use swshare::{SharingPlan, WeightTable};

use crate::Error;
use crate::data::{eval_loader, norm_stats, open_ood, open_split, subset};
use crate::figures::{ModelPredictions, method_label};

/// The methods of a run, in table order.
pub const METHODS: [&str; 3] = ["deterministic", "bbb", "2dgbnn"];

/// File name of the 2DGBNN sharing plan in a run directory.
pub const PLAN_FILE: &str = "sharing-plan.bin";

/// Seed of the Monte Carlo passes of the figures, so a figure is the same every time.
pub const FIGURE_SEED: u64 = 7;

/// Writes the sharing plan into the run directory (bincode, written atomically), so the
/// weights figure can show the fates and Gaussians the model was built from.
pub fn save_plan(out_dir: &Path, plan: &SharingPlan) -> Result<(), Error> {
    let bytes = bincode::serde::encode_to_vec(plan, bincode::config::standard())
        .map_err(|e| Error::Other(format!("encoding the sharing plan: {e}")))?;
    Ok(write_atomic(&out_dir.join(PLAN_FILE), &bytes)?)
}

/// Reads a plan written by [`save_plan`].
pub fn load_plan(out_dir: &Path) -> Result<SharingPlan, Error> {
    let path = out_dir.join(PLAN_FILE);
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    let (plan, _): (SharingPlan, usize) =
        bincode::serde::decode_from_slice(&bytes, bincode::config::standard())
            .map_err(|e| Error::Other(format!("{}: not a sharing plan: {e}", path.display())))?;
    plan.validate()
        .map_err(|e| Error::Other(format!("{}: {e}", path.display())))?;
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
    /// The directory.
    pub dir: PathBuf,
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
    setup: serde_json::Value,
}

impl RunDir {
    /// Whether `path` is a run directory (it has a `setup.json`).
    pub fn is_run(path: &Path) -> bool {
        path.join("setup.json").is_file()
    }

    /// Opens a run directory.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        let path = dir.join("setup.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let setup: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::Other(format!("{}: {e}", path.display())))?;
        let f: SetupFields = serde_json::from_value(setup.clone())
            .map_err(|e| Error::Other(format!("{}: {e}", path.display())))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            dataset: f.dataset,
            arch: f.arch,
            data_dir: f.data_dir,
            ood: f.ood,
            test_subset: f.test_subset,
            samples: f.samples,
            workers: f.workers.unwrap_or(2),
            setup,
        })
    }

    fn stage_dir(&self, method: &str) -> PathBuf {
        self.dir.join("stages").join(method)
    }

    /// The `.swb` file of the 2DGBNN stage.
    pub fn swb_path(&self) -> PathBuf {
        self.dir.join(format!("{}-2dgbnn.swb", self.arch.name()))
    }

    /// The architecture of a deterministic or Bayesian stage: its `config.json` if the run
    /// wrote one, else rebuilt from the setup as the experiment builds it.
    fn model_config(&self, method: &str) -> Result<ModelConfig, Error> {
        let path = self.stage_dir(method).join("config.json");
        if path.is_file() {
            let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
            return serde_json::from_str(&text)
                .map_err(|e| Error::Other(format!("{}: {e}", path.display())));
        }
        let (c, h, _) = self.dataset.shape();
        let mut config =
            ModelConfig::for_input(self.arch, Kind::Deterministic, self.dataset.classes(), c, h);
        let bad = |e: serde_json::Error| Error::Other(format!("setup.json: {e}"));
        if let Some(b) = self.setup.get("bayes") {
            config.bayes = serde_json::from_value(b.clone()).map_err(bad)?;
        } else if let Some(e) = self.setup.get("estimator") {
            config.bayes.estimator = serde_json::from_value(e.clone()).map_err(bad)?;
        }
        Ok(match method {
            "deterministic" => config,
            _ => config.with_kind(Kind::Bayesian),
        })
    }

    /// Loads the model of `method` (one of [`METHODS`]) onto `device`.
    pub fn load(&self, method: &str, device: &Device) -> Result<Network, Error> {
        match method {
            "2dgbnn" => {
                let data = swshare::format::load(self.swb_path())
                    .map_err(|e| Error::Other(format!("{}: {e}", self.swb_path().display())))?;
                Ok(from_swb(&data, device)?.0)
            }
            "deterministic" | "bbb" => {
                let config = self.model_config(method)?;
                let path = self.stage_dir(method).join("model.bpk");
                Ok(load_model(&path, config.init(device)?)?)
            }
            other => Err(Error::Other(format!(
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
        load_plan(&self.dir)
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
        let stats = norm_stats(dataset);
        let test_data = subset(open_split(dataset, Split::Test, data_dir)?, subset_n, 2)?;
        let test = eval_loader(stats, test_data.clone(), 256, workers)?;
        let ood = match ood {
            Some((id, dir)) => {
                let data = match dir {
                    Some(dir) => open_ood(id, dir)?,
                    None => open_split(id, Split::Test, data_dir)?,
                };
                let data = subset(data, subset_n, 3)?;
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
            let model = run.load(m, device)?;
            // A deterministic network gives the same answer every pass.
            let s = if *m == "deterministic" { 1 } else { samples };
            loaders.predict(&method_label(m), &model, device, s)
        })
        .collect()
}
