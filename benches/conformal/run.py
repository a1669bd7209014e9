"""Conformal prediction sets of a reproduction's models: for each seed folder of a
``cargo xtask reproduce`` run, each method's model (deterministic net, BBB, 2DGBNN) is
calibrated at a level (``swbnn calibrate --conformal``: the temperature, then adaptive
prediction sets, both on the run's validation split) and evaluated on the test set (``swbnn
eval --json``); prints each row and the mean ± sd of the coverage and set size per method.

    cargo xtask reproduce fashion-mnist --quick --seeds 5 --seed-offset 500 --out runs/conformal
    python3 benches/conformal/run.py runs/conformal --level 0.9 --out runs/conformal/conformal.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

METHODS = ("deterministic", "bbb", "2dgbnn")


def swbnn(binary: str, *args: str) -> str:
    out = subprocess.run([binary, *args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"swbnn {' '.join(args)} failed:\n{out.stderr}")
    return out.stdout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, help="the reproduction's --out folder")
    p.add_argument("--level", type=float, default=0.9)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--swbnn", default=os.path.join("target", "debug", "swbnn"))
    args = p.parse_args()
    setup = json.loads((args.run / "setup.json").read_text())
    dataset = setup["dataset"]
    rows = json.loads(args.out.read_text()) if args.out.exists() else []
    done = {(r["seed_dir"], r["method"]) for r in rows}
    for seed_dir in sorted(d for d in args.run.iterdir() if d.name.startswith("seed-")):
        seed = json.loads((seed_dir / "setup.json").read_text()).get("seed", 0)
        for method in METHODS:
            if (seed_dir.name, method) in done:
                continue
            model = seed_dir / "stages" / method
            swbnn(args.swbnn, "calibrate", str(model), "--dataset", dataset, "--conformal", str(args.level),
                  "--seed", str(seed))
            ev = json.loads(swbnn(args.swbnn, "--json", "eval", str(model), "--dataset", dataset, "--seed", str(seed)))
            c = ev["conformal"]
            rows.append({
                "seed_dir": seed_dir.name, "method": method, "level": c["level"], "coverage": c["coverage"],
                "mean_set_size": c["mean_set_size"], "test_images": c["n"],
                "calibration_images": c["calibration_images"], "temperature": c["temperature"],
                "accuracy": ev["evaluation"]["summary"]["accuracy"],
            })
            args.out.write_text(json.dumps(rows, indent=1))
            print(f"{seed_dir.name} {method}: coverage {c['coverage']:.4f}, mean set size {c['mean_set_size']:.3f}")
    for method in METHODS:
        mine = [r for r in rows if r["method"] == method]
        if len(mine) < 2:
            continue
        cov = [r["coverage"] for r in mine]
        size = [r["mean_set_size"] for r in mine]
        print(
            f"{method}: coverage {statistics.mean(cov):.4f} ± {statistics.stdev(cov):.4f} "
            f"[{', '.join(f'{v:.4f}' for v in cov)}]; mean set size {statistics.mean(size):.3f} ± "
            f"{statistics.stdev(size):.3f} [{', '.join(f'{v:.3f}' for v in size)}] ({len(mine)} seeds)"
        )


if __name__ == "__main__":
    main()
