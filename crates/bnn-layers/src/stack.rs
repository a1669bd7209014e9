//! Monte-Carlo stacking: several weight samples in one forward pass.
//!
//! Monte-Carlo prediction runs `samples` stochastic forward passes. On a GPU each pass is many
//! small kernel launches and, in evaluation, a read back to the host. With a stack of `S`, the
//! input batch `[B, ...]` is repeated `S` times along the batch dimension (`[S * B, ...]`,
//! sample-major: rows `s * B .. (s + 1) * B` belong to sample `s`), and every Bayesian or
//! weight-shared layer draws its `S` weight samples at once and applies sample `s` to rows
//! `s * B .. (s + 1) * B`:
//! - dense layers as one batched matmul, `[S, B, d_in] x [S, d_in, d_out]`;
//! - convolutions as one grouped convolution: the input `[S * B, C, H, W]` is rearranged to
//!   `[B, S * C, H, W]` and convolved with the `S` stacked weights `[S * O, C / g, kh, kw]`
//!   in `S * g` groups (group `s * g + j` of the stacked convolution is group `j` of sample `s`);
//! - local reparameterisation draws its noise per output anyway, so it runs on the stacked batch
//!   as on any batch; Flipout draws its `S` weight perturbations (and bias samples) at once, its
//!   sign flips per row as always.
//!
//! Deterministic layers (batch norm in evaluation mode, pooling, activations) are batch-agnostic
//! and need nothing. [`set_mc_stack`] sets `S` on every Bayesian and shared layer of a model;
//! `S = 1`, the default, is the per-sample forward pass, unchanged bit for bit.
//!
//! Random draws: a stacked forward draws each layer's noise for its `S` samples in one call, so
//! the sequence of draws differs from `S` per-sample forwards. The same seed, backend and `S`
//! give the same result; `S = 1` and `S > 1` give different (equally distributed) samples.

use burn::module::{Flag, Module, ModuleMapper, Param};

use crate::LayerError;

/// Bits of the stack size held by a layer (see [`McStack`]).
const BITS: usize = 12;

/// The largest stack [`set_mc_stack`] accepts.
pub const MAX_MC_STACK: usize = (1 << BITS) - 1;

/// The number of weight samples a layer draws per forward pass ([`set_mc_stack`]).
///
/// Held as `BITS` flags because burn's `ModuleMapper` can set parameters and flags only, and
/// burn leaves flags out of records: models saved before this setting existed load unchanged,
/// and records do not change. Like every flag, burn's `Module::valid()` clears it (back to
/// `S = 1`), so set it after `valid()`, as [`crate::set_sampling`].
#[derive(Module, Debug)]
pub struct McStack {
    bits: Vec<Param<Flag>>,
}

impl Default for McStack {
    fn default() -> Self {
        Self {
            bits: (0..BITS).map(|_| Param::from_bool(false)).collect(),
        }
    }
}

impl McStack {
    /// The stack size `S`, at least 1 (all flags cleared reads as 1).
    pub fn get(&self) -> usize {
        let value = self
            .bits
            .iter()
            .enumerate()
            .filter(|(_, b)| b.is_enabled())
            .fold(0usize, |acc, (i, _)| acc | (1 << i));
        value.max(1)
    }
}

struct StackMapper {
    /// `(name, container type)` of every module entered, enum variants included.
    path: Vec<(String, String)>,
    stack: usize,
}

impl ModuleMapper for StackMapper {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path
            .push((name.to_string(), container_type.to_string()));
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn map_flag(&mut self, flag: Param<Flag>) -> Param<Flag> {
        // A bit of `McStack` is entered as field `bits` of `Struct:McStack`, then its index.
        let n = self.path.len();
        let bit = match (n >= 2).then(|| (&self.path[n - 2], &self.path[n - 1])) {
            Some(((field, parent), (index, _)))
                if field == "bits" && parent == "Struct:McStack" =>
            {
                index.parse::<usize>().ok()
            }
            _ => None,
        };
        match bit {
            Some(bit) => flag.with_value((self.stack >> bit) & 1 == 1),
            None => flag,
        }
    }
}

/// Sets every Bayesian and shared layer of `model` to draw `stack` weight samples per forward
/// pass, applied to the `stack` consecutive blocks of the batch (see the module docs). `1`
/// restores the per-sample forward. Set it after `Module::valid()`, which clears it.
///
/// # Errors
/// [`LayerError::McStack`] if `stack` is 0 or above [`MAX_MC_STACK`].
pub fn set_mc_stack<M: Module>(model: M, stack: usize) -> Result<M, LayerError> {
    if !(1..=MAX_MC_STACK).contains(&stack) {
        return Err(LayerError::McStack {
            stack,
            max: MAX_MC_STACK,
        });
    }
    Ok(model.map(&mut StackMapper {
        path: Vec::new(),
        stack,
    }))
}

/// The rows per sample of a stacked batch of `rows` rows.
///
/// # Panics
/// If `rows` is not a multiple of `stack`: the input is not a stacked batch.
pub(crate) fn rows_per_sample(rows: usize, stack: usize) -> usize {
    assert!(
        rows.is_multiple_of(stack),
        "a stacked forward of {stack} samples needs a batch of a multiple of {stack} rows, got {rows}"
    );
    rows / stack
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BayesLinearConfig, set_sampling};

    #[test]
    fn set_mc_stack_round_trips_and_valid_clears_it() {
        let device = crate::test_device();
        let layer = BayesLinearConfig::new(3, 2).init(&device);
        assert_eq!(layer.mc_stack.get(), 1);
        for s in [1, 2, 5, 8, 30, 1024, MAX_MC_STACK] {
            let l = set_mc_stack(layer.clone(), s).unwrap();
            assert_eq!(l.mc_stack.get(), s);
            // The sampling flag is left alone.
            assert!(l.sampling.is_enabled());
        }
        let l = set_mc_stack(set_sampling(layer.clone(), false), 7).unwrap();
        assert_eq!((l.mc_stack.get(), l.sampling.is_enabled()), (7, false));
        assert_eq!(l.valid().mc_stack.get(), 1);
        assert!(set_mc_stack(layer.clone(), 0).is_err());
        assert!(set_mc_stack(layer, MAX_MC_STACK + 1).is_err());
    }
}
