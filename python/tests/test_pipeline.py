"""train, compress and evaluate as the command line runs them (needs Fashion-MNIST, which CI
installs; skipped without it)."""

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

import swbnn

FASHION = Path(os.environ.get("SWBNN_DATA", "/usr/share/datasets")) / "fashion-mnist"
pytestmark = pytest.mark.skipif(
    not any((FASHION / f).exists() for f in ["t10k-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte"]),
    reason="Fashion-MNIST is not installed",
)


def read_idx(name):
    f = FASHION / f"{name}.gz"
    raw = gzip.open(f).read() if f.exists() else (FASHION / name).read_bytes()
    return raw


def fashion_test():
    """The test split normalised in float32 exactly as bnn-data's Normalize does."""
    x = np.frombuffer(read_idx("t10k-images-idx3-ubyte"), np.uint8, offset=16)
    x = x.reshape(-1, 1, 28, 28).astype(np.float32) / np.float32(255)
    x = (x - np.float32(0.2860)) * (np.float32(1) / np.float32(0.3530))
    y = np.frombuffer(read_idx("t10k-labels-idx1-ubyte"), np.uint8, offset=8).astype(np.int64)
    return x, y


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    history = swbnn.train("fashion-mnist", "mlp", "bayesian", d / "bbb", epochs=1, subset=256, seed=1)
    assert len(history) == 1 and np.isfinite(history[0]["loss"])
    report = swbnn.compress(d / "bbb", "fashion-mnist", d / "m.swb", k=20, epochs=1, subset=256)
    return d, report


def test_compress_report(trained):
    d, r = trained
    assert (d / "m.swb").stat().st_size > 0
    assert r["outliers"] + r["plain_shared"] + r["ellipse_weights"] == r["shareable_weights"]
    with pytest.raises(ValueError, match="already exists"):
        swbnn.compress(d / "bbb", "fashion-mnist", d / "m.swb", k=20, epochs=1, subset=256)
    with pytest.raises(ValueError, match="already holds a model"):
        swbnn.train("fashion-mnist", "mlp", "bayesian", d / "bbb", epochs=1, subset=256)


def test_evaluate_equals_model_evaluate(trained):
    """`swbnn.evaluate` (the CLI's data path) and `Model.evaluate` on the same images and
    seed give the same numbers: the same weight samples, batch by batch."""
    d, _ = trained
    cli = swbnn.evaluate(d / "m.swb", "fashion-mnist", samples=2, seed=4)
    x, y = fashion_test()
    ours = swbnn.load(d / "m.swb").evaluate(x, y, samples=2, seed=4)
    for key in ["accuracy", "nll", "ece", "mce", "brier"]:
        assert ours["summary"][key] == pytest.approx(cli["summary"][key], abs=1e-12), key
    assert cli["summary"]["n"] == len(y)
