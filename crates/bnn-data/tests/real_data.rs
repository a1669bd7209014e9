//! Real data: the 10,000 MNIST digits in shared/ and, when installed, Debian's Fashion-MNIST.

use std::path::{Path, PathBuf};

use bnn_data::{Dataset, DatasetId, InMemoryDataset, Locator, NormStats, Split, load_idx_pair};

/// The environment variable that turns a skip for missing data into a failure (CI sets it
/// where the data are known to be present, so a broken lookup cannot pass as a skip).
const REQUIRE_DATA: &str = "SWBNN_REQUIRE_TEST_DATA";

/// The folder of the 10,000-digit MNIST sample, or `None` (after printing why the test
/// skips) where this checkout has none beside it: a user's fresh clone has no `shared/`.
fn mnist_10k_dir() -> Option<PathBuf> {
    // The crate lives at <root>/crates/bnn-data; shared/ sits in the workspace root or beside
    // it. Elsewhere, `SWBNN_MNIST_10K` names the folder.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let found = std::env::var_os("SWBNN_MNIST_10K")
        .map(PathBuf::from)
        .into_iter()
        .chain([
            root.join("shared/data/mnist-10k"),
            root.join("../shared/data/mnist-10k"),
        ])
        .find(|c| c.join("images-idx3-ubyte.gz").is_file());
    if found.is_none() {
        assert!(
            std::env::var_os(REQUIRE_DATA).is_none(),
            "{REQUIRE_DATA} is set but the 10,000-digit MNIST sample is not in shared/data/mnist-10k \
             beside the checkout nor in SWBNN_MNIST_10K"
        );
        println!(
            "NOTE: skipping: the 10,000-digit MNIST sample is not here (shared/data/mnist-10k \
             beside the checkout, or SWBNN_MNIST_10K)"
        );
    }
    found
}

fn mean_std(data: &InMemoryDataset) -> (f64, f64) {
    let (mut s, mut s2) = (0f64, 0f64);
    for &p in data.pixels() {
        let v = p as f64 / 255.0;
        s += v;
        s2 += v * v;
    }
    let n = data.pixels().len() as f64;
    let mean = s / n;
    (mean, (s2 / n - mean * mean).sqrt())
}

#[test]
fn mnist_10k_loads_with_the_readme_class_counts() {
    let Some(dir) = mnist_10k_dir() else {
        return;
    };
    let data = load_idx_pair(
        dir.join("images-idx3-ubyte.gz"),
        dir.join("labels-idx1-ubyte.gz"),
        10,
    )
    .expect("the shared mnist-10k files load");
    assert_eq!(data.len(), 10_000);
    assert_eq!(data.shape(), (1, 28, 28));
    assert_eq!(data.classes(), 10);
    // Class counts stated in shared/data/mnist-10k/README.md.
    assert_eq!(
        data.class_counts(),
        vec![1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978]
    );
    // A 10k sample of MNIST has statistics close to the full training set's constants.
    let (mean, std) = mean_std(&data);
    assert!(
        (mean - NormStats::MNIST.mean[0] as f64).abs() < 0.005,
        "mean {mean}"
    );
    assert!(
        (std - NormStats::MNIST.std[0] as f64).abs() < 0.005,
        "std {std}"
    );
    // Digits have dark borders: the corner pixel of every image is (near) black.
    for i in 0..data.len() {
        assert!(data.pixels_of(i).unwrap()[0] <= 2);
    }
}

#[test]
fn fashion_mnist_from_debian_if_installed() {
    let dir = Path::new("/usr/share/datasets/fashion-mnist");
    if !DatasetId::FashionMnist.is_present(dir, Split::Train) {
        assert!(
            std::env::var_os(REQUIRE_DATA).is_none(),
            "{REQUIRE_DATA} is set but Fashion-MNIST is not installed"
        );
        println!(
            "NOTE: skipping: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
        );
        return;
    }
    // Found through the standard search order (system folder), without downloading.
    let locator = Locator {
        explicit: None,
        env_dir: None,
        cache_dir: None,
        system_dir: "/usr/share/datasets".into(),
        download: false,
    };
    assert_eq!(
        locator
            .locate(DatasetId::FashionMnist, Split::Train)
            .unwrap(),
        dir
    );
    let train = bnn_data::load_idx_dir(dir, Split::Train).unwrap();
    let test = bnn_data::load_idx_dir(dir, Split::Test).unwrap();
    assert_eq!((train.len(), test.len()), (60_000, 10_000));
    assert_eq!(train.shape(), (1, 28, 28));
    assert_eq!(train.class_counts(), vec![6000; 10]);
    assert_eq!(test.class_counts(), vec![1000; 10]);
    let (mean, std) = mean_std(&train);
    assert!((mean - 0.2860).abs() < 5e-4, "mean {mean}");
    assert!((std - 0.3530).abs() < 5e-4, "std {std}");
    // The opened data set through `open` agrees.
    let opened = bnn_data::open(DatasetId::FashionMnist, Split::Test, &locator).unwrap();
    assert_eq!(opened.len(), 10_000);
    assert_eq!(opened.get(123).unwrap(), test.get(123).unwrap());
}
