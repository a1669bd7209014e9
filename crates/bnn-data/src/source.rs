//! Where a command's data come from: a preset data set by name, a folder of labelled images
//! (`folder:DIR`), a NumPy file (`npz:FILE`: images and labels, or a regression data set when
//! its `y_*` are floating point), or CSV files (`csv:TRAIN.csv[,test=TEST.csv]`, regression).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::class_folders::{FolderImages, folder_has_test, load_class_folders};
use crate::dataset::{Dataset, Split};
use crate::error::{DataError, Result};
use crate::id::DatasetId;
use crate::npz::{load_npz, npz_has_test};
use crate::npz_tabular::{npz_is_regression, read_npz_tabular};
use crate::tabular::TabularSplits;
use crate::tabular_csv::CsvSource;

/// A data set as the user names it (serialised as that name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum DataSource {
    /// One of the preset data sets, found by the [`crate::Locator`].
    Preset(DatasetId),
    /// Class sub-folders of PNG/JPEG images ([`crate::load_class_folders`]).
    Folder(PathBuf),
    /// A `.npz` with `x_train`, `y_train` and optionally `x_test`, `y_test`
    /// ([`crate::load_npz`]; a regression data set when `y_train` is floating point,
    /// [`crate::read_npz_tabular`]).
    Npz(PathBuf),
    /// CSV files of a regression data set ([`CsvSource`]); the target columns are named by
    /// the caller ([`DataSource::load_tabular`]).
    Csv(CsvSource),
}

impl DataSource {
    /// The preset, when the source is one.
    pub fn preset(&self) -> Option<DatasetId> {
        match self {
            DataSource::Preset(id) => Some(*id),
            _ => None,
        }
    }

    /// The file or folder of a user's data set (`None` for a preset; a CSV source's training
    /// file).
    pub fn path(&self) -> Option<&Path> {
        match self {
            DataSource::Preset(_) => None,
            DataSource::Folder(p) | DataSource::Npz(p) => Some(p),
            DataSource::Csv(csv) => Some(&csv.train),
        }
    }

    /// Whether a user's data set has a test split (presets: always).
    pub fn has_test(&self) -> Result<bool> {
        match self {
            DataSource::Preset(_) => Ok(true),
            DataSource::Folder(dir) => Ok(folder_has_test(dir)),
            DataSource::Npz(file) => npz_has_test(file),
            DataSource::Csv(csv) => Ok(csv.test.is_some()),
        }
    }

    /// Whether this is a regression data set: CSV files always, a `.npz` whose `y_train` is
    /// floating point ([`npz_is_regression`], which reads its header: a missing or foreign
    /// file is an error), never a preset or class folders.
    pub fn is_regression(&self) -> Result<bool> {
        match self {
            DataSource::Preset(_) | DataSource::Folder(_) => Ok(false),
            DataSource::Npz(file) => npz_is_regression(file),
            DataSource::Csv(_) => Ok(true),
        }
    }

    /// Reads a regression data set: its training split and, when it has one, its test split.
    /// `targets` names the target columns of CSV files (at least one; [`crate::read_csv`]);
    /// a `.npz`'s targets are its `y_*` arrays, so `targets` must be empty there. An image
    /// data set is an error saying so.
    pub fn load_tabular(&self, targets: &[String]) -> Result<TabularSplits> {
        match self {
            DataSource::Csv(csv) => {
                if targets.is_empty() {
                    return Err(DataError::Config(format!(
                        "{self}: name the target column(s) of the CSV files (--target NAME, \
                         repeatable)"
                    )));
                }
                csv.load(targets)
            }
            DataSource::Npz(file) if npz_is_regression(file)? => {
                if !targets.is_empty() {
                    return Err(DataError::Config(format!(
                        "{self}: the targets of a .npz are its y_train and y_test arrays; \
                         --target names CSV columns only"
                    )));
                }
                read_npz_tabular(file)
            }
            _ => Err(DataError::Config(format!(
                "{self} holds labelled images (classification), not a regression data set"
            ))),
        }
    }

    /// Loads `split` of a user's image data set, its images brought to `images` (folders
    /// only; a `.npz` keeps its shape). A preset is opened by the [`crate::Locator`] instead,
    /// and a regression data set by [`DataSource::load_tabular`]: an error here.
    pub fn load(&self, split: Split, images: FolderImages) -> Result<Arc<dyn Dataset>> {
        match self {
            DataSource::Preset(id) => Err(DataError::Config(format!(
                "{id} is a preset data set: open it with the Locator"
            ))),
            DataSource::Folder(dir) => Ok(Arc::new(load_class_folders(dir, split, images)?)),
            DataSource::Npz(file) => Ok(Arc::new(load_npz(file, split)?)),
            DataSource::Csv(_) => Err(DataError::Config(format!(
                "{self} is a regression data set: read it with load_tabular"
            ))),
        }
    }
}

impl std::fmt::Display for DataSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataSource::Preset(id) => write!(f, "{id}"),
            DataSource::Folder(p) => write!(f, "folder:{}", p.display()),
            DataSource::Npz(p) => write!(f, "npz:{}", p.display()),
            DataSource::Csv(csv) => write!(f, "{csv}"),
        }
    }
}

impl From<DatasetId> for DataSource {
    fn from(id: DatasetId) -> Self {
        DataSource::Preset(id)
    }
}

impl From<DataSource> for String {
    fn from(s: DataSource) -> String {
        s.to_string()
    }
}

impl TryFrom<String> for DataSource {
    type Error = DataError;

    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

impl std::str::FromStr for DataSource {
    type Err = DataError;

    /// `folder:DIR`, `npz:FILE`, `csv:TRAIN.csv[,test=TEST.csv]` ([`CsvSource::parse`]), or
    /// a preset's name ([`DatasetId`]'s spellings).
    fn from_str(s: &str) -> Result<Self> {
        let path = |rest: &str, what: &str| {
            if rest.is_empty() {
                Err(DataError::Config(format!("`{s}` names no {what}")))
            } else {
                Ok(PathBuf::from(rest))
            }
        };
        if let Some(rest) = s.strip_prefix("folder:") {
            return Ok(DataSource::Folder(path(rest, "folder")?));
        }
        if let Some(rest) = s.strip_prefix("npz:") {
            return Ok(DataSource::Npz(path(rest, "file")?));
        }
        if s.starts_with("csv:") {
            return Ok(DataSource::Csv(CsvSource::parse(s)?));
        }
        s.parse::<DatasetId>().map(DataSource::Preset).map_err(|_| {
            DataError::Config(format!(
                "unknown data set `{s}` (known: mnist, fashion-mnist, cifar-10, cifar-100, \
                 svhn, imagenet; or folder:DIR for class folders of images, npz:FILE for a \
                 NumPy file, csv:TRAIN.csv[,test=TEST.csv] for a table)"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_choices() {
        for s in [
            "fashion-mnist",
            "folder:photos/cats",
            "npz:data/mnist.npz",
            "csv:data/train.csv",
            "csv:data/train.csv,test=data/test.csv",
        ] {
            let source: DataSource = s.parse().unwrap();
            assert_eq!(source.to_string(), s);
            let json = serde_json::to_string(&source).unwrap();
            assert_eq!(serde_json::from_str::<DataSource>(&json).unwrap(), source);
        }
        assert_eq!(
            "cifar10".parse::<DataSource>().unwrap(),
            DataSource::Preset(DatasetId::Cifar10)
        );
        let e = "photos".parse::<DataSource>().unwrap_err().to_string();
        assert!(
            e.contains("folder:DIR") && e.contains("npz:FILE") && e.contains("csv:TRAIN.csv"),
            "{e}"
        );
        assert!("npz:".parse::<DataSource>().is_err());
        assert!("csv:".parse::<DataSource>().is_err());
        let csv: DataSource = "csv:a.csv".parse().unwrap();
        assert!(csv.is_regression().unwrap());
        let e = csv.load_tabular(&[]).unwrap_err().to_string();
        assert!(e.contains("--target"), "{e}");
        assert!(csv.load(Split::Train, FolderImages::default()).is_err());
    }
}
