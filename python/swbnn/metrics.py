"""Uncertainty and calibration metrics: the code of the ``bnn-metrics`` crate.

Probabilities are float32 ``(n, classes)`` with rows summing to 1, labels integer ``(n,)``,
OOD scores float64 ``(n,)`` (higher = more in-distribution; the in-distribution set is
the positive class).
"""

from __future__ import annotations

import numpy as np

from . import _native

__all__ = [
    "accuracy",
    "aupr",
    "auroc",
    "brier",
    "ece",
    "entropy",
    "fpr_at_tpr",
    "mce",
    "mutual_information",
    "nll",
    "regression",
    "conformal_intervals",
]


def _labels(labels: np.ndarray) -> np.ndarray:
    """Integer labels of any width as int64 (the only conversion done; other dtypes are an
    error)."""
    if isinstance(labels, np.ndarray) and labels.dtype.kind in "iu" and labels.dtype != np.int64:
        if labels.dtype == np.uint64 and labels.size and labels.max() > np.iinfo(np.int64).max:
            raise ValueError("labels hold values beyond int64")
        return labels.astype(np.int64)
    return labels


def ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> float:
    """Expected calibration error over ``n_bins`` equal-width ``(lo, hi]`` bins."""
    return _native.ece(probs, _labels(labels), n_bins)


def mce(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> float:
    """Maximum calibration error over ``n_bins`` equal-width bins."""
    return _native.mce(probs, _labels(labels), n_bins)


def nll(probs: np.ndarray, labels: np.ndarray) -> float:
    """Mean negative log-likelihood of the labels."""
    return _native.nll(probs, _labels(labels))


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    """Mean Brier score (squared error summed over classes)."""
    return _native.brier(probs, _labels(labels))


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of rows whose arg max is the label."""
    return _native.accuracy(probs, _labels(labels))


def entropy(probs: np.ndarray) -> np.ndarray:
    """Predictive entropy (nats) of every row, float64 ``(n,)``."""
    return _native.entropy(probs)


def mutual_information(samples: np.ndarray) -> np.ndarray:
    """Mutual information between prediction and weights (nats) per example, from Monte
    Carlo samples of probabilities, float32 ``(samples, n, classes)``."""
    return _native.mutual_information(samples)


def auroc(in_scores: np.ndarray, out_scores: np.ndarray) -> float:
    """Area under the ROC curve (scikit-learn's ``roc_auc_score`` with in-distribution
    positive)."""
    return _native.auroc(in_scores, out_scores)


def aupr(in_scores: np.ndarray, out_scores: np.ndarray) -> float:
    """Average precision, in-distribution positive (AUPR-in)."""
    return _native.aupr(in_scores, out_scores)


def fpr_at_tpr(in_scores: np.ndarray, out_scores: np.ndarray, level: float = 0.95) -> float:
    """False positive rate at the first threshold whose true positive rate is >= ``level``
    (FPR@95 by default)."""
    return _native.fpr_at_tpr(in_scores, out_scores, level)


def regression(
    means: np.ndarray,
    stds: np.ndarray,
    targets: np.ndarray,
    conformal_qhat: "list[float] | None" = None,
    level: float = 0.9,
) -> "dict[str, object]":
    """A regression predictive's metrics, as ``swbnn eval`` computes them: RMSE, the Gaussian
    NLL of the Monte Carlo mixture, CRPS, the coverage and width of the central 50/90/95 %
    intervals, the PIT calibration error and the mean aleatoric and epistemic variances.

    ``means`` and ``stds`` are each Monte Carlo sample's Gaussian, ``(samples, n, targets)``
    (or ``(n, targets)`` for one Gaussian per output); ``targets`` ``(n, targets)`` or
    ``(n,)``. With ``conformal_qhat`` (from :func:`conformal_intervals` on calibration data),
    the coverage and width of the intervals ``mean ± qhat * std`` under ``"conformal"``."""
    import json

    return json.loads(_native.regression_json(means, stds, targets, conformal_qhat, level))


def conformal_intervals(
    means: np.ndarray, stds: np.ndarray, targets: np.ndarray, level: float = 0.9
) -> "list[float]":
    """Split-conformal thresholds, one per target, for intervals ``mean ± qhat * std`` that
    hold ``level`` of future targets: fitted on calibration data (never the test set), with the
    arrays of :func:`regression`."""
    return _native.conformal_intervals(means, stds, targets, level)
