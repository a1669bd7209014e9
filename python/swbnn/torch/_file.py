"""``.swb`` files of models compressed by :func:`swbnn.torch.compress` (docs/swb-format.md).

The file holds the codebook, one fate per shareable weight (layer order, row-major), the
ellipse blends, the outliers' ``(mu, rho)`` and every other tensor of the model's
``state_dict`` (biases as ``<layer>.bias.mu`` / ``<layer>.bias.rho``); its architecture text
is ``{"format": "swbnn-torch-v1", "layers": [...]}``, the PyTorch layers it replaced.

:func:`load` also reads a ``.swb`` written by the swbnn command line for one of its
architectures (MLP, LeNet-5, ResNet-18/20/50/101) into the equivalent PyTorch module with
bayesian-torch's names (``swbnn import``'s names: ``layer1.0.conv1``, ResNet-20's ``shortcut``
and ``linear``, torchvision's ``downsample`` for the others); dense weights are transposed from
the command line's ``[in, out]`` to PyTorch's ``[out, in]``.
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Union

import numpy as np
import torch

from .. import _native
from ._build import install
from ._layers import MAX_BLEND, SharedLayer, find_layers, shared_layers

FORMAT = "swbnn-torch-v1"
_CAUSES = {2: "MeanThreshold", 3: "Gradient", 4: "SmallCluster"}
_CAUSE_CODES = {v: k for k, v in _CAUSES.items()}

PathLike = Union[str, "os.PathLike[str]"]


def _shared_prefixes(layers) -> List[str]:
    return [p + "." for p, _ in layers]


def save(shared_model: torch.nn.Module, path: PathLike, *, entropy_index: bool = True, int8_outliers: bool = False) -> Dict[str, int]:
    """Writes a model returned by :func:`swbnn.torch.compress` (or :func:`load`) as a ``.swb``
    file; returns the size in bytes of each part of the file."""
    layers = shared_layers(shared_model)
    if not layers:
        raise ValueError("the model has no weight-shared layers: compress it with swbnn.torch.compress first")
    cb = layers[0][1].shared_codebook
    k = len(cb)
    fates: List[dict] = []
    ellipses: List[dict] = []
    out_mu: List[float] = []
    out_rho: List[float] = []
    out_causes: List[str] = []
    shapes = []
    arch_layers = []
    unshared = []
    n_ell = 0
    for p, layer in layers:
        if layer.shared_codebook is not cb:
            raise ValueError(f"module `{p}` uses another codebook than `{layers[0][0]}`")
        idx = layer.index.detach().cpu().numpy().astype(np.int64)
        n_out = int(layer.outlier_mu.shape[0])
        causes = layer.outlier_causes.cpu().numpy()
        for i in idx:
            if i < k:
                fates.append({"Shared": int(i)})
            elif i < k + n_out:
                fates.append({"Outlier": _CAUSES.get(int(causes[i - k]), "MeanThreshold")})
            else:
                fates.append({"Ellipse": n_ell + int(i - k - n_out)})
        comps = layer.ellipse_components.cpu().numpy()
        alphas = layer.ellipse_alphas.detach().cpu().numpy().astype(np.float32)
        for c, a in zip(comps, alphas):
            keep = a > 0
            ellipses.append({"components": [int(v) for v in c[keep]], "alphas": [float(v) for v in a[keep]]})
        n_ell += int(comps.shape[0])
        out_mu += layer.outlier_mu.detach().cpu().float().tolist()
        out_rho += layer.outlier_rho.detach().cpu().float().tolist()
        out_causes += [_CAUSES.get(int(c), "MeanThreshold") for c in causes]
        shapes.append({"path": f"{p}.weight", "shape": list(layer.shape)})
        arch_layers.append(
            {
                "path": p,
                "library": layer.spec.library,
                "class": layer.source_class,
                "kind": layer.spec.kind,
                "shape": list(layer.shape),
                "bias": layer.bias_mu is not None,
            }
        )
        if layer.bias_mu is not None:
            for name, t in (("mu", layer.bias_mu), ("rho", layer.bias_rho)):
                unshared.append({"path": f"{p}.bias.{name}", "shape": list(t.shape), "data": t.detach().cpu().float().reshape(-1).tolist()})
    prefixes = _shared_prefixes(layers)
    for key, t in shared_model.state_dict().items():
        if any(key.startswith(pre) for pre in prefixes) or not torch.is_tensor(t):
            continue
        unshared.append({"path": key, "shape": list(t.shape), "data": t.detach().cpu().double().reshape(-1).float().tolist()})
    data = {
        "arch": json.dumps({"format": FORMAT, "codebook_len": k, "prior": list(layers[0][1].prior), "layers": arch_layers}),
        "codebook_mu": cb.mu.detach().cpu().float().tolist(),
        "codebook_rho": cb.rho.detach().cpu().float().tolist(),
        "layers": shapes,
        "fates": fates,
        "ellipses": ellipses,
        "outlier_mu": out_mu,
        "outlier_rho": out_rho,
        "outlier_causes": out_causes,
        "unshared": unshared,
        "temperature": None,
    }
    return json.loads(_native.swb_save(os.fspath(path), json.dumps(data), entropy_index, int8_outliers))


def load(model: torch.nn.Module, path: PathLike) -> torch.nn.Module:
    """Turns ``model``, a fresh instance of the architecture that was compressed, into the
    weight-shared model stored at ``path`` (in place; also returned), on ``model``'s device.
    ``path`` is a file of :func:`save`, or a ``.swb`` of the swbnn command line for one of its
    architectures, which loads into the equivalent bayesian-torch module (the names of
    ``swbnn import``). A layer or tensor of the file that the model lacks, or of another
    shape or class, is a ``ValueError`` naming its module path."""
    data = json.loads(_native.swb_load(os.fspath(path)))
    try:
        arch = json.loads(data["arch"])
    except ValueError:
        arch = None
    if isinstance(arch, dict) and arch.get("format") != FORMAT and arch.get("kind") == "shared" and "arch" in arch:
        arch = _from_command_line(data, arch, os.fspath(path))
    if not isinstance(arch, dict) or arch.get("format") != FORMAT:
        raise ValueError(f"{os.fspath(path)}: not a weight-shared model of swbnn.torch or of the swbnn command line")
    found = find_layers(model)
    by_path = {f.path: f for f in found}
    file_paths = [l["path"] for l in arch["layers"]]
    for l in arch["layers"]:
        f = by_path.get(l["path"])
        if f is None:
            raise ValueError(f"module `{l['path']}` ({l['class']}) of the file is not a Bayesian layer of the model")
        shape = list(f.mu_param().shape)
        if shape != l["shape"]:
            raise ValueError(f"module `{l['path']}`: weight shape {shape} in the model, {l['shape']} in the file")
        has_bias = getattr(f.module, f.spec.bias_mu, None) is not None
        if has_bias != l["bias"]:
            raise ValueError(f"module `{l['path']}`: bias {'present' if has_bias else 'absent'} in the model, not in the file")
        if f.spec.kind != l["kind"]:
            raise ValueError(f"module `{l['path']}`: a {f.spec.kind} layer in the model, {l['kind']} in the file")
    extra = [f.path for f in found if f.path not in set(file_paths)]
    if extra:
        raise ValueError(f"module `{extra[0]}` of the model is not in the file")
    found = [by_path[p] for p in file_paths]
    k = int(arch["codebook_len"])
    unshared = {t["path"]: t for t in data["unshared"]}
    fates = data["fates"]
    o = ell = out = 0
    per_layer, biases = [], []
    for f, l in zip(found, arch["layers"]):
        n = int(np.prod(l["shape"]))
        index = np.empty(n, np.int64)
        causes = []
        n_out = n_ell = 0
        kinds = []
        for i, fate in enumerate(fates[o : o + n]):
            (kind, v), = fate.items()
            kinds.append(kind)
            if kind == "Shared":
                index[i] = v
            elif kind == "Outlier":
                causes.append(_CAUSE_CODES.get(v, 2))
                n_out += 1
        j_out = j_ell = 0
        for i, kind in enumerate(kinds):
            if kind == "Outlier":
                index[i] = k + j_out
                j_out += 1
            elif kind == "Ellipse":
                index[i] = k + n_out + j_ell
                j_ell += 1
        n_ell = j_ell
        comps = np.zeros((n_ell, MAX_BLEND), np.int64)
        alphas = np.zeros((n_ell, MAX_BLEND), np.float32)
        for r, e in enumerate(data["ellipses"][ell : ell + n_ell]):
            c = len(e["components"])
            comps[r, :c] = e["components"]
            alphas[r, :c] = e["alphas"]
        per_layer.append(
            {
                "index": torch.from_numpy(index),
                "outlier_mu": torch.tensor(data["outlier_mu"][out : out + n_out], dtype=torch.float32),
                "outlier_rho": torch.tensor(data["outlier_rho"][out : out + n_out], dtype=torch.float32),
                "outlier_causes": torch.tensor(causes, dtype=torch.int8),
                "ellipse_components": torch.from_numpy(comps),
                "ellipse_alphas": torch.from_numpy(alphas),
            }
        )
        if l["bias"]:
            bm, br = unshared.pop(f"{l['path']}.bias.mu", None), unshared.pop(f"{l['path']}.bias.rho", None)
            if bm is None or br is None:
                raise ValueError(f"module `{l['path']}`: the file has no bias")
            biases.append((torch.tensor(bm["data"]).reshape(bm["shape"]), torch.tensor(br["data"]).reshape(br["shape"])))
        else:
            biases.append(None)
        o += n
        out += n_out
        ell += n_ell
    prior = tuple(float(v) for v in arch.get("prior", (0.0, 0.1)))
    install(
        model,
        found,
        torch.tensor(data["codebook_mu"], dtype=torch.float32),
        torch.tensor(data["codebook_rho"], dtype=torch.float32),
        per_layer,
        prior,
        biases,
    )
    layers = shared_layers(model)
    prefixes = _shared_prefixes(layers)
    state = model.state_dict()
    with torch.no_grad():
        for key, t in unshared.items():
            if key not in state:
                raise ValueError(f"tensor `{key}` of the file is not in the model")
            target = state[key]
            if list(target.shape) != list(t["shape"]):
                raise ValueError(f"tensor `{key}`: shape {list(target.shape)} in the model, {t['shape']} in the file")
            target.copy_(torch.tensor(t["data"], dtype=torch.float64).reshape(t["shape"]).to(target.dtype))
        missing = [
            key
            for key in state
            if key not in unshared
            and not any(key.startswith(p) for p in prefixes)
            # Batch norm's step counter changes no forward pass; the command line has none.
            and not (key.endswith(".num_batches_tracked") and key[: -len("num_batches_tracked")] + "running_mean" in unshared)
        ]
        if missing:
            raise ValueError(f"tensor `{missing[0]}` of the model is not in the file")
    return model


#: Architectures of the command line that have PyTorch names.
_COMMAND_LINE_ARCHS = ("mlp", "lenet5", "resnet18", "resnet20", "resnet50", "resnet101")


def _torch_module(arch: str, module: str) -> str:
    """The PyTorch module path of one of the command line's module paths (without ``body.``),
    as ``swbnn import`` names it for bayesian-torch models."""
    if not arch.startswith("resnet"):
        return module
    cifar = arch == "resnet20"
    shortcut = "shortcut" if cifar else "downsample"
    parts = module.split(".")
    out: List[str] = []
    i = 0
    while i < len(parts):
        p, nxt = parts[i], parts[i + 1] if i + 1 < len(parts) else None
        if p == "layers" and nxt is not None:
            out.append(f"layer{int(nxt) + 1}" if nxt.isdigit() else "layer0")
            i += 2
            continue
        if p == "downsample" and nxt in ("conv", "bn"):
            out.append(f"{shortcut}.{0 if nxt == 'conv' else 1}")
            i += 2
            continue
        out.append("linear" if (p == "fc" and nxt is None and cifar) else p)
        i += 1
    return ".".join(out)


def _from_command_line(data: dict, config: dict, path: str) -> dict:
    """Rewrites, in place, the content of a ``.swb`` of the swbnn command line into the layout
    :func:`load` reads (PyTorch module paths, ``[out, in]`` dense weights, fates, outliers and
    ellipses in PyTorch's weight order); returns its architecture text as a dict."""
    arch = str(config["arch"])
    if arch not in _COMMAND_LINE_ARCHS:
        raise ValueError(f"{path}: architecture {arch!r} of the swbnn command line has no PyTorch names (supported: {', '.join(_COMMAND_LINE_ARCHS)})")
    k = len(data["codebook_mu"])
    fates_in, ellipses_in = data["fates"], data["ellipses"]
    out_mu_in, out_rho_in, causes_in = data["outlier_mu"], data["outlier_rho"], data["outlier_causes"]
    unshared = {t["path"]: t for t in data["unshared"]}
    fates: List[dict] = []
    ellipses: List[dict] = []
    out_mu: List[float] = []
    out_rho: List[float] = []
    causes: List[str] = []
    layers = []
    renamed = []
    o = out_seen = 0
    for l in data["layers"]:
        rust_path, shape = l["path"], [int(v) for v in l["shape"]]
        if not rust_path.startswith("body.") or not rust_path.endswith(".weight") or len(shape) not in (2, 4):
            raise ValueError(f"{path}: layer `{rust_path}` {shape} is no dense or convolution weight of the swbnn command line")
        rust_module = rust_path[len("body.") : -len(".weight")]
        module = _torch_module(arch, rust_module)
        n = int(np.prod(shape))
        layer_fates = fates_in[o : o + n]
        # The outliers of this layer, in the file's (weight) order.
        ranks = np.full(n, -1, np.int64)
        j = 0
        for i, fate in enumerate(layer_fates):
            if "Outlier" in fate:
                ranks[i] = out_seen + j
                j += 1
        out_seen += j
        if len(shape) == 2:
            n_in, n_out = shape
            t = np.arange(n)
            order = (t % n_in) * n_out + t // n_in  # PyTorch [out, in] index -> file [in, out] index
            torch_shape = [n_out, n_in]
        else:
            order = np.arange(n)
            torch_shape = shape
        for i in order:
            fate = layer_fates[int(i)]
            (kind, v), = fate.items()
            if kind == "Shared":
                fates.append({"Shared": int(v)})
            elif kind == "Outlier":
                r = int(ranks[int(i)])
                fates.append({"Outlier": v})
                out_mu.append(out_mu_in[r])
                out_rho.append(out_rho_in[r])
                causes.append(causes_in[r])
            elif kind == "Ellipse":
                fates.append({"Ellipse": len(ellipses)})
                ellipses.append(ellipses_in[int(v)])
            else:
                raise ValueError(f"{path}: layer `{rust_path}`: unknown fate {fate!r}")
        o += n
        has_bias = f"body.{rust_module}.bias_mu" in unshared
        for stat in ("mu", "rho"):
            t_ = unshared.pop(f"body.{rust_module}.bias_{stat}", None)
            if t_ is not None:
                renamed.append(dict(t_, path=f"{module}.bias.{stat}"))
        layers.append(
            {
                "path": module,
                "library": "swbnn",
                "class": f"{arch} {rust_module}",
                "kind": "linear" if len(shape) == 2 else "conv2d",
                "shape": torch_shape,
                "bias": has_bias,
            }
        )
    bn = {"gamma": "weight", "beta": "bias", "running_mean": "running_mean", "running_var": "running_var"}
    for rust_path, t_ in unshared.items():
        module, _, param = rust_path[len("body.") :].rpartition(".")
        if not rust_path.startswith("body.") or param not in bn:
            raise ValueError(f"{path}: tensor `{rust_path}` of the swbnn command line has no PyTorch counterpart")
        renamed.append(dict(t_, path=f"{_torch_module(arch, module)}.{bn[param]}"))
    data.update(
        fates=fates,
        ellipses=ellipses,
        outlier_mu=out_mu,
        outlier_rho=out_rho,
        outlier_causes=causes,
        unshared=renamed,
    )
    return {"format": FORMAT, "codebook_len": k, "prior": [0.0, 0.1], "layers": layers}
