#!/usr/bin/env python3
"""Scores a PyTorch classifier on Fashion-MNIST and on the 15 corrupted test sets, to check
that the corruption severities span a useful range (the README's table).

    cargo run -p bnn-data --release --example corruptions -- OUT
    python3 tests/reference/corruption_peer.py OUT [SEED] [EPOCHS] [lenet|mlp]

Trains on the clean training set (Adam 1e-3, batch 128, no augmentation, 2 CPU threads),
then prints accuracy, NLL, 15-bin ECE and mean confidence on the clean test set and on
every `OUT/<kind>-<severity>/` folder. Needs numpy and torch.
"""
import gzip
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FASHION = os.environ.get("FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
MEAN, STD = 0.2860, 0.3530  # NormStats::FASHION_MNIST


def read_idx(path):
    raw = open(path, "rb").read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * rank).reshape(dims)


def images(x):
    return ((torch.tensor(x, dtype=torch.float32) / 255.0 - MEAN) / STD).unsqueeze(1)


def labels(y):
    return torch.tensor(y.astype(np.int64))


def network(name):
    if name == "lenet":
        return nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 400), nn.ReLU(),
                         nn.Linear(400, 400), nn.ReLU(), nn.Linear(400, 10))


def score(net, x, y, bins=15):
    with torch.no_grad():
        logp = torch.cat([F.log_softmax(net(x[i:i + 1000]), 1) for i in range(0, len(x), 1000)])
    conf, pred = logp.exp().max(1)
    correct = (pred == y).float()
    nll = -logp[torch.arange(len(y)), y].mean().item()
    which = torch.clamp((conf * bins).long(), max=bins - 1)
    ece = sum(
        (which == k).float().mean().item()
        * abs(correct[which == k].mean().item() - conf[which == k].mean().item())
        for k in range(bins) if (which == k).any())
    return correct.mean().item(), nll, ece, conf.mean().item()


def main():
    out = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    model = sys.argv[4] if len(sys.argv) > 4 else "lenet"
    torch.set_num_threads(2)
    torch.manual_seed(seed)
    xtr = images(read_idx(f"{FASHION}/train-images-idx3-ubyte.gz"))
    ytr = labels(read_idx(f"{FASHION}/train-labels-idx1-ubyte.gz"))
    xte = images(read_idx(f"{FASHION}/t10k-images-idx3-ubyte.gz"))
    yte = labels(read_idx(f"{FASHION}/t10k-labels-idx1-ubyte.gz"))
    net = network(model)
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    for _ in range(epochs):
        order = torch.randperm(len(xtr))
        for i in range(0, len(xtr), 128):
            batch = order[i:i + 128]
            loss = F.cross_entropy(net(xtr[batch]), ytr[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    print(f"# {model}, {epochs} epochs, seed {seed}")
    print("set accuracy nll ece confidence")
    rows = [("clean", xte, yte)]
    for name in sorted(os.listdir(out)):
        folder = os.path.join(out, name)
        if os.path.isdir(folder):
            y = labels(read_idx(f"{folder}/t10k-labels-idx1-ubyte"))
            assert torch.equal(y, yte), f"{folder}: labels differ from the clean test set"
            rows.append((name, images(read_idx(f"{folder}/t10k-images-idx3-ubyte")), y))
    for name, x, y in rows:
        acc, nll, ece, conf = score(net, x, y)
        print(f"{name} {acc:.4f} {nll:.3f} {ece:.4f} {conf:.3f}")


if __name__ == "__main__":
    main()
