import numpy as np
import pytest

import swbnn


def images(e):
    """The fixture's images: byte pattern / 255 in float32, as bnn-data converts them."""
    n = e["images"]
    i = np.arange(n * 64)
    pixels = ((i * 37 + i // 64 * 11) % 256).astype(np.uint8)
    return (pixels.astype(np.float32) / np.float32(255)).reshape(n, 1, 8, 8)


def test_predictions_equal_rust(data_dir, expected):
    e = expected["predict"]
    m = swbnn.load(data_dir / "tiny.swb")
    p = m.predict(images(e), samples=e["samples"], seed=e["seed"])
    assert p.shape == (e["images"], e["classes"]) and p.dtype == np.float32
    np.testing.assert_allclose(p.ravel(), np.array(e["probabilities"]), atol=1e-6, rtol=0)
    # Same seed, same numbers; another seed, other weight samples.
    assert np.array_equal(p, m.predict(images(e), samples=e["samples"], seed=e["seed"]))
    assert not np.array_equal(p, m.predict(images(e), samples=e["samples"], seed=e["seed"] + 1))


def test_samples_and_evaluate(data_dir, expected):
    e = expected["predict"]
    m = swbnn.load(str(data_dir / "tiny.swb"))
    x = images(e)
    s = m.predict(x, samples=4, seed=3, return_samples=True)
    assert s.shape == (4, e["images"], 3)
    np.testing.assert_allclose(s.mean(0), m.predict(x, samples=4, seed=3), atol=1e-6)
    labels = np.arange(e["images"]) % 3
    ev = m.evaluate(x, labels, ood_images=x[::-1].copy(), samples=4, seed=3)
    mean = m.predict(x, samples=4, seed=3)
    assert ev["summary"]["ece"] == pytest.approx(swbnn.metrics.ece(mean, labels), abs=1e-12)
    assert ev["summary"]["n"] == e["images"]
    assert ev["ood_max_prob"] is not None
    info = m.info()
    assert info["source"] == "swb" and info["sharing"]["gaussians"] == info["config"]["codebook_len"]
    assert info["sharing"]["shareable_weights"] == 64 * 12 + 12 * 3


def test_bad_images(data_dir, expected):
    m = swbnn.load(data_dir / "tiny.swb")
    x = images(expected["predict"])
    # NumPy's default float64 is converted once, not refused.
    np.testing.assert_array_equal(m.predict(x.astype(np.float64)), m.predict(x))
    with pytest.raises(TypeError, match="dtype float32"):
        m.predict(x.astype(np.complex64))
    for bad, message in [
        (x[:, :, :4, :].copy(), r"\(n, 1, 8, 8\)"),
        (x[:, :, :, ::2], "shape|C-contiguous"),
        (x.reshape(-1, 64), "4 dimensions"),
        (x[:0], "empty"),
    ]:
        with pytest.raises(ValueError, match=message):
            m.predict(bad)
    with pytest.raises(ValueError, match="samples"):
        m.predict(x, samples=0)
    # The command line's limit and words (`swbnn eval --samples 100000`), not only 0.
    with pytest.raises(ValueError, match="samples = 100000 is out of range: 1 to 1000"):
        m.predict(x, samples=100_000)
    with pytest.raises(ValueError, match="labels"):
        m.evaluate(x, np.zeros(3, np.int64))


def test_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        swbnn.load(tmp_path / "missing.swb")
    junk = tmp_path / "junk.swb"
    junk.write_bytes(b"not a model file at all")
    with pytest.raises(ValueError, match="swb"):
        swbnn.load(junk)


def test_pipeline_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown|data set|dataset"):
        swbnn.evaluate(tmp_path, "no-such-dataset")
    with pytest.raises(ValueError, match="architecture"):
        swbnn.train("mnist", "no-such-arch", "bayesian", tmp_path / "out")
    with pytest.raises(ValueError, match="kind"):
        swbnn.train("fashion-mnist", "mlp", "frequentist", tmp_path / "out", data=tmp_path)


def test_full_bnn_file_equals_rust(data_dir, expected):
    e = expected["predict"]
    m = swbnn.load(data_dir / "tiny_full.swb")
    assert m.info()["source"] == "full-bnn"
    p = m.predict(images(e), samples=e["samples"], seed=e["seed"])
    np.testing.assert_allclose(p.ravel(), np.array(e["full_bnn_probabilities"]), atol=1e-6, rtol=0)


def test_temperature_scaling_equals_rust(data_dir, expected, tmp_path):
    e = expected["predict"]
    x = images(e)
    m = swbnn.load(data_dir / "tiny.swb")
    assert m.temperature is None and m.info()["temperature"] is None
    tempered = m.predict(x, samples=e["samples"], seed=e["seed"], temperature=e["temperature"])
    np.testing.assert_allclose(
        tempered.ravel(), np.array(e["tempered_probabilities"]), atol=1e-6, rtol=0
    )
    labels = np.array(e["fit"]["labels"], dtype=np.int64)
    fit = m.fit_temperature(x, labels, samples=e["samples"], seed=e["seed"])
    assert fit["temperature"] == pytest.approx(e["fit"]["temperature"], rel=1e-6)
    assert fit["nll_before"] == pytest.approx(e["fit"]["nll_before"], rel=1e-6)
    assert fit["nll_after"] == pytest.approx(e["fit"]["nll_after"], rel=1e-6)
    assert not fit["at_bound"] and fit["images"] == e["images"] and fit["samples"] == e["samples"]
    # Without store the model keeps no temperature.
    assert m.temperature is None


def test_stored_temperature_is_used_and_survives_reloading(data_dir, expected, tmp_path):
    e = expected["predict"]
    x = images(e)
    labels = np.array(e["fit"]["labels"], dtype=np.int64)
    for name in ["tiny.swb", "tiny_full.swb"]:
        path = tmp_path / name
        path.write_bytes((data_dir / name).read_bytes())
        m = swbnn.load(path)
        with pytest.raises(ValueError, match="no fitted temperature"):
            m.predict(x, calibrated=True)
        fit = m.fit_temperature(x, labels, samples=e["samples"], seed=e["seed"], store=True)
        t = fit["temperature"]
        assert m.temperature == t
        again = swbnn.load(path)
        assert again.temperature == t and again.info()["temperature"] == t
        calibrated = again.predict(x, samples=4, seed=3, calibrated=True)
        assert np.array_equal(calibrated, again.predict(x, samples=4, seed=3, temperature=t))
        assert not np.array_equal(calibrated, again.predict(x, samples=4, seed=3))
        ev = again.evaluate(x, labels, samples=4, seed=3, calibrated=True)
        assert ev["summary"]["nll"] == pytest.approx(
            swbnn.metrics.nll(calibrated, labels), abs=1e-9
        )


def test_bad_temperatures(data_dir, expected, tmp_path):
    m = swbnn.load(data_dir / "tiny.swb")
    x = images(expected["predict"])
    for t in [0.0, -1.0, 0.01, 25.0, float("nan"), float("inf")]:
        with pytest.raises(ValueError, match="temperature"):
            m.predict(x, temperature=t)
    with pytest.raises(ValueError, match="not both"):
        m.predict(x, temperature=2.0, calibrated=True)
    with pytest.raises(ValueError, match="labels"):
        m.fit_temperature(x, np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="samples"):
        m.fit_temperature(x, np.zeros(len(x), np.int64), samples=0)
    with pytest.raises(ValueError, match="1 to 1000"):
        m.fit_temperature(x, np.zeros(len(x), np.int64), samples=5000)
    with pytest.raises(ValueError, match="not both"):
        swbnn.evaluate(tmp_path, "fashion-mnist", temperature=2.0, calibrated=True)
    with pytest.raises(ValueError, match="temperature"):
        swbnn.evaluate(tmp_path, "fashion-mnist", temperature=50.0)
