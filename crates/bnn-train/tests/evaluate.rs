//! Learning-rate schedules against their definitions, and Monte-Carlo evaluation against
//! metrics computed by hand from the same predictions.

use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
use bnn_metrics::EvalSummary;
use bnn_models::{Arch, Kind, ModelConfig};
use bnn_train::{
    LrSchedule, Silent, TrainConfig, evaluate, predict, predict_logits, predict_tempered, train,
};
use burn::module::Module;

#[test]
fn constant_schedule_is_one() {
    for step in [0, 5, 99] {
        assert_eq!(LrSchedule::Constant.factor(step, 100), 1.0);
    }
}

#[test]
fn cosine_runs_from_one_to_zero() {
    let s = LrSchedule::Cosine;
    let total = 1000;
    assert!((s.factor(0, total) - 1.0).abs() < 1e-5);
    // Half-way (t = 0.5): cos(pi / 2) = 0, factor 0.5.
    assert!((s.factor(total / 2 - 1, total) - 0.5).abs() < 1e-9);
    assert!(s.factor(total - 1, total).abs() < 1e-12);
    let f: Vec<f64> = (0..total).map(|i| s.factor(i, total)).collect();
    assert!(f.windows(2).all(|w| w[1] <= w[0]), "not monotone");
}

#[test]
fn one_cycle_warms_up_to_one_then_anneals_to_its_floor() {
    let s = LrSchedule::OneCycle { pct_start: 0.25 };
    let total = 400;
    // Starts near lr / 25, peaks at exactly 1 at the end of the warm-up, ends at lr / 25e4.
    assert!(
        (s.factor(0, total) - (1.0 / 25.0 + (1.0 - 1.0 / 25.0) * (1.0 / 400.0) / 0.25)).abs()
            < 1e-12
    );
    assert!((s.factor(99, total) - 1.0).abs() < 1e-12);
    assert!((s.factor(total - 1, total) - 1.0 / 25.0 / 1e4).abs() < 1e-12);
    let f: Vec<f64> = (0..total).map(|i| s.factor(i, total)).collect();
    assert!(
        f[..100].windows(2).all(|w| w[1] > w[0]),
        "warm-up not increasing"
    );
    assert!(
        f[99..].windows(2).all(|w| w[1] < w[0]),
        "annealing not decreasing"
    );
}

/// Step for step as PyTorch 2.15's `OneCycleLR(opt, max_lr=0.1, total_steps=20,
/// pct_start=0.25)` gives it (its learning rate before each of the 20 steps, over 0.1).
#[test]
fn one_cycle_cos_is_pytorchs_one_cycle_lr_step_for_step() {
    let torch = [
        0.04,
        0.18058874503,
        0.52,
        0.85941125497,
        1.0,
        0.989073844072,
        0.95677290173,
        0.904508879153,
        0.834565964918,
        0.750001,
        0.654509879153,
        0.552266022577,
        0.447737977423,
        0.345494120847,
        0.250003,
        0.165438035082,
        0.095495120847,
        0.04323109827,
        0.010930155928,
        4e-06,
    ];
    let s = LrSchedule::OneCycleCos {
        pct_start: 0.25,
        momentum: None,
    };
    for (step, want) in torch.iter().enumerate() {
        let got = s.factor(step, torch.len());
        assert!((got - want).abs() < 1e-9, "step {step}: {got} vs {want}");
    }
}

/// The momentum PyTorch 2.15's `OneCycleLR(opt, max_lr=0.1, total_steps=20, pct_start=0.25)`
/// (defaults `cycle_momentum=True`, 0.85 to 0.95) gives SGD before each of the 20 steps.
#[test]
fn a_momentum_cycle_is_pytorchs_step_for_step() {
    let torch = [
        0.95,
        0.935355339059,
        0.9,
        0.864644660941,
        0.85,
        0.851092619963,
        0.854322727118,
        0.859549150281,
        0.866543469682,
        0.875,
        0.884549150281,
        0.894773576837,
        0.905226423163,
        0.915450849719,
        0.925,
        0.933456530318,
        0.940450849719,
        0.945677272882,
        0.948907380037,
        0.95,
    ];
    let s = LrSchedule::OneCycleCos {
        pct_start: 0.25,
        momentum: Some(bnn_train::MomentumCycle::PYTORCH),
    };
    for (step, want) in torch.iter().enumerate() {
        let got = s.momentum(step, torch.len()).unwrap();
        assert!((got - want).abs() < 1e-9, "step {step}: {got} vs {want}");
    }
    let fixed = LrSchedule::OneCycleCos {
        pct_start: 0.25,
        momentum: None,
    };
    assert_eq!(fixed.momentum(3, 20), None);
    assert_eq!(LrSchedule::Constant.momentum(3, 20), None);
}

/// A momentum cycle is checked: bounds, order, and SGD only.
#[test]
fn a_momentum_cycle_is_checked() {
    let cycle = |base, max| LrSchedule::OneCycleCos {
        pct_start: 0.3,
        momentum: Some(bnn_train::MomentumCycle { base, max }),
    };
    let mut c = bnn_train::TrainConfig::deterministic(1);
    c.schedule = cycle(0.85, 0.95);
    c.validate().unwrap();
    for (base, max) in [(0.95, 0.85), (0.5, 1.0), (-0.1, 0.9), (f64::NAN, 0.9)] {
        c.schedule = cycle(base, max);
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("momentum"), "{base}, {max}: {err}");
    }
    let mut adam = bnn_train::TrainConfig::bayes_by_backprop(1);
    adam.schedule = cycle(0.85, 0.95);
    let err = adam.validate().unwrap_err().to_string();
    assert!(err.contains("Adam"), "{err}");
}

/// The appendix recipe (2 warm-up epochs, decay by 0.2 after epochs 30, 60, ..., 200 of 250),
/// step by step as PyTorch's `WarmUpLR` + `MultiStepLR` give it with 10 steps per epoch.
#[test]
fn multi_step_warms_up_then_decays_at_each_milestone() {
    let epochs = 250.0;
    let s = LrSchedule::MultiStep {
        warmup: 2.0 / epochs,
        milestones: [30.0, 60.0, 90.0, 120.0, 150.0, 200.0]
            .iter()
            .map(|m| m / epochs)
            .collect(),
        gamma: 0.2,
    };
    let per_epoch = 10;
    let total = 250 * per_epoch;
    // Warm-up: linear from lr / 20 to lr over the first 20 steps.
    assert!((s.factor(0, total) - 1.0 / 20.0).abs() < 1e-12);
    assert!((s.factor(19, total) - 1.0).abs() < 1e-12);
    // The last step of epoch 29 still runs at lr; epoch 30 at 0.2 lr; epoch 200 at 0.2^6.
    assert_eq!(s.factor(30 * per_epoch - 1, total), 1.0);
    assert!((s.factor(30 * per_epoch, total) - 0.2).abs() < 1e-12);
    assert!((s.factor(100 * per_epoch, total) - 0.2f64.powi(3)).abs() < 1e-12);
    assert!((s.factor(total - 1, total) - 0.2f64.powi(6)).abs() < 1e-15);
}

#[test]
fn multi_step_settings_are_checked() {
    let mut c = bnn_train::TrainConfig::deterministic(1);
    c.schedule = LrSchedule::MultiStep {
        warmup: 0.0,
        milestones: vec![0.5, 0.3],
        gamma: 0.1,
    };
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("milestones"), "{e}");
    c.schedule = LrSchedule::MultiStep {
        warmup: 0.0,
        milestones: vec![0.3, 0.5],
        gamma: 0.0,
    };
    assert!(c.validate().unwrap_err().to_string().contains("gamma"));
}

fn loader(n: usize, seed: u8) -> DataLoader {
    let pixels: Vec<u8> = (0..n * 16)
        .map(|i| ((i * 37 + seed as usize * 11) % 251) as u8)
        .collect();
    let labels: Vec<u32> = (0..n as u32).map(|i| i % 4).collect();
    let data = InMemoryDataset::new(pixels, labels, (1, 4, 4), 4).unwrap();
    let config = LoaderConfig {
        batch_size: 32,
        shuffle: false,
        drop_last: false,
        seed: 0,
        workers: 0,
        prefetch: 1,
    };
    DataLoader::new(data, Compose::new(), config).unwrap()
}

/// `evaluate`'s numbers are `EvalSummary`'s on `predict`'s output, samples are honoured for
/// Bayesian models, the same seed gives the same result, and a deterministic model makes one
/// pass whatever `samples` says.
#[test]
fn evaluation_matches_its_parts_and_is_reproducible() {
    let _rng = bnn_layers::lock_device_rng();
    let device = bnn_layers::test_device();
    device.seed(11);
    let bayes = ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 4, 1, 4)
        .with_mlp_hidden(vec![16])
        .init(&device)
        .unwrap();
    let test = loader(100, 1);
    let ood = loader(60, 2);
    // Parameters are initialised lazily, from the device generator, on first use: use them
    // once before seeding, or the first evaluation draws the initial weights from seed 5.
    predict(&bayes, &test, 1).unwrap();

    device.seed(5);
    let ev = evaluate(&bayes, &test, Some(&ood), 4).unwrap();
    device.seed(5);
    let again = evaluate(&bayes, &test, Some(&ood), 4).unwrap();
    assert_eq!(ev, again);

    device.seed(5);
    let pred = predict(&bayes, &test, 4).unwrap();
    assert_eq!(pred.predictive.n_samples(), 4);
    assert_eq!(pred.labels, (0..100u32).map(|i| i % 4).collect::<Vec<_>>());
    let summary = EvalSummary::compute(pred.predictive.probabilities(), &pred.labels).unwrap();
    assert_eq!(ev.summary, summary);
    assert_eq!(ev.summary.n, 100);
    let mi = ev.uncertainty.mean_mutual_information.unwrap();
    assert!(mi >= 0.0, "{mi}");
    assert!(ev.uncertainty.ood_auroc_mutual_information.is_some());
    let auroc = ev.ood_entropy.as_ref().unwrap().auroc;
    assert!((0.0..=1.0).contains(&auroc));

    let det = ModelConfig::for_input(Arch::Mlp, Kind::Deterministic, 4, 1, 4)
        .with_mlp_hidden(vec![16])
        .init(&device)
        .unwrap();
    let pred = predict(&det, &test, 7).unwrap();
    assert_eq!(pred.predictive.n_samples(), 1);
    let ev = evaluate(&det, &test, None, 7).unwrap();
    assert!(ev.uncertainty.mean_mutual_information.is_none());
    assert!(ev.ood_max_prob.is_none());
}

/// A deep ensemble's predictive is the mean of its members' probabilities; its mutual
/// information (the members' disagreement) is positive when they differ, and one member alone
/// is that member's own evaluation.
#[test]
fn ensemble_averages_member_probabilities() {
    let _rng = bnn_layers::lock_device_rng();
    let device = bnn_layers::test_device();
    let members: Vec<_> = (0..3)
        .map(|s| {
            device.seed(100 + s);
            ModelConfig::for_input(Arch::Mlp, Kind::Deterministic, 4, 1, 4)
                .with_mlp_hidden(vec![16])
                .init(&device)
                .unwrap()
        })
        .collect();
    let test = loader(50, 3);
    let ood = loader(30, 4);
    let pred = bnn_train::predict_ensemble(&members, &test).unwrap();
    assert_eq!(pred.predictive.n_samples(), 3);
    let singles: Vec<_> = members
        .iter()
        .map(|m| predict(m, &test, 1).unwrap())
        .collect();
    for (i, p) in pred
        .predictive
        .probabilities()
        .as_slice()
        .iter()
        .enumerate()
    {
        let mean: f32 = singles
            .iter()
            .map(|s| s.predictive.probabilities().as_slice()[i])
            .sum::<f32>()
            / 3.0;
        assert!((p - mean).abs() < 1e-6, "{i}: {p} vs {mean}");
    }
    assert_eq!(pred.labels, singles[0].labels);
    let ev = bnn_train::evaluate_ensemble(&members, &test, Some(&ood)).unwrap();
    assert_eq!(ev.samples, 3);
    assert!(ev.uncertainty.mean_mutual_information.unwrap() > 0.0);
    assert!(ev.ood_entropy.is_some());

    let one = bnn_train::evaluate_ensemble(&members[..1], &test, None).unwrap();
    let alone = evaluate(&members[0], &test, None, 1).unwrap();
    assert_eq!(one.summary.accuracy, alone.summary.accuracy);
    assert!((one.summary.nll - alone.summary.nll).abs() < 1e-6);
    assert!((one.summary.ece - alone.summary.ece).abs() < 1e-6);
}

/// The predictive at a temperature divides each pass's logits before the average: the same
/// numbers as `McLogits::predictive` on the kept logits, and at `T = 1` exactly `predict`.
#[test]
fn tempered_predictions_are_mclogits_and_t_1_is_predict() {
    let _rng = bnn_layers::lock_device_rng();
    let device = bnn_layers::test_device();
    device.seed(21);
    let bayes = ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 4, 1, 4)
        .with_mlp_hidden(vec![16])
        .init(&device)
        .unwrap();
    let test = loader(70, 5);
    predict(&bayes, &test, 1).unwrap();
    device.seed(3);
    let tempered = predict_tempered(&bayes, &test, 5, &[1.0, 2.5, 0.5]).unwrap();
    device.seed(3);
    let raw = predict(&bayes, &test, 5).unwrap();
    assert_eq!(
        tempered[0].predictive.probabilities(),
        raw.predictive.probabilities()
    );
    device.seed(3);
    let logits = predict_logits(&bayes, &test, 5).unwrap();
    assert_eq!((logits.samples, logits.n, logits.classes), (5, 70, 4));
    assert_eq!(logits.labels, raw.labels);
    for (pred, t) in tempered.iter().zip([1.0, 2.5, 0.5]) {
        let want = logits.mc().unwrap().predictive(t).unwrap();
        for (a, b) in pred
            .predictive
            .probabilities()
            .as_slice()
            .iter()
            .zip(want.probabilities().as_slice())
        {
            assert!((a - b).abs() < 1e-6, "T = {t}: {a} vs {b}");
        }
    }
    for bad in [0.0, -1.0, f64::NAN, 1e9] {
        let e = predict_tempered(&bayes, &test, 2, &[bad]).unwrap_err();
        assert!(e.to_string().contains("temperature"), "{bad}: {e}");
    }
}

/// `n` 4x4 images whose label is the brightest quadrant, with every third label replaced by
/// a pseudo-random one: learnable, but a network that fits the training labels is
/// over-confident on new images.
fn noisy_quadrants(n: usize, seed: u64) -> DataLoader {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut pixels = Vec::with_capacity(n * 16);
    let mut labels = Vec::with_capacity(n);
    for i in 0..n {
        let img: Vec<u8> = (0..16).map(|_| (next() % 256) as u8).collect();
        let quadrant = |q: usize| -> u32 {
            let (r0, c0) = (2 * (q / 2), 2 * (q % 2));
            [(0, 0), (0, 1), (1, 0), (1, 1)]
                .iter()
                .map(|(r, c)| u32::from(img[(r0 + r) * 4 + c0 + c]))
                .sum()
        };
        let best = (0..4).max_by_key(|&q| quadrant(q)).unwrap() as u32;
        labels.push(if i % 3 == 0 {
            (next() % 4) as u32
        } else {
            best
        });
        pixels.extend(img);
    }
    let data = InMemoryDataset::new(pixels, labels, (1, 4, 4), 4).unwrap();
    let config = LoaderConfig {
        batch_size: 64,
        shuffle: false,
        drop_last: false,
        seed: 0,
        workers: 0,
        prefetch: 1,
    };
    DataLoader::new(data, Compose::new(), config).unwrap()
}

/// A network trained to fit noisy labels is over-confident on held-out images: the
/// temperature fitted on a validation set is above 1 and lowers the validation NLL, and the
/// NLL it reports is the tempered prediction's; on a second held-out set it lowers the NLL too.
#[test]
fn an_over_confident_network_gets_a_temperature_above_1() {
    let _rng = bnn_layers::lock_device_rng();
    let device = bnn_layers::test_device().autodiff();
    device.seed(7);
    let config =
        ModelConfig::for_input(Arch::Mlp, Kind::Deterministic, 4, 1, 4).with_mlp_hidden(vec![128]);
    let mut tc = TrainConfig::deterministic(120);
    tc.batch_size = 64;
    tc.weight_decay = 0.0;
    let train_set = noisy_quadrants(256, 1);
    let (model, _) = train(
        config.init(&device).unwrap(),
        &train_set,
        &tc,
        None,
        &mut Silent,
    )
    .unwrap();
    let validation = noisy_quadrants(400, 2);
    let fit = predict_logits(&model, &validation, 1)
        .unwrap()
        .fit_temperature()
        .unwrap();
    assert!(fit.temperature > 1.0, "{fit:?}");
    assert!(fit.nll_after < fit.nll_before, "{fit:?}");
    let nll = |loader: &DataLoader, t: f64| {
        let p = predict_tempered(&model, loader, 1, &[t]).unwrap().remove(0);
        EvalSummary::compute(p.predictive.probabilities(), &p.labels)
            .unwrap()
            .nll
    };
    assert!((nll(&validation, fit.temperature) - fit.nll_after).abs() < 1e-4);
    let test = noisy_quadrants(400, 3);
    assert!(nll(&test, fit.temperature) < nll(&test, 1.0));
}

/// The codebook-level KL needs one prior per codebook entry: an empirical prior is refused.
#[test]
fn the_codebook_kl_is_refused_with_an_empirical_prior() {
    let mut c = bnn_train::TrainConfig::retrain(1);
    c.shared_kl = bnn_layers::SharedKl::Codebook;
    c.validate().unwrap();
    c.prior = bnn_layers::Prior::Empirical { sigma: 0.1 };
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("shared_kl") && e.contains("empirical"), "{e}");
}

fn bayes_mlp(seed: u64, sigma: f64) -> bnn_models::Network {
    let device = bnn_layers::test_device();
    device.seed(seed);
    let mut config =
        ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 4, 1, 4).with_mlp_hidden(vec![16]);
    config.bayes = bnn_layers::BayesOptions::new()
        .with_weight_sigma(bnn_layers::SigmaInit::Constant { sigma })
        .with_bias_sigma(bnn_layers::SigmaInit::Constant { sigma });
    config.init(&device).unwrap()
}

/// With a stack of 1 (what `McBatching::Auto` is on CPU backends) evaluation is the
/// per-sample loop of earlier versions, bit for bit: one pass over the data set per sample,
/// each pass's logits pushed to an `McPredictive`.
#[test]
fn stack_1_evaluation_is_the_per_sample_loop_bit_for_bit() {
    use bnn_train::{McBatching, predict_logits_with, predict_with};
    let _rng = bnn_layers::lock_device_rng();
    let device = bnn_layers::test_device();
    assert_eq!(McBatching::Auto.stack_for(&device, 128, 784, 30), 1);
    assert_eq!(McBatching::Stack(8).stack_for(&device, 128, 784, 30), 8);
    assert_eq!(McBatching::Stack(64).stack_for(&device, 128, 784, 30), 30);
    assert_eq!(McBatching::Stack(0).stack_for(&device, 128, 784, 30), 1);
    let model = bayes_mlp(31, 0.1);
    let test = loader(70, 6);
    predict(&model, &test, 1).unwrap();

    // The loop of earlier versions, written out.
    device.seed(4);
    let valid = bnn_layers::set_sampling(model.valid(), true);
    let mut mc = bnn_metrics::McPredictive::new(70, 4).unwrap();
    let mut all_logits = Vec::new();
    for _ in 0..5 {
        let mut pass = vec![0f32; 70 * 4];
        for batch in test.epoch(0) {
            let batch = batch.unwrap();
            let (x, _) = bnn_train::to_tensors(&batch, &device);
            let host = bnn_train::to_vec(valid.forward(x));
            for (row, &i) in batch.indices.iter().enumerate() {
                pass[i * 4..(i + 1) * 4].copy_from_slice(&host[row * 4..(row + 1) * 4]);
            }
        }
        mc.push_logits(&pass).unwrap();
        all_logits.extend_from_slice(&pass);
    }
    let want = mc.finish().unwrap();

    device.seed(4);
    let auto = predict(&model, &test, 5).unwrap();
    device.seed(4);
    let one = predict_with(&model, &test, 5, McBatching::Stack(1)).unwrap();
    assert_eq!(auto.predictive, want);
    assert_eq!(one.predictive, want);
    device.seed(4);
    let logits = predict_logits_with(&model, &test, 5, McBatching::Stack(1)).unwrap();
    assert_eq!(logits.logits, all_logits);
}

/// Every `*_rho` parameter set to `rho`.
struct SetRho {
    path: Vec<String>,
    rho: f64,
}

impl burn::module::ModuleMapper for SetRho {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<burn::prelude::Tensor<D>>,
    ) -> burn::module::Param<burn::prelude::Tensor<D>> {
        if self.path.last().is_some_and(|n| n.ends_with("_rho")) {
            let rho = self.rho;
            param.map(|t| t.zeros_like().add_scalar(rho))
        } else {
            param
        }
    }
}

/// The stacked predictive (8 samples per forward, the last forward of 4) estimates the same
/// predictive as the per-sample one: with 200 samples each, every probability agrees within
/// 5 standard errors of the difference, computed from the per-sample spread; its logits are
/// laid out as the per-sample path's (the predictive of the stacked logits is the stacked
/// predictive), tempered predictions too; and with sigma = 0 both paths agree to f32
/// rounding, their logits exactly.
#[test]
fn stacked_predictive_agrees_with_the_per_sample_one() {
    use bnn_train::{McBatching, predict_logits_with, predict_tempered_with, predict_with};
    let _rng = bnn_layers::lock_device_rng();
    let device = bnn_layers::test_device();
    let model = bayes_mlp(41, 0.3);
    let test = loader(70, 7);
    predict(&model, &test, 1).unwrap();
    let (samples, n, classes) = (200, 70, 4);

    device.seed(8);
    let per_sample = predict_logits_with(&model, &test, samples, McBatching::Stack(1)).unwrap();
    let p1 = per_sample.mc().unwrap().predictive(1.0).unwrap();
    device.seed(9);
    let p8 = predict_with(&model, &test, samples, McBatching::Stack(8)).unwrap();
    assert_eq!(p8.predictive.n_samples(), samples);
    assert_eq!(p8.labels, per_sample.labels);
    // Per entry, the spread of one sample's probability, from the per-sample logits.
    let mut sum = vec![0f64; n * classes];
    let mut sum_sq = vec![0f64; n * classes];
    for pass in per_sample.logits.chunks(n * classes) {
        for (row, z) in pass.chunks(classes).enumerate() {
            let m = z.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let e: Vec<f64> = z.iter().map(|&v| f64::from(v - m).exp()).collect();
            let total: f64 = e.iter().sum();
            for (k, ek) in e.iter().enumerate() {
                let p = ek / total;
                sum[row * classes + k] += p;
                sum_sq[row * classes + k] += p * p;
            }
        }
    }
    let s = samples as f64;
    let mut differ = false;
    for (i, (a, b)) in p1
        .probabilities()
        .as_slice()
        .iter()
        .zip(p8.predictive.probabilities().as_slice())
        .enumerate()
    {
        let var = (sum_sq[i] / s - (sum[i] / s).powi(2)).max(0.0);
        let bound = 5.0 * (2.0 * var / s).sqrt() + 1e-6;
        let d = f64::from((a - b).abs());
        assert!(d <= bound, "entry {i}: {a} vs {b}, bound {bound}");
        differ |= d > 0.0;
    }
    assert!(differ, "the stacked path draws other samples");
    let mi = |p: &bnn_metrics::Predictive| {
        let v = p.mutual_information().unwrap();
        v.iter().sum::<f64>() / v.len() as f64
    };
    let (mi1, mi8) = (mi(&p1), mi(&p8.predictive));
    assert!(
        mi1 > 1e-3 && (mi1 - mi8).abs() < 0.2 * mi1,
        "{mi1} vs {mi8}"
    );

    // The stacked logits (read back per stacked forward) with the same seed are the stacked
    // predictive's samples, tempered or not.
    device.seed(9);
    let stacked_logits = predict_logits_with(&model, &test, samples, McBatching::Stack(8)).unwrap();
    assert_eq!(
        (
            stacked_logits.samples,
            stacked_logits.n,
            stacked_logits.classes
        ),
        (samples, n, classes)
    );
    device.seed(9);
    let tempered =
        predict_tempered_with(&model, &test, samples, &[1.0, 2.0], McBatching::Stack(8)).unwrap();
    assert_eq!(tempered[0].predictive, p8.predictive);
    for (pred, t) in tempered.iter().zip([1.0, 2.0]) {
        let want = stacked_logits.mc().unwrap().predictive(t).unwrap();
        for (a, b) in pred
            .predictive
            .probabilities()
            .as_slice()
            .iter()
            .zip(want.probabilities().as_slice())
        {
            assert!((a - b).abs() < 1e-5, "T = {t}: {a} vs {b}");
        }
        for (a, b) in pred
            .predictive
            .mutual_information()
            .unwrap()
            .iter()
            .zip(want.mutual_information().unwrap())
        {
            assert!((a - b).abs() < 1e-5, "T = {t}: MI {a} vs {b}");
        }
    }

    // sigma = 0 (softplus(-200) is 0 in f32): every sample is the mean network.
    let exact = model.map(&mut SetRho {
        path: Vec::new(),
        rho: -200.0,
    });
    let one = predict_logits_with(&exact, &test, 20, McBatching::Stack(1)).unwrap();
    let eight = predict_logits_with(&exact, &test, 20, McBatching::Stack(8)).unwrap();
    assert_eq!(one, eight);
    let p1 = predict_with(&exact, &test, 20, McBatching::Stack(1)).unwrap();
    let p8 = predict_with(&exact, &test, 20, McBatching::Stack(8)).unwrap();
    for (a, b) in p1
        .predictive
        .probabilities()
        .as_slice()
        .iter()
        .zip(p8.predictive.probabilities().as_slice())
    {
        assert!((a - b).abs() <= 1e-6, "sigma = 0: {a} vs {b}");
    }
}
