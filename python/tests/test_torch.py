"""swbnn.torch: compress a PyTorch BNN (bayesian-torch; blitz and torchbnn by stand-ins)
without leaving PyTorch. Skipped cleanly without torch (and the bayesian-torch tests without
bayesian-torch)."""

import gzip
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="swbnn.torch needs PyTorch: pip install swbnn[torch]")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import swbnn.torch as swt  # noqa: E402

FASHION = Path("/usr/share/datasets/fashion-mnist")


def _bt():
    return pytest.importorskip("bayesian_torch", reason="bayesian-torch is not installed")


def images(n=512, seed=0):
    """The first ``n`` Fashion-MNIST test images (normalised), or synthetic class blobs."""
    img, lab = FASHION / "t10k-images-idx3-ubyte.gz", FASHION / "t10k-labels-idx1-ubyte.gz"
    if img.exists() and lab.exists():
        with gzip.open(img) as f:
            x = np.frombuffer(f.read(16 + n * 784)[16:], np.uint8).reshape(n, 1, 28, 28)
        with gzip.open(lab) as f:
            y = np.frombuffer(f.read(8 + n)[8:], np.uint8)
        x = (x.astype(np.float32) / 255.0 - 0.286) / 0.353
        return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    centres = torch.randn(10, 1, 28, 28, generator=g)
    return centres[y] + 0.5 * torch.randn(n, 1, 28, 28, generator=g), y


def loader(x, y, batch=64, shuffle=False):
    ds = torch.utils.data.TensorDataset(x, y)
    return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=shuffle)


class SmallCNN(nn.Module):
    """A bayesian-torch CNN that is not in the swbnn zoo; forward returns (logits, kl)."""

    def __init__(self):
        super().__init__()
        from bayesian_torch.layers import Conv2dReparameterization, LinearFlipout, LinearReparameterization

        self.conv1 = Conv2dReparameterization(1, 6, 5, stride=2, padding=1)  # 28 -> 13
        self.bn = nn.BatchNorm2d(6)
        self.conv2 = Conv2dReparameterization(6, 8, 3, stride=2)  # 13 -> 6
        self.head = nn.Sequential(
            LinearReparameterization(8 * 6 * 6, 32),
            LinearFlipout(32, 10),
        )

    def forward(self, x):
        x, kl1 = self.conv1(x)
        x = F.relu(self.bn(x))
        x, kl2 = self.conv2(x)
        x = F.relu(x).flatten(1)
        x, kl3 = self.head[0](x)
        x, kl4 = self.head[1](F.relu(x))
        return x, kl1 + kl2 + kl3 + kl4


def train_loop(model, data, n_train, steps=None, lr=1e-2):
    """The user's own bayesian-torch training loop, unchanged before and after compression."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses = []
    for i, (x, y) in enumerate(data):
        out, kl = model(x)
        loss = F.cross_entropy(out, y) + kl / n_train
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if steps is not None and i + 1 >= steps:
            break
    return losses


@pytest.fixture(scope="module")
def data():
    x, y = images(512)
    return x[:384], y[:384], x[384:], y[384:]


@pytest.fixture(scope="module")
def trained(data):
    _bt()
    torch.manual_seed(0)
    model = SmallCNN()
    xt, yt, _, _ = data
    for _ in range(2):
        train_loop(model, loader(xt, yt, shuffle=True), len(xt))
    return model


@pytest.fixture(scope="module")
def compressed(trained, data):
    xt, yt, xv, yv = data
    shared, report = swt.compress(
        trained,
        loader(xt, yt),
        k=16,
        epochs=2,
        val_loader=loader(xv, yv),
        config={"retrain_stop": {"confidence-recovered": {"probe_images": 128, "samples": 2, "checks_per_epoch": 2}}},
    )
    return shared, report


def test_compress_replaces_the_layers_and_reports(trained, compressed):
    shared, report = compressed
    assert isinstance(shared.conv1, swt.SharedConv2d) and isinstance(shared.head[1], swt.SharedLinear)
    assert not isinstance(trained.conv1, swt.SharedLayer), "the user's model is left as it was"
    assert [r["path"] for r in report.layers] == ["conv1", "conv2", "head.0", "head.1"]
    t = report.total
    assert t["weights"] == 6 * 25 + 8 * 6 * 9 + 288 * 32 + 32 * 10
    assert t["outliers"] + t["ellipses"] + t["shared"] == t["weights"]
    assert t["params_after"] < t["params_before"]
    assert t["params_before"] == sum(p.numel() for p in trained.parameters())
    assert 1 <= report.k <= 16
    assert len(shared.conv1.shared_codebook) == report.k
    assert shared.conv1.shared_codebook is shared.head[1].shared_codebook
    for key in ("gradients_s", "plan_s", "build_s", "retrain_s"):
        assert report.timings[key] >= 0
    s = report.stop
    assert s is not None and s["probe_images"] == 128 and 0 < s["source_confidence"] <= 1
    assert s["checks"] and s["checks"][0]["epochs_done"] == 0
    assert "K =" in str(report)


def test_forward_and_training_loop_unchanged(compressed, data):
    shared, _ = compressed
    xt, yt, _, _ = data
    out, kl = shared(xt[:8])
    assert out.shape == (8, 10) and kl.dim() == 0 and torch.isfinite(kl)
    before = shared.conv1.shared_codebook.mu.detach().clone()
    losses = train_loop(copy_of(shared), loader(xt, yt), len(xt), steps=3)
    assert all(np.isfinite(losses))
    assert torch.equal(shared.conv1.shared_codebook.mu, before)  # trained a copy
    # The codebook is trained by the loop (its gradient is reached through every layer).
    m = copy_of(shared)
    out, kl = m(xt[:16])
    (F.cross_entropy(out, yt[:16]) + kl).backward()
    assert m.conv1.shared_codebook.mu.grad is not None and m.conv1.shared_codebook.mu.grad.abs().sum() > 0
    # Accuracy stays far above chance.
    with torch.no_grad():
        acc = (shared(xt)[0].argmax(1) == yt).float().mean()
    assert acc > 0.3


def copy_of(m):
    import copy

    return copy.deepcopy(m)


def fixed_predictions(model, x):
    model.eval()
    with torch.no_grad():
        torch.manual_seed(1234)
        return torch.stack([model(x)[0] for _ in range(3)])


def test_save_load_round_trip(compressed, data, tmp_path):
    shared, _ = compressed
    path = tmp_path / "cnn.swb"
    sizes = swt.save(shared, path)
    assert sizes["total"] == path.stat().st_size > 0
    torch.manual_seed(99)
    fresh = swt.load(SmallCNN(), path)
    x = data[2][:16]
    assert torch.equal(fixed_predictions(shared, x), fixed_predictions(fresh, x))
    for m in (shared, fresh):
        for _, layer in swt._layers.shared_layers(m):
            layer.sampling = False
    assert torch.allclose(shared(x)[0], fresh(x)[0])
    for _, layer in swt._layers.shared_layers(shared):
        layer.sampling = True


def test_load_into_another_architecture_names_the_module(compressed, tmp_path):
    from bayesian_torch.layers import LinearReparameterization

    shared, _ = compressed
    path = tmp_path / "cnn.swb"
    swt.save(shared, path)
    other = SmallCNN()
    other.head[0] = LinearReparameterization(8 * 6 * 6, 16)
    with pytest.raises(ValueError, match=r"module `head\.0`: weight shape"):
        swt.load(other, path)
    fewer = SmallCNN()
    fewer.conv2 = nn.Conv2d(6, 8, 3, stride=2)
    with pytest.raises(ValueError, match=r"module `conv2`"):
        swt.load(fewer, path)


def test_dnn_to_bnn_model(data):
    _bt()
    from bayesian_torch.models.dnn_to_bnn import dnn_to_bnn, get_kl_loss

    torch.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(1, 4, 5, stride=3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 10))
    dnn_to_bnn(
        net,
        {"prior_mu": 0.0, "prior_sigma": 1.0, "posterior_mu_init": 0.0, "posterior_rho_init": -3.0,
         "type": "Reparameterization", "moped_enable": False},
    )
    xt, yt, _, _ = data
    shared, report = swt.compress(net, loader(xt, yt), k=8, epochs=1)
    assert report.stop is None and len(report.history) == 1
    out = shared(xt[:4])
    assert torch.is_tensor(out) and out.shape == (4, 10)  # dnn_to_bnn layers return out alone
    assert torch.isfinite(get_kl_loss(shared))


# Stand-ins for blitz and torchbnn layers: same module names, class names, parameter names.
def _stand_in(module, name, mu, scale, kind, log_sigma):
    def init(self, n_in, n_out, k=None):
        nn.Module.__init__(self)
        shape = (n_out, n_in) if kind == "linear" else (n_out, n_in, k, k)
        setattr(self, mu, nn.Parameter(0.1 * torch.randn(shape)))
        setattr(self, scale, nn.Parameter(torch.full(shape, -4.0 if log_sigma else -3.0)))
        setattr(self, mu.replace("weight", "bias"), nn.Parameter(torch.zeros(n_out)))
        setattr(self, scale.replace("weight", "bias"), nn.Parameter(torch.full((n_out,), -4.0)))
        self.stride, self.padding, self.dilation, self.groups = 1, 0, 1, 1

    def forward(self, x):
        s = getattr(self, scale)
        sig = torch.exp(s) if log_sigma else F.softplus(s)
        w = getattr(self, mu) + sig * torch.randn_like(sig)
        b = getattr(self, mu.replace("weight", "bias"))
        return F.linear(x, w, b) if kind == "linear" else F.conv2d(x, w, b)

    return type(name, (nn.Module,), {"__init__": init, "forward": forward, "__module__": module})


BlitzLinear = _stand_in("blitz.modules.linear_bayesian_layer", "BayesianLinear", "weight_mu", "weight_rho", "linear", False)
BlitzConv2d = _stand_in("blitz.modules.conv_bayesian_layer", "BayesianConv2d", "weight_mu", "weight_rho", "conv2d", False)
TbnnLinear = _stand_in("torchbnn.modules.linear", "BayesLinear", "weight_mu", "weight_log_sigma", "linear", True)
TbnnConv2d = _stand_in("torchbnn.modules.conv", "BayesConv2d", "weight_mu", "weight_log_sigma", "conv2d", True)


@pytest.mark.parametrize("conv,lin", [(BlitzConv2d, BlitzLinear), (TbnnConv2d, TbnnLinear)])
def test_blitz_and_torchbnn_stand_ins(conv, lin, data, tmp_path):
    torch.manual_seed(2)
    net = nn.Sequential(conv(1, 4, 5), nn.ReLU(), nn.MaxPool2d(4), nn.Flatten(), lin(4 * 6 * 6, 10))
    xt, yt, _, _ = data
    shared, report = swt.compress(net, loader(xt, yt), k=8, epochs=1)
    assert [r["library"] for r in report.layers] == [report.layers[0]["library"]] * 2
    assert isinstance(shared[4], swt.SharedLinear)
    out = shared(xt[:4])
    assert torch.is_tensor(out) and out.shape == (4, 10)  # these libraries return out alone
    # An outlier keeps the source's sigma (torchbnn's exp(log_sigma) becomes a softplus rho).
    layer = shared[4]
    if layer.outlier_mu.numel():
        sig = F.softplus(layer.outlier_rho.detach())
        assert torch.all(sig > 0)
    swt.save(shared, tmp_path / "m.swb")
    fresh = swt.load(nn.Sequential(conv(1, 4, 5), nn.ReLU(), nn.MaxPool2d(4), nn.Flatten(), lin(4 * 6 * 6, 10)), tmp_path / "m.swb")
    x = xt[:8]
    torch.manual_seed(5)
    a = shared(x)
    torch.manual_seed(5)
    assert torch.equal(a, fresh(x))


# Bad input: clear errors.
def test_no_bayesian_layers(data):
    xt, yt, _, _ = data
    with pytest.raises(ValueError, match="no Bayesian layers"):
        swt.compress(nn.Sequential(nn.Flatten(), nn.Linear(784, 10)), loader(xt, yt), k=4, epochs=0)


def test_unknown_library(data):
    class Mine(nn.Module):
        def __init__(self):
            super().__init__()
            self.mu_weight = nn.Parameter(torch.zeros(10, 784))
            self.rho_weight = nn.Parameter(torch.zeros(10, 784))

        def forward(self, x):
            return F.linear(x.flatten(1), self.mu_weight)

    xt, yt, _, _ = data
    with pytest.raises(ValueError, match=r"module `1` \(.*Mine\) has Bayesian parameters but is not a supported layer"):
        swt.compress(nn.Sequential(nn.Identity(), Mine()), loader(xt, yt), k=4, epochs=0)


def _mlp():
    torch.manual_seed(3)
    return nn.Sequential(nn.Flatten(), BlitzLinear(784, 10))


def test_loader_with_a_wrong_shape(data):
    xt, yt, _, _ = data
    with pytest.raises(ValueError, match=r"cannot run a batch of images \(64, 3, 28, 28\)"):
        swt.compress(_mlp(), loader(xt.repeat(1, 3, 1, 1), yt), k=4, epochs=0)
    with pytest.raises(ValueError, match="one label per image"):
        swt.compress(_mlp(), loader(xt, yt[:, None].repeat(1, 2)), k=4, epochs=0)
    with pytest.raises(ValueError, match=r"\(images, labels\) pairs"):
        swt.compress(_mlp(), [xt[:8]], num_train=8, k=4, epochs=0)


def test_k_larger_than_the_inliers(data):
    xt, yt, _, _ = data
    with pytest.raises(ValueError, match="larger than the inlier"):
        swt.compress(_mlp(), loader(xt, yt), k=100_000, epochs=0)


def test_nan_weights(data):
    xt, yt, _, _ = data
    m = _mlp()
    with torch.no_grad():
        m[1].weight_mu[3, 5] = float("nan")
    with pytest.raises(ValueError, match=r"module `1`: weight mu is not finite at index 2357"):
        swt.compress(m, loader(xt, yt), k=4, epochs=0)


def test_confidence_rule_needs_validation(data):
    xt, yt, _, _ = data
    with pytest.raises(ValueError, match="val_loader"):
        swt.compress(_mlp(), loader(xt, yt), k=4, epochs=1, config={"retrain_stop": {"confidence-recovered": {}}})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda(trained, data):
    xt, yt, xv, yv = data
    import copy

    m = copy.deepcopy(trained).cuda()
    shared, report = swt.compress(m, loader(xt, yt), k=16, epochs=1, val_loader=loader(xv, yv))
    out, kl = shared(xt[:8].cuda())
    assert out.is_cuda and kl.is_cuda


# A .swb of the swbnn command line in the equivalent PyTorch module. The LeNet-5 fixture and
# its logits are the interop fixtures of the Rust crate (crates/swbnn/tests/data/interop:
# `cargo test -p swbnn --test interop -- --ignored regenerate` writes lenet5-shared.swb, then
# `python interop/fixtures/make_fixtures.py --shared` records shared-logits.json), and
# `cargo test -p swbnn --test interop` checks that the Rust forward pass gives those logits to
# 1e-5: the mean network and one weight sample on the fixed noise of `exported.fixed_noise`.
INTEROP = Path(__file__).resolve().parents[2] / "crates" / "swbnn" / "tests" / "data" / "interop"
DATA = Path(__file__).parent / "data"


def _interop(name):
    path = INTEROP / name
    if not path.exists():
        pytest.skip(f"the Rust crate's interop fixture {name} is not here (a source checkout has it)")
    return path


class BtLeNet5(nn.Module):
    """The command line's LeNet-5 for 1 x 12 x 12 inputs in bayesian-torch layers."""

    def __init__(self, classes=10):
        super().__init__()
        from bayesian_torch.layers import Conv2dReparameterization as C
        from bayesian_torch.layers import LinearReparameterization as L

        self.conv1 = C(1, 6, 5, padding=2)
        self.conv2 = C(6, 16, 5)
        self.fc1 = L(16, 120)
        self.fc2 = L(120, 84)
        self.fc3 = L(84, classes)

    def forward(self, x):
        x, _ = self.conv1(x)
        x, _ = self.conv2(F.max_pool2d(F.relu(x), 2))
        x = F.max_pool2d(F.relu(x), 2).flatten(1)
        x, _ = self.fc1(x)
        x, _ = self.fc2(F.relu(x))
        x, _ = self.fc3(F.relu(x))
        return x


class BtMlp(nn.Module):
    """The command line's MLP (1 x 8 x 8 -> 12 -> 3, as python/tests/data/tiny.swb) in
    bayesian-torch layers, under its module names `layers.0`, `layers.1`."""

    def __init__(self):
        super().__init__()
        from bayesian_torch.layers import LinearReparameterization as L

        self.layers = nn.ModuleList([L(64, 12), L(12, 3)])

    def forward(self, x):
        x, _ = self.layers[0](x.flatten(1))
        x, _ = self.layers[1](F.relu(x))
        return x


class BtResNet20(nn.Module):
    """The command line's ResNet-20 (width 4, projection shortcuts, 1 x 28 x 28 inputs) in
    bayesian-torch layers under bayesian-torch's CIFAR ResNet names (`layer1.0.conv1`,
    `shortcut.0` / `shortcut.1`, `linear`).

    python/tests/data/resnet20-w4-shared.swb was made by the command line from this module's
    random posterior (``torch.manual_seed(0)``, then batch norm's weight, bias and statistics
    drawn by :func:`random_batch_norm`), saved with ``torch.save(model.state_dict(), "r20.pt")``:

        swbnn import --arch resnet20 --dataset fashion-mnist --width 4 --shortcut projection --out r20 r20.pt
        swbnn --threads 1 compress --model r20 --dataset fashion-mnist --data path/to/fashion-mnist \\
            --k 16 --epochs 1 --subset 256 --validation 256 --out resnet20-w4-shared.swb
    """

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            from bayesian_torch.layers import Conv2dReparameterization as C

            self.conv1 = C(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = C(cout, cout, 3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(C(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            o, _ = self.conv1(x)
            o, _ = self.conv2(F.relu(self.bn1(o)))
            o = self.bn2(o)
            if len(self.shortcut):
                sc, _ = self.shortcut[0](x)
                x = self.shortcut[1](sc)
            return F.relu(o + x)

    def __init__(self, w=4, classes=10):
        super().__init__()
        from bayesian_torch.layers import Conv2dReparameterization as C
        from bayesian_torch.layers import LinearReparameterization as L

        B = BtResNet20.Block
        self.conv1 = C(1, w, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.layer1 = nn.Sequential(*[B(w, w, 1) for _ in range(3)])
        self.layer2 = nn.Sequential(B(w, 2 * w, 2), *[B(2 * w, 2 * w, 1) for _ in range(2)])
        self.layer3 = nn.Sequential(B(2 * w, 4 * w, 2), *[B(4 * w, 4 * w, 1) for _ in range(2)])
        self.linear = L(4 * w, classes)

    def forward(self, x):
        h, _ = self.conv1(x)
        h = self.layer3(self.layer2(self.layer1(F.relu(self.bn1(h)))))
        out, _ = self.linear(F.adaptive_avg_pool2d(h, 1).flatten(1))
        return out


def random_batch_norm(model):
    """Batch norm parameters and statistics away from their defaults (the fixture's recipe)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.8, 1.2)
                m.bias.uniform_(-0.1, 0.1)
    return model


def _fixed_noise_sampler(layer):
    """One weight sample of ``layer`` on the fixed noise: ``mu + sigma * eps`` per tensor, the
    noise indexed in PyTorch's weight layout (as the Rust test indexes it)."""
    from swbnn.torch.exported import fixed_noise

    def sample():
        mu, sigma = layer.distribution()
        w = mu + sigma * fixed_noise(mu.numel()).reshape(mu.shape)
        b = None
        if layer.bias_mu is not None:
            b = layer.bias_mu + F.softplus(layer.bias_rho) * fixed_noise(layer.bias_mu.numel())
        return w, b

    return sample


def test_command_line_swb_loads_into_bayesian_torch_lenet5(tmp_path):
    _bt()
    import json

    model = swt.load(BtLeNet5(), _interop("lenet5-shared.swb"))
    case = json.loads(_interop("expected.json").read_text())["lenet5"]
    recorded = json.loads(_interop("shared-logits.json").read_text())
    x = torch.tensor(case["input"], dtype=torch.float32).reshape(case["input_shape"])
    layers = [m for m in model.modules() if isinstance(m, swt.SharedLayer)]
    assert [type(m).__name__ for m in layers] == ["SharedConv2d"] * 2 + ["SharedLinear"] * 3
    assert tuple(model.fc1.shape) == (120, 16)  # the file's [16, 120], transposed
    model.eval()
    with torch.no_grad():
        for m in layers:
            m.sampling = False
        mean = model(x)
        for m in layers:
            m.sampling = True
            m._sample = _fixed_noise_sampler(m)
        fixed = model(x)
    np.testing.assert_allclose(mean.reshape(-1).numpy(), np.asarray(recorded["mean"], np.float32), rtol=0, atol=1e-5)
    np.testing.assert_allclose(fixed.reshape(-1).numpy(), np.asarray(recorded["fixed"], np.float32), rtol=0, atol=1e-5)
    # The two numbers differ: the fixed-noise sample is no mean network.
    assert np.abs(np.asarray(recorded["mean"]) - np.asarray(recorded["fixed"])).max() > 1e-3


def _near_deterministic_copy(src, dst):
    """``src`` with every sigma ~ 4e-18 (rho = -40) and each ellipse weight reduced to its
    first codebook entry: a weight sample is then the mean network, in Rust and in PyTorch."""
    import json

    from swbnn import _native

    d = json.loads(_native.swb_load(str(src)))
    d["codebook_rho"] = [-40.0] * len(d["codebook_rho"])
    d["outlier_rho"] = [-40.0] * len(d["outlier_rho"])
    for t in d["unshared"]:
        if t["path"].endswith("bias_rho"):
            t["data"] = [-40.0] * len(t["data"])
    d["ellipses"] = [{"components": e["components"][:1], "alphas": [1.0]} for e in d["ellipses"]]
    _native.swb_save(str(dst), json.dumps(d), True, False)
    return dst


@pytest.mark.parametrize(
    "fixture,net,shape",
    [
        ("lenet5", BtLeNet5, (6, 1, 12, 12)),
        ("tiny", BtMlp, (6, 1, 8, 8)),
        ("resnet20", BtResNet20, (6, 1, 28, 28)),
    ],
)
def test_command_line_swb_predicts_as_the_rust_model(fixture, net, shape, tmp_path):
    """swbnn.torch.load + predict in PyTorch against the Rust model's own prediction
    (swbnn.Model.predict, the code of `swbnn eval`) on the same file, made deterministic."""
    _bt()
    import swbnn

    src = {"lenet5": lambda: _interop("lenet5-shared.swb"), "tiny": lambda: DATA / "tiny.swb",
           "resnet20": lambda: DATA / "resnet20-w4-shared.swb"}[fixture]()
    path = _near_deterministic_copy(src, tmp_path / "m.swb")
    x = 4.0 * torch.randn(shape, generator=torch.Generator().manual_seed(3))
    rust = swbnn.load(path).predict(x.numpy(), samples=1, seed=0)
    model = swt.load(net(), path).eval()
    with torch.no_grad():
        ours = F.softmax(model(x), dim=1).numpy()
    np.testing.assert_allclose(ours, rust, rtol=0, atol=1e-5)
    # Not a trivial agreement: the predictions differ between images.
    assert np.abs(rust - rust[:1]).max() > 1e-4


def test_command_line_swb_into_another_architecture_names_the_module():
    _bt()
    with pytest.raises(ValueError, match=r"module `conv1` .* is not a Bayesian layer of the model"):
        swt.load(BtMlp(), _interop("lenet5-shared.swb"))
