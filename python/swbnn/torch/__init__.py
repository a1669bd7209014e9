"""Compress a PyTorch Bayesian neural network without leaving PyTorch (2DGBNN).

    import swbnn.torch as swt
    shared, report = swt.compress(model, train_loader, k=64, epochs=2, val_loader=val_loader)
    swt.save(shared, "model.swb")
    fresh = swt.load(MyNet(), "model.swb")

``model`` is any ``torch.nn.Module`` whose Bayesian layers come from bayesian-torch
(``LinearReparameterization``, ``Conv2dReparameterization``, ``LinearFlipout``,
``Conv2dFlipout``, models from ``dnn_to_bnn``), blitz (``BayesianLinear``,
``BayesianConv2d``) or torchbnn (``BayesLinear``, ``BayesConv2d``). Stages 1-2 (outliers,
2-D GMM, ellipses, merging) run in the Rust core (:func:`swbnn.plan`) on all layers' weights
in module order, as ``swshare::compress`` does; stage 3 retrains the shared model in PyTorch
with the Rust pipeline's ELBO, mixture KL, parameter groups and stop rule. Each Bayesian layer
is replaced by a :class:`SharedLinear` / :class:`SharedConv2d` with the same call signature
and return convention, so the user's ``forward`` and training loop run unchanged.

``compress(model, train_loader, auto=True, val_loader=val_loader)`` chooses K instead: the
smallest file (2DGBNN over a ladder of K, ``f32`` or int8 outliers) whose validation accuracy,
NLL, ECE and OOD-proxy AUROC stay within ``margins`` of the source's, as ``swbnn compress
--auto`` does (without its 1-D sharing and quantised candidates, which PyTorch lacks); the
report's ``search`` lists every candidate.

Requires ``torch`` (``pip install swbnn[torch]``); ``import swbnn`` works without it.
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401  (the real PyTorch: imports are absolute)
except ImportError as _e:  # pragma: no cover - exercised without torch
    raise ImportError(
        "swbnn.torch needs PyTorch: pip install 'swbnn[torch]' (or pip install torch)"
    ) from _e

from ._compress import CompressReport, compress
from ._file import load, save
from ._layers import Codebook, SharedConv2d, SharedLayer, SharedLinear

__all__ = [
    "Codebook",
    "CompressReport",
    "SharedConv2d",
    "SharedLayer",
    "SharedLinear",
    "compress",
    "load",
    "save",
]
