#!/usr/bin/env python3
"""Peer of `cargo run --release -p gmm-minibatch --example fit`: fits the same .npy cloud
with scikit-learn's GaussianMixture (full covariance) on a random subsample it can hold,
then assigns / scores ALL points (chunked, so memory stays O(chunk * K)), and prints the
same JSON line: {"n","k","k_final","seconds_fit","seconds_assign","loglik_per_point"}
(log-likelihood in the file's own units).

    pip install scikit-learn numpy
    python3 benches/peers/gmm_sklearn.py --points FILE.npy --k 2000 [--seed S]
        [--fit-sample 200000] [--max-iter 20] [--eval-sample 0 (= all points)]

scikit-learn is given the standardised points (mu and sigma differ by ~20x in scale, and
sklearn's reg_covar is absolute); the log-likelihood is converted back with
-ln(scale_mu * scale_sigma).
"""
import argparse
import json
import time

import numpy as np
from sklearn.mixture import GaussianMixture


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", required=True)
    ap.add_argument("--k", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fit-sample", type=int, default=200_000)
    ap.add_argument("--max-iter", type=int, default=20)
    ap.add_argument("--eval-sample", type=int, default=0, help="0 = score all points")
    ap.add_argument("--chunk", type=int, default=20_000)
    a = ap.parse_args()

    x = np.load(a.points).astype(np.float64)
    assert x.ndim == 2 and x.shape[1] == 2, x.shape
    n = x.shape[0]
    rng = np.random.default_rng(a.seed)
    t0 = time.perf_counter()
    mean, scale = x.mean(0), x.std(0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    fit_idx = rng.choice(n, size=min(n, a.fit_sample), replace=False)
    gm = GaussianMixture(
        n_components=a.k, covariance_type="full", max_iter=a.max_iter, init_params="k-means++",
        reg_covar=1e-6, random_state=a.seed, tol=1e-4,
    )
    gm.fit(z[fit_idx])
    seconds_fit = time.perf_counter() - t0

    t0 = time.perf_counter()
    ev = np.arange(n) if a.eval_sample <= 0 or a.eval_sample >= n else rng.choice(n, a.eval_sample, replace=False)
    labels = np.empty(len(ev), dtype=np.int32)
    ll_sum = 0.0
    for s in range(0, len(ev), a.chunk):
        zz = z[ev[s:s + a.chunk]]
        wlp = gm._estimate_weighted_log_prob(zz)
        labels[s:s + a.chunk] = wlp.argmax(1)
        m = wlp.max(1, keepdims=True)
        ll_sum += float((m[:, 0] + np.log(np.exp(wlp - m).sum(1))).sum())
    seconds_assign = time.perf_counter() - t0
    ll = ll_sum / len(ev) - float(np.log(scale[0] * scale[1]))
    print(json.dumps({
        "n": int(n), "k": a.k, "k_final": int(gm.n_components), "seconds_fit": seconds_fit,
        "seconds_assign": seconds_assign, "loglik_per_point": ll,
        "fit_sample": int(len(fit_idx)), "eval_points": int(len(ev)), "sklearn_iterations": int(gm.n_iter_),
    }))


if __name__ == "__main__":
    main()
