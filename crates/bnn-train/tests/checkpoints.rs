//! Checkpoints: resume after the last committed epoch, refuse another run's checkpoint without
//! touching it, never commit a non-finite value, clean what killed runs left.

use bnn_data::{Compose, DataLoader, InMemoryDataset, LoaderConfig};
use bnn_layers::{BayesOptions, NamedTensor, export_params, import_params};
use bnn_models::{Arch, Kind, ModelConfig, Network};
use bnn_train::{Checkpointer, Silent, TrainConfig, TrainError, load_model, train};

fn loader_of(n: usize, batch_size: usize) -> DataLoader {
    let pixels: Vec<u8> = (0..n * 16).map(|i| ((i * 37) % 251) as u8).collect();
    let labels: Vec<u32> = (0..n as u32).map(|i| i % 4).collect();
    let data = InMemoryDataset::new(pixels, labels, (1, 4, 4), 4).unwrap();
    let config = LoaderConfig {
        batch_size,
        shuffle: true,
        drop_last: false,
        seed: 0,
        workers: 0,
        prefetch: 2,
    };
    DataLoader::new(data, Compose::new(), config).unwrap()
}

fn loader() -> DataLoader {
    loader_of(256, 64)
}

fn mlp(hidden: usize) -> ModelConfig {
    ModelConfig::for_input(Arch::Mlp, Kind::Bayesian, 4, 1, 4).with_mlp_hidden(vec![hidden])
}

fn tc(epochs: usize) -> TrainConfig {
    let mut tc = TrainConfig::bayes_by_backprop(epochs);
    tc.batch_size = 64;
    tc
}

/// Every file under `dir` with its bytes, sorted.
fn snapshot(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn resumes_after_the_last_epoch_and_stops_on_nan() {
    let device = bnn_layers::test_device().autodiff();
    let config = mlp(8);
    let dir = tempfile::tempdir().unwrap();
    let ck = Checkpointer::new(dir.path()).unwrap();
    let (_, first) = train(
        config.init(&device).unwrap(),
        &loader(),
        &tc(1),
        Some(&ck),
        &mut Silent,
    )
    .unwrap();
    assert_eq!(first.len(), 1);
    assert!(ck.state().unwrap().unwrap().is_exact());

    // Asking for two epochs resumes after the saved one: one more epoch runs.
    let (_, both) = train(
        config.init(&device).unwrap(),
        &loader(),
        &tc(2),
        Some(&ck),
        &mut Silent,
    )
    .unwrap();
    assert_eq!(both.len(), 2);
    assert_eq!(both[0], first[0]);
    assert!(load_model(&ck.model_path(), config.init(&device).unwrap()).is_ok());
    // Only the committed epoch's files remain.
    let epochs: Vec<_> = std::fs::read_dir(dir.path().join("checkpoints"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(epochs, ["epoch-2"]);

    // A NaN in the loss stops with an error naming the step.
    let dir = tempfile::tempdir().unwrap();
    let ck = Checkpointer::new(dir.path()).unwrap();
    let mut nan = tc(1);
    nan.kl_weight = 1e300; // finite, so valid, but KL * 1e300 overflows the f32 loss
    let err = train(
        config.init(&device).unwrap(),
        &loader(),
        &nan,
        Some(&ck),
        &mut Silent,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            TrainError::NonFiniteLoss {
                epoch: 0,
                step: 0,
                ..
            }
        ),
        "{err}"
    );
    assert!(ck.state().unwrap().is_none());

    // A corrupt or short model file is an error, not a panic.
    std::fs::write(dir.path().join("model.bpk"), b"not a model").unwrap();
    let err = load_model(&ck.model_path(), config.init(&device).unwrap()).unwrap_err();
    assert!(err.to_string().contains("fewer than"), "{err}");
}

/// A parameter that turns non-finite in the last update of an epoch,
/// after the loss check, used to be committed while the message said the last good checkpoint
/// was kept. The NaN here sits where the loss never reads it (an empirical-prior centre under a
/// normal prior), so the epoch's loss stays finite whatever the backend's numerics: `rho = -89`
/// made Adam produce the NaN with burn's softplus, but not with the saturating flex kernel.
#[test]
fn a_non_finite_parameter_is_never_checkpointed() {
    let device = bnn_layers::test_device().autodiff();
    let config = mlp(8).with_bayes(BayesOptions::new().with_empirical_prior(true));
    let model = config.init(&device).unwrap();
    let rho: Vec<NamedTensor> = export_params(&model)
        .into_iter()
        .filter(|t| t.path.ends_with("weight_prior_mu"))
        .take(1)
        .map(|mut t| {
            t.data[0] = f32::NAN;
            t
        })
        .collect();
    let bad_path = rho[0].path.clone();
    let (model, set): (Network, usize) = import_params(model, &rho).unwrap();
    assert_eq!(set, 1);
    let dir = tempfile::tempdir().unwrap();
    let ck = Checkpointer::new(dir.path()).unwrap();
    let mut one_step = tc(2);
    one_step.batch_size = 256;
    let err = train(
        model,
        &loader_of(256, 256),
        &one_step,
        Some(&ck),
        &mut Silent,
    )
    .unwrap_err();
    match &err {
        TrainError::NonFiniteParameters { epoch: 0, path } => {
            assert!(
                bad_path.ends_with(path.rsplit('.').next().unwrap()),
                "{path}"
            )
        }
        other => panic!("expected NonFiniteParameters, got {other}"),
    }
    assert!(ck.state().unwrap().is_none(), "nothing is committed");
    assert!(!ck.model_path().exists());
}

/// A checkpoint of another run (architecture, kind, seed, data size, a training setting, the
/// caller's description) is refused with the difference named, and nothing on disk changes.
#[test]
fn another_runs_checkpoint_is_refused_untouched() {
    let device = bnn_layers::test_device().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let described = serde_json::json!({"dataset": "fashion-mnist"});
    {
        let ck = Checkpointer::new(dir.path())
            .unwrap()
            .with_run(described.clone());
        train(
            mlp(8).init(&device).unwrap(),
            &loader(),
            &tc(1),
            Some(&ck),
            &mut Silent,
        )
        .unwrap();
    }
    let before = snapshot(dir.path());
    let mut seed = tc(2);
    seed.seed = 1;
    let mut lr = tc(2);
    lr.lr = 0.5;
    let cases: Vec<(
        &str,
        ModelConfig,
        DataLoader,
        TrainConfig,
        serde_json::Value,
    )> = vec![
        ("architecture", mlp(16), loader(), tc(2), described.clone()),
        (
            "architecture or kind",
            mlp(8).with_kind(Kind::Deterministic),
            loader(),
            tc(2),
            described.clone(),
        ),
        ("seed", mlp(8), loader(), seed, described.clone()),
        ("lr", mlp(8), loader(), lr, described.clone()),
        (
            "examples",
            mlp(8),
            loader_of(128, 64),
            tc(2),
            described.clone(),
        ),
        (
            "mnist",
            mlp(8),
            loader(),
            tc(2),
            serde_json::json!({"dataset": "mnist"}),
        ),
    ];
    for (needle, config, data, train_config, run) in cases {
        let ck = Checkpointer::new(dir.path()).unwrap().with_run(run);
        let model = config.init(&device).unwrap();
        let err = ck.check(&model, &data, &train_config).unwrap_err();
        assert!(matches!(err, TrainError::ResumeMismatch { .. }), "{err}");
        assert!(err.to_string().contains(needle), "{needle}: {err}");
        let err = train(model, &data, &train_config, Some(&ck), &mut Silent).unwrap_err();
        assert!(matches!(err, TrainError::ResumeMismatch { .. }), "{err}");
        drop(ck);
        assert!(
            snapshot(dir.path()) == before,
            "{needle}: the directory changed"
        );
    }
}

/// The published model is the committed checkpoint's file, linked, not a second copy on disk:
/// after each epoch it names the new epoch's file, and the older epoch's is gone.
#[cfg(unix)]
#[test]
fn the_published_model_is_the_checkpoints_file_not_a_copy() {
    use std::os::unix::fs::MetadataExt;
    let device = bnn_layers::test_device().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let ck = Checkpointer::new(dir.path()).unwrap();
    let ino = |p: &std::path::Path| std::fs::metadata(p).unwrap().ino();
    train(
        mlp(8).init(&device).unwrap(),
        &loader(),
        &tc(2),
        Some(&ck),
        &mut Silent,
    )
    .unwrap();
    let last = dir.path().join("checkpoints/epoch-2/model.bpk");
    assert_eq!(ino(&ck.model_path()), ino(&last));
    assert_eq!(std::fs::metadata(&last).unwrap().nlink(), 2);
    assert!(!dir.path().join("checkpoints/epoch-1").exists());
}

/// What a killed run leaves is cleaned up when the directory is opened again: temporary files,
/// an uncommitted epoch directory, a published model one epoch behind its commit. A second
/// checkpointer on a directory in use is refused.
#[test]
fn leftovers_of_killed_runs_are_cleaned() {
    let device = bnn_layers::test_device().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let ck = Checkpointer::new(dir.path()).unwrap();
    let err = Checkpointer::new(dir.path()).unwrap_err();
    assert!(err.to_string().contains("another process"), "{err}");
    train(
        mlp(8).init(&device).unwrap(),
        &loader(),
        &tc(1),
        Some(&ck),
        &mut Silent,
    )
    .unwrap();
    let committed = std::fs::read(ck.model_path()).unwrap();
    drop(ck);

    let d = dir.path();
    std::fs::write(d.join(".model.bpk.tmp-4000000"), b"partial").unwrap();
    std::fs::write(d.join(".state.json.tmp-4000000"), b"{").unwrap();
    std::fs::create_dir(d.join("checkpoints/.epoch-2.tmp-4000000")).unwrap();
    std::fs::create_dir(d.join("checkpoints/epoch-2")).unwrap();
    // A kill between the commit and the publication of the model: the published file is still
    // the older epoch's (another file, which the published name was linked to).
    std::fs::remove_file(d.join("model.bpk")).unwrap();
    std::fs::write(d.join("model.bpk"), b"an older model").unwrap();

    let ck = Checkpointer::new(d).unwrap();
    let mut left: Vec<String> = snapshot(d)
        .into_iter()
        .map(|(p, _)| p.trim_start_matches(&d.display().to_string()).to_string())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "/.lock",
            "/checkpoints/epoch-1/model.bpk",
            "/checkpoints/epoch-1/optimizer.bpk",
            "/model.bpk",
            "/model.bpk.crc32",
            "/state.json"
        ]
    );
    assert_eq!(std::fs::read(ck.model_path()).unwrap(), committed);
    // A damaged committed file is named, not loaded.
    std::fs::write(d.join("checkpoints/epoch-1/optimizer.bpk"), b"garbage").unwrap();
    let err = train(
        mlp(8).init(&device).unwrap(),
        &loader(),
        &tc(2),
        Some(&ck),
        &mut Silent,
    )
    .unwrap_err();
    assert!(err.to_string().contains("damaged"), "{err}");
}

/// Found by `cargo xtask fuzz checkpoint`: a `state.json` whose epoch is `usize::MAX` overflowed
/// `epoch + 1` (a panic with overflow checks, a wrap to epoch 0 without).
#[test]
fn an_absurd_epoch_in_state_json_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let ck = Checkpointer::new(dir.path()).unwrap();
    for epoch in [u64::MAX.to_string(), "3".into()] {
        std::fs::write(
            dir.path().join("state.json"),
            format!(r#"{{"epoch": {epoch}, "history": []}}"#),
        )
        .unwrap();
        let err = ck.state().unwrap_err().to_string();
        assert!(err.contains("epochs of history"), "{epoch}: {err}");
    }
}

/// A directory whose `state.json` is gone but whose `model.bpk` is there lost its commit:
/// training into it is refused, naming the missing file, and nothing changes (it used to
/// train from epoch 1 and replace the model).
#[test]
fn a_checkpoint_without_its_commit_is_refused() {
    let device = bnn_layers::test_device().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let ck = Checkpointer::new(dir.path()).unwrap();
    train(
        mlp(8).init(&device).unwrap(),
        &loader(),
        &tc(1),
        Some(&ck),
        &mut Silent,
    )
    .unwrap();
    drop(ck);
    std::fs::remove_file(dir.path().join(Checkpointer::STATE_FILE)).unwrap();
    let before = snapshot(dir.path());
    let ck = Checkpointer::new(dir.path()).unwrap();
    let err = train(
        mlp(8).init(&device).unwrap(),
        &loader(),
        &tc(2),
        Some(&ck),
        &mut Silent,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("state.json") && err.contains("is missing"),
        "{err}"
    );
    assert!(snapshot(dir.path()) == before, "the directory changed");
}

/// A model file with a NaN parameter is refused when it is loaded, naming the file and the
/// parameter (it used to load and fail later as "Monte Carlo logits: non-finite value").
#[test]
fn loading_names_a_non_finite_parameter() {
    use burn::module::Module;
    let device = bnn_layers::test_device();
    let model = mlp(8).init(&device).unwrap();
    let mut bad: Vec<NamedTensor> = export_params(&model)
        .into_iter()
        .filter(|t| t.path.ends_with("weight_mu"))
        .take(1)
        .collect();
    bad[0].data[3] = f32::INFINITY;
    let bad_path = bad[0].path.clone();
    let (model, _): (Network, usize) = import_params(model, &bad).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("model.bpk");
    let bytes = model.into_record().into_bytes().unwrap();
    std::fs::write(&file, &bytes[..]).unwrap();
    let err = load_model(&file, mlp(8).init(&device).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&file.display().to_string()) && err.contains(&bad_path),
        "{err}"
    );
}

/// `f()` in a thread, its result if it returns within 10 s: a reader that blocks (on a FIFO)
/// fails the test instead of hanging it.
fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .expect("the reader blocked for 10 s")
}

fn mkfifo(path: &std::path::Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {}", path.display());
}

/// A model file or a `state.json` that is a directory, a FIFO or a device is named as what it
/// is, without blocking or reading a device without end.
#[test]
fn readers_name_what_is_not_a_regular_file() {
    let device = bnn_layers::test_device();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.bpk");
    mkfifo(&fifo);
    let cases = [
        (
            dir.path().to_path_buf(),
            "is a directory, not a regular file",
        ),
        (fifo, "is a FIFO, not a regular file"),
        (
            std::path::PathBuf::from("/dev/zero"),
            "is a character device, not a regular file",
        ),
    ];
    for (path, needle) in cases {
        let (p, model) = (path.clone(), mlp(8).init(&device).unwrap());
        let err = within_10s(move || load_model(&p, model).map(|_| ()).unwrap_err()).to_string();
        assert!(
            err.contains(&path.display().to_string()) && err.contains(needle),
            "{err}"
        );
    }
    // state.json as a directory, then as a FIFO.
    let run = tempfile::tempdir().unwrap();
    let state = run.path().join(Checkpointer::STATE_FILE);
    std::fs::create_dir(&state).unwrap();
    for needle in ["is a directory", "is a FIFO"] {
        let p = run.path().to_path_buf();
        let err = within_10s(move || {
            Checkpointer::new(&p)
                .and_then(|ck| ck.state())
                .map(|_| ())
                .unwrap_err()
        })
        .to_string();
        assert!(
            err.contains(&state.display().to_string()) && err.contains(needle),
            "{err}"
        );
        std::fs::remove_dir(&state).ok();
        if !state.exists() {
            mkfifo(&state);
        }
    }
}

/// A model file with a finite but absurd parameter (3e38: its square, a KL term, overflows)
/// is refused like a non-finite one, naming the file and the parameter.
#[test]
fn loading_names_an_absurd_parameter() {
    use burn::module::Module;
    let device = bnn_layers::test_device();
    let model = mlp(8).init(&device).unwrap();
    let mut bad: Vec<NamedTensor> = export_params(&model)
        .into_iter()
        .filter(|t| t.path.ends_with("weight_rho"))
        .take(1)
        .collect();
    bad[0].data[2] = 3e38;
    let bad_path = bad[0].path.clone();
    let (model, _): (Network, usize) = import_params(model, &bad).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("model.bpk");
    let bytes = model.into_record().into_bytes().unwrap();
    std::fs::write(&file, &bytes[..]).unwrap();
    let err = load_model(&file, mlp(8).init(&device).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&file.display().to_string())
            && err.contains(&bad_path)
            && err.contains("3e38"),
        "{err}"
    );
}

/// A lock held for a moment after its owner let go (a child the process forked shares the
/// locked file until its exec closes it) made a new checkpointer fail with "another process
/// is training" now and then, in a test binary whose other tests spawn processes.
#[test]
fn a_lock_released_a_moment_later_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    drop(Checkpointer::new(dir.path()).unwrap());
    let holder = std::fs::File::options()
        .write(true)
        .open(dir.path().join(".lock"))
        .unwrap();
    holder.try_lock().unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        drop(holder);
    });
    Checkpointer::new(dir.path()).unwrap();
    release.join().unwrap();
}
