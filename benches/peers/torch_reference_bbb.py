#!/usr/bin/env python3
"""PyTorch reference of the Bayes-by-Backprop recipe that `swbnn`'s `reference` recipe mirrors:
a deterministic net and a BBB net on Fashion-MNIST, evaluated as `cargo xtask reproduce`
evaluates (accuracy, NLL, ECE with 15 bins, mean confidence, OOD AUROC against the 10,000 MNIST
digits by max-probability, predictive entropy and mutual information, 30 Monte-Carlo samples).

Recipe (both nets, from scratch): SGD under OneCycleLR's defaults to lr 0.1 (cosine phases, 30 %
warm-up, momentum cycled 0.95 -> 0.85 -> 0.95; the same rate for mu and rho), batch 128,
horizontal flips, normalisation (0.2860, 0.3530); 5,000 training images held out as a
validation split (`--holdout`), as swbnn holds out its own. BBB: rho initialised to the
constant -6, prior N(0, 0.1^2), loss = mean NLL + KL / N_train, one weight sample per forward
pass. What still differs from swbnn is listed in docs/method.md.

    python3 benches/peers/torch_reference_bbb.py --arch lenet5 --epochs 3 --train-subset 20000 --seed 0

Prints one JSON line per method. `--save PATH` writes the trained BBB net in bayesian-torch's
names (`swbnn import` reads it); `--load PATH` evaluates such a net, or one written by `swbnn
export --convention bayesian-torch`, instead of training: with both, each side's model is
evaluated by the other side's code.

    python3 benches/peers/torch_reference_bbb.py --arch resnet20 --epochs 5 --methods bbb --seed 100 --save torch.safetensors
    swbnn export results/fashion-mnist/stages/bbb --convention bayesian-torch --out ours.safetensors
    python3 benches/peers/torch_reference_bbb.py --arch resnet20 --methods bbb --load ours.safetensors
"""
import argparse
import gzip
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530
PRIOR_SIGMA = 0.1


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[:4], "big")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(magic & 0xFF)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * len(dims)).reshape(dims)


def load(prefix):
    x = idx(prefix + "images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = idx(prefix + "labels-idx1-ubyte.gz").astype(np.int64)
    return torch.from_numpy((x - MEAN) / STD).unsqueeze(1), torch.from_numpy(y)


def stratified(y, n, seed):
    rng = np.random.default_rng(seed)
    per = n // 10
    keep = np.concatenate([rng.permutation(np.flatnonzero(y.numpy() == c))[:per] for c in range(10)])
    return torch.from_numpy(np.sort(keep))


class BayesParam(nn.Module):
    def __init__(self, shape, fan_in):
        super().__init__()
        bound = fan_in ** -0.5
        self.mu = nn.Parameter(torch.empty(shape).uniform_(-bound, bound))
        self.rho = nn.Parameter(torch.full(shape, -6.0))

    def sample(self):
        sigma = F.softplus(self.rho)
        return self.mu + sigma * torch.randn_like(sigma)

    def kl(self):
        sigma = F.softplus(self.rho)
        return (torch.log(PRIOR_SIGMA / sigma) + (sigma ** 2 + self.mu ** 2) / (2 * PRIOR_SIGMA ** 2) - 0.5).sum()


class Linear(nn.Module):
    def __init__(self, bayes, d_in, d_out):
        super().__init__()
        self.bayes = bayes
        if bayes:
            self.w, self.b = BayesParam((d_out, d_in), d_in), BayesParam((d_out,), d_in)
        else:
            self.lin = nn.Linear(d_in, d_out)

    def forward(self, x):
        return F.linear(x, self.w.sample(), self.b.sample()) if self.bayes else self.lin(x)


class Conv(nn.Module):
    def __init__(self, bayes, c_in, c_out, k, stride=1, padding=0, bias=True):
        super().__init__()
        self.bayes, self.stride, self.padding = bayes, stride, padding
        if bayes:
            fan = c_in * k * k
            self.w = BayesParam((c_out, c_in, k, k), fan)
            self.b = BayesParam((c_out,), fan) if bias else None
        else:
            self.conv = nn.Conv2d(c_in, c_out, k, stride, padding, bias=bias)

    def forward(self, x):
        if not self.bayes:
            return self.conv(x)
        b = self.b.sample() if self.b is not None else None
        return F.conv2d(x, self.w.sample(), b, self.stride, self.padding)


def lenet5(bayes):
    return nn.Sequential(
        Conv(bayes, 1, 6, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(2),
        Conv(bayes, 6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        Linear(bayes, 16 * 5 * 5, 120), nn.ReLU(), Linear(bayes, 120, 84), nn.ReLU(), Linear(bayes, 84, 10))


class Block(nn.Module):
    def __init__(self, bayes, c_in, c_out, stride):
        super().__init__()
        self.c1, self.b1 = Conv(bayes, c_in, c_out, 3, stride, 1, False), nn.BatchNorm2d(c_out)
        self.c2, self.b2 = Conv(bayes, c_out, c_out, 3, 1, 1, False), nn.BatchNorm2d(c_out)
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(Conv(bayes, c_in, c_out, 1, stride, 0, False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + idt)


def resnet20(bayes):
    layers = [Conv(bayes, 1, 16, 3, 1, 1, False), nn.BatchNorm2d(16), nn.ReLU()]
    c = 16
    for s, w in enumerate([16, 32, 64]):
        for b in range(3):
            layers.append(Block(bayes, c, w, 2 if s > 0 and b == 0 else 1))
            c = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), Linear(bayes, 64, 10)]
    return nn.Sequential(*layers)


def bayesian_torch_names(model, arch):
    """(name, module) of every Bayesian layer and BatchNorm under bayesian-torch's names, the
    names `swbnn export --convention bayesian-torch` writes and `swbnn import` reads."""
    layers = list(model)
    if arch == "lenet5":
        return list(zip(["conv1", "conv2", "fc1", "fc2", "fc3"], [layers[i] for i in (0, 3, 7, 9, 11)]))
    out = [("conv1", layers[0]), ("bn1", layers[1])]
    for s in range(3):
        for b in range(3):
            blk, p = layers[3 + 3 * s + b], f"layer{s + 1}.{b}"
            out += [(p + ".conv1", blk.c1), (p + ".bn1", blk.b1), (p + ".conv2", blk.c2), (p + ".bn2", blk.b2)]
            if blk.down is not None:
                out += [(p + ".shortcut.0", blk.down[0]), (p + ".shortcut.1", blk.down[1])]
    return out + [("linear", layers[-1])]


def bayesian_torch_tensors(model, arch):
    """Every parameter and BatchNorm buffer of the BBB net by its bayesian-torch name (mu_/rho_
    kernel, weight and bias; BatchNorm's weight, bias and running statistics)."""
    out = {}
    for name, m in bayesian_torch_names(model, arch):
        if isinstance(m, nn.BatchNorm2d):
            for k in ("weight", "bias", "running_mean", "running_var"):
                out[f"{name}.{k}"] = getattr(m, k)
            continue
        kind = "kernel" if isinstance(m, Conv) else "weight"
        out[f"{name}.mu_{kind}"], out[f"{name}.rho_{kind}"] = m.w.mu, m.w.rho
        if m.b is not None:
            out[f"{name}.mu_bias"], out[f"{name}.rho_bias"] = m.b.mu, m.b.rho
    return out


def save_bayesian_torch(model, arch, path):
    """Writes the BBB net as .safetensors in bayesian-torch's names, atomically."""
    from safetensors.torch import save_file
    tmp = path + ".tmp"
    save_file({k: t.detach().clone() for k, t in bayesian_torch_tensors(model, arch).items()}, tmp)
    os.replace(tmp, path)


def load_bayesian_torch(model, arch, path):
    """Loads a BBB net saved in bayesian-torch's names (by `--save`, or by `swbnn export
    --convention bayesian-torch`) into `model`; a missing file, or a missing or misshapen
    tensor, is an error naming it."""
    from safetensors.torch import load_file
    try:
        state = load_file(path)
    except Exception as e:  # safetensors raises its own error types for a corrupt file
        raise SystemExit(f"{path}: cannot read as .safetensors: {e}")
    for key, t in bayesian_torch_tensors(model, arch).items():
        if key not in state:
            raise SystemExit(f"{path}: no tensor {key}")
        if tuple(state[key].shape) != tuple(t.shape):
            raise SystemExit(f"{path}: {key} is {tuple(state[key].shape)}, expected {tuple(t.shape)}")
        with torch.no_grad():
            t.copy_(state[key])


def kl(model):
    return sum(m.kl() for m in model.modules() if isinstance(m, BayesParam))


def train(model, x, y, epochs, seed, bayes, lr):
    g = torch.Generator().manual_seed(seed)
    steps = epochs * math.ceil(len(y) / 128)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=g)
        for i in range(0, len(y), 128):
            b = order[i:i + 128]
            xb = x[b]
            flip = torch.rand(len(b), generator=g) < 0.5
            xb = torch.where(flip[:, None, None, None], xb.flip(-1), xb)
            loss = F.cross_entropy(model(xb), y[b])
            if bayes:
                loss = loss + kl(model) / len(y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()


@torch.no_grad()
def predict(model, x, samples):
    """The MC mean of the softmaxes, and the mean of each sample's predictive entropy."""
    model.eval()
    out = torch.zeros(len(x), 10, dtype=torch.float64)
    sample_entropy = torch.zeros(len(x), dtype=torch.float64)
    for _ in range(samples):
        for i in range(0, len(x), 1000):
            p = F.softmax(model(x[i:i + 1000]), 1).double()
            out[i:i + 1000] += p
            sample_entropy[i:i + 1000] += entropy(p)
    return out / samples, sample_entropy / samples


def ece(p, y, bins=15):
    conf, pred = p.max(1)
    correct = (pred == y).double()
    edges = torch.linspace(0, 1, bins + 1, dtype=torch.float64)
    e = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (conf > lo) & (conf <= hi)
        if m.any():
            e += m.double().mean() * (conf[m].mean() - correct[m].mean()).abs()
    return float(e)


def auroc(s_in, s_out):
    s = torch.cat([s_in, s_out])
    lab = torch.cat([torch.ones(len(s_in)), torch.zeros(len(s_out))])
    order = torch.argsort(s)
    ranks = torch.empty_like(s)
    ranks[order] = torch.arange(1, len(s) + 1, dtype=s.dtype)
    # average ranks for ties
    uniq, inv = torch.unique(s, return_inverse=True)
    sums = torch.zeros(len(uniq), dtype=s.dtype).index_add_(0, inv, ranks)
    cnt = torch.zeros(len(uniq), dtype=s.dtype).index_add_(0, inv, torch.ones_like(ranks))
    ranks = (sums / cnt)[inv]
    n1, n0 = len(s_in), len(s_out)
    return float((ranks[lab == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def entropy(p):
    return -(p * p.clamp_min(1e-12).log()).sum(1)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--arch", default="lenet5", choices=["lenet5", "resnet20"])
    a.add_argument("--epochs", type=int, default=3)
    a.add_argument("--train-subset", type=int, default=None)
    a.add_argument("--holdout", type=int, default=5000,
                   help="training images held out as a validation split (stratified, NumPy seed 0), "
                        "as swbnn holds out its own; 0 trains on all")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--samples", type=int, default=30)
    a.add_argument("--lr", type=float, default=0.1)
    a.add_argument("--threads", type=int, default=2)
    a.add_argument("--methods", default="deterministic,bbb")
    a.add_argument("--data", default="/usr/share/datasets/fashion-mnist/")
    a.add_argument("--save", default=None,
                   help="write the trained BBB net here (.safetensors, bayesian-torch names) for "
                        "`swbnn import`")
    a.add_argument("--save-init", default=None,
                   help="also write the BBB net as initialised, before training (.safetensors, "
                        "bayesian-torch names), to train the other side from the same start")
    a.add_argument("--init", default=None,
                   help="start the BBB net from this file instead of the seeded initialisation "
                        "(.safetensors, bayesian-torch names, e.g. `swbnn export --convention "
                        "bayesian-torch` of one of our nets), then train it: the same start on both sides")
    a.add_argument("--load", default=None,
                   help="evaluate this BBB net (.safetensors, bayesian-torch names, e.g. from "
                        "`swbnn export --convention bayesian-torch`) instead of training one")
    a.add_argument("--ood", default=os.path.join(os.path.dirname(__file__), "../../../shared/data/mnist-10k/"))
    args = a.parse_args()
    torch.set_num_threads(args.threads)
    x, y = load(args.data + "train-")
    if args.holdout:
        held = stratified(y, args.holdout, 0).numpy()
        rest = torch.from_numpy(np.setdiff1d(np.arange(len(y)), held))
        x, y = x[rest], y[rest]
    if args.train_subset:
        keep = stratified(y, args.train_subset, 1)
        x, y = x[keep], y[keep]
    xt, yt = load(args.data + "t10k-")
    xo, _ = load(args.ood)
    for method in args.methods.split(","):
        bayes = method == "bbb"
        torch.manual_seed(args.seed)
        model = (lenet5 if args.arch == "lenet5" else resnet20)(bayes)
        if bayes and args.init:
            load_bayesian_torch(model, args.arch, args.init)
        if bayes and args.save_init:
            save_bayesian_torch(model, args.arch, args.save_init)
        t = time.perf_counter()
        if bayes and args.load:
            load_bayesian_torch(model, args.arch, args.load)
        else:
            train(model, x, y, args.epochs, args.seed, bayes, args.lr)
        secs = time.perf_counter() - t
        if bayes and args.save:
            save_bayesian_torch(model, args.arch, args.save)
        n = args.samples if bayes else 1
        (p, pe), (po, poe) = predict(model, xt, n), predict(model, xo, n)
        conf = p.max(1).values
        # Mutual information: entropy of the mean minus the mean of the samples' entropies.
        mi, mio = entropy(p) - pe, entropy(po) - poe
        print(json.dumps({
            "peer": "pytorch", "arch": args.arch, "method": method, "seed": args.seed,
            "epochs": args.epochs, "train_subset": args.train_subset, "holdout": args.holdout,
            "init": args.init if bayes else None,
            "accuracy": float((p.argmax(1) == yt).double().mean()),
            "nll": float(-p[torch.arange(len(yt)), yt].clamp_min(1e-12).log().mean()),
            "ece": ece(p, yt), "mean_confidence": float(conf.mean()),
            "ood_auroc": auroc(conf, po.max(1).values),
            "ood_auroc_entropy": auroc(-entropy(p), -entropy(po)),
            "ood_auroc_mi": auroc(-mi, -mio),
            "train_seconds": secs,
        }), flush=True)


if __name__ == "__main__":
    main()
