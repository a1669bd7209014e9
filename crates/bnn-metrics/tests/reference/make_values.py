#!/usr/bin/env python3
"""Reference values for bnn-metrics, computed independently with numpy and scikit-learn.

Run from this directory:  python3 make_values.py  (writes values.json next to it).
Inputs are generated from fixed seeds, rounded to float32 (what the Rust code receives) and
stored in the JSON together with the expected outputs; all expected values are computed in
float64 from those float32 inputs.
"""
import json
import os
import warnings

import numpy as np
import sklearn
from sklearn.metrics import (
    average_precision_score,
    brier_score_loss,
    roc_auc_score,
    roc_curve,
)

NLL_EPS = 1e-12  # bnn_metrics::NLL_EPSILON


def softmax64(logits32):
    x = logits32.astype(np.float64)
    x = x - x.max(axis=1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=1, keepdims=True)


def entropy(p):
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -t.sum(axis=-1)


def ece_guo(probs, labels, n_bins):
    """The common `_ECELoss` of Guo et al. (2017), in numpy: bins (lo, hi], edges k / B."""
    conf = probs.max(axis=1)
    pred = probs.argmax(axis=1)
    acc = (pred == labels).astype(np.float64)
    edges = np.arange(n_bins + 1) / n_bins
    ece, mce, bins = 0.0, 0.0, []
    for lo, hi in zip(edges[:-1], edges[1:]):
        in_bin = (conf > lo) & (conf <= hi)
        prop = in_bin.mean()
        if in_bin.sum() > 0:
            a, c = acc[in_bin].mean(), conf[in_bin].mean()
            ece += abs(c - a) * prop
            mce = max(mce, abs(c - a))
            bins.append(dict(count=int(in_bin.sum()), mean_confidence=c, accuracy=a))
        else:
            bins.append(dict(count=0, mean_confidence=0.0, accuracy=0.0))
    return ece, mce, bins


def classification_case(rng, n, c, extra_rows):
    logits = (rng.normal(size=(n, c)) * rng.uniform(0.5, 4.0, size=(n, 1))).astype(np.float32)
    probs32 = softmax64(logits).astype(np.float32)
    # Labels agree with the arg-max ~60 % of the time, so calibration errors are non-trivial.
    labels = np.where(rng.uniform(size=n) < 0.6, probs32.argmax(axis=1), rng.integers(0, c, size=n))
    # Edge cases: one-hot rows (confidence exactly 1.0, top bin edge) and a zero probability on
    # the true class (exercises the NLL clamp).
    for k in range(extra_rows):
        row = np.zeros(c, dtype=np.float32)
        row[k % c] = 1.0
        probs32 = np.vstack([probs32, row])
        labels = np.append(labels, (k % c) if k % 2 == 0 else (k + 1) % c)
    labels = labels.astype(np.int64)
    p = probs32.astype(np.float64)
    n_all = p.shape[0]
    ece15, mce15, bins15 = ece_guo(p, labels, 15)
    # float32 rows sum to 1 only within ~1e-7; scikit-learn warns about that but does not
    # renormalise, which is also what bnn-metrics does.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        brier = float(brier_score_loss(labels, p, labels=list(range(c))))
    onehot = np.eye(c)[labels]
    assert abs(brier - np.mean(((p - onehot) ** 2).sum(axis=1))) < 1e-12
    ece10, mce10, _ = ece_guo(p, labels, 10)
    nll = float(np.mean(-np.log(np.clip(p[np.arange(n_all), labels], NLL_EPS, None))))
    return dict(
        n=n_all,
        classes=c,
        probs=probs32.ravel().astype(np.float64).tolist(),
        labels=labels.tolist(),
        accuracy=float(np.mean(p.argmax(axis=1) == labels)),
        nll=nll,
        brier=brier,
        ece15=ece15,
        mce15=mce15,
        ece10=ece10,
        mce10=mce10,
        bins15=bins15,
        entropy=entropy(p).tolist(),
    )


def mc_case(rng, s, n, c):
    logits = (rng.normal(size=(s, n, c)) * 2.0 + rng.normal(size=(1, n, c)) * 2.0).astype(np.float32)
    ps = np.stack([softmax64(l) for l in logits])  # float64 softmax of the float32 logits
    mean = ps.mean(axis=0)
    h_mean = entropy(mean)
    exp_h = entropy(ps).mean(axis=0)
    return dict(
        samples=s,
        n=n,
        classes=c,
        logits=logits.ravel().astype(np.float64).tolist(),
        mean_probs=mean.ravel().tolist(),
        entropy=h_mean.tolist(),
        expected_entropy=exp_h.tolist(),
        mutual_information=(h_mean - exp_h).tolist(),
    )


def ood_metrics(in_scores, out_scores):
    """In-distribution = positive class; aupr_out uses OOD positive with negated scores."""
    y = np.concatenate([np.ones(len(in_scores)), np.zeros(len(out_scores))])
    s = np.concatenate([in_scores, out_scores])
    fpr, tpr, thr = roc_curve(y, s, drop_intermediate=False)
    return dict(
        auroc=float(roc_auc_score(y, s)),
        aupr_in=float(average_precision_score(y, s)),
        aupr_out=float(average_precision_score(1 - y, -s)),
        fpr_at_85_tpr=float(fpr[np.searchsorted(tpr, 0.85, side="left")]),
        fpr_at_95_tpr=float(fpr[np.searchsorted(tpr, 0.95, side="left")]),
        roc_fpr=fpr.tolist(),
        roc_tpr=tpr.tolist(),
        roc_thresholds=[float(t) if np.isfinite(t) else "inf" for t in thr],
    )


def ood_score_case(rng, n_in, n_out, with_ties):
    a = rng.normal(1.0, 1.0, size=n_in)
    b = rng.normal(0.0, 1.0, size=n_out)
    if with_ties:
        a, b = np.round(a, 1), np.round(b, 1)
    return dict(in_scores=a.tolist(), out_scores=b.tolist(), **ood_metrics(a, b))


def ood_probs_case(rng, n_in, n_out, c):
    li = (rng.normal(size=(n_in, c)) * 3.0).astype(np.float32)
    lo = (rng.normal(size=(n_out, c)) * 1.0).astype(np.float32)
    pi = softmax64(li).astype(np.float32)
    po = softmax64(lo).astype(np.float32)
    pi64, po64 = pi.astype(np.float64), po.astype(np.float64)
    return dict(
        n_in=n_in,
        n_out=n_out,
        classes=c,
        in_probs=pi.ravel().astype(np.float64).tolist(),
        out_probs=po.ravel().astype(np.float64).tolist(),
        max_prob={k: v for k, v in ood_metrics(pi64.max(1), po64.max(1)).items() if not k.startswith("roc_")},
        entropy={k: v for k, v in ood_metrics(-entropy(pi64), -entropy(po64)).items() if not k.startswith("roc_")},
    )


def main():
    rng = np.random.default_rng(20250503)
    out = dict(
        generator=f"make_values.py, numpy {np.__version__}, scikit-learn {sklearn.__version__}, seed 20250503",
        classification=classification_case(rng, 500, 10, extra_rows=6),
        mc=mc_case(rng, 7, 40, 5),
        ood_ties=ood_score_case(rng, 300, 200, with_ties=True),
        ood_no_ties=ood_score_case(rng, 150, 250, with_ties=False),
        ood_probs=ood_probs_case(rng, 120, 80, 6),
    )
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "values.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    print("wrote", path)


if __name__ == "__main__":
    main()
