//! The validation split: the examples held out of a training split for every choice that
//! looks at data (the stop rule, temperature fits, the OOD proxy), never the test set.

use serde::{Deserialize, Serialize};

/// A fixed, seeded hold-out of the training split: `size` examples drawn as a stratified
/// subset (class proportions of the training split) with `seed`, never trained on. The same
/// split and data set give the same images on every run, every seed of a multi-seed run and
/// every machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidationSplit {
    /// Examples held out (0: no validation split).
    pub size: usize,
    /// Seed of the stratified draw.
    pub seed: u64,
}

impl ValidationSplit {
    /// The presets' size: 5,000 images (a twelfth of Fashion-MNIST's or a tenth of CIFAR's
    /// training split), enough for an ECE or AUROC whose sampling error is below the spread
    /// between training seeds.
    pub const DEFAULT_SIZE: usize = 5_000;

    /// The seed of every split: fixed, so that a run's split does not depend on its
    /// training seeds (the subsets of the training and test sets use seeds 1 and 2).
    pub const SEED: u64 = 4;

    /// A split of `size` examples with the fixed [`ValidationSplit::SEED`].
    pub fn new(size: usize) -> Self {
        Self {
            size,
            seed: Self::SEED,
        }
    }

    /// The presets' split: [`ValidationSplit::DEFAULT_SIZE`] examples.
    pub fn standard() -> Self {
        Self::new(Self::DEFAULT_SIZE)
    }

    /// No validation split: all of the training split trains (what a `setup.json` written
    /// before validation splits means). A rule that needs validation data is then an error.
    pub fn none() -> Self {
        Self::new(0)
    }

    /// Whether no example is held out.
    pub fn is_none(&self) -> bool {
        self.size == 0
    }
}
