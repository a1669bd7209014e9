//! Per-column standardisation of tabular data: `(x - mean) / std`, fitted on the training
//! split only and stored with the model, so that test data, predictions and predictive
//! standard deviations can be brought to and from the standardised scale.

use crate::error::{DataError, Result};

/// How an error names column `j` of the `kind` ("feature" or "target") columns.
pub(crate) fn column_label(names: Option<&[String]>, kind: &str, j: usize) -> String {
    match names.and_then(|n| n.get(j)) {
        Some(name) => format!("{kind} `{name}`"),
        None => format!("{kind} {j}"),
    }
}

/// Which columns a [`Standardizer`] is fitted on: the rule for a constant column differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnRole {
    /// Inputs: a constant column is kept with `std = 1` (it is only centred).
    Feature,
    /// Outputs: a constant column is an error ("constant target: zero variance").
    Target,
}

impl ColumnRole {
    fn kind(self) -> &'static str {
        match self {
            ColumnRole::Feature => "feature",
            ColumnRole::Target => "target",
        }
    }
}

/// Per-column mean and population standard deviation (divisor `n`), accumulated in `f64`.
///
/// [`Standardizer::apply`] maps `x` to `(x - mean) / std`, [`Standardizer::invert`] maps it
/// back, and [`Standardizer::invert_std`] scales standard deviations (a model's predictive
/// spread) back to the original units. Serialised as `{"mean": [...], "std": [...]}`; reading
/// one checks it (equal lengths, at least one column, finite means, finite positive standard
/// deviations), so a damaged model file cannot divide by zero.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "StandardizerFields")]
pub struct Standardizer {
    mean: Vec<f64>,
    std: Vec<f64>,
}

/// The serialised form of a [`Standardizer`], checked on the way in.
#[derive(serde::Deserialize)]
struct StandardizerFields {
    mean: Vec<f64>,
    std: Vec<f64>,
}

impl TryFrom<StandardizerFields> for Standardizer {
    type Error = String;

    fn try_from(f: StandardizerFields) -> std::result::Result<Self, String> {
        if f.mean.is_empty() || f.mean.len() != f.std.len() {
            return Err(format!(
                "a standardizer needs one mean and one std per column, at least one: found {} \
                 means and {} stds",
                f.mean.len(),
                f.std.len()
            ));
        }
        if let Some(j) = f.mean.iter().position(|m| !m.is_finite()) {
            return Err(format!(
                "standardizer column {j}: mean {} is not finite",
                f.mean[j]
            ));
        }
        if let Some(j) = f.std.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(format!(
                "standardizer column {j}: std {} is not finite and positive",
                f.std[j]
            ));
        }
        Ok(Standardizer {
            mean: f.mean,
            std: f.std,
        })
    }
}

impl Standardizer {
    /// Fits the columns of `values` (row-major, `columns` per row) with `role`'s rule for a
    /// constant column; `names` (one per column, optional) name the columns in errors.
    ///
    /// A constant feature column (every row the same value) takes `std = 1`: it carries no
    /// information, it must not divide by zero, and centring it to 0 keeps it harmless (a
    /// test row that differs from it keeps its difference, in the original units). A constant
    /// target column is an error: standardising it would divide by zero, and a model has
    /// nothing to learn from it.
    ///
    /// Fails when `columns` is 0, `values` is not a whole number of rows, there is no row, or
    /// a value is NaN or infinite (naming the row, from 0, and the column).
    pub fn fit(
        values: &[f32],
        columns: usize,
        role: ColumnRole,
        names: Option<&[String]>,
    ) -> Result<Self> {
        let kind = role.kind();
        if columns == 0 {
            return Err(DataError::Config(format!(
                "cannot standardise 0 {kind} columns"
            )));
        }
        if !values.len().is_multiple_of(columns) || values.is_empty() {
            return Err(DataError::Config(format!(
                "{} values are not a whole, non-zero number of rows of {columns} {kind}s",
                values.len()
            )));
        }
        if let Some(n) = names.filter(|n| n.len() != columns) {
            return Err(DataError::Config(format!(
                "{} {kind} names for {columns} columns",
                n.len()
            )));
        }
        if let Some(at) = values.iter().position(|v| !v.is_finite()) {
            return Err(DataError::Config(format!(
                "row {} (counted from 0), {}: {} is not finite",
                at / columns,
                column_label(names, kind, at % columns),
                values[at]
            )));
        }
        let rows = values.len() / columns;
        let mut sum = vec![0f64; columns];
        let mut lo = vec![f32::INFINITY; columns];
        let mut hi = vec![f32::NEG_INFINITY; columns];
        for row in values.chunks_exact(columns) {
            for (j, &v) in row.iter().enumerate() {
                sum[j] += v as f64;
                lo[j] = lo[j].min(v);
                hi[j] = hi[j].max(v);
            }
        }
        let mean: Vec<f64> = sum.iter().map(|s| s / rows as f64).collect();
        // Two passes: the squared deviations from the mean, which loses no precision to
        // cancellation as the sum of squares less the squared sum does.
        let mut squares = vec![0f64; columns];
        for row in values.chunks_exact(columns) {
            for (j, &v) in row.iter().enumerate() {
                let d = v as f64 - mean[j];
                squares[j] += d * d;
            }
        }
        let mut std = Vec::with_capacity(columns);
        for j in 0..columns {
            let s = (squares[j] / rows as f64).sqrt();
            // Equal extremes: constant, whatever rounding left in `s`.
            if lo[j] == hi[j] || !(s.is_finite() && s > 0.0) {
                match role {
                    ColumnRole::Feature => std.push(1.0),
                    ColumnRole::Target => {
                        return Err(DataError::Config(format!(
                            "{}: constant target: zero variance (every one of the {rows} \
                             training rows holds {}); it cannot be standardised, and there is \
                             nothing to learn: drop the column",
                            column_label(names, kind, j),
                            lo[j]
                        )));
                    }
                }
            } else {
                std.push(s);
            }
        }
        Ok(Standardizer { mean, std })
    }

    /// A standardizer of the given per-column means and standard deviations (a model's
    /// record), checked as a deserialised one: one of each per column, at least one column,
    /// finite means, finite positive standard deviations.
    pub fn new(mean: Vec<f64>, std: Vec<f64>) -> Result<Self> {
        Standardizer::try_from(StandardizerFields { mean, std }).map_err(DataError::Config)
    }

    /// Number of columns.
    pub fn columns(&self) -> usize {
        self.mean.len()
    }

    /// The per-column means.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// The per-column standard deviations used (1 for a constant feature).
    pub fn std(&self) -> &[f64] {
        &self.std
    }

    /// Checks that `values` is whole rows of [`Standardizer::columns`] and that `map` of each
    /// value (with its column) stays within `f32`'s range.
    fn check(
        &self,
        values: &[f32],
        names: Option<&[String]>,
        kind: &str,
        map: impl Fn(f64, usize) -> f64,
    ) -> Result<()> {
        let columns = self.columns();
        if !values.len().is_multiple_of(columns) {
            return Err(DataError::Config(format!(
                "{} values are not whole rows of the standardizer's {columns} {kind} columns",
                values.len()
            )));
        }
        for (at, &v) in values.iter().enumerate() {
            let out = map(v as f64, at % columns);
            if !(out as f32).is_finite() {
                return Err(DataError::Config(format!(
                    "row {} (counted from 0), {}: {v} maps to {out}, which is not a finite f32",
                    at / columns,
                    column_label(names, kind, at % columns)
                )));
            }
        }
        Ok(())
    }

    /// [`Standardizer::apply`]'s checks, without changing anything.
    pub(crate) fn check_apply(
        &self,
        values: &[f32],
        names: Option<&[String]>,
        kind: &str,
    ) -> Result<()> {
        self.check(values, names, kind, |v, j| (v - self.mean[j]) / self.std[j])
    }

    /// [`Standardizer::apply`] once checked.
    pub(crate) fn apply_unchecked(&self, values: &mut [f32]) {
        let columns = self.columns();
        for (at, v) in values.iter_mut().enumerate() {
            let j = at % columns;
            *v = ((*v as f64 - self.mean[j]) / self.std[j]) as f32;
        }
    }

    /// Standardises `values` (row-major, [`Standardizer::columns`] per row) in place:
    /// `(x - mean) / std`. Fails, changing nothing, when `values` is not whole rows or a result
    /// is beyond `f32`'s range.
    pub fn apply(&self, values: &mut [f32]) -> Result<()> {
        self.check_apply(values, None, "column")?;
        self.apply_unchecked(values);
        Ok(())
    }

    /// Undoes [`Standardizer::apply`] in place: `z * std + mean` (model predictions back to the
    /// original units). Fails, changing nothing, as [`Standardizer::apply`] does.
    pub fn invert(&self, values: &mut [f32]) -> Result<()> {
        self.check(values, None, "column", |z, j| {
            z * self.std[j] + self.mean[j]
        })?;
        let columns = self.columns();
        for (at, v) in values.iter_mut().enumerate() {
            let j = at % columns;
            *v = (*v as f64 * self.std[j] + self.mean[j]) as f32;
        }
        Ok(())
    }

    /// Scales standard deviations on the standardised scale (a model's predictive spread, one
    /// per column) back to the original units in place: `s * std`, without the mean (a spread
    /// is not shifted). Variances scale by `std²`: take the square root first. Fails, changing
    /// nothing, as [`Standardizer::apply`] does.
    pub fn invert_std(&self, stds: &mut [f32]) -> Result<()> {
        self.check(stds, None, "column", |s, j| s * self.std[j])?;
        let columns = self.columns();
        for (at, s) in stds.iter_mut().enumerate() {
            *s = (*s as f64 * self.std[at % columns]) as f32;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-5)
    }

    /// Column 0: 1, 2, 3, 6 (mean 3, population variance (4 + 1 + 0 + 9) / 4 = 3.5);
    /// column 1: 10, 10, 10, 10 (constant).
    fn values() -> Vec<f32> {
        vec![1.0, 10.0, 2.0, 10.0, 3.0, 10.0, 6.0, 10.0]
    }

    #[test]
    fn fits_hand_computed_means_and_population_stds() {
        let s = Standardizer::fit(&values(), 2, ColumnRole::Feature, None).unwrap();
        assert_eq!(s.columns(), 2);
        assert_eq!(s.mean(), &[3.0, 10.0]);
        assert!((s.std()[0] - 3.5f64.sqrt()).abs() < 1e-12, "{:?}", s.std());
        // A constant feature is centred and kept at scale 1.
        assert_eq!(s.std()[1], 1.0);
        let mut v = values();
        s.apply(&mut v).unwrap();
        let r = 3.5f32.sqrt();
        let want = [-2.0 / r, 0.0, -1.0 / r, 0.0, 0.0, 0.0, 3.0 / r, 0.0];
        assert!(close(&v, &want), "{v:?}");
        s.invert(&mut v).unwrap();
        assert!(close(&v, &values()), "{v:?}");
        let mut spread = vec![1.0, 2.0, 0.5, 0.0];
        s.invert_std(&mut spread).unwrap();
        assert!(close(&spread, &[r, 2.0, 0.5 * r, 0.0]), "{spread:?}");
    }

    #[test]
    fn f64_accumulation_keeps_a_large_offset_precise() {
        // 1e6 + {0, 1, 2, 3}: mean 1e6 + 1.5, std sqrt(1.25).
        let v: Vec<f32> = (0..4).map(|i| 1.0e6 + i as f32).collect();
        let s = Standardizer::fit(&v, 1, ColumnRole::Target, None).unwrap();
        assert_eq!(s.mean(), &[1_000_001.5]);
        assert!((s.std()[0] - 1.25f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn a_constant_target_and_bad_input_are_errors_naming_the_column() {
        let names = vec!["price".to_string(), "rent".to_string()];
        let e = Standardizer::fit(&values(), 2, ColumnRole::Target, Some(&names))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("target `rent`") && e.contains("constant target: zero variance"),
            "{e}"
        );
        let e = Standardizer::fit(&[1.0, f32::NAN], 2, ColumnRole::Feature, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("row 0") && e.contains("feature 1"), "{e}");
        assert!(Standardizer::fit(&[], 2, ColumnRole::Feature, None).is_err());
        assert!(Standardizer::fit(&[1.0; 3], 2, ColumnRole::Feature, None).is_err());
        assert!(Standardizer::fit(&[1.0; 2], 0, ColumnRole::Feature, None).is_err());
        let s = Standardizer::fit(&[0.0, 1e-30], 1, ColumnRole::Feature, None).unwrap();
        // A value whose standardised form is beyond f32: refused, the slice unchanged.
        let mut v = vec![0.0, 3e38];
        let e = s.apply(&mut v).unwrap_err().to_string();
        assert!(e.contains("row 1"), "{e}");
        assert_eq!(v, [0.0, 3e38]);
        assert!(s.apply(&mut [0.0; 3][..0]).is_ok());
        let wide = Standardizer::fit(&values(), 2, ColumnRole::Feature, None).unwrap();
        assert!(wide.apply(&mut [0.0; 3]).is_err());
    }

    #[test]
    fn serde_round_trips_and_refuses_a_zero_std() {
        let s = Standardizer::fit(&values(), 2, ColumnRole::Feature, None).unwrap();
        let json = serde_json::to_string(&s).unwrap();
        let back: Standardizer = serde_json::from_str(&json).unwrap();
        // serde_json's default float parsing may be one ulp off.
        assert_eq!(back.mean(), s.mean());
        for (a, b) in back.std().iter().zip(s.std()) {
            assert!((a - b).abs() <= 1e-15 * b, "{a} {b}");
        }
        assert!(
            json.contains("\"mean\"") && json.contains("\"std\""),
            "{json}"
        );
        for bad in [
            r#"{"mean":[0.0],"std":[0.0]}"#,
            r#"{"mean":[0.0,1.0],"std":[1.0]}"#,
            r#"{"mean":[],"std":[]}"#,
        ] {
            assert!(serde_json::from_str::<Standardizer>(bad).is_err(), "{bad}");
        }
    }
}
