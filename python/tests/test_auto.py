"""``swbnn.compress(..., auto=True)``: the command line's `--auto` search from Python (the
smallest compression within margins of the source on validation). The PyTorch search is
tested in test_auto_torch.py."""

import json

import numpy as np
import pytest

import swbnn

DEFAULTS = json.loads(swbnn._native.defaults_json())
LEAST = DEFAULTS["min_validation_images"]


def within(v, source, margins):
    """The margins' rule, written out here: what a chosen candidate must satisfy."""
    ok = (
        v["accuracy"] >= source["accuracy"] - margins["accuracy_points"] / 100
        and v["nll"] <= source["nll"] + margins["nll"]
        and v["ece"] <= source["ece"] + margins["ece"]
    )
    if v.get("ood_auroc") is not None and source.get("ood_auroc") is not None:
        ok = ok and v["ood_auroc"] >= source["ood_auroc"] - margins["ood_auroc"]
    return ok


# swbnn.compress(auto=True): the command line's search.
BAD_MARGINS = [
    ({"nll": -0.1}, r"margins\['nll'\] = -0.1: a margin must be a finite number >= 0"),
    ({"ece": float("nan")}, r"margins\['ece'\] = nan: a margin must be a finite number >= 0"),
    ({"accuracy_points": float("inf")}, r"margins\['accuracy_points'\] = inf"),
    ({"nll": "0.1"}, r"margins\['nll'\] = '0.1'"),
    ({"accuracy": 0.3}, r"unknown key\(s\) \['accuracy'\] \(known: \['accuracy_points', 'ece', 'nll', 'ood_auroc'\]\)"),
    ([0.3], r"margins must be a dict"),
]


def test_compress_auto_refuses_k_and_bad_settings(tmp_path):
    missing = tmp_path / "no-model"
    with pytest.raises(ValueError, match="auto=True searches K; k fixes it"):
        swbnn.compress(missing, "fashion-mnist", tmp_path / "m.swb", auto=True, k=16)
    for margins, message in BAD_MARGINS:
        with pytest.raises(ValueError, match=message):
            swbnn.compress(missing, "fashion-mnist", tmp_path / "m.swb", auto=True, margins=margins)
    with pytest.raises(ValueError, match="samples must be an integer >= 1, got 0"):
        swbnn.compress(missing, "fashion-mnist", tmp_path / "m.swb", auto=True, samples=0)
    with pytest.raises(ValueError, match="max_retrains must be an integer >= 0, got -1"):
        swbnn.compress(missing, "fashion-mnist", tmp_path / "m.swb", auto=True, max_retrains=-1)
    with pytest.raises(ValueError, match="margins, samples set the search of auto=True"):
        swbnn.compress(missing, "fashion-mnist", tmp_path / "m.swb", k=16, margins={"nll": 0.1}, samples=3)
    assert not (tmp_path / "m.swb").exists()


def test_the_search_settings_are_the_rust_defaults_with_what_is_given():
    s = swbnn._search_settings({"nll": 0.05}, 7, None)
    assert s["margins"] == dict(DEFAULTS["search"]["margins"], nll=0.05)
    assert s["samples"] == 7 and s["max_retrains"] == DEFAULTS["search"]["max_retrains"]
    assert swbnn._search_settings(None, None, None) == DEFAULTS["search"]


def _images(n, side, seed):
    """``n`` grey ``side x side`` uint8 images of 3 classes: class ``c`` lights a third of the
    rows, on noise (as test_your_data.py)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    x = rng.integers(0, 90, size=(n, side, side)).astype(np.uint8)
    for c in range(3):
        rows = slice(c * side // 3, (c + 1) * side // 3)
        lit = rng.random((n, side, side)) < 0.75
        x[y == c, rows, :] += (160 * lit[y == c, rows, :]).astype(np.uint8)
    return x, y


def test_compress_auto_writes_the_smallest_file_within_the_margins(tmp_path):
    x, y = _images(1400, 8, 1)
    det, bnn, out = tmp_path / "det", tmp_path / "bnn", tmp_path / "m.swb"
    swbnn.train((x, y), "mlp", "deterministic", det, epochs=1, validation=LEAST)
    swbnn.train((x, y), "mlp", "bayesian", bnn, epochs=1, validation=LEAST, start=det)
    margins = {"accuracy_points": 2.0, "nll": 0.05, "ece": 0.02, "ood_auroc": 0.05}
    # Too few validation images for the search: refused before any work.
    with pytest.raises(ValueError, match=f"at least {LEAST} validation images"):
        swbnn.compress(bnn, (x, y), out, auto=True, validation=LEAST - 1)
    report = swbnn.compress(
        bnn,
        (x, y),
        out,
        auto=True,
        validation=LEAST,
        config={"sharing": {"gmm": {"k": 16}}},
        margins=margins,
        samples=4,
        max_retrains=1,
        force=True,
    )
    search = out.with_name("m.search.json")
    assert out.stat().st_size > 0 and search.exists()
    on_disk = json.loads(search.read_text())
    assert on_disk["candidates"] == report["candidates"]
    assert report["config"]["margins"] == margins and report["config"]["samples"] == 4
    assert report["validation_images"] == LEAST
    methods = {c["method"] for c in report["candidates"]}
    assert methods == {"qbnn", "2dgbnn", "mu-only"}, methods
    i = report["written"]
    chosen = report["candidates"][i]
    assert chosen["bytes"] == out.stat().st_size
    if report["within_margins"]:
        assert chosen["verdict"] == "chosen"
        assert within(chosen["validation"], report["source"], margins)
        # No smaller file was within the margins.
        for c in report["candidates"]:
            if c["bytes"] < chosen["bytes"] and c["validation"] is not None:
                assert "outside" in c["verdict"], c
    else:
        assert chosen["verdict"] == "nearest"
    # At most one stage-3 retraining: a second sharing plan is not tried.
    retrained = {(c["method"], c["k"]) for c in report["candidates"] if c["retrain_steps"] > 0}
    assert len(retrained) <= 1
