#!/usr/bin/env python3
"""Independent reference values for the gauss2d crate (numpy + scipy).

Run from this directory:  python3 make_values.py  > values.json
Nothing here shares code with the Rust implementation: matrix square roots use
scipy.linalg.sqrtm (Schur method), densities scipy.stats, the chi-square quantile
scipy.stats.chi2.ppf, the 1-D KL uses mpmath (50 digits) and is cross-checked by
numerical integration.
"""
import json

import mpmath
import numpy as np
from scipy import integrate, linalg, stats

GAUSSIANS = {
    "A": ([0.1, -0.2], [[2.0, 0.7], [0.7, 0.5]]),
    "B": ([1.3, 0.4], [[0.3, -0.1], [-0.1, 1.2]]),
    # The scale of real (mu, sigma) weight clusters.
    "C": ([0.01, 0.002], [[1e-4, 1.5e-5], [1.5e-5, 4e-6]]),
    "D": ([-0.5, 2.0], [[1.0, 0.0], [0.0, 1.0]]),
    # E and F share a covariance: barycentre covariance = S, paper rule = 1.5 S + d d^T / 8.
    "E": ([0.0, 0.0], [[0.5, 0.2], [0.2, 0.3]]),
    "F": ([1.0, -2.0], [[0.5, 0.2], [0.2, 0.3]]),
}
POINTS = [[0.0, 0.0], [0.3, -0.1], [1.5, 2.5], [-2.0, 0.7], [0.011, 0.0025]]
PAIRS = [("A", "B"), ("B", "A"), ("A", "C"), ("B", "D"), ("C", "D"), ("A", "A"), ("E", "F")]
WEIGHTED_PAIRS = [(3.0, "A", 1.0, "B"), (1.0, "A", 5.0, "C"), (2.0, "E", 1.0, "F")]
SETS = [
    [(1.0, "A"), (1.0, "B")],
    [(0.2, "A"), (0.5, "B"), (0.3, "D")],
    [(2.0, "A"), (1.0, "C")],
    [(1.0, "E"), (1.0, "F")],
]


def g(name):
    m, s = GAUSSIANS[name]
    return np.array(m, dtype=float), np.array(s, dtype=float)


def sqrtm(m):
    r = linalg.sqrtm(m)
    return np.real(r)


def w2_sq(m1, s1, m2, s2):
    r1 = sqrtm(s1)
    cross = sqrtm(r1 @ s2 @ r1)
    return float(np.sum((m1 - m2) ** 2) + np.trace(s1 + s2 - 2.0 * cross))


def kl2(mq, sq, mp, sp):
    pinv = np.linalg.inv(sp)
    d = mp - mq
    return float(
        0.5
        * (
            np.trace(pinv @ sq)
            + d @ pinv @ d
            - 2.0
            + np.log(np.linalg.det(sp))
            - np.log(np.linalg.det(sq))
        )
    )


def kl1(mq, sq, mp, sp):
    # 50-digit arithmetic so that nearly equal sigmas do not lose digits to cancellation.
    with mpmath.workdps(50):
        mq_, sq_, mp_, sp_ = (mpmath.mpf(v) for v in (mq, sq, mp, sp))
        closed = float(mpmath.log(sp_ / sq_) + (sq_**2 + (mq_ - mp_) ** 2) / (2 * sp_**2) - mpmath.mpf(1) / 2)
    q, p = stats.norm(mq, sq), stats.norm(mp, sp)
    numeric, _ = integrate.quad(
        lambda x: q.pdf(x) * (q.logpdf(x) - p.logpdf(x)), mq - 40 * sq, mq + 40 * sq,
        epsabs=1e-14, epsrel=1e-12, limit=200,
    )
    assert abs(closed - numeric) < 1e-9 * max(1.0, closed), (closed, numeric)
    return float(closed)


def paper_weighted(w1, m1, s1, w2, m2, s2):
    a, b = w1 / (w1 + w2), w2 / (w1 + w2)
    d = (m1 - m2).reshape(2, 1)
    r1 = sqrtm(s1)
    geo = sqrtm(r1 @ s2 @ r1)
    cov = a * s1 + b * s2 + 0.5 * a * b * (d @ d.T) + 2.0 * a * b * geo
    return a * m1 + b * m2, cov


def barycenter(items):
    w = np.array([x[0] for x in items], dtype=float)
    w /= w.sum()
    ms = [g(x[1])[0] for x in items]
    ss = [g(x[1])[1] for x in items]
    mean = sum(wi * mi for wi, mi in zip(w, ms))
    s = np.eye(2)  # different start from the Rust code on purpose
    for _ in range(10000):
        r = sqrtm(s)
        ri = np.linalg.inv(r)
        t = sum(wi * sqrtm(r @ si @ r) for wi, si in zip(w, ss))
        nxt = ri @ t @ t @ ri
        nxt = 0.5 * (nxt + nxt.T)
        done = np.linalg.norm(nxt - s) <= 1e-15 * np.linalg.norm(s)
        s = nxt
        if done:
            break
    # Fixed-point equation of the barycentre: S = sum_i w_i (S^1/2 S_i S^1/2)^1/2.
    r = sqrtm(s)
    resid = s - sum(wi * sqrtm(r @ si @ r) for wi, si in zip(w, ss))
    assert np.linalg.norm(resid) < 1e-12 * np.linalg.norm(s), resid
    return mean, s


def moment(items):
    w = np.array([x[0] for x in items], dtype=float)
    w /= w.sum()
    ms = [g(x[1])[0] for x in items]
    ss = [g(x[1])[1] for x in items]
    mean = sum(wi * mi for wi, mi in zip(w, ms))
    cov = sum(wi * (si + np.outer(mi - mean, mi - mean)) for wi, mi, si in zip(w, ms, ss))
    return mean, cov


def enc(mean, cov):
    return {"mean": [float(v) for v in mean], "cov": [[float(v) for v in row] for row in cov]}


out = {"gaussians": {k: {"mean": m, "cov": s} for k, (m, s) in GAUSSIANS.items()}}

out["density"] = []
for name in GAUSSIANS:
    m, s = g(name)
    dist = stats.multivariate_normal(m, s)
    for x in POINTS:
        xv = np.array(x)
        out["density"].append({
            "g": name, "x": x,
            "mahalanobis_sq": float((xv - m) @ np.linalg.inv(s) @ (xv - m)),
            "log_pdf": float(dist.logpdf(xv)),
            "pdf": float(dist.pdf(xv)),
        })
    out.setdefault("log_det", {})[name] = float(np.linalg.slogdet(s)[1])
    out.setdefault("sqrtm", {})[name] = [[float(v) for v in row] for row in sqrtm(s)]

out["pairs"] = []
for p, q in PAIRS:
    m1, s1 = g(p)
    m2, s2 = g(q)
    pm, pc = paper_weighted(1.0, m1, s1, 1.0, m2, s2)
    bm, bc = barycenter([(1.0, p), (1.0, q)])
    out["pairs"].append({
        "a": p, "b": q,
        "w2_sq": w2_sq(m1, s1, m2, s2),
        "kl": kl2(m1, s1, m2, s2),
        "paper": enc(pm, pc),
        # How far the paper's rule is from the W2 barycentre (W2 between the two results).
        "w2_paper_vs_barycenter": float(np.sqrt(max(w2_sq(pm, pc, bm, bc), 0.0))),
    })

out["weighted_pairs"] = []
for w1, p, w2, q in WEIGHTED_PAIRS:
    m1, s1 = g(p)
    m2, s2 = g(q)
    out["weighted_pairs"].append({"w1": w1, "a": p, "w2": w2, "b": q, "paper": enc(*paper_weighted(w1, m1, s1, w2, m2, s2))})

out["sets"] = []
for items in SETS:
    out["sets"].append({
        "items": [[w, n] for w, n in items],
        "barycenter": enc(*barycenter(items)),
        "moment": enc(*moment(items)),
    })

out["kl_1d"] = []
for mq, sq, mp, sp in [(0.1, 0.2, -0.3, 0.3), (0.0, 1.0, 0.0, 1.0 + 1e-6), (1e-3, 1e-4, 2e-3, 5e-4), (2.0, 3.0, -1.0, 0.5)]:
    out["kl_1d"].append({"args": [mq, sq, mp, sp], "kl": kl1(mq, sq, mp, sp)})

out["chi2_2"] = [{"p": p, "q": float(stats.chi2.ppf(p, 2))} for p in [0.0, 0.5, 0.9, 0.95, 0.99, 0.999999]]

print(json.dumps(out, indent=1))
