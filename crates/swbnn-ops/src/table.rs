//! Regression data for the commands: a table of features and targets (CSV files or a `.npz`
//! whose `y_*` are floating point, [`bnn_data::DataSource::load_tabular`]), opened once, and
//! its standardisation.
//!
//! A regression network sees standardised features and predicts standardised targets; the
//! per-column means and standard deviations are measured on the training rows (the training
//! split less its validation split), stored in the model's configuration
//! ([`bnn_models::TabularInput`]) and applied to every other split from there, never measured
//! again: the validation and test rows are standardised with the training rows' statistics.
//! Predictions come back in the user's units ([`bnn_train::TargetScale`]).

use std::path::Path;
use std::sync::Arc;

use bnn_data::{
    ColumnRole, Compose, DataLoader, DataSource, Dataset, FileDigest, LoaderConfig, Published,
    Standardizer, TabularDataset, file_digests,
};
use bnn_models::{Arch, Kind, ModelConfig, Noise, TabularInput};

use crate::Error;
use crate::data::OpenedSplit;

/// Checks that a regression network on a table's rows is the MLP, the zoo's one architecture
/// on rows of features. The one owner of the rule: `swbnn train` and a reproduction's setup
/// call it.
pub fn check_table_arch(arch: Arch) -> Result<(), Error> {
    if arch != Arch::Mlp {
        return Err(Error::Usage(format!(
            "a regression network on rows of features is an MLP (--arch mlp), not {arch}"
        )));
    }
    Ok(())
}

/// Checks the settings that belong to a regression table, before any data is read: `targets`
/// (the target columns) are named for a CSV data set and only for one, `noise` is set for a
/// table (CSV or `.npz`) only, and `mlp_hidden` (hidden widths) passes the MLP's own checks.
/// The one owner of these rules: `swbnn train`, Python and a reproduction's setup call it, so
/// each gives the same error, in the words of the command line's flags.
pub fn check_table_options(
    dataset: &DataSource,
    targets: &[String],
    noise: Option<Noise>,
    arch: Arch,
    mlp_hidden: Option<&[usize]>,
) -> Result<(), Error> {
    let csv = matches!(dataset, DataSource::Csv(_));
    if !targets.is_empty() && !csv {
        return Err(Error::Usage(format!(
            "--target names the target columns of CSV files; {dataset} is not a csv: data set"
        )));
    }
    if csv && targets.is_empty() {
        return Err(Error::Usage(format!(
            "{dataset} is a table: name its target column(s) with --target NAME (repeatable)"
        )));
    }
    if noise.is_some() && !matches!(dataset, DataSource::Csv(_) | DataSource::Npz(_)) {
        return Err(Error::Usage(format!(
            "--noise sets a regression network's noise model; {dataset} holds images"
        )));
    }
    if let Some(widths) = mlp_hidden {
        // The model's own rules (the MLP's option, its bounds).
        let c = ModelConfig::for_input(arch, Kind::Deterministic, 1, 1, 1)
            .with_mlp_hidden(widths.to_vec());
        c.check_arch_options()
            .and_then(|()| c.validate())
            .map_err(|e| Error::Usage(format!("--mlp-hidden: {e}")))?;
    }
    Ok(())
}

/// A regression data set opened for a command.
pub struct OpenedTable {
    /// The training split, in the user's units, with the digests of the files it came from.
    pub train: OpenedSplit,
    /// The test split, in the user's units, when the source has one.
    pub test: Option<Arc<dyn Dataset>>,
    /// The feature columns' names (a CSV header's; `x0`, `x1`, ... for a `.npz`).
    pub feature_names: Vec<String>,
    /// The target columns' names (`y` for a `.npz` of one target, else `y0`, `y1`, ...).
    pub target_names: Vec<String>,
}

/// `prefix` numbered `0..n` (`prefix` alone when `single` and `n == 1`).
fn numbered(prefix: &str, n: usize, single: bool) -> Vec<String> {
    if single && n == 1 {
        return vec![prefix.to_string()];
    }
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// Opens the regression data set `source`, with the CSV columns `targets` as its targets (a
/// `.npz` names none: its `y_*` are the targets). The file contents are checked as
/// [`DataSource::load_tabular`] reads them (finite numbers, one shape, within the memory
/// budget); the files' SHA-256 are recorded.
pub fn open_table(source: &DataSource, targets: &[String]) -> Result<OpenedTable, Error> {
    let splits = source.load_tabular(targets)?;
    let files: Vec<&Path> = match source {
        DataSource::Csv(csv) => std::iter::once(csv.train.as_path())
            .chain(csv.test.as_deref())
            .collect(),
        other => other.path().into_iter().collect(),
    };
    let mut digests = Vec::new();
    for path in files {
        let (sha256, _) = file_digests(path)?;
        digests.push(FileDigest {
            path: path.to_path_buf(),
            sha256,
            published: Published::Unknown,
        });
    }
    let train = splits.train;
    let feature_names = match train.feature_names() {
        Some(n) => n.to_vec(),
        None => numbered("x", train.feature_dim(), false),
    };
    let target_names = match train.target_names() {
        Some(n) => n.to_vec(),
        None => numbered("y", train.target_dim(), true),
    };
    let dir = source
        .path()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Ok(OpenedTable {
        train: OpenedSplit {
            data: Arc::new(train),
            dir,
            files: digests,
        },
        test: splits.test.map(|t| Arc::new(t) as Arc<dyn Dataset>),
        feature_names,
        target_names,
    })
}

/// Every row of `data` (a regression data set), as `(features, targets)` row-major.
fn rows(data: &dyn Dataset) -> Result<(Vec<f32>, Vec<f32>), Error> {
    let (c, h, w) = data.shape();
    let (d, t) = (c * h * w, data.target_dim());
    let mut x = Vec::with_capacity(data.len() * d);
    let mut y = Vec::with_capacity(data.len() * t);
    for i in 0..data.len() {
        data.append_row(i, &mut x, &mut y)?;
    }
    Ok((x, y))
}

/// The standardisation of a regression network trained on the rows `train` (in the user's
/// units): the mean and population standard deviation of each feature and target column,
/// with the columns' names. A constant target is an error ("zero variance"); a constant
/// feature is centred and kept at scale 1.
pub fn fit_tabular(
    train: &dyn Dataset,
    feature_names: &[String],
    target_names: &[String],
) -> Result<TabularInput, Error> {
    let (x, y) = rows(train)?;
    let (c, h, w) = train.shape();
    let features = Standardizer::fit(&x, c * h * w, ColumnRole::Feature, Some(feature_names))?;
    let targets = Standardizer::fit(
        &y,
        train.target_dim(),
        ColumnRole::Target,
        Some(target_names),
    )?;
    Ok(TabularInput {
        feature_names: feature_names.to_vec(),
        target_names: target_names.to_vec(),
        feature_mean: features.mean().to_vec(),
        feature_std: features.std().to_vec(),
        target_mean: targets.mean().to_vec(),
        target_std: targets.std().to_vec(),
    })
}

/// The rows of `data` brought to a network's scale by its record `tabular`: features
/// standardised, and targets too when `targets` is set (training data; evaluation keeps the
/// targets in the user's units, to compare predictions brought back to them). A new data set
/// in memory.
pub fn standardized(
    data: &dyn Dataset,
    tabular: &TabularInput,
    targets: bool,
) -> Result<Arc<dyn Dataset>, Error> {
    let (x, y) = rows(data)?;
    let (d, t) = (tabular.features(), tabular.targets());
    let mut table = TabularDataset::new(x, y, d, t)?;
    let features = Standardizer::new(tabular.feature_mean.clone(), tabular.feature_std.clone())?;
    if targets {
        let scale = Standardizer::new(tabular.target_mean.clone(), tabular.target_std.clone())?;
        table.standardize(&features, &scale)?;
    } else {
        table.standardize_features(&features)?;
    }
    Ok(Arc::new(table))
}

/// Checks that a table of the columns `features` and `targets` fits the regression network of
/// `config` (the same feature columns in the same order, the same targets): the error names
/// `what` and the first column that differs. A classifier is an error.
pub fn check_columns(
    config: &ModelConfig,
    features: &[String],
    targets: &[String],
    what: &str,
) -> Result<(), Error> {
    let Some(tabular) = &config.tabular else {
        return Err(Error::Usage(format!(
            "the model is a classifier of images; {what} is a regression table"
        )));
    };
    for (kind, want, have) in [
        ("feature", &tabular.feature_names, features),
        ("target", &tabular.target_names, targets),
    ] {
        if want.as_slice() != have {
            let at = want.iter().zip(have).position(|(a, b)| a != b);
            let detail = match at {
                Some(j) => format!(
                    "{kind} column {j} is `{}`, the model's `{}`",
                    have[j], want[j]
                ),
                None => format!(
                    "{} {kind} columns, the model has {}",
                    have.len(),
                    want.len()
                ),
            };
            return Err(Error::DataMismatch {
                what: what.to_string(),
                found: detail,
                expected: format!("{kind}s {}", want.join(", ")),
            });
        }
    }
    Ok(())
}

/// The target columns a command reads for the regression network of `config`: `given` when
/// not empty (they must be the model's), else the model's own. For a `.npz`, whose targets
/// are its `y_*` arrays, none are named.
pub fn target_columns(
    config: &ModelConfig,
    source: &DataSource,
    given: &[String],
) -> Result<Vec<String>, Error> {
    if !matches!(source, DataSource::Csv(_)) {
        return Ok(Vec::new());
    }
    let Some(tabular) = &config.tabular else {
        return Ok(given.to_vec());
    };
    if !given.is_empty() && given != tabular.target_names.as_slice() {
        return Err(Error::Usage(format!(
            "--target {}: the model predicts {}",
            given.join(", "),
            tabular.target_names.join(", ")
        )));
    }
    Ok(tabular.target_names.clone())
}

/// Opens the table `source` for the regression network of `config` saved at `model`: its
/// target columns ([`target_columns`]), the files compared with what it trained on (a warning
/// when they differ) and its columns checked against the model's ([`check_columns`], naming
/// `what` in the error).
pub fn open_model_table(
    model: &Path,
    config: &ModelConfig,
    source: &DataSource,
    what: &str,
) -> Result<OpenedTable, Error> {
    let targets = target_columns(config, source, &[])?;
    let table = open_table(source, &targets)?;
    crate::data::check_trained_on(model, config, source, &table.train);
    check_columns(config, &table.feature_names, &table.target_names, what)?;
    Ok(table)
}

/// The Monte-Carlo predictive of the regression network `net` (of the record `tabular`) on
/// `rows` (the user's units), in the user's units, with the device's generator held and seeded
/// by `seed`: what `eval` and `calibrate` measure, `samples` checked against the rows first.
pub fn predict_rows(
    net: &bnn_models::Network,
    tabular: &TabularInput,
    rows: &dyn Dataset,
    samples: usize,
    seed: u64,
    workers: usize,
    device: &burn::prelude::Device,
) -> Result<bnn_train::RegressionPredictions, Error> {
    crate::limits::check_samples(samples, rows.len(), "the rows").map_err(Error::Usage)?;
    let loader = table_loader(standardized(rows, tabular, false)?, 256, false, 0, workers)?;
    let _rng = bnn_layers::lock_device_rng();
    device.seed(seed);
    let scale = bnn_train::TargetScale {
        mean: &tabular.target_mean,
        std: &tabular.target_std,
    };
    Ok(bnn_train::predict_regression(
        net,
        &loader,
        samples,
        Some(scale),
    )?)
}

/// A loader over rows already at the network's scale ([`standardized`]): no transform,
/// `shuffle` for training (an order per epoch from `seed`), data-set order otherwise.
pub fn table_loader(
    data: Arc<dyn Dataset>,
    batch_size: usize,
    shuffle: bool,
    seed: u64,
    workers: usize,
) -> Result<DataLoader, Error> {
    let config = LoaderConfig {
        batch_size,
        shuffle,
        drop_last: false,
        seed,
        workers,
        prefetch: 4,
    };
    Ok(DataLoader::from_arcs(
        data,
        Arc::new(Compose::new()),
        config,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, n: usize) -> Vec<String> {
        numbered(prefix, n, false)
    }

    /// The training rows' statistics, applied to other rows: features and targets
    /// standardised with the training split's means and stds, not their own.
    #[test]
    fn standardisation_is_measured_on_training_rows_and_applied_elsewhere() {
        // Feature 0: 1, 2, 3, 6 (mean 3, std sqrt 3.5); feature 1 constant; target 2 x f0.
        let x = vec![1.0, 5.0, 2.0, 5.0, 3.0, 5.0, 6.0, 5.0];
        let y = vec![2.0, 4.0, 6.0, 12.0];
        let train = TabularDataset::new(x, y, 2, 1).unwrap();
        let tab = fit_tabular(&train, &names("x", 2), &["y".to_string()]).unwrap();
        assert_eq!(tab.feature_mean, vec![3.0, 5.0]);
        assert_eq!(tab.feature_std[1], 1.0);
        assert_eq!(tab.target_mean, vec![6.0]);
        let other = TabularDataset::new(vec![3.0, 6.0], vec![6.0], 2, 1).unwrap();
        let z = standardized(&other, &tab, true).unwrap();
        let (zx, zy) = rows(z.as_ref()).unwrap();
        assert_eq!(zx, vec![0.0, 1.0]);
        assert_eq!(zy, vec![0.0]);
        let kept = standardized(&other, &tab, false).unwrap();
        assert_eq!(rows(kept.as_ref()).unwrap().1, vec![6.0]);
        // A constant target cannot be standardised: the error says so.
        let flat = TabularDataset::new(vec![1.0, 2.0], vec![4.0, 4.0], 1, 1).unwrap();
        let e = fit_tabular(&flat, &names("x", 1), &["y".to_string()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("constant") || e.contains("zero variance"), "{e}");
    }

    #[test]
    fn columns_that_differ_from_the_models_are_named() {
        let tab = TabularInput {
            feature_names: names("x", 2),
            target_names: vec!["y".into()],
            feature_mean: vec![0.0; 2],
            feature_std: vec![1.0; 2],
            target_mean: vec![0.0],
            target_std: vec![1.0],
        };
        let config = ModelConfig::regression(bnn_models::Kind::Bayesian, tab, Default::default());
        check_columns(&config, &names("x", 2), &["y".to_string()], "test data").unwrap();
        let e = check_columns(
            &config,
            &["x0".into(), "z".into()],
            &["y".into()],
            "test data",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("feature column 1 is `z`"), "{e}");
        let e = check_columns(&config, &names("x", 3), &["y".into()], "test data")
            .unwrap_err()
            .to_string();
        assert!(e.contains("3 feature columns"), "{e}");
        let csv: DataSource = "csv:a.csv".parse().unwrap();
        assert_eq!(target_columns(&config, &csv, &[]).unwrap(), vec!["y"]);
        assert!(target_columns(&config, &csv, &["z".into()]).is_err());
    }
}
