//! The supported data sets: names, shapes, statistics, files and augmentation presets.

use std::path::Path;

use crate::cifar::{CIFAR10_SUBDIR, CIFAR100_SUBDIR, cifar10_files, cifar100_file};
use crate::dataset::Split;
use crate::download::{Checksum, RemoteFile};
use crate::error::DataError;
use crate::idx::{find_idx_file, idx_file_stems};
use crate::svhn::svhn_file;
use crate::transform::{
    CenterCrop, ColorJitter, Compose, NormStats, Normalize, RandomCrop, RandomHorizontalFlip,
    RandomResizedCrop,
};

/// A supported data set (serialised by its [`DatasetId::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum DatasetId {
    /// MNIST handwritten digits, 28×28 grey, 10 classes.
    Mnist,
    /// Fashion-MNIST articles, 28×28 grey, 10 classes.
    FashionMnist,
    /// CIFAR-10, 32×32 RGB, 10 classes.
    Cifar10,
    /// CIFAR-100 (fine labels), 32×32 RGB, 100 classes.
    Cifar100,
    /// SVHN cropped digits, 32×32 RGB, 10 classes.
    Svhn,
    /// ImageNet-1k as an image-folder tree, 1000 classes.
    ImageNet,
}

impl DatasetId {
    /// Every data set.
    pub const ALL: [DatasetId; 6] = [
        DatasetId::Mnist,
        DatasetId::FashionMnist,
        DatasetId::Cifar10,
        DatasetId::Cifar100,
        DatasetId::Svhn,
        DatasetId::ImageNet,
    ];

    /// The folder name used under the data, cache and `/usr/share/datasets` folders.
    pub fn name(self) -> &'static str {
        match self {
            DatasetId::Mnist => "mnist",
            DatasetId::FashionMnist => "fashion-mnist",
            DatasetId::Cifar10 => "cifar-10",
            DatasetId::Cifar100 => "cifar-100",
            DatasetId::Svhn => "svhn",
            DatasetId::ImageNet => "imagenet",
        }
    }

    /// Number of classes.
    pub fn classes(self) -> usize {
        match self {
            DatasetId::Cifar100 => 100,
            DatasetId::ImageNet => 1000,
            _ => 10,
        }
    }

    /// `(channels, height, width)` of the stored samples (ImageNet: after the
    /// evaluation decode, 224×224).
    pub fn shape(self) -> (usize, usize, usize) {
        match self {
            DatasetId::Mnist | DatasetId::FashionMnist => (1, 28, 28),
            DatasetId::Cifar10 | DatasetId::Cifar100 | DatasetId::Svhn => (3, 32, 32),
            DatasetId::ImageNet => (3, 224, 224),
        }
    }

    /// The normalisation constants.
    pub fn norm_stats(self) -> NormStats {
        match self {
            DatasetId::Mnist => NormStats::MNIST,
            DatasetId::FashionMnist => NormStats::FASHION_MNIST,
            DatasetId::Cifar10 => NormStats::CIFAR10,
            DatasetId::Cifar100 => NormStats::CIFAR100,
            DatasetId::Svhn => NormStats::SVHN,
            DatasetId::ImageNet => NormStats::IMAGENET,
        }
    }

    /// The Debian package that installs the data set under `/usr/share/datasets`, if any.
    pub fn debian_package(self) -> Option<&'static str> {
        match self {
            DatasetId::FashionMnist => Some("dataset-fashion-mnist"),
            _ => None,
        }
    }

    /// `true` when `dir` holds the files of `split` in a layout the loaders accept.
    pub fn is_present(self, dir: &Path, split: Split) -> bool {
        match self {
            DatasetId::Mnist | DatasetId::FashionMnist => {
                let (a, b) = idx_file_stems(split);
                find_idx_file(dir, a).is_some() && find_idx_file(dir, b).is_some()
            }
            DatasetId::Cifar10 => [dir.to_path_buf(), dir.join(CIFAR10_SUBDIR)]
                .iter()
                .any(|d| cifar10_files(split).iter().all(|f| d.join(f).is_file())),
            DatasetId::Cifar100 => [dir.to_path_buf(), dir.join(CIFAR100_SUBDIR)]
                .iter()
                .any(|d| d.join(cifar100_file(split)).is_file()),
            DatasetId::Svhn => dir.join(svhn_file(split)).is_file(),
            DatasetId::ImageNet => dir
                .join(match split {
                    Split::Train => "train",
                    Split::Test => "val",
                })
                .is_dir(),
        }
    }

    /// The files to download for `split`, with the checksums their publishers give
    /// (MD5: the only digest MNIST, Fashion-MNIST, CIFAR and SVHN publish). Empty for ImageNet.
    pub fn remote_files(self, split: Split) -> Vec<RemoteFile> {
        let idx = |bases: &[&str], names: [(&str, &str); 2]| {
            names
                .iter()
                .map(|(name, md5)| RemoteFile {
                    name: name.to_string(),
                    urls: bases.iter().map(|b| format!("{b}{name}")).collect(),
                    checksum: Checksum::Md5(md5.to_string()),
                    extract: false,
                })
                .collect::<Vec<_>>()
        };
        match (self, split) {
            // MNIST: LeCun's page, then the mirror torchvision uses; same files, same MD5s.
            (DatasetId::Mnist, _) => {
                let bases = [
                    "http://yann.lecun.com/exdb/mnist/",
                    "https://ossci-datasets.s3.amazonaws.com/mnist/",
                ];
                match split {
                    Split::Train => idx(
                        &bases,
                        [
                            (
                                "train-images-idx3-ubyte.gz",
                                "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                            ),
                            (
                                "train-labels-idx1-ubyte.gz",
                                "d53e105ee54ea40749a09fcbcd1e9432",
                            ),
                        ],
                    ),
                    Split::Test => idx(
                        &bases,
                        [
                            (
                                "t10k-images-idx3-ubyte.gz",
                                "9fb629c4189551a2d022fa330f9573f3",
                            ),
                            (
                                "t10k-labels-idx1-ubyte.gz",
                                "ec29112dd5afa0611ce80d1b7f02629c",
                            ),
                        ],
                    ),
                }
            }
            // Fashion-MNIST: MD5s from the project's README.
            (DatasetId::FashionMnist, _) => {
                let bases = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"];
                match split {
                    Split::Train => idx(
                        &bases,
                        [
                            (
                                "train-images-idx3-ubyte.gz",
                                "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                            ),
                            (
                                "train-labels-idx1-ubyte.gz",
                                "25c81989df183df01b3e8a0aad5dffbe",
                            ),
                        ],
                    ),
                    Split::Test => idx(
                        &bases,
                        [
                            (
                                "t10k-images-idx3-ubyte.gz",
                                "bef4ecab320f06d8554ea6380940ec79",
                            ),
                            (
                                "t10k-labels-idx1-ubyte.gz",
                                "bb300cfdad3c16e7a12a480ee83cd310",
                            ),
                        ],
                    ),
                }
            }
            // CIFAR: MD5s from www.cs.toronto.edu/~kriz/cifar.html; one tarball for both splits.
            (DatasetId::Cifar10, _) => vec![RemoteFile {
                name: "cifar-10-binary.tar.gz".into(),
                urls: vec!["https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz".into()],
                checksum: Checksum::Md5("c32a1d4ab5d03f1284b67883e8d87530".into()),
                extract: true,
            }],
            (DatasetId::Cifar100, _) => vec![RemoteFile {
                name: "cifar-100-binary.tar.gz".into(),
                urls: vec!["https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz".into()],
                checksum: Checksum::Md5("03b5dce01913d631647c71ecec9e9cb8".into()),
                extract: true,
            }],
            // SVHN: the MD5s torchvision and the wider community check against.
            (DatasetId::Svhn, split) => {
                let (name, md5) = match split {
                    Split::Train => ("train_32x32.mat", "e26dedcc434d2e4c54c9b2d4a06d8373"),
                    Split::Test => ("test_32x32.mat", "eb5a983be6a315427106f1b164d9cef3"),
                };
                vec![RemoteFile {
                    name: name.into(),
                    urls: vec![format!("http://ufldl.stanford.edu/housenumbers/{name}")],
                    checksum: Checksum::Md5(md5.into()),
                    extract: false,
                }]
            }
            (DatasetId::ImageNet, _) => Vec::new(),
        }
    }

    /// The paper's training augmentation for this data set (appendix "Data Augmentation"):
    ///
    /// - CIFAR-10 / CIFAR-100: 4-pixel reflection padding, random 32×32 crop, random
    ///   horizontal flip, normalisation;
    /// - ImageNet: random resized crop to 224 (scale (0.08, 1), ratio (3/4, 4/3)), random
    ///   horizontal flip, colour jitter (0.4, 0.4, 0.4, 0.1), normalisation;
    /// - MNIST, Fashion-MNIST, SVHN (no augmentation in the paper; flips would also
    ///   change digits): normalisation only.
    pub fn train_transform(self) -> Compose {
        let norm = Normalize::new(self.norm_stats());
        match self {
            DatasetId::Cifar10 | DatasetId::Cifar100 => Compose::new()
                .then(RandomCrop::reflect(32, 4))
                .then(RandomHorizontalFlip::default())
                .then(norm),
            DatasetId::ImageNet => Compose::new()
                .then(RandomResizedCrop::new(224))
                .then(RandomHorizontalFlip::default())
                .then(ColorJitter::paper())
                .then(norm),
            _ => Compose::new().then(norm),
        }
    }

    /// The evaluation transform: normalisation only (ImageNet: centre 224×224 crop first).
    pub fn eval_transform(self) -> Compose {
        let norm = Normalize::new(self.norm_stats());
        match self {
            DatasetId::ImageNet => Compose::new()
                .then(CenterCrop {
                    height: 224,
                    width: 224,
                })
                .then(norm),
            _ => Compose::new().then(norm),
        }
    }
}

impl std::fmt::Display for DatasetId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<DatasetId> for String {
    fn from(id: DatasetId) -> String {
        id.name().to_string()
    }
}

impl TryFrom<String> for DatasetId {
    type Error = DataError;

    fn try_from(s: String) -> Result<Self, DataError> {
        s.parse()
    }
}

impl std::str::FromStr for DatasetId {
    type Err = DataError;

    /// Accepts the folder names and common spellings (`fashion_mnist`, `cifar10`, `imagenet-1k`).
    fn from_str(s: &str) -> Result<Self, DataError> {
        let key: String = s
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        Ok(match key.as_str() {
            "mnist" => DatasetId::Mnist,
            "fashionmnist" | "fmnist" => DatasetId::FashionMnist,
            "cifar10" => DatasetId::Cifar10,
            "cifar100" => DatasetId::Cifar100,
            "svhn" => DatasetId::Svhn,
            "imagenet" | "imagenet1k" => DatasetId::ImageNet,
            _ => {
                return Err(DataError::Config(format!(
                    "unknown data set `{s}` (known: mnist, fashion-mnist, cifar-10, cifar-100, svhn, imagenet)"
                )));
            }
        })
    }
}
