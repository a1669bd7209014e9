//! When stage 3 (retraining the shared model) ends: after a fixed number of epochs, as the
//! paper does, or as soon as the shared model is as confident as the BNN it was compressed from.
//!
//! Why a rule: snapping the means to the component centres shrinks the logits, so the shared
//! model starts under-confident. Retraining restores the gain, and past the source's confidence
//! it goes on sharpening (likelihood fine-tuning under a nearly inert mixture KL). ECE therefore
//! falls, then rises again with the epochs: on LeNet-5 with all of Fashion-MNIST, 0, 1 and 2
//! epochs give ECE 0.0136, 0.0077 and 0.0112 (docs/results.md). The test NLL keeps falling over
//! the same epochs, so a stopping rule on held-out NLL would train longest and not help. The
//! source BNN's mean confidence is a label-free target for the compressed model's predictive.
//!
//! A regression network's confidence is minus the negative log-likelihood of the probe's
//! targets (validation rows) under its Monte-Carlo predictive: retraining stops once the shared
//! network predicts them as well as the BNN (`StopRule::neg_nll` says why spread alone fails).
//!
//! The rule looks at data, so it reads validation images, never the test set: the caller gives
//! the probe explicitly ([`crate::compress::compress`]'s `validation` loader, in the setups of
//! `swbnn` a split held out of the training set). Without one the rule is an error, never a
//! silent fallback to training images.

use bnn_data::{Batch, DataLoader};
use bnn_layers::set_sampling;
use bnn_models::{Classifier, ClassifierBody};
use bnn_train::{EpochStats, Observer, Progress, StepInfo, TrainError, to_tensors};
use burn::module::Module;
use burn::prelude::*;
use burn::tensor::activation::softmax;
use serde::{Deserialize, Serialize};

use crate::report::{ConfidenceCheck, RetrainStopTrace};

/// When stage 3 ends. `retrain.epochs` is the most it trains either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RetrainStop {
    /// All of `retrain.epochs` (the paper's fixed `E`).
    #[default]
    Epochs,
    /// `checks_per_epoch` times per epoch (the first before the epoch), the mean confidence
    /// (the largest class probability of the Monte-Carlo predictive) of the shared model and
    /// of the source BNN on the same fixed probe of validation images; training ends at the
    /// first check where the shared model's is at least the source's.
    ConfidenceRecovered {
        /// Validation images in the probe (the first whole batches of the validation loader,
        /// in its order and with its transform, the same for both models).
        probe_images: usize,
        /// Weight samples per image.
        samples: usize,
        /// Checks per epoch, evenly spaced in steps (1: at epoch boundaries only; absent in
        /// setups written before checks inside an epoch, which mean 1).
        #[serde(default = "one")]
        checks_per_epoch: usize,
    },
}

fn one() -> usize {
    1
}

impl RetrainStop {
    /// The presets' rule: a probe of 2,048 images, 8 weight samples each, checked 8 times per
    /// epoch. On LeNet-5 that is about a second per check. An epoch of retraining raises the
    /// confidence by 0.01-0.02, so checks at epoch boundaries overshoot the source's by up to
    /// that. At an eighth of an epoch the quick preset's compressed model is within noise of
    /// its BBB (6 seeds, paired: ECE -0.0011 ± 0.0028, OOD AUROC -0.006 ± 0.008;
    /// docs/results.md, where the 8 was chosen, on the test set).
    pub fn confidence_recovered() -> Self {
        RetrainStop::ConfidenceRecovered {
            probe_images: 2048,
            samples: 8,
            checks_per_epoch: 8,
        }
    }

    /// Checks the rule's sizes: at least one probe image, one sample and one check per epoch.
    pub fn validate(&self) -> Result<(), crate::SwshareError> {
        if let RetrainStop::ConfidenceRecovered {
            probe_images,
            samples,
            checks_per_epoch,
        } = *self
            && (probe_images == 0 || samples == 0 || checks_per_epoch == 0)
        {
            return Err(crate::SwshareError::config(
                "retrain_stop",
                format!(
                    "probe_images {probe_images}, samples {samples}, checks_per_epoch {checks_per_epoch}"
                ),
                "at least 1 probe image, 1 sample and 1 check per epoch",
            ));
        }
        Ok(())
    }
}

/// The loader epoch the probe is drawn from: a fixed one, so that a shuffling loader gives the
/// same probe on every run.
const PROBE_EPOCH: u64 = 0;

/// An [`Observer`] that forwards progress to `inner` and applies a [`RetrainStop`] rule.
pub(crate) struct StopRule<'a, B: ClassifierBody> {
    inner: &'a mut dyn Observer<B>,
    probe: Vec<Batch>,
    samples: usize,
    checks_per_epoch: usize,
    seed: u64,
    trace: Option<RetrainStopTrace>,
}

impl<'a, B: ClassifierBody> StopRule<'a, B> {
    /// The rule `stop` for a model compressed from `source`, with the device seed `seed`, its
    /// probe drawn from `validation`. Measures the source's confidence once, here. A rule that
    /// needs a probe without `validation`, or with an empty one, is an error.
    pub(crate) fn new(
        stop: RetrainStop,
        source: &Classifier<B>,
        validation: Option<&DataLoader>,
        seed: u64,
        inner: &'a mut dyn Observer<B>,
    ) -> Result<Self, TrainError> {
        let RetrainStop::ConfidenceRecovered {
            probe_images,
            samples,
            checks_per_epoch,
        } = stop
        else {
            return Ok(Self {
                inner,
                probe: Vec::new(),
                samples: 0,
                checks_per_epoch: 1,
                seed,
                trace: None,
            });
        };
        let data = match validation {
            Some(v) if !v.dataset().is_empty() => v,
            _ => {
                return Err(TrainError::Config(
                    "retrain_stop `confidence-recovered` measures confidence on validation \
                     images, and none were given: hold out a validation split, or end stage 3 \
                     after its epochs (retrain_stop `epochs`)"
                        .into(),
                ));
            }
        };
        let mut probe = Vec::new();
        let mut images = 0;
        for batch in data.epoch(PROBE_EPOCH) {
            let batch = batch?;
            images += batch.len();
            probe.push(batch);
            if images >= probe_images {
                break;
            }
        }
        let mut rule = Self {
            inner,
            probe,
            samples,
            checks_per_epoch,
            seed,
            trace: None,
        };
        let source_confidence = rule.confidence(source, u64::MAX)?;
        rule.trace = Some(RetrainStopTrace {
            probe_images: images,
            source_confidence,
            checks: Vec::new(),
            stopped_after: None,
        });
        Ok(rule)
    }

    /// What the rule measured (`None` for [`RetrainStop::Epochs`]).
    pub(crate) fn into_trace(self) -> Option<RetrainStopTrace> {
        self.trace
    }

    /// Mean confidence of `model`'s predictive over the probe, its weight noise seeded from
    /// `(seed, tag)`: the largest class probability of a classifier's; for a regression
    /// network, minus the NLL of the probe's targets ([`Self::neg_nll`]).
    fn confidence(&self, model: &Classifier<B>, tag: u64) -> Result<f64, TrainError> {
        let valid = set_sampling(model.valid(), true);
        let device = valid.devices().first().cloned().unwrap_or_default();
        device.seed(bnn_data::derive_seed(self.seed, tag, 0x5709));
        if valid.head().is_regression() {
            return self.neg_nll(&valid, &device);
        }
        let (mut sum, mut n) = (0.0f64, 0usize);
        for batch in &self.probe {
            let (x, _) = to_tensors(batch, &device);
            let mut probs: Option<Tensor<2>> = None;
            for _ in 0..self.samples {
                let p = softmax(valid.forward(x.clone()), 1);
                probs = Some(match probs {
                    Some(acc) => acc + p,
                    None => p,
                });
            }
            if let Some(p) = probs {
                let top = p.max_dim(1).sum().into_scalar::<f32>() as f64;
                sum += top / self.samples as f64;
                n += batch.len();
            }
        }
        if n == 0 || !sum.is_finite() {
            return Err(TrainError::Config(format!(
                "retrain_stop: no finite confidence over {n} probe images"
            )));
        }
        Ok(sum / n as f64)
    }

    /// A regression network's confidence: minus the negative log-likelihood of the probe's
    /// targets under the Monte-Carlo mixture predictive, `-(1/n) sum_i sum_t ln((1/S) sum_s
    /// N(y_it; mu_sit, sigma_sit^2))`, in standardised units. A classifier's snapped logits
    /// shrink, so its confidence falls and retraining brings it back; a regression network's
    /// snapped spread may shrink or grow (it grew sharper while its means got worse on a
    /// synthetic table, where a rule on spread stopped at once), so the rule compares what both
    /// predict of the validation targets: retraining stops once the shared network's NLL is
    /// no higher than the BNN's.
    fn neg_nll(&self, valid: &Classifier<B>, device: &Device) -> Result<f64, TrainError> {
        let (mut sum, mut rows) = (0.0f64, 0usize);
        let ln_s = (self.samples as f64).ln();
        for batch in &self.probe {
            if batch.targets.is_empty() {
                return Err(TrainError::Config(
                    "retrain_stop: a regression network's probe needs its targets".into(),
                ));
            }
            let (x, _) = to_tensors(batch, device);
            let y = bnn_train::likelihood::targets_tensor(batch, device);
            let mut logs = Vec::with_capacity(self.samples);
            for _ in 0..self.samples {
                let (m, s) = valid
                    .mean_std(valid.forward(x.clone()))
                    .map_err(|e| TrainError::Config(e.to_string()))?;
                let log_pdf = bnn_train::likelihood::gaussian_log_pdf(m, s, y.clone());
                logs.push(log_pdf.unsqueeze_dim::<3>(0));
            }
            // ln of the mixture: logsumexp over the samples, less ln S.
            let stacked = Tensor::cat(logs, 0);
            let top = stacked.clone().max_dim(0);
            let mixture = (stacked - top.clone()).exp().sum_dim(0).log() + top;
            rows += batch.len();
            sum += mixture.sum().into_scalar::<f32>() as f64
                - ln_s * (batch.len() * batch.target_dim) as f64;
        }
        let mean = sum / rows.max(1) as f64;
        if rows == 0 || !mean.is_finite() {
            return Err(TrainError::Config(format!(
                "retrain_stop: no finite log-likelihood over {rows} probe rows"
            )));
        }
        Ok(mean)
    }
}

impl<B: ClassifierBody> Observer<B> for StopRule<'_, B> {
    fn on_step(&mut self, info: &StepInfo) {
        self.inner.on_step(info);
    }

    fn project(&mut self, model: Classifier<B>) -> Result<Classifier<B>, TrainError> {
        self.inner.project(model)
    }

    fn on_epoch(&mut self, stats: &EpochStats) {
        self.inner.on_epoch(stats);
    }

    fn stop_checks_per_epoch(&self) -> usize {
        if self.trace.is_some() {
            self.checks_per_epoch
        } else {
            self.inner.stop_checks_per_epoch()
        }
    }

    fn should_stop(&mut self, model: &Classifier<B>, at: Progress) -> Result<bool, TrainError> {
        if self.trace.is_none() {
            return self.inner.should_stop(model, at);
        }
        // The probe's noise is a function of where the check is.
        let step = (at.epoch * at.steps + at.step) as u64;
        let confidence = self.confidence(model, step)?;
        let Some(trace) = self.trace.as_mut() else {
            return Ok(false);
        };
        let epochs_done = at.epochs_done();
        trace.checks.push(ConfidenceCheck {
            epochs_done,
            confidence,
        });
        let stop = confidence >= trace.source_confidence;
        if stop {
            trace.stopped_after = Some(epochs_done);
        }
        Ok(stop || self.inner.should_stop(model, at)?)
    }
}
