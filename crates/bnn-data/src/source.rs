//! Where a command's images come from: a preset data set by name, a folder of labelled
//! images (`folder:DIR`), or a NumPy file (`npz:FILE`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::class_folders::{FolderImages, folder_has_test, load_class_folders};
use crate::dataset::{Dataset, Split};
use crate::error::{DataError, Result};
use crate::id::DatasetId;
use crate::npz::{load_npz, npz_has_test};

/// A data set as the user names it (serialised as that name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum DataSource {
    /// One of the preset data sets, found by the [`crate::Locator`].
    Preset(DatasetId),
    /// Class sub-folders of PNG/JPEG images ([`crate::load_class_folders`]).
    Folder(PathBuf),
    /// A `.npz` with `x_train`, `y_train` and optionally `x_test`, `y_test`
    /// ([`crate::load_npz`]).
    Npz(PathBuf),
}

impl DataSource {
    /// The preset, when the source is one.
    pub fn preset(&self) -> Option<DatasetId> {
        match self {
            DataSource::Preset(id) => Some(*id),
            _ => None,
        }
    }

    /// The file or folder of a user's data set (`None` for a preset).
    pub fn path(&self) -> Option<&Path> {
        match self {
            DataSource::Preset(_) => None,
            DataSource::Folder(p) | DataSource::Npz(p) => Some(p),
        }
    }

    /// Whether a user's data set has a test split (presets: always).
    pub fn has_test(&self) -> Result<bool> {
        match self {
            DataSource::Preset(_) => Ok(true),
            DataSource::Folder(dir) => Ok(folder_has_test(dir)),
            DataSource::Npz(file) => npz_has_test(file),
        }
    }

    /// Loads `split` of a user's data set, its images brought to `images` (folders only; a
    /// `.npz` keeps its shape). A preset is opened by the [`crate::Locator`] instead: an error
    /// here.
    pub fn load(&self, split: Split, images: FolderImages) -> Result<Arc<dyn Dataset>> {
        match self {
            DataSource::Preset(id) => Err(DataError::Config(format!(
                "{id} is a preset data set: open it with the Locator"
            ))),
            DataSource::Folder(dir) => Ok(Arc::new(load_class_folders(dir, split, images)?)),
            DataSource::Npz(file) => Ok(Arc::new(load_npz(file, split)?)),
        }
    }
}

impl std::fmt::Display for DataSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataSource::Preset(id) => write!(f, "{id}"),
            DataSource::Folder(p) => write!(f, "folder:{}", p.display()),
            DataSource::Npz(p) => write!(f, "npz:{}", p.display()),
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

    /// `folder:DIR`, `npz:FILE`, or a preset's name ([`DatasetId`]'s spellings).
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
        s.parse::<DatasetId>().map(DataSource::Preset).map_err(|_| {
            DataError::Config(format!(
                "unknown data set `{s}` (known: mnist, fashion-mnist, cifar-10, cifar-100, \
                 svhn, imagenet; or folder:DIR for class folders of images, npz:FILE for a \
                 NumPy file)"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_choices() {
        for s in ["fashion-mnist", "folder:photos/cats", "npz:data/mnist.npz"] {
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
            e.contains("folder:DIR") && e.contains("npz:FILE") && e.contains("svhn"),
            "{e}"
        );
        assert!("npz:".parse::<DataSource>().is_err());
    }
}
