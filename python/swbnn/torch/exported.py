"""Run a weight-shared (2DGBNN) model exported by `swbnn export --convention shared` in PyTorch.

``swbnn.torch.exported`` (formerly ``interop/torch/swbnn_shared.py``, which now re-exports
this module). One file, no dependency beyond torch and safetensors (imported on first use). It samples the model as swbnn does:
every weight takes its Gaussian from the table `[codebook | the layer's outliers | the layer's
ellipse weights]` through its index, an ellipse weight being the moment-matched blend
`m = sum a_j mu_j`, `s^2 = sum a_j (sigma_j^2 + (mu_j - m)^2)` of its codebook entries; each
forward pass draws one weight sample `w = mu + sigma * eps` per weight (and per bias) for the
whole batch (the reparameterisation estimator). swbnn's Flipout and local-reparameterisation
estimators give the same predictive distribution with other draws.

    import torch
    from swbnn.torch import exported
    model = exported.load("model-shared.safetensors")
    probs = model.predict(images, samples=30)   # MC mean of the softmax, [batch, classes]
    logits = model(images)                      # one weight sample
    logits = model(images, noise="mean")        # the mean network

`images` are normalised as swbnn normalises them (the data set's mean and std per channel).
Architectures: LeNet-5, the MLP and the ResNets (18/20/50/101, either shortcut).
"""

import json

import torch
import torch.nn as nn
import torch.nn.functional as F

FORMAT = "swbnn-shared-v1"
BN_EPS = 1e-5


def fixed_noise(n):
    """The tests' fixed noise: eps_j = ((7919 j + 13) mod 2003) / 1001 - 1, as float32."""
    j = torch.arange(n, dtype=torch.float64)
    return (torch.remainder(j * 7919 + 13, 2003) / 1001.0 - 1.0).to(torch.float32)


def load(path, device="cpu"):
    """Reads an export of `swbnn export --convention shared` into a `SharedModel`."""
    from safetensors import safe_open

    tensors = {}
    with safe_open(path, framework="pt", device=device) as f:
        meta = f.metadata() or {}
        for k in f.keys():
            tensors[k] = f.get_tensor(k)
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    return SharedModel(json.loads(meta["config"]), tensors)


class SharedModel(nn.Module):
    """A weight-shared Bayesian network; `forward(x, noise)` draws one weight sample."""

    def __init__(self, config, tensors):
        super().__init__()
        self.config = config
        self.arch = config["arch"]
        # Keys contain dots: keep them in a dict of buffers under escaped names.
        self._names = {}
        for k, v in tensors.items():
            name = k.replace(".", "__")
            self._names[k] = name
            self.register_buffer(name, v)

    def _t(self, key):
        name = self._names.get(key)
        return None if name is None else getattr(self, name)

    def has(self, key):
        return key in self._names

    def distribution(self, layer):
        """Per-weight (mu, sigma) of `layer`'s weight, in PyTorch's weight shape."""
        cb_mu, cb_sigma = self._t("codebook.mu"), self._t("codebook.sigma")
        mus, sigmas = [cb_mu], [cb_sigma]
        if self.has(f"{layer}.weight.outlier_mu"):
            mus.append(self._t(f"{layer}.weight.outlier_mu"))
            sigmas.append(self._t(f"{layer}.weight.outlier_sigma"))
        if self.has(f"{layer}.weight.ellipse_components"):
            c = self._t(f"{layer}.weight.ellipse_components").long()
            a = self._t(f"{layer}.weight.ellipse_alphas")
            m, s = cb_mu[c], cb_sigma[c]
            mean = (a * m).sum(1)
            var = (a * (s.square() + (m - mean[:, None]).square())).sum(1)
            mus.append(mean)
            sigmas.append(var.clamp_min(1e-30).sqrt())
        index = self._t(f"{layer}.weight.index").long()
        return torch.cat(mus)[index], torch.cat(sigmas)[index]

    def _draw(self, mu, sigma, noise):
        if noise == "mean":
            return mu
        if noise == "fixed":
            eps = fixed_noise(mu.numel()).reshape(mu.shape).to(mu.device)
        elif noise == "sample":
            eps = torch.randn_like(mu)
        else:
            raise ValueError(f"noise {noise!r}: sample, mean or fixed")
        return mu + sigma * eps

    def _params(self, layer, noise):
        w = self._draw(*self.distribution(layer), noise)
        b = None
        if self.has(f"{layer}.bias.mu"):
            b = self._draw(self._t(f"{layer}.bias.mu"), self._t(f"{layer}.bias.sigma"), noise)
        return w, b

    def _conv(self, layer, x, noise, stride=1, padding=None):
        w, b = self._params(layer, noise)
        if padding is None:
            padding = w.shape[-1] // 2
        return F.conv2d(x, w, b, stride=stride, padding=padding)

    def _linear(self, layer, x, noise):
        w, b = self._params(layer, noise)
        return F.linear(x, w, b)

    def _bn(self, name, x):
        return F.batch_norm(
            x,
            self._t(f"{name}.running_mean"),
            self._t(f"{name}.running_var"),
            self._t(f"{name}.weight"),
            self._t(f"{name}.bias"),
            training=False,
            eps=BN_EPS,
        )

    def forward(self, x, noise="sample"):
        """Logits for `x` ([batch, channels, h, w]); `noise`: sample, mean or fixed."""
        if self.arch == "lenet5":
            x = F.max_pool2d(F.relu(self._conv("conv1", x, noise, padding=2)), 2)
            x = F.max_pool2d(F.relu(self._conv("conv2", x, noise, padding=0)), 2)
            x = x.flatten(1)
            x = F.relu(self._linear("fc1", x, noise))
            x = F.relu(self._linear("fc2", x, noise))
            return self._linear("fc3", x, noise)
        if self.arch == "mlp":
            x = x.flatten(1)
            n = len(self.config.get("mlp_hidden", [])) + 1
            for i in range(n):
                x = self._linear(f"layers.{i}", x, noise)
                if i + 1 < n:
                    x = F.relu(x)
            return x
        if self.arch.startswith("resnet"):
            return self._resnet(x, noise)
        raise ValueError(f"architecture {self.arch!r} is not supported here")

    def _resnet(self, x, noise):
        cfg = self.config
        cifar_stem = cfg.get("cifar_stem")
        if cifar_stem is None:
            cifar_stem = cfg["image_size"] <= 64
        if self.arch == "resnet20":
            cifar_stem = True
        if cifar_stem:
            h = self._conv("conv1", x, noise, stride=1, padding=1)
        else:
            h = self._conv("conv1", x, noise, stride=2, padding=3)
        h = F.relu(self._bn("bn1", h))
        if not cifar_stem:
            h = F.max_pool2d(h, 3, stride=2, padding=1)
        zero_pad = cfg.get("shortcut") == "zero-pad"
        ds = "shortcut" if self.arch == "resnet20" else "downsample"
        stage = 1
        while self.has(f"layer{stage}.0.conv1.weight.index"):
            b = 0
            while self.has(f"layer{stage}.{b}.conv1.weight.index"):
                p = f"layer{stage}.{b}"
                stride = 2 if stage > 1 and b == 0 else 1
                bottleneck = self.has(f"{p}.conv3.weight.index")
                if self.has(f"{p}.{ds}.0.weight.index"):
                    identity = self._bn(f"{p}.{ds}.1", self._conv(f"{p}.{ds}.0", h, noise, stride, 0))
                else:
                    last = f"{p}.conv3" if bottleneck else f"{p}.conv2"
                    out_c = self._t(f"{last}.weight.index").shape[0]
                    if zero_pad and (stride != 1 or out_c != h.shape[1]):
                        # Option A: subsample by the stride, zero channels on both sides.
                        pad = (out_c - h.shape[1]) // 2
                        identity = F.pad(h[:, :, ::stride, ::stride], (0, 0, 0, 0, pad, pad))
                    else:
                        identity = h
                if bottleneck:
                    o = F.relu(self._bn(f"{p}.bn1", self._conv(f"{p}.conv1", h, noise, 1, 0)))
                    o = F.relu(self._bn(f"{p}.bn2", self._conv(f"{p}.conv2", o, noise, stride, 1)))
                    o = self._bn(f"{p}.bn3", self._conv(f"{p}.conv3", o, noise, 1, 0))
                else:
                    o = F.relu(self._bn(f"{p}.bn1", self._conv(f"{p}.conv1", h, noise, stride, 1)))
                    o = self._bn(f"{p}.bn2", self._conv(f"{p}.conv2", o, noise, 1, 1))
                h = F.relu(o + identity)
                b += 1
            stage += 1
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        head = "linear" if self.arch == "resnet20" else "fc"
        return self._linear(head, h, noise)

    @torch.no_grad()
    def predict(self, x, samples=30):
        """Monte Carlo mean of the softmax over `samples` weight samples."""
        return torch.stack([F.softmax(self(x), dim=1) for _ in range(samples)]).mean(0)
