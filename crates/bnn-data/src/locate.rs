//! Finding a data set on disk (or fetching it) and opening it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cifar::{Cifar100Label, load_cifar10, load_cifar100};
use crate::dataset::{Dataset, Split};
use crate::download::{RemoteFile, fetch_files};
use crate::error::{DataError, Result};
use crate::folder::{FolderConfig, ImageFolder};
use crate::id::DatasetId;
use crate::idx::load_idx_dir;
use crate::svhn::load_svhn;

/// Name of the environment variable naming a data folder.
pub const DATA_ENV: &str = "SWBNN_DATA";

/// Where data sets are looked for.
///
/// An `explicit` folder (a `--data DIR` argument) is the only place searched when it is given:
/// `DIR/<name>` or `DIR` itself; a missing folder, a file, or a folder without the data set is
/// an error, never a fall-back to another copy. Otherwise, in this order:
///
/// 1. `env_dir` (`$SWBNN_DATA`): `$SWBNN_DATA/<name>` or `$SWBNN_DATA` itself (a
///    `$SWBNN_DATA` that is not a folder is an error);
/// 2. `cache_dir/<name>` (`$XDG_CACHE_HOME/swbnn` or `~/.cache/swbnn`);
/// 3. `system_dir/<name>` (`/usr/share/datasets`, where Debian's `dataset-*` packages install);
/// 4. a verified download into `cache_dir/<name>`, when `download` is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locator {
    /// The folder given on the command line, if any.
    pub explicit: Option<PathBuf>,
    /// The folder named by `SWBNN_DATA`, if set.
    pub env_dir: Option<PathBuf>,
    /// The per-user cache folder (also the download target), if one is known.
    pub cache_dir: Option<PathBuf>,
    /// The system-wide data folder.
    pub system_dir: PathBuf,
    /// Whether a missing data set may be downloaded.
    pub download: bool,
}

/// `$XDG_CACHE_HOME/swbnn`, else `$HOME/.cache/swbnn`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let nonempty = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    nonempty("XDG_CACHE_HOME")
        .or_else(|| nonempty("HOME").map(|h| h.join(".cache")))
        .map(|c| c.join("swbnn"))
}

impl Locator {
    /// The standard search order, reading `SWBNN_DATA`, `XDG_CACHE_HOME` and `HOME` from the
    /// environment; downloads allowed.
    pub fn from_env(explicit: Option<PathBuf>) -> Self {
        Locator {
            explicit,
            env_dir: std::env::var_os(DATA_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            cache_dir: default_cache_dir(),
            system_dir: PathBuf::from("/usr/share/datasets"),
            download: true,
        }
    }

    /// Only `dir` (and `dir/<name>`), no download: for tests and fixed layouts.
    pub fn only(dir: impl Into<PathBuf>) -> Self {
        Locator {
            explicit: Some(dir.into()),
            env_dir: None,
            cache_dir: None,
            system_dir: PathBuf::from("/nonexistent"),
            download: false,
        }
    }

    /// The folders searched for `id`, in order (only the explicit folder's two when one is
    /// given).
    pub fn candidates(&self, id: DatasetId) -> Vec<PathBuf> {
        let name = id.name();
        if let Some(d) = &self.explicit {
            return vec![d.join(name), d.clone()];
        }
        let mut out = Vec::new();
        if let Some(d) = &self.env_dir {
            out.push(d.join(name));
            out.push(d.clone());
        }
        if let Some(c) = &self.cache_dir {
            out.push(c.join(name));
        }
        out.push(self.system_dir.join(name));
        out
    }

    /// The folder holding `split` of `id`, downloading it if needed and allowed.
    pub fn locate(&self, id: DatasetId, split: Split) -> Result<PathBuf> {
        self.locate_with(id, split, &id.remote_files(split))
    }

    /// As [`Locator::locate`], with an explicit download table (mirrors, tests).
    pub fn locate_with(
        &self,
        id: DatasetId,
        split: Split,
        remote: &[RemoteFile],
    ) -> Result<PathBuf> {
        // A `$SWBNN_DATA` that names no folder is a mistake to report, not a folder to skip.
        if self.explicit.is_none()
            && let Some(env) = &self.env_dir
            && !env.is_dir()
        {
            let what = if env.exists() {
                "is not a folder"
            } else {
                "does not exist"
            };
            return Err(DataError::Config(format!(
                "{DATA_ENV}={} {what}; point it at a data folder, or unset it",
                env.display()
            )));
        }
        let candidates = self.candidates(id);
        if let Some(found) = candidates.iter().find(|d| id.is_present(d, split)) {
            return Ok(found.clone());
        }
        if let Some(dir) = &self.explicit {
            return Err(explicit_error(id, split, dir));
        }
        let mut download_note = None;
        match (&self.cache_dir, self.download, remote.is_empty()) {
            (Some(cache), true, false) => {
                let target = cache.join(id.name());
                match fetch_files(&target, remote) {
                    Ok(()) if id.is_present(&target, split) => return Ok(target),
                    Ok(()) => {
                        download_note = Some(format!(
                            "download finished but {} lacks the expected files",
                            target.display()
                        ))
                    }
                    Err(e) => download_note = Some(format!("download failed: {e}")),
                }
            }
            (None, true, false) => {
                download_note = Some("no cache folder known (set XDG_CACHE_HOME or HOME)".into())
            }
            _ => {}
        }
        Err(self.not_found(id, &candidates, download_note))
    }

    fn not_found(
        &self,
        id: DatasetId,
        searched: &[PathBuf],
        download: Option<String>,
    ) -> DataError {
        let name = id.name();
        let mut remedies = vec![
            format!("pass the folder explicitly: --data DIR (DIR/{name} or DIR holding the files)"),
            format!("set the environment variable {DATA_ENV}=DIR"),
        ];
        if let Some(c) = &self.cache_dir {
            remedies.push(format!("put the files in {}", c.join(name).display()));
        }
        if let Some(pkg) = id.debian_package() {
            remedies.push(format!("on Debian/Ubuntu: apt-get install {pkg}"));
        }
        match (id, download) {
            (DatasetId::ImageNet, _) => remedies.push(
                "ImageNet cannot be downloaded automatically: obtain ILSVRC2012 from \
                 https://image-net.org (registration required) and arrange it as \
                 train/<wnid>/*.JPEG and val/<wnid>/*.JPEG"
                    .into(),
            ),
            (_, Some(note)) => remedies.push(format!("automatic download: {note}")),
            (_, None) if !self.download => {
                remedies.push("allow the automatic download (it is switched off)".into())
            }
            _ => {}
        }
        let files = id
            .remote_files(Split::Train)
            .into_iter()
            .chain(id.remote_files(Split::Test))
            .flat_map(|f| f.urls.into_iter().take(1))
            .collect::<Vec<_>>();
        if !files.is_empty() {
            remedies.push(format!("or fetch by hand: {}", files.join(" ")));
        }
        DataError::NotFound {
            dataset: name.to_string(),
            searched: searched
                .iter()
                .map(|p| format!("  {}", p.display()))
                .collect::<Vec<_>>()
                .join("\n"),
            remedies: remedies
                .iter()
                .map(|r| format!("  - {r}"))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// Why an explicit data folder does not hold `split` of `id`.
fn explicit_error(id: DatasetId, split: Split, dir: &Path) -> DataError {
    let name = id.name();
    let reason = match std::fs::metadata(dir) {
        Err(e) => format!("the data folder given with --data cannot be read: {e}"),
        Ok(m) if !m.is_dir() => "the data folder given with --data is a file, not a folder".into(),
        Ok(_) => format!(
            "the data folder given with --data holds no {name} {} split (looked in {} and {}); \
             it is used alone, without falling back to another copy",
            match split {
                Split::Train => "training",
                Split::Test => "test",
            },
            dir.join(name).display(),
            dir.display()
        ),
    };
    DataError::format(dir, reason)
}

/// Loads `split` of `id` from `dir` (ImageNet: with `FolderConfig::train()` for the
/// training split and `FolderConfig::eval()` for validation).
pub fn open_dir(id: DatasetId, split: Split, dir: &Path) -> Result<Arc<dyn Dataset>> {
    Ok(match id {
        DatasetId::Mnist | DatasetId::FashionMnist => Arc::new(load_idx_dir(dir, split)?),
        DatasetId::Cifar10 => Arc::new(load_cifar10(dir, split)?),
        DatasetId::Cifar100 => Arc::new(load_cifar100(dir, split, Cifar100Label::Fine)?),
        DatasetId::Svhn => Arc::new(load_svhn(dir, split)?),
        DatasetId::ImageNet => {
            let config = match split {
                Split::Train => FolderConfig::train(),
                Split::Test => FolderConfig::eval(),
            };
            Arc::new(ImageFolder::imagenet(dir, split, config)?)
        }
    })
}

/// Finds (or fetches) `split` of `id` with `locator` and loads it.
pub fn open(id: DatasetId, split: Split, locator: &Locator) -> Result<Arc<dyn Dataset>> {
    let dir = locator.locate(id, split)?;
    open_dir(id, split, &dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_env_that_names_no_folder_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        for (env, needle) in [
            (tmp.path().join("missing"), "does not exist"),
            (file, "is not a folder"),
        ] {
            let locator = Locator {
                explicit: None,
                env_dir: Some(env.clone()),
                cache_dir: None,
                system_dir: tmp.path().join("system"),
                download: false,
            };
            let e = locator
                .locate(DatasetId::FashionMnist, Split::Train)
                .unwrap_err()
                .to_string();
            assert!(e.contains(DATA_ENV) && e.contains(needle), "{e}");
            assert!(e.contains(&env.display().to_string()), "{e}");
        }
    }
}
