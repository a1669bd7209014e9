#!/usr/bin/env python3
"""PyTorch peer of the GPU benchmark set (`cargo xtask bench train-step|mc-inference --backend
cuda`): images/s of a full training step (forward, backward, Adam step) and of Monte-Carlo
inference (`--samples` stochastic passes) on random inputs, deterministic vs Bayesian
(reparameterisation, one eps per weight per pass, softplus sigma, closed-form KL to N(0, 0.1^2)),
on CUDA, eager mode, fp32 with TF32 off (as burn's f32 kernels on wgpu) or, with `--tf32`, on
(as burn-cuda's f32 convolutions and matmuls, which use TF32 tensor cores), with the peak GPU
memory PyTorch allocated. Prints the same JSON lines as the Rust benchmarks.

    python3 benches/peers/torch_gpu_bench.py --arch resnet18 --input 3x32 --batch 128
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_train_step import Block, conv, dense, mlp, resnet20


def resnet18(bayes, channels):
    """ResNet-18 with the CIFAR stem (3x3/1 conv, no max-pool), as bnn-models for <= 64 px."""
    layers = [conv(bayes, channels, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU()]
    c = 64
    for s, w in enumerate([64, 128, 256, 512]):
        for b in range(2):
            layers.append(Block(bayes, c, w, 2 if s > 0 and b == 0 else 1))
            c = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), dense(bayes, 512, 10)]
    return nn.Sequential(*layers)


def build(arch, bayes, channels):
    if arch == "resnet18":
        return resnet18(bayes, channels)
    if arch == "resnet20":
        assert channels == 1, "the peer's resnet20 takes 1-channel input"
        return resnet20(bayes)
    return mlp(bayes)


def timed(fn, reps, dev):
    torch.cuda.synchronize(dev)
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize(dev)
    return time.perf_counter() - t


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="resnet18", choices=["mlp", "resnet20", "resnet18"])
    p.add_argument("--input", default="3x32", help="CHANNELSxSIZE")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--samples", type=int, default=30)
    p.add_argument("--batches", type=int, default=2)
    p.add_argument("--device", default="cuda")
    p.add_argument("--kind", choices=["deterministic", "bayesian"], help="only this kind")
    p.add_argument("--only", choices=["train-step", "mc-inference"], help="only this benchmark")
    p.add_argument("--tf32", action="store_true", help="allow TF32 in matmuls and convolutions")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    dev = torch.device(a.device)
    c, hw = (int(v) for v in a.input.split("x"))
    torch.manual_seed(0)
    x = torch.randn(a.batch, c, hw, hw, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    common = {"peer": "pytorch", "arch": a.arch, "batch": a.batch, "input": [c, hw, hw],
              "backend": a.device, "device_name": torch.cuda.get_device_name(dev),
              "tf32": a.tf32, "torch": torch.__version__}
    for kind in [a.kind] if a.kind else ["deterministic", "bayesian"]:
        bayes = kind == "bayesian"
        est = "reparam" if bayes else None
        if a.only in (None, "train-step"):
            model = build(a.arch, bayes, c).to(dev)
            opt = torch.optim.Adam(model.parameters(), 1e-3)

            def step():
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                if bayes:
                    loss = loss + sum(m.kl() for m in model.modules() if hasattr(m, "kl")) / 50000
                loss.backward()
                opt.step()

            for _ in range(5):
                step()
            torch.cuda.reset_peak_memory_stats(dev)
            s = timed(step, a.steps, dev)
            print(json.dumps({"bench": "train-step", **common, "kind": kind, "estimator": est,
                              "images_per_s": a.batch * a.steps / s,
                              "peak_gpu_mib": torch.cuda.max_memory_allocated(dev) / 2**20}), flush=True)
            del model, opt
        if a.only in (None, "mc-inference"):
            model = build(a.arch, bayes, c).to(dev).eval()
            with torch.no_grad():
                for _ in range(3):
                    model(x)
                torch.cuda.reset_peak_memory_stats(dev)

                def mc():
                    # Mean predictive over the samples, as the Rust benchmark reads each pass back.
                    probs = sum(F.softmax(model(x), -1) for _ in range(a.samples)) / a.samples
                    probs.cpu()

                s = timed(mc, a.batches, dev)
            n = a.batch * a.batches
            print(json.dumps({"bench": "mc-inference", **common, "samples": a.samples, "kind": kind,
                              "estimator": est, "images_per_s": n / s, "passes_per_s": n * a.samples / s,
                              "peak_gpu_mib": torch.cuda.max_memory_allocated(dev) / 2**20}), flush=True)
            del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
