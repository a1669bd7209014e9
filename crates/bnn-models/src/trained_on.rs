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

#[cfg(test)]
mod tests {
    use super::*;

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
