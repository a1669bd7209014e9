#!/usr/bin/env python3
"""Reference fit for the gmm-minibatch target: 20 iterations of full-data EM weighted on a
1024x1024 histogram of the points (occupied cell centres weighted by their counts), k-means
initialisation, K = 2000 full-covariance components; then the EXACT mean log-likelihood of
the fitted mixture over the points (all of them, or a random --eval-sample).

    python3 benches/peers/gmm_hist_em_reference.py --points FILE.npy [--k 2000] [--bins 1024]
        [--iters 20] [--seed 0] [--eval-sample 0]

The histogram spans [min, max] of each axis; EM runs in the standardised space (per-axis
mean/std) and the log-likelihood is reported in the file's own units. The k-means
initialisation is scikit-learn's KMeans (k-means++, 1 init) on the weighted cell centres.
Prints one JSON line. Pure numpy, chunked: takes minutes.
"""
import argparse
import json
import time

import numpy as np
from sklearn.cluster import KMeans

LN2PI = np.log(2 * np.pi)


def log_prob(zc, w, mu, cov):
    """Weighted log densities, shape (len(zc), K)."""
    det = cov[:, 0, 0] * cov[:, 1, 1] - cov[:, 0, 1] ** 2
    pa, pb, pc = cov[:, 1, 1] / det, -cov[:, 0, 1] / det, cov[:, 0, 0] / det
    dx = zc[:, :1] - mu[None, :, 0]
    dy = zc[:, 1:] - mu[None, :, 1]
    q = pa * dx * dx + 2 * pb * dx * dy + pc * dy * dy
    return np.log(w) - LN2PI - 0.5 * np.log(det) - 0.5 * q


def lse(a):
    m = a.max(1, keepdims=True)
    return m[:, 0] + np.log(np.exp(a - m).sum(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", required=True)
    ap.add_argument("--k", type=int, default=2000)
    ap.add_argument("--bins", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-sample", type=int, default=0)
    ap.add_argument("--reg", type=float, default=1e-6)
    ap.add_argument("--chunk", type=int, default=4096)
    a = ap.parse_args()
    t_start = time.perf_counter()
    x = np.load(a.points).astype(np.float64)
    n = len(x)
    mean, scale = x.mean(0), x.std(0)
    z = (x - mean) / scale
    h, ex, ey = np.histogram2d(z[:, 0], z[:, 1], bins=a.bins)
    ix, iy = np.nonzero(h)
    cnt = h[ix, iy]
    cen = np.stack([(ex[ix] + ex[ix + 1]) / 2, (ey[iy] + ey[iy + 1]) / 2], 1)
    km = KMeans(n_clusters=a.k, n_init=1, random_state=a.seed).fit(cen, sample_weight=cnt)
    lab = km.labels_
    k = a.k
    w = np.bincount(lab, weights=cnt, minlength=k) + 1e-12
    mu = km.cluster_centers_.copy()
    cov = np.zeros((k, 2, 2))
    for j, (u, v) in enumerate([(0, 0), (0, 1), (1, 1)]):
        d = (cen[:, u] - mu[lab, u]) * (cen[:, v] - mu[lab, v])
        s = np.bincount(lab, weights=cnt * d, minlength=k) / w
        cov[:, u, v] = s
        cov[:, v, u] = s
    cov[:, 0, 0] += a.reg
    cov[:, 1, 1] += a.reg
    w = w / w.sum()
    hist_ll = []
    for it in range(a.iters):
        s0 = np.zeros(k)
        s1 = np.zeros((k, 2))
        s2 = np.zeros((k, 3))
        tot = 0.0
        for s in range(0, len(cen), a.chunk):
            zc, cc = cen[s:s + a.chunk], cnt[s:s + a.chunk]
            lp = log_prob(zc, w, mu, cov)
            l = lse(lp)
            tot += float((cc * l).sum())
            r = np.exp(lp - l[:, None]) * cc[:, None]
            s0 += r.sum(0)
            s1 += r.T @ zc
            s2[:, 0] += r.T @ (zc[:, 0] ** 2)
            s2[:, 1] += r.T @ (zc[:, 0] * zc[:, 1])
            s2[:, 2] += r.T @ (zc[:, 1] ** 2)
        hist_ll.append(tot / cnt.sum() - float(np.log(scale[0] * scale[1])))
        s0 = np.maximum(s0, 1e-12)
        mu = s1 / s0[:, None]
        cov[:, 0, 0] = s2[:, 0] / s0 - mu[:, 0] ** 2 + a.reg
        cov[:, 0, 1] = cov[:, 1, 0] = s2[:, 1] / s0 - mu[:, 0] * mu[:, 1]
        cov[:, 1, 1] = s2[:, 2] / s0 - mu[:, 1] ** 2 + a.reg
        w = s0 / s0.sum()
    t_fit = time.perf_counter() - t_start
    rng = np.random.default_rng(a.seed)
    ev = z if a.eval_sample <= 0 or a.eval_sample >= n else z[rng.choice(n, a.eval_sample, replace=False)]
    ll = 0.0
    for s in range(0, len(ev), a.chunk):
        ll += float(lse(log_prob(ev[s:s + a.chunk], w, mu, cov)).sum())
    ll = ll / len(ev) - float(np.log(scale[0] * scale[1]))
    print(json.dumps({
        "n": n, "k": k, "bins": a.bins, "occupied_cells": int(len(cen)), "iters": a.iters,
        "seconds_fit": t_fit, "seconds_total": time.perf_counter() - t_start,
        "loglik_per_point": ll, "eval_points": int(len(ev)), "hist_loglik_per_iter": hist_ll,
    }))


if __name__ == "__main__":
    main()
