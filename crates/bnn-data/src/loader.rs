//! A batched loader with worker threads and bounded prefetching.
//!
//! Batch `k` of an epoch is always built by worker `k % workers` and received from that
//! worker's own bounded channel, so batches arrive in order without a reorder buffer, and at
//! most `workers × per-worker capacity` batches are in memory. Each sample's augmentation is
//! seeded from `(seed, epoch, dataset index)`, so the batches are identical for any worker
//! count.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use crate::dataset::Dataset;
use crate::error::{DataError, Result};
use crate::rng::{SampleRng, derive_seed};
use crate::transform::{Image, Transform};

/// A batch of images and labels, or of a regression data set's rows and targets.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// `B × C × H × W` values, row-major (a regression batch: `B` rows of `W` features,
    /// `C = H = 1`).
    pub images: Vec<f32>,
    /// `B` labels (empty in a regression batch).
    pub labels: Vec<u32>,
    /// `B × target_dim` targets, row-major (empty in a classification batch).
    pub targets: Vec<f32>,
    /// Targets per sample: 0 in a classification batch.
    pub target_dim: usize,
    /// `[B, C, H, W]`.
    pub shape: [usize; 4],
    /// The data set index of each sample, in batch order.
    pub indices: Vec<usize>,
}

impl Batch {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// `true` for an empty batch.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// Whether the batch holds regression targets rather than class labels.
    pub fn is_regression(&self) -> bool {
        self.target_dim > 0
    }

    /// The examples of replica `rank` of `world` in data-parallel training: the `rank`-th of
    /// `world` contiguous slices of the batch, in batch order, the first `len % world` one example
    /// longer than the rest. The shards of ranks `0..world` are disjoint and together are the
    /// batch; a rank at or beyond `world` (or `world == 0`) gets an empty batch.
    pub fn shard(&self, rank: usize, world: usize) -> Batch {
        let n = self.len();
        let range = if rank < world {
            let (base, extra) = (n / world, n % world);
            let start = rank * base + rank.min(extra);
            start..start + base + usize::from(rank < extra)
        } else {
            0..0
        };
        let per_image: usize = self.shape[1..].iter().product();
        let mut shape = self.shape;
        shape[0] = range.len();
        let t = self.target_dim;
        Batch {
            images: self.images[range.start * per_image..range.end * per_image].to_vec(),
            labels: if self.is_regression() {
                Vec::new()
            } else {
                self.labels[range.clone()].to_vec()
            },
            targets: self.targets[range.start * t..range.end * t].to_vec(),
            target_dim: t,
            shape,
            indices: self.indices[range].to_vec(),
        }
    }
}

/// Loader settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoaderConfig {
    /// Samples per batch (> 0).
    pub batch_size: usize,
    /// Visit samples in a per-epoch random order derived from `seed + epoch`.
    pub shuffle: bool,
    /// Drop the last batch when it is smaller than `batch_size`.
    pub drop_last: bool,
    /// Seed of shuffling and augmentation.
    pub seed: u64,
    /// Worker threads; 0 builds batches on the calling thread.
    pub workers: usize,
    /// Batches prepared ahead, shared among workers (at least one per worker).
    pub prefetch: usize,
}

impl Default for LoaderConfig {
    fn default() -> Self {
        LoaderConfig {
            batch_size: 128,
            shuffle: true,
            drop_last: false,
            seed: 0,
            workers: 2,
            prefetch: 4,
        }
    }
}

/// Iterates over a data set in batches, transforming every sample.
#[derive(Clone)]
pub struct DataLoader {
    dataset: Arc<dyn Dataset>,
    transform: Arc<dyn Transform>,
    config: LoaderConfig,
}

impl std::fmt::Debug for DataLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataLoader")
            .field("samples", &self.dataset.len())
            .field("config", &self.config)
            .finish()
    }
}

/// Stream index of the shuffle generator; sample streams use the data set index.
const SHUFFLE_STREAM: u64 = u64::MAX;

struct Shared {
    dataset: Arc<dyn Dataset>,
    transform: Arc<dyn Transform>,
    seed: u64,
    epoch: u64,
}

impl Shared {
    fn build(&self, indices: &[usize]) -> Result<Batch> {
        if self.dataset.target_dim() > 0 {
            return self.build_rows(indices);
        }
        let mut images = Vec::new();
        let mut labels = Vec::with_capacity(indices.len());
        let mut shape = (0, 0, 0);
        for (k, &index) in indices.iter().enumerate() {
            let sample = self.dataset.get(index)?;
            let mut rng = SampleRng::for_sample(self.seed, self.epoch, index as u64);
            let img = self
                .transform
                .apply(Image::from_sample(&sample), &mut rng)?;
            if k == 0 {
                shape = img.shape();
                images.reserve(indices.len() * img.data.len());
            } else if img.shape() != shape {
                return Err(DataError::ShapeMismatch {
                    index,
                    expected: shape,
                    got: img.shape(),
                });
            }
            images.extend_from_slice(&img.data);
            labels.push(sample.label);
        }
        Ok(Batch {
            images,
            labels,
            targets: Vec::new(),
            target_dim: 0,
            shape: [indices.len(), shape.0, shape.1, shape.2],
            indices: indices.to_vec(),
        })
    }

    /// A regression batch: the rows as they are. Features are standardised once, when the
    /// data are opened, so there is nothing to transform (an image transform does not apply).
    fn build_rows(&self, indices: &[usize]) -> Result<Batch> {
        let (c, h, w) = self.dataset.shape();
        let t = self.dataset.target_dim();
        let mut images = Vec::with_capacity(indices.len() * c * h * w);
        let mut targets = Vec::with_capacity(indices.len() * t);
        for &index in indices {
            self.dataset.append_row(index, &mut images, &mut targets)?;
        }
        Ok(Batch {
            images,
            labels: Vec::new(),
            targets,
            target_dim: t,
            shape: [indices.len(), c, h, w],
            indices: indices.to_vec(),
        })
    }
}

impl DataLoader {
    /// A loader over `dataset` applying `transform` to every sample.
    pub fn new(
        dataset: impl Dataset + 'static,
        transform: impl Transform + 'static,
        config: LoaderConfig,
    ) -> Result<Self> {
        Self::from_arcs(Arc::new(dataset), Arc::new(transform), config)
    }

    /// As [`DataLoader::new`], sharing already reference-counted parts.
    pub fn from_arcs(
        dataset: Arc<dyn Dataset>,
        transform: Arc<dyn Transform>,
        config: LoaderConfig,
    ) -> Result<Self> {
        if config.batch_size == 0 {
            return Err(DataError::Config("batch_size must be positive".into()));
        }
        Ok(DataLoader {
            dataset,
            transform,
            config,
        })
    }

    /// The settings.
    pub fn config(&self) -> &LoaderConfig {
        &self.config
    }

    /// The data set.
    pub fn dataset(&self) -> &Arc<dyn Dataset> {
        &self.dataset
    }

    /// Number of batches per epoch.
    pub fn num_batches(&self) -> usize {
        let (n, b) = (self.dataset.len(), self.config.batch_size);
        if self.config.drop_last {
            n / b
        } else {
            n.div_ceil(b)
        }
    }

    /// The order in which `epoch` visits the data set's indices.
    pub fn order(&self, epoch: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.dataset.len()).collect();
        if self.config.shuffle {
            SampleRng::new(derive_seed(self.config.seed, epoch, SHUFFLE_STREAM))
                .shuffle(&mut order);
        }
        order
    }

    /// The transformed sample `index` as epoch `epoch` delivers it (image data sets; a
    /// regression data set's rows are read with [`Dataset::append_row`]).
    pub fn sample(&self, epoch: u64, index: usize) -> Result<(Image, u32)> {
        let s = self.dataset.get(index)?;
        let mut rng = SampleRng::for_sample(self.config.seed, epoch, index as u64);
        Ok((
            self.transform.apply(Image::from_sample(&s), &mut rng)?,
            s.label,
        ))
    }

    /// The batches of `epoch`, in order; workers start at once and stop when the iterator
    /// is dropped.
    pub fn epoch(&self, epoch: u64) -> EpochIter {
        let order = self.order(epoch);
        let b = self.config.batch_size;
        let batches: Arc<Vec<Vec<usize>>> = Arc::new(
            order
                .chunks(b)
                .take(self.num_batches())
                .map(|c| c.to_vec())
                .collect(),
        );
        let shared = Arc::new(Shared {
            dataset: self.dataset.clone(),
            transform: self.transform.clone(),
            seed: self.config.seed,
            epoch,
        });
        let workers = self.config.workers.min(batches.len());
        let mut receivers = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        let capacity = self.config.prefetch.div_ceil(workers.max(1)).max(1);
        for w in 0..workers {
            let (tx, rx): (SyncSender<Result<Batch>>, Receiver<Result<Batch>>) =
                sync_channel(capacity);
            let (worker_shared, worker_batches) = (shared.clone(), batches.clone());
            let handle = std::thread::Builder::new()
                .name(format!("bnn-data-worker-{w}"))
                .spawn(move || {
                    for k in (w..worker_batches.len()).step_by(workers) {
                        // A closed channel means the consumer is gone: stop quietly.
                        if tx.send(worker_shared.build(&worker_batches[k])).is_err() {
                            return;
                        }
                    }
                });
            match handle {
                Ok(h) => {
                    receivers.push(rx);
                    handles.push(h);
                }
                Err(e) => {
                    return EpochIter {
                        shared,
                        batches,
                        next: 0,
                        receivers: Vec::new(),
                        handles,
                        failed: Some(DataError::Worker(format!("cannot spawn a thread: {e}"))),
                    };
                }
            }
        }
        EpochIter {
            shared,
            batches,
            next: 0,
            receivers,
            handles,
            failed: None,
        }
    }
}

/// The batches of one epoch (see [`DataLoader::epoch`]).
pub struct EpochIter {
    shared: Arc<Shared>,
    batches: Arc<Vec<Vec<usize>>>,
    next: usize,
    receivers: Vec<Receiver<Result<Batch>>>,
    handles: Vec<JoinHandle<()>>,
    failed: Option<DataError>,
}

impl Iterator for EpochIter {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        if let Some(e) = self.failed.take() {
            self.next = self.batches.len();
            return Some(Err(e));
        }
        if self.next >= self.batches.len() {
            return None;
        }
        let k = self.next;
        self.next += 1;
        if self.receivers.is_empty() {
            return Some(self.shared.build(&self.batches[k]));
        }
        let n = self.receivers.len();
        match self.receivers[k % n].recv() {
            Ok(batch) => Some(batch),
            Err(_) => {
                // The worker ended without sending: it panicked.
                self.next = self.batches.len();
                Some(Err(DataError::Worker(format!(
                    "worker {} stopped before delivering batch {k}",
                    k % n
                ))))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.failed.is_some() {
            return (1, Some(1));
        }
        let left = self.batches.len() - self.next.min(self.batches.len());
        (left, Some(left))
    }
}

impl ExactSizeIterator for EpochIter {}

impl Drop for EpochIter {
    fn drop(&mut self) {
        // Closing the channels unblocks workers waiting to send; then they can be joined.
        self.receivers.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize) -> Batch {
        Batch {
            images: (0..n * 2).map(|v| v as f32).collect(),
            labels: (0..n as u32).map(|l| l * 10).collect(),
            targets: Vec::new(),
            target_dim: 0,
            shape: [n, 1, 1, 2],
            indices: (100..100 + n).collect(),
        }
    }

    /// A regression batch of `n` rows of 2 features and 3 targets.
    fn rows(n: usize) -> Batch {
        Batch {
            images: (0..n * 2).map(|v| v as f32).collect(),
            labels: Vec::new(),
            targets: (0..n * 3).map(|v| -(v as f32)).collect(),
            target_dim: 3,
            shape: [n, 1, 1, 2],
            indices: (100..100 + n).collect(),
        }
    }

    /// The shards of a regression batch keep each row's three targets with its features.
    #[test]
    fn shards_of_rows_keep_their_targets() {
        for n in 0..7 {
            let b = rows(n);
            for world in 1..4 {
                let shards: Vec<Batch> = (0..world).map(|r| b.shard(r, world)).collect();
                let targets: Vec<f32> = shards.iter().flat_map(|s| s.targets.clone()).collect();
                assert_eq!(targets, b.targets, "n {n}, world {world}");
                for s in &shards {
                    assert_eq!(s.targets.len(), 3 * s.len());
                    assert!(s.labels.is_empty() && s.is_regression());
                }
            }
        }
    }

    /// A loader over a regression data set yields its rows and targets in order, shuffled
    /// alike, the same for any worker count.
    #[test]
    fn a_tabular_data_set_loads_as_batches_of_rows() {
        let x: Vec<f32> = (0..10 * 3).map(|v| v as f32).collect();
        let y: Vec<f32> = (0..10 * 2).map(|v| 0.5 * v as f32).collect();
        let data = crate::TabularDataset::new(x, y, 3, 2).unwrap();
        let run = |workers| {
            let config = LoaderConfig {
                batch_size: 4,
                seed: 9,
                workers,
                ..Default::default()
            };
            let loader = DataLoader::new(data.clone(), crate::Compose::new(), config).unwrap();
            loader.epoch(2).collect::<Result<Vec<_>>>().unwrap()
        };
        let batches = run(0);
        assert_eq!(batches, run(3));
        assert_eq!(batches.len(), 3);
        assert_eq!(batches[0].shape, [4, 1, 1, 3]);
        for b in &batches {
            for (k, &i) in b.indices.iter().enumerate() {
                assert_eq!(b.images[3 * k], (3 * i) as f32);
                assert_eq!(b.targets[2 * k + 1], 0.5 * (2 * i + 1) as f32);
            }
        }
    }

    /// Every size up to 9 over 1 to 4 replicas: the shards, in rank order, are the batch (so
    /// they are disjoint and cover it), their sizes differ by at most one, and images, labels
    /// and indices stay together.
    #[test]
    fn shards_partition_the_batch_in_order() {
        for n in 0..10 {
            let b = batch(n);
            for world in 1..5 {
                let shards: Vec<Batch> = (0..world).map(|r| b.shard(r, world)).collect();
                let indices: Vec<usize> = shards.iter().flat_map(|s| s.indices.clone()).collect();
                assert_eq!(indices, b.indices, "n {n}, world {world}");
                let labels: Vec<u32> = shards.iter().flat_map(|s| s.labels.clone()).collect();
                assert_eq!(labels, b.labels);
                let images: Vec<f32> = shards.iter().flat_map(|s| s.images.clone()).collect();
                assert_eq!(images, b.images);
                let sizes: Vec<usize> = shards.iter().map(Batch::len).collect();
                let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(hi - lo <= 1, "sizes {sizes:?}");
                for s in &shards {
                    assert_eq!(s.shape, [s.len(), 1, 1, 2]);
                }
            }
        }
        assert!(batch(4).shard(2, 2).is_empty());
        assert!(batch(4).shard(0, 0).is_empty());
    }
}
