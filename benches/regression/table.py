"""The regression evidence's table: mean ± sample sd over seeds of each method's metrics, from
the JSON files of ``run.py`` and ``torch_regression.py``, as Markdown.

    python3 benches/regression/table.py runs/diabetes.json runs/diabetes-torch.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

COLUMNS = [
    ("rmse", "RMSE", 3),
    ("nll", "NLL", 3),
    ("crps", "CRPS", 3),
    ("coverage_90", "90 % interval coverage", 3),
    ("conformal_coverage_90", "conformal 90 % coverage", 3),
    ("conformal_width_90", "conformal 90 % width", 2),
]


def cell(values, digits):
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def main(paths) -> None:
    rows = [r for p in paths for r in json.loads(Path(p).read_text())]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    print("| method | seeds | " + " | ".join(c[1] for c in COLUMNS) + " | parameters | file bytes |")
    print("|---" * (len(COLUMNS) + 4) + "|")
    for m in methods:
        mine = [r for r in rows if r["method"] == m]
        cells = [cell([r[k] for r in mine], d) for k, _, d in COLUMNS]
        params = sorted({r["parameters"] for r in mine})
        sizes = sorted({r["bytes"] for r in mine if "bytes" in r})
        span = lambda v: "-" if not v else (f"{v[0]:,}" if len(v) == 1 else f"{v[0]:,}-{v[-1]:,}")  # noqa: E731
        print(f"| {m} | {len(mine)} | " + " | ".join(cells) + f" | {span(params)} | {span(sizes)} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
