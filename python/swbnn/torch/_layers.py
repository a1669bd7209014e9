"""Bayesian layers of the supported PyTorch libraries, and their weight-shared replacements."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

#: Most codebook entries an ellipse weight blends (the paper's k = 5).
MAX_BLEND = 5


def softplus_inv(sigma: torch.Tensor) -> torch.Tensor:
    """``rho`` with ``log1p(exp(rho)) == sigma`` (stable for small and large sigma)."""
    return sigma + torch.log(-torch.expm1(-sigma))


def sigma_of_rho(rho: torch.Tensor) -> torch.Tensor:
    """``sigma = softplus(rho) = log1p(exp(rho))``, as bayesian-torch and blitz compute it."""
    return F.softplus(rho)


@dataclass(frozen=True)
class Spec:
    """How one library's Bayesian layer class stores its parameters."""

    library: str
    kind: str  # "linear" or "conv2d"
    weight_mu: str
    weight_scale: str
    bias_mu: str
    bias_scale: str
    scale: str  # "rho" (sigma = softplus) or "log_sigma" (sigma = exp)
    returns_kl: bool  # forward returns (out, kl)


_BT_LIN = ("mu_weight", "rho_weight", "mu_bias", "rho_bias")
_BT_CONV = ("mu_kernel", "rho_kernel", "mu_bias", "rho_bias")
_BLITZ = ("weight_mu", "weight_rho", "bias_mu", "bias_rho")
_TBNN = ("weight_mu", "weight_log_sigma", "bias_mu", "bias_log_sigma")

#: (library module prefix, class name) -> spec.
SPECS = {
    ("bayesian_torch", "LinearReparameterization"): Spec("bayesian-torch", "linear", *_BT_LIN, "rho", True),
    ("bayesian_torch", "LinearFlipout"): Spec("bayesian-torch", "linear", *_BT_LIN, "rho", True),
    ("bayesian_torch", "Conv2dReparameterization"): Spec("bayesian-torch", "conv2d", *_BT_CONV, "rho", True),
    ("bayesian_torch", "Conv2dFlipout"): Spec("bayesian-torch", "conv2d", *_BT_CONV, "rho", True),
    ("blitz", "BayesianLinear"): Spec("blitz", "linear", *_BLITZ, "rho", False),
    ("blitz", "BayesianConv2d"): Spec("blitz", "conv2d", *_BLITZ, "rho", False),
    ("torchbnn", "BayesLinear"): Spec("torchbnn", "linear", *_TBNN, "log_sigma", False),
    ("torchbnn", "BayesConv2d"): Spec("torchbnn", "conv2d", *_TBNN, "log_sigma", False),
}

LIBRARIES = ("bayesian_torch", "blitz", "torchbnn")

# Parameter names that mark a module as Bayesian (its own, not its children's).
_BAYES_NAMES = {n for s in SPECS.values() for n in (s.weight_mu, s.weight_scale)} | {
    "mu_weight_ih", "weight_sigma", "log_sigma_weight",
}


def spec_of(module: nn.Module) -> Optional[Spec]:
    """The spec of a supported Bayesian layer, ``None`` for any other module."""
    cls = type(module)
    root = cls.__module__.split(".")[0]
    spec = SPECS.get((root, cls.__name__))
    if spec is None:
        return None
    if getattr(module, spec.weight_mu, None) is None or getattr(module, spec.weight_scale, None) is None:
        return None
    return spec


def looks_bayesian(module: nn.Module) -> bool:
    """Whether a module that is no supported layer holds Bayesian parameters of its own."""
    if isinstance(module, SharedLayer):
        return False
    cls = type(module)
    if cls.__module__.split(".")[0] in LIBRARIES:
        own = [n for n, _ in module.named_parameters(recurse=False)]
        if any("mu" in n or "rho" in n or "sigma" in n for n in own):
            return True
    for n, _ in module.named_parameters(recurse=False):
        if n in _BAYES_NAMES or n.endswith("_rho") or n.startswith("rho_") or n.endswith("log_sigma"):
            return True
    return False


@dataclass
class Found:
    """A Bayesian layer found in a model."""

    path: str
    module: nn.Module
    spec: Spec

    def weight(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """Detached ``(mu, sigma)`` of the weight, float32."""
        return _mu_sigma(self.module, self.spec, self.spec.weight_mu, self.spec.weight_scale)

    def bias(self) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        if getattr(self.module, self.spec.bias_mu, None) is None:
            return None
        return _mu_sigma(self.module, self.spec, self.spec.bias_mu, self.spec.bias_scale)

    def mu_param(self) -> torch.Tensor:
        return getattr(self.module, self.spec.weight_mu)

    def sigma_live(self, name: str) -> torch.Tensor:
        """sigma of parameter ``name`` with gradients."""
        s = getattr(self.module, name)
        return torch.exp(s) if self.spec.scale == "log_sigma" else sigma_of_rho(s)


def _mu_sigma(module, spec, mu_name, scale_name):
    mu = getattr(module, mu_name).detach().float()
    s = getattr(module, scale_name).detach().float()
    sigma = torch.exp(s) if spec.scale == "log_sigma" else sigma_of_rho(s)
    return mu, sigma


def find_layers(model: nn.Module) -> List[Found]:
    """The model's Bayesian layers in module order (not descending into them). A module that
    holds Bayesian parameters but is no supported layer is an error naming its path."""
    found: List[Found] = []
    skip: List[str] = []
    for path, m in model.named_modules():
        if any(path == s or path.startswith(s + ".") for s in skip):
            continue
        if isinstance(m, SharedLayer):
            raise ValueError(
                f"module `{path or '<root>'}` is already weight-shared (swbnn.torch); "
                "compress the original Bayesian model"
            )
        spec = spec_of(m)
        if spec is not None:
            if path == "":
                raise ValueError(
                    "the model itself is a Bayesian layer; wrap it in a module (e.g. nn.Sequential)"
                )
            found.append(Found(path, m, spec))
            skip.append(path)
        elif looks_bayesian(m):
            cls = type(m)
            raise ValueError(
                f"module `{path or '<root>'}` ({cls.__module__}.{cls.__name__}) has Bayesian "
                "parameters but is not a supported layer; supported: bayesian-torch "
                "LinearReparameterization/LinearFlipout/Conv2dReparameterization/Conv2dFlipout, "
                "blitz BayesianLinear/BayesianConv2d, torchbnn BayesLinear/BayesConv2d"
            )
    return found


def kl_each(mu: torch.Tensor, sigma: torch.Tensor, prior_mu: float, prior_sigma: float) -> torch.Tensor:
    """``KL(N(mu, sigma^2) || N(prior_mu, prior_sigma^2))`` per element (bnn-layers' formula)."""
    var_p = prior_sigma * prior_sigma
    return (sigma.square() + (mu - prior_mu).square()) / (2.0 * var_p) - torch.log(sigma) + (
        math.log(prior_sigma) - 0.5
    )


class Codebook(nn.Module):
    """The K shared Gaussians ``(mu_k, rho_k)``, ``sigma_k = softplus(rho_k)``."""

    def __init__(self, mu: torch.Tensor, rho: torch.Tensor) -> None:
        super().__init__()
        self.mu = nn.Parameter(mu.detach().clone().float())
        self.rho = nn.Parameter(rho.detach().clone().float())

    def __len__(self) -> int:
        return int(self.mu.shape[0])

    def forward(self):  # pragma: no cover - not a layer
        raise RuntimeError("the codebook is not a layer")


class SharedLayer(nn.Module):
    """A Bayesian layer whose weights take their Gaussian from a shared :class:`Codebook`
    (index ``< K``), their own ``(outlier_mu, outlier_rho)`` or a fixed alpha-blend of codebook
    entries (ellipse weights: ``m = sum a_j mu_j``, ``s^2 = sum a_j (sigma_j^2 + (mu_j - m)^2)``).
    Biases stay per-weight Bayesian. Every forward pass draws one weight sample for the batch.

    Its call signature and return value are those of the layer it replaced: bayesian-torch
    layers return ``(out, kl)`` (``out`` alone with ``return_kl=False`` or after
    ``dnn_to_bnn``), blitz and torchbnn layers ``out``. ``kl`` is the layer's share of the
    mixture KL (see :meth:`kl_loss`); ``kl_loss()`` exists for ``get_kl_loss``-style loops.
    """

    def __init__(
        self,
        codebook: Codebook,
        own_codebook: bool,
        shape: Tuple[int, ...],
        index: torch.Tensor,
        outlier_mu: torch.Tensor,
        outlier_rho: torch.Tensor,
        outlier_causes: torch.Tensor,
        ellipse_components: torch.Tensor,
        ellipse_alphas: torch.Tensor,
        bias: Optional[Tuple[torch.Tensor, torch.Tensor]],
        spec: Spec,
        source_class: str,
        prior: Tuple[float, float],
        n_inliers_total: int,
    ) -> None:
        super().__init__()
        if own_codebook:
            self.codebook = codebook
        else:
            object.__setattr__(self, "_codebook_ref", codebook)
        self.shape = tuple(int(s) for s in shape)
        self.register_buffer("index", index.long())
        self.outlier_mu = nn.Parameter(outlier_mu.float())
        self.outlier_rho = nn.Parameter(outlier_rho.float())
        self.register_buffer("outlier_causes", outlier_causes.to(torch.int8))
        self.register_buffer("ellipse_components", ellipse_components.long().reshape(-1, MAX_BLEND))
        self.register_buffer("ellipse_alphas", ellipse_alphas.float().reshape(-1, MAX_BLEND))
        if bias is not None:
            self.bias_mu = nn.Parameter(bias[0].float())
            self.bias_rho = nn.Parameter(bias[1].float())
        else:
            self.bias_mu = None
            self.bias_rho = None
        self.spec = spec
        self.source_class = source_class
        self.prior = prior
        self.n_inliers_total = max(int(n_inliers_total), 1)
        self.sampling = True
        self.dnn_to_bnn_flag = False
        self._derive()

    def _derive(self) -> None:
        """Buffers that depend only on ``index`` and the table's layout, computed once (not
        at each forward pass) and kept out of the state dict: the flat index, and for the KL
        the table entries the layer's weights use with their counts, split into outlier
        entries and shared (plain or ellipse) ones. They move with ``.to(device)``, and are
        derived again before the next use when ``index`` changes (in place or replaced) or the
        table's layout does (codebook size, number of outliers or ellipse weights)."""
        k = len(self.shared_codebook)
        n_out = int(self.outlier_mu.shape[0])
        t = k + n_out + int(self.ellipse_alphas.shape[0])
        flat = self.index.reshape(-1)
        if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= t):
            raise ValueError(
                f"shared layer: index values must lie in 0..{t - 1} (K = {k}, {n_out} outliers, "
                f"{t - k - n_out} ellipse weights), got {int(flat.min())}..{int(flat.max())}"
            )
        counts = torch.bincount(flat, minlength=t)
        used = counts.nonzero().reshape(-1)
        outlier = (used >= k) & (used < k + n_out)
        persistent = False
        self.register_buffer("_flat_index", flat.contiguous(), persistent=persistent)
        self.register_buffer("_kl_outlier_entries", used[outlier].contiguous(), persistent=persistent)
        # Counts stay integers (exact whatever dtype the layer is cast to).
        self.register_buffer("_kl_outlier_counts", counts[used[outlier]], persistent=persistent)
        self.register_buffer("_kl_shared_entries", used[~outlier].contiguous(), persistent=persistent)
        self.register_buffer("_kl_shared_counts", counts[used[~outlier]], persistent=persistent)
        self._derived = self._key()

    @property
    def shared_codebook(self) -> Codebook:
        cb = self._modules.get("codebook")
        return cb if cb is not None else self.__dict__["_codebook_ref"]

    def _key(self) -> tuple:
        i = self.index
        try:
            version = i._version
        except RuntimeError:  # an inference tensor tracks no version
            version = -1
        return (i.data_ptr(), version, tuple(i.shape), i.device, len(self.shared_codebook),
                int(self.outlier_mu.shape[0]), int(self.ellipse_alphas.shape[0]))

    def _fresh(self) -> None:
        """Re-derives the index buffers if ``index`` or the table's layout changed since."""
        if self._derived != self._key():
            self._derive()

    def table(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(mu, sigma)`` of the layer's table, with gradients: the K codebook entries, the
        layer's outliers, then its ellipse weights' blends (``index`` points into it).
        ``softplus`` runs on these entries, not on every weight."""
        cb = self.shared_codebook
        cb_mu, cb_sigma = cb.mu, sigma_of_rho(cb.rho)
        mus, sigmas = [cb_mu, self.outlier_mu], [cb_sigma, sigma_of_rho(self.outlier_rho)]
        if self.ellipse_alphas.shape[0] > 0:
            c, a = self.ellipse_components, self.ellipse_alphas
            m, s = cb_mu[c], cb_sigma[c]
            mean = (a * m).sum(1)
            var = (a * (s.square() + (m - mean[:, None]).square())).sum(1)
            mus.append(mean)
            sigmas.append(var.clamp_min(1e-30).sqrt())
        return torch.cat(mus), torch.cat(sigmas)

    def distribution(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """Per-weight ``(mu, sigma)`` in the weight's shape, with gradients."""
        self._fresh()
        mu_t, sigma_t = self.table()
        mu = mu_t.index_select(0, self._flat_index).reshape(self.shape)
        sigma = sigma_t.index_select(0, self._flat_index).reshape(self.shape)
        return mu, sigma

    def _sample(self) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        mu, sigma = self.distribution()
        w = torch.addcmul(mu, sigma, torch.randn_like(mu)) if self.sampling else mu
        b = None
        if self.bias_mu is not None:
            b = self.bias_mu
            if self.sampling:
                b = b + sigma_of_rho(self.bias_rho) * torch.randn_like(b)
        return w, b

    def kl_loss(self) -> torch.Tensor:
        """This layer's share of the paper's mixture KL: its outliers' and biases' own KL, plus
        its shared (plain and ellipse) weights' KL divided by the number of shared weights of
        the whole model; the shares of all layers add up to the model's KL.

        The KL of a weight depends only on the table entry it points to, so it is computed
        once per used entry and weighted by the entry's count of weights (the same sum as
        over the weights, to float rounding; the same gradients)."""
        self._fresh()
        pm, ps = self.prior
        mu_t, sigma_t = self.table()
        o, s = self._kl_outlier_entries, self._kl_shared_entries
        kl_out = kl_each(mu_t.index_select(0, o), sigma_t.index_select(0, o), pm, ps)
        kl_sh = kl_each(mu_t.index_select(0, s), sigma_t.index_select(0, s), pm, ps)
        kl_out = kl_out * self._kl_outlier_counts.to(kl_out.dtype)
        kl_sh = kl_sh * self._kl_shared_counts.to(kl_sh.dtype)
        kl = kl_out.sum() + kl_sh.sum() / self.n_inliers_total
        if self.bias_mu is not None:
            kl = kl + kl_each(self.bias_mu, sigma_of_rho(self.bias_rho), pm, ps).sum()
        return kl

    def _out(self, out: torch.Tensor, return_kl: bool):
        if self.spec.returns_kl and return_kl and not self.dnn_to_bnn_flag:
            return out, self.kl_loss()
        return out

    def counts(self) -> dict:
        k = len(self.shared_codebook)
        n = int(self.index.numel())
        n_out = int(self.outlier_mu.shape[0])
        n_ell = int(self.ellipse_alphas.shape[0])
        return {"weights": n, "outliers": n_out, "ellipses": n_ell, "shared": n - n_out - n_ell, "k": k}


class SharedLinear(SharedLayer):
    """Weight-shared dense layer (weight ``[out, in]``)."""

    def forward(self, input: torch.Tensor, return_kl: bool = True):
        w, b = self._sample()
        return self._out(F.linear(input, w, b), return_kl)

    def extra_repr(self) -> str:
        return f"in_features={self.shape[1]}, out_features={self.shape[0]}, from={self.source_class}"


class SharedConv2d(SharedLayer):
    """Weight-shared 2-D convolution (weight ``[out, in / groups, kh, kw]``)."""

    def set_geometry(self, stride, padding, dilation, groups, padding_mode="zeros") -> "SharedConv2d":
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.padding_mode = padding_mode
        return self

    def forward(self, input: torch.Tensor, return_kl: bool = True):
        w, b = self._sample()
        x = input
        padding = self.padding
        if self.padding_mode != "zeros" and not isinstance(padding, str):
            p = _pair(padding)
            x = F.pad(x, (p[1], p[1], p[0], p[0]), mode=self.padding_mode)
            padding = 0
        out = F.conv2d(x, w, b, self.stride, padding, self.dilation, self.groups)
        return self._out(out, return_kl)

    def extra_repr(self) -> str:
        return (
            f"{self.shape[1] * self.groups}, {self.shape[0]}, kernel_size={tuple(self.shape[2:])}, "
            f"stride={self.stride}, padding={self.padding}, from={self.source_class}"
        )


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def conv_geometry(module: nn.Module) -> dict:
    """stride, padding, dilation, groups, padding_mode of a Bayesian convolution."""
    return {
        "stride": getattr(module, "stride", 1),
        "padding": getattr(module, "padding", 0),
        "dilation": getattr(module, "dilation", 1),
        "groups": getattr(module, "groups", 1),
        "padding_mode": getattr(module, "padding_mode", "zeros") or "zeros",
    }


def shared_layers(model: nn.Module) -> List[Tuple[str, SharedLayer]]:
    return [(p, m) for p, m in model.named_modules() if isinstance(m, SharedLayer)]


def replace(model: nn.Module, path: str, new: nn.Module) -> None:
    parent_path, _, name = path.rpartition(".")
    parent = model.get_submodule(parent_path) if parent_path else model
    setattr(parent, name, new)
