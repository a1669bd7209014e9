"""``swbnn.torch.compress(..., auto=True)``: the smallest weight-shared PyTorch model within
margins of the source on validation. Skipped cleanly without torch or bayesian-torch."""

import json
import math

import pytest

torch = pytest.importorskip("torch", reason="swbnn.torch needs PyTorch: pip install swbnn[torch]")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import swbnn  # noqa: E402
import swbnn.torch as swt  # noqa: E402
from swbnn.torch import _search  # noqa: E402

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


NOISE = 3.0  # a task the model learns, but not perfectly
CONFIGURED_K = 64  # the ladder: 32, 64 (the smallest K of the defaults is 24)
FAST_STOP = {"confidence-recovered": {"probe_images": 128, "samples": 2, "checks_per_epoch": 2}}
WIDE = {"accuracy_points": 5.0, "nll": 0.2, "ece": 0.05, "ood_auroc": 0.1}


def _bt():
    return pytest.importorskip("bayesian_torch", reason="bayesian-torch is not installed")


def blobs(n, seed):
    """``n`` images 1x16x16 of 10 classes: a fixed random pattern per class, plus noise."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(10, 1, 16, 16, generator=torch.Generator().manual_seed(99))
    y = torch.randint(0, 10, (n,), generator=g)
    return centres[y] + NOISE * torch.randn(n, 1, 16, 16, generator=g), y


def loader(x, y, batch=100, shuffle=False):
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch, shuffle=shuffle)


class Tiny(nn.Module):
    """A bayesian-torch CNN; forward returns (logits, kl)."""

    def __init__(self):
        super().__init__()
        from bayesian_torch.layers import Conv2dReparameterization, LinearReparameterization

        self.conv = Conv2dReparameterization(1, 4, 3, stride=2)  # 16 -> 7
        self.fc = LinearReparameterization(4 * 7 * 7, 10)

    def forward(self, x):
        x, kl1 = self.conv(x)
        x, kl2 = self.fc(F.relu(x).flatten(1))
        return x, kl1 + kl2


@pytest.fixture(scope="module")
def task():
    _bt()
    xt, yt = blobs(1000, 1)
    xv, yv = blobs(LEAST, 2)
    torch.manual_seed(0)
    model = Tiny()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        for x, y in loader(xt, yt, batch=50, shuffle=True):
            out, kl = model(x)
            loss = F.cross_entropy(out, y) + kl / len(xt)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model, loader(xt, yt), loader(xv, yv)


@pytest.fixture(scope="module")
def searched(task):
    model, train, val = task
    shared, report = swt.compress(
        model,
        train,
        auto=True,
        val_loader=val,
        epochs=2,
        config={"sharing": {"gmm": {"k": CONFIGURED_K}}, "retrain_stop": FAST_STOP},
        margins=WIDE,
        samples=4,
    )
    return shared, report


def test_the_ladder_halves_the_configured_k_as_the_command_line_does():
    assert _search.ladder(100, 24) == [25, 50, 100]
    assert _search.ladder(2000, 24) == [31, 62, 125, 250, 500, 1000, 2000]
    assert _search.ladder(30, 24) == [30] and _search.ladder(10, 24) == [10]


def test_tile_shuffling_moves_whole_tiles_and_keeps_the_rest():
    x = torch.arange(3 * 2 * 9 * 10, dtype=torch.float32).reshape(3, 2, 9, 10)
    y = _search.tile_shuffled(x, torch.Generator().manual_seed(1))
    assert torch.equal(y[:, :, 8, :], x[:, :, 8, :]) and torch.equal(y[:, :, :, 8:], x[:, :, :, 8:])
    for i in range(3):
        tiles = lambda t: sorted(t[i, :, r : r + 2, c : c + 2].flatten().tolist() for r in range(0, 8, 2) for c in range(0, 8, 2))  # noqa: E731
        assert tiles(y) == tiles(x), "the same tiles, moved whole"
        assert not torch.equal(y[i], x[i]), "never the identity"
    again = _search.tile_shuffled(x, torch.Generator().manual_seed(1))
    assert torch.equal(y, again)
    with pytest.raises(ValueError, match="at least 4x4 pixels"):
        _search.tile_shuffled(torch.zeros(2, 1, 3, 8), torch.Generator())


def test_the_search_keeps_a_smaller_model_within_the_margins(task, searched):
    model, _, val = task
    shared, report = searched
    s = report.search
    assert s["config"]["margins"] == WIDE and s["config"]["samples"] == 4
    assert s["validation_images"] == LEAST
    assert s["source_parameters"] == sum(p.numel() for p in model.parameters())
    # Every candidate of the ladder is named: K 32 and 64, each with both encodings.
    named = sorted((c["k"], c["int8_outliers"]) for c in s["candidates"])
    assert named == [(32, False), (32, True), (64, False), (64, True)], named
    for c in s["candidates"]:
        assert c["method"] == "2dgbnn" and c["bytes"] > 0 and c["seconds"] >= 0 and c["verdict"]
    chosen = s["candidates"][s["chosen"]]
    assert chosen["verdict"] == "chosen" and s["within_margins"]
    assert within(chosen["validation"], s["source"], WIDE)
    assert not _search.outside(chosen["validation"], s["source"], WIDE)
    # Smaller than the configured K's files; every larger candidate was either judged within
    # (a step of the bisection) or not tried, and every smaller one judged is outside.
    configured = [c["bytes"] for c in s["candidates"] if c["k"] == CONFIGURED_K]
    assert chosen["bytes"] < min(configured)
    for c in s["candidates"]:
        if c["bytes"] > chosen["bytes"]:
            # Not tried: "cannot beat" the best kept when it was decided.
            assert c["verdict"] == "within" or c["verdict"]["not-tried"].startswith("cannot beat the "), c
        elif c is not chosen and c["validation"] is not None:
            assert "outside" in c["verdict"], c
    # The model returned is the one judged: the same numbers on the same seed.
    again = _search.judge(shared, val, 4)
    for key in ("accuracy", "nll", "ece", "ood_auroc"):
        assert again[key] == pytest.approx(chosen["validation"][key], abs=1e-9), key
    assert isinstance(shared.fc, swt.SharedLinear) and not isinstance(model.fc, swt.SharedLayer)
    assert chosen["parameters"] == sum(p.numel() for p in shared.parameters() if p.requires_grad)
    assert report.k == chosen["codebook"] and "search (validation):" in str(report)
    assert report.to_dict()["search"] is s


def test_the_source_is_judged_on_paired_draws(task, searched):
    model, _, val = task
    _, report = searched
    again = _search.judge(model, val, 4)
    for key in ("accuracy", "nll", "ece", "ood_auroc"):
        assert again[key] == report.search["source"][key], key
    state = torch.random.get_rng_state()
    _search.judge(model, val, 1)
    assert torch.equal(state, torch.random.get_rng_state()), "torch's random state is left as it was"


def test_no_candidate_within_is_an_error_naming_the_nearest_unless_forced(task):
    model, train, val = task
    tight = {"accuracy_points": 0.0, "nll": 0.0, "ece": 0.0, "ood_auroc": 0.0}
    args = dict(
        auto=True,
        val_loader=val,
        epochs=0,
        config={"sharing": {"gmm": {"k": CONFIGURED_K}}, "retrain_stop": "epochs"},
        margins=tight,
        samples=2,
        max_retrains=1,
    )
    # The bisection's first step is the larger of the two plans (K = 64).
    with pytest.raises(ValueError, match=r"no candidate of the search is within the margins on validation; the nearest, 2dgbnn K = 64.*outside: .*force=True returns it"):
        swt.compress(model, train, **args)
    shared, report = swt.compress(model, train, force=True, **args)
    s = report.search
    assert not s["within_margins"]
    chosen = s["candidates"][s["chosen"]]
    assert chosen["verdict"] == "nearest" and chosen["k"] == CONFIGURED_K
    assert not within(chosen["validation"], s["source"], tight)
    # One retraining: K = 64's two encodings judged; K = 32, smaller than a plan outside the
    # margins, is not tried by the bisection's rule.
    for c in s["candidates"]:
        if c["k"] == CONFIGURED_K:
            assert c["validation"] is not None
        else:
            assert "bisection" in c["verdict"]["not-tried"], c
    assert isinstance(shared.conv, swt.SharedConv2d)


def test_the_default_ladder_and_a_k_above_the_inliers(task):
    """Without a configured K the ladder starts at the Rust default K; a K that stages 1-2
    refuse (above the inliers here) is a failed candidate, and the search goes on."""
    model, train, val = task
    _, report = swt.compress(
        model,
        train,
        auto=True,
        val_loader=val,
        epochs=0,
        config={"retrain_stop": "epochs"},
        margins={"accuracy_points": 100.0, "nll": 100.0, "ece": 1.0, "ood_auroc": 1.0},
        samples=1,
        max_retrains=1,
    )
    s = report.search
    ladder = _search.ladder(DEFAULTS["k"], DEFAULTS["search"]["smallest_k"])
    assert ladder[-1] == DEFAULTS["k"] and {c["k"] for c in s["candidates"]} == set(ladder)
    inliers = sum(int((f.abs() <= DEFAULTS["outliers"]["tau_w"]).sum()) for f in (model.conv.mu_kernel, model.fc.mu_weight))
    failed = [c for c in s["candidates"] if isinstance(c["verdict"], dict) and "failed" in c["verdict"]]
    assert {c["k"] for c in failed} >= {k for k in ladder if k > inliers} and DEFAULTS["k"] > inliers
    for c in failed:
        assert c["verdict"]["failed"] and c["bytes"] == 0 and c["validation"] is None, c
        if c["k"] > inliers:
            # The layer-relative threshold (tau_sd) leaves more inliers than |mu| <= tau_w: the plan refuses.
            assert f"the GMM needs at least K = {c['k']} inlier weights" in c["verdict"]["failed"]
    # One bisection step, on the middle plan by size, within margins this wide: its int8 file
    # is chosen, and the smaller plans are left for the spent budget.
    chosen = s["candidates"][s["chosen"]]
    assert chosen["verdict"] == "chosen" and chosen["int8_outliers"]
    judged = [c for c in s["candidates"] if c["validation"] is not None]
    assert judged == [chosen], judged
    for c in s["candidates"]:
        if c["bytes"] and c["bytes"] < chosen["bytes"]:
            assert c["verdict"] == {"not-tried": "the search's stage-3 budget (1 retrainings) was spent"}, c


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"k": 16}, "auto=True searches K; k fixes it"),
        ({"val_loader": None}, f"pass val_loader \\(at least {LEAST} images\\)"),
        ({"margins": {"nll": -0.01}}, r"margins\['nll'\] = -0.01: a margin must be a finite number >= 0"),
        ({"margins": {"ood_auroc": float("nan")}}, r"margins\['ood_auroc'\] = nan"),
        ({"margins": {"auroc": 0.1}}, r"unknown key\(s\) \['auroc'\]"),
        ({"samples": 0}, "samples must be an integer >= 1"),
        ({"max_retrains": 0}, "max_retrains must be >= 1 for swbnn.torch"),
        ({"config": {"sharing": {"gmm": {"k": 1}}}}, "sharing.gmm.k = 1: the search needs K >= 2"),
        ({"config": {"retrain": {"lrr": 1}}}, r"unknown field `retrain.lrr`"),
    ],
)
def test_torch_auto_bad_input(task, kwargs, message):
    model, train, val = task
    args = dict(auto=True, val_loader=val)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        swt.compress(model, train, **args)


def test_torch_auto_needs_enough_validation_images(task):
    model, train, _ = task
    xv, yv = blobs(LEAST - 1, 3)
    with pytest.raises(ValueError, match=f"val_loader holds {LEAST - 1} images: auto=True needs at least {LEAST}"):
        swt.compress(model, train, auto=True, val_loader=loader(xv, yv))
    # A loader without a sized data set is counted as it is read.
    unsized = [(x, y) for x, y in loader(xv, yv)]
    with pytest.raises(ValueError, match=f"val_loader yields {LEAST - 1} images: auto=True needs at least {LEAST}"):
        swt.compress(model, train, auto=True, val_loader=unsized)


def test_search_settings_without_auto_are_refused(task):
    model, train, val = task
    for kwargs, name in (({"margins": WIDE}, "margins"), ({"samples": 3}, "samples"), ({"force": True}, "force")):
        with pytest.raises(ValueError, match=f"{name} set the search of auto=True"):
            swt.compress(model, train, k=16, epochs=0, val_loader=val, **kwargs)


def test_margins_are_checked_as_the_rust_rule():
    src = {"accuracy": 0.90, "nll": 0.30, "ece": 0.010, "ood_auroc": 0.80}
    m = DEFAULTS["search"]["margins"]
    ok = {"accuracy": 0.8971, "nll": 0.309, "ece": 0.0119, "ood_auroc": 0.791}
    assert _search.outside(ok, src, m) == []
    bad = {"accuracy": 0.8960, "nll": 0.311, "ece": 0.0121, "ood_auroc": 0.789}
    out = _search.outside(bad, src, m)
    assert len(out) == 4 and out[0].startswith("accuracy 89.60% < 89.70%"), out
    assert math.isclose(_search._excess({"accuracy": 0.9, "nll": 0.33, "ece": 0.01, "ood_auroc": 0.8}, src, m), 2.0)
