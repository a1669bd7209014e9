import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

import swbnn
from swbnn import metrics


def probs_labels(n=500, c=10, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 2, (n, c))
    p = np.exp(logits - logits.max(1, keepdims=True))
    p = (p / p.sum(1, keepdims=True)).astype(np.float32)
    labels = rng.integers(0, c, n)
    return p, labels


def reference_ece(p, labels, n_bins=15):
    """Guo et al. (2017): equal-width (lo, hi] confidence bins, in float64."""
    p = p.astype(np.float64)
    conf, pred = p.max(1), p.argmax(1)
    correct = (pred == labels).astype(np.float64)
    ece, mce = 0.0, 0.0
    edges = np.linspace(0, 1, n_bins + 1)
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (conf > lo) & (conf <= hi)
        if m.any():
            gap = abs(correct[m].mean() - conf[m].mean())
            ece += m.mean() * gap
            mce = max(mce, gap)
    return ece, mce


def test_ece_mce_match_reference():
    for seed in range(3):
        p, y = probs_labels(seed=seed)
        ece, mce = reference_ece(p, y)
        assert metrics.ece(p, y) == pytest.approx(ece, abs=1e-12, rel=0)
        assert metrics.mce(p, y) == pytest.approx(mce, abs=1e-12, rel=0)


def test_nll_brier_accuracy_entropy():
    p, y = probs_labels()
    q = p.astype(np.float64)
    assert metrics.nll(p, y) == pytest.approx(-np.log(q[np.arange(len(y)), y]).mean(), abs=1e-12)
    onehot = np.eye(p.shape[1])[y]
    assert metrics.brier(p, y) == pytest.approx(((q - onehot) ** 2).sum(1).mean(), abs=1e-12)
    assert metrics.accuracy(p, y) == (p.argmax(1) == y).mean()
    h = metrics.entropy(p)
    assert np.allclose(h, -(q * np.log(q)).sum(1), atol=1e-12, rtol=0)
    # Labels of any integer width.
    assert metrics.ece(p, y.astype(np.int32)) == metrics.ece(p, y)


def test_mutual_information():
    s = np.stack([probs_labels(seed=k)[0] for k in range(4)])
    mi = metrics.mutual_information(s)
    q = s.astype(np.float64)
    mean = q.mean(0)
    ref = -(mean * np.log(mean)).sum(1) + (q * np.log(q)).sum(2).mean(0)
    assert np.allclose(mi, ref, atol=1e-12, rtol=0)


def test_ood_metrics_match_sklearn():
    rng = np.random.default_rng(5)
    for _ in range(3):
        a = rng.normal(1, 1, 400)
        b = rng.normal(0, 1, 300)
        b[:20] = a[:20]  # ties across the classes
        y = np.r_[np.ones_like(a), np.zeros_like(b)]
        s = np.r_[a, b]
        assert metrics.auroc(a, b) == pytest.approx(roc_auc_score(y, s), abs=1e-12, rel=0)
        assert metrics.aupr(a, b) == pytest.approx(average_precision_score(y, s), abs=1e-12, rel=0)
    # FPR@95: the fraction of OOD scores above the 5 % quantile of in-distribution ones.
    a = np.arange(100, dtype=np.float64)
    b = np.arange(100, dtype=np.float64) - 50.5
    assert metrics.fpr_at_tpr(a, b) == pytest.approx(np.mean(b >= 5), abs=1e-12)


@pytest.mark.parametrize(
    "probs, labels, error, message",
    [
        (np.full((2, 2), 0.5, np.complex64), np.array([0, 1]), TypeError, "dtype float32"),
        (np.full((2, 2), 0.5, np.float32), np.array([0, 1, 1]), ValueError, "labels"),
        (np.full((2, 2), 0.7, np.float32), np.array([0, 1]), ValueError, "sums to"),
        (np.array([[np.nan, 1]], np.float32), np.array([0]), ValueError, "non-finite"),
        (np.full((2, 2), 0.5, np.float32), np.array([0, 2]), ValueError, "out of range"),
        (np.full((2, 2), 0.5, np.float32), np.array([0.0, 1.0]), TypeError, "dtype int64"),
        (np.zeros((0, 2), np.float32), np.zeros(0, np.int64), ValueError, "empty"),
    ],
)
def test_bad_input(probs, labels, error, message):
    with pytest.raises(error, match=message):
        metrics.ece(probs, labels)


def test_float64_strided_and_narrow_integer_inputs_are_converted_once():
    p = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    y = np.array([0, 1, 1], dtype=np.uint8)
    ref = metrics.ece(p.astype(np.float32), y.astype(np.int64))
    assert metrics.ece(p, y) == ref
    wide = np.zeros((3, 4))
    wide[:, ::2] = p
    assert metrics.ece(wide[:, ::2], y) == ref
    assert metrics.auroc(np.zeros(3, np.float32), np.ones(3)) == metrics.auroc(np.zeros(3), np.ones(3))


def test_bad_ood_input():
    with pytest.raises(ValueError, match="both classes|empty"):
        metrics.auroc(np.zeros(3), np.zeros(0))
    with pytest.raises(ValueError, match="non-finite"):
        metrics.auroc(np.array([np.nan, 1.0]), np.zeros(3))
    with pytest.raises(ValueError, match="tpr level"):
        metrics.fpr_at_tpr(np.zeros(3), np.ones(3), level=2.0)
