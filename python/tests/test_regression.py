"""Regression from Python: train, compress, calibrate and evaluate take a table (NumPy arrays
with float targets, or ``csv:``), and ``Model.predict`` returns the predictive mean and standard
deviation in the targets' units, split into its aleatoric and epistemic parts."""

import numpy as np
import pytest

import swbnn


def _table(n, seed):
    """``n`` rows of two features and a heteroscedastic target far from standardised units:
    ``y = 3 x1 - 2 x2 + 50 + (0.5 + |x1|) e``."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=(n, 2))
    y = 3 * x[:, 0] - 2 * x[:, 1] + 50 + (0.5 + np.abs(x[:, 0])) * rng.standard_normal(n)
    return x, y


@pytest.fixture(scope="module")
def table_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("table")
    x, y = _table(1200, 1)
    xt, yt = _table(400, 2)
    data = (x, y, xt, yt)
    det, bnn, swb = tmp / "det", tmp / "bnn", tmp / "m.swb"
    swbnn.train(data, "mlp", "deterministic", det, epochs=8, validation=200)
    swbnn.train(data, "mlp", "bayesian", bnn, epochs=8, validation=200, start=det)
    report = swbnn.compress(bnn, data, swb, k=16, validation=200)
    fit = swbnn.calibrate(swb, data, conformal=0.9, samples=10)
    return swb, report, fit, data


def test_a_table_goes_through_the_method_from_arrays(table_model):
    swb, report, fit, data = table_model
    assert report["shared_model_params"] < report["full_model_params"]
    assert fit["conformal"]["method"] == "normalized_interval"
    assert fit["conformal"]["n"] == 200
    ev = swbnn.evaluate(swb, data, samples=10, seed=3)
    # In the targets' units: the noise floor is about 1.6; a model that forgot the targets'
    # mean of 50 would be off by tens.
    assert 1.0 < ev["rmse"] < 4.0, ev
    assert ev["target_names"] == ["y"]
    assert [i["level"] for i in ev["intervals"]] == [0.5, 0.9, 0.95]
    c = ev["conformal"]
    assert c["level"] == 0.9 and 0.84 < c["coverage"] < 0.96 and c["mean_width"] > 0


def test_predict_returns_mean_and_std_split_into_aleatoric_and_epistemic(table_model):
    swb, _, _, (_, _, xt, yt) = table_model
    model = swbnn.load(swb)
    assert model.is_regression and model.classes == 0 and model.input_shape == (1, 1, 2)
    p = model.predict(xt, samples=10, seed=1)
    assert isinstance(p, swbnn.RegressionPrediction)
    assert p.mean.shape == p.std.shape == p.aleatoric_std.shape == p.epistemic_std.shape == (400, 1)
    np.testing.assert_allclose(p.std**2, p.aleatoric_std**2 + p.epistemic_std**2, rtol=1e-9)
    assert np.all(p.epistemic_std > 0)
    assert abs(float(p.mean.mean()) - float(yt.mean())) < 1.0
    # The spread follows the noise: rows with |x1| > 1.5 are noisier than rows with |x1| < 0.5.
    noisy, calm = np.abs(xt[:, 0]) > 1.5, np.abs(xt[:, 0]) < 0.5
    assert p.aleatoric_std[noisy].mean() > 1.2 * p.aleatoric_std[calm].mean()
    again = model.predict(xt, samples=10, seed=1)
    np.testing.assert_array_equal(again.mean, p.mean)
    ev = model.evaluate(xt, yt, samples=10, seed=1)
    assert ev["n"] == 400 and 1.0 < ev["rmse"] < 4.0


def test_bad_regression_inputs_are_refused(table_model, tmp_path):
    swb, _, _, (x, y, xt, _) = table_model
    model = swbnn.load(swb)
    with pytest.raises(ValueError, match=r"\(n, 2\)"):
        model.predict(xt[:, :1])
    bad = xt.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"features\[3, 1\]"):
        model.predict(bad)
    with pytest.raises(ValueError, match="classifier"):
        model.predict(xt, temperature=2.0)
    with pytest.raises(TypeError, match="list of column names"):
        swbnn.train("csv:t.csv", "mlp", "deterministic", tmp_path / "o", targets="price")
    # A constant target has nothing to learn and no scale: refused before any training.
    with pytest.raises(ValueError, match="constant"):
        swbnn.train((x, np.full(len(x), 7.0)), "mlp", "deterministic", tmp_path / "c", validation=100)
    with pytest.raises(ValueError, match="regression network"):
        swbnn.calibrate(swb, (x, y), samples=4)


def test_a_csv_table_trains_with_its_target_column(tmp_path):
    x, y = _table(600, 5)
    path = tmp_path / "t.csv"
    rows = "\n".join(f"{a},{b},{c}" for (a, b), c in zip(x, y))
    path.write_text("x1,x2,price\n" + rows + "\n")
    history = swbnn.train(
        f"csv:{path}", "mlp", "deterministic", tmp_path / "det", epochs=2, validation=100,
        targets=["price"], noise="homoscedastic",
    )
    assert len(history) == 2 and history[-1]["rmse"] is not None
    model = swbnn.load(tmp_path / "det")
    info = model.info()
    assert info["tabular"]["target_names"] == ["price"]
    assert info["head"]["gaussian"]["noise"] == "homoscedastic"
