"""Train a bayesian-torch LeNet-5 on Fashion-MNIST in PyTorch, evaluate it, and evaluate a
model that swbnn exported back (the README's interop path; numbers in docs/results.md).

    pip install torch bayesian-torch safetensors numpy
    python interop/examples/bayesian_torch_lenet.py train --epochs 2 --seed 0 --out lenet.safetensors
    python interop/examples/bayesian_torch_lenet.py eval-shared model-shared.safetensors

The network is swbnn's LeNet-5 (conv 5x5 x6 pad 2, max-pool, conv 5x5 x16, max-pool, 120, 84,
10, ReLU) in bayesian-torch's Reparameterization layers with their defaults: prior N(0, 1),
posterior mu init 0 (then PyTorch's), rho init -3. Inputs are normalised as swbnn normalises
Fashion-MNIST (mean 0.2860, std 0.3530). The ELBO is bayesian-torch's recipe: cross-entropy
plus KL / batch size. Metrics on the full test set from `--samples` Monte Carlo samples:
accuracy, NLL, ECE (15 equal-width bins) and Brier score of the mean softmax.
"""

import argparse
import gzip
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def lenet_bayesian_torch(in_ch, side, classes):
    """swbnn's LeNet-5 for `side`-pixel inputs in bayesian-torch layers."""
    from bayesian_torch.layers import Conv2dReparameterization as C
    from bayesian_torch.layers import LinearReparameterization as L

    s = (side // 2 - 4) // 2

    class LeNet5(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = C(in_ch, 6, 5, padding=2)
            self.conv2 = C(6, 16, 5)
            self.fc1 = L(16 * s * s, 120)
            self.fc2 = L(120, 84)
            self.fc3 = L(84, classes)

        def forward(self, x, return_kl=False):
            kl = 0
            x, k = self.conv1(x)
            kl += k
            x = F.max_pool2d(F.relu(x), 2)
            x, k = self.conv2(x)
            kl += k
            x = F.max_pool2d(F.relu(x), 2).flatten(1)
            x, k = self.fc1(x)
            kl += k
            x, k = self.fc2(F.relu(x))
            kl += k
            x, k = self.fc3(F.relu(x))
            kl += k
            return (x, kl) if return_kl else x

    return LeNet5()


def idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def split(name, data_dir):
    prefix = "train" if name == "train" else "t10k"
    x = idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
    y = idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz")).astype(np.int64)
    x = (torch.from_numpy(x)[:, None] - MEAN) / STD
    return x, torch.from_numpy(y)


def metrics(probs, labels):
    probs = probs.double()
    conf, pred = probs.max(1)
    correct = (pred == labels).double()
    nll = -torch.log(probs[torch.arange(len(labels)), labels].clamp_min(1e-12)).mean()
    onehot = F.one_hot(labels, probs.shape[1]).double()
    brier = ((probs - onehot) ** 2).sum(1).mean()
    ece = 0.0
    edges = torch.linspace(0, 1, 16, dtype=torch.float64)
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (conf > lo) & (conf <= hi)
        if m.any():
            ece += m.double().mean() * (correct[m].mean() - conf[m].mean()).abs()
    return {
        "accuracy": correct.mean().item(),
        "nll": nll.item(),
        "ece": float(ece),
        "brier": brier.item(),
        "n": len(labels),
    }


@torch.no_grad()
def mc_probs(forward, x, samples, batch=1000):
    out = []
    for i in range(0, len(x), batch):
        xb = x[i : i + batch]
        out.append(torch.stack([F.softmax(forward(xb), 1) for _ in range(samples)]).mean(0))
    return torch.cat(out)


def train(args):
    from safetensors.torch import save_file

    torch.manual_seed(args.seed)
    x, y = split("train", args.data)
    model = lenet_bayesian_torch(1, 28, 10)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    n = len(x)
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(n)
        total = 0.0
        for i in range(0, n, args.batch_size):
            b = perm[i : i + args.batch_size]
            logits, kl = model(x[b], return_kl=True)
            loss = F.cross_entropy(logits, y[b]) + kl / len(b)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
        print(f"epoch {epoch + 1}: loss {total / n:.4f}", file=sys.stderr)
    model.eval()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, args.out)
    xt, yt = split("test", args.data)
    torch.manual_seed(args.seed + 1)
    result = metrics(mc_probs(model, xt, args.samples), yt)
    result.update(samples=args.samples, seed=args.seed, epochs=args.epochs, model=args.out)
    print(json.dumps(result))


def eval_shared(args):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
    import swbnn_shared

    torch.manual_seed(args.seed)
    model = swbnn_shared.load(args.model)
    xt, yt = split("test", args.data)
    result = metrics(mc_probs(model, xt, args.samples), yt)
    result.update(samples=args.samples, seed=args.seed, model=args.model)
    print(json.dumps(result))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=DATA, help="folder of the Fashion-MNIST idx files")
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train, save as .safetensors, evaluate")
    t.add_argument("--epochs", type=int, default=2)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--batch-size", type=int, default=128)
    t.add_argument("--out", required=True)
    e = sub.add_parser("eval-shared", help="evaluate `swbnn export --convention shared` output")
    e.add_argument("model")
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("THREADS", "1")))
    train(args) if args.cmd == "train" else eval_shared(args)
