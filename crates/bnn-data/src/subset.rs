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
    pub fn stratified(inner: D, n: usize, seed: u64) -> Result<Self> {
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
}
