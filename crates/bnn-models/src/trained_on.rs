//! What a model was trained on, recorded in its configuration (and so in every model file), so
//! that a command given other data can say so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;

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
