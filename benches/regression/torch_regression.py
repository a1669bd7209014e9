"""The regression evidence's PyTorch peer: the recipe of ``run.py`` written with bayesian-torch
(a deterministic MLP, then Bayes by Backprop started from it), and the BNN compressed in
PyTorch by ``swbnn.torch.compress(likelihood="gaussian")``; every model's metrics computed by
the same Rust code as ``swbnn eval`` (``swbnn.metrics.regression``).

    python3 benches/regression/torch_regression.py --data DIR --table diabetes \\
        --seeds 0,1,2,3,4 --epochs 300 --k 16 --out runs/diabetes-torch.json [--dev]

The recipe, as ``swbnn train``'s: features and targets standardised on the training rows; a
fifth of the training rows held out as validation (a seeded draw of its own, not the Rust
draw's rows); an MLP of two hidden layers of 100 units with a heteroscedastic Gaussian head
(``2 T`` outputs, ``std = softplus(s) + 0.001``); batches of 128; the deterministic net with
Adam at 1e-3 under a one-cycle schedule (linear, a quarter warm-up); Bayes by Backprop from its
weights (bayesian-torch's ``dnn_to_bnn``, prior N(0, 0.1^2)), Adam at 1e-3 for the means and
1e-2 for the ``rho``s, sigmas starting at ``softplus(-6)``, loss NLL + KL / N with the KL summed
over the weights (``kl_of``: bayesian-torch's ``kl_loss()`` averages it); 30 Monte Carlo
samples at test. The conformal intervals are fitted on the validation rows at 0.9.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import swbnn
import swbnn.torch as swt

SAMPLES = 30


def read(path: Path):
    with open(path) as f:
        rows = list(csv.reader(f))
    values = np.asarray(rows[1:], dtype=np.float64)
    return values[:, :-1], values[:, -1:]


def mlp(d_in: int, hidden: str, d_out: int) -> nn.Sequential:
    widths = [d_in] + [int(w) for w in hidden.split(",")]
    layers: list = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(widths[-1], d_out))


def nll(out, y):
    t = out.shape[1] // 2
    mean, std = out[:, :t], F.softplus(out[:, t:]) + 1e-3
    return (std.log() + 0.5 * ((y - mean) / std) ** 2).sum(1).mean() + 0.5 * np.log(2 * np.pi) * t


def kl_of(model):
    """The KL of every Bayesian weight and bias to the prior, summed (the ELBO's, as swbnn
    trains): bayesian-torch's own ``kl_loss()`` averages it over each layer's elements, which
    weighs it about ten thousand times less for these layers."""
    total = 0.0
    for m in model.modules():
        if hasattr(m, "mu_weight"):
            for mu, rho in ((m.mu_weight, m.rho_weight), (m.mu_bias, m.rho_bias)):
                sigma = F.softplus(rho)
                p = 0.1
                total = total + (math.log(p) - sigma.log() + (sigma**2 + mu**2) / (2 * p * p) - 0.5).sum()
    return total


def fit(model, x, y, epochs, groups, n_train, kl: bool):
    opt = torch.optim.Adam(groups)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=128, shuffle=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=[g["lr"] for g in groups], total_steps=epochs * len(loader), pct_start=0.25,
        anneal_strategy="linear", cycle_momentum=False,
    )
    model.train()
    for _ in range(epochs):
        for xb, yb in loader:
            loss = nll(model(xb), yb) + (kl_of(model) / n_train if kl else 0.0)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()


def predictive(model, x, samples):
    model.eval()
    with torch.no_grad():
        outs = [model(x) for _ in range(samples)]
    t = outs[0].shape[1] // 2
    means = np.stack([o[:, :t].numpy() for o in outs])
    stds = np.stack([(F.softplus(o[:, t:]) + 1e-3).numpy() for o in outs])
    return means, stds


def metrics(model, samples, xs, ys_raw, xv, yv_raw, scale):
    mu, sd = scale
    m, s = predictive(model, xv, samples)
    qhat = swbnn.metrics.conformal_intervals(
        (m * sd + mu).astype(np.float32), (s * sd).astype(np.float32), yv_raw.astype(np.float32), 0.9
    )
    m, s = predictive(model, xs, samples)
    return swbnn.metrics.regression(
        (m * sd + mu).astype(np.float32), (s * sd).astype(np.float32), ys_raw.astype(np.float32),
        conformal_qhat=qhat, level=0.9,
    )


def run_seed(args, train, test, seed):
    from bayesian_torch.models.dnn_to_bnn import dnn_to_bnn

    x_all, y_all = train
    rng = np.random.default_rng(1000 + seed)
    order = rng.permutation(len(x_all))
    n_val = len(x_all) // 5
    val, fit_rows = order[:n_val], order[n_val:]
    fx, fy = x_all[fit_rows], y_all[fit_rows]
    xm, xs = fx.mean(0), fx.std(0)
    xs[xs == 0] = 1.0
    ym, ys = fy.mean(0), fy.std(0)
    z = lambda a, m, s: torch.tensor((a - m) / s, dtype=torch.float32)  # noqa: E731
    tx, ty = z(fx, xm, xs), z(fy, ym, ys)
    vx, tex = z(x_all[val], xm, xs), z(test[0], xm, xs)
    scale = (ym, ys)

    torch.manual_seed(seed)
    det = mlp(x_all.shape[1], args.hidden, 2 * y_all.shape[1])
    fit(det, tx, ty, args.epochs, [{"params": det.parameters(), "lr": 1e-3}], len(tx), kl=False)
    rows = []

    def row(method, model, samples, params):
        m = metrics(model, samples, tex, test[1], vx, y_all[val], scale)
        cov90 = next(i for i in m["intervals"] if i["level"] == 0.9)
        rows.append({
            "table": args.table, "seed": seed, "method": method, "rmse": m["rmse"], "nll": m["gaussian_nll"],
            "crps": m["crps"], "coverage_90": cov90["coverage"], "width_90": cov90["mean_width"],
            "pit_error": m["pit_calibration_error"], "conformal_coverage_90": m["conformal"]["coverage"],
            "conformal_width_90": m["conformal"]["mean_width"], "parameters": params, "test_rows": m["n"],
        })

    row("torch deterministic", det, 1, sum(p.numel() for p in det.parameters()))
    bnn = mlp(x_all.shape[1], args.hidden, 2 * y_all.shape[1])
    dnn_to_bnn(bnn, {"prior_mu": 0.0, "prior_sigma": 0.1, "posterior_mu_init": 0.0, "posterior_rho_init": -6.0,
                     "type": "Reparameterization", "moped_enable": False})
    with torch.no_grad():  # the means from the deterministic net, every rho at -6
        for b, d in zip(bnn, det):
            if hasattr(b, "mu_weight"):
                b.mu_weight.copy_(d.weight)
                b.mu_bias.copy_(d.bias)
                b.rho_weight.fill_(-6.0)
                b.rho_bias.fill_(-6.0)
    rho = [p for n, p in bnn.named_parameters() if "rho" in n]
    mu = [p for n, p in bnn.named_parameters() if "rho" not in n]
    fit(bnn, tx, ty, args.epochs, [{"params": mu, "lr": 1e-3}, {"params": rho, "lr": 1e-2}], len(tx), kl=True)
    row("bayesian-torch bbb", bnn, SAMPLES, sum(p.numel() for p in bnn.parameters()))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tx, ty), batch_size=128, shuffle=True)
    val_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(vx, z(y_all[val], ym, ys)), batch_size=128)
    shared, report = swt.compress(bnn, loader, val_loader=val_loader, k=args.k, epochs=args.epochs,
                                  likelihood="gaussian", config={"retrain": {"seed": seed}})
    row("swbnn.torch 2dgbnn", shared, SAMPLES, report.total["params_after"])
    return rows


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
    args = p.parse_args()
    torch.set_num_threads(1)
    names = ("dev-train", "dev-val") if args.dev else ("train", "test")
    train = read(args.data / f"{args.table}-{names[0]}.csv")
    test = read(args.data / f"{args.table}-{names[1]}.csv")
    rows = json.loads(args.out.read_text()) if args.out.exists() else []
    done = {r["seed"] for r in rows}
    for seed in (int(s) for s in args.seeds.split(",")):
        if seed in done:
            continue
        rows += run_seed(args, train, test, seed)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1))
        print(f"{args.table} seed {seed}: " + "; ".join(
            f"{r['method']} rmse {r['rmse']:.3f} nll {r['nll']:.3f}" for r in rows if r["seed"] == seed))


if __name__ == "__main__":
    main()
