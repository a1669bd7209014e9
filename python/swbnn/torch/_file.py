"""``.swb`` files of models compressed by :func:`swbnn.torch.compress` (docs/swb-format.md).

The file holds the codebook, one fate per shareable weight (layer order, row-major), the
ellipse blends, the outliers' ``(mu, rho)`` and every other tensor of the model's
``state_dict`` (biases as ``<layer>.bias.mu`` / ``<layer>.bias.rho``); its architecture text
is ``{"format": "swbnn-torch-v1", "layers": [...]}``, the PyTorch layers it replaced.

:func:`load` also reads a ``.swb`` written by the swbnn command line for one of its
architectures (MLP, LeNet-5, ResNet-18/20/50/101) into the equivalent PyTorch module with
bayesian-torch's names (``swbnn import``'s names: ``layer1.0.conv1``, ResNet-20's ``shortcut``
and ``linear``, torchvision's ``downsample`` for the others); dense weights are transposed from
the command line's ``[in, out]`` to PyTorch's ``[out, in]``. :func:`save` writes the reverse:
given the command line's ``ModelConfig`` (or remembering the one of the file :func:`load` read),
it writes the file the command line would have written for that architecture, which
``swbnn eval`` and :func:`swbnn.load` read.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple, Union

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


#: Attribute of a model :func:`load` filled from a command-line file: ``{"arch": the file's
#: ModelConfig text, "temperature": its fitted temperature}``, which :func:`save` writes again.
_REMEMBERED = "_swbnn_command_line"


def save(
    shared_model: torch.nn.Module,
    path: PathLike,
    *,
    entropy_index: bool = True,
    int8_outliers: bool = False,
    command_line: Union[None, bool, str, Dict[str, Any]] = None,
) -> Dict[str, int]:
    """Writes a model returned by :func:`swbnn.torch.compress` (or :func:`load`) as a ``.swb``
    file; returns the size in bytes of each part of the file.

    ``command_line``, the swbnn command line's ``ModelConfig`` (a dict or its JSON text: at
    least ``arch``, ``classes``, ``in_channels``, ``image_size``, and ``width``,
    ``mlp_hidden``, ``shortcut``, ``cifar_stem`` where they differ from the defaults), writes
    the file in the command line's format for that architecture (MLP, LeNet-5, ResNet-18/20/
    50/101), so that ``swbnn eval`` and :func:`swbnn.load` read it: the model must be the
    equivalent module under ``swbnn import``'s names (what :func:`load` reads such a file
    into). The config is written with the shared kind and the codebook's length. A module of
    the architecture that the model lacks or holds with another shape or geometry, or a layer
    or tensor of the model that the architecture lacks, is a ``ValueError`` naming the module.

    By default (``None``), a model that :func:`load` read from a command-line file is written
    in that format again, any other model in the PyTorch format (``{"format":
    "swbnn-torch-v1", ...}``), which ``command_line=False`` always writes. A config equal to
    the one :func:`load` read keeps that file's config text and fitted temperature, so that
    load -> save writes the content of the file it read.
    """
    layers = shared_layers(shared_model)
    if not layers:
        raise ValueError("the model has no weight-shared layers: compress it with swbnn.torch.compress first")
    if command_line is None:
        remembered = getattr(shared_model, _REMEMBERED, None)
        command_line = remembered["arch"] if remembered else False
    if command_line is not False:
        if command_line is True:
            raise ValueError("command_line=True needs the ModelConfig: pass it as a dict (or None to use the one load() read)")
        data = _to_command_line(shared_model, layers, command_line)
        return json.loads(_native.swb_save(os.fspath(path), json.dumps(data), entropy_index, int8_outliers))
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
    remembered = None
    if isinstance(arch, dict) and arch.get("format") != FORMAT and arch.get("kind") == "shared" and "arch" in arch:
        remembered = {"arch": data["arch"], "temperature": data.get("temperature")}
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
    # save() writes a command-line model back in the command line's format by default.
    if remembered is not None:
        setattr(model, _REMEMBERED, remembered)
    elif _REMEMBERED in model.__dict__:
        delattr(model, _REMEMBERED)
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


#: The keys of the command line's ``ModelConfig`` (its reader refuses any other).
_CONFIG_KEYS = (
    "arch", "kind", "classes", "in_channels", "image_size", "cifar_stem", "mlp_hidden",
    "shortcut", "width", "bayes", "codebook_len", "trained_on", "normalization",
)


#: The command line's defaults of the keys its reader needs (``bnn_models::ModelConfig``,
#: ``bnn_layers::BayesOptions``); ``classes`` has none.
_CONFIG_DEFAULTS = {"in_channels": 3, "image_size": 32, "mlp_hidden": [400, 400]}
_BAYES_DEFAULTS = {
    "estimator": "Reparameterization",
    "weight_sigma": {"XavierUniform": {"gain": 0.01}},
    "bias_sigma": {"AbsNormal": {"std": 0.001}},
    "empirical_prior": False,
}


def _full_config(config: dict, k: int) -> dict:
    """``config`` in the order of the command line's ``ModelConfig``, its absent non-optional
    keys at the command line's defaults (its reader needs them; optional keys stay absent, as
    an older reader may not know them), of the shared kind with ``codebook_len = k``."""
    bayes = config.get("bayes", {})
    if not isinstance(bayes, dict):
        raise ValueError(f"command_line: `bayes` = {bayes!r} is not a dict of the command line's BayesOptions")
    fixed = {
        "kind": "shared",
        "codebook_len": k,
        "bayes": dict(_BAYES_DEFAULTS, **bayes),
    }
    out = {}
    for key in _CONFIG_KEYS:
        if key in fixed:
            out[key] = fixed[key]
        elif key in config:
            out[key] = config[key]
        elif key in _CONFIG_DEFAULTS:
            out[key] = _CONFIG_DEFAULTS[key]
    return out


def _command_line_config(command_line, remembered: Optional[dict], k: int) -> Tuple[dict, str, Optional[float]]:
    """The ``ModelConfig`` of ``save(command_line=...)`` as a dict of the shared kind with
    ``codebook_len = k``, its text for the file (the text :func:`load` read when the config
    is that file's) and the temperature to store."""
    if isinstance(command_line, str):
        try:
            config = json.loads(command_line)
        except ValueError as e:
            raise ValueError(f"command_line: not a ModelConfig in JSON: {e}") from None
    else:
        config = command_line
    if not isinstance(config, dict):
        raise ValueError(f"command_line: expected the command line's ModelConfig as a dict, got {type(config).__name__}")
    unknown = [key for key in config if key not in _CONFIG_KEYS]
    if unknown:
        raise ValueError(f"command_line: {unknown[0]!r} is no ModelConfig key (known: {', '.join(_CONFIG_KEYS)})")
    arch = config.get("arch")
    if arch not in _COMMAND_LINE_ARCHS:
        raise ValueError(f"command_line: architecture {arch!r} has no PyTorch names (supported: {', '.join(_COMMAND_LINE_ARCHS)})")
    if "classes" not in config:
        raise ValueError("command_line: the ModelConfig needs `classes`")
    config = _full_config(config, k)
    old = json.loads(remembered["arch"]) if remembered is not None else None
    if old is not None and old.get("codebook_len") == k and _full_config(old, k) == config:
        # The text the file held, so that load -> save gives back the same file.
        return config, remembered["arch"], remembered.get("temperature")
    return config, json.dumps(config, separators=(",", ":")), None


def _command_line_layout(config: dict) -> List[tuple]:
    """The modules of the command line's architecture with parameters, in the order the Rust
    model visits them (the order of the file's layers and tensors), under the Rust names
    without ``body.``: ``("dense", path, [in, out], bias)``, ``("conv", path, [out, in, k, k],
    bias, stride, padding)`` or ``("bn", path, channels)``. Follows ``bnn_models``' MLP,
    LeNet-5 and ResNets (``ModelConfig::param_shapes``) and its defaults for absent keys."""

    def size(key, default):
        v = config.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"command_line: `{key}` = {v!r} is not a positive integer")
        return v

    arch = config["arch"]
    classes, c, s = size("classes", 0), size("in_channels", 3), size("image_size", 32)
    if arch == "mlp":
        hidden = config.get("mlp_hidden", [400, 400])
        if not isinstance(hidden, list) or not all(isinstance(h, int) and h > 0 for h in hidden):
            raise ValueError(f"command_line: `mlp_hidden` = {hidden!r} is not a list of positive integers")
        sizes = [c * s * s, *hidden, classes]
        return [("dense", f"layers.{i}", [a, b], True) for i, (a, b) in enumerate(zip(sizes, sizes[1:]))]
    if arch == "lenet5":
        f = (s // 2 - 4) // 2 if s // 2 >= 4 else 0
        if f <= 0:
            raise ValueError(f"command_line: lenet5 needs images of at least 10 px, got image_size = {s}")
        return [
            ("conv", "conv1", [6, c, 5, 5], True, 1, 2),
            ("conv", "conv2", [16, 6, 5, 5], True, 1, 0),
            ("dense", "fc1", [16 * f * f, 120], True),
            ("dense", "fc2", [120, 84], True),
            ("dense", "fc3", [84, classes], True),
        ]
    bottleneck = arch in ("resnet50", "resnet101")
    blocks = {"resnet20": [3, 3, 3], "resnet18": [2, 2, 2, 2], "resnet50": [3, 4, 6, 3], "resnet101": [3, 4, 23, 3]}[arch]
    base = 16 if arch == "resnet20" else 64
    if config.get("width") is not None:
        base = size("width", base)
    widths = [base << i for i in range(len(blocks))]
    shortcut = config.get("shortcut") or "projection"
    if shortcut not in ("projection", "zero-pad"):
        raise ValueError(f"command_line: `shortcut` = {shortcut!r} is neither 'projection' nor 'zero-pad'")
    cifar = arch == "resnet20" or (config.get("cifar_stem") if config.get("cifar_stem") is not None else s <= 64)
    out: List[tuple] = [("conv", "conv1", [widths[0], c, 3, 3], False, 1, 1) if cifar else ("conv", "conv1", [widths[0], c, 7, 7], False, 2, 3)]
    out.append(("bn", "bn1", widths[0]))
    expansion = 4 if bottleneck else 1
    c_in = widths[0]
    for st, (n, w) in enumerate(zip(blocks, widths)):
        for b in range(n):
            stride = 2 if st > 0 and b == 0 else 1
            p = f"layers.{st}.{b}"
            c_out = w * expansion
            if bottleneck:
                out += [
                    ("conv", f"{p}.conv1", [w, c_in, 1, 1], False, 1, 0), ("bn", f"{p}.bn1", w),
                    ("conv", f"{p}.conv2", [w, w, 3, 3], False, stride, 1), ("bn", f"{p}.bn2", w),
                    ("conv", f"{p}.conv3", [c_out, w, 1, 1], False, 1, 0), ("bn", f"{p}.bn3", c_out),
                ]
            else:
                out += [
                    ("conv", f"{p}.conv1", [w, c_in, 3, 3], False, stride, 1), ("bn", f"{p}.bn1", w),
                    ("conv", f"{p}.conv2", [w, w, 3, 3], False, 1, 1), ("bn", f"{p}.bn2", w),
                ]
            if (stride != 1 or c_in != c_out) and shortcut == "projection":
                out += [("conv", f"{p}.downsample.conv", [c_out, c_in, 1, 1], False, stride, 0), ("bn", f"{p}.downsample.bn", c_out)]
            c_in = c_out
    out.append(("dense", "fc", [c_in, classes], True))
    return out


def _geometry(layer) -> Tuple[Any, Any, Any, Any]:
    """``(stride, padding, dilation, groups)`` of a shared convolution as pairs (``groups`` an
    int); ``padding="valid"`` is ``(0, 0)``."""
    pair = lambda v: tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v), int(v))  # noqa: E731
    padding = layer.padding
    padding = (0, 0) if padding == "valid" else padding if isinstance(padding, str) else pair(padding)
    return pair(layer.stride), padding, pair(layer.dilation), int(layer.groups)


def _to_command_line(model: torch.nn.Module, layers, command_line) -> dict:
    """The content of the ``.swb`` the command line would write for ``model`` as the
    architecture ``command_line`` (the inverse of :func:`_from_command_line`): Rust layer paths
    in the Rust model's order, dense weights (their fates) transposed back to ``[in, out]``,
    outliers and ellipses in that weight order, biases and batch norm under their Rust names."""
    cb = layers[0][1].shared_codebook
    k = len(cb)
    for p, layer in layers:
        if layer.shared_codebook is not cb:
            raise ValueError(f"module `{p}` uses another codebook than `{layers[0][0]}`")
    config, arch_text, temperature = _command_line_config(command_line, getattr(model, _REMEMBERED, None), k)
    arch = config["arch"]
    what = f"the {arch} architecture of the command line config"
    layout = _command_line_layout(config)
    by_path = dict(layers)
    state = model.state_dict()
    prefixes = _shared_prefixes(layers)
    used_layers, used_keys = set(), set()
    shapes, fates, ellipses, unshared = [], [], [], []
    out_mu: List[float] = []
    out_rho: List[float] = []
    out_causes: List[str] = []

    def tensor(rust_path: str, t: torch.Tensor) -> None:
        unshared.append({"path": f"body.{rust_path}", "shape": list(t.shape), "data": t.detach().cpu().float().reshape(-1).tolist()})

    for entry in layout:
        kind, rust_module = entry[0], entry[1]
        module = _torch_module(arch, rust_module)
        if kind == "bn":
            channels = entry[2]
            for rust_name, name in (("gamma", "weight"), ("beta", "bias"), ("running_mean", "running_mean"), ("running_var", "running_var")):
                key = f"{module}.{name}"
                t = state.get(key)
                if t is None:
                    raise ValueError(f"module `{module}`: {what} has a batch norm here, the model has no tensor `{key}`")
                if list(t.shape) != [channels]:
                    raise ValueError(f"module `{module}`: `{name}` of shape {list(t.shape)} in the model, [{channels}] in {what}")
                tensor(f"{rust_module}.{rust_name}", t)
                used_keys.add(key)
            used_keys.add(f"{module}.num_batches_tracked")
            continue
        rust_shape, bias = entry[2], entry[3]
        layer = by_path.get(module)
        if layer is None:
            raise ValueError(f"module `{module}` of {what} (`body.{rust_module}`) is not a weight-shared layer of the model")
        torch_shape = [rust_shape[1], rust_shape[0]] if kind == "dense" else list(rust_shape)
        if list(layer.shape) != torch_shape:
            raise ValueError(f"module `{module}`: weight shape {list(layer.shape)} in the model, {torch_shape} in {what}")
        if (kind == "dense") != (layer.spec.kind == "linear"):
            raise ValueError(f"module `{module}`: a {layer.spec.kind} layer in the model, a {'linear' if kind == 'dense' else 'conv2d'} layer in {what}")
        if kind == "conv":
            stride, padding = entry[4], entry[5]
            got = _geometry(layer)
            if got != ((stride, stride), (padding, padding), (1, 1), 1):
                raise ValueError(
                    f"module `{module}`: stride {got[0]}, padding {got[1]}, dilation {got[2]}, groups {got[3]} in the model; "
                    f"stride {stride}, padding {padding}, no dilation or groups in {what}"
                )
            if getattr(layer, "padding_mode", "zeros") != "zeros":
                raise ValueError(f"module `{module}`: padding mode {layer.padding_mode!r} in the model, zeros in {what}")
        if (layer.bias_mu is not None) != bias:
            raise ValueError(f"module `{module}`: bias {'present' if layer.bias_mu is not None else 'absent'} in the model, {'present' if bias else 'absent'} in {what}")
        used_layers.add(module)
        shapes.append({"path": f"body.{rust_module}.weight", "shape": list(rust_shape)})
        index = layer.index.detach().cpu().numpy().astype(np.int64).reshape(-1)
        if kind == "dense":
            # The file's [in, out] row-major order: entry i * n_out + o is PyTorch's (o, i).
            n_out, n_in = torch_shape
            index = index.reshape(n_out, n_in).T.reshape(-1)
        n_outl = int(layer.outlier_mu.shape[0])
        o_mu = layer.outlier_mu.detach().cpu().float().tolist()
        o_rho = layer.outlier_rho.detach().cpu().float().tolist()
        o_causes = layer.outlier_causes.cpu().numpy()
        comps = layer.ellipse_components.cpu().numpy()
        alphas = layer.ellipse_alphas.detach().cpu().numpy().astype(np.float32)
        for i in index.tolist():
            if i < k:
                fates.append({"Shared": i})
            elif i < k + n_outl:
                cause = _CAUSES.get(int(o_causes[i - k]), "MeanThreshold")
                fates.append({"Outlier": cause})
                out_mu.append(o_mu[i - k])
                out_rho.append(o_rho[i - k])
                out_causes.append(cause)
            else:
                # Ellipses are numbered in weight order, as the command line writes them.
                r = i - k - n_outl
                keep = alphas[r] > 0
                fates.append({"Ellipse": len(ellipses)})
                ellipses.append({"components": [int(v) for v in comps[r][keep]], "alphas": [float(v) for v in alphas[r][keep]]})
        if bias:
            tensor(f"{rust_module}.bias_mu", layer.bias_mu)
            tensor(f"{rust_module}.bias_rho", layer.bias_rho)
    extra = [p for p, _ in layers if p not in used_layers]
    if extra:
        raise ValueError(f"module `{extra[0]}` of the model is not in {what}")
    extra = [key for key in state if key not in used_keys and not any(key.startswith(pre) for pre in prefixes)]
    if extra:
        raise ValueError(f"tensor `{extra[0]}` of the model is not in {what}")
    return {
        "arch": arch_text,
        "codebook_mu": cb.mu.detach().cpu().float().tolist(),
        "codebook_rho": cb.rho.detach().cpu().float().tolist(),
        "layers": shapes,
        "fates": fates,
        "ellipses": ellipses,
        "outlier_mu": out_mu,
        "outlier_rho": out_rho,
        "outlier_causes": out_causes,
        "unshared": unshared,
        "temperature": temperature,
    }
