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


def train_loop(model, data, n_train, steps=None, lr=1e-2, device="cpu"):
    """The user's own bayesian-torch training loop, unchanged before and after compression."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses = []
    for i, (x, y) in enumerate(data):
        x, y = x.to(device), y.to(device)
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
def trained_cpu(data):
    _bt()
    torch.manual_seed(0)
    model = SmallCNN()
    xt, yt, _, _ = data
    for _ in range(2):
        train_loop(model, loader(xt, yt, shuffle=True), len(xt))
    return model


@pytest.fixture(scope="module")
def trained(trained_cpu, device):
    """The trained SmallCNN (on the CPU), copied to the test's device."""
    return copy_of(trained_cpu).to(device)


@pytest.fixture(scope="module")
def compressed(trained, data, device):
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


def test_the_defaults_are_the_rust_pipelines():
    """The PyTorch stage 3 and stage 1 use the Rust pipeline's defaults, read from it: the
    values of the paper's appendix as `swshare` sets them."""
    from swbnn.torch import _compress as c

    assert c.RETRAIN_DEFAULTS["epochs"] == 200
    assert (c.RETRAIN_DEFAULTS["lr"], c.RETRAIN_DEFAULTS["lr_rho"]) == (1e-4, 1e-3)
    assert c.RETRAIN_DEFAULTS["prior"] == {"Normal": {"mu": 0.0, "sigma": 0.1}}
    assert c.CONFIDENCE_RECOVERED == {"probe_images": 2048, "samples": 8, "checks_per_epoch": 8}
    assert c.DEFAULT_K == 2000
    assert c.OUTLIER_DEFAULTS == {"tau_w": 0.2, "grad_top_fraction": 0.01, "grad_batches": 10, "tau_sd": 3.0}


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
    for _, layer in swt._layers.shared_layers(shared):  # every tensor on the model's device
        for t in list(layer.parameters()) + list(layer.buffers()):
            assert t.device == trained.conv1.mu_kernel.device
    for key in ("gradients_s", "plan_s", "build_s", "retrain_s", "gradients_cpu_s", "plan_cpu_s", "build_cpu_s"):
        assert report.timings[key] >= 0
    # The gradient pass and the plan do work: the process spends CPU time on them.
    assert report.timings["gradients_cpu_s"] + report.timings["plan_cpu_s"] > 0
    s = report.stop
    assert s is not None and s["probe_images"] == 128 and 0 < s["source_confidence"] <= 1
    assert s["checks"] and s["checks"][0]["epochs_done"] == 0
    assert "K =" in str(report)


def test_forward_and_training_loop_unchanged(compressed, data, device):
    shared, _ = compressed
    xt, yt, _, _ = data
    xt, yt = xt.to(device), yt.to(device)
    out, kl = shared(xt[:8])
    assert out.shape == (8, 10) and kl.dim() == 0 and torch.isfinite(kl)
    assert out.device == kl.device == xt.device
    before = shared.conv1.shared_codebook.mu.detach().clone()
    losses = train_loop(copy_of(shared), loader(xt.cpu(), yt.cpu()), len(xt), steps=3, device=device)
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


def test_save_load_round_trip(compressed, data, tmp_path, device):
    shared, _ = compressed
    path = tmp_path / "cnn.swb"
    sizes = swt.save(shared, path)
    assert sizes["total"] == path.stat().st_size > 0
    torch.manual_seed(99)
    fresh = swt.load(SmallCNN().to(device), path)
    x = data[2][:16].to(device)
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


def test_dnn_to_bnn_model(data, device):
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
    shared, report = swt.compress(net.to(device), loader(xt, yt), k=8, epochs=1)
    assert report.stop is None and len(report.history) == 1
    assert report.history[0]["cpu_seconds"] > 0 and report.history[0]["seconds"] > 0
    out = shared(xt[:4].to(device))
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
def test_blitz_and_torchbnn_stand_ins(conv, lin, data, tmp_path, device):
    torch.manual_seed(2)
    net = nn.Sequential(conv(1, 4, 5), nn.ReLU(), nn.MaxPool2d(4), nn.Flatten(), lin(4 * 6 * 6, 10)).to(device)
    xt, yt, _, _ = data
    shared, report = swt.compress(net, loader(xt, yt), k=8, epochs=1)
    xt = xt.to(device)
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
    fresh = swt.load(nn.Sequential(conv(1, 4, 5), nn.ReLU(), nn.MaxPool2d(4), nn.Flatten(), lin(4 * 6 * 6, 10)).to(device), tmp_path / "m.swb")
    x = xt[:8]
    torch.manual_seed(5)
    a = shared(x)
    torch.manual_seed(5)
    assert torch.equal(a, fresh(x))


# The shared layer's fast paths (the KL per codebook entry times its count, one index_select
# per table) against the per-weight computation they replace.
def _reference_distribution(layer):
    """Every weight's ``(mu, sigma)`` the way the shared layer computed it before: the whole
    table gathered by advanced indexing."""
    cb = layer.shared_codebook
    cb_mu, cb_sigma = cb.mu, F.softplus(cb.rho)
    mus, sigmas = [cb_mu, layer.outlier_mu], [cb_sigma, F.softplus(layer.outlier_rho)]
    if layer.ellipse_alphas.shape[0] > 0:
        c, a = layer.ellipse_components, layer.ellipse_alphas
        m, s = cb_mu[c], cb_sigma[c]
        mean = (a * m).sum(1)
        var = (a * (s.square() + (m - mean[:, None]).square())).sum(1)
        mus.append(mean)
        sigmas.append(var.clamp_min(1e-30).sqrt())
    return torch.cat(mus)[layer.index].reshape(layer.shape), torch.cat(sigmas)[layer.index].reshape(layer.shape)


def _reference_kl(layer):
    """The layer's KL share the way it was computed before: ``kl_each`` per weight, summed."""
    from swbnn.torch._layers import kl_each

    pm, ps = layer.prior
    mu, sigma = _reference_distribution(layer)
    each = kl_each(mu.reshape(-1), sigma.reshape(-1), pm, ps)
    k, n_out = len(layer.shared_codebook), layer.outlier_mu.shape[0]
    outlier = (layer.index >= k) & (layer.index < k + n_out)
    kl = each[outlier].sum() + each[~outlier].sum() / layer.n_inliers_total
    if layer.bias_mu is not None:
        kl = kl + kl_each(layer.bias_mu, F.softplus(layer.bias_rho), pm, ps).sum()
    return kl


def _mixed_layer(device, kind="linear", shape=(48, 70), k=40, n_out=300, n_ell=25, seed=0):
    """A shared layer with plain-shared weights (on part of a codebook of ``k``: some entries
    unused), ``n_out`` outliers and ``n_ell`` ellipse weights (blends of 1 to 5 entries),
    whose model has more shared weights than it (``n_inliers_total``)."""
    from swbnn.torch._layers import MAX_BLEND, Codebook, SharedConv2d, SharedLinear, Spec

    g = torch.Generator().manual_seed(seed)
    n = int(np.prod(shape))
    perm = torch.randperm(n, generator=g)
    index = torch.randint(0, k - 5, (n,), generator=g)  # the last 5 entries unused here
    index[perm[:n_out]] = k + torch.arange(n_out)
    index[perm[n_out : n_out + n_ell]] = k + n_out + torch.arange(n_ell)
    comps = torch.randint(0, k, (n_ell, MAX_BLEND), generator=g)
    alphas = torch.rand(n_ell, MAX_BLEND, generator=g)
    for r in range(n_ell):  # 1..5 components, as the plan's padded rows
        alphas[r, 1 + r % MAX_BLEND :] = 0.0
        comps[r, 1 + r % MAX_BLEND :] = 0
    alphas = alphas / alphas.sum(1, keepdim=True)
    cb = Codebook(0.1 * torch.randn(k, generator=g), -4.0 + torch.randn(k, generator=g))
    cls = SharedLinear if kind == "linear" else SharedConv2d
    spec = Spec("bayesian-torch", kind, "mu_weight", "rho_weight", "mu_bias", "rho_bias", "rho", True)
    layer = cls(
        cb, True, shape, index, 0.3 * torch.randn(n_out, generator=g), -3.0 + torch.randn(n_out, generator=g),
        torch.full((n_out,), 2, dtype=torch.int8), comps, alphas,
        (0.1 * torch.randn(shape[0], generator=g), -4.0 + torch.randn(shape[0], generator=g)),
        spec, "test", (0.0, 0.1), n - n_out + 1000,
    )
    if kind == "conv2d":
        layer.set_geometry(1, 1, 1, 1)
    return layer.to(device)


def _grads(layer, loss):
    params = [p for p in layer.parameters()]
    return params, torch.autograd.grad(loss, params, allow_unused=True)


@pytest.mark.parametrize("kind,shape", [("linear", (48, 70)), ("conv2d", (16, 8, 3, 3))])
def test_fast_kl_equals_the_per_weight_kl(device, kind, shape):
    layer = _mixed_layer(device, kind, shape, n_out=200 if kind == "linear" else 60, n_ell=25)
    c = layer.counts()
    assert c["outliers"] > 0 and c["ellipses"] > 0 and c["shared"] > 0
    fast, ref = layer.kl_loss(), _reference_kl(layer)
    assert fast.device == ref.device and fast.device.type == device.type
    assert torch.allclose(fast, ref, rtol=1e-6, atol=0), (float(fast), float(ref))
    # The same gradients (codebook mu and rho, outliers, biases).
    params, g_fast = _grads(layer, layer.kl_loss())
    _, g_ref = _grads(layer, _reference_kl(layer))
    for p, a, b in zip(params, g_fast, g_ref):
        assert a is not None and b is not None
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7 * float(b.abs().max())), p.shape
    # The inlier part alone also matches (the outliers do not hide a mistake in it).
    with torch.no_grad():
        layer.outlier_mu.zero_()
    assert torch.allclose(layer.kl_loss(), _reference_kl(layer), rtol=1e-6, atol=0)


@pytest.mark.parametrize("kind,shape", [("linear", (48, 70)), ("conv2d", (16, 8, 3, 3))])
def test_fast_distribution_equals_the_per_weight_gather(device, kind, shape):
    layer = _mixed_layer(device, kind, shape, n_out=200 if kind == "linear" else 60, n_ell=25)
    mu, sigma = layer.distribution()
    mu_ref, sigma_ref = _reference_distribution(layer)
    assert mu.shape == sigma.shape == tuple(shape)
    assert torch.allclose(mu, mu_ref, rtol=1e-6, atol=0) and torch.allclose(sigma, sigma_ref, rtol=1e-6, atol=0)
    # The gradients of a weight sample on the same noise.
    eps = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(device)
    w_out = torch.randn(shape, generator=torch.Generator().manual_seed(2)).to(device)
    params, g_fast = _grads(layer, ((mu + sigma * eps) * w_out).sum())
    mu_ref, sigma_ref = _reference_distribution(layer)
    _, g_ref = _grads(layer, ((mu_ref + sigma_ref * eps) * w_out).sum())
    for p, a, b in zip(params, g_fast, g_ref):
        if b is None:  # the biases take no part in the weight distribution
            assert a is None
            continue
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6 * float(b.abs().max())), p.shape
    # A forward pass samples from that distribution: with sampling off it is the mean network.
    layer.sampling = False
    x = torch.randn((2, shape[1]) if kind == "linear" else (2, shape[1], 6, 6)).to(device)
    out, kl = layer(x)
    want = F.linear(x, mu_ref, layer.bias_mu) if kind == "linear" else F.conv2d(x, mu_ref, layer.bias_mu, 1, 1)
    assert torch.allclose(out, want, rtol=1e-5, atol=1e-6)
    assert torch.allclose(kl, _reference_kl(layer), rtol=1e-6, atol=0)


def test_the_index_buffers_follow_the_layer(device):
    """The index-derived buffers are not in the state dict, move with ``.to()``, survive a
    deep copy and follow a change of ``index``."""
    layer = _mixed_layer("cpu")
    keys = set(layer.state_dict())
    assert not any(k.startswith("_") for k in keys) and "index" in keys
    layer = layer.to(device)
    assert all(b.device.type == device.type for b in list(layer.buffers()) + list(layer.parameters()))
    twin = copy_of(layer)
    assert torch.allclose(twin.kl_loss(), _reference_kl(layer), rtol=1e-6, atol=0)
    with torch.no_grad():  # every weight onto codebook entry 3, in place
        layer.index.fill_(3)
    mu, _ = layer.distribution()
    assert torch.all(mu == layer.shared_codebook.mu[3])
    assert torch.allclose(layer.kl_loss(), _reference_kl(layer), rtol=1e-6, atol=0)
    assert layer.counts()["weights"] == layer.index.numel()


# Bad input: clear errors.
def test_no_bayesian_layers(data, device):
    xt, yt, _, _ = data
    with pytest.raises(ValueError, match="no Bayesian layers"):
        swt.compress(nn.Sequential(nn.Flatten(), nn.Linear(784, 10)).to(device), loader(xt, yt), k=4, epochs=0)


def test_unknown_library(data, device):
    class Mine(nn.Module):
        def __init__(self):
            super().__init__()
            self.mu_weight = nn.Parameter(torch.zeros(10, 784))
            self.rho_weight = nn.Parameter(torch.zeros(10, 784))

        def forward(self, x):
            return F.linear(x.flatten(1), self.mu_weight)

    xt, yt, _, _ = data
    with pytest.raises(ValueError, match=r"module `1` \(.*Mine\) has Bayesian parameters but is not a supported layer"):
        swt.compress(nn.Sequential(nn.Identity(), Mine()).to(device), loader(xt, yt), k=4, epochs=0)


def _mlp(device="cpu"):
    torch.manual_seed(3)
    return nn.Sequential(nn.Flatten(), BlitzLinear(784, 10)).to(device)


def test_loader_with_a_wrong_shape(data, device):
    xt, yt, _, _ = data
    with pytest.raises(ValueError, match=r"cannot run a batch of inputs \(64, 3, 28, 28\)"):
        swt.compress(_mlp(device), loader(xt.repeat(1, 3, 1, 1), yt), k=4, epochs=0)
    with pytest.raises(ValueError, match="one label per image"):
        swt.compress(_mlp(device), loader(xt, yt[:, None].repeat(1, 2)), k=4, epochs=0)
    with pytest.raises(TypeError, match=r"\(inputs, targets\) pairs"):
        swt.compress(_mlp(device), [xt[:8]], num_train=8, k=4, epochs=0)


def test_k_larger_than_the_inliers(data, device):
    xt, yt, _, _ = data
    # 7,840 weights: the plan refuses K = 30,000 (the layer-relative threshold leaves the count
    # of inliers to the plan).
    with pytest.raises(ValueError, match="needs at least K = 30000 inlier"):
        swt.compress(_mlp(device), loader(xt, yt), k=30_000, epochs=0)
    # With the paper's fixed threshold the count is known before the plan.
    with pytest.raises(ValueError, match="larger than the inlier"):
        swt.compress(_mlp(device), loader(xt, yt), k=30_000, epochs=0, config={"sharing": {"outliers": {"tau_sd": 0}}})


def test_nan_weights(data, device):
    xt, yt, _, _ = data
    m = _mlp(device)
    with torch.no_grad():
        m[1].weight_mu[3, 5] = float("nan")
    with pytest.raises(ValueError, match=r"module `1`: weight mu is not finite at index 2357"):
        swt.compress(m, loader(xt, yt), k=4, epochs=0)


def test_confidence_rule_needs_validation(data, device):
    xt, yt, _, _ = data
    with pytest.raises(ValueError, match="val_loader"):
        swt.compress(_mlp(device), loader(xt, yt), k=4, epochs=1, config={"retrain_stop": {"confidence-recovered": {}}})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda(trained_cpu, data):
    xt, yt, xv, yv = data
    import copy

    m = copy.deepcopy(trained_cpu).cuda()
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
        w = mu + sigma * fixed_noise(mu.numel()).reshape(mu.shape).to(mu.device)
        b = None
        if layer.bias_mu is not None:
            b = layer.bias_mu + F.softplus(layer.bias_rho) * fixed_noise(layer.bias_mu.numel()).to(mu.device)
        return w, b

    return sample


def test_command_line_swb_loads_into_bayesian_torch_lenet5(tmp_path, device):
    _bt()
    import json

    model = swt.load(BtLeNet5().to(device), _interop("lenet5-shared.swb"))
    case = json.loads(_interop("expected.json").read_text())["lenet5"]
    recorded = json.loads(_interop("shared-logits.json").read_text())
    x = torch.tensor(case["input"], dtype=torch.float32).reshape(case["input_shape"]).to(device)
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
    mean, fixed = mean.cpu(), fixed.cpu()
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
def test_command_line_swb_predicts_as_the_rust_model(fixture, net, shape, tmp_path, device):
    """swbnn.torch.load + predict in PyTorch against the Rust model's own prediction
    (swbnn.Model.predict, the code of `swbnn eval`) on the same file, made deterministic."""
    _bt()
    import swbnn

    src = {"lenet5": lambda: _interop("lenet5-shared.swb"), "tiny": lambda: DATA / "tiny.swb",
           "resnet20": lambda: DATA / "resnet20-w4-shared.swb"}[fixture]()
    path = _near_deterministic_copy(src, tmp_path / "m.swb")
    x = 4.0 * torch.randn(shape, generator=torch.Generator().manual_seed(3))
    rust = swbnn.load(path).predict(x.numpy(), samples=1, seed=0)
    model = swt.load(net().to(device), path).eval()
    with torch.no_grad():
        ours = F.softmax(model(x.to(device)), dim=1).cpu().numpy()
    np.testing.assert_allclose(ours, rust, rtol=0, atol=1e-5)
    # Not a trivial agreement: the predictions differ between images.
    assert np.abs(rust - rust[:1]).max() > 1e-4


def test_command_line_swb_into_another_architecture_names_the_module():
    _bt()
    with pytest.raises(ValueError, match=r"module `conv1` .* is not a Bayesian layer of the model"):
        swt.load(BtMlp(), _interop("lenet5-shared.swb"))


# The reverse: a .swb written in PyTorch for one of the command line's architectures, in the
# command line's format, which the Rust reader (swbnn.load, the loader of `swbnn eval`) reads.
R20_CONFIG = {"arch": "resnet20", "classes": 10, "in_channels": 1, "image_size": 28, "width": 4}


def _command_line_fixture(name):
    return {
        "lenet5": (lambda: _interop("lenet5-shared.swb"), BtLeNet5, (6, 1, 12, 12)),
        "tiny": (lambda: DATA / "tiny.swb", BtMlp, (6, 1, 8, 8)),
        "resnet20": (lambda: DATA / "resnet20-w4-shared.swb", BtResNet20, (6, 1, 28, 28)),
    }[name]


@pytest.mark.parametrize("fixture", ["lenet5", "tiny", "resnet20"])
def test_command_line_swb_saves_back_in_the_command_line_format(fixture, tmp_path, device):
    """load -> save gives back the file's content (read by the native reader) and its Rust
    predictions, without naming the config again: the loaded model remembers it."""
    _bt()
    import json

    import swbnn
    from swbnn import _native

    src, net, shape = _command_line_fixture(fixture)
    src = src()
    model = swt.load(net().to(device), src)
    back = tmp_path / "back.swb"
    sizes = swt.save(model, back)
    assert sizes["total"] == back.stat().st_size
    original, written = json.loads(_native.swb_load(str(src))), json.loads(_native.swb_load(str(back)))
    for key in original:
        assert written[key] == original[key], key
    if fixture == "resnet20":  # written by the current command line with the default options
        assert back.read_bytes() == src.read_bytes()
    x = 4.0 * torch.randn(shape, generator=torch.Generator().manual_seed(3))
    np.testing.assert_array_equal(
        swbnn.load(back).predict(x.numpy(), samples=4, seed=0),
        swbnn.load(src).predict(x.numpy(), samples=4, seed=0),
    )
    # command_line=False keeps the PyTorch format, which load() reads back as such.
    swt.save(model, tmp_path / "torch.swb", command_line=False)
    assert json.loads(json.loads(_native.swb_load(str(tmp_path / "torch.swb")))["arch"])["format"] == "swbnn-torch-v1"
    again = swt.load(net().to(device), tmp_path / "torch.swb")
    assert not hasattr(again, swt._file._REMEMBERED)


@pytest.mark.parametrize("fixture", ["lenet5", "tiny", "resnet20"])
def test_torch_edits_reach_the_rust_model(fixture, tmp_path, device):
    """A command-line model changed in PyTorch (codebook, outliers, biases, batch norm) and
    saved: the Rust model of the written file predicts as the PyTorch module (mean network)."""
    _bt()
    import swbnn

    src, net, shape = _command_line_fixture(fixture)
    src = src()
    model = swt.load(net().to(device), src).eval()
    g = torch.Generator().manual_seed(7)

    def noise(t):
        return 0.05 * torch.randn(t.shape, generator=g).to(t.device)

    layers = [m for _, m in swt._layers.shared_layers(model)]
    with torch.no_grad():
        layers[0].shared_codebook.mu.add_(noise(layers[0].shared_codebook.mu))
        for m in layers:
            m.outlier_mu.add_(noise(m.outlier_mu))
            if m.bias_mu is not None:
                m.bias_mu.add_(noise(m.bias_mu))
            m.sampling = False
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.add_(noise(m.running_mean))
                m.weight.mul_(1.1)
    path = tmp_path / "edited.swb"
    swt.save(model, path)
    x = 4.0 * torch.randn(shape, generator=torch.Generator().manual_seed(3))
    rust = swbnn.load(path).predict(x.numpy(), samples=1)  # one pass: the mean network
    with torch.no_grad():
        ours = F.softmax(model(x.to(device)), dim=1).cpu().numpy()
    np.testing.assert_allclose(ours, rust, rtol=0, atol=1e-5)
    # Not the original file's predictions: the edits were written.
    assert np.abs(swbnn.load(src).predict(x.numpy(), samples=1) - rust).max() > 1e-3


@pytest.fixture(scope="module")
def torch_resnet20(device):
    """The bayesian-torch ResNet-20 of the fixture, compressed in PyTorch (no command line)."""
    _bt()
    torch.manual_seed(0)
    net = random_batch_norm(BtResNet20()).eval().to(device)
    x, y = images(128)
    shared, _ = swt.compress(net, loader(x, y), k=8, epochs=0)
    return shared.eval(), x[:16]


def test_torch_compressed_resnet20_loads_in_rust(torch_resnet20, tmp_path, device):
    import swbnn

    shared, x = torch_resnet20
    path = tmp_path / "r20.swb"
    swt.save(shared, path, command_line=R20_CONFIG)
    rust = swbnn.load(path)
    info = rust.info()["config"]
    assert (info["arch"], info["kind"], info["codebook_len"], info["width"]) == ("resnet20", "shared", len(shared.conv1.shared_codebook), 4)
    for _, m in swt._layers.shared_layers(shared):
        m.sampling = False
    try:
        with torch.no_grad():
            ours = F.softmax(shared(x.to(device)), dim=1).cpu().numpy()
    finally:
        for _, m in swt._layers.shared_layers(shared):
            m.sampling = True
    np.testing.assert_allclose(ours, rust.predict(x.numpy(), samples=1), rtol=0, atol=1e-5)
    # The file loads back into PyTorch with the same tensors and remembers the config.
    fresh = swt.load(BtResNet20().to(device), path)
    for (p, a), (_, b) in zip(swt._layers.shared_layers(shared), swt._layers.shared_layers(fresh)):
        assert torch.equal(a.index, b.index) and torch.equal(a.outlier_mu, b.outlier_mu), p
    swt.save(fresh, tmp_path / "again.swb")
    assert (tmp_path / "again.swb").read_bytes() == path.read_bytes()


def test_command_line_config_mismatch_names_the_module(torch_resnet20, tmp_path):
    shared, _ = torch_resnet20
    path = tmp_path / "bad.swb"
    with pytest.raises(ValueError, match=r"module `linear`: weight shape \[10, 16\] in the model, \[5, 16\] in the resnet20"):
        swt.save(shared, path, command_line=dict(R20_CONFIG, classes=5))
    with pytest.raises(ValueError, match=r"module `conv1`: weight shape \[4, 1, 3, 3\] in the model, \[4, 3, 3, 3\]"):
        swt.save(shared, path, command_line=dict(R20_CONFIG, in_channels=3))
    # Option-A shortcuts have no projection: the model's is a module the architecture lacks.
    with pytest.raises(ValueError, match=r"module `layer2\.0\.shortcut\.0` of the model is not in the resnet20 architecture"):
        swt.save(shared, path, command_line=dict(R20_CONFIG, shortcut="zero-pad"))
    with pytest.raises(ValueError, match=r"module `layers\.0` of the mlp architecture .* is not a weight-shared layer of the model"):
        swt.save(shared, path, command_line=dict(R20_CONFIG, arch="mlp"))
    with pytest.raises(ValueError, match=r"'colour' is no ModelConfig key"):
        swt.save(shared, path, command_line=dict(R20_CONFIG, colour=True))
    with pytest.raises(ValueError, match=r"architecture 'vit-tiny' has no PyTorch names"):
        swt.save(shared, path, command_line=dict(R20_CONFIG, arch="vit-tiny"))
    assert not path.exists()


@pytest.mark.parametrize(
    "config",
    [
        {"arch": "mlp", "classes": 3, "in_channels": 2, "image_size": 5, "mlp_hidden": [7, 4]},
        {"arch": "lenet5", "classes": 4, "in_channels": 3, "image_size": 28},
        {"arch": "resnet20", "classes": 5, "in_channels": 1, "image_size": 12, "width": 2, "shortcut": "zero-pad"},
        {"arch": "resnet18", "classes": 5, "in_channels": 3, "image_size": 16, "width": 2},
        {"arch": "resnet18", "classes": 5, "in_channels": 3, "image_size": 80, "width": 1},
        {"arch": "resnet50", "classes": 3, "in_channels": 1, "image_size": 16, "width": 1, "cifar_stem": False},
        {"arch": "resnet101", "classes": 3, "in_channels": 1, "image_size": 16, "width": 1},
    ],
    ids=["mlp", "lenet5", "resnet20-zero-pad", "resnet18", "resnet18-imagenet-stem", "resnet50", "resnet101"],
)
def test_command_line_layout_is_the_rust_architecture(config, tmp_path):
    """save()'s list of the architecture's layers and tensors (names, shapes, order) is the
    Rust model's: the Rust reader, which refuses any other, loads a file built from it."""
    import json

    import swbnn
    from swbnn import _native

    cfg = swt._file._full_config(config, 1)
    layers, unshared = [], []
    for e in swt._file._command_line_layout(cfg):
        if e[0] == "bn":
            unshared += [{"path": f"body.{e[1]}.{n}", "shape": [e[2]], "data": [1.0] * e[2]} for n in ("gamma", "beta", "running_mean", "running_var")]
            continue
        layers.append({"path": f"body.{e[1]}.weight", "shape": e[2]})
        if e[3]:
            n = e[2][1] if e[0] == "dense" else e[2][0]
            unshared += [{"path": f"body.{e[1]}.bias_{s}", "shape": [n], "data": [0.0] * n} for s in ("mu", "rho")]
    n = sum(int(np.prod(l["shape"])) for l in layers)
    data = {
        "arch": json.dumps(cfg), "codebook_mu": [0.01], "codebook_rho": [-5.0], "layers": layers,
        "fates": [{"Shared": 0}] * n, "ellipses": [], "outlier_mu": [], "outlier_rho": [], "outlier_causes": [],
        "unshared": unshared, "temperature": None,
    }
    _native.swb_save(str(tmp_path / "m.swb"), json.dumps(data), True, False)
    model = swbnn.load(tmp_path / "m.swb")
    s = config["image_size"]
    probs = model.predict(np.zeros((2, config["in_channels"], s, s), np.float32), samples=1)
    assert probs.shape == (2, config["classes"])


# Regression: a bayesian-torch network with a Gaussian head.
def _regression_data(n, seed):
    """Rows of two features and a heteroscedastic target, ``y = 3 x1 - 2 x2 + (0.2 + 0.5 |x1|) e``."""
    g = torch.Generator().manual_seed(seed)
    x = 4 * torch.rand(n, 2, generator=g) - 2
    y = 3 * x[:, 0] - 2 * x[:, 1] + (0.2 + 0.5 * x[:, 0].abs()) * torch.randn(n, generator=g)
    return x, y


def _gaussian_nll(out, y):
    t = out.shape[1] // 2
    mean, std = out[:, :t], F.softplus(out[:, t:]) + 1e-3
    return (std.log() + 0.5 * ((y[:, None] - mean) / std) ** 2).sum(1).mean() + 0.9189385332 * t


def test_a_bayesian_torch_regression_network_compresses_with_a_gaussian_likelihood(device):
    """``likelihood="gaussian"``: the outputs are read as the Rust Gaussian head's (means, then
    the spreads' raw values), stage 3 trains on the Gaussian NLL, and the stop rule compares
    predictive spreads; the compressed network keeps a finite, close NLL."""
    bt = _bt()
    from bayesian_torch.models.dnn_to_bnn import dnn_to_bnn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 2))
    dnn_to_bnn(model, {"prior_mu": 0.0, "prior_sigma": 0.1, "posterior_mu_init": 0.0,
                       "posterior_rho_init": -5.0, "type": "Reparameterization", "moped_enable": False})
    assert bt is not None
    model = model.to(device)
    x, y = _regression_data(1024, 1)
    xv, yv = _regression_data(256, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        for xb, yb in loader(x, y, batch=128, shuffle=True):
            xb, yb = xb.to(device), yb.to(device)
            loss = _gaussian_nll(model(xb), yb) + sum(m.kl_loss() for m in model if hasattr(m, "kl_loss")) / len(x)
            opt.zero_grad()
            loss.backward()
            opt.step()

    def nll(m):
        m.eval()
        with torch.no_grad():
            return float(_gaussian_nll(m(xv.to(device)), yv.to(device)))

    before = nll(model)
    snapped, _ = swt.compress(model, loader(x, y, batch=128), k=8, epochs=0, likelihood="gaussian")
    shared, report = swt.compress(model, loader(x, y, batch=128), val_loader=loader(xv, yv, batch=128),
                                  k=8, epochs=20, likelihood="gaussian")
    assert report.config["likelihood"] == "gaussian"
    assert report.total["params_after"] < report.total["params_before"]
    # The stop rule's confidence of a regression network is minus its validation NLL: the
    # snapped network's starts below the BNN's, and retraining on the Gaussian NLL raises it.
    checks = [c["confidence"] for c in report.stop["checks"]]
    assert checks[0] < report.stop["source_confidence"] < 0
    assert max(checks) > checks[0]
    after, unretrained = nll(shared), nll(snapped)
    assert np.isfinite(after) and before < after < unretrained, (before, after, unretrained)
    # Labels where targets belong, and outputs of the wrong width, are named.
    with pytest.raises(ValueError, match="float tensor"):
        swt.compress(model, loader(x, y.long()), k=4, epochs=0, likelihood="gaussian")
    with pytest.raises(ValueError, match=r"Gaussian head needs \[batch, 4\]"):
        swt.compress(model, loader(x, torch.stack([y, y], 1)), k=4, epochs=0, likelihood="gaussian")
    with pytest.raises(ValueError, match="likelihood must be"):
        swt.compress(model, loader(x, y), k=4, epochs=0, likelihood="poisson")
