//! PyTorch interop against fixtures made by `interop/fixtures/make_fixtures.py` with
//! bayesian-torch, blitz, torchbnn and torchvision (no Python needed here).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bnn_layers::{export_params, set_sampling, test_device};
use bnn_models::resnet::Shortcut;
use bnn_models::torch_names::Convention;
use bnn_models::{Arch, Kind, ModelConfig, Network};
use burn::prelude::*;
use burn::tensor::TensorData;
use swbnn::interop::{
    ExportAs, HostTensor, InteropError, StateDict, Values, export_state_dict, fixed_noise,
    import_state_dict, read_state_dict, safetensors_bytes,
};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/interop")
        .join(name)
}

fn json(name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(data(name)).unwrap()).unwrap()
}

fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn lenet_config() -> ModelConfig {
    ModelConfig::for_input(Arch::Lenet5, Kind::Bayesian, 10, 1, 12)
}

fn resnet_a_config() -> ModelConfig {
    let mut c = ModelConfig::for_input(Arch::Resnet20, Kind::Bayesian, 10, 3, 16);
    c.shortcut = Some(Shortcut::ZeroPad);
    c.width = Some(4);
    c
}

/// The mean network's logits for the fixture's input.
fn mean_logits(model: Network, case: &serde_json::Value) -> Vec<f32> {
    let device = test_device();
    let shape: Vec<usize> = case["input_shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let x = Tensor::<4>::from_data(TensorData::new(floats(&case["input"]), shape), &device);
    set_sampling(model, false)
        .forward(x)
        .into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap()
}

/// `|a - b| <= tol * max(1, |b|)` everywhere; returns the largest such scaled difference.
fn assert_close(ours: &[f32], theirs: &[f32], tol: f32, what: &str) -> f32 {
    assert_eq!(ours.len(), theirs.len(), "{what}: lengths");
    let worst = ours
        .iter()
        .zip(theirs)
        .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
        .fold(0.0f32, f32::max);
    assert!(worst <= tol, "{what}: differs by {worst:e} (> {tol:e})");
    eprintln!("{what}: largest difference {worst:e} (relative where |x| > 1)");
    worst
}

fn import(file: &str, config: &ModelConfig) -> (Network, ModelConfig, Convention) {
    let source = read_state_dict(&data(file), None).unwrap();
    import_state_dict(&source, config, None, &test_device()).unwrap()
}

#[test]
fn bayesian_torch_lenet5_import_reproduces_pytorch_mean_logits() {
    let (model, config, convention) = import("lenet5-bayesian-torch.safetensors", &lenet_config());
    assert_eq!(convention, Convention::BayesianTorch);
    assert_eq!(config.kind, Kind::Bayesian);
    let expected = json("expected.json");
    let case = &expected["lenet5"];
    assert_close(
        &mean_logits(model, case),
        &floats(&case["logits"]),
        1e-5,
        "lenet5",
    );
}

#[test]
fn bayesian_torch_option_a_resnet_import_reproduces_pytorch_mean_logits() {
    let (model, _, _) = import(
        "resnet20a-w4-bayesian-torch.safetensors",
        &resnet_a_config(),
    );
    let expected = json("expected.json");
    let case = &expected["resnet20a"];
    assert_close(
        &mean_logits(model, case),
        &floats(&case["logits"]),
        1e-5,
        "resnet20a",
    );
    // The same weights with projection shortcuts leave keys unmatched: option A is not B.
    let mut b = resnet_a_config();
    b.shortcut = None;
    let source = read_state_dict(&data("resnet20a-w4-bayesian-torch.safetensors"), None).unwrap();
    let err = import_state_dict(&source, &b, None, &test_device())
        .unwrap_err()
        .to_string();
    assert!(err.contains("layer2.0.shortcut.0.mu_kernel"), "{err}");
}

/// blitz (`.pt`, sampler copies) and torchbnn (log sigma) hold the same posterior as the
/// bayesian-torch fixture: the same model comes out.
#[test]
fn blitz_pt_and_torchbnn_import_the_same_posterior() {
    let (bt, _, _) = import("lenet5-bayesian-torch.safetensors", &lenet_config());
    let (blitz, _, c) = import("lenet5-blitz.pt", &lenet_config());
    assert_eq!(c, Convention::Blitz);
    let (tbnn, _, c) = import("lenet5-torchbnn.safetensors", &lenet_config());
    assert_eq!(c, Convention::Torchbnn);
    let (bt, blitz, tbnn) = (
        export_params(&bt),
        export_params(&blitz),
        export_params(&tbnn),
    );
    assert_eq!(bt, blitz);
    for (a, b) in bt.iter().zip(&tbnn) {
        assert_eq!(a.path, b.path);
        if a.path.ends_with("_mu") {
            assert_eq!(a.data, b.data, "{}", a.path);
        } else {
            // rho through ln(softplus(rho)) in float32 and back: sigma agrees to 1e-6.
            let s = |r: f32| bnn_layers::softplus(f64::from(r));
            for (x, y) in a.data.iter().zip(&b.data) {
                assert!((s(*x) - s(*y)).abs() <= 1e-6 * s(*x), "{} {x} {y}", a.path);
            }
        }
    }
}

fn roundtrip(file: &str, config: &ModelConfig) {
    let source = read_state_dict(&data(file), None).unwrap();
    let (first, config, _) = import_state_dict(&source, config, None, &test_device()).unwrap();
    let (dict, meta) = export_state_dict(
        &first,
        &config,
        ExportAs::Convention(Convention::BayesianTorch),
    )
    .unwrap();
    // Every tensor of the source comes back bit for bit, plus PyTorch's batch-norm counters.
    for (k, t) in &source {
        if k.ends_with("num_batches_tracked") {
            assert!(dict.contains_key(k), "{k}");
        } else {
            assert_eq!(dict.get(k), Some(t), "{k}");
        }
    }
    assert_eq!(dict.len(), source.len());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.safetensors");
    std::fs::write(&path, safetensors_bytes(&dict, Some(meta)).unwrap()).unwrap();
    let back = read_state_dict(&path, None).unwrap();
    let (second, _, _) = import_state_dict(&back, &config, None, &test_device()).unwrap();
    assert_eq!(export_params(&first), export_params(&second));
}

#[test]
fn import_export_import_is_bit_exact() {
    roundtrip("lenet5-bayesian-torch.safetensors", &lenet_config());
    roundtrip(
        "resnet20a-w4-bayesian-torch.safetensors",
        &resnet_a_config(),
    );
}

fn unmatched(source: &StateDict, config: &ModelConfig) -> String {
    match import_state_dict(source, config, None, &test_device()) {
        Err(e @ InteropError::Unmatched { .. }) => e.to_string(),
        other => panic!(
            "expected an unmatched-key error, got {:?}",
            other.map(|_| ())
        ),
    }
}

#[test]
fn each_unmatched_key_is_named() {
    let source = read_state_dict(&data("lenet5-bayesian-torch.safetensors"), None).unwrap();
    // A key missing on the file's side.
    let mut s = source.clone();
    s.remove("fc2.rho_weight");
    let e = unmatched(&s, &lenet_config());
    assert!(e.contains("fc2.rho_weight (for body.fc2.weight_rho"), "{e}");
    // A key the model does not take, beside another missing one: both listed.
    let mut s = source.clone();
    let t = s.remove("conv2.mu_bias").unwrap();
    s.insert("conv3.mu_bias".into(), t);
    let e = unmatched(&s, &lenet_config());
    assert!(e.contains("lacks (1):\n  conv2.mu_bias"), "{e}");
    assert!(
        e.contains("no parameter takes (1):\n  conv3.mu_bias"),
        "{e}"
    );
    // A key of another shape.
    let mut s = source.clone();
    s.insert(
        "fc3.mu_bias".into(),
        HostTensor::f32(vec![11], vec![0.0; 11]),
    );
    let e = unmatched(&s, &lenet_config());
    assert!(
        e.contains("fc3.mu_bias: [11] in the file, [10] expected"),
        "{e}"
    );
    // Another architecture: every key on both sides.
    let e = unmatched(&source, &resnet_a_config());
    assert!(
        e.contains("conv1.mu_kernel") && e.contains("bn1.weight"),
        "{e}"
    );
    assert!(
        e.contains("fc1.mu_weight") && e.contains("linear.mu_weight"),
        "{e}"
    );
    // A blitz sampler copy that differs from the weight it copies is not ignored.
    let mut s = read_state_dict(&data("lenet5-blitz.pt"), None).unwrap();
    if let Some(HostTensor {
        values: Values::F32(v),
        ..
    }) = s.get_mut("fc1.weight_sampler.mu")
    {
        v[0] += 1.0;
    }
    let e = unmatched(&s, &lenet_config());
    assert!(
        e.contains("fc1.weight_sampler.mu (differs from fc1.weight_mu)"),
        "{e}"
    );
}

/// Zero tensors of the keys and shapes of a real library's model.
fn zeros_of(keys: &serde_json::Value) -> StateDict {
    keys.as_array()
        .unwrap()
        .iter()
        .map(|kv| {
            let key = kv[0].as_str().unwrap().to_string();
            let shape: Vec<usize> = kv[1]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            let n = shape.iter().product();
            let t = if key.ends_with("num_batches_tracked") {
                HostTensor::i64(shape, vec![0; n])
            } else {
                HostTensor::f32(shape, vec![0.5; n])
            };
            (key, t)
        })
        .collect()
}

/// torchvision's ResNet-18/50, bayesian-torch's resnet20 and `dnn_to_bnn(resnet18)`: each
/// imports with every key used, and exports back to exactly its key set (so PyTorch's strict
/// `load_state_dict` takes it).
#[test]
fn real_library_state_dicts_import_and_export_their_own_keys() {
    let keys = json("keys.json");
    let zero_pad = |mut c: ModelConfig| {
        c.shortcut = Some(Shortcut::ZeroPad);
        c
    };
    let cases = [
        (
            "torchvision-resnet18",
            ModelConfig::for_input(Arch::Resnet18, Kind::Deterministic, 10, 3, 224),
            Convention::Torchvision,
        ),
        (
            "torchvision-resnet50",
            ModelConfig::for_input(Arch::Resnet50, Kind::Deterministic, 10, 3, 224),
            Convention::Torchvision,
        ),
        (
            "bayesian-torch-resnet20",
            zero_pad(ModelConfig::for_input(
                Arch::Resnet20,
                Kind::Bayesian,
                10,
                3,
                32,
            )),
            Convention::BayesianTorch,
        ),
        (
            "dnn-to-bnn-resnet18",
            ModelConfig::for_input(Arch::Resnet18, Kind::Bayesian, 10, 3, 224),
            Convention::BayesianTorch,
        ),
    ];
    for (name, config, convention) in cases {
        let source = zeros_of(&keys[name]);
        let (model, config, c) = import_state_dict(&source, &config, None, &test_device())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(c, convention, "{name}");
        let (dict, _) = export_state_dict(&model, &config, ExportAs::Convention(c)).unwrap();
        let want: BTreeSet<&String> = source.keys().collect();
        let got: BTreeSet<&String> = dict.keys().collect();
        assert_eq!(got, want, "{name}");
        for (k, t) in &dict {
            assert_eq!(t.shape, source[k].shape, "{name} {k}");
        }
    }
}

/// The mean network of a Bayesian model under plain names is what a deterministic import of
/// it gives back.
#[test]
fn mean_network_export_imports_as_a_deterministic_twin() {
    let (bayes, config, _) = import("lenet5-bayesian-torch.safetensors", &lenet_config());
    let (dict, _) =
        export_state_dict(&bayes, &config, ExportAs::Convention(Convention::Plain)).unwrap();
    assert!(dict.contains_key("fc1.weight") && !dict.keys().any(|k| k.contains("rho")));
    let (det, det_config, c) = import_state_dict(&dict, &config, None, &test_device()).unwrap();
    assert_eq!(
        (c, det_config.kind),
        (Convention::Plain, Kind::Deterministic)
    );
    let expected = json("expected.json");
    let case = &expected["lenet5"];
    assert_close(
        &mean_logits(det, case),
        &floats(&case["logits"]),
        1e-5,
        "mean net",
    );
    let err = export_state_dict(
        &bnn_models::ModelConfig::for_input(Arch::Lenet5, Kind::Deterministic, 10, 1, 12)
            .init(&test_device())
            .unwrap(),
        &det_config,
        ExportAs::Convention(Convention::BayesianTorch),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("no posterior"), "{err}");
}

fn shared_model() -> (Network, ModelConfig) {
    let file = data("lenet5-shared.swb");
    let swb = swshare::format::load(&file).unwrap();
    swshare::burn_edges::from_swb(&swb, &test_device()).unwrap()
}

/// Our forward pass with the weights `mu + sigma * eps` of the fixed noise (in PyTorch's
/// layout): the shared model's twin, made deterministic with those weights.
fn fixed_noise_logits(model: &Network, config: &ModelConfig, case: &serde_json::Value) -> Vec<f32> {
    let twin = swbnn::interop::bayes_twin(model, config).unwrap();
    let device = test_device();
    let det = config
        .clone()
        .with_kind(Kind::Deterministic)
        .init(&device)
        .unwrap();
    let mut named = Vec::new();
    let params = export_params(&twin);
    for t in &params {
        let Some(base) = t.path.strip_suffix("_mu") else {
            if !t.path.ends_with("_rho") {
                named.push(t.clone());
            }
            continue;
        };
        let rho = params
            .iter()
            .find(|r| r.path == format!("{base}_rho"))
            .unwrap();
        let eps = fixed_noise(t.data.len());
        // Our dense weights are [in, out]; the noise is indexed in PyTorch's [out, in].
        let at = |i: usize| match t.shape.as_slice() {
            [rows, cols] => eps[(i % cols) * rows + i / cols],
            _ => eps[i],
        };
        let data = (0..t.data.len())
            .map(|i| t.data[i] + bnn_layers::softplus(f64::from(rho.data[i])) as f32 * at(i))
            .collect();
        named.push(bnn_layers::NamedTensor {
            path: base.to_string(),
            shape: t.shape.clone(),
            data,
        });
    }
    let (det, _) = bnn_layers::import_params(det, &named).unwrap();
    mean_logits(det, case)
}

/// The shared export, run by the shipped PyTorch module (`interop/torch/swbnn_shared.py`,
/// numbers recorded by the fixture script), gives our logits: the mean network and one
/// weight sample on fixed noise.
#[test]
fn shared_export_matches_the_pytorch_module() {
    let (model, config) = shared_model();
    // The committed export is what we export today.
    let (dict, _) = export_state_dict(&model, &config, ExportAs::Shared).unwrap();
    let committed = read_state_dict(&data("lenet5-shared.safetensors"), None).unwrap();
    assert_eq!(dict, committed);
    let expected = json("expected.json");
    let case = &expected["lenet5"];
    let recorded = json("shared-logits.json");
    let ours = mean_logits(swbnn::interop::bayes_twin(&model, &config).unwrap(), case);
    let shared_mean = mean_logits(model.clone(), case);
    assert_close(
        &shared_mean,
        &floats(&recorded["mean"]),
        1e-5,
        "shared mean",
    );
    assert_close(&ours, &shared_mean, 1e-5, "twin mean");
    let fixed = fixed_noise_logits(&model, &config, case);
    assert_close(
        &fixed,
        &floats(&recorded["fixed"]),
        1e-5,
        "shared fixed noise",
    );
}

/// Regenerates `lenet5-shared.swb` and its export from the bayesian-torch LeNet-5 fixture
/// (stages 1-2, K = 16); then run `make_fixtures.py --shared` to record PyTorch's numbers.
#[test]
#[ignore = "writes the committed fixtures"]
fn regenerate_shared_fixture() {
    let (bayes, config, _) = import("lenet5-bayesian-torch.safetensors", &lenet_config());
    let table =
        swshare::burn_edges::table_from_tensors(&bnn_layers::export_bayes(&bayes, None)).unwrap();
    let mut cfg = swshare::SwshareConfig::default();
    cfg.gmm.k = 16;
    cfg.refine.n_min = 10;
    let (plan, _) = swshare::pipeline::build_plan(&table, &cfg).unwrap();
    let swb = swshare::burn_edges::initial_swb(&config, &bayes, &table, &plan).unwrap();
    swshare::format::save(data("lenet5-shared.swb"), &swb, &Default::default()).unwrap();
    let (model, config) = shared_model();
    swbnn::interop::write_export(
        &model,
        &config,
        ExportAs::Shared,
        &data("lenet5-shared.safetensors"),
        true,
    )
    .unwrap();
    assert!(Path::new(&data("lenet5-shared.safetensors")).exists());
}

/// `import_state_dict`'s error for `source`, which must be one.
fn import_error(source: &StateDict, config: &ModelConfig) -> String {
    match import_state_dict(source, config, None, &test_device()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("the import was accepted"),
    }
}

/// NaN, infinities and absurd magnitudes are refused, naming the key: every later command
/// would fail on them (they used to import with exit 0).
#[test]
fn non_finite_and_absurd_values_are_refused_naming_the_key() {
    let source = read_state_dict(&data("lenet5-bayesian-torch.safetensors"), None).unwrap();
    for (key, value, needle) in [
        ("fc1.mu_weight", f32::NAN, "NaN"),
        ("conv2.rho_kernel", f32::INFINITY, "inf"),
        ("fc2.mu_bias", f32::NEG_INFINITY, "-inf"),
        ("fc3.rho_weight", 3e38, "3e38"),
        ("fc3.mu_weight", -2e6, "-2e6"),
    ] {
        let mut s = source.clone();
        if let Some(HostTensor {
            values: Values::F32(v),
            ..
        }) = s.get_mut(key)
        {
            v[1] = value;
        }
        let e = import_error(&s, &lenet_config());
        assert!(e.contains(key) && e.contains(needle), "{e}");
    }
    // A rho within the magnitude bound but above the one loading takes (`MAX_RHO`, 10): it
    // used to import, and `eval` then refused the model directory the import wrote.
    let mut s = source.clone();
    if let Some(HostTensor {
        values: Values::F32(v),
        ..
    }) = s.get_mut("fc3.rho_weight")
    {
        v[1] = 50.0;
    }
    let e = import_error(&s, &lenet_config());
    assert!(
        e.contains("fc3") && e.contains("rho 5e1") && e.contains("loading the model would refuse"),
        "{e}"
    );
    // ln sigma of torchbnn: finite in the file, infinite once it is sigma.
    let mut s = read_state_dict(&data("lenet5-torchbnn.safetensors"), None).unwrap();
    let key = s.keys().find(|k| k.contains("log_sigma")).cloned().unwrap();
    if let Some(HostTensor {
        values: Values::F32(v),
        ..
    }) = s.get_mut(&key)
    {
        v[0] = 1000.0;
    }
    let e = import_error(&s, &lenet_config());
    assert!(e.contains(&key), "{e}");
}

/// `source` as a `.safetensors` file in `dir`, with `key`'s bytes under `dtype` instead.
fn safetensors_with(
    dir: &Path,
    source: &StateDict,
    key: &str,
    dtype: safetensors::Dtype,
    bytes: Vec<u8>,
) -> PathBuf {
    let mut tensors: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (k, t) in source {
        let (d, b) = match &t.values {
            _ if k == key => (dtype, bytes.clone()),
            Values::F32(v) => (
                safetensors::Dtype::F32,
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ),
            Values::I64(v) => (
                safetensors::Dtype::I64,
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ),
        };
        tensors.push((k.clone(), d, t.shape.clone(), b));
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(k, d, shape, b)| {
            let view = safetensors::tensor::TensorView::new(*d, shape.clone(), b).unwrap();
            (k.clone(), view)
        })
        .collect();
    let path = dir.join(format!("{key}-{dtype:?}.safetensors"));
    std::fs::write(&path, safetensors::serialize(views, None).unwrap()).unwrap();
    path
}

/// Float weights need a float dtype (float bytes labelled I32 used to import as integers
/// converted to floats) and batch norm's counter an integer one; the error names the key and
/// both dtypes.
#[test]
fn dtypes_must_match_what_the_model_takes() {
    let dir = tempfile::tempdir().unwrap();
    let source = read_state_dict(&data("lenet5-bayesian-torch.safetensors"), None).unwrap();
    let key = "fc3.mu_weight";
    let floats = source[key].to_f32();
    let as_i32: Vec<u8> = floats.iter().flat_map(|x| x.to_le_bytes()).collect();
    let as_i64: Vec<u8> = floats
        .iter()
        .flat_map(|x| (x.to_bits() as i64).to_le_bytes())
        .collect();
    for (dtype, bytes, name) in [
        (safetensors::Dtype::I32, as_i32, "I32"),
        (safetensors::Dtype::I64, as_i64, "I64"),
    ] {
        let file = safetensors_with(dir.path(), &source, key, dtype, bytes);
        let s = read_state_dict(&file, None).unwrap();
        let e = import_error(&s, &lenet_config());
        assert!(
            e.contains(key) && e.contains(name) && e.contains("F32"),
            "{e}"
        );
    }
    // An integer buffer given as floats.
    let source = read_state_dict(&data("resnet20a-w4-bayesian-torch.safetensors"), None).unwrap();
    let key = "bn1.num_batches_tracked";
    let file = safetensors_with(
        dir.path(),
        &source,
        key,
        safetensors::Dtype::F32,
        1.0f32.to_le_bytes().to_vec(),
    );
    let s = read_state_dict(&file, None).unwrap();
    let e = import_error(&s, &resnet_a_config());
    assert!(
        e.contains(key) && e.contains("F32") && e.contains("I64"),
        "{e}"
    );
}

/// A `.pt` state dict's entries that are not tensors are not dropped silently: the error names
/// them. (A plain pickle `{"epoch": 3, "note": "x"}`, written here byte by byte.)
#[test]
fn entries_that_are_not_tensors_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("extra.pt");
    let mut pickle = b"\x80\x02}(".to_vec();
    for key in ["epoch", "note"] {
        pickle.push(b'X');
        pickle.extend_from_slice(&(key.len() as u32).to_le_bytes());
        pickle.extend_from_slice(key.as_bytes());
        if key == "epoch" {
            pickle.extend_from_slice(b"K\x03");
        } else {
            pickle.extend_from_slice(b"X\x01\x00\x00\x00x");
        }
    }
    pickle.extend_from_slice(b"u.");
    std::fs::write(&path, pickle).unwrap();
    let e = read_state_dict(&path, None)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&path.display().to_string()) && e.contains("epoch") && e.contains("note"),
        "{e}"
    );
    // PyTorch's own bookkeeping (`_metadata`) is not such an entry: the real files read.
    assert!(read_state_dict(&data("lenet5-blitz.pt"), None).is_ok());
}

/// What is not a regular file is named as what it is (a directory used to read as "no such
/// file"), a FIFO without blocking.
#[test]
fn state_dict_readers_name_what_is_not_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(dir.path().join("fifo.safetensors"))
        .arg(dir.path().join("fifo.pt"))
        .status();
    assert!(made.is_ok_and(|s| s.success()));
    for (path, needle) in [
        (
            dir.path().to_path_buf(),
            "is a directory, not a regular file",
        ),
        (
            dir.path().join("fifo.safetensors"),
            "is a FIFO, not a regular file",
        ),
        (dir.path().join("fifo.pt"), "is a FIFO, not a regular file"),
        (
            PathBuf::from("/dev/zero"),
            "is a character device, not a regular file",
        ),
    ] {
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || {
            let _ = tx.send(
                read_state_dict(&p, None)
                    .map(|_| ())
                    .unwrap_err()
                    .to_string(),
            );
        });
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the reader blocked");
        assert!(
            e.contains(&path.display().to_string()) && e.contains(needle),
            "{e}"
        );
    }
}

/// Import's argument errors say `import`, and export's write errors name the file written,
/// not a "checkpoint".
#[test]
fn errors_are_labelled_with_what_was_done() {
    let dir = tempfile::tempdir().unwrap();
    let args = swbnn::interop::ImportRequest {
        source: data("lenet5-bayesian-torch.safetensors"),
        arch: Arch::Lenet5,
        dataset: bnn_data::DatasetId::FashionMnist,
        convention: None,
        shortcut: Shortcut::Projection,
        width: None,
        image_size: None,
        top_level_key: None,
        prior_mu: 0.0,
        prior_sigma: -1.0,
        out: dir.path().join("out"),
        force: false,
    };
    let e = swbnn::interop::import(&args, &test_device())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("import: --prior-mu 0 --prior-sigma -1"),
        "{e}"
    );
    let (model, config, _) = import("lenet5-bayesian-torch.safetensors", &lenet_config());
    let out = dir.path().join("no-such-folder/out.safetensors");
    let e = swbnn::interop::write_export(
        &model,
        &config,
        ExportAs::Convention(Convention::BayesianTorch),
        &out,
        true,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(&format!("writing {}", out.display())) && !e.contains("checkpoint"),
        "{e}"
    );
}
