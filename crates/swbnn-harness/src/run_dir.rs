//! A reproduction's output directory read back: its setup, each stage's model, their
//! predictions, the sharing plan and the corruption results, for `swbnn plot` and the report.
//!
//! A single-seed run keeps its stages in `<dir>/stages/<method>/`; a multi-seed run (`--seeds
//! N`) keeps one such tree per seed in `<dir>/seed-<i>/` and the mean tables in `<dir>`. Only
//! the fields of `setup.json` that locate data and models are read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bnn_data::{DataSource, Dataset, NormStats, Split};
use bnn_layers::export_bayes;
use bnn_models::ModelConfig;
use bnn_models::Network;
use bnn_train::{Predictions, predict};
use burn::prelude::*;
use swshare::burn_edges::table_from_tensors;
use swshare::{SharingPlan, WeightTable};

use crate::Error;
use crate::data::{
    eval_loader, model_images, model_norm, open_ood, open_preset_ood, open_source, open_user_ood,
    subset, subset_at_most,
};
use crate::figures::{CleanMetrics, ModelPredictions};
use crate::method::Method;
use crate::setup::Setup;
use crate::store::{self, ModelDir, StageDir, StoredTable};

/// Seed of the Monte Carlo passes of the figures, so a figure is the same every time.
pub const FIGURE_SEED: u64 = 7;

/// A run directory written by `cargo xtask reproduce`.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// The directory with `setup.json` and the tables (the mean tables of a multi-seed run).
    pub dir: PathBuf,
    /// The directory with the models: `dir` itself, or one seed's `dir/seed-<i>`.
    pub models: PathBuf,
    /// The seed directory chosen, if any: its tables replace `dir`'s.
    pub seed: Option<usize>,
    /// The setup the run was made with (its `setup.json`).
    pub setup: Setup,
}

impl RunDir {
    /// Whether `path` is a run directory (it has a `setup.json`) or one seed's directory of a
    /// multi-seed run (`seed-<i>` with `stages/`, beside the run's `setup.json`).
    pub fn is_run(path: &Path) -> bool {
        path.join(store::SETUP_FILE).is_file() || Self::seed_of(path).is_some()
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
        (store::stages_dir(path).is_dir() && parent.join(store::SETUP_FILE).is_file())
            .then(|| (parent.to_path_buf(), i))
    }

    /// Opens a run directory, or one seed's directory of a multi-seed run. The models of a
    /// multi-seed run are those of `seed` (default 0); `seed` on a single-seed run must be
    /// `None` or 0.
    pub fn open(path: &Path, seed: Option<usize>) -> Result<Self, Error> {
        let (dir, seed) = match Self::seed_of(path) {
            Some((parent, i)) if !path.join(store::SETUP_FILE).is_file() => {
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
        let models = if store::stages_dir(&dir).is_dir() {
            if seed.is_some_and(|s| s != 0) {
                return Err(Error::Usage(format!(
                    "{}: a single-seed run has no seed {}",
                    dir.display(),
                    seed.unwrap_or_default()
                )));
            }
            dir.clone()
        } else {
            let s = store::seed_dir(&dir, seed.unwrap_or(0) as u64);
            if !store::stages_dir(&s).is_dir() {
                return Err(Error::Usage(format!(
                    "{}: no stages/ (a single-seed run) and no {} (a multi-seed run); is the \
                     run finished?",
                    dir.display(),
                    s.display()
                )));
            }
            s
        };
        let setup = store::read_setup(&dir)?;
        Ok(Self {
            dir,
            models,
            seed,
            setup,
        })
    }

    /// The stage directory of `method`.
    pub fn stage(&self, method: Method) -> StageDir {
        StageDir::existing(store::stage_path(&self.models, method.name()))
    }

    /// The `.swb` file of the 2DGBNN stage.
    pub fn swb_path(&self) -> PathBuf {
        self.stage(Method::Gbnn2d).model().swb_path()
    }

    /// Loads the model of `method` (one of [`Method::MAIN`]) onto `device`.
    pub fn load(&self, method: Method, device: &Device) -> Result<Network, Error> {
        let dir = ModelDir::new(store::stage_path(&self.models, method.name()));
        match method {
            Method::Gbnn2d => Ok(store::load_swb(&dir, device)?.0),
            Method::Deterministic | Method::Bbb => Ok(dir.load(device)?.0),
            other => Err(Error::Usage(format!(
                "{other} is not a method of a run's main table (deterministic, bbb or 2dgbnn)"
            ))),
        }
    }

    /// The Bayes-by-Backprop posterior the sharing plan was built from, as a weight table.
    pub fn bbb_table(&self, device: &Device) -> Result<WeightTable, Error> {
        let bayes = self.load(Method::Bbb, device)?;
        Ok(table_from_tensors(&export_bayes(&bayes, None))?)
    }

    /// The sharing plan the run saved.
    pub fn plan(&self) -> Result<SharingPlan, Error> {
        self.stage(Method::Gbnn2d).load_plan()
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
        Ok(match store::read_table(self.tables_dir())? {
            StoredTable::Rows(rows) => rows
                .into_iter()
                .map(|r| CleanMetrics {
                    method: r.method.name().to_string(),
                    accuracy: r.accuracy,
                    nll: r.nll,
                    ece: r.ece,
                })
                .collect(),
            StoredTable::Seeds(summaries) => summaries
                .into_iter()
                .map(|s| CleanMetrics {
                    method: s.method.name().to_string(),
                    accuracy: s.accuracy.mean,
                    nll: s.nll.mean,
                    ece: s.ece.mean,
                })
                .collect(),
        })
    }

    /// The corruption results of `corruptions.json` (means over seeds for a multi-seed run
    /// unless a seed was chosen); `None` when the run evaluated no corruptions.
    pub fn corruption_rows(&self) -> Result<Option<Vec<crate::results::CorruptionRow>>, Error> {
        store::read_corruptions(self.tables_dir())
    }

    /// Test and OOD loaders as the experiment builds them.
    pub fn loaders(&self) -> Result<Loaders, Error> {
        let s = &self.setup;
        let config = self.data_config()?;
        // A held-out run subsets the test split after holding the classes out, as the
        // experiment does.
        let held_out = &s.held_out_classes;
        let subset_first = s.test_subset.filter(|_| held_out.is_empty());
        Loaders::new(
            &s.dataset,
            s.data_dir.as_deref(),
            s.ood
                .as_ref()
                .map(|(id, dir)| ((*id).into(), Some(dir.as_path()))),
            subset_first,
            s.workers,
            config.as_ref(),
        )?
        .holding_out(held_out, s.test_subset)
    }

    /// The names of the classes the run's models learned, in their label order: a held-out
    /// run's models learned the classes not held out, relabelled from 0.
    pub fn class_names(&self) -> Result<Vec<String>, Error> {
        self.names_where(false)
    }

    /// The names of the classes a held-out run holds out (its OOD set), in label order; empty
    /// for any other run.
    pub fn held_out_class_names(&self) -> Result<Vec<String>, Error> {
        self.names_where(true)
    }

    /// The data set's class names whose being held out is `held`.
    fn names_where(&self, held: bool) -> Result<Vec<String>, Error> {
        let held_out = &self.setup.held_out_classes;
        // A preset's count is its whole set's; a user's data set's is what its models learned.
        let all_classes = match self.setup.dataset.preset() {
            Some(_) => self.classes()?,
            None => self.classes()? + held_out.len(),
        };
        let all = crate::figures::class_names(&self.setup.dataset, all_classes)?;
        Ok(all
            .into_iter()
            .enumerate()
            .filter(|(i, _)| held_out.contains(&(*i as u32)) == held)
            .map(|(_, name)| name)
            .collect())
    }

    /// How the run's models read their data, for a user's data set (`None` for a preset,
    /// whose shape and normalisation are the preset's): the deterministic stage's
    /// `config.json`, which records the input shape and the normalisation measured on the
    /// training examples.
    pub fn data_config(&self) -> Result<Option<ModelConfig>, Error> {
        if self.setup.dataset.preset().is_some() {
            return Ok(None);
        }
        Ok(Some(
            self.stage(Method::Deterministic).model().read_config()?,
        ))
    }

    /// The number of classes of the run's models: the preset's, or what a user's data set's
    /// models were made with ([`RunDir::data_config`]).
    pub fn classes(&self) -> Result<usize, Error> {
        Ok(match (self.setup.dataset.preset(), self.data_config()?) {
            (Some(id), _) => id.classes(),
            (None, Some(config)) => config.classes,
            (None, None) => 0,
        })
    }
}

/// The evaluation data of a figure.
pub struct Loaders {
    /// In-distribution data set.
    pub dataset: DataSource,
    /// Test-set loader.
    pub test: bnn_data::DataLoader,
    /// The raw test set (for corrupted copies).
    pub test_data: Arc<dyn Dataset>,
    /// Its normalisation (the model's, for a model file).
    pub stats: NormStats,
    /// OOD data set and loader.
    pub ood: Option<(DataSource, bnn_data::DataLoader)>,
    /// The folder a preset OOD set was read from (a user's set is named by its source).
    pub ood_dir: Option<PathBuf>,
    /// Loader threads.
    pub workers: usize,
}

impl Loaders {
    /// The test split of `dataset` (a stratified `subset` if given) and an OOD set: for a
    /// preset, a directory as `swbnn eval --ood-dir` takes, or without one its test split
    /// found like the training data; a user's data set as `eval --ood` reads it. For the model
    /// of `config` (a model file, not a run), the images are shaped and normalised as it
    /// records.
    pub fn new(
        dataset: &DataSource,
        data_dir: Option<&Path>,
        ood: Option<(DataSource, Option<&Path>)>,
        subset_n: Option<usize>,
        workers: usize,
        config: Option<&ModelConfig>,
    ) -> Result<Self, Error> {
        let stats = match (config, dataset.preset()) {
            (Some(c), _) => model_norm(c, dataset)?,
            (None, Some(id)) => id.norm_stats(),
            (None, None) => {
                return Err(Error::Usage(format!(
                    "{dataset}: a user's data set is read for a model, whose normalisation it \
                     records"
                )));
            }
        };
        let images = config.map(model_images).unwrap_or_default();
        let opened = open_source(dataset, Split::Test, data_dir, images)?;
        let test_data = subset(opened.data, subset_n, 2, "the test set")?;
        let test = eval_loader(stats.clone(), test_data.clone(), 256, workers)?;
        let mut ood_dir = None;
        let ood = match ood {
            Some((source, dir)) => {
                let data = match (&source, dir, config) {
                    (DataSource::Preset(id), Some(dir), _) => {
                        ood_dir = Some(dir.to_path_buf());
                        open_ood(*id, dir)?
                    }
                    (DataSource::Preset(id), None, _) => {
                        let opened = open_preset_ood(*id, data_dir)
                            .map_err(|e| Error::Usage(format!("the OOD set {id}: {e}")))?;
                        ood_dir = Some(opened.dir);
                        opened.data
                    }
                    (_, _, Some(c)) => open_user_ood(&source, c)?.data,
                    (_, _, None) => {
                        return Err(Error::Usage(format!(
                            "{source}: a user's OOD set is read for a model file"
                        )));
                    }
                };
                let data = subset_at_most(data, subset_n, 3)?;
                Some((source, eval_loader(stats.clone(), data, 256, workers)?))
            }
            None => None,
        };
        Ok(Self {
            dataset: dataset.clone(),
            test,
            test_data,
            stats,
            ood,
            ood_dir,
            workers,
        })
    }

    /// The test split without `held_out` classes (the others relabelled from 0, as the
    /// experiment's data), then a stratified `subset_n` of it if given: what a held-out run's
    /// models were evaluated on; the held-out classes' test images (at most `subset_n`) are
    /// the OOD set, as in the experiment. Built by [`Loaders::new`] without a subset or OOD
    /// set. No classes: unchanged.
    pub(crate) fn holding_out(
        mut self,
        held_out: &[u32],
        subset_n: Option<usize>,
    ) -> Result<Self, Error> {
        if held_out.is_empty() {
            return Ok(self);
        }
        let (kept, out) = bnn_data::ClassSubset::held_out(self.test_data.clone(), held_out)?;
        let out = subset_at_most(Arc::new(out), subset_n, 3)?;
        self.ood = Some((
            self.dataset.clone(),
            eval_loader(self.stats.clone(), out, 256, self.workers)?,
        ));
        self.test_data = subset(Arc::new(kept), subset_n, 2, "the test set")?;
        self.test = eval_loader(
            self.stats.clone(),
            self.test_data.clone(),
            256,
            self.workers,
        )?;
        Ok(self)
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
    methods: &[Method],
    device: &Device,
    samples: usize,
) -> Result<Vec<ModelPredictions>, Error> {
    methods
        .iter()
        .map(|&m| {
            let s = m.passes(samples);
            let label = m.label().to_string();
            if let Some((test, ood)) = run.stage(m).load_predictions(s)?
                && loaders.fit(&test, ood.as_ref())
            {
                return Ok(ModelPredictions { label, test, ood });
            }
            let model = run.load(m, device)?;
            loaders.predict(&label, &model, device, s)
        })
        .collect()
}
