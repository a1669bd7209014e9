"""Your own data from NumPy: train, compress and evaluate take arrays ``(x, y)``, and
``Model.predict`` on raw uint8 images gives what ``swbnn.evaluate`` (the command line's eval)
measures on them."""

import re

import numpy as np
import pytest

import swbnn


def _images(n, side, seed):
    """``n`` grey ``side x side`` uint8 images of 3 classes: class ``c`` lights a third of
    the rows, on noise."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    x = rng.integers(0, 90, size=(n, side, side)).astype(np.uint8)
    for c in range(3):
        rows = slice(c * side // 3, (c + 1) * side // 3)
        lit = rng.random((n, side, side)) < 0.75
        x[y == c, rows, :] += (160 * lit[y == c, rows, :]).astype(np.uint8)
    return x, y


@pytest.fixture(scope="module")
def arrays_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arrays")
    x, y = _images(1400, 8, 1)
    xt, yt = _images(300, 8, 2)
    # NumPy's defaults: int64 labels; images as floats in [0, 1] for one of the steps.
    det, bnn, swb = tmp / "det", tmp / "bnn", tmp / "m.swb"
    swbnn.train((x, y), "mlp", "deterministic", det, epochs=1, validation=500)
    swbnn.train(
        (x.astype(np.float64) / 255.0, y), "mlp", "bayesian", bnn, epochs=1, validation=500, start=det
    )
    report = swbnn.compress(bnn, (x, y), swb, k=16, validation=500)
    return swb, report, (xt, yt)


def test_train_compress_and_evaluate_from_arrays(arrays_model):
    swb, report, (xt, yt) = arrays_model
    assert report["gaussians_fitted"] == 16
    assert report["shared_model_params"] < report["full_model_params"]
    model = swbnn.load(swb)
    norm = model.normalization
    assert norm is not None and len(norm["mean"]) == 1 and 0.05 < norm["std"][0] < 0.5
    assert model.info()["normalization"] == norm
    ev = swbnn.evaluate(swb, (xt, yt), samples=10, seed=3)
    assert ev["summary"]["n"] == 300
    assert ev["summary"]["accuracy"] > 0.6
    # Test arrays without the last class (labels 0 and 1 of a 3-class model) are evaluated.
    keep = yt < 2
    ev2 = swbnn.evaluate(swb, (xt[keep], yt[keep]), samples=10, seed=3)
    assert ev2["summary"]["n"] == int(keep.sum())


def test_calibrate_from_arrays_stores_the_temperature(arrays_model, tmp_path):
    swb, _, _ = arrays_model
    x, y = _images(1400, 8, 1)
    copy = tmp_path / "c.swb"
    copy.write_bytes(swb.read_bytes())
    fit = swbnn.calibrate(copy, (x, y), samples=5)
    assert fit["images"] == 500 and 0.05 <= fit["temperature"] <= 20
    assert swbnn.load(copy).temperature == pytest.approx(fit["temperature"])


def test_predict_on_raw_uint8_images_equals_evaluate(arrays_model):
    swb, _, (xt, yt) = arrays_model
    model = swbnn.load(swb)
    ev = swbnn.evaluate(swb, (xt, yt), samples=10, seed=3)
    for images in (xt, xt[:, None], xt[..., None]):  # (n, H, W), (n, 1, H, W), (n, H, W, 1)
        probs = model.predict(images, samples=10, seed=3)
        assert swbnn.metrics.nll(probs, yt) == pytest.approx(ev["summary"]["nll"], abs=1e-6)
        assert swbnn.metrics.accuracy(probs, yt) == pytest.approx(ev["summary"]["accuracy"], abs=1e-12)
    # Normalised floats are taken as they are: the same numbers.
    norm = model.normalization
    floats = ((xt[:, None].astype(np.float32) / 255 - norm["mean"][0]) / norm["std"][0]).astype(np.float32)
    np.testing.assert_allclose(
        model.predict(floats, samples=10, seed=3), model.predict(xt, samples=10, seed=3), atol=1e-6
    )


def test_bad_arrays_are_refused_with_what_is_wrong(tmp_path):
    x, y = _images(20, 8, 1)
    with pytest.raises(ValueError, match="20 images and y_train 19 labels"):
        swbnn.train((x, y[:19]), "mlp", "deterministic", tmp_path / "a", validation=0)
    with pytest.raises(TypeError, match="integer class labels"):
        swbnn.train((x, y.astype(str)), "mlp", "deterministic", tmp_path / "b", validation=0)
    # Floating-point targets are a regression table: the images' pixels are its features.
    swbnn.train((x, y.astype(np.float32)), "mlp", "deterministic", tmp_path / "r", epochs=1, validation=4)
    assert swbnn.load(tmp_path / "r").is_regression
    bad = x.astype(np.float32)
    bad[3, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        swbnn.train((bad, y), "mlp", "deterministic", tmp_path / "c", validation=0)
    with pytest.raises(ValueError, match="name .* or NumPy arrays"):
        swbnn.train((x,), "mlp", "deterministic", tmp_path / "d")


def test_progress_bars_show_rate_and_time_left(tmp_path, capfd):
    """``progress=True``: a bar per epoch on stderr with the steps, their rate and the time
    left (tqdm's ``[elapsed<left, rate]``), and stages 1-2 before stage 3's bars; without it,
    nothing is printed."""
    x, y = _images(900, 8, 3)
    bnn, swb = tmp_path / "bnn", tmp_path / "m.swb"
    swbnn.train((x, y), "mlp", "bayesian", bnn, epochs=1, validation=500)
    quiet = capfd.readouterr()
    assert quiet.err == "" and quiet.out == ""
    swbnn.compress(bnn, (x, y), swb, k=8, epochs=1, validation=500, progress=True)
    err = capfd.readouterr().err
    assert "stages 1-2 (gradient pass, plan)" in err
    assert "epoch 1" in err
    # tqdm's rate and time left: "[00:01<00:00, 12.3step/s"
    assert re.search(r"<\d\d:\d\d, +[\d.]+(step/s|s/step)", err), err
    swbnn.train((x, y), "mlp", "deterministic", tmp_path / "det", epochs=1, validation=500, progress=True)
    err = capfd.readouterr().err
    assert re.search(r"epoch 1: .*\d+/\d+ \[", err), err
