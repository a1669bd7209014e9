"""The regression evidence: the swbnn command line's method (deterministic net -> Bayes by
Backprop -> 2DGBNN compression -> conformal calibration -> eval) on a table, for several
seeds, with every model's metrics collected into one JSON file.

    python3 benches/regression/run.py --data DIR --table diabetes --seeds 0,1,2,3,4 \\
        --epochs 300 --k 32 --out runs/diabetes.json [--dev]

``--dev`` runs on the development files (``NAME-dev-train.csv``, evaluated on
``NAME-dev-val.csv``) for choosing settings; without it, on ``NAME-train.csv`` and
``NAME-test.csv``. Every model holds out a fifth of its training rows as the validation split
(stage 3's stop rule and the conformal calibration read it). The MLP has two hidden layers of
100 units (``--hidden``). Needs the ``swbnn`` binary (``--swbnn``,
default ``target/debug/swbnn``) and the ``swbnn`` Python package (parameter counts).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def rows_of(path: Path) -> int:
    with open(path) as f:
        return sum(1 for _ in csv.reader(f)) - 1


def target_of(path: Path) -> str:
    with open(path) as f:
        return next(csv.reader(f))[-1]


def swbnn(binary: str, *args: str) -> str:
    out = subprocess.run([binary, *args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"swbnn {' '.join(args)} failed:\n{out.stderr}")
    return out.stdout


def params(path: Path) -> int:
    import swbnn

    return int(swbnn.load(path).info()["parameters"]["trainable"])


def size(path: Path) -> int:
    if path.is_dir():
        return (path / "model.bpk").stat().st_size
    return path.stat().st_size


def run_seed(args, train: Path, test: Path, seed: int, work: Path) -> list:
    dataset = f"csv:{train},test={test}"
    target = target_of(train)
    validation = str(rows_of(train) // 5)
    common = ["--dataset", dataset, "--validation", validation]
    det, bnn, swb = work / "det", work / "bnn", work / "model.swb"
    train_args = ["--target", target, "--arch", "mlp", "--mlp-hidden", args.hidden, "--epochs", str(args.epochs),
                  "--seed", str(seed)]
    swbnn(args.swbnn, "train", *common, *train_args, "--kind", "deterministic", "--out", str(det))
    swbnn(args.swbnn, "train", *common, *train_args, "--kind", "bayesian", "--from", str(det), "--out", str(bnn))
    cfg = work / "compress.json"
    # The command line's stop rule (a --config file starts from the library's defaults, whose
    # stage 3 runs every epoch), with this seed's stage-3 noise.
    stop = {"confidence-recovered": {"probe_images": 2048, "samples": 8, "checks_per_epoch": 8}}
    cfg.write_text(json.dumps({"retrain": {"seed": seed}, "retrain_stop": stop}))
    swbnn(args.swbnn, "compress", "--model", str(bnn), *common, "--k", str(args.k), "--epochs", str(args.epochs),
          "--config", str(cfg), "--out", str(swb))
    out = []
    for method, model in (("deterministic", det), ("bbb", bnn), ("2dgbnn", swb)):
        swbnn(args.swbnn, "calibrate", str(model), "--dataset", dataset, "--conformal", "0.9",
              "--seed", str(seed))
        ev = json.loads(swbnn(args.swbnn, "--json", "eval", str(model), "--dataset", dataset, "--seed", str(seed)))
        reg, conf = ev["regression"], ev["conformal"]
        cov90 = next(i for i in reg["intervals"] if i["level"] == 0.9)
        out.append(
            {
                "table": args.table,
                "seed": seed,
                "method": method,
                "rmse": reg["rmse"],
                "nll": reg["gaussian_nll"],
                "crps": reg["crps"],
                "coverage_90": cov90["coverage"],
                "width_90": cov90["mean_width"],
                "pit_error": reg["pit_calibration_error"],
                "conformal_coverage_90": conf["coverage"],
                "conformal_width_90": conf["mean_width"],
                "parameters": params(model),
                "bytes": size(model),
                "test_rows": reg["n"],
            }
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--table", required=True, choices=["diabetes", "synthetic"])
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--k", type=int, required=True)
    p.add_argument("--hidden", default="100,100", help="the MLP's hidden widths")
    p.add_argument("--dev", action="store_true")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--swbnn", default=os.path.join("target", "debug", "swbnn"))
    args = p.parse_args()
    if args.dev:
        train, test = args.data / f"{args.table}-dev-train.csv", args.data / f"{args.table}-dev-val.csv"
    else:
        train, test = args.data / f"{args.table}-train.csv", args.data / f"{args.table}-test.csv"
    rows = json.loads(args.out.read_text()) if args.out.exists() else []
    done = {(r["seed"], r["method"]) for r in rows}
    for seed in (int(s) for s in args.seeds.split(",")):
        if all((seed, m) in done for m in ("deterministic", "bbb", "2dgbnn")):
            continue
        with tempfile.TemporaryDirectory(prefix="swbnn-regression-") as tmp:
            rows += run_seed(args, train, test, seed, Path(tmp))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1))
        print(f"{args.table} seed {seed}: " + "; ".join(
            f"{r['method']} rmse {r['rmse']:.3f} nll {r['nll']:.3f}" for r in rows if r["seed"] == seed))


if __name__ == "__main__":
    main()
