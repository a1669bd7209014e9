import numpy as np
import pytest

import swbnn


def test_counts_equal_rust(data_dir, expected):
    pts = np.load(data_dir / "cloud.npy")
    mu, sigma = np.ascontiguousarray(pts[:, 0]), np.ascontiguousarray(pts[:, 1])
    e = expected["plan"]
    p = swbnn.plan(mu, sigma, k=e["k"])
    assert p.counts == e["counts"]
    assert p.k == e["codebook"]
    n = len(mu)
    assert p.fates.shape == (n,) and p.assignment.shape == (n,)
    shared = p.fates == swbnn.FATE_SHARED
    assert shared.sum() == p.counts["plain_shared"]
    assert (p.assignment[shared] >= 0).all() and (p.assignment[~shared] == -1).all()
    assert np.array_equal(np.bincount(p.assignment[shared], minlength=p.k), p.component_counts)
    assert (p.fates == swbnn.FATE_ELLIPSE).sum() == len(p.ellipse_weights)
    assert np.allclose(p.ellipse_alphas.sum(axis=1), 1, atol=1e-5)
    # Weights with |mu| > tau_w = 0.2 are outliers.
    assert ((p.fates == swbnn.FATE_OUTLIER_MEAN) == (np.abs(mu) > np.float32(0.2))).all()


def test_config_and_gradient():
    rng = np.random.default_rng(1)
    mu = rng.normal(0, 0.05, 5000).astype(np.float32)
    sigma = rng.uniform(0.01, 0.02, 5000).astype(np.float32)
    grad = rng.normal(0, 1, 5000).astype(np.float32)
    p = swbnn.plan(mu, sigma, grad, config={"gmm": {"k": 8}, "outliers": {"grad_top_fraction": 0.02}})
    assert p.config["gmm"]["k"] == 8
    assert p.counts["outlier_gradient"] == 100
    assert p.counts["total"] == 5000


@pytest.mark.parametrize(
    "mu, sigma, error, message",
    [
        (np.zeros(5, np.complex64), np.ones(5, np.float32), TypeError, "mu must have dtype float32"),
        ([0.0] * 5, np.ones(5, np.float32), TypeError, "mu must be a numpy.ndarray, got list"),
        (np.zeros(5, np.float32), np.ones(4, np.float32), ValueError, "sigma has 4 values"),
        (np.zeros(5, np.float32), -np.ones(5, np.float32), ValueError, "sigma"),
        (np.array([0, np.nan, 0, 0, 0], np.float32), np.ones(5, np.float32), ValueError, r"mu\[1\]"),
        (np.zeros((5, 1), np.float32), np.ones(5, np.float32), ValueError, "1 dimension"),
        (np.zeros(0, np.float32), np.ones(0, np.float32), ValueError, "empty"),
    ],
)
def test_bad_input(mu, sigma, error, message):
    with pytest.raises(error, match=message):
        swbnn.plan(mu, sigma, k=2)


def test_bad_config():
    mu, sigma = np.zeros(10, np.float32), np.ones(10, np.float32)
    with pytest.raises(ValueError, match="SwshareConfig"):
        swbnn.plan(mu, sigma, config={"no_such_field": 1})
    with pytest.raises(TypeError, match="config must be a dict or JSON text, got int"):
        swbnn.plan(mu, sigma, config=3)
