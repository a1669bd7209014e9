"""The package without PyTorch: the fast GMM and the sharing plan on a BNN's weights, a
``.swb`` model's predictions and their uncertainty. Run from the repository root:

    python python/examples/quickstart.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import swbnn

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    rng = np.random.default_rng(0)
    # A BNN's weight means and standard deviations as flat float32 arrays.
    mu = rng.laplace(0.0, 0.03, 50_000).astype(np.float32)
    sigma = np.log1p(np.exp(rng.normal(-6.0, 0.5, 50_000))).astype(np.float32)
    mixture = swbnn.gmm.fit(np.stack([mu, sigma], axis=1), k=50)
    plan = swbnn.plan(mu, sigma, k=50)
    print(f"GMM: k = {mixture.k}, mean log-likelihood {mixture.log_likelihood:.3f}")
    print(f"plan: k = {plan.k}, counts {plan.counts}")

    model = swbnn.load(ROOT / "python" / "tests" / "data" / "tiny.swb")
    images = rng.random((4, *model.input_shape), dtype=np.float32)
    probs = model.predict(images, samples=30)
    entropy = swbnn.metrics.entropy(probs)
    print(f"predictive {probs.shape}, entropy {np.round(entropy, 3).tolist()}")


if __name__ == "__main__":
    main()
