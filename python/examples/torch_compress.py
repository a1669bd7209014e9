"""Compress a bayesian-torch model in PyTorch with ``swbnn.torch``, save it as ``.swb`` and
load it back. A small CNN on random images, to show the calls in seconds; docs/guide/torch.md
has a real run. Needs ``pip install torch bayesian-torch``:

    python python/examples/torch_compress.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
import torch.nn as nn
from bayesian_torch.models.dnn_to_bnn import dnn_to_bnn  # type: ignore[import-untyped]
from torch.utils.data import DataLoader, TensorDataset

import swbnn.torch as swt


def small_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(8 * 14 * 14, 32), nn.ReLU(), nn.Linear(32, 10),
    )


def bayesian(model: nn.Module) -> nn.Module:
    dnn_to_bnn(model, {
        "prior_mu": 0.0, "prior_sigma": 1.0, "posterior_mu_init": 0.0,
        "posterior_rho_init": -3.0, "type": "Reparameterization", "moped_enable": False,
    })
    return model


def main() -> None:
    torch.manual_seed(0)
    x, y = torch.rand(512, 1, 28, 28), torch.randint(0, 10, (512,))
    train = DataLoader(TensorDataset(x[:384], y[:384]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[384:], y[384:]), batch_size=64)
    model = bayesian(small_cnn())

    shared, report = swt.compress(model, train, k=16, epochs=1, val_loader=val)
    total = report.total
    print(f"K = {report.k}; trainable parameters {total['params_before']} -> {total['params_after']}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cnn.swb"
        swt.save(shared, path)
        fresh = swt.load(bayesian(small_cnn()), path)
        with torch.no_grad():
            print(f"reloaded: output {tuple(fresh(x[:4]).shape)}")


if __name__ == "__main__":
    main()
