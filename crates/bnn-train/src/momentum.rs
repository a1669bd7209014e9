//! SGD whose momentum changes from step to step, for PyTorch's one-cycle momentum cycling
//! ([`crate::MomentumCycle`]): burn's `Sgd` fixes its momentum when it is built.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use burn::optim::{LearningRate, Optimizer, RecordState, StateSink, StateSource};
use burn::tensor::{Device, Tensor};

/// The momentum every [`CyclingSgd`] built on it reads at its next step; the training loop sets
/// it before each step from the schedule.
#[derive(Debug, Clone)]
pub(crate) struct MomentumDial(Arc<AtomicU64>);

impl MomentumDial {
    /// A dial at `momentum`.
    pub(crate) fn new(momentum: f64) -> Self {
        Self(Arc::new(AtomicU64::new(momentum.to_bits())))
    }

    /// Sets the momentum of the next steps.
    pub(crate) fn set(&self, momentum: f64) {
        self.0.store(momentum.to_bits(), Ordering::Relaxed);
    }

    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

/// PyTorch's `torch.optim.SGD` with `dampening=0`, its momentum read from a [`MomentumDial`] at
/// every step: `g += wd * p`, `v = m * v + g` (`v = g` at the first step), then
/// `p -= lr * (g + m * v)` with Nesterov, else `p -= lr * v`.
#[derive(Debug, Clone)]
pub(crate) struct CyclingSgd {
    momentum: MomentumDial,
    nesterov: bool,
    weight_decay: f64,
}

impl CyclingSgd {
    pub(crate) fn new(momentum: MomentumDial, nesterov: bool, weight_decay: f64) -> Self {
        Self {
            momentum,
            nesterov,
            weight_decay,
        }
    }
}

/// The momentum buffer of one parameter.
#[derive(Clone)]
pub(crate) struct Velocity<const D: usize> {
    velocity: Tensor<D>,
}

impl<const D: usize> RecordState for Velocity<D> {
    fn state_flatten(&self, prefix: &str, out: &mut StateSink) {
        out.push_tensor(prefix, "velocity", self.velocity.clone().into_data());
    }

    fn state_unflatten(prefix: &str, src: &mut StateSource, device: &Device) -> Option<Self> {
        let data = src.take_tensor(prefix, "velocity")?;
        Some(Self {
            velocity: Tensor::from_data(data, device),
        })
    }
}

impl Optimizer for CyclingSgd {
    type State<const D: usize> = Velocity<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        mut grad: Tensor<D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<D>, Option<Self::State<D>>) {
        let m = self.momentum.get();
        if self.weight_decay > 0.0 {
            grad = grad.add(tensor.clone().mul_scalar(self.weight_decay));
        }
        let velocity = match state {
            Some(s) => s.velocity.mul_scalar(m).add(grad.clone()),
            None => grad.clone(),
        };
        let update = match self.nesterov {
            true => grad.add(velocity.clone().mul_scalar(m)),
            false => velocity.clone(),
        };
        (tensor - update.mul_scalar(lr), Some(Velocity { velocity }))
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &Device) -> Self::State<D> {
        Velocity {
            velocity: state.velocity.to_device(device),
        }
    }
}
