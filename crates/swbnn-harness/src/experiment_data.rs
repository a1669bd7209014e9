//! The data of one reproduction run ([`ExperimentData`]), opened once from its [`Setup`].

use std::collections::BTreeMap;
use std::sync::Arc;

use bnn_data::{ClassSubset, DataLoader, Dataset, FolderImages, NormStats, Split, Subset};
use bnn_models::TrainedOn;
use swbnn_ops::data::*;

use crate::Error;
use crate::setup::Setup;

/// The data of one experiment, opened once and shared by every stage and table: the training
/// examples, the validation split with its loader, the test subset with its loader, and the OOD
/// loader.
pub struct ExperimentData {
    /// What the run's models record they were trained on ([`trained_on`]).
    pub trained_on: TrainedOn,
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
    /// Evaluation loader over half A of the OOD set when the setup splits it
    /// ([`crate::setup::Setup::ood_halves`]): a validation OOD set of real OOD images, read by
    /// choices as the tile-shuffled one is; `None` otherwise.
    pub ood_half_a_loader: Option<DataLoader>,
    /// Test examples (stratified subset of seed 2 when `test_subset` is set).
    pub test: Arc<dyn Dataset>,
    /// Evaluation loader over `test`.
    pub test_loader: DataLoader,
    /// Evaluation loader over the OOD set of the test rows (subset of seed 3): the setup's
    /// OOD set, its half B when the setup splits it, or the test images of the held-out
    /// classes; normalised with the in-distribution statistics as a deployed model would be.
    pub ood_loader: Option<DataLoader>,
    /// Normalisation of the data set.
    pub stats: NormStats,
    /// SHA-256 of every data file read, by file name (the OOD set's under `ood/`), as the
    /// run records them ([`crate::setup::Setup::data_sha256`]).
    pub data_sha256: BTreeMap<String, String>,
}

impl ExperimentData {
    /// Opens the data of `setup`. A preset is read as [`open_verified`] and normalised with
    /// its published constants; a user's data set (`folder:DIR`, `npz:FILE`) is read as
    /// [`open_source`] (images of their own size and channels, the test split brought to the
    /// training split's) and normalised with the statistics measured on the training examples
    /// ([`training_norm`], as `swbnn train` does). A user's data set without a test split is an
    /// error, and so is an OOD set whose images are not the data set's shape.
    pub fn open(setup: &Setup) -> Result<Self, Error> {
        let source = &setup.dataset;
        let data_dir = setup.data_dir.as_deref();
        // The test split is opened below: not checked twice.
        let opened = open_one_split(source, Split::Train, data_dir, FolderImages::default())?;
        let (c, h, _) = opened.data.shape();
        if source.preset().is_none() && !source.has_test()? {
            return Err(Error::Usage(format!(
                "{source} has no test split (a `.npz` needs `x_test` and `y_test`, class folders \
                 a `test/` folder beside `train/`): a reproduction evaluates every method on it"
            )));
        }
        let test_images = FolderImages {
            size: Some(h),
            channels: Some(c),
        };
        let opened_test = open_source(source, Split::Test, data_dir, test_images)?;
        let trained_on = trained_on(source, &opened, Some(&opened_test), setup.validation)?;
        let mut data_sha256 = trained_on.files.clone();
        let held_out = &setup.held_out_classes;
        let (train_all, test_all, held_out_test) = match held_out.is_empty() {
            true => (opened.data.clone(), opened_test.data.clone(), None),
            false => {
                if let Some((id, _)) = &setup.ood {
                    return Err(Error::Usage(format!(
                        "the setup holds classes {held_out:?} out as its OOD set and also names \
                         {id} as one: set `ood` to null or `held_out_classes` to []"
                    )));
                }
                let (train, _) = ClassSubset::held_out(opened.data.clone(), held_out)?;
                let (test, out) = ClassSubset::held_out(opened_test.data.clone(), held_out)?;
                let out: Arc<dyn Dataset> = Arc::new(out);
                (
                    Arc::new(train) as Arc<dyn Dataset>,
                    Arc::new(test) as Arc<dyn Dataset>,
                    Some(out),
                )
            }
        };
        let (train, validation) = training_split(train_all, setup.validation, setup.train_subset)?;
        let test = subset(test_all, setup.test_subset, 2, "the test set")?;
        let stats = training_norm(source, train.as_ref())?;
        let test_loader = eval_loader(stats.clone(), test.clone(), 256, setup.workers)?;
        let validation_loader = eval_loader(stats.clone(), validation.clone(), 256, setup.workers)?;
        let validation_ood_loader = match validation.is_empty() {
            true => None,
            false => Some(eval_loader(
                stats.clone(),
                validation_ood(validation.clone())?,
                256,
                setup.workers,
            )?),
        };
        // Split in halves: the OOD set `ood` names, never the held-out classes (whose test
        // images are all the near-OOD set; no choice reads it).
        let mut halves = setup.ood_halves;
        let ood = match (&setup.ood, held_out_test) {
            (_, Some(out)) => {
                halves = false;
                Some(out)
            }
            (Some((id, dir)), None) => {
                let ood = open_ood_verified(*id, dir)?;
                check_ood_not_test(&opened_test, &ood)?;
                let (oc, oh, ow) = ood.data.shape();
                if (oc, oh, ow) != test.shape() {
                    let (tc, th, tw) = test.shape();
                    return Err(Error::Usage(format!(
                        "the OOD set {id} in {} holds {oc}x{oh}x{ow} images, and {source}'s are \
                         {tc}x{th}x{tw}: set `ood` in --setup to a set of the same shape, or to \
                         null",
                        dir.display()
                    )));
                }
                data_sha256.extend(
                    ood.digests()
                        .into_iter()
                        .map(|(name, sha)| (format!("ood/{name}"), sha)),
                );
                Some(ood.data)
            }
            (None, None) => None,
        };
        let (ood_half_a_loader, ood) = match (ood, halves) {
            (Some(ood), true) => {
                let (a, b) = Subset::alternating_halves(ood)?;
                let a = eval_loader(stats.clone(), Arc::new(a), 256, setup.workers)?;
                (Some(a), Some(Arc::new(b) as Arc<dyn Dataset>))
            }
            (ood, _) => (None, ood),
        };
        let ood_loader = ood
            .map(|data| -> Result<DataLoader, Error> {
                let data = subset_at_most(data, setup.test_subset, 3)?;
                eval_loader(stats.clone(), data, 256, setup.workers)
            })
            .transpose()?;
        Ok(Self {
            trained_on,
            train,
            validation,
            validation_loader,
            validation_ood_loader,
            ood_half_a_loader,
            test,
            test_loader,
            ood_loader,
            stats,
            data_sha256,
        })
    }
}
