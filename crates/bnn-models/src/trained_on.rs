//! What a model was trained on, recorded in its configuration (and so in every model file), so
//! that a command given other data can say so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ModelError;

/// The data a model was trained on: written by training, kept by compression (the shared
/// model trains on the same data), compared by every command that reads data for the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrainedOn {
    /// The data set's name (`fashion-mnist`).
    pub dataset: String,
    /// `[channels, height, width]` of its images.
    pub shape: [usize; 3],
    /// Training images held out as the validation split, never trained on (0: none).
    pub validation: usize,
    /// Seed of the validation split's stratified draw.
    pub validation_seed: u64,
    /// Lower-case hex SHA-256 of each file the data set was read from, by file name (empty
    /// when the files are too many to hash, as for an image tree).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

impl TrainedOn {
    /// File names whose digests differ between this record and `files` (names missing from
    /// either side are not compared: another split's files, another file layout).
    pub fn differing_files(&self, files: &BTreeMap<String, String>) -> Vec<String> {
        self.files
            .iter()
            .filter(|(name, sha)| files.get(*name).is_some_and(|other| other != *sha))
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// How a model's input images are normalised: `(x / 255 - mean[c]) / std[c]` per channel,
/// from raw 8-bit pixels. Recorded at training (a preset's published constants, or measured on
/// the user's training images), so that `eval`, `predict` and Python's `Model.predict` take raw
/// images.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputNorm {
    /// Mean per channel, of pixels scaled to `[0, 1]`.
    pub mean: Vec<f32>,
    /// Standard deviation per channel, of pixels scaled to `[0, 1]`.
    pub std: Vec<f32>,
}

impl InputNorm {
    /// Checks the record against a model of `channels` input channels: one finite mean and one
    /// finite, positive std per channel. A model configuration checks it when it is read
    /// ([`crate::ModelConfig::validate`]), so every command that loads a model refuses a bad
    /// record, not only the ones that normalise images.
    pub fn check(&self, channels: usize) -> Result<(), ModelError> {
        let bad = |reason: String| {
            Err(ModelError::InvalidConfig(format!(
                "normalization: {reason}"
            )))
        };
        if self.mean.len() != channels || self.std.len() != channels {
            return bad(format!(
                "{} means and {} stds for a model of {channels} input channel(s)",
                self.mean.len(),
                self.std.len()
            ));
        }
        if let Some((c, m)) = self.mean.iter().enumerate().find(|(_, m)| !m.is_finite()) {
            return bad(format!("mean {m} of channel {c} is not finite"));
        }
        if let Some((c, s)) = self
            .std
            .iter()
            .enumerate()
            .find(|(_, s)| !(s.is_finite() && **s > 0.0))
        {
            return bad(format!("std {s} of channel {c} is not a positive number"));
        }
        Ok(())
    }
}

/// The input and target columns of a regression network on tabular data, with the
/// standardisation of each, measured on the training split (per-column mean and population
/// standard deviation): the network sees `(x - feature_mean) / feature_std` and predicts
/// standardised targets, which `eval`, `predict` and Python's `Model.predict` bring back to the
/// user's units (`y = target_mean + target_std * z`). Recorded at training, kept by
/// compression.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TabularInput {
    /// The feature columns' names, in input order (a CSV header's; `x0`, `x1`, ... for a
    /// `.npz`).
    pub feature_names: Vec<String>,
    /// The target columns' names, in output order.
    pub target_names: Vec<String>,
    /// Mean of each feature column.
    pub feature_mean: Vec<f64>,
    /// Standard deviation of each feature column (1 for a constant one).
    pub feature_std: Vec<f64>,
    /// Mean of each target column.
    pub target_mean: Vec<f64>,
    /// Standard deviation of each target column.
    pub target_std: Vec<f64>,
}

/// Most feature columns of a tabular network's input.
pub const MAX_FEATURES: usize = 1 << 20;

impl TabularInput {
    /// Features per row.
    pub fn features(&self) -> usize {
        self.feature_names.len()
    }

    /// Targets per row.
    pub fn targets(&self) -> usize {
        self.target_names.len()
    }

    /// Checks the record: 1 to [`MAX_FEATURES`] features and 1 to [`crate::MAX_TARGETS`]
    /// targets, one mean and one std per column, every mean finite and every std finite and
    /// positive. A model configuration checks it when it is read, so a damaged file cannot
    /// divide by zero.
    pub fn check(&self) -> Result<(), ModelError> {
        let bad = |reason: String| Err(ModelError::InvalidConfig(format!("tabular: {reason}")));
        let (d, t) = (self.features(), self.targets());
        if !(1..=MAX_FEATURES).contains(&d) || !(1..=crate::MAX_TARGETS).contains(&t) {
            return bad(format!(
                "{d} features and {t} targets: 1 to {MAX_FEATURES} and 1 to {} are allowed",
                crate::MAX_TARGETS
            ));
        }
        for (what, mean, std, n) in [
            ("feature", &self.feature_mean, &self.feature_std, d),
            ("target", &self.target_mean, &self.target_std, t),
        ] {
            if mean.len() != n || std.len() != n {
                return bad(format!(
                    "{} {what} means and {} stds for {n} {what} columns",
                    mean.len(),
                    std.len()
                ));
            }
            if let Some(j) = mean.iter().position(|m| !m.is_finite()) {
                return bad(format!("{what} {j}: mean {} is not finite", mean[j]));
            }
            if let Some(j) = std.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
                return bad(format!(
                    "{what} {j}: std {} is not a positive number",
                    std[j]
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tabular() -> TabularInput {
        TabularInput {
            feature_names: vec!["a".into(), "b".into()],
            target_names: vec!["y".into()],
            feature_mean: vec![0.0, 1.0],
            feature_std: vec![1.0, 2.0],
            target_mean: vec![5.0],
            target_std: vec![0.5],
        }
    }

    #[test]
    fn a_tabular_record_that_cannot_apply_is_refused() {
        tabular().check().unwrap();
        type Damage = fn(&mut TabularInput);
        let cases: [(Damage, &str); 4] = [
            (|t| t.feature_std[1] = 0.0, "feature 1: std 0"),
            (|t| t.target_mean[0] = f64::NAN, "target 0: mean NaN"),
            (|t| t.target_std.push(1.0), "1 target means and 2 stds"),
            (|t| t.target_names.clear(), "0 targets"),
        ];
        for (damage, want) in cases {
            let mut t = tabular();
            damage(&mut t);
            let e = t.check().unwrap_err().to_string();
            assert!(e.contains(want), "`{want}` missing from: {e}");
        }
    }

    #[test]
    fn a_normalisation_record_that_cannot_apply_is_refused() {
        let norm = |mean: Vec<f32>, std: Vec<f32>| InputNorm { mean, std };
        assert!(norm(vec![0.5], vec![0.25]).check(1).is_ok());
        for (n, channels, want) in [
            (norm(vec![0.5], vec![0.0]), 1, "std 0 of channel 0"),
            (norm(vec![0.5], vec![-1.0]), 1, "std -1 of channel 0"),
            (norm(vec![0.5], vec![f32::NAN]), 1, "std NaN"),
            (norm(vec![f32::INFINITY], vec![1.0]), 1, "mean inf"),
            (norm(vec![0.5; 3], vec![0.25; 3]), 1, "3 means and 3 stds"),
        ] {
            let e = n.check(channels).unwrap_err().to_string();
            assert!(e.contains(want), "`{want}` missing from: {e}");
        }
    }

    #[test]
    fn only_files_of_the_same_name_with_other_bytes_differ() {
        let files = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let record = TrainedOn {
            dataset: "fashion-mnist".into(),
            shape: [1, 28, 28],
            validation: 5000,
            validation_seed: 4,
            files: files(&[("a", "1"), ("b", "2")]),
        };
        assert!(record.differing_files(&files(&[("a", "1")])).is_empty());
        assert!(record.differing_files(&files(&[("c", "9")])).is_empty());
        assert_eq!(
            record.differing_files(&files(&[("a", "1"), ("b", "3")])),
            vec!["b".to_string()]
        );
    }
}
