//! Data-parallel training: replicas of one model on the devices of one node, each computing
//! the gradient of its own shard of every global batch.
//!
//! The arithmetic, the same on every backend:
//! - the loader's global batch (the same for any world size) is cut into `world` contiguous
//!   shards ([`Batch::shard`]);
//! - replica `r` weights its shard's mean NLL by `b_r * world / B` (`b_r` its shard's size, `B`
//!   the global batch's), and adds the KL scaled by the global `N_train` ([`ElboConfig`]), so
//!   the mean of the replicas' losses, and of their gradients, is the full-batch loss and
//!   gradient;
//! - each replica draws its weight noise from its own stream, seeded from `(seed, epoch, step,
//!   rank)` before its forward pass;
//! - every replica adds `0 * sum(p)` for every parameter `p`, so every parameter has a
//!   gradient on every replica even where a forward pass did not use it (an all-reduce needs
//!   each replica to contribute each tensor); adding an exact zero leaves values and gradients
//!   unchanged;
//! - losses and metrics are reduced as sums of sums and counts, never as means of means.
//!
//! The reduction of the gradients: on CUDA, burn's collective (NCCL): the parameters are marked
//! with `set_distributed` and their gradients are averaged inside `backward()`, which runs on one
//! thread per replica. Elsewhere (flex, ndarray, wgpu: burn 0.22.1 has no collective there) the
//! replicas run in turn and their gradients are averaged on the first device. Either way the
//! first replica's optimiser takes the step and the other replicas are forked from it before the
//! next step, so the replicas cannot drift apart.
//!
//! With world size 1 none of this applies but the noise seeds: the loop is the single-device
//! one, seeded per step the same way.

use std::sync::{Condvar, Mutex};

use bnn_data::{Batch, derive_seed};
use bnn_layers::{ElboConfig, LayerError, Prior, SharedKl, device_by_name, kl_divergence_with};
use bnn_models::{Classifier, ClassifierBody};

use crate::TrainError;
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::distributed::{DistributedConfig, DistributedContext, ReduceOperation};

use crate::likelihood::{DataTerm, data_term};

/// What is wrong with a list of devices for data-parallel training.
#[derive(Debug, thiserror::Error)]
pub enum DevicesError {
    /// No device was named.
    #[error("the device list is empty; name at least one device, e.g. cuda:0,cuda:1")]
    Empty,
    /// A name is not a device of this build.
    #[error("device {position} of the list, {name:?}: {source}")]
    Unknown {
        /// 1-based position in the list.
        position: usize,
        /// The name as given.
        name: String,
        /// Why it was refused.
        #[source]
        source: LayerError,
    },
    /// A GPU is named twice.
    #[error(
        "device {name} is named twice (positions {first} and {second}); a GPU holds one replica (only a CPU backend such as flex may be repeated, to simulate replicas in turn)"
    )]
    Duplicate {
        /// The repeated device.
        name: String,
        /// 1-based position of its first mention.
        first: usize,
        /// 1-based position of its second mention.
        second: usize,
    },
    /// The devices are on different backends.
    #[error(
        "devices {first} and {other} (position {position}) are on different backends; all replicas must use one backend"
    )]
    MixedBackends {
        /// The first device.
        first: String,
        /// The first device on another backend.
        other: String,
        /// 1-based position of `other`.
        position: usize,
    },
    /// More replicas than examples in a batch.
    #[error(
        "{world_size} replicas cannot share batches of {batch_size} examples: each replica needs at least one example per batch (use at most {batch_size} devices, or a larger batch)"
    )]
    WorldSizeExceedsBatch {
        /// The number of devices.
        world_size: usize,
        /// The loader's batch size.
        batch_size: usize,
    },
}

/// The devices of a data-parallel run on one node: replica `r` runs on `devices()[r]`, and the
/// world size is their number.
///
/// ```
/// use bnn_train::DataParallel;
///
/// // Two replicas simulated in turn on the CPU backend.
/// let dp = DataParallel::parse("flex,flex").unwrap();
/// assert_eq!(dp.world_size(), 2);
/// assert!(!dp.uses_collective());
/// assert!(DataParallel::parse("flex,nosuch").is_err());
/// ```
#[derive(Debug, Clone)]
pub struct DataParallel {
    names: Vec<String>,
    devices: Vec<Device>,
    collective: bool,
}

impl DataParallel {
    /// The devices named as [`bnn_layers::device_by_name`] names them (`cuda:0`, `flex`, ...).
    /// All must be on one backend, and a GPU may not be named twice; a CPU backend may be
    /// repeated, its replicas then run in turn (a simulation of several devices, for tests).
    pub fn new<S: AsRef<str>>(names: &[S]) -> Result<Self, DevicesError> {
        if names.is_empty() {
            return Err(DevicesError::Empty);
        }
        let names: Vec<String> = names
            .iter()
            .map(|s| s.as_ref().trim().to_string())
            .collect();
        let mut devices = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            let device = device_by_name(name).map_err(|source| DevicesError::Unknown {
                position: i + 1,
                name: name.clone(),
                source,
            })?;
            if backend_of(name) != backend_of(&names[0]) {
                return Err(DevicesError::MixedBackends {
                    first: names[0].clone(),
                    other: name.clone(),
                    position: i + 1,
                });
            }
            if let Some(j) = devices.iter().position(|d: &Device| *d == device)
                && !bnn_layers::noise::is_host_device(&device)
            {
                return Err(DevicesError::Duplicate {
                    name: name.clone(),
                    first: j + 1,
                    second: i + 1,
                });
            }
            devices.push(device);
        }
        let collective = names.len() > 1 && backend_of(&names[0]) == "cuda";
        Ok(Self {
            names,
            devices,
            collective,
        })
    }

    /// [`new`](Self::new) on a comma-separated list, as `--devices cuda:0,cuda:1`.
    pub fn parse(list: &str) -> Result<Self, DevicesError> {
        let names: Vec<&str> = list.split(',').filter(|s| !s.trim().is_empty()).collect();
        Self::new(&names)
    }

    /// One replica on `device`: ordinary training.
    pub fn single(device: Device) -> Self {
        Self {
            names: vec![format!("{device:?}")],
            devices: vec![device.without_autodiff()],
            collective: false,
        }
    }

    /// The number of replicas.
    pub fn world_size(&self) -> usize {
        self.devices.len()
    }

    /// The replicas' devices (without autodiff), by rank.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The devices' names, by rank.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether the gradients are all-reduced by burn's collective (CUDA, world size > 1) rather
    /// than averaged on the first device.
    pub fn uses_collective(&self) -> bool {
        self.collective
    }

    /// The same devices with burn's collective forced on, even for one device (NCCL with one
    /// rank): lets a machine with a single GPU exercise the collective path.
    #[cfg(all(test, feature = "cuda"))]
    fn with_collective(mut self) -> Self {
        self.collective = true;
        self
    }

    /// Refuses more replicas than examples in a batch of `batch_size`.
    pub fn check_batch_size(&self, batch_size: usize) -> Result<(), DevicesError> {
        if self.world_size() > batch_size {
            return Err(DevicesError::WorldSizeExceedsBatch {
                world_size: self.world_size(),
                batch_size,
            });
        }
        Ok(())
    }
}

/// `cuda` of `cuda:1`.
fn backend_of(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

/// The seed of replica `rank`'s noise at `step` of the epoch whose seed is `epoch_seed`.
pub(crate) fn replica_seed(epoch_seed: u64, step: usize, rank: usize) -> u64 {
    derive_seed(epoch_seed, step as u64, rank as u64)
}

/// The training objective of one replica.
pub(crate) struct Objective {
    /// The ELBO's scaling (the global `N_train`).
    pub(crate) elbo: ElboConfig,
    /// The KL's prior and counting, for models with Bayesian parameters.
    pub(crate) kl: Option<(Prior, SharedKl)>,
}

/// Where a step is: the noise seeds and the KL schedule depend on it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Position {
    /// The epoch's seed.
    pub(crate) epoch_seed: u64,
    /// Step within the epoch.
    pub(crate) step: usize,
    /// Step of the run.
    pub(crate) global: usize,
}

/// One replica's loss on its shard.
struct ReplicaLoss {
    /// `nll_shard_mean * b_r * world / B + kl_factor * KL` (+ the zero term).
    loss: Tensor<1>,
    /// Its value.
    value: f32,
    /// Sum of the shard's NLL.
    nll_sum: f64,
    /// Correct predictions in the shard.
    correct: usize,
    /// Sum of the squared errors of a regression network's means in the shard.
    squared_error: f64,
    /// Examples in the shard.
    seen: usize,
    /// The model's KL, detached.
    kl: Option<Tensor<1>>,
}

/// A step's sums over every replica.
pub(crate) struct StepTotals {
    /// The global loss (the mean of the replicas' losses).
    pub(crate) loss: f32,
    /// Sum of the NLL over the global batch.
    pub(crate) nll_sum: f64,
    /// Correct predictions over the global batch.
    pub(crate) correct: usize,
    /// Sum of the squared errors of a regression network's means over the global batch.
    pub(crate) squared_error: f64,
    /// Examples in the global batch.
    pub(crate) seen: usize,
    /// The KL (first replica), detached.
    pub(crate) kl: Option<Tensor<1>>,
}

impl Objective {
    /// The loss of `model` on `shard`, replica `rank` of `world`, of a global batch of
    /// `global_batch` examples.
    fn replica_loss<B: ClassifierBody>(
        &self,
        model: &Classifier<B>,
        shard: &Batch,
        (rank, world, global_batch): (usize, usize, usize),
        at: Position,
    ) -> Result<ReplicaLoss, TrainError> {
        let device = model.devices().first().cloned().unwrap_or_default();
        // Every step, with one replica too: a step's noise then depends on where it is alone,
        // so a run can stop or resume inside an epoch and what samples weights between steps
        // (a stopping rule's probe) leaves training's noise alone.
        device.seed(replica_seed(at.epoch_seed, at.step, rank));
        let (nll_term, nll_sum, correct, squared_error) = if shard.is_empty() {
            (Tensor::zeros([1], &device), 0.0, 0, 0.0)
        } else {
            let DataTerm {
                nll,
                correct,
                squared_error,
            } = data_term(model, shard, &device)?;
            let nll_sum = nll.clone().into_scalar::<f32>() as f64 * shard.len() as f64;
            let weight = (shard.len() * world) as f64 / global_batch as f64;
            // Exactly 1 for equal shards (and always with one replica): no rounding added.
            let term = if weight == 1.0 {
                nll
            } else {
                nll.mul_scalar(weight)
            };
            (term, nll_sum, correct, squared_error)
        };
        let kl = self
            .kl
            .as_ref()
            .and_then(|(prior, shared)| kl_divergence_with(model, prior, *shared));
        let kl_detached = kl.as_ref().map(|k| k.clone().detach());
        let mut loss = self.elbo.loss(nll_term, kl, at.global);
        if world > 1 {
            loss = loss + zero_touching_every_parameter(model, &device);
        }
        let value = loss.clone().into_scalar::<f32>();
        Ok(ReplicaLoss {
            loss,
            value,
            nll_sum,
            correct,
            squared_error,
            seen: shard.len(),
            kl: kl_detached,
        })
    }
}

/// `sum over parameters p of 0 * sum(p)`: puts every trainable parameter into the graph.
fn zero_touching_every_parameter<B: ClassifierBody>(
    model: &Classifier<B>,
    device: &Device,
) -> Tensor<1> {
    struct Touch(Option<Tensor<1>>);
    impl ModuleVisitor for Touch {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if param.is_require_grad() {
                let z = param.val().sum().mul_scalar(0.0);
                self.0 = Some(match self.0.take() {
                    None => z,
                    Some(s) => s + z,
                });
            }
        }
    }
    let mut touch = Touch(None);
    model.visit(&mut touch);
    touch.0.unwrap_or_else(|| Tensor::zeros([1], device))
}

/// Initialises every lazily initialised parameter now. burn draws a lazy parameter's initial
/// value at its first use: inside the first replica's forward pass, after its noise seed, or
/// separately on each device a replica was forked to.
fn materialize<B: ClassifierBody>(model: &Classifier<B>) {
    struct Touch;
    impl ModuleVisitor for Touch {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let _ = param.val();
        }
    }
    model.visit(&mut Touch);
}

/// Marks every float parameter for burn's gradient all-reduce, under its own id (the same on
/// every replica).
fn mark_distributed<B: ClassifierBody>(model: Classifier<B>) -> Classifier<B> {
    struct Mark;
    impl ModuleMapper for Mark {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let id = param.id;
            param.map(|t| t.set_distributed(id))
        }
    }
    model.map(&mut Mark)
}

/// The mean of the replicas' gradients, on `device`, for every parameter of `model` that has a
/// gradient on some replica (the others get a zero; with the zero term there are none).
fn average<B: ClassifierBody>(
    model: &Classifier<B>,
    replicas: Vec<GradientsParams>,
    device: &Device,
) -> GradientsParams {
    struct Average<'a> {
        replicas: Vec<GradientsParams>,
        out: GradientsParams,
        device: &'a Device,
    }
    impl ModuleVisitor for Average<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let grads: Vec<Option<Tensor<D>>> = self
                .replicas
                .iter_mut()
                .map(|g| g.remove::<D>(param.id).map(|t| t.to_device(self.device)))
                .collect();
            let Some(like) = grads.iter().flatten().next().map(|t| t.zeros_like()) else {
                return;
            };
            let world = grads.len();
            let sum = grads
                .into_iter()
                .map(|g| g.unwrap_or_else(|| like.clone()))
                .reduce(|a, b| a + b);
            if let Some(sum) = sum {
                self.out.register(param.id, sum.div_scalar(world as f64));
            }
        }
    }
    let mut v = Average {
        replicas,
        out: GradientsParams::new(),
        device,
    };
    model.visit(&mut v);
    v.out
}

/// The replicas of a run, and burn's collective while one is needed.
pub(crate) struct Replicas<'a> {
    parallel: &'a DataParallel,
    // Dropping it closes burn's communication server.
    _collective: Option<DistributedContext>,
}

impl<'a> Replicas<'a> {
    /// Starts burn's collective when the run uses it.
    pub(crate) fn start(parallel: &'a DataParallel) -> Self {
        let collective = parallel.uses_collective().then(|| {
            DistributedContext::init(
                parallel.devices().to_vec(),
                DistributedConfig {
                    all_reduce_op: ReduceOperation::Mean,
                },
            )
        });
        Self {
            parallel,
            _collective: collective,
        }
    }

    /// The model as the first replica holds it: moved to the first device (with autodiff), its
    /// parameters marked for the collective where one is used.
    pub(crate) fn place<B: ClassifierBody>(&self, model: Classifier<B>) -> Classifier<B> {
        if self.parallel.world_size() > 1 {
            materialize(&model);
        }
        let first = self.parallel.devices()[0].clone().autodiff();
        let model = if model.devices().first() == Some(&first) {
            model
        } else {
            model.fork(&first)
        };
        if self.parallel.uses_collective() {
            mark_distributed(model)
        } else {
            model
        }
    }

    /// The first replica's gradient of the global batch's loss (the mean of every replica's,
    /// on the first device), and the step's totals over every replica. `model` is the first
    /// replica (see [`place`](Self::place)); the others are forked from it.
    pub(crate) fn gradients<B: ClassifierBody>(
        &self,
        model: &Classifier<B>,
        batch: &Batch,
        objective: &Objective,
        at: Position,
    ) -> Result<(GradientsParams, StepTotals), TrainError> {
        let world = self.parallel.world_size();
        let devices = self.parallel.devices();
        let replica = |rank: usize| -> Classifier<B> {
            let device = devices[rank].clone().autodiff();
            if model.devices().first() == Some(&device) {
                model.clone()
            } else if self.parallel.uses_collective() {
                mark_distributed(model.clone().fork(&device))
            } else {
                model.clone().fork(&device)
            }
        };
        let (losses, grads): (Vec<ReplicaLoss>, Vec<GradientsParams>) =
            if self.parallel.uses_collective() {
                collective_step(objective, (0..world).map(replica).collect(), batch, at)?
            } else {
                let mut losses = Vec::with_capacity(world);
                let mut grads = Vec::with_capacity(world);
                for rank in 0..world {
                    let m = replica(rank);
                    let shard = batch.shard(rank, world);
                    let l = objective.replica_loss(&m, &shard, (rank, world, batch.len()), at)?;
                    grads.push(GradientsParams::from_module(&mut l.loss.backward(), &m));
                    losses.push(l);
                }
                (losses, grads)
            };
        let grads = if world == 1 || self.parallel.uses_collective() {
            // One replica, or already averaged by the all-reduce inside `backward()`.
            grads.into_iter().next().unwrap_or_default()
        } else {
            average(model, grads, &devices[0])
        };
        let loss = if world == 1 {
            losses[0].value
        } else {
            (losses.iter().map(|l| l.value as f64).sum::<f64>() / world as f64) as f32
        };
        let totals = StepTotals {
            loss,
            nll_sum: losses.iter().map(|l| l.nll_sum).sum(),
            correct: losses.iter().map(|l| l.correct).sum(),
            squared_error: losses.iter().map(|l| l.squared_error).sum(),
            seen: losses.iter().map(|l| l.seen).sum(),
            kl: losses.into_iter().next().and_then(|l| l.kl),
        };
        Ok((grads, totals))
    }
}

/// One thread per replica, as burn's collective needs: `backward()` returns on a replica only
/// once every replica has submitted its gradients. The forward passes take turns in rank order,
/// because burn's generator is process-wide on every backend: each replica seeds it and draws
/// its noise while no other does.
fn collective_step<B: ClassifierBody>(
    objective: &Objective,
    replicas: Vec<Classifier<B>>,
    batch: &Batch,
    at: Position,
) -> Result<(Vec<ReplicaLoss>, Vec<GradientsParams>), TrainError> {
    let world = replicas.len();
    let turn = (Mutex::new(0usize), Condvar::new());
    std::thread::scope(|scope| {
        let handles: Vec<_> = replicas
            .into_iter()
            .enumerate()
            .map(|(rank, model)| {
                let turn = &turn;
                let shard = batch.shard(rank, world);
                scope.spawn(move || {
                    let loss = {
                        let (lock, cv) = turn;
                        let mut next = cv
                            .wait_while(lock.lock().unwrap_or_else(|e| e.into_inner()), |n| {
                                *n != rank
                            })
                            .unwrap_or_else(|e| e.into_inner());
                        // `replica_loss` reads the loss back, so every draw has happened.
                        let loss =
                            objective.replica_loss(&model, &shard, (rank, world, batch.len()), at);
                        *next += 1;
                        cv.notify_all();
                        loss?
                    };
                    let grads = GradientsParams::from_module(&mut loss.loss.backward(), &model);
                    Ok::<_, TrainError>((loss, grads))
                })
            })
            .collect();
        let mut losses = Vec::with_capacity(world);
        let mut grads = Vec::with_capacity(world);
        for h in handles {
            let (l, g) = h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))?;
            losses.push(l);
            grads.push(g);
        }
        Ok((losses, grads))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EpochStats, Silent, TrainConfig, train_data_parallel};
    use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
    use bnn_layers::set_sampling;
    use bnn_models::{Arch, Kind, ModelConfig, Network};

    const N_TRAIN: usize = 50;

    fn flex() -> Device {
        bnn_layers::test_device()
    }

    fn model(kind: Kind) -> Network {
        let device = flex().autodiff();
        device.seed(3);
        let m = ModelConfig::for_input(Arch::Mlp, kind, 3, 1, 4)
            .with_mlp_hidden(vec![8])
            .init(&device)
            .unwrap();
        // Initialised here, not at the first forward pass of whichever path comes first.
        materialize(&m);
        m
    }

    /// `n` examples of 1x4x4, three classes.
    fn batch(n: usize) -> Batch {
        Batch {
            images: (0..n * 16).map(|i| ((i * 37) % 23) as f32 / 23.0).collect(),
            labels: (0..n as u32).map(|i| i % 3).collect(),
            targets: Vec::new(),
            target_dim: 0,
            shape: [n, 1, 4, 4],
            indices: (0..n).collect(),
        }
    }

    fn objective(with_kl: bool) -> Objective {
        Objective {
            elbo: ElboConfig::new(N_TRAIN),
            kl: with_kl.then_some((Prior::default(), SharedKl::Mixture)),
        }
    }

    const AT: Position = Position {
        epoch_seed: 17,
        step: 2,
        global: 5,
    };

    /// Every parameter's gradient in `grads`, in the model's order (`None`: no gradient).
    fn host_grads(model: &Network, grads: &GradientsParams) -> Vec<Option<Vec<f32>>> {
        struct Collect<'a>(&'a GradientsParams, Vec<Option<Vec<f32>>>);
        impl ModuleVisitor for Collect<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                let g = self.0.get::<D>(param.id).map(crate::to_vec);
                self.1.push(g);
            }
        }
        let mut c = Collect(grads, Vec::new());
        model.visit(&mut c);
        c.1
    }

    fn step(
        model: &Network,
        devices: &str,
        b: &Batch,
        o: &Objective,
    ) -> (Vec<Option<Vec<f32>>>, StepTotals) {
        let parallel = DataParallel::parse(devices).unwrap();
        let replicas = Replicas::start(&parallel);
        let (g, t) = replicas.gradients(model, b, o, AT).unwrap();
        (host_grads(model, &g), t)
    }

    fn assert_close(a: &[f32], b: &[f32], what: &str) {
        assert_eq!(a.len(), b.len(), "{what}");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-6 + 1e-5 * x.abs().max(y.abs()),
                "{what}[{i}]: {x} vs {y}"
            );
        }
    }

    /// With the mean forward pass (no noise), the mean of the replicas' gradients is the
    /// full-batch gradient, for world sizes 2 and 3 on a batch of 5 (uneven shards), NLL and
    /// KL parts alike, and the step's totals (loss, NLL sum, correct, seen) are those of one
    /// process on the whole batch.
    #[test]
    fn averaged_replica_gradients_equal_the_full_batch_gradient() {
        let _rng = bnn_layers::lock_device_rng();
        let model = set_sampling(model(Kind::Bayesian), false);
        let (b, o) = (batch(5), objective(true));
        let (full, full_totals) = step(&model, "flex", &b, &o);
        assert!(
            full.iter().all(Option::is_some),
            "every parameter has a gradient"
        );
        for devices in ["flex,flex", "flex,flex,flex"] {
            let (dp, totals) = step(&model, devices, &b, &o);
            for (i, (f, d)) in full.iter().zip(&dp).enumerate() {
                let (f, d) = (f.as_ref().unwrap(), d.as_ref().unwrap());
                assert_close(d, f, &format!("{devices}: gradient of parameter {i}"));
            }
            assert_eq!(totals.seen, full_totals.seen, "{devices}");
            assert_eq!(totals.correct, full_totals.correct, "{devices}");
            assert_close(
                &[totals.nll_sum as f32],
                &[full_totals.nll_sum as f32],
                "NLL sum",
            );
            assert_close(&[totals.loss], &[full_totals.loss], "loss");
        }
    }

    /// A Bayesian model trained on the NLL alone in mean mode does not use its `rho`s: one
    /// process gets no gradient for them, but every replica of a data-parallel run gets one
    /// (zero) for every parameter, as an all-reduce needs.
    #[test]
    fn every_parameter_gets_a_gradient_on_every_replica() {
        let _rng = bnn_layers::lock_device_rng();
        let model = set_sampling(model(Kind::Bayesian), false);
        let (b, o) = (batch(4), objective(false));
        let (single, _) = step(&model, "flex", &b, &o);
        let params = single.len();
        assert!(single.iter().any(Option::is_none), "the rhos are unused");
        for rank in 0..2 {
            let l = o
                .replica_loss(&model, &b.shard(rank, 2), (rank, 2, 4), AT)
                .unwrap();
            let g = GradientsParams::from_module(&mut l.loss.backward(), &model);
            let got = host_grads(&model, &g);
            assert!(
                got.iter().all(Option::is_some),
                "rank {rank}: {} of {params}",
                g.len()
            );
            // The zero term adds nothing: the used parameters' gradients are those of the
            // loss without it.
            let unused: Vec<bool> = single.iter().map(Option::is_none).collect();
            for (g, unused) in got.iter().zip(unused) {
                if unused {
                    assert!(g.as_ref().unwrap().iter().all(|&v| v == 0.0));
                }
            }
        }
    }

    /// Each rank draws its own noise, the same for the same seed, rank and step.
    #[test]
    fn noise_streams_differ_per_rank_and_repeat() {
        let _rng = bnn_layers::lock_device_rng();
        let model = model(Kind::Bayesian);
        let (b, o) = (batch(4), objective(true));
        let value = |rank| {
            o.replica_loss(&model, &b, (rank, 2, 4), AT)
                .unwrap()
                .value
                .to_bits()
        };
        let (r0, r1) = (value(0), value(1));
        assert_ne!(r0, r1, "ranks 0 and 1 drew the same noise");
        assert_eq!(value(0), r0, "rank 0 again");
        assert_eq!(value(1), r1, "rank 1 again");
        let later = Position { step: 3, ..AT };
        let at_later = o
            .replica_loss(&model, &b, (0, 2, 4), later)
            .unwrap()
            .value
            .to_bits();
        assert_ne!(at_later, r0, "the next step draws new noise");
    }

    /// On every replica the KL term is `KL / N_train` with the global `N_train`, whatever the
    /// shard's size.
    #[test]
    fn each_replica_scales_the_kl_by_the_global_training_set() {
        let _rng = bnn_layers::lock_device_rng();
        let model = set_sampling(model(Kind::Bayesian), false);
        let b = batch(5);
        let kl = kl_divergence_with(&model, &Prior::default(), SharedKl::Mixture)
            .unwrap()
            .into_scalar::<f32>() as f64;
        for rank in 0..2 {
            let shard = b.shard(rank, 2);
            let with = objective(true)
                .replica_loss(&model, &shard, (rank, 2, 5), AT)
                .unwrap();
            let without = objective(false)
                .replica_loss(&model, &shard, (rank, 2, 5), AT)
                .unwrap();
            let term = with.value as f64 - without.value as f64;
            let want = kl / N_TRAIN as f64;
            assert!(
                (term - want).abs() <= 1e-5 * want,
                "rank {rank}: KL term {term}, want {want}"
            );
        }
    }

    fn loader(n: usize, batch_size: usize) -> DataLoader {
        let pixels: Vec<u8> = (0..n * 16).map(|i| ((i * 37) % 251) as u8).collect();
        let labels: Vec<u32> = (0..n as u32).map(|i| i % 3).collect();
        let data = InMemoryDataset::new(pixels, labels, (1, 4, 4), 3).unwrap();
        let config = LoaderConfig {
            batch_size,
            shuffle: true,
            drop_last: false,
            seed: 5,
            workers: 1,
            prefetch: 1,
        };
        DataLoader::new(data, Compose::new(), config).unwrap()
    }

    fn config(epochs: usize, batch_size: usize) -> TrainConfig {
        let mut c = TrainConfig::bayes_by_backprop(epochs);
        c.batch_size = batch_size;
        c.seed = 9;
        c
    }

    fn run(
        model: Network,
        devices: &str,
        loader: &DataLoader,
        c: &TrainConfig,
    ) -> (Vec<u32>, Vec<EpochStats>) {
        let parallel = DataParallel::parse(devices).unwrap();
        let (m, h) = train_data_parallel(model, loader, c, &parallel, None, &mut Silent).unwrap();
        let bits = bnn_layers::export_params(&m)
            .into_iter()
            .flat_map(|t| t.data.into_iter().map(f32::to_bits))
            .collect();
        (bits, h)
    }

    /// One step over a batch of 7 (shards of 4 and 3) in mean mode: the epoch's loss, NLL,
    /// accuracy and KL on two replicas are those of one process, and the loss less the NLL is
    /// the KL over the global `N_train`.
    #[test]
    fn epoch_metrics_reduced_across_replicas_equal_one_process() {
        let _rng = bnn_layers::lock_device_rng();
        let data = loader(7, 7);
        let c = config(1, 7);
        let m = || set_sampling(model(Kind::Bayesian), false);
        let (_, one) = run(m(), "flex", &data, &c);
        let (_, two) = run(m(), "flex,flex", &data, &c);
        let (one, two) = (&one[0], &two[0]);
        for (what, a, b) in [
            ("loss", one.loss, two.loss),
            ("nll", one.nll, two.nll),
            ("accuracy", one.accuracy, two.accuracy),
            ("kl", one.kl, two.kl),
        ] {
            assert!(
                (a - b).abs() <= 1e-5 * a.abs().max(1e-3),
                "{what}: {a} vs {b}"
            );
        }
        let kl_term = two.loss - two.nll;
        let want = two.kl / 7.0;
        assert!(
            (kl_term - want).abs() <= 1e-4 * want,
            "KL term {kl_term}, want {want}"
        );
    }

    /// Two data-parallel runs with the same seed end with the same bits and history; a run on
    /// one device draws other noise.
    #[test]
    fn a_data_parallel_run_repeats_bit_for_bit() {
        let _rng = bnn_layers::lock_device_rng();
        let data = loader(24, 8);
        let c = config(2, 8);
        let (a, ha) = run(model(Kind::Bayesian), "flex,flex", &data, &c);
        let (b, hb) = run(model(Kind::Bayesian), "flex,flex", &data, &c);
        assert_eq!(a, b, "parameters");
        let strip = |h: &[EpochStats]| -> Vec<[u64; 4]> {
            h.iter()
                .map(|e| [e.loss, e.nll, e.kl, e.accuracy].map(f64::to_bits))
                .collect()
        };
        assert_eq!(strip(&ha), strip(&hb), "history");
        let (single, _) = run(model(Kind::Bayesian), "flex", &data, &c);
        assert_ne!(a, single, "two replicas and one drew the same noise");
    }

    /// A lazily initialised model is initialised when placed for several replicas, from the
    /// generator's state then, not at the first forward pass (after a replica's noise seed).
    #[test]
    fn placing_replicas_initialises_lazy_parameters() {
        let _rng = bnn_layers::lock_device_rng();
        let device = flex().autodiff();
        let lazy = || {
            device.seed(3);
            ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 3, 1, 4)
                .with_mlp_hidden(vec![8])
                .init(&device)
                .unwrap()
        };
        let values = |m: &Network| -> Vec<u32> {
            bnn_layers::export_params(m)
                .into_iter()
                .flat_map(|t| t.data.into_iter().map(f32::to_bits))
                .collect()
        };
        let want = values(&lazy());
        let parallel = DataParallel::parse("flex,flex").unwrap();
        let placed = Replicas::start(&parallel).place(lazy());
        device.seed(99);
        assert_eq!(values(&placed), want);
    }

    /// On a CUDA machine (`SWBNN_TEST_BACKEND=cuda`, built with `--features cuda`): the
    /// collective path (parameters marked distributed, `backward()` on a thread of its own,
    /// NCCL's all-reduce, here with one rank) gives the gradients of the plain path, and a short
    /// run through it trains (no deadlock, the marks survive the optimiser's step).
    #[cfg(feature = "cuda")]
    #[test]
    fn the_collective_path_matches_the_plain_one_on_cuda() {
        if !std::env::var("SWBNN_TEST_BACKEND").is_ok_and(|b| b.starts_with("cuda")) {
            return;
        }
        let _rng = bnn_layers::lock_device_rng();
        let device = flex().autodiff();
        device.seed(3);
        let m = ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 3, 1, 4)
            .with_mlp_hidden(vec![8])
            .init(&device)
            .unwrap();
        materialize(&m);
        let m = set_sampling(m, false);
        let (b, o) = (batch(5), objective(true));
        let plain = DataParallel::parse("cuda:0").unwrap();
        let nccl = plain.clone().with_collective();
        let (g, t) = Replicas::start(&plain).gradients(&m, &b, &o, AT).unwrap();
        let want = host_grads(&m, &g);
        let replicas = Replicas::start(&nccl);
        let placed = replicas.place(m.clone());
        let (g, u) = replicas.gradients(&placed, &b, &o, AT).unwrap();
        let got = host_grads(&placed, &g);
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_close(
                g.as_ref().unwrap(),
                w.as_ref().unwrap(),
                &format!("parameter {i}"),
            );
        }
        assert_eq!((t.seen, t.correct), (u.seen, u.correct));
        drop(replicas);
        let data = loader(24, 8);
        let (_, h) =
            train_data_parallel(m, &data, &config(2, 8), &nccl, None, &mut Silent).unwrap();
        assert!(h.iter().all(|e| e.loss.is_finite()), "{h:?}");
    }

    /// A GPU named twice, and two backends in one list, are refused (needs a GPU backend
    /// compiled in; no GPU is used: naming a device does not open it).
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    #[test]
    fn a_gpu_named_twice_and_mixed_backends_are_refused() {
        #[cfg(feature = "wgpu")]
        match DataParallel::parse("wgpu,wgpu") {
            Err(DevicesError::Duplicate {
                first: 1,
                second: 2,
                name,
            }) => assert_eq!(name, "wgpu"),
            r => panic!("{r:?}"),
        }
        #[cfg(feature = "cuda")]
        match DataParallel::parse("cuda:1,cuda,cuda:0") {
            Err(DevicesError::Duplicate {
                first: 2,
                second: 3,
                ..
            }) => {}
            r => panic!("{r:?}"),
        }
        #[cfg(all(feature = "wgpu", feature = "flex"))]
        match DataParallel::parse("flex,wgpu") {
            Err(DevicesError::MixedBackends { position: 2, .. }) => {}
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn device_lists_are_checked() {
        let err = |s: &str| DataParallel::parse(s).unwrap_err();
        assert!(matches!(err(""), DevicesError::Empty));
        match err("flex,nosuch") {
            DevicesError::Unknown { position, name, .. } => {
                assert_eq!((position, name.as_str()), (2, "nosuch"))
            }
            e => panic!("{e}"),
        }
        let e = err("flex,flex,bogus:3").to_string();
        assert!(e.contains("device 3") && e.contains("bogus:3"), "{e}");
        let dp = DataParallel::parse("flex, flex").unwrap();
        assert_eq!(dp.names(), ["flex", "flex"]);
        match dp.check_batch_size(1) {
            Err(DevicesError::WorldSizeExceedsBatch {
                world_size: 2,
                batch_size: 1,
            }) => {}
            r => panic!("{r:?}"),
        }
        assert!(dp.check_batch_size(2).is_ok());
        // Through training: a typed error, before any work.
        let _rng = bnn_layers::lock_device_rng();
        let r = train_data_parallel(
            model(Kind::Bayesian),
            &loader(4, 1),
            &config(1, 1),
            &dp,
            None,
            &mut Silent,
        );
        assert!(matches!(
            r,
            Err(TrainError::Devices(e)) if matches!(*e, DevicesError::WorldSizeExceedsBatch { .. })
        ));
    }
}
