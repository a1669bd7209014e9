"""Benchmarks of the Python package against the Rust binaries and scikit-learn, measured in
one run as ratios (the machine may be shared: repeat and look at the spread).

    python python/benches/bench.py gmm --points cloud11m.npy --rust-example target/release/examples/fit
    python python/benches/bench.py sklearn --points cloud11m.npy
    python python/benches/bench.py predict --model lenet5.swb --swbnn target/release/swbnn

Prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np

import swbnn


def emit(**kw):
    print(json.dumps(kw), flush=True)


def gmm(args):
    points = np.load(args.points)
    for r in range(args.repeats):
        # Alternate the two so that a change of the machine's load hits both.
        out = subprocess.run(
            [args.rust_example, "--points", args.points, "--k", str(args.k)],
            check=True, capture_output=True, text=True,
        ).stdout
        rust = json.loads(out.strip().splitlines()[-1])
        rust_s = rust["seconds_fit"] + rust["seconds_assign"] + rust["seconds_loglik"]
        t = time.perf_counter()
        m = swbnn.gmm.fit(points, k=args.k)
        py_s = time.perf_counter() - t
        emit(bench="gmm", repeat=r, n=len(points), k=args.k, rust_s=rust_s, python_s=py_s,
             ratio=py_s / rust_s, rust_loglik=rust["loglik_per_point"],
             python_loglik=m.log_likelihood)


def rust_fit_seconds(example, x, k, tmp):
    """Fit + assign + log-likelihood seconds of the Rust example on `x` (its own timers)."""
    np.save(tmp, x)
    out = subprocess.run([example, "--points", tmp, "--k", str(k)], check=True,
                         capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["seconds_fit"] + r["seconds_assign"] + r["seconds_loglik"], r["loglik_per_point"]


def sklearn_peers(args):
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.mixture import GaussianMixture

    import tempfile

    tmp = os.path.join(tempfile.mkdtemp(), "subset.npy")
    points = np.load(args.points)
    rng = np.random.default_rng(0)
    for name, sizes in [("GaussianMixture", args.gm_sizes), ("MiniBatchKMeans", args.km_sizes)]:
        for n in sizes:
            x = points[rng.choice(len(points), n, replace=False)] if n < len(points) else points
            x = np.ascontiguousarray(x)
            for r in range(args.repeats):
                if args.rust_example:
                    ours, ours_ll = rust_fit_seconds(args.rust_example, x, args.k, tmp)
                else:
                    t = time.perf_counter()
                    m = swbnn.gmm.fit(x, k=args.k)
                    ours, ours_ll = time.perf_counter() - t, m.log_likelihood
                t = time.perf_counter()
                if name == "GaussianMixture":
                    peer = GaussianMixture(args.k, covariance_type="full", max_iter=args.gm_iter,
                                           random_state=0, reg_covar=1e-10).fit(x.astype(np.float64))
                    peer.predict(x.astype(np.float64))
                    peer_ll = float(peer.score(x.astype(np.float64)))
                else:
                    peer = MiniBatchKMeans(args.k, batch_size=4096, n_init=1, random_state=0).fit(x)
                    peer.predict(x)
                    peer_ll = None
                theirs = time.perf_counter() - t
                emit(bench="sklearn", peer=name, n=n, k=args.k, repeat=r,
                     swbnn="rust example" if args.rust_example else "python", swbnn_s=ours,
                     peer_s=theirs, peer_over_swbnn=theirs / ours,
                     swbnn_loglik=ours_ll, peer_loglik=peer_ll)


def fashion_test(stats=(0.2860, 0.3530)):
    """Fashion-MNIST's test images, normalised as `swbnn eval` does."""
    root = Path(os.environ.get("FASHION_MNIST", "/usr/share/datasets/fashion-mnist"))
    f = root / "t10k-images-idx3-ubyte.gz"
    raw = gzip.open(f).read() if f.exists() else (root / "t10k-images-idx3-ubyte").read_bytes()
    x = np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 1, 28, 28)
    x = x.astype(np.float32) / np.float32(255)
    return (x - np.float32(stats[0])) / np.float32(stats[1])


def predict(args):
    x = fashion_test()
    model = swbnn.load(args.model)
    for r in range(args.repeats):
        t = time.perf_counter()
        out = subprocess.run(
            [args.swbnn, "eval", args.model, "--dataset", "fashion-mnist", "--samples",
             str(args.samples), "--json"],
            check=True, capture_output=True, text=True,
        ).stdout
        cli_s = time.perf_counter() - t
        acc_cli = json.loads(out)["evaluation"]["summary"]["accuracy"]
        t = time.perf_counter()
        p = model.predict(x, samples=args.samples, seed=0)
        py_s = time.perf_counter() - t
        emit(bench="predict", repeat=r, images=len(x), samples=args.samples,
             cli_s=cli_s, python_s=py_s, cli_images_per_s=len(x) / cli_s,
             python_images_per_s=len(x) / py_s, python_over_cli_time=py_s / cli_s,
             cli_accuracy=acc_cli)
        del p


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gmm")
    g.add_argument("--points", required=True)
    g.add_argument("--rust-example", required=True)
    g.add_argument("--k", type=int, default=2000)
    g.add_argument("--repeats", type=int, default=3)
    s = sub.add_parser("sklearn")
    s.add_argument("--points", required=True)
    s.add_argument("--k", type=int, default=2000)
    s.add_argument("--gm-sizes", type=int, nargs="*", default=[10_000])
    s.add_argument("--gm-iter", type=int, default=10)
    s.add_argument("--km-sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    s.add_argument("--repeats", type=int, default=2)
    s.add_argument("--rust-example", help="time the Rust example instead of the Python call")
    p = sub.add_parser("predict")
    p.add_argument("--model", required=True)
    p.add_argument("--swbnn", required=True)
    p.add_argument("--samples", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    {"gmm": gmm, "sklearn": sklearn_peers, "predict": predict}[args.cmd](args)


if __name__ == "__main__":
    main()
