//! Tabular (regression) data held in memory: `f32` features `[n, d]` and `f32` targets
//! `[n, t]`, both row-major, with optional column names.
//!
//! Every value is finite and every shape consistent once a [`TabularDataset`] exists: the
//! readers ([`crate::read_csv`], [`crate::read_npz_tabular`]) and [`TabularDataset::new`]
//! refuse anything else with an error naming the row and column (and the file when there is
//! one). Rows are counted from 0 in these errors, as NumPy indexes them; the CSV reader names
//! the 1-based line of the file instead.

use std::path::{Path, PathBuf};

use crate::dataset::{Dataset, Sample};
use crate::error::{DataError, Result};
use crate::standardize::{ColumnRole, Standardizer, column_label};

/// The most bytes the values of one tabular data set read from a file may take, on any
/// machine: a ceiling over the memory budget ([`crate::memory_budget`]), which is what bounds a
/// read on a machine with less (as [`crate::MAX_NPY_BYTES`] for `.npz` files).
pub const MAX_TABULAR_BYTES: u64 = 16 << 30;

/// A regression data set: `len()` rows, each of `feature_dim()` features and `target_dim()`
/// targets, every value finite.
#[derive(Debug, Clone, PartialEq)]
pub struct TabularDataset {
    features: Vec<f32>,
    targets: Vec<f32>,
    rows: usize,
    feature_dim: usize,
    target_dim: usize,
    feature_names: Option<Vec<String>>,
    target_names: Option<Vec<String>>,
    source: Option<PathBuf>,
}

/// The splits a tabular file (or pair of files) holds: a training split and, optionally, a test
/// split with the same columns.
#[derive(Debug, Clone, PartialEq)]
pub struct TabularSplits {
    /// The training rows.
    pub train: TabularDataset,
    /// The test rows, when the source has them.
    pub test: Option<TabularDataset>,
}

/// An error about `source` (a file when known, else the caller's arrays).
fn fail(source: Option<&Path>, reason: String) -> DataError {
    match source {
        Some(path) => DataError::format(path, reason),
        None => DataError::Config(reason),
    }
}

/// The first value of `values` (rows of `width`) that is NaN or infinite, as an error naming its
/// row and column.
fn check_finite(
    values: &[f32],
    width: usize,
    names: Option<&[String]>,
    kind: &str,
    source: Option<&Path>,
) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(at) => Err(fail(
            source,
            format!(
                "row {} (counted from 0), {}: {} is not finite (NaN and infinity are refused; \
                 missing values are not supported)",
                at / width,
                column_label(names, kind, at % width),
                values[at]
            ),
        )),
    }
}

/// Checks that `names` (when given) has one distinct name per column.
fn check_names(
    names: Option<&[String]>,
    width: usize,
    kind: &str,
    source: Option<&Path>,
) -> Result<()> {
    let Some(names) = names else {
        return Ok(());
    };
    if names.len() != width {
        return Err(fail(
            source,
            format!("{} {kind} names for {width} {kind} columns", names.len()),
        ));
    }
    for (j, name) in names.iter().enumerate() {
        if let Some(first) = names[..j].iter().position(|n| n == name) {
            return Err(fail(
                source,
                format!("{kind} name `{name}` is given twice (columns {first} and {j})"),
            ));
        }
    }
    Ok(())
}

impl TabularDataset {
    /// Builds a data set from row-major `features` (`feature_dim` per row) and `targets`
    /// (`target_dim` per row), without column names.
    ///
    /// Fails when a width is 0, the buffers do not hold the same whole number of rows, there is
    /// no row, or a value is NaN or infinite (the error names its row and column).
    pub fn new(
        features: Vec<f32>,
        targets: Vec<f32>,
        feature_dim: usize,
        target_dim: usize,
    ) -> Result<Self> {
        Self::build(
            None,
            features,
            targets,
            (feature_dim, target_dim),
            None,
            None,
        )
    }

    /// The same data set with column names: one distinct name per feature and per target
    /// column.
    pub fn with_names(
        mut self,
        feature_names: Vec<String>,
        target_names: Vec<String>,
    ) -> Result<Self> {
        let source = self.source.as_deref();
        check_names(Some(&feature_names), self.feature_dim, "feature", source)?;
        check_names(Some(&target_names), self.target_dim, "target", source)?;
        self.feature_names = Some(feature_names);
        self.target_names = Some(target_names);
        Ok(self)
    }

    /// [`TabularDataset::new`] for data read from `source` (named in every error), with
    /// optional names; `dims` is `(feature_dim, target_dim)`.
    pub(crate) fn build(
        source: Option<&Path>,
        features: Vec<f32>,
        targets: Vec<f32>,
        dims: (usize, usize),
        feature_names: Option<Vec<String>>,
        target_names: Option<Vec<String>>,
    ) -> Result<Self> {
        let (d, t) = dims;
        if d == 0 {
            return Err(fail(
                source,
                "no feature column: rows need at least one".into(),
            ));
        }
        if t == 0 {
            return Err(fail(
                source,
                "no target column: rows need at least one".into(),
            ));
        }
        if !features.len().is_multiple_of(d) {
            return Err(fail(
                source,
                format!(
                    "{} feature values do not fill whole rows of {d} features",
                    features.len()
                ),
            ));
        }
        let rows = features.len() / d;
        if rows == 0 {
            return Err(fail(
                source,
                "no rows: a data set needs at least one".into(),
            ));
        }
        if Some(targets.len()) != rows.checked_mul(t) {
            return Err(fail(
                source,
                format!(
                    "{rows} rows of features and {} target values: {t} targets per row need {}",
                    targets.len(),
                    rows.saturating_mul(t)
                ),
            ));
        }
        check_names(feature_names.as_deref(), d, "feature", source)?;
        check_names(target_names.as_deref(), t, "target", source)?;
        check_finite(&features, d, feature_names.as_deref(), "feature", source)?;
        check_finite(&targets, t, target_names.as_deref(), "target", source)?;
        Ok(TabularDataset {
            features,
            targets,
            rows,
            feature_dim: d,
            target_dim: t,
            feature_names,
            target_names,
            source: source.map(Path::to_path_buf),
        })
    }

    /// Number of rows (`n`, at least 1).
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Always `false`: a data set holds at least one row.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Features per row (`d`, at least 1).
    pub fn feature_dim(&self) -> usize {
        self.feature_dim
    }

    /// Targets per row (`t`, at least 1).
    pub fn target_dim(&self) -> usize {
        self.target_dim
    }

    /// All features, row-major `[n, d]`.
    pub fn features(&self) -> &[f32] {
        &self.features
    }

    /// All targets, row-major `[n, t]`.
    pub fn targets(&self) -> &[f32] {
        &self.targets
    }

    /// The feature columns' names, when the source has them (a CSV header).
    pub fn feature_names(&self) -> Option<&[String]> {
        self.feature_names.as_deref()
    }

    /// The target columns' names, when the source has them (a CSV header).
    pub fn target_names(&self) -> Option<&[String]> {
        self.target_names.as_deref()
    }

    /// The file the data was read from, if any.
    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// The features and targets of row `index`.
    pub fn row(&self, index: usize) -> Result<(&[f32], &[f32])> {
        if index >= self.rows {
            return Err(DataError::IndexOutOfRange {
                index,
                len: self.rows,
            });
        }
        let (d, t) = (self.feature_dim, self.target_dim);
        Ok((
            &self.features[index * d..(index + 1) * d],
            &self.targets[index * t..(index + 1) * t],
        ))
    }

    /// The features and targets, giving up the data set.
    pub fn into_parts(self) -> (Vec<f32>, Vec<f32>) {
        (self.features, self.targets)
    }

    /// Splits off the last `k` rows as a validation split: returned as `(train, validation)`,
    /// both in the original order, with the same names and source. Deterministic (no seed): the
    /// same file always gives the same split, as a run's validation split must; shuffle a file
    /// whose rows are sorted (by time, by target) before reading it, or the validation rows
    /// are not like the rest.
    ///
    /// `k` must leave at least one training row and take at least one: `0 < k < len()`.
    pub fn split_last(mut self, k: usize) -> Result<(Self, Self)> {
        if k == 0 || k >= self.rows {
            return Err(fail(
                self.source.as_deref(),
                format!(
                    "a validation split of {k} rows from {} rows: it must hold at least one row \
                     and leave at least one for training",
                    self.rows
                ),
            ));
        }
        let keep = self.rows - k;
        let validation = TabularDataset {
            features: self.features.split_off(keep * self.feature_dim),
            targets: self.targets.split_off(keep * self.target_dim),
            rows: k,
            feature_dim: self.feature_dim,
            target_dim: self.target_dim,
            feature_names: self.feature_names.clone(),
            target_names: self.target_names.clone(),
            source: self.source.clone(),
        };
        self.features.shrink_to_fit();
        self.targets.shrink_to_fit();
        self.rows = keep;
        Ok((self, validation))
    }

    /// A [`Standardizer`] of these features: call it on the training split, never the test
    /// split. A constant column takes `std = 1` ([`Standardizer::fit`]).
    pub fn fit_feature_standardizer(&self) -> Result<Standardizer> {
        Standardizer::fit(
            self.features(),
            self.feature_dim(),
            ColumnRole::Feature,
            self.feature_names(),
        )
    }

    /// A [`Standardizer`] of these targets: call it on the training split, never the test
    /// split. A constant column is an error ([`Standardizer::fit`]).
    pub fn fit_target_standardizer(&self) -> Result<Standardizer> {
        Standardizer::fit(
            self.targets(),
            self.target_dim(),
            ColumnRole::Target,
            self.target_names(),
        )
    }

    /// Standardises the features with `features` and the targets with `targets` in place
    /// (both fitted on the training split: [`TabularDataset::fit_feature_standardizer`],
    /// [`TabularDataset::fit_target_standardizer`]). Nothing changes when either fails: a width that differs
    /// from the data set's, or a value standardised beyond `f32`'s range.
    pub fn standardize(&mut self, features: &Standardizer, targets: &Standardizer) -> Result<()> {
        features.check_apply(&self.features, self.feature_names.as_deref(), "feature")?;
        targets.check_apply(&self.targets, self.target_names.as_deref(), "target")?;
        features.apply_unchecked(&mut self.features);
        targets.apply_unchecked(&mut self.targets);
        Ok(())
    }

    /// Standardises the features alone with `features` (fitted on the training split), in
    /// place: data a model is evaluated on, whose targets stay in the user's units. Nothing
    /// changes when it fails (as [`TabularDataset::standardize`]).
    pub fn standardize_features(&mut self, features: &Standardizer) -> Result<()> {
        features.check_apply(&self.features, self.feature_names.as_deref(), "feature")?;
        features.apply_unchecked(&mut self.features);
        Ok(())
    }
}

/// A regression data set is a [`Dataset`] of rows: no classes, no images, `shape()`
/// `(1, 1, feature_dim)`, its rows read with [`Dataset::append_row`]. So the batch loader,
/// subsets and validation splits take it as they take images.
impl Dataset for TabularDataset {
    fn len(&self) -> usize {
        self.rows
    }

    fn classes(&self) -> usize {
        0
    }

    fn shape(&self) -> (usize, usize, usize) {
        (1, 1, self.feature_dim)
    }

    fn get(&self, index: usize) -> Result<Sample> {
        Err(fail(
            self.source.as_deref(),
            format!("row {index} is a row of features and targets, not a labelled image"),
        ))
    }

    fn label(&self, index: usize) -> Result<u32> {
        Err(fail(
            self.source.as_deref(),
            format!("row {index} has targets, not a class label"),
        ))
    }

    fn target_dim(&self) -> usize {
        self.target_dim
    }

    fn append_row(
        &self,
        index: usize,
        features: &mut Vec<f32>,
        targets: &mut Vec<f32>,
    ) -> Result<()> {
        let (x, y) = self.row(index)?;
        features.extend_from_slice(x);
        targets.extend_from_slice(y);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i}")).collect()
    }

    #[test]
    fn rows_names_and_accessors() {
        let x: Vec<f32> = (0..6).map(|v| v as f32).collect();
        let y = vec![10.0, 11.0, 12.0];
        let data = TabularDataset::new(x, y, 2, 1)
            .unwrap()
            .with_names(names("x", 2), vec!["y".into()])
            .unwrap();
        assert_eq!(
            (data.len(), data.feature_dim(), data.target_dim()),
            (3, 2, 1)
        );
        assert!(!data.is_empty());
        assert_eq!(data.row(1).unwrap(), (&[2.0, 3.0][..], &[11.0][..]));
        assert_eq!(data.feature_names().unwrap(), ["x0", "x1"]);
        assert_eq!(data.target_names().unwrap(), ["y"]);
        assert!(matches!(
            data.row(3),
            Err(DataError::IndexOutOfRange { index: 3, len: 3 })
        ));
        assert!(data.source().is_none());
    }

    #[test]
    fn bad_shapes_and_values_are_refused_naming_the_row_and_column() {
        let err = |x: Vec<f32>, y: Vec<f32>, d: usize, t: usize| {
            TabularDataset::new(x, y, d, t).unwrap_err().to_string()
        };
        assert!(err(vec![1.0], vec![1.0], 0, 1).contains("no feature column"));
        assert!(err(vec![1.0], vec![1.0], 1, 0).contains("no target column"));
        assert!(err(vec![], vec![], 2, 1).contains("no rows"));
        assert!(err(vec![1.0; 3], vec![1.0], 2, 1).contains("whole rows of 2"));
        let e = err(vec![1.0; 4], vec![1.0; 3], 2, 1);
        assert!(e.contains("2 rows") && e.contains("3 target values"), "{e}");
        let e = err(vec![0.0, 1.0, 2.0, f32::NAN], vec![0.0; 2], 2, 1);
        assert!(
            e.contains("row 1") && e.contains("feature 1") && e.contains("NaN"),
            "{e}"
        );
        let e = err(vec![0.0; 4], vec![0.0, f32::INFINITY], 2, 1);
        assert!(
            e.contains("row 1") && e.contains("target 0") && e.contains("inf"),
            "{e}"
        );
        // With a file, the file is named; with names, the column is named.
        let e = TabularDataset::build(
            Some(Path::new("data/t.npz")),
            vec![0.0, f32::NEG_INFINITY],
            vec![0.0],
            (2, 1),
            Some(names("x", 2)),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("data/t.npz") && e.contains("row 0") && e.contains("feature `x1`"),
            "{e}"
        );
        let data = TabularDataset::new(vec![0.0; 2], vec![0.0; 2], 1, 1).unwrap();
        let e = data
            .clone()
            .with_names(vec!["a".into(), "b".into()], vec!["y".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 feature names for 1"), "{e}");
        let e = TabularDataset::new(vec![0.0; 4], vec![0.0; 2], 2, 1)
            .unwrap()
            .with_names(vec!["a".into(), "a".into()], vec!["y".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`a` is given twice"), "{e}");
    }

    #[test]
    fn the_validation_split_is_the_last_rows() {
        let x: Vec<f32> = (0..10).map(|v| v as f32).collect();
        let y: Vec<f32> = (0..5).map(|v| 100.0 + v as f32).collect();
        let data = TabularDataset::new(x, y, 2, 1).unwrap();
        let (train, val) = data.clone().split_last(2).unwrap();
        assert_eq!(train.len(), 3);
        assert_eq!(train.features(), &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(train.targets(), &[100.0, 101.0, 102.0]);
        assert_eq!(val.len(), 2);
        assert_eq!(val.features(), &[6.0, 7.0, 8.0, 9.0]);
        assert_eq!(val.targets(), &[103.0, 104.0]);
        for k in [0, 5, 6] {
            let e = data.clone().split_last(k).unwrap_err().to_string();
            assert!(e.contains(&format!("{k} rows from 5")), "{e}");
        }
    }

    #[test]
    fn a_data_set_is_standardised_with_its_training_fit() {
        let train = TabularDataset::new(
            vec![1.0, 10.0, 2.0, 10.0, 3.0, 10.0, 6.0, 10.0],
            vec![1.0, 2.0, 3.0, 4.0],
            2,
            1,
        )
        .unwrap();
        let fx = train.fit_feature_standardizer().unwrap();
        let fy = train.fit_target_standardizer().unwrap();
        assert_eq!(fy.mean(), &[2.5]);
        let mut test = TabularDataset::new(vec![3.0, 12.0], vec![2.5], 2, 1).unwrap();
        test.standardize(&fx, &fy).unwrap();
        assert_eq!(test.features(), &[0.0, 2.0]);
        assert_eq!(test.targets(), &[0.0]);
        // Widths that differ: an error, nothing changed.
        let mut other = TabularDataset::new(vec![3.0], vec![2.5], 1, 1).unwrap();
        assert!(other.standardize(&fx, &fy).is_err());
        assert_eq!(other.features(), &[3.0]);
    }
}
