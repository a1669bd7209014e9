"""What a PyTorch model's outputs mean in ``swbnn.torch.compress``: class logits (the
default), or a Gaussian per regression target, as the Rust head reads them
(``bnn_models::Head``): ``2 T`` outputs, the means, then ``T`` values mapped to ``std =
softplus(s) + MIN_STD``.

Each likelihood checks a batch's targets, gives the data term of the loss (the mean negative
log-likelihood per example), and the confidence the stop rule compares: a classifier's mean
largest class probability; a regression network's negative NLL of the validation targets under
its Monte-Carlo mixture (the Rust stop rule's ``neg_nll``, which says why spread alone fails).
"""

from __future__ import annotations

import math
from typing import List, Tuple

import json

import torch
import torch.nn.functional as F

from .. import _native

#: The smallest predictive standard deviation: ``bnn_models::MIN_STD``, read from the Rust core.
MIN_STD = float(json.loads(_native.defaults_json())["gaussian_min_std"])
_HALF_LN_TWO_PI = 0.5 * math.log(2 * math.pi)


def _outputs(out) -> torch.Tensor:
    # bayesian-torch's models return (output, kl) where asked to.
    return out[0] if isinstance(out, (tuple, list)) else out


class Categorical:
    """Class logits ``[batch, classes]`` and integer labels."""

    name = "categorical"

    def targets(self, y: torch.Tensor, x: torch.Tensor, what: str) -> torch.Tensor:
        if y.dim() != 1 or y.is_floating_point() or y.shape[0] != x.shape[0]:
            raise ValueError(
                f"{what}: labels must be a 1-D integer tensor with one label per image; got labels "
                f"{tuple(y.shape)} ({y.dtype}) for images {tuple(x.shape)}"
            )
        return y

    def check_outputs(self, out: torch.Tensor, x: torch.Tensor, y: torch.Tensor, what: str) -> None:
        if out.dim() != 2 or out.shape[0] != x.shape[0]:
            raise ValueError(
                f"{what}: the model returns {tuple(out.shape)} for {x.shape[0]} images; "
                "classification logits [batch, classes] are needed"
            )
        if y.numel() and (int(y.max()) >= out.shape[1] or int(y.min()) < 0):
            raise ValueError(f"{what}: labels must lie in 0..{out.shape[1] - 1}, got {int(y.min())}..{int(y.max())}")

    def nll(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out.float(), y)

    def confidence(self, model, probe: List[Tuple[torch.Tensor, torch.Tensor]], samples: int) -> Tuple[float, int]:
        total, n = 0.0, 0
        for x, _ in probe:
            p = sum(F.softmax(_outputs(model(x)).float(), dim=1) for _ in range(samples))
            total += float(p.max(dim=1).values.sum()) / samples
            n += x.shape[0]
        return total, n


class Gaussian:
    """A Gaussian per target: outputs ``[batch, 2 T]`` (means, then the spreads' raw values),
    float targets ``[batch, T]`` (or ``[batch]`` for one target)."""

    name = "gaussian"

    def targets(self, y: torch.Tensor, x: torch.Tensor, what: str) -> torch.Tensor:
        if not y.is_floating_point() or y.dim() not in (1, 2) or y.shape[0] != x.shape[0]:
            raise ValueError(
                f"{what}: regression targets must be a float tensor [batch] or [batch, targets] "
                f"with one row per input; got {tuple(y.shape)} ({y.dtype}) for inputs {tuple(x.shape)}"
            )
        if not bool(torch.isfinite(y).all()):
            raise ValueError(f"{what}: regression targets hold NaN or infinity")
        return y.float() if y.dim() == 2 else y.float().unsqueeze(1)

    def check_outputs(self, out: torch.Tensor, x: torch.Tensor, y: torch.Tensor, what: str) -> None:
        t = y.shape[1] if y.dim() == 2 and y.numel() else None
        if out.dim() != 2 or out.shape[0] != x.shape[0] or out.shape[1] % 2 or (t is not None and out.shape[1] != 2 * t):
            want = f"[batch, {2 * t}]" if t is not None else "[batch, 2 T]"
            raise ValueError(
                f"{what}: the model returns {tuple(out.shape)} for {x.shape[0]} inputs; a Gaussian "
                f"head needs {want}: the means, then the spreads' raw values"
            )

    @staticmethod
    def mean_std(out: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        t = out.shape[1] // 2
        out = out.float()
        return out[:, :t], F.softplus(out[:, t:]) + MIN_STD

    def nll(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        mean, std = self.mean_std(out)
        z = (y - mean) / std
        per_example = (std.log() + 0.5 * z * z).sum(dim=1) + _HALF_LN_TWO_PI * y.shape[1]
        return per_example.mean()

    def confidence(self, model, probe: List[Tuple[torch.Tensor, torch.Tensor]], samples: int) -> Tuple[float, int]:
        """Minus the NLL of the probe's targets under the mixture of ``samples`` draws, summed
        over rows (the caller divides by the rows)."""
        total, rows = 0.0, 0
        for x, y in probe:
            logs = []
            for _ in range(samples):
                mean, std = self.mean_std(_outputs(model(x)))
                z = (y - mean) / std
                logs.append(-(std.log() + 0.5 * z * z + _HALF_LN_TWO_PI))
            mixture = torch.logsumexp(torch.stack(logs), dim=0) - math.log(samples)
            total += float(mixture.sum())
            rows += x.shape[0]
        return total, rows


def likelihood(name: str):
    """``"categorical"`` (class logits) or ``"gaussian"`` (regression)."""
    if name == "categorical":
        return Categorical()
    if name == "gaussian":
        return Gaussian()
    raise ValueError(f"likelihood must be 'categorical' or 'gaussian', got {name!r}")
