"""``swbnn.torch.compress(..., auto=True)``: the smallest weight-shared model whose validation
metrics stay within margins of the Bayesian network it came from, as ``swbnn compress --auto``
chooses it.

The candidates are 2DGBNN over a geometric ladder of K (the configured K, halved while it stays
at or above the search's smallest K), each saved with ``f32`` and with int8 outliers. The
command line's other candidates, 1-D sharing and the quantised BNNs, have no PyTorch
compression and are left out. Stages 1-2 fix a candidate's file size (stage 3 changes the
values the file holds, not how many), so every size is measured first, on the un-retrained
model (stages 1-2 run again, deterministically, for each K retrained: ``compress`` is reused
as it is); the candidates, smallest first, are then searched by bisection (quality taken to grow
with the file), at most ``max_retrains`` retrained; the smallest within every margin is kept and
every candidate not judged is recorded with the reason.
Each is judged as a user of its file gets it (saved with :func:`swbnn.torch.save`, loaded
back) on ``val_loader`` and on its tile-shuffled images (the OOD proxy), with torch seeded
the same for every model, so the comparisons are paired.
"""

from __future__ import annotations

import copy
import math
import os
import tempfile
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from .. import _search_defaults, _search_settings, metrics
from ._compress import DEFAULT_K, PlanError, _batch, _config, _forward, _trainable
from ._compress import compress as _compress_one

#: Tiles a side of the OOD proxy's images (as ``bnn_data::tiles::TILE_GRID``).
TILE_GRID = 4
#: Torch's seed before every validation pass: one noise stream for every model.
EVALUATION_SEED = 0x5EA2C4
#: Seed of the tile orders of the OOD proxy (the same images for every model).
OOD_SEED = 0x711E5
#: Bins of the ECE the margins hold.
ECE_BINS = 15


def ladder(k: int, smallest_k: int) -> List[int]:
    """The K values tried for a configured ``k``: ``k``, ``k // 2``, ... while at or above
    ``smallest_k`` (always ``k`` itself), smallest first (``SearchConfig::ladder``)."""
    out = [k]
    v = k // 2
    while v >= smallest_k and v >= 2:
        out.append(v)
        v //= 2
    return out[::-1]


def tile_shuffled(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``x`` (``[batch, C, H, W]``) with each image cut into a 4x4 grid of tiles and the tiles
    put in an order drawn from ``generator`` (never the identity); the pixels beyond the last
    whole tile stay where they are."""
    b, c, h, w = x.shape
    if h < TILE_GRID or w < TILE_GRID:
        raise ValueError(
            f"the OOD proxy shuffles {TILE_GRID}x{TILE_GRID} tiles and needs images of at least "
            f"{TILE_GRID}x{TILE_GRID} pixels; val_loader's are {c}x{h}x{w}"
        )
    g = TILE_GRID
    th, tw = h // g, w // g
    order = torch.argsort(torch.rand(b, g * g, generator=generator), dim=1)
    ident = (order == torch.arange(g * g)).all(dim=1)
    order[ident] = torch.roll(order[ident], -1, dims=1)
    core = x[:, :, : g * th, : g * tw].reshape(b, c, g, th, g, tw).permute(0, 2, 4, 1, 3, 5)
    tiles = core.reshape(b, g * g, c, th, tw)
    idx = order.to(x.device)[:, :, None, None, None].expand_as(tiles)
    moved = torch.gather(tiles, 1, idx).reshape(b, g, g, c, th, tw).permute(0, 3, 1, 4, 2, 5)
    out = x.clone()
    out[:, :, : g * th, : g * tw] = moved.reshape(b, c, g * th, g * tw)
    return out


def _device_of(model: torch.nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def _predictive(model, x, y, samples: int) -> np.ndarray:
    p = sum(F.softmax(_forward(model, x, y, "val_loader").float(), dim=1) for _ in range(samples)) / samples
    return p.cpu().numpy().astype(np.float32)


def outside(m: Dict[str, Any], source: Dict[str, Any], margins: Dict[str, float]) -> List[str]:
    """The margins ``m`` breaks against ``source``, each as ``name (value against limit)``
    (``ValidationMetrics::outside``)."""
    out = []
    floor = source["accuracy"] - margins["accuracy_points"] / 100.0
    if m["accuracy"] < floor:
        out.append(f"accuracy {100 * m['accuracy']:.2f}% < {100 * floor:.2f}%")
    if m["nll"] > source["nll"] + margins["nll"]:
        out.append(f"NLL {m['nll']:.4f} > {source['nll'] + margins['nll']:.4f}")
    if m["ece"] > source["ece"] + margins["ece"]:
        out.append(f"ECE {m['ece']:.4f} > {source['ece'] + margins['ece']:.4f}")
    a, s = m.get("ood_auroc"), source.get("ood_auroc")
    if a is not None and s is not None and a < s - margins["ood_auroc"]:
        out.append(f"OOD AUROC {a:.4f} < {s - margins['ood_auroc']:.4f}")
    return out


def _excess(m: Dict[str, Any], source: Dict[str, Any], margins: Dict[str, float]) -> float:
    """How far past its worst margin ``m`` is, in margins (0 within all)."""

    def over(by: float, margin: float) -> float:
        return max(by - margin, 0.0) / max(margin, 1e-12)

    e = max(
        over(100.0 * (source["accuracy"] - m["accuracy"]), margins["accuracy_points"]),
        over(m["nll"] - source["nll"], margins["nll"]),
        over(m["ece"] - source["ece"], margins["ece"]),
    )
    if m.get("ood_auroc") is not None and source.get("ood_auroc") is not None:
        e = max(e, over(source["ood_auroc"] - m["ood_auroc"], margins["ood_auroc"]))
    return e


def judge(
    model: torch.nn.Module,
    val_loader: Iterable,
    samples: int,
    source: Optional[Dict[str, Any]] = None,
    margins: Optional[Dict[str, float]] = None,
) -> Dict[str, Any]:
    """``model``'s validation metrics: accuracy, NLL of the Monte Carlo predictive, ECE (15
    bins) and the AUROC (predictive-entropy score) of the validation images against their
    tile-shuffled copies; ``images``: how many were judged. Torch is seeded with
    :data:`EVALUATION_SEED` first (its state is restored after) and the model is in eval mode
    (batch norm's running statistics) while judged. Against ``source``, the OOD pass is
    skipped (``ood_auroc`` ``None``) when a margin above is already broken."""
    dev = _device_of(model)
    devices = [dev.index or 0] if dev.type == "cuda" else []
    was = model.training
    model.eval()
    try:
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            torch.manual_seed(EVALUATION_SEED)
            probs, labels = [], []
            for batch in val_loader:
                x, y = _batch(batch, dev, "val_loader")
                probs.append(_predictive(model, x, y, samples))
                labels.append(y.cpu().numpy().astype(np.int64))
            if not probs:
                raise ValueError("val_loader yields no batch")
            p, y = np.concatenate(probs), np.concatenate(labels)
            m: Dict[str, Any] = {
                "accuracy": float(metrics.accuracy(p, y)),
                "nll": float(metrics.nll(p, y)),
                "ece": float(metrics.ece(p, y, ECE_BINS)),
                "ood_auroc": None,
                "images": int(len(y)),
            }
            for key in ("nll", "ece"):
                if not math.isfinite(m[key]):
                    raise ValueError(f"the model's validation {key.upper()} is {m[key]}: not finite")
            if source is not None and margins is not None and outside(m, source, margins):
                return m
            g = torch.Generator().manual_seed(OOD_SEED)
            ood = []
            for batch in val_loader:
                x, y = _batch(batch, dev, "val_loader")
                ood.append(_predictive(model, tile_shuffled(x, g), y, samples))
            m["ood_auroc"] = float(metrics.auroc(-metrics.entropy(p), -metrics.entropy(np.concatenate(ood))))
            return m
    finally:
        model.train(was)


def _file_bytes(shared: torch.nn.Module, int8: bool, tmp: str) -> int:
    from ._file import save

    path = os.path.join(tmp, f"candidate-{'int8' if int8 else 'f32'}.swb")
    save(shared, path, int8_outliers=int8)
    return os.path.getsize(path)


def _as_file(shared: torch.nn.Module, source: torch.nn.Module, int8: bool, tmp: str, device) -> Tuple[torch.nn.Module, int]:
    """The model a user of ``shared``'s file gets (int8 outliers are lossy), and its bytes."""
    from ._file import load, save

    path = os.path.join(tmp, f"chosen-{'int8' if int8 else 'f32'}.swb")
    save(shared, path, int8_outliers=int8)
    fresh = copy.deepcopy(source)
    load(fresh, path)
    fresh.train(shared.training)
    return fresh.to(device), os.path.getsize(path)


def candidate_line(c: Dict[str, Any]) -> str:
    """One line of a candidate: ``2dgbnn K = 48, int8 outliers: 5123 bytes, chosen``."""
    name = f"{c['method']} K = {c['k']}" + (", int8 outliers" if c["int8_outliers"] else "")
    v = c["verdict"]
    if v == "chosen":
        why = "chosen"
    elif v == "within":
        why = "within the margins"
    elif v == "nearest":
        why = "nearest the margins"
    else:
        (kind, detail), = v.items()
        why = f"{kind.replace('-', ' ')}: " + ("; ".join(detail) if isinstance(detail, list) else detail)
    return f"{name}: {c['bytes']} bytes, {why}"


def _sized(loader) -> Optional[int]:
    try:
        return len(loader.dataset)  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        return None


def search(
    model: torch.nn.Module,
    train_loader: Iterable,
    *,
    epochs: Optional[int],
    val_loader: Optional[Iterable],
    num_train: Optional[int],
    config,
    device,
    progress: bool,
    margins: Optional[Dict[str, float]],
    samples: Optional[int],
    max_retrains: Optional[int],
    force: bool,
):
    """``compress(..., auto=True)``: returns ``(shared_model, report)`` for the smallest file
    within ``margins`` on ``val_loader`` (see the module's text); ``report`` is the chosen
    candidate's :class:`CompressReport` and ``report.search`` the whole search: ``config``
    (margins, samples, smallest_k, max_retrains), ``source`` (the source's validation metrics),
    ``source_parameters``, ``validation_images``, ``candidates`` (in the order decided: method,
    k, codebook, int8_outliers, bytes, parameters, validation, seconds, verdict: ``"chosen"``,
    ``"within"``, ``{"outside": [...]}``, ``{"not-tried": why}``, ``{"failed": error}`` or
    ``"nearest"``), ``chosen`` (the index of the model returned), ``within_margins`` and
    ``seconds``. The model returned is the one its file holds: save it with
    ``swbnn.torch.save(shared, path, int8_outliers=report.search["candidates"][i]["int8_outliers"])``
    to write the size the search measured. When no candidate is within the margins it is a
    ``ValueError`` naming the nearest, unless ``force=True`` returns that one.
    """
    settings = _search_settings(margins, samples, max_retrains)
    cfg_search = {key: settings[key] for key in ("margins", "samples", "smallest_k", "max_retrains")}
    m_, n_samples, retrain_budget = settings["margins"], settings["samples"], settings["max_retrains"]
    if retrain_budget < 1:
        raise ValueError(
            f"max_retrains must be >= 1 for swbnn.torch: its candidates are all retrained (got {retrain_budget})"
        )
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    least = _search_defaults()["min_validation_images"]
    if val_loader is None:
        raise ValueError(
            f"auto=True judges every candidate on validation images: pass val_loader (at least {least} images)"
        )
    known = _sized(val_loader)
    if known is not None and known < least:
        raise ValueError(
            f"val_loader holds {known} images: auto=True needs at least {least} to hold ECE to a margin"
        )
    cfg = _config(config)  # bad settings are refused before any work
    configured = int((cfg["sharing"].get("gmm") or {}).get("k", DEFAULT_K))
    if configured < 2:
        raise ValueError(f"config: sharing.gmm.k = {configured}: the search needs K >= 2")
    if device is None:
        device = _device_of(model)
    device = torch.device(device)
    started = time.perf_counter()

    source = judge(model, val_loader, n_samples)
    if source["images"] < least:
        raise ValueError(
            f"val_loader yields {source['images']} images: auto=True needs at least {least} to hold ECE to a margin"
        )
    n_images = source.pop("images")

    def say(c):
        if progress:
            print(f"swbnn.torch search: {candidate_line(c)}")

    # Every candidate's size first: stages 1-2 without stage 3 (epochs 0) fix it.
    plan_cfg = dict(cfg, retrain_stop="epochs")
    candidates: List[Dict[str, Any]] = []
    plans: List[Dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="swbnn-search-") as tmp:
        for k in ladder(configured, settings["smallest_k"]):
            t = time.perf_counter()
            base = {"method": "2dgbnn", "k": k, "codebook": None, "parameters": 0, "validation": None}
            try:
                planned, rep = _compress_one(
                    model, train_loader, k=k, epochs=0, val_loader=None, num_train=num_train, config=plan_cfg, device=device
                )
            except PlanError as e:
                c = dict(base, int8_outliers=False, bytes=0, seconds=time.perf_counter() - t, verdict={"failed": str(e)})
                candidates.append(c)
                say(c)
                continue
            sizes = {int8: _file_bytes(planned, int8, tmp) for int8 in (True, False)}
            del planned
            plans.append(dict(base, codebook=rep.k, sizes=sizes, seconds=time.perf_counter() - t))
        # Smallest file first; searched by bisection, as the Rust search: quality is taken to
        # grow with the file, so a plan within the margins sends the search to the smaller
        # half, one outside to the larger half; each step retrains one plan.
        plans.sort(key=lambda p: (p["sizes"][True], p["k"]))

        kept: Optional[Tuple[int, torch.nn.Module, Any]] = None  # the chosen one
        nearest: Optional[Tuple[float, int, int, torch.nn.Module, Any]] = None
        judged = set()
        failed_above: Optional[str] = None
        lo, hi, retrains = 0, len(plans), 0
        while lo < hi and retrains < retrain_budget:
            mid = (lo + hi) // 2
            retrains += 1
            judged.add(mid)
            p = plans[mid]
            t = time.perf_counter()
            shared, rep = _compress_one(
                model,
                train_loader,
                k=p["k"],
                epochs=epochs,
                val_loader=val_loader,
                num_train=num_train,
                config=config,
                device=device,
                progress=progress,
            )
            seconds = p["seconds"] + time.perf_counter() - t
            within = False
            for int8 in (True, False):
                c = {key: p[key] for key in ("method", "k", "codebook")}
                c.update(int8_outliers=int8, bytes=p["sizes"][int8], parameters=0, validation=None, seconds=0.0)
                if within:
                    c["verdict"] = {"not-tried": f"cannot beat the {candidates[kept[0]]['bytes']} bytes already kept"}
                    candidates.append(c)
                    say(c)
                    continue
                t = time.perf_counter()
                user, nbytes = _as_file(shared, model, int8, tmp, device)
                v = judge(user, val_loader, n_samples, source, m_)
                v.pop("images")
                broken = outside(v, source, m_)
                c.update(
                    bytes=nbytes,
                    parameters=_trainable(user),
                    validation=v,
                    seconds=seconds + time.perf_counter() - t,
                    retrain_epochs=len(rep.history),
                    verdict={"outside": broken} if broken else "within",
                )
                seconds = 0.0
                candidates.append(c)
                i = len(candidates) - 1
                if not broken:
                    within = True
                    if kept is None or nbytes < candidates[kept[0]]["bytes"]:
                        kept = (i, user, rep)
                else:
                    key = (_excess(v, source, m_), nbytes)
                    if nearest is None or key < nearest[:2]:
                        nearest = (key[0], nbytes, i, user, rep)
                say(c)
            if within:
                hi = mid
            else:
                failed_above = f"2dgbnn K = {p['k']}"
                lo = mid + 1
        for j, p in enumerate(plans):
            if j in judged:
                continue
            for int8 in (True, False):
                c = {key: p[key] for key in ("method", "k", "codebook")}
                c.update(int8_outliers=int8, bytes=p["sizes"][int8], parameters=0, validation=None, seconds=0.0)
                if kept is not None and c["bytes"] >= candidates[kept[0]]["bytes"]:
                    why = f"cannot beat the {candidates[kept[0]]['bytes']} bytes already kept"
                elif failed_above is not None and j < lo:
                    why = (
                        f"a larger candidate ({failed_above}) is outside the margins, so this smaller one "
                        "is taken to be too (the bisection's rule)"
                    )
                else:
                    why = f"the search's stage-3 budget ({retrain_budget} retrainings) was spent"
                c["verdict"] = {"not-tried": why}
                candidates.append(c)
                say(c)

    report_search: Dict[str, Any] = {
        "config": cfg_search,
        "source": source,
        "source_parameters": _trainable(model),
        "validation_images": n_images,
        "candidates": candidates,
        "chosen": None,
        "within_margins": False,
        "seconds": 0.0,
    }
    if kept is not None:
        i, user, rep = kept
        candidates[i]["verdict"] = "chosen"
        report_search.update(chosen=i, within_margins=True)
    elif nearest is not None and force:
        _, _, i, user, rep = nearest
        candidates[i]["verdict"] = "nearest"
        report_search["chosen"] = i
    elif nearest is not None:
        i = nearest[2]
        raise ValueError(
            f"no candidate of the search is within the margins on validation; the nearest, "
            f"{candidate_line(candidates[i])}; force=True returns it"
        )
    else:
        raise ValueError(
            "no candidate of the search could be judged: "
            + "; ".join(candidate_line(c) for c in candidates)
        )
    report_search["seconds"] = time.perf_counter() - started
    rep.search = report_search
    return user, rep
