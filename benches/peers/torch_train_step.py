#!/usr/bin/env python3
"""PyTorch peer of `cargo xtask bench train-step`: images/s of a full training step
(forward, backward, Adam/SGD step) of the MLP 784-400-400-10 or ResNet-20 on random 1x28x28
inputs, batch 128, CPU, deterministic vs Bayesian (reparameterisation, one eps per weight per
step, softplus sigma, closed-form KL to N(0, 0.1^2)). Prints the same JSON lines, with
`cpu_images_per_s` (images per second of process CPU time; with OMP_WAIT_POLICY=PASSIVE idle
threads do not spin), the figure to compare on a machine shared with other work.

    pip install torch  # CPU wheel
    python3 benches/peers/torch_train_step.py --arch mlp --threads 2
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class BayesLinear(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.mu = nn.Parameter(torch.empty(d_out, d_in).uniform_(-d_in ** -0.5, d_in ** -0.5))
        self.rho = nn.Parameter(torch.full((d_out, d_in), -5.0))
        self.b = nn.Parameter(torch.zeros(d_out))

    def forward(self, x):
        sigma = F.softplus(self.rho)
        w = self.mu + sigma * torch.randn_like(sigma)
        return F.linear(x, w, self.b)

    def kl(self):
        sigma = F.softplus(self.rho)
        return (torch.log(0.1 / sigma) + (sigma ** 2 + self.mu ** 2) / 0.02 - 0.5).sum()


class BayesConv(nn.Module):
    def __init__(self, c_in, c_out, k, stride=1, padding=0):
        super().__init__()
        bound = (c_in * k * k) ** -0.5
        self.mu = nn.Parameter(torch.empty(c_out, c_in, k, k).uniform_(-bound, bound))
        self.rho = nn.Parameter(torch.full((c_out, c_in, k, k), -5.0))
        self.stride, self.padding = stride, padding

    def forward(self, x):
        sigma = F.softplus(self.rho)
        w = self.mu + sigma * torch.randn_like(sigma)
        return F.conv2d(x, w, None, self.stride, self.padding)

    def kl(self):
        sigma = F.softplus(self.rho)
        return (torch.log(0.1 / sigma) + (sigma ** 2 + self.mu ** 2) / 0.02 - 0.5).sum()


def conv(bayes, c_in, c_out, k, stride=1, padding=0):
    if bayes:
        return BayesConv(c_in, c_out, k, stride, padding)
    return nn.Conv2d(c_in, c_out, k, stride, padding, bias=False)


def dense(bayes, d_in, d_out):
    return BayesLinear(d_in, d_out) if bayes else nn.Linear(d_in, d_out)


class Block(nn.Module):
    def __init__(self, bayes, c_in, c_out, stride):
        super().__init__()
        self.c1, self.b1 = conv(bayes, c_in, c_out, 3, stride, 1), nn.BatchNorm2d(c_out)
        self.c2, self.b2 = conv(bayes, c_out, c_out, 3, 1, 1), nn.BatchNorm2d(c_out)
        self.down = None
        if stride != 1 or c_in != c_out:
            self.down = nn.Sequential(conv(bayes, c_in, c_out, 1, stride), nn.BatchNorm2d(c_out))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        h = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(h)) + idt)


def resnet20(bayes):
    layers = [conv(bayes, 1, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU()]
    c = 16
    for s, w in enumerate([16, 32, 64]):
        for b in range(3):
            layers.append(Block(bayes, c, w, 2 if s > 0 and b == 0 else 1))
            c = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), dense(bayes, 64, 10)]
    return nn.Sequential(*layers)


def mlp(bayes):
    return nn.Sequential(nn.Flatten(), dense(bayes, 784, 400), nn.ReLU(), dense(bayes, 400, 400), nn.ReLU(), dense(bayes, 400, 10))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="mlp", choices=["mlp", "resnet20"])
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--kind", choices=["deterministic", "bayesian"], help="only this kind")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    x = torch.randn(a.batch, 1, 28, 28)
    y = torch.randint(0, 10, (a.batch,))
    for kind in [a.kind] if a.kind else ["deterministic", "bayesian"]:
        bayes = kind == "bayesian"
        model = (resnet20 if a.arch == "resnet20" else mlp)(bayes)
        opt = torch.optim.Adam(model.parameters(), 1e-3)

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            if bayes:
                loss = loss + sum(m.kl() for m in model.modules() if hasattr(m, "kl")) / 60000
            loss.backward()
            opt.step()

        for _ in range(3):
            step()
        t, c = time.perf_counter(), time.process_time()
        for _ in range(a.steps):
            step()
        s, cpu = time.perf_counter() - t, time.process_time() - c
        print(json.dumps({"bench": "train-step", "peer": "pytorch", "arch": a.arch, "batch": a.batch,
                          "kind": kind, "estimator": "reparam" if bayes else None,
                          "threads": a.threads, "images_per_s": a.batch * a.steps / s,
                          "cpu_images_per_s": a.batch * a.steps / cpu}))


if __name__ == "__main__":
    main()
