"""The regression evidence's data sets, written as CSV files (header row, one row per example).

* ``diabetes``: scikit-learn's bundled diabetes data (442 patients, 10 features in their
  original units, the disease progression a year later as the target), shuffled once with a
  fixed seed and split 80/20 into ``diabetes-train.csv`` (353 rows) and ``diabetes-test.csv``
  (89 rows).
* ``synthetic``: a heteroscedastic table whose noise is known,
  ``y = 3 x1 - 2 x2 + sin(2 x1) + sigma(x) e`` with ``x ~ U(-2, 2)^2``, ``e ~ N(0, 1)`` and
  ``sigma(x) = 0.3 + 0.7 |x1|``: 2,000 training and 2,000 test rows, and beside the test file
  ``synthetic-test-truth.csv``, each test row's true mean and standard deviation (the oracle's
  predictive).

Each also gets development files for choices, ``NAME-dev-train.csv`` and ``NAME-dev-val.csv``:
the training file cut 80/20 (a fixed shuffle), so that a setting is chosen on rows the final
runs train on and never on the test file.

    python3 benches/regression/data.py OUT_DIR
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np


def _write(path: Path, header, rows) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in rows:
            w.writerow([repr(float(v)) for v in r])


def _split(rows: np.ndarray, test_share: float, seed: int):
    order = np.random.default_rng(seed).permutation(len(rows))
    n_test = int(round(test_share * len(rows)))
    return rows[order[n_test:]], rows[order[:n_test]]


def diabetes():
    from sklearn.datasets import load_diabetes

    d = load_diabetes(scaled=False)
    header = list(d.feature_names) + ["progression"]
    return header, np.column_stack([d.data, d.target])


def synthetic(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=(n, 2))
    mean = 3 * x[:, 0] - 2 * x[:, 1] + np.sin(2 * x[:, 0])
    sigma = 0.3 + 0.7 * np.abs(x[:, 0])
    y = mean + sigma * rng.standard_normal(n)
    return np.column_stack([x, y]), mean, sigma


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    header, rows = diabetes()
    train, test = _split(rows, 0.2, seed=0)
    _write(out / "diabetes-train.csv", header, train)
    _write(out / "diabetes-test.csv", header, test)
    dev_train, dev_val = _split(train, 0.2, seed=1)
    _write(out / "diabetes-dev-train.csv", header, dev_train)
    _write(out / "diabetes-dev-val.csv", header, dev_val)

    header = ["x1", "x2", "y"]
    train, _, _ = synthetic(2000, seed=10)
    test, mean, sigma = synthetic(2000, seed=11)
    _write(out / "synthetic-train.csv", header, train)
    _write(out / "synthetic-test.csv", header, test)
    _write(out / "synthetic-test-truth.csv", ["mean", "std"], np.column_stack([mean, sigma]))
    dev_train, dev_val = _split(train, 0.2, seed=1)
    _write(out / "synthetic-dev-train.csv", header, dev_train)
    _write(out / "synthetic-dev-val.csv", header, dev_val)
    print(f"wrote the diabetes and synthetic tables into {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
