"""Replacing a model's Bayesian layers by weight-shared ones (used by compress and load)."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from ._layers import (
    MAX_BLEND,
    Codebook,
    Found,
    SharedConv2d,
    SharedLayer,
    SharedLinear,
    conv_geometry,
    replace,
    softplus_inv,
)


def raw_rho(found: Found, mu_name: str, scale_name: str) -> torch.Tensor:
    """The parameter as ``rho`` (``sigma = softplus(rho)``), float32, detached, flat."""
    s = getattr(found.module, scale_name).detach().float().reshape(-1)
    if found.spec.scale == "log_sigma":
        return softplus_inv(torch.exp(s.double())).float()
    return s.clone()


def install(
    model: torch.nn.Module,
    found: Sequence[Found],
    codebook_mu: torch.Tensor,
    codebook_rho: torch.Tensor,
    layers: List[Dict[str, torch.Tensor]],
    prior,
    biases: Optional[List[Optional[tuple]]] = None,
) -> List[SharedLayer]:
    """Replaces every ``found`` layer of ``model`` by a shared layer. ``layers[i]`` holds the
    layer's ``index``, ``outlier_mu``, ``outlier_rho``, ``outlier_causes``,
    ``ellipse_components`` and ``ellipse_alphas``; ``biases[i]`` its ``(mu, rho)`` (default:
    the found layer's own)."""
    device = found[0].mu_param().device
    cb = Codebook(codebook_mu.to(device), codebook_rho.to(device))
    n_inliers = 0
    for d in layers:
        n_inliers += int(d["index"].numel() - d["outlier_mu"].numel())
    out = []
    for i, (f, d) in enumerate(zip(found, layers)):
        if biases is not None:
            bias = biases[i]
        elif getattr(f.module, f.spec.bias_mu, None) is not None:
            bias = (
                getattr(f.module, f.spec.bias_mu).detach().float().clone(),
                raw_rho(f, f.spec.bias_mu, f.spec.bias_scale),
            )
        else:
            bias = None
        dev = f.mu_param().device
        cls = SharedLinear if f.spec.kind == "linear" else SharedConv2d
        layer = cls(
            cb,
            i == 0,
            tuple(f.mu_param().shape),
            d["index"].to(dev),
            d["outlier_mu"].to(dev),
            d["outlier_rho"].to(dev),
            d["outlier_causes"].to(dev),
            d["ellipse_components"].to(dev),
            d["ellipse_alphas"].to(dev),
            None if bias is None else (bias[0].to(dev), bias[1].to(dev)),
            f.spec,
            f"{type(f.module).__module__}.{type(f.module).__name__}",
            prior,
            n_inliers,
        )
        if isinstance(layer, SharedConv2d):
            layer.set_geometry(**conv_geometry(f.module))
        layer.dnn_to_bnn_flag = bool(getattr(f.module, "dnn_to_bnn_flag", False))
        layer.train(f.module.training)
        replace(model, f.path, layer)
        out.append(layer)
    return out


def layers_from_plan(plan, found: Sequence[Found], mus, rhos) -> List[Dict[str, torch.Tensor]]:
    """Per layer, the shared layer's tensors from a :class:`swbnn.SharingPlan` over all
    layers' weights concatenated in ``found`` order. ``mus``/``rhos``: flat per layer."""
    k = plan.k
    fates = np.asarray(plan.fates)
    assignment = np.asarray(plan.assignment)
    ell_row = np.full(fates.shape[0], -1, np.int64)
    ell_row[np.asarray(plan.ellipse_weights, np.int64)] = np.arange(len(plan.ellipse_weights))
    comps_all = np.asarray(plan.ellipse_components, np.int64).reshape(-1, MAX_BLEND)
    alphas_all = np.asarray(plan.ellipse_alphas, np.float32).reshape(-1, MAX_BLEND)
    out = []
    o = 0
    for f, mu, rho in zip(found, mus, rhos):
        n = mu.numel()
        fl = fates[o : o + n]
        shared = fl == 0
        ell = fl == 1
        outl = fl >= 2
        n_out, n_ell = int(outl.sum()), int(ell.sum())
        index = np.empty(n, np.int64)
        index[shared] = assignment[o : o + n][shared]
        index[outl] = k + np.arange(n_out)
        index[ell] = k + n_out + np.arange(n_ell)
        rows = ell_row[o : o + n][ell]
        comps = comps_all[rows].copy()
        alphas = alphas_all[rows].copy()
        alphas[comps < 0] = 0.0
        comps[comps < 0] = 0
        s = alphas.sum(1, keepdims=True)
        alphas = alphas / np.where(s > 0, s, 1.0)
        mask = torch.from_numpy(outl)
        out.append(
            {
                "index": torch.from_numpy(index),
                "outlier_mu": mu.reshape(-1).cpu()[mask].clone(),
                "outlier_rho": rho.reshape(-1).cpu()[mask].clone(),
                "outlier_causes": torch.from_numpy(fl[outl].astype(np.int8)),
                "ellipse_components": torch.from_numpy(comps),
                "ellipse_alphas": torch.from_numpy(alphas.astype(np.float32)),
            }
        )
        o += n
    return out
