import numpy as np
import pytest

import swbnn


def cloud(data_dir):
    pts = np.load(data_dir / "cloud.npy")
    assert pts.dtype == np.float32 and pts.shape == (2000, 2)
    return pts


def test_log_likelihood_equals_rust(data_dir, expected):
    e = expected["gmm"]
    m = swbnn.gmm.fit(cloud(data_dir), k=e["k"], seed=e["seed"])
    assert m.k == e["k_final"]
    assert m.log_likelihood == pytest.approx(e["log_likelihood"], abs=1e-12, rel=0)
    assert m.score(cloud(data_dir)) == pytest.approx(e["log_likelihood"], abs=1e-12, rel=0)


def test_mixture_arrays(data_dir):
    pts = cloud(data_dir)
    m = swbnn.gmm.fit(pts, k=5)
    assert m.means.shape == (5, 2) and m.covariances.shape == (5, 2, 2)
    assert m.weights.shape == (5,) and abs(m.weights.sum() - 1) < 1e-12
    assert np.allclose(m.covariances, m.covariances.transpose(0, 2, 1))
    a = m.assignments
    assert a.shape == (2000,) and a.dtype == np.uint32 and a.max() < 5
    assert np.array_equal(a, m.assign(pts))
    ll = m.score_samples(pts)
    assert ll.shape == (2000,) and abs(ll.mean() - m.log_likelihood) < 1e-9
    # Same seed, same result.
    assert np.array_equal(swbnn.gmm.fit(pts, k=5).means, m.means)


def test_skip_assign_and_score(data_dir):
    m = swbnn.gmm.fit(cloud(data_dir), k=3, assign=False, score=False)
    assert m.assignments is None and m.log_likelihood is None


@pytest.mark.parametrize(
    "points, error, message",
    [
        (np.zeros((10, 3), dtype=np.float32), ValueError, "shape (n, 2)"),
        (np.zeros(10, dtype=np.float32), ValueError, "2 dimensions"),
        (np.zeros((0, 2), dtype=np.float32), ValueError, "empty"),
        (np.zeros((10, 2), dtype=bool), TypeError, "dtype float32"),
        ([[0.0, 1.0]], TypeError, "numpy.ndarray"),
    ],
)
def test_bad_points(points, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        swbnn.gmm.fit(points, k=2)


def test_what_numpy_users_pass_is_converted_once():
    # NumPy's default float64, and a transposed (non-contiguous) view, fit as their float32
    # copies do.
    rng = np.random.default_rng(3)
    pts = np.column_stack([rng.normal(size=3000), rng.uniform(0.01, 0.2, size=3000)])
    ref = swbnn.gmm.fit(np.ascontiguousarray(pts, dtype=np.float32), k=4)
    for given in (pts, np.asfortranarray(pts.astype(np.float32))):
        m = swbnn.gmm.fit(given, k=4)
        np.testing.assert_array_equal(m.means, ref.means)
        np.testing.assert_array_equal(m.assignments, ref.assignments)


def test_nan_point_named():
    pts = np.random.default_rng(0).normal(size=(100, 2)).astype(np.float32)
    pts[17, 1] = np.nan
    with pytest.raises(ValueError, match="point 17"):
        swbnn.gmm.fit(pts, k=2)


def test_bad_config():
    pts = np.ones((10, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="k = 0"):
        swbnn.gmm.fit(pts, k=0)
    with pytest.raises(ValueError, match="histogram_resolution"):
        swbnn.gmm.fit(pts, k=2, histogram_resolution=1)
    with pytest.raises(ValueError, match="init"):
        swbnn.gmm.fit(pts, k=2, init="best")
