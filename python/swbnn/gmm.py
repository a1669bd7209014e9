"""The fast full-covariance 2-D Gaussian mixture (``gmm-minibatch``) on NumPy points.

``fit(points, k)`` takes float32 points ``(n, 2)`` (columns mu, sigma) and returns a
:class:`Mixture` with ``means`` ``(k, 2)``, ``covariances`` ``(k, 2, 2)``, ``weights``,
``assignments`` and ``log_likelihood`` (mean nats per point), and the methods ``assign``,
``score_samples`` and ``score`` for other points.
"""

from ._native import Mixture, fit

__all__ = ["Mixture", "fit"]
