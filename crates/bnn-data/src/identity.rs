//! Which files a split of a data set was read from, their SHA-256, and whether they are the
//! files their publishers give (by the published MD5 sums of [`DatasetId::remote_files`]).
//!
//! A model records the digests of its training files, so that a later command can tell when
//! it is handed other data under the same name (Fashion-MNIST's files in a folder passed as
//! MNIST's: same shape, same classes, nothing else tells them apart).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use md5::Md5;
use sha2::{Digest, Sha256};

use crate::cifar::{CIFAR10_SUBDIR, CIFAR100_SUBDIR, cifar10_files, cifar100_file};
use crate::dataset::Split;
use crate::download::Checksum;
use crate::error::{DataError, Result};
use crate::id::DatasetId;
use crate::idx::{find_idx_file, idx_file_stems};
use crate::svhn::svhn_file;

/// How a file compares with the checksum its data set's publisher gives for that file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// Its MD5 is the published one.
    Matches,
    /// Its MD5 is that of a known repackaging of the data set (named).
    KnownCopy(&'static str),
    /// No checksum is published under this name (an uncompressed or extracted copy, a file of
    /// a data set without published sums).
    Unknown,
    /// Its MD5 is that of another data set's file of the same name: the folder holds that
    /// data set.
    OtherDataset(DatasetId),
    /// Its MD5 is neither this data set's nor another's: a modified or other copy.
    Differs,
}

/// One file a split was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigest {
    /// The file.
    pub path: PathBuf,
    /// Lower-case hex SHA-256 of its bytes.
    pub sha256: String,
    /// How it compares with the published checksum of its name.
    pub published: Published,
}

/// The files of `split` of `id` in `dir`, as the loaders read them: MNIST-like IDX files,
/// CIFAR's binary batches, SVHN's `.mat`. Empty for ImageNet, whose image tree is too large
/// to hash on every command.
pub fn split_files(id: DatasetId, split: Split, dir: &Path) -> Vec<PathBuf> {
    match id {
        DatasetId::Mnist | DatasetId::FashionMnist => {
            let (images, labels) = idx_file_stems(split);
            [images, labels]
                .iter()
                .filter_map(|stem| find_idx_file(dir, stem))
                .collect()
        }
        DatasetId::Cifar10 => {
            let names = cifar10_files(split);
            [dir.to_path_buf(), dir.join(CIFAR10_SUBDIR)]
                .into_iter()
                .find(|d| names.iter().all(|f| d.join(f).is_file()))
                .map(|d| names.iter().map(|f| d.join(f)).collect())
                .unwrap_or_default()
        }
        DatasetId::Cifar100 => [dir.to_path_buf(), dir.join(CIFAR100_SUBDIR)]
            .into_iter()
            .map(|d| d.join(cifar100_file(split)))
            .find(|f| f.is_file())
            .into_iter()
            .collect(),
        DatasetId::Svhn => Some(dir.join(svhn_file(split)))
            .filter(|f| f.is_file())
            .into_iter()
            .collect(),
        DatasetId::ImageNet => Vec::new(),
    }
}

/// `(sha256, md5)` of the file at `path`, lower-case hex, read once in 1 MiB blocks.
pub fn file_digests(path: &Path) -> Result<(String, String)> {
    let mut file = std::fs::File::open(path).map_err(|e| DataError::io(path, e))?;
    let (mut sha, mut md5) = (Sha256::new(), Md5::new());
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| DataError::io(path, e))?;
        if n == 0 {
            break;
        }
        sha.update(&buf[..n]);
        md5.update(&buf[..n]);
    }
    Ok((hex(&sha.finalize()), hex(&md5.finalize())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The published MD5 of the file `name` of `split` of `id`, if its publisher gives one.
fn published_md5(id: DatasetId, split: Split, name: &str) -> Option<String> {
    id.remote_files(split)
        .into_iter()
        .find(|f| f.name == name && !f.extract)
        .and_then(|f| match f.checksum {
            Checksum::Md5(h) => Some(h),
            Checksum::Sha256(_) => None,
        })
}

/// Copies of the published files known besides the publishers' own: `(data set, split, file
/// name, MD5, who ships it)`. Debian's `dataset-fashion-mnist` package (the data folder of the
/// README's quick start) ships the four files under their published names, recompressed, so
/// with other MD5s.
const KNOWN_COPIES: [(DatasetId, Split, &str, &str, &str); 4] = [
    (
        DatasetId::FashionMnist,
        Split::Train,
        "train-images-idx3-ubyte.gz",
        "cf8536b0aa1a6ac5fa3f23001093305c",
        "Debian's dataset-fashion-mnist",
    ),
    (
        DatasetId::FashionMnist,
        Split::Train,
        "train-labels-idx1-ubyte.gz",
        "10bea18fdb374794d4bb42e356e600c9",
        "Debian's dataset-fashion-mnist",
    ),
    (
        DatasetId::FashionMnist,
        Split::Test,
        "t10k-images-idx3-ubyte.gz",
        "f78720b4224f21cce2f2ccf2d7a94c9a",
        "Debian's dataset-fashion-mnist",
    ),
    (
        DatasetId::FashionMnist,
        Split::Test,
        "t10k-labels-idx1-ubyte.gz",
        "0d30e22e447f3c33dab9ed536400ac01",
        "Debian's dataset-fashion-mnist",
    ),
];

/// The data set a known copy with this name and MD5 is of, and who ships it.
fn known_copy(split: Split, name: &str, md5: &str) -> Option<(DatasetId, &'static str)> {
    KNOWN_COPIES
        .iter()
        .find(|(_, s, n, h, _)| *s == split && *n == name && *h == md5)
        .map(|(id, _, _, _, who)| (*id, *who))
}

/// How a file named `name` with `md5` compares with what the publishers of `id` (and of the
/// other data sets) give for that name.
pub fn compare_published(id: DatasetId, split: Split, name: &str, md5: &str) -> Published {
    match (published_md5(id, split, name), known_copy(split, name, md5)) {
        (_, Some((of, who))) if of == id => Published::KnownCopy(who),
        (_, Some((of, _))) => Published::OtherDataset(of),
        (None, None) => Published::Unknown,
        (Some(h), None) if h == md5 => Published::Matches,
        (Some(_), None) => DatasetId::ALL
            .into_iter()
            .filter(|&other| other != id)
            .find(|&other| published_md5(other, split, name).as_deref() == Some(md5))
            .map_or(Published::Differs, Published::OtherDataset),
    }
}

/// The digests of the files of `split` of `id` in `dir` ([`split_files`]).
pub fn digest_split(id: DatasetId, split: Split, dir: &Path) -> Result<Vec<FileDigest>> {
    split_files(id, split, dir)
        .into_iter()
        .map(|path| {
            let (sha256, md5) = file_digests(&path)?;
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let published = compare_published(id, split, &name, &md5);
            Ok(FileDigest {
                path,
                sha256,
                published,
            })
        })
        .collect()
}

/// The digests by file name, as a model records them.
pub fn by_name(digests: &[FileDigest]) -> BTreeMap<String, String> {
    digests
        .iter()
        .map(|d| {
            let name = d
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, d.sha256.clone())
        })
        .collect()
}

/// Checks that the files of `split` of `id` in `dir` are not another data set's: a file whose
/// MD5 is another data set's published one is an error naming both. Returns the digests and a
/// note for files that differ from the published ones (a modified or other copy), for the
/// caller to print once.
pub fn verify_split(
    id: DatasetId,
    split: Split,
    dir: &Path,
) -> Result<(Vec<FileDigest>, Option<String>)> {
    let digests = digest_split(id, split, dir)?;
    if let Some((d, other)) = digests.iter().find_map(|d| match d.published {
        Published::OtherDataset(other) => Some((d, other)),
        _ => None,
    }) {
        return Err(DataError::Config(format!(
            "{} is {other}'s file, not {id}'s (by its MD5): the folder {} holds {other}; pass \
             --dataset {other}, or a folder with {id}",
            d.path.display(),
            dir.display()
        )));
    }
    let differs: Vec<String> = digests
        .iter()
        .filter(|d| d.published == Published::Differs)
        .map(|d| d.path.display().to_string())
        .collect();
    let note = (!differs.is_empty()).then(|| {
        format!(
            "{} not the published {id} file{} (its MD5 differs): a modified or other copy",
            differs.join(", "),
            if differs.len() == 1 { " is" } else { "s are" }
        )
    });
    Ok((digests, note))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_named_by_the_data_set_whose_published_sum_it_has() {
        let fashion_train = "8d4fb7e6c68d591d4c3dfef9ec88bf0d";
        let mnist_train = "f68b3c2dcbeaaa9fbdd348bbdeb94873";
        let name = "train-images-idx3-ubyte.gz";
        let m = DatasetId::Mnist;
        assert_eq!(
            compare_published(m, Split::Train, name, mnist_train),
            Published::Matches
        );
        assert_eq!(
            compare_published(m, Split::Train, name, fashion_train),
            Published::OtherDataset(DatasetId::FashionMnist)
        );
        assert_eq!(
            compare_published(m, Split::Train, name, &"0".repeat(32)),
            Published::Differs
        );
        // Debian's copy of Fashion-MNIST is known, and is not MNIST.
        let debian = "cf8536b0aa1a6ac5fa3f23001093305c";
        assert_eq!(
            compare_published(DatasetId::FashionMnist, Split::Train, name, debian),
            Published::KnownCopy("Debian's dataset-fashion-mnist")
        );
        assert_eq!(
            compare_published(m, Split::Train, name, debian),
            Published::OtherDataset(DatasetId::FashionMnist)
        );
        // An uncompressed copy has no published sum.
        assert_eq!(
            compare_published(m, Split::Train, "train-images-idx3-ubyte", mnist_train),
            Published::Unknown
        );
    }

    #[test]
    fn digests_are_the_known_values_and_another_data_set_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x");
        std::fs::write(&f, b"abc").unwrap();
        // FIPS 180-2 and RFC 1321 test vectors for "abc".
        assert_eq!(
            file_digests(&f).unwrap(),
            (
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".to_string(),
                "900150983cd24fb0d6963f7d28e17f72".to_string()
            )
        );
        // IDX files whose names are published but whose bytes are not: a note, not an error.
        for name in ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"] {
            std::fs::write(dir.path().join(name), b"not the real file").unwrap();
        }
        let (digests, note) = verify_split(DatasetId::Mnist, Split::Train, dir.path()).unwrap();
        assert_eq!(digests.len(), 2);
        let note = note.unwrap();
        assert!(note.contains("not the published mnist files"), "{note}");
        assert_eq!(by_name(&digests).len(), 2);
    }
}
