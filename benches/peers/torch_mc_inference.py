#!/usr/bin/env python3
"""PyTorch peer of `cargo xtask bench mc-inference`: images/s of Monte-Carlo inference,
`--samples` stochastic forward passes (a fresh weight sample each) of `--batches` batches of
random 1x28x28 inputs, eval mode, no gradients, CPU. Same networks as torch_train_step.py.

    python3 benches/peers/torch_mc_inference.py --arch resnet20 --samples 30 --batches 1
"""
import argparse
import json
import time

import torch

from torch_train_step import mlp, resnet20


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="mlp", choices=["mlp", "resnet20"])
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--samples", type=int, default=30)
    p.add_argument("--batches", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    x = torch.randn(a.batch, 1, 28, 28)
    for kind in ["deterministic", "bayesian"]:
        model = (resnet20 if a.arch == "resnet20" else mlp)(kind == "bayesian").eval()
        with torch.no_grad():
            model(x)  # warm-up
            t, c = time.perf_counter(), time.process_time()
            for _ in range(a.batches):
                for _ in range(a.samples):
                    model(x)
            s, cpu = time.perf_counter() - t, time.process_time() - c
        n = a.batch * a.batches
        print(json.dumps({"bench": "mc-inference", "peer": "pytorch", "arch": a.arch, "batch": a.batch,
                          "samples": a.samples, "kind": kind, "estimator": "reparam" if kind == "bayesian" else None,
                          "threads": a.threads, "images_per_s": n / s, "passes_per_s": n * a.samples / s,
                          "cpu_images_per_s": n / cpu}))


if __name__ == "__main__":
    main()
