"""``swbnn.torch.compress``: stages 1-2 in the Rust core, stage 3 in PyTorch."""

from __future__ import annotations

import copy
import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np
import torch

from .. import _native, _progress
from .. import plan as _plan
from ._build import install, layers_from_plan, raw_rho
from ._layers import SharedLayer, find_layers, kl_each
from ._likelihood import Categorical, Gaussian, _outputs, likelihood as _likelihood

Likelihood = Union[Categorical, Gaussian]
CATEGORICAL = Categorical()

#: The Rust pipeline's defaults, read from it (``_native.defaults_json``), never copied here.
_RUST = json.loads(_native.defaults_json())
#: Stage 3's training settings that the PyTorch retraining honours
#: (``swshare::compress::CompressConfig::default().retrain``).
RETRAIN_DEFAULTS: Dict[str, Any] = {
    key: _RUST["retrain"][key]
    for key in (
        "epochs",
        "lr",
        "lr_rho",
        "weight_decay",
        "kl_weight",
        "kl_warmup_steps",
        "prior",
        "optimizer",
        "seed",
    )
}
#: ``RetrainStop::confidence_recovered()`` of the presets.
CONFIDENCE_RECOVERED: Dict[str, Any] = dict(_RUST["confidence_recovered"]["confidence-recovered"])
#: The paper's K (swshare's `DEFAULT_K`).
DEFAULT_K: int = _RUST["k"]
#: Stage 1's thresholds; ``tau_sd`` (the layer-relative part of the mean threshold) is
#: ``swshare::config::TORCH_TAU_SD``: PyTorch libraries initialise every mean from one
#: distribution whatever the fan-in.
OUTLIER_DEFAULTS: Dict[str, Any] = {
    key: _RUST["outliers"][key] for key in ("tau_w", "grad_top_fraction", "grad_batches")
} | {"tau_sd": _RUST["torch_tau_sd"]}
_RHO = re.compile(r"(^|[._])rho$")


class PlanError(ValueError):
    """Stages 1-2 refused a K (larger than the inliers, or the plan failed): the search of
    ``auto=True`` records it as a failed candidate and goes on."""


@dataclass
class CompressReport:
    """What :func:`compress` did. ``layers``: one row per replaced layer (path, library,
    class, shape, weights, outliers, ellipses, shared, params_before, params_after);
    ``total``: the model's trainable parameters before/after and the counts summed;
    ``timings``: wall-clock seconds per stage (``*_s``) and the process's CPU seconds
    (``*_cpu_s``, all threads; on a shared machine the steadier measure); ``stop``: the stop rule's trace (``None`` for a fixed
    number of epochs); ``plan``: the Rust plan report; ``history``: one row per epoch
    (loss, nll, kl, epoch, ``seconds``, ``cpu_seconds``);
    ``search``: with ``auto=True``, the whole search (``None`` otherwise)."""

    k: int
    layers: List[Dict[str, Any]]
    total: Dict[str, Any]
    timings: Dict[str, float]
    stop: Optional[Dict[str, Any]]
    history: List[Dict[str, float]]
    plan: Dict[str, Any] = field(repr=False)
    config: Dict[str, Any] = field(repr=False)
    search: Optional[Dict[str, Any]] = field(default=None, repr=False)

    def to_dict(self) -> Dict[str, Any]:
        out = {
            "k": self.k,
            "layers": self.layers,
            "total": self.total,
            "timings": self.timings,
            "stop": self.stop,
            "history": self.history,
            "plan": self.plan,
            "config": self.config,
        }
        if self.search is not None:
            out["search"] = self.search
        return out

    def __str__(self) -> str:
        rows = [f"{'layer':<28} {'weights':>9} {'outliers':>8} {'ellipses':>8} {'params before':>13} {'after':>8}"]
        for r in self.layers:
            rows.append(
                f"{r['path']:<28} {r['weights']:>9} {r['outliers']:>8} {r['ellipses']:>8} "
                f"{r['params_before']:>13} {r['params_after']:>8}"
            )
        t = self.total
        rows.append(
            f"{'total (model)':<28} {t['weights']:>9} {t['outliers']:>8} {t['ellipses']:>8} "
            f"{t['params_before']:>13} {t['params_after']:>8}"
        )
        rows.append(f"K = {self.k}; ratio {t['ratio']:.1f}x; " + ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items()))
        if self.stop is not None:
            s = self.stop
            rows.append(
                f"stop rule: source confidence {s['source_confidence']:.4f} on {s['probe_images']} images; "
                f"checks {[(round(c['epochs_done'], 3), round(c['confidence'], 4)) for c in s['checks']]}; "
                f"stopped after {s['stopped_after']}"
            )
        if self.search is not None:
            from ._search import candidate_line

            rows.append("search (validation):")
            rows += ["  " + candidate_line(c) for c in self.search["candidates"]]
        return "\n".join(rows)


def _merge(base: Dict[str, Any], patch: Dict[str, Any], where: str) -> Dict[str, Any]:
    out = dict(base)
    for key, v in patch.items():
        if key not in base:
            raise ValueError(f"config: unknown field `{where}.{key}` (known: {sorted(base)})")
        out[key] = v
    return out


def _config(config: Union[None, str, Dict[str, Any]]) -> Dict[str, Any]:
    if config is None:
        config = {}
    elif isinstance(config, str):
        config = json.loads(config)
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict or JSON text, got {type(config).__name__}")
    if "save" in config:
        raise ValueError("config: the `save` section is swbnn.torch.save's keyword arguments (entropy_index, int8_outliers)")
    unknown = set(config) - {"sharing", "retrain", "retrain_stop"}
    if unknown:
        raise ValueError(f"config: unknown sections {sorted(unknown)} (sharing, retrain, retrain_stop)")
    patch = dict(config.get("retrain", {}) or {})
    for key in ("batch_size", "schedule", "shared_kl"):  # the loader's, Constant, Mixture
        patch.pop(key, None)
    retrain = _merge(RETRAIN_DEFAULTS, patch, "retrain")
    return {
        "sharing": config.get("sharing", {}) or {},
        "retrain": retrain,
        "retrain_stop": config.get("retrain_stop"),
    }


def _prior(p) -> Tuple[float, float]:
    if isinstance(p, dict) and len(p) == 1:
        (kind, v), = p.items()
        if kind.lower() == "normal":
            return float(v.get("mu", 0.0)), float(v["sigma"])
    raise ValueError(f"config: retrain.prior {p!r}: only {{'Normal': {{'mu': .., 'sigma': ..}}}} is supported")


def _stop_rule(rule, val_loader) -> Optional[Dict[str, int]]:
    if rule is None:
        rule = {"confidence-recovered": CONFIDENCE_RECOVERED} if val_loader is not None else "epochs"
    if rule == "epochs":
        return None
    if isinstance(rule, dict) and set(rule) == {"confidence-recovered"}:
        r = _merge(CONFIDENCE_RECOVERED, rule["confidence-recovered"] or {}, "retrain_stop")
        if min(r.values()) < 1:
            raise ValueError(f"retrain_stop: {r}: at least 1 probe image, 1 sample and 1 check per epoch")
        if val_loader is None:
            raise ValueError(
                "retrain_stop `confidence-recovered` measures confidence on validation images, "
                "and none were given: pass val_loader, or end stage 3 after its epochs "
                "(config={'retrain_stop': 'epochs'})"
            )
        return r
    raise ValueError(f"retrain_stop {rule!r}: 'epochs' or {{'confidence-recovered': {{...}}}}")


def _batch(batch, device, what: str, lik: Likelihood = CATEGORICAL) -> Tuple[torch.Tensor, torch.Tensor]:
    if isinstance(batch, dict):
        raise TypeError(f"{what} yields dicts; it must yield (inputs, targets) pairs")
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise TypeError(f"{what} must yield (inputs, targets) pairs, got {type(batch).__name__}")
    x, y = batch[0], batch[1]
    if not torch.is_tensor(x) or not torch.is_tensor(y):
        raise TypeError(f"{what} must yield tensors, got ({type(x).__name__}, {type(y).__name__})")
    if not x.is_floating_point():
        raise ValueError(f"{what}: inputs must be floating point, got {x.dtype}")
    y = lik.targets(y, x, what)
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


def _forward(model, x, y, what: str, lik: Likelihood = CATEGORICAL) -> torch.Tensor:
    try:
        out = _outputs(model(x))
    except (RuntimeError, ValueError, TypeError) as e:
        raise ValueError(f"{what}: the model cannot run a batch of inputs {tuple(x.shape)}: {e}") from e
    lik.check_outputs(out, x, y, what)
    return out


def _confidence(model, probe, samples: int, seed: int, tag: int, devices, lik: Likelihood = CATEGORICAL) -> float:
    was = model.training
    model.eval()
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        torch.manual_seed((seed * 1_000_003 + tag * 7919 + 0x5709) % (2**63 - 1))
        total, n = lik.confidence(model, probe, samples)
    model.train(was)
    if n == 0 or not math.isfinite(total):
        raise ValueError(f"retrain_stop: no finite confidence over {n} probe inputs")
    return total / n


def _params_of(found) -> int:
    s = found.spec
    n = 2 * found.mu_param().numel()
    b = getattr(found.module, s.bias_mu, None)
    return n + (2 * b.numel() if b is not None else 0)


def _trainable(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def compress(
    model: torch.nn.Module,
    train_loader: Iterable,
    *,
    k: Optional[int] = None,
    epochs: Optional[int] = None,
    val_loader: Optional[Iterable] = None,
    num_train: Optional[int] = None,
    config: Union[None, str, Dict[str, Any]] = None,
    device: Union[None, str, torch.device] = None,
    progress: bool = False,
    auto: bool = False,
    margins: Optional[Dict[str, float]] = None,
    samples: Optional[int] = None,
    max_retrains: Optional[int] = None,
    force: bool = False,
    likelihood: str = "categorical",
) -> Tuple[torch.nn.Module, CompressReport]:
    """Compresses a trained Bayesian ``model`` by stochastic weight sharing (2DGBNN).

    Returns ``(shared_model, report)``: a copy of ``model`` whose Bayesian layers are
    weight-shared and retrained (``model`` itself is left as it was), and a
    :class:`CompressReport`.

    * ``train_loader`` yields ``(images, labels)`` batches: the gradient pass of stage 1
      (``sharing.outliers.grad_batches`` batches) and stage-3 retraining.
    * ``k``: codebook size before merging (default the paper's 2000; must not exceed the
      inliers); ``epochs``: most stage-3 epochs (default the paper's 200).
    * ``val_loader``: validation images for the stop rule (default rule with one: stop as soon
      as the shared model is as confident as the source on 2,048 probe images, 8 checks per
      epoch; without one: all ``epochs``).
    * ``num_train``: training-set size of the ELBO's KL term (default ``len(train_loader.dataset)``).
    * ``config``: the Rust ``CompressConfig`` sections as a dict or JSON: ``sharing`` (passed to
      :func:`swbnn.plan`), ``retrain`` (lr, lr_rho, kl_weight, prior, optimizer, weight_decay,
      seed, epochs), ``retrain_stop`` (``"epochs"`` or ``{"confidence-recovered": {...}}``).
    * ``device``: where to retrain (default: where ``model``'s parameters are).
    * ``auto=True`` chooses K instead (``k`` is then refused): see :func:`swbnn.torch._search.search`.
      It needs ``val_loader``; ``margins`` (keys ``accuracy_points``, ``nll``, ``ece``,
      ``ood_auroc``), ``samples``, ``max_retrains`` and ``force`` set the search and are
      refused without it.
    * ``likelihood="gaussian"``: a regression network. Its output is ``[batch, 2 T]`` for ``T``
      targets, the means then the spreads' raw values (``std = softplus(s) + 0.001``, the Rust
      Gaussian head's), the loaders yield ``(inputs, targets)`` with float targets ``[batch]``
      or ``[batch, T]``, the data term is the Gaussian NLL, and the stop rule compares the
      predictive standard deviations. ``auto`` is for classifiers.

    Torch's random state is left as it was (everything runs under ``fork_rng``, seeded by
    ``retrain.seed``). Bad input raises ``ValueError``.
    """
    lik = _likelihood(likelihood)
    if auto:
        if k is not None:
            raise ValueError("auto=True searches K; k fixes it: give one of the two")
        if lik.name != "categorical":
            raise ValueError("auto=True judges candidates by a classifier's metrics; give k for a regression network")
        from ._search import search

        return search(
            model,
            train_loader,
            epochs=epochs,
            val_loader=val_loader,
            num_train=num_train,
            config=config,
            device=device,
            progress=progress,
            margins=margins,
            samples=samples,
            max_retrains=max_retrains,
            force=force,
        )
    given = [
        n
        for n, v in (("margins", margins), ("samples", samples), ("max_retrains", max_retrains), ("force", force or None))
        if v is not None
    ]
    if given:
        raise ValueError(f"{', '.join(given)} set the search of auto=True; without auto they have no effect")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    cfg = _config(config)
    rt = cfg["retrain"]
    if epochs is None:
        epochs = int(rt["epochs"])
    if int(epochs) < 0:
        raise ValueError(f"epochs must be >= 0, got {epochs}")
    prior = _prior(rt["prior"])
    stop_cfg = _stop_rule(cfg["retrain_stop"], val_loader)
    out_cfg = dict(OUTLIER_DEFAULTS)
    out_cfg.update((cfg["sharing"].get("outliers") or {}))
    seed = int(rt["seed"])

    found_src = find_layers(model)
    if not found_src:
        raise ValueError(
            "the model has no Bayesian layers to compress (supported: bayesian-torch "
            "LinearReparameterization/Conv2dReparameterization/LinearFlipout/Conv2dFlipout, "
            "blitz BayesianLinear/BayesianConv2d, torchbnn BayesLinear/BayesConv2d)"
        )
    for f in found_src:
        parts = [("weight", f.weight())]
        if f.bias() is not None:
            parts.append(("bias", f.bias()))
        for what, (mu, sigma) in parts:
            for name, t in (("mu", mu), ("sigma", sigma)):
                bad = ~torch.isfinite(t)
                if bad.any():
                    i = int(bad.reshape(-1).nonzero()[0])
                    raise ValueError(f"module `{f.path}`: {what} {name} is not finite at index {i} ({float(t.reshape(-1)[i])})")
    if num_train is None:
        try:
            num_train = len(train_loader.dataset)  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            raise ValueError("num_train is needed: train_loader has no sized .dataset") from None
    if int(num_train) < 1:
        raise ValueError(f"num_train must be >= 1, got {num_train}")
    n_train = int(num_train)

    if device is None:
        device = next(model.parameters()).device
    device = torch.device(device)
    devices = [device.index or 0] if device.type == "cuda" else []
    timings: Dict[str, float] = {}
    t_all = time.perf_counter()

    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        work = copy.deepcopy(model).to(device)
        found = find_layers(work)

        # Stage 1's gradient pass: mean d(-ELBO)/d mu over the first batches.
        t, c = time.perf_counter(), time.process_time()
        mus = [f.mu_param().detach().float().reshape(-1).cpu() for f in found]
        sigmas = [f.weight()[1].reshape(-1).cpu() for f in found]
        rhos = [raw_rho(f, f.spec.weight_mu, f.spec.weight_scale).cpu() for f in found]
        grad = None
        n_batches = 0
        want = int(out_cfg["grad_batches"]) if float(out_cfg["grad_top_fraction"]) > 0 else 1
        was = work.training
        work.eval()
        # Summed on the model's device, copied to the CPU once (no transfer per batch).
        sums = [torch.zeros(m.numel(), dtype=torch.float32, device=device) for m in mus]
        for batch in _progress.track(train_loader, want, "gradient pass", on=progress):
            x, y = _batch(batch, device, "train_loader", lik)
            logits = _forward(work, x, y, "train_loader", lik)
            if float(out_cfg["grad_top_fraction"]) > 0:
                kl = sum(
                    kl_each(f.mu_param(), f.sigma_live(f.spec.weight_scale), *prior).sum()
                    + (
                        kl_each(getattr(f.module, f.spec.bias_mu), f.sigma_live(f.spec.bias_scale), *prior).sum()
                        if getattr(f.module, f.spec.bias_mu, None) is not None
                        else 0.0
                    )
                    for f in found
                )
                loss = lik.nll(logits, y) + float(rt["kl_weight"]) * kl / n_train
                gs = torch.autograd.grad(loss, [f.mu_param() for f in found], allow_unused=True)
                for s, g in zip(sums, gs):
                    if g is not None:
                        s += g.detach().float().reshape(-1)
            n_batches += 1
            if n_batches >= want:
                break
        if n_batches == 0:
            raise ValueError("train_loader yields no batch")
        if float(out_cfg["grad_top_fraction"]) > 0:
            grad = torch.cat(sums).cpu() / n_batches
        timings["gradients_s"] = time.perf_counter() - t
        timings["gradients_cpu_s"] = time.process_time() - c

        # The stop rule's probe and the source's confidence (before any layer is replaced).
        probe: List[Tuple[torch.Tensor, torch.Tensor]] = []
        trace = None
        if stop_cfg is not None:
            images = 0
            for batch in val_loader:  # type: ignore[union-attr]
                x, y = _batch(batch, device, "val_loader", lik)
                probe.append((x, y))
                images += x.shape[0]
                if images >= stop_cfg["probe_images"]:
                    break
            if not probe:
                raise ValueError("val_loader yields no batch")
            _forward(work, probe[0][0][:2], torch.zeros(0, dtype=torch.long, device=device), "val_loader", lik)
            t = time.perf_counter()
            trace = {
                "probe_images": images,
                "source_confidence": _confidence(work, probe, stop_cfg["samples"], seed, 2**62, devices, lik),
                "checks": [],
                "stopped_after": None,
            }
            timings["source_confidence_s"] = time.perf_counter() - t
        work.train(was)

        # Stages 1-2 in the Rust core, on all layers' weights in module order.
        t, c = time.perf_counter(), time.process_time()
        mu_all = torch.cat(mus).numpy().astype(np.float32)
        sigma_all = torch.cat(sigmas).numpy().astype(np.float32)
        grad_all = None if grad is None else grad.numpy().astype(np.float32)
        k_eff = k if k is not None else ((cfg["sharing"].get("gmm") or {}).get("k", DEFAULT_K))
        if k_eff is not None:
            if int(k_eff) < 1:
                raise ValueError(f"k must be >= 1, got {k_eff}")
            # With a layer-relative threshold the inliers are known only to the plan, which
            # refuses such a K itself.
            fixed = float(out_cfg.get("tau_sd", 0.0)) == 0.0
            upper = int((np.abs(mu_all) <= np.float32(out_cfg["tau_w"])).sum()) if fixed else None
            if upper is not None and int(k_eff) > upper:
                raise PlanError(
                    f"K = {k_eff} is larger than the inlier weights (at most {upper} of "
                    f"{mu_all.size} have |mu| <= tau_w = {out_cfg['tau_w']}); choose a smaller k"
                )
        try:
            sharing = dict(cfg["sharing"]) | {"outliers": out_cfg}
            plan_bar = _progress.bar(1, "plan (stages 1-2, Rust)", unit="plan") if progress else None
            try:
                plan = _plan(mu_all, sigma_all, grad_all, sharing, k=k, seed=None, layers=[int(m.numel()) for m in mus])
            finally:
                if plan_bar is not None:
                    plan_bar.update(1)
                    plan_bar.close()
        except ValueError as e:
            raise PlanError(f"stages 1-2 (swbnn.plan) failed: {e}") from e
        timings["plan_s"] = time.perf_counter() - t
        timings["plan_cpu_s"] = time.process_time() - c
        for key, v in ((plan.report or {}).get("timings") or {}).items():
            if isinstance(v, (int, float)) and key != "total_s":
                timings[f"plan.{key}"] = float(v)

        t, c = time.perf_counter(), time.process_time()
        per_layer = layers_from_plan(plan, found, mus, rhos)
        cb_rho = torch.from_numpy(np.asarray(plan.init_sigma, np.float64))
        from ._layers import softplus_inv

        shared_layers = install(
            work,
            found,
            torch.from_numpy(np.asarray(plan.init_mu, np.float32)),
            softplus_inv(cb_rho).float(),
            per_layer,
            prior,
        )
        timings["build_s"] = time.perf_counter() - t
        timings["build_cpu_s"] = time.process_time() - c

        # Stage 3: retraining with the ELBO, the mixture KL and the two parameter groups.
        t = time.perf_counter()
        history = _retrain(work, shared_layers, train_loader, n_train, int(epochs), rt, stop_cfg, probe, trace, seed, devices, device, progress, lik)
        timings["retrain_s"] = time.perf_counter() - t
        work.train(was)  # the mode the user's model was in
    timings["total_s"] = time.perf_counter() - t_all

    rows = []
    for f, layer in zip(found_src, shared_layers):
        c = layer.counts()
        after = 2 * c["outliers"] + (2 * layer.bias_mu.numel() if layer.bias_mu is not None else 0)
        rows.append(
            {
                "path": f.path,
                "library": f.spec.library,
                "class": type(f.module).__name__,
                "shape": list(f.mu_param().shape),
                "weights": c["weights"],
                "outliers": c["outliers"],
                "ellipses": c["ellipses"],
                "shared": c["shared"],
                "params_before": _params_of(f),
                "params_after": after,
            }
        )
    before, after = _trainable(model), _trainable(work)
    total = {
        "weights": sum(r["weights"] for r in rows),
        "outliers": sum(r["outliers"] for r in rows),
        "ellipses": sum(r["ellipses"] for r in rows),
        "shared": sum(r["shared"] for r in rows),
        "bayesian_params_before": sum(r["params_before"] for r in rows),
        "bayesian_params_after": sum(r["params_after"] for r in rows) + 2 * plan.k,
        "params_before": before,
        "params_after": after,
        "ratio": before / max(after, 1),
    }
    report = CompressReport(
        k=plan.k,
        layers=rows,
        total=total,
        timings=timings,
        stop=trace,
        history=history,
        plan=plan.report,
        config={
            "sharing": plan.config,
            "retrain": dict(rt, epochs=int(epochs)),
            "retrain_stop": stop_cfg or "epochs",
            "likelihood": lik.name,
        },
    )
    return work, report


def _retrain(work, shared_layers, loader, n_train, epochs, rt, stop_cfg, probe, trace, seed, devices, device, progress, lik):
    rho, other = [], []
    for name, p in work.named_parameters():
        if not p.requires_grad:
            continue
        (rho if _RHO.search(name) else other).append(p)
    lr, lr_rho, wd = float(rt["lr"]), float(rt["lr_rho"]), float(rt["weight_decay"])
    opt_cfg = rt["optimizer"]
    (kind, o), = opt_cfg.items() if isinstance(opt_cfg, dict) and len(opt_cfg) == 1 else (("?", None),)
    groups = [{"params": other, "lr": lr, "weight_decay": wd}, {"params": rho, "lr": lr_rho, "weight_decay": 0.0}]
    if kind.lower() == "adam":
        opt = torch.optim.Adam(groups, eps=float((o or {}).get("epsilon", 1e-8)))
    elif kind.lower() == "sgd":
        o = o or {}
        opt = torch.optim.SGD(groups, lr=lr, momentum=float(o.get("momentum", 0.9)), nesterov=bool(o.get("nesterov", False)))
    else:
        raise ValueError(f"config: retrain.optimizer {opt_cfg!r}: {{'adam': {{...}}}} or {{'sgd': {{...}}}}")
    kl_weight = float(rt["kl_weight"])
    warmup = int(rt.get("kl_warmup_steps", 0))
    try:
        steps = len(loader)  # type: ignore[arg-type]
    except TypeError:
        steps = None
    checks = set()
    if stop_cfg is not None:
        c = max(1, min(stop_cfg["checks_per_epoch"], steps or 1))
        checks = {j * (steps or 1) // c for j in range(c)}
    history = []
    global_step = 0
    work.train()

    acc_dtype = torch.float64 if device.type in ("cpu", "cuda") else torch.float32

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def row(sums, n, epoch, t0, c0):
        # The loss terms are summed on the device and read once per epoch (no sync per step).
        means = (torch.stack(sums) / n).tolist()
        sync()
        timed = {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}
        return dict(zip(("loss", "nll", "kl"), means)) | {"epoch": epoch} | timed

    for epoch in range(epochs):
        sync()
        t0, c0 = time.perf_counter(), time.process_time()
        sums = [torch.zeros((), dtype=acc_dtype, device=device) for _ in range(3)]
        n = 0
        bar = _progress.bar(steps, f"stage 3, epoch {epoch + 1}/{epochs}") if progress else None
        for step, batch in enumerate(loader):
            if bar is not None:
                bar.update(1)
            if stop_cfg is not None and step in checks:
                done = epoch + step / steps if steps else float(epoch)
                conf = _confidence(work, probe, stop_cfg["samples"], seed, global_step, devices, lik)
                trace["checks"].append({"epochs_done": done, "confidence": conf})
                if conf >= trace["source_confidence"]:
                    trace["stopped_after"] = done
                    if n:
                        history.append(row(sums, n, epoch, t0, c0))
                    if bar is not None:
                        bar.close()
                    return history
            x, y = _batch(batch, device, "train_loader", lik)
            logits = _forward(work, x, y, "train_loader", lik)
            nll = lik.nll(logits, y)
            kl = sum(layer.kl_loss() for layer in shared_layers)
            w = kl_weight * (min(1.0, (global_step + 1) / warmup) if warmup > 0 else 1.0)
            loss = nll + w * kl / n_train
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            for acc, v in zip(sums, (loss, nll, kl)):
                acc += v.detach().to(acc_dtype)
            n += 1
            global_step += 1
        if bar is not None:
            bar.close()
        if n:
            r = row(sums, n, epoch, t0, c0)
            history.append(r)
            if progress:
                _progress.write(f"swbnn.torch: epoch {epoch + 1}/{epochs} loss {r['loss']:.4f} nll {r['nll']:.4f} ({r['seconds']:.1f}s)")
    return history
