//! Exact resume: a run interrupted after epoch k and resumed ends bit-identical to an
//! uninterrupted one. The backend's generator is global, so this binary holds one test.

use std::panic::{AssertUnwindSafe, catch_unwind};

use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig, RandomHorizontalFlip};
use bnn_models::{Arch, Kind, ModelConfig, Network};
use bnn_train::{
    Checkpointer, EpochStats, Observer, Progress, Silent, StepInfo, TrainConfig, mean_mu_gradients,
    train,
};

fn loader() -> DataLoader {
    let n = 192;
    let pixels: Vec<u8> = (0..n * 64).map(|i| ((i * 37) % 251) as u8).collect();
    let labels: Vec<u32> = (0..n as u32).map(|i| i % 4).collect();
    let data = InMemoryDataset::new(pixels, labels, (1, 8, 8), 4).unwrap();
    let config = LoaderConfig {
        batch_size: 48,
        shuffle: true,
        drop_last: false,
        seed: 5,
        workers: 2,
        prefetch: 2,
    };
    // A random augmentation, so the data's generator matters too.
    DataLoader::new(
        data,
        Compose::new().then(RandomHorizontalFlip::default()),
        config,
    )
    .unwrap()
}

/// Interrupts training (as a kill would) at the first step of `epoch`.
struct StopAt(usize);

impl Observer for StopAt {
    fn on_step(&mut self, info: &StepInfo) {
        if info.epoch == self.0 {
            panic!("interrupted");
        }
    }
}

/// Ends training once `.0` epochs are behind it, asked `.1` times per epoch.
struct StopBefore(f64, usize);

impl Observer for StopBefore {
    fn stop_checks_per_epoch(&self) -> usize {
        self.1
    }

    fn should_stop(
        &mut self,
        _model: &Network,
        at: Progress,
    ) -> Result<bool, bnn_train::TrainError> {
        Ok(at.epochs_done() >= self.0)
    }
}

/// Every parameter's path, shape and bits (a record's bytes would also hold parameter ids).
fn bits(model: &Network) -> Vec<(String, Vec<usize>, Vec<u32>)> {
    bnn_layers::export_params(model)
        .into_iter()
        .map(|t| {
            (
                t.path,
                t.shape,
                t.data.iter().map(|v| v.to_bits()).collect(),
            )
        })
        .collect()
}

fn without_timing(h: &[EpochStats]) -> Vec<(usize, f64, f64, f64, f64, Option<usize>)> {
    h.iter()
        .map(|e| (e.epoch, e.loss, e.nll, e.kl, e.accuracy, e.partial_steps))
        .collect()
}

#[test]
fn an_interrupted_run_resumes_bit_identically() {
    let device = bnn_layers::test_device().autodiff();
    for (name, arch, kind, config) in [
        (
            "bbb",
            Arch::Mlp,
            Kind::Bayesian,
            TrainConfig::bayes_by_backprop(3),
        ),
        (
            "sgd",
            Arch::Mlp,
            Kind::Deterministic,
            TrainConfig::deterministic(3),
        ),
        // Batch norm's running statistics are part of the model and of its checkpoint: every
        // step's update is in them, the last one included.
        (
            "resnet20-batch-norm",
            Arch::Resnet20,
            Kind::Deterministic,
            TrainConfig::deterministic(3),
        ),
        // The momentum buffers of the cycling SGD (the `reference` recipe's) are checkpointed too.
        (
            "sgd-momentum-cycle",
            Arch::Mlp,
            Kind::Bayesian,
            TrainConfig {
                lr: 0.1,
                lr_rho: 0.1,
                optimizer: bnn_train::OptimizerKind::Sgd {
                    momentum: 0.9,
                    nesterov: false,
                },
                schedule: bnn_train::LrSchedule::OneCycleCos {
                    pct_start: 0.3,
                    momentum: Some(bnn_train::MomentumCycle::PYTORCH),
                },
                ..TrainConfig::bayes_by_backprop(3)
            },
        ),
    ] {
        let model_config = ModelConfig::for_input(arch, kind, 4, 1, 8).with_mlp_hidden(vec![32]);
        let mut config = config;
        config.batch_size = 48;
        config.seed = 11;
        let init = || {
            device.seed(7);
            model_config.init(&device).unwrap()
        };

        let whole_dir = tempfile::tempdir().unwrap();
        let whole_ck = Checkpointer::new(whole_dir.path()).unwrap();
        let (whole, whole_history) =
            train(init(), &loader(), &config, Some(&whole_ck), &mut Silent).unwrap();

        for k in [1, 2] {
            let dir = tempfile::tempdir().unwrap();
            {
                let ck = Checkpointer::new(dir.path()).unwrap();
                let stopped = catch_unwind(AssertUnwindSafe(|| {
                    train(init(), &loader(), &config, Some(&ck), &mut StopAt(k))
                }));
                assert!(stopped.is_err(), "{name}: the run was interrupted");
                assert_eq!(ck.state().unwrap().unwrap().epoch + 1, k);
            }
            // As a new process would: a fresh model (other parameter ids) and optimiser.
            let ck = Checkpointer::new(dir.path()).unwrap();
            let (resumed, history) =
                train(init(), &loader(), &config, Some(&ck), &mut Silent).unwrap();
            assert_eq!(
                without_timing(&history),
                without_timing(&whole_history),
                "{name}, interrupted after epoch {k}: histories differ"
            );
            assert!(
                bits(&resumed) == bits(&whole),
                "{name}, interrupted after epoch {k}: models differ"
            );
            // What a later stage computes from the model (2DGBNN's gradient pass) is the same
            // too: the returned model is the committed one, not tensors laid out otherwise.
            if kind == Kind::Bayesian {
                let grads = |m: &Network| {
                    device.seed(3);
                    mean_mu_gradients(m, &loader(), &config.prior, 2)
                        .unwrap()
                        .into_iter()
                        .map(|t| {
                            let g = t.grad_mu.unwrap_or_default();
                            (t.path, g.iter().map(|v| v.to_bits()).collect::<Vec<_>>())
                        })
                        .collect::<Vec<_>>()
                };
                assert!(
                    grads(&resumed) == grads(&whole),
                    "{name}, interrupted after epoch {k}: gradients differ"
                );
            }
        }

        // A run its observer ended, after one epoch or (4 steps per epoch, asked twice per
        // epoch) after one and a half, records the stop; resumed under the same rule it trains
        // no further, without one it goes on exactly as the whole run did.
        let mut after_one = Vec::new();
        for (after, checks, partial) in [(1.0, 1, None), (1.5, 2, Some(2))] {
            let dir = tempfile::tempdir().unwrap();
            let ck = Checkpointer::new(dir.path()).unwrap();
            let rule = || StopBefore(after, checks);
            let (one, h) = train(init(), &loader(), &config, Some(&ck), &mut rule()).unwrap();
            let want = if partial.is_some() { 2 } else { 1 };
            assert_eq!(h.len(), want, "{name} {after}");
            assert_eq!(h[want - 1].partial_steps, partial, "{name} {after}");
            let state = ck.state().unwrap().unwrap();
            assert!(state.stopped, "{name} {after}");
            assert_eq!(state.complete_epochs(), 1, "{name} {after}");
            let (again, h2) = train(init(), &loader(), &config, Some(&ck), &mut rule()).unwrap();
            assert_eq!(without_timing(&h2), without_timing(&h), "{name} {after}");
            assert!(
                bits(&again) == bits(&one),
                "{name} {after}: a stopped run trained on"
            );
            if partial.is_some() {
                assert!(
                    bits(&one) != bits(&whole) && bits(&one) != after_one,
                    "{name}: the stop inside epoch 2 kept its steps"
                );
            } else {
                after_one = bits(&one);
            }
            let (rest, h) = train(init(), &loader(), &config, Some(&ck), &mut Silent).unwrap();
            assert_eq!(
                without_timing(&h),
                without_timing(&whole_history),
                "{name} {after}"
            );
            assert!(
                bits(&rest) == bits(&whole),
                "{name} {after}: continued run differs"
            );
            assert!(!ck.state().unwrap().unwrap().stopped, "{name} {after}");
        }
    }
}
