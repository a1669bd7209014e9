//! Subsets of a data set, for quick runs.

use crate::dataset::{Dataset, Sample};
use crate::error::{DataError, Result};
use crate::rng::SampleRng;

/// A view on chosen samples of another data set.
#[derive(Debug, Clone)]
pub struct Subset<D> {
    inner: D,
    indices: Vec<usize>,
}

impl<D: Dataset> Subset<D> {
    /// The samples at `indices` (in that order); each must be in range.
    pub fn from_indices(inner: D, indices: Vec<usize>) -> Result<Self> {
        if let Some(&bad) = indices.iter().find(|&&i| i >= inner.len()) {
            return Err(DataError::IndexOutOfRange {
                index: bad,
                len: inner.len(),
            });
        }
        Ok(Subset { inner, indices })
    }

    /// The first `n` samples (all of them when `n >= len`).
    pub fn first(inner: D, n: usize) -> Self {
        let n = n.min(inner.len());
        Subset {
            inner,
            indices: (0..n).collect(),
        }
    }

    /// `n` samples drawn without replacement with `seed`, kept in their original order.
    pub fn random(inner: D, n: usize, seed: u64) -> Self {
        let mut all: Vec<usize> = (0..inner.len()).collect();
        SampleRng::new(seed).shuffle(&mut all);
        all.truncate(n.min(inner.len()));
        all.sort_unstable();
        Subset {
            inner,
            indices: all,
        }
    }

    /// `n` samples whose class proportions match the full data set's (largest-remainder
    /// rounding, ties to the lower class), drawn with `seed` within each class, kept in
    /// their original order. Reads every label once.
    ///
    /// A regression data set has no classes to stratify by ([`Dataset::target_dim`] above 0):
    /// its `n` rows are drawn at random with `seed` ([`Subset::random`]).
    pub fn stratified(inner: D, n: usize, seed: u64) -> Result<Self> {
        if inner.target_dim() > 0 {
            return Ok(Self::random(inner, n, seed));
        }
        let total = inner.len();
        let n = n.min(total);
        let mut by_class: Vec<Vec<usize>> = vec![Vec::new(); inner.classes()];
        for i in 0..total {
            let l = inner.label(i)? as usize;
            let slot = by_class.get_mut(l).ok_or_else(|| {
                DataError::Config(format!(
                    "label {l} of sample {i} is not below {}",
                    inner.classes()
                ))
            })?;
            slot.push(i);
        }
        // Quotas: floor of the exact share, then the largest remainders get one more.
        let mut quotas: Vec<usize> = by_class
            .iter()
            .map(|c| c.len() * n / total.max(1))
            .collect();
        let mut left = n - quotas.iter().sum::<usize>();
        let mut order: Vec<usize> = (0..by_class.len()).collect();
        order.sort_by_key(|&k| (std::cmp::Reverse(by_class[k].len() * n % total.max(1)), k));
        for &k in &order {
            if left == 0 {
                break;
            }
            if quotas[k] < by_class[k].len() {
                quotas[k] += 1;
                left -= 1;
            }
        }
        let mut rng = SampleRng::new(seed);
        let mut indices = Vec::with_capacity(n);
        for (members, &q) in by_class.iter_mut().zip(&quotas) {
            rng.shuffle(members);
            indices.extend_from_slice(&members[..q]);
        }
        indices.sort_unstable();
        Ok(Subset { inner, indices })
    }

    /// Splits `inner` in two disjoint parts: a held-out part of `n` samples, chosen as by
    /// [`Subset::stratified`] with `seed`, and the rest; returned as `(rest, held_out)`, each
    /// in the original order. For a validation split taken from a training set: the same
    /// `(n, seed)` on the same data set gives the same split.
    ///
    /// `n` larger than the data set is an error, never a silent cut; `n == 0` holds out nothing.
    pub fn holdout(inner: D, n: usize, seed: u64) -> Result<(Self, Self)>
    where
        D: Clone,
    {
        if n > inner.len() {
            return Err(DataError::Config(format!(
                "a hold-out of {n} samples is larger than the data set, which has {}",
                inner.len()
            )));
        }
        let held_out = Self::stratified(inner.clone(), n, seed)?;
        let mut taken = vec![false; inner.len()];
        for &i in &held_out.indices {
            taken[i] = true;
        }
        let rest = (0..inner.len()).filter(|&i| !taken[i]).collect();
        Ok((
            Subset {
                inner,
                indices: rest,
            },
            held_out,
        ))
    }

    /// Splits `inner` in two fixed, disjoint halves with its class proportions: within each
    /// class, the samples in data-set order at even positions (0, 2, 4, ...) form the first
    /// half and those at odd positions the second; returned as `(first, second)`, each in the
    /// original order. No seed: a data set always gives the same halves, so that one half can
    /// serve every choice (a validation OOD set) and the other the report, on every run.
    pub fn alternating_halves(inner: D) -> Result<(Self, Self)>
    where
        D: Clone,
    {
        let mut seen = vec![0usize; inner.classes()];
        let (mut first, mut second) = (Vec::new(), Vec::new());
        for i in 0..inner.len() {
            let l = inner.label(i)? as usize;
            let count = seen.get_mut(l).ok_or_else(|| {
                DataError::Config(format!(
                    "label {l} of sample {i} is not below {}",
                    inner.classes()
                ))
            })?;
            match *count % 2 {
                0 => first.push(i),
                _ => second.push(i),
            }
            *count += 1;
        }
        Ok((
            Subset {
                inner: inner.clone(),
                indices: first,
            },
            Subset {
                inner,
                indices: second,
            },
        ))
    }

    /// The indices into the inner data set.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }

    /// The wrapped data set.
    pub fn inner(&self) -> &D {
        &self.inner
    }
}

impl<D: Dataset> Dataset for Subset<D> {
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn classes(&self) -> usize {
        self.inner.classes()
    }
    fn shape(&self) -> (usize, usize, usize) {
        self.inner.shape()
    }
    fn get(&self, index: usize) -> Result<Sample> {
        let &i = self.indices.get(index).ok_or(DataError::IndexOutOfRange {
            index,
            len: self.indices.len(),
        })?;
        self.inner.get(i)
    }
    fn label(&self, index: usize) -> Result<u32> {
        let &i = self.indices.get(index).ok_or(DataError::IndexOutOfRange {
            index,
            len: self.indices.len(),
        })?;
        self.inner.label(i)
    }
    fn target_dim(&self) -> usize {
        self.inner.target_dim()
    }
    fn append_row(
        &self,
        index: usize,
        features: &mut Vec<f32>,
        targets: &mut Vec<f32>,
    ) -> Result<()> {
        let &i = self.indices.get(index).ok_or(DataError::IndexOutOfRange {
            index,
            len: self.indices.len(),
        })?;
        self.inner.append_row(i, features, targets)
    }
}

/// The samples of some classes of another data set, relabelled `0..kept.len()` in the order
/// the classes are given: a data set with classes held out of training (the test images of
/// the held-out classes then form a near out-of-distribution set, [`ClassSubset::held_out`]).
#[derive(Debug, Clone)]
pub struct ClassSubset<D> {
    samples: Subset<D>,
    // New label of each class of `inner` (`None`: not kept).
    relabel: Vec<Option<u32>>,
    kept: usize,
}

impl<D: Dataset> ClassSubset<D> {
    /// The samples of the classes in `kept` (each below `inner.classes()`, none twice, at
    /// least one), class `kept[j]` relabelled `j`. Reads every label once.
    pub fn new(inner: D, kept: &[u32]) -> Result<Self> {
        let classes = inner.classes();
        let mut relabel = vec![None; classes];
        for (j, &c) in kept.iter().enumerate() {
            let slot = relabel.get_mut(c as usize).ok_or_else(|| {
                DataError::Config(format!(
                    "class {c} is not a class of the data set, whose classes are 0..{classes}"
                ))
            })?;
            if slot.is_some() {
                return Err(DataError::Config(format!("class {c} is given twice")));
            }
            *slot = Some(j as u32);
        }
        if kept.is_empty() {
            return Err(DataError::Config("no class to keep".into()));
        }
        let mut indices = Vec::new();
        for i in 0..inner.len() {
            let l = inner.label(i)? as usize;
            match relabel.get(l) {
                Some(Some(_)) => indices.push(i),
                Some(None) => {}
                None => {
                    return Err(DataError::Config(format!(
                        "label {l} of sample {i} is not below {classes}"
                    )));
                }
            }
        }
        Ok(Self {
            samples: Subset::from_indices(inner, indices)?,
            relabel,
            kept: kept.len(),
        })
    }

    /// `inner` without the classes in `held_out` (the rest kept in class order, relabelled
    /// `0..`), and the samples of the held-out classes (relabelled `0..held_out.len()`).
    /// Each held-out class must be a class of `inner`, none twice, and at least one class
    /// must stay.
    pub fn held_out(inner: D, held_out: &[u32]) -> Result<(Self, Self)>
    where
        D: Clone,
    {
        let classes = inner.classes() as u32;
        if let Some(&c) = held_out.iter().find(|&&c| c >= classes) {
            return Err(DataError::Config(format!(
                "held-out class {c} is not a class of the data set, whose classes are 0..{classes}"
            )));
        }
        let rest: Vec<u32> = (0..classes).filter(|c| !held_out.contains(c)).collect();
        if rest.is_empty() {
            return Err(DataError::Config(format!(
                "holding out classes {held_out:?} leaves no class to train on"
            )));
        }
        Ok((
            Self::new(inner.clone(), &rest)?,
            Self::new(inner, held_out)?,
        ))
    }

    /// The indices of the kept samples in the inner data set.
    pub fn indices(&self) -> &[usize] {
        self.samples.indices()
    }
}

impl<D: Dataset> Dataset for ClassSubset<D> {
    fn len(&self) -> usize {
        self.samples.len()
    }
    fn classes(&self) -> usize {
        self.kept
    }
    fn shape(&self) -> (usize, usize, usize) {
        self.samples.shape()
    }
    fn get(&self, index: usize) -> Result<Sample> {
        let mut s = self.samples.get(index)?;
        s.label = self.map(s.label)?;
        Ok(s)
    }
    fn label(&self, index: usize) -> Result<u32> {
        self.map(self.samples.label(index)?)
    }
}

impl<D> ClassSubset<D> {
    fn map(&self, label: u32) -> Result<u32> {
        self.relabel
            .get(label as usize)
            .copied()
            .flatten()
            .ok_or_else(|| DataError::Config(format!("label {label} is not a kept class")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::InMemoryDataset;

    fn labelled(labels: &[u32], classes: usize) -> InMemoryDataset {
        InMemoryDataset::new(vec![0u8; labels.len()], labels.to_vec(), (1, 1, 1), classes).unwrap()
    }

    #[test]
    fn alternating_halves_take_even_and_odd_positions_within_each_class() {
        // Class 0 at 0, 2, 3, 6; class 1 at 1, 4, 5.
        let data = labelled(&[0, 1, 0, 0, 1, 1, 0], 2);
        let (a, b) = Subset::alternating_halves(data).unwrap();
        assert_eq!(a.indices(), &[0, 1, 3, 5]);
        assert_eq!(b.indices(), &[2, 4, 6]);
    }

    #[test]
    fn alternating_halves_of_odd_class_counts_give_the_first_half_the_extra_sample() {
        // The MNIST sample's class counts: half A holds ceil(n_c / 2) of each class.
        let counts = [1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978];
        let labels: Vec<u32> = counts
            .iter()
            .enumerate()
            .flat_map(|(c, &n)| std::iter::repeat_n(c as u32, n))
            .collect();
        let (a, b) = Subset::alternating_halves(labelled(&labels, 10)).unwrap();
        assert_eq!((a.len(), b.len()), (5002, 4998));
    }

    #[test]
    fn held_out_classes_are_relabelled_and_kept_apart() {
        let data = labelled(&[0, 1, 2, 3, 2, 1, 0, 3], 4);
        let (kept, out) = ClassSubset::held_out(data, &[1, 3]).unwrap();
        assert_eq!(kept.classes(), 2);
        assert_eq!(kept.indices(), &[0, 2, 4, 6]);
        let labels: Vec<u32> = (0..kept.len()).map(|i| kept.label(i).unwrap()).collect();
        assert_eq!(labels, [0, 1, 1, 0]);
        assert_eq!(kept.get(1).unwrap().label, 1);
        assert_eq!(out.indices(), &[1, 3, 5, 7]);
        let labels: Vec<u32> = (0..out.len()).map(|i| out.label(i).unwrap()).collect();
        assert_eq!(labels, [0, 1, 0, 1]);
    }

    #[test]
    fn bad_held_out_classes_are_errors_naming_the_class() {
        let data = labelled(&[0, 1, 2], 3);
        let e = ClassSubset::held_out(data.clone(), &[3])
            .unwrap_err()
            .to_string();
        assert!(e.contains("held-out class 3"), "{e}");
        let e = ClassSubset::held_out(data.clone(), &[0, 1, 2])
            .unwrap_err()
            .to_string();
        assert!(e.contains("leaves no class"), "{e}");
        let e = ClassSubset::new(data, &[1, 1]).unwrap_err().to_string();
        assert!(e.contains("class 1 is given twice"), "{e}");
    }
}
