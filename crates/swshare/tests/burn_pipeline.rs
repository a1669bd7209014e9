//! The whole pipeline on burn models: train a small Bayesian network, run stages 1-2, build
//! and retrain the shared model, save and reload the `.swb` file.
#![cfg(feature = "burn")]

use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
use bnn_layers::{set_sampling, test_device};
use bnn_models::{Arch, Kind, ModelConfig, Network};
use bnn_train::{Silent, TrainConfig, mean_mu_gradients, train};
use burn::module::Module;
use burn::prelude::*;
use swshare::burn_edges::{build_shared_model, from_swb, table_from_tensors, to_swb};
use swshare::format::{SaveOptions, load, save};
use swshare::{SwshareConfig, build_plan};

/// 1 x size x size images: class `k` lights up row `k` (plus noise), so a small network can
/// learn it.
fn data(n: usize, size: usize, seed: u64) -> InMemoryDataset {
    let mut pixels = Vec::with_capacity(n * size * size);
    let mut labels = Vec::with_capacity(n);
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    for i in 0..n {
        let k = i % 8;
        for p in 0..size * size {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let noise = (state >> 59) as u8;
            pixels.push(if p / size == k {
                200 + noise
            } else {
                noise * 2
            });
        }
        labels.push(k as u32);
    }
    InMemoryDataset::new(pixels, labels, (1, size, size), 8).unwrap()
}

fn loader(n: usize, size: usize, seed: u64) -> DataLoader {
    let config = LoaderConfig {
        batch_size: 32,
        shuffle: true,
        drop_last: false,
        seed,
        workers: 0,
        prefetch: 2,
    };
    DataLoader::new(data(n, size, seed), Compose::new(), config).unwrap()
}

fn logits(model: &Network, x: Tensor<4>) -> Vec<f32> {
    model
        .forward(x)
        .into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap()
}

fn argmax_rows(v: &[f32], classes: usize) -> Vec<usize> {
    v.chunks(classes)
        .map(|r| {
            r.iter()
                .enumerate()
                .fold(0, |b, (i, x)| if *x > r[b] { i } else { b })
        })
        .collect()
}

/// A Bayesian `arch` (hidden layers 48, 48 for the MLP) trained for `epochs` on `n` images of
/// `size` x `size`, on an autodiff device seeded with 3; with its config, loader, training
/// config and history. Take the device-generator lock first.
fn trained_bayes(
    arch: Arch,
    size: usize,
    n: usize,
    epochs: usize,
) -> (
    Network,
    ModelConfig,
    DataLoader,
    TrainConfig,
    Vec<bnn_train::EpochStats>,
) {
    let ad = test_device().autodiff();
    ad.seed(3);
    let config =
        ModelConfig::for_input(arch, Kind::Bayesian, 8, 1, size).with_mlp_hidden(vec![48, 48]);
    let train_loader = loader(n, size, 1);
    let mut tc = TrainConfig::bayes_by_backprop(epochs);
    tc.batch_size = 32;
    // With 2048 examples the full KL would pin the posterior to the prior; down-weight it so
    // the small network learns the task in a few epochs.
    tc.kl_weight = 0.02;
    let (bayes, hist) = train(
        config.init(&ad).unwrap(),
        &train_loader,
        &tc,
        None,
        &mut Silent,
    )
    .unwrap();
    (bayes, config, train_loader, tc, hist)
}

fn run(arch: Arch, size: usize, k: usize) {
    let _guard = bnn_layers::lock_device_rng();
    let device = test_device();
    let ad = device.clone().autodiff();
    let (bayes, config, train_loader, tc, hist) = trained_bayes(arch, size, 2048, 4);

    assert!(
        hist.last().unwrap().accuracy > 0.9,
        "the Bayesian model learns the task: {hist:?}"
    );
    // Stages 1-2.
    let tensors = mean_mu_gradients(&bayes, &train_loader, &tc.prior, 4).unwrap();
    let table = table_from_tensors(&tensors).unwrap();
    let mut cfg = SwshareConfig::default();
    cfg.gmm.k = k;
    cfg.refine.n_min = 5;
    let (plan, report) = build_plan(&table, &cfg).unwrap();
    assert_eq!(
        report.outliers + report.plain_shared + report.ellipse_weights,
        report.shareable_weights
    );
    assert_eq!(report.shareable_weights, table.n_shareable());
    assert!(report.gaussians_after_merge <= report.gaussians_before_merge);
    assert!(report.gaussians_before_merge <= k);
    // The top 1 % gradients are outliers unless the mean threshold took them first.
    assert!(
        report.outliers >= report.shareable_weights / 100,
        "{report:?}"
    );

    // The shared model predicts like the Bayesian one in mean mode.
    let shared = build_shared_model(&config, &bayes, &table, &plan, &ad).unwrap();
    // Inputs from the data distribution (random noise would be out of distribution).
    let first = loader(32, size, 9).epoch(0).next().unwrap().unwrap();
    let x = bnn_train::to_tensors(&first, &device).0;
    let b_mean = logits(&set_sampling(bayes.valid(), false), x.clone());
    let s_mean = logits(&set_sampling(shared.valid(), false), x.clone());
    let agree = argmax_rows(&b_mean, 8)
        .iter()
        .zip(argmax_rows(&s_mean, 8))
        .filter(|(a, b)| **a == *b)
        .count();
    assert!(
        agree >= 24,
        "shared and Bayesian mean predictions agree on {agree}/32"
    );

    // Stage 3: the loss decreases and the codebook moves (its gradient is not zero).
    let before = shared.codebook.as_ref().unwrap().mu.val().into_data();
    let (shared, history) = train(
        shared,
        &train_loader,
        &TrainConfig::retrain(3),
        None,
        &mut Silent,
    )
    .unwrap();
    assert!(
        history[2].loss < history[0].loss,
        "stage-3 loss {history:?}"
    );
    let after = shared.codebook.as_ref().unwrap().mu.val().into_data();
    assert_ne!(before, after, "the codebook must receive gradients");

    // Save, reload: identical mean predictions, identical samples for the same seed.
    let shared = shared.valid();
    let shared_config = config
        .clone()
        .with_kind(Kind::Shared)
        .with_codebook_len(plan.k());
    let file = to_swb(&shared, &shared_config, &table, &plan).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for opts in [
        SaveOptions::default(),
        SaveOptions {
            entropy_index: true,
            int8_outliers: false,
        },
    ] {
        let path = dir.path().join("model.swb");
        save(&path, &file, &opts).unwrap();
        let (loaded, loaded_config) =
            from_swb::<ModelConfig>(&load(&path).unwrap(), &device).unwrap();
        assert_eq!(loaded_config, shared_config);
        assert_eq!(
            logits(&set_sampling(shared.clone(), false), x.clone()),
            logits(&set_sampling(loaded.clone(), false), x.clone())
        );
        let a = set_sampling(shared.clone(), true);
        let b = set_sampling(loaded, true);
        device.seed(11);
        let sa = logits(&a, x.clone());
        device.seed(11);
        let sb = logits(&b, x.clone());
        assert_eq!(sa, sb, "same seed, same samples");
    }
}

#[test]
fn pipeline_on_an_mlp() {
    run(Arch::Mlp, 8, 24);
}

#[test]
fn pipeline_on_lenet5() {
    run(Arch::Lenet5, 12, 24);
}

/// The empirical prior's centres (the deterministic weights) reach the shared model: they sit at
/// `<layer>.weight.prior_mu` there and at `<layer>.weight_prior_mu` in the Bayesian model.
#[test]
fn empirical_prior_centres_reach_the_shared_model() {
    let _guard = bnn_layers::lock_device_rng();
    let device = test_device();
    device.seed(5);
    let det_config =
        ModelConfig::for_input(Arch::Mlp, Kind::Deterministic, 8, 1, 8).with_mlp_hidden(vec![48]);
    let det = det_config.init(&device).unwrap();
    let mut bayes_config = det_config.clone().with_kind(Kind::Bayesian);
    bayes_config.bayes.empirical_prior = true;
    let (bayes, _) =
        bnn_layers::bayes_from_deterministic(&det, bayes_config.init(&device).unwrap()).unwrap();
    let table = table_from_tensors(&bnn_layers::export_bayes(&bayes, None)).unwrap();
    let mut cfg = SwshareConfig::default();
    cfg.gmm.k = 4;
    cfg.refine.n_min = 1;
    let (plan, _) = build_plan(&table, &cfg).unwrap();
    let shared = build_shared_model(&bayes_config, &bayes, &table, &plan, &device).unwrap();

    let det_params = bnn_layers::export_params(&det);
    let shared_params = bnn_layers::export_params(&shared);
    let mut checked = 0;
    for t in shared_params
        .iter()
        .filter(|t| t.path.ends_with(".weight.prior_mu"))
    {
        let layer = t.path.trim_end_matches(".prior_mu");
        let want = det_params.iter().find(|d| d.path == layer).unwrap();
        assert!(want.data.iter().any(|&v| v != 0.0));
        assert_eq!(t.data, want.data, "{}", t.path);
        checked += 1;
    }
    let layers = table.layers().iter().filter(|l| l.shareable).count();
    assert!(layers >= 2);
    assert_eq!(checked, layers, "one prior centre per shared layer");
}

/// Stage 3 with the confidence-recovered rule: it measures the shared model before every epoch,
/// ends at the first check at or above the source BNN's confidence, and the history holds the
/// epochs it trained. The same call again gives the same decision (the probe and its weight
/// noise are seeded). With the paper's fixed epochs there is no trace and every epoch runs.
/// The probe is drawn from the validation loader given, never from the training data: without
/// one (or with an empty one) the rule is an error.
#[test]
fn stage_3_stops_once_the_source_confidence_is_recovered() {
    use swshare::compress::{CompressConfig, compress};
    use swshare::retrain_stop::RetrainStop;

    let _guard = bnn_layers::lock_device_rng();
    let (bayes, config, train_loader, _, _) = trained_bayes(Arch::Mlp, 8, 1024, 3);
    // Other images of the same task (another seed of the generator), never trained on.
    let validation = loader(512, 8, 9);
    let val = Some(&validation);
    let mut cfg = CompressConfig::default();
    cfg.sharing.gmm.k = 16;
    cfg.sharing.refine.n_min = 5;
    cfg.retrain = TrainConfig::retrain(8);
    cfg.retrain.batch_size = 32;
    // The coarse codebook starts the shared model under-confident; a faster rate recovers the
    // source's confidence within the 8 epochs allowed.
    cfg.retrain.lr = 3e-3;

    let fixed = compress(&bayes, &config, &train_loader, val, &cfg, None, &mut Silent).unwrap();
    assert_eq!(fixed.history.len(), 8);
    assert!(fixed.report.retrain_stop.is_none());

    // The model a file's user gets: the same parameters under the lossless default encoding,
    // rounded outliers under int8 (what a row beside the file's size must be evaluated on).
    let dir = tempfile::tempdir().unwrap();
    let params = |m: &Network| bnn_layers::export_params(&m.valid());
    let (_, lossless) = fixed
        .save_and_reload(dir.path().join("a.swb"), &test_device())
        .unwrap();
    assert_eq!(params(&lossless), params(&fixed.model));
    let mut int8 = compress(&bayes, &config, &train_loader, val, &cfg, None, &mut Silent).unwrap();
    int8.save_options.int8_outliers = true;
    let (_, rounded) = int8
        .save_and_reload(dir.path().join("b.swb"), &test_device())
        .unwrap();
    assert_ne!(params(&rounded), params(&int8.model));

    // Sums are compared to 1e-6: flex's parallel reductions may add in another order when the
    // machine is loaded.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs().max(1e-12);
    let rule = |checks_per_epoch| RetrainStop::ConfidenceRecovered {
        probe_images: 256,
        samples: 4,
        checks_per_epoch,
    };
    // Checked 4 times per epoch (32 steps of 32 images): the stop comes at a quarter epoch no
    // later than the epoch-boundary rule's, and the last epoch may be partial.
    let mut stops = Vec::new();
    for checks in [1, 4] {
        cfg.retrain_stop = rule(checks);
        let stopped =
            compress(&bayes, &config, &train_loader, val, &cfg, None, &mut Silent).unwrap();
        let trace = stopped.report.retrain_stop.clone().unwrap();
        assert_eq!(trace.probe_images, 256);
        let n = trace.stopped_after.expect("the rule fires within 8 epochs");
        assert!(n < 8.0, "{trace:?}");
        let epochs: Vec<f64> = trace.checks.iter().map(|c| c.epochs_done).collect();
        let want: Vec<f64> = (0..=(n * checks as f64).round() as usize)
            .map(|j| j as f64 / checks as f64)
            .collect();
        assert_eq!(epochs, want, "{trace:?}");
        let (last, before) = trace.checks.split_last().unwrap();
        for c in before {
            assert!(c.confidence < trace.source_confidence, "{trace:?}");
        }
        assert!(last.confidence >= trace.source_confidence);
        let whole = n.floor() as usize;
        let partial = (n > n.floor()).then(|| ((n - n.floor()) * 32.0).round() as usize);
        assert_eq!(
            stopped.history.len(),
            whole + usize::from(partial.is_some())
        );
        assert_eq!(
            stopped.history.last().and_then(|e| e.partial_steps),
            partial,
            "{trace:?}"
        );
        // Up to the stop, stage 3 trained as the fixed-epoch run did: the probe draws no
        // training noise.
        for (a, b) in stopped.history.iter().zip(&fixed.history) {
            if a.partial_steps.is_some() {
                continue;
            }
            assert_eq!((a.epoch, a.accuracy), (b.epoch, b.accuracy));
            assert!(
                close(a.loss, b.loss) && close(a.nll, b.nll) && close(a.kl, b.kl),
                "{a:?} vs {b:?}"
            );
        }
        stops.push(trace);
    }
    assert!(
        stops[1].stopped_after <= stops[0].stopped_after,
        "{stops:?}"
    );
    cfg.retrain_stop = rule(4);
    let trace = stops.pop().unwrap();

    let again = compress(&bayes, &config, &train_loader, val, &cfg, None, &mut Silent).unwrap();
    let repeat = again.report.retrain_stop.unwrap();
    assert_eq!(repeat.stopped_after, trace.stopped_after);
    assert!(close(repeat.source_confidence, trace.source_confidence));
    for (a, b) in repeat.checks.iter().zip(&trace.checks) {
        assert_eq!(a.epochs_done, b.epochs_done);
        assert!(close(a.confidence, b.confidence), "{repeat:?} vs {trace:?}");
    }

    // The probe is the validation loader's: 64 images there, 256 asked for.
    cfg.retrain.epochs = 1;
    let small = loader(64, 8, 9);
    let probed = compress(
        &bayes,
        &config,
        &train_loader,
        Some(&small),
        &cfg,
        None,
        &mut Silent,
    )
    .unwrap();
    assert_eq!(probed.report.retrain_stop.unwrap().probe_images, 64);
    // No validation images: an error naming them, not a probe of training images.
    let empty = loader(0, 8, 9);
    for missing in [None, Some(&empty)] {
        let e = compress(
            &bayes,
            &config,
            &train_loader,
            missing,
            &cfg,
            None,
            &mut Silent,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("validation images"), "{e}");
    }
    // The paper's fixed epochs need none.
    cfg.retrain_stop = RetrainStop::Epochs;
    compress(
        &bayes,
        &config,
        &train_loader,
        None,
        &cfg,
        None,
        &mut Silent,
    )
    .unwrap();
}

/// The stage-3-only baseline retrains the Bayesian model itself with stage 3's settings for
/// the steps it is given: it stays Bayesian (no codebook), its weights move, it stops inside
/// an epoch when the steps end there, and the run repeats bit for bit.
#[test]
fn stage_3_without_sharing_retrains_the_bayesian_model() {
    use swshare::compress::{CompressConfig, retrain_without_sharing, stage3_steps};

    let _guard = bnn_layers::lock_device_rng();
    let (bayes, config, train_loader, _, _) = trained_bayes(Arch::Mlp, 8, 512, 2);
    let mut cfg = CompressConfig {
        retrain: TrainConfig::retrain(3),
        ..Default::default()
    };
    cfg.retrain.batch_size = 32;
    // 512 images in batches of 32: 16 steps an epoch; 20 steps end inside the second.
    let run = |steps| {
        retrain_without_sharing(
            &bayes,
            &config,
            &train_loader,
            &cfg,
            steps,
            None,
            &mut Silent,
        )
        .unwrap()
    };
    let (a, b) = (run(20), run(20));
    assert_eq!(a.history.len(), 2);
    assert_eq!(a.history[1].partial_steps, Some(4));
    assert_eq!(stage3_steps(&a.history, 16), 20);
    let params = |m: &Network| bnn_layers::export_params(&m.valid());
    assert_eq!(params(&a.model), params(&b.model), "repeatable");
    assert_ne!(params(&a.model), params(&bayes), "trained");
    assert_eq!(a.model.counts(), bayes.counts(), "still the full BNN");
    assert!(a.model.codebook.is_none());
    // No steps, no change.
    assert_eq!(params(&run(0).model), params(&bayes));
}

/// SNR pruning keeps the weights of highest |mu| / sigma, down to a parameter count or a file
/// size; the file reads back to the pruned model; retraining as stage 3 moves the kept weights
/// and leaves the pruned ones at zero, and repeats bit for bit.
#[test]
fn snr_pruning_keeps_the_surest_weights_and_holds_the_rest_at_zero() {
    use swshare::compress::CompressConfig;
    use swshare::retrain_stop::RetrainStop;
    use swshare::snr_prune::{
        PRUNED_RHO, PruneMask, PruneTarget, prune_to, pruned_file, pruned_parameters, read_pruned,
        retrain_pruned,
    };

    let _guard = bnn_layers::lock_device_rng();
    let (bayes, config, train_loader, _, _) = trained_bayes(Arch::Mlp, 8, 512, 2);
    let tensors = bnn_layers::export_bayes(&bayes, None);
    let weights: usize = tensors
        .iter()
        .filter(|t| t.role == bnn_layers::ParamRole::Weight)
        .map(|t| t.mu.len())
        .sum();
    let full = bnn_layers::count_params(&bayes).trainable;
    let floor = full - 2 * weights;

    // Parameters: exactly the target (two per kept weight).
    let target = floor + 2 * 300;
    let (pruned, mask) = prune_to(&bayes, &config, PruneTarget::Parameters(target)).unwrap();
    assert_eq!(mask.kept(), 300);
    assert_eq!(pruned_parameters(&pruned, &mask), target);
    // The kept weights are the 300 of highest SNR: the lowest kept beats the highest pruned.
    let snr = |m: f32, s: f32| m.abs() / s;
    let (mut lowest_kept, mut highest_pruned) = (f32::INFINITY, 0.0f32);
    for ((path, kept), t) in mask.layers().iter().zip(
        tensors
            .iter()
            .filter(|t| t.role == bnn_layers::ParamRole::Weight),
    ) {
        assert_eq!(path, &t.path);
        for (i, &k) in kept.iter().enumerate() {
            let r = snr(t.mu[i], t.sigma[i]);
            match k {
                true => lowest_kept = lowest_kept.min(r),
                false => highest_pruned = highest_pruned.max(r),
            }
        }
    }
    assert!(
        lowest_kept >= highest_pruned,
        "{lowest_kept} < {highest_pruned}"
    );
    let check_zeroed = |model: &Network, mask: &PruneMask| {
        let after = bnn_layers::export_bayes(model, None);
        let mut zeros = 0;
        for (path, kept) in mask.layers() {
            let t = after.iter().find(|t| &t.path == path).unwrap();
            for (i, &k) in kept.iter().enumerate() {
                if !k {
                    assert_eq!(t.mu[i], 0.0, "{path}[{i}]");
                    assert!(t.sigma[i] < 1e-12, "{path}[{i}]: sigma {}", t.sigma[i]);
                    zeros += 1;
                }
            }
        }
        assert_eq!(zeros, mask.total() - mask.kept());
    };
    check_zeroed(&pruned, &mask);
    // Too few parameters for the biases alone: an error naming both numbers.
    let e = prune_to(&bayes, &config, PruneTarget::Parameters(floor - 1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("{}", floor - 1)) && e.contains(&format!("{floor}")),
        "{e}"
    );

    // Bytes: the largest number kept whose file fits.
    let budget = pruned_file(&pruned, &config, &mask, None).unwrap().len() as u64 + 100;
    let (by_bytes, bmask) = prune_to(&bayes, &config, PruneTarget::Bytes(budget)).unwrap();
    let bytes = pruned_file(&by_bytes, &config, &bmask, None).unwrap();
    assert!(bytes.len() as u64 <= budget);
    let one_more = PruneMask::by_snr(&tensors, bmask.kept() + 1);
    let bigger = swshare::snr_prune::apply_mask(bayes.clone(), &one_more).unwrap();
    assert!(
        pruned_file(&bigger, &config, &one_more, None)
            .unwrap()
            .len() as u64
            > budget
    );
    assert!(bmask.kept() > 300);

    // The file reads back to the pruned model.
    let back = read_pruned(&bytes).unwrap();
    let exported = bnn_layers::export_bayes(&by_bytes, None);
    assert_eq!(back.weights.len(), bmask.layers().len());
    for (path, shape, mu, rho) in &back.weights {
        let t = exported.iter().find(|t| &t.path == path).unwrap();
        assert_eq!(shape, &t.shape);
        assert_eq!(mu, &t.mu);
        for (i, (&r, &s)) in rho.iter().zip(&t.sigma).enumerate() {
            let sigma = bnn_layers::softplus(r as f64);
            match mu[i] == 0.0 && r == PRUNED_RHO {
                true => assert!(s < 1e-12),
                false => assert!((sigma - s as f64).abs() <= 1e-6 * s as f64, "{path}[{i}]"),
            }
        }
    }
    assert!(read_pruned(&bytes[..bytes.len() / 2]).is_err());
    assert!(read_pruned(b"not a file").is_err());

    // Retraining as stage 3 (fixed epochs here): kept weights move, pruned ones stay zero.
    let mut cfg = CompressConfig {
        retrain: TrainConfig::retrain(1),
        retrain_stop: RetrainStop::Epochs,
        ..Default::default()
    };
    cfg.retrain.batch_size = 32;
    let retrain = || {
        retrain_pruned(
            pruned.clone(),
            &mask,
            &bayes,
            &config,
            &train_loader,
            None,
            &cfg,
            None,
            &mut Silent,
        )
        .unwrap()
        .0
    };
    let (a, b) = (retrain(), retrain());
    check_zeroed(&a, &mask);
    let params = |m: &Network| bnn_layers::export_params(&m.valid());
    assert_eq!(params(&a), params(&b), "repeatable");
    assert_ne!(params(&a), params(&pruned), "trained");
}
