#!/usr/bin/env python3
"""PyTorch peer of `cargo run -p bnn-layers --example conv_kernels`: forward, input gradient and
weight gradient of ResNet-20's convolutions at batch 128 on 1x28x28 inputs, best of --reps.
--cpu reports process CPU time instead of wall-clock time (set OMP_WAIT_POLICY=PASSIVE so that
idle OpenMP threads do not spin).

    python3 benches/peers/torch_conv_layers.py --threads 2
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch.nn.grad import conv2d_input, conv2d_weight

LAYERS = [
    (1, 16, 28, 3, 1, 1, 1),
    (16, 16, 28, 3, 1, 1, 6),
    (16, 32, 28, 3, 2, 1, 1),
    (16, 32, 28, 1, 2, 0, 1),
    (32, 32, 14, 3, 1, 1, 5),
    (32, 64, 14, 3, 2, 1, 1),
    (32, 64, 14, 1, 2, 0, 1),
    (64, 64, 7, 3, 1, 1, 5),
]


CLOCK = time.perf_counter


def best(f, reps):
    times = []
    for _ in range(reps):
        t = CLOCK()
        f()
        times.append(CLOCK() - t)
    return min(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--cpu", action="store_true")
    a = p.parse_args()
    if a.cpu:
        global CLOCK
        CLOCK = time.process_time
    torch.set_num_threads(a.threads)
    total = [0.0, 0.0, 0.0]
    with torch.no_grad():
        for c_in, c_out, size, k, stride, pad, count in LAYERS:
            x = torch.randn(a.batch, c_in, size, size)
            w = torch.randn(c_out, c_in, k, k)
            y = F.conv2d(x, w, None, stride, pad)
            dy = torch.randn_like(y)
            t = [
                best(lambda: F.conv2d(x, w, None, stride, pad), a.reps),
                best(lambda: conv2d_input(x.shape, w, dy, stride, pad), a.reps),
                best(lambda: conv2d_weight(x, w.shape, dy, stride, pad), a.reps),
            ]
            for i in range(3):
                total[i] += t[i] * count
            print(f"{c_in:>3}->{c_out:<3} {size:>2}x{size:<2} k{k} s{stride} x{count}: forward {t[0]*1e3:7.2f} ms, "
                  f"input grad {t[1]*1e3:7.2f} ms, weight grad {t[2]*1e3:7.2f} ms")
    print(f"ResNet-20 convolutions (counted): forward {total[0]*1e3:.1f} ms, input grad {total[1]*1e3:.1f} ms, "
          f"weight grad {total[2]*1e3:.1f} ms, total {sum(total)*1e3:.1f} ms")


if __name__ == "__main__":
    main()
