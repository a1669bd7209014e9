"""Compressing a bayesian-torch model in PyTorch with ``swbnn.torch``: accuracy, calibration,
trainable parameters and the time of each stage, against the BNN it came from.

The model (``--model``) is none of the command line's architectures:

* ``resnet`` (the default): a small residual CNN (conv-bn-relu stem, two residual blocks of
  widths 16 and 32, a 1568-128-10 head) made Bayesian by bayesian-torch's ``dnn_to_bnn``
  (Reparameterization layers, its default prior N(0, 1) and ``rho`` init -3; 221,072
  Bayesian weights);
* ``scnn``: bayesian-torch's own MNIST-sized CNN, ``SCNN`` of
  ``bayesian_torch/models/bayesian/simple_cnn_variational.py`` (conv 1-32, conv 32-64,
  max-pool, dropout, 9216-128-10; its forward returns ``(log-softmax, kl)``; 1,199,648
  Bayesian weights);
* ``mlp``: a wide MLP 784-1200-1200-10 made Bayesian by ``dnn_to_bnn`` (2,392,800 Bayesian
  weights).

Per seed it trains the BNN in PyTorch on Fashion-MNIST (Adam, ELBO with KL / N), then:

* ``swbnn.torch.compress`` with the validation split as ``val_loader`` (the default stop
  rule: stop once the shared model is as confident as the BNN on validation images, at most
  ``--retrain-epochs`` epochs; stage 3 uses the BNN's prior) -> accuracy, NLL, ECE of both
  models on the test set with ``--mc-samples`` Monte-Carlo samples, trainable parameters;
* a second ``compress`` of the same BNN for exactly ``--timed-epochs`` stage-3 epochs (stop
  rule ``epochs``) -> the seconds of stages 1-2 (gradient pass + Rust plan + layer build) and
  of the fastest full stage-3 epoch, against the fastest training epoch of the BNN on the same
  loader (its first epoch, with warm-up, left out). On a shared machine the fastest epoch is
  the least disturbed one. Each time is measured twice: wall-clock (``seconds``) and the
  process's CPU seconds (``cpu``: all its threads), which with ``--threads 1`` leaves out the
  waiting that other work on the machine adds.

The validation split (``--val-images``, default 5,000) is the end of the training file;
training images are the first ``--train-images`` of the rest (default 20,000; 0 = all 55,000).
Nothing is chosen on the test set.

    # the defaults: 3 seeds, 20,000 training images, 3 BNN epochs, at most 2 stage-3 epochs,
    # 30 MC samples on the 10,000 test images, CPU with 2 threads (20 minutes on a 2-core CPU
    # busy with another build, with --threads 1: two threads then spin-wait on each other)
    python python/benches/torch_compress.py --data path/to/fashion-mnist > torch_compress.jsonl
    # a quick smoke run (minutes): fewer images and samples
    python python/benches/torch_compress.py --data path/to/fashion-mnist --train-images 2000 \\
        --test-images 1000 --epochs 1 --retrain-epochs 1 --mc-samples 3
    # a full run: all 55,000 training images, more BNN and stage-3 epochs, on a GPU
    python python/benches/torch_compress.py --data path/to/fashion-mnist --train-images 0 \\
        --epochs 20 --retrain-epochs 10 --device cuda

``--timing-only`` runs the timing part alone (BNN epochs, the second ``compress``), without
the first ``compress`` and the test-set evaluation: the seed lines then hold the timing fields
only. ``--device cuda`` runs everything on the GPU (``--threads`` only sets the CPU's torch
threads).

``--data`` is a folder with the four IDX files of Fashion-MNIST (``train-images-idx3-ubyte.gz``
...). Prints one JSON line per measurement (``bench``: ``bnn_epoch``, ``seed``, ``summary``);
the ``summary`` line holds mean and sd over the seeds and each target as met or not.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import struct
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from bayesian_torch.models.dnn_to_bnn import dnn_to_bnn, get_kl_loss
from torch.utils.data import DataLoader, TensorDataset

import swbnn.metrics
import swbnn.torch as swt

#: bayesian-torch's documented defaults for ``dnn_to_bnn``.
BNN_PRIOR = {
    "prior_mu": 0.0,
    "prior_sigma": 1.0,
    "posterior_mu_init": 0.0,
    "posterior_rho_init": -3.0,
    "type": "Reparameterization",
    "moped_enable": False,
    "moped_delta": 0.5,
}


def emit(**kw):
    print(json.dumps(kw), flush=True)


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (gzipped or not) as a numpy array."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    _, dtype, ndim = struct.unpack(">HBB", data[:4])
    if dtype != 0x08:
        raise ValueError(f"{path}: only unsigned-byte IDX files are supported")
    shape = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def find(folder: Path, stem: str) -> Path:
    for name in (stem + ".gz", stem):
        if (folder / name).exists():
            return folder / name
    raise FileNotFoundError(f"{folder}: no {stem}(.gz)")


def load_fashion(folder: Path):
    """(train images, train labels, test images, test labels); images float32 [n, 1, 28, 28],
    standardised with the training set's mean and sd."""
    xtr = read_idx(find(folder, "train-images-idx3-ubyte")).astype(np.float32) / 255.0
    ytr = read_idx(find(folder, "train-labels-idx1-ubyte")).astype(np.int64)
    xte = read_idx(find(folder, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0
    yte = read_idx(find(folder, "t10k-labels-idx1-ubyte")).astype(np.int64)
    mean, sd = xtr.mean(), xtr.std()
    norm = lambda x: torch.from_numpy(((x - mean) / sd)[:, None, :, :].copy())  # noqa: E731
    return norm(xtr), torch.from_numpy(ytr), norm(xte), torch.from_numpy(yte)


class Block(nn.Module):
    """conv-bn-relu-conv-bn plus the input (a 1x1 projection when the width changes)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.proj is None else self.proj(x)))


class SmallResNet(nn.Module):
    """28x28 -> stem (16, pool to 14x14) -> block 16 -> block 32 (7x7) -> 128 -> 10."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
        self.block1 = Block(16, 16, 1)
        self.block2 = Block(16, 32, 2)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.block2(self.block1(self.stem(x)))
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class Mlp(nn.Module):
    """784 -> 1200 -> 1200 -> 10 with ReLUs: a wide dense model."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(784, 1200)
        self.fc2 = nn.Linear(1200, 1200)
        self.fc3 = nn.Linear(1200, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))


#: ``--model`` -> (description, builder). A builder returns the Bayesian model on the CPU.
def _resnet():
    model = SmallResNet()
    dnn_to_bnn(model, dict(BNN_PRIOR))
    return model


def _scnn():
    # bayesian-torch's own model for MNIST-sized images (1 x 28 x 28): conv 1-32, conv 32-64,
    # max-pool, 9216-128-10, Conv2d/LinearReparameterization with its N(0, 1) prior and rho
    # init -3; its forward returns (log-softmax, kl).
    from bayesian_torch.models.bayesian.simple_cnn_variational import SCNN

    return SCNN()


def _mlp():
    model = Mlp()
    dnn_to_bnn(model, dict(BNN_PRIOR))
    return model


MODELS = {
    "resnet": ("small residual CNN (dnn_to_bnn)", _resnet),
    "scnn": ("bayesian-torch's SCNN (models/bayesian/simple_cnn_variational.py)", _scnn),
    "mlp": ("MLP 784-1200-1200-10 (dnn_to_bnn)", _mlp),
}


def elbo(model, x, y, n_train):
    """The user's loss: cross-entropy plus KL / N (the forward's KL for a model whose forward
    returns ``(out, kl)``, ``get_kl_loss`` for ``dnn_to_bnn`` models)."""
    out = model(x)
    if isinstance(out, (tuple, list)):
        return F.cross_entropy(out[0], y) + out[1] / n_train
    return F.cross_entropy(out, y) + get_kl_loss(model) / n_train


def bnn_epoch(model, loader, opt, n_train, device) -> tuple[float, float]:
    """One epoch of the user's ELBO training loop; returns its wall-clock and CPU seconds."""
    model.train()
    t, c = time.perf_counter(), time.process_time()
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = elbo(model, x, y, n_train)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t, time.process_time() - c


@torch.no_grad()
def evaluate(model, x, y, samples: int, batch: int, device, seed: int) -> dict:
    """Accuracy (%), NLL and ECE (15 bins) of the mean softmax over ``samples`` weight draws."""
    model.eval()
    torch.manual_seed(seed)
    probs = []
    for i in range(0, x.shape[0], batch):
        xb = x[i : i + batch].to(device)
        p = sum(F.softmax(swt_logits(model(xb)).double(), dim=1) for _ in range(samples)) / samples
        probs.append(p.cpu().numpy())
    p = np.concatenate(probs).astype(np.float32)
    labels = y.numpy()
    return {
        "accuracy": 100.0 * swbnn.metrics.accuracy(p, labels),
        "nll": swbnn.metrics.nll(p, labels),
        "ece": swbnn.metrics.ece(p, labels),
    }


def swt_logits(out):
    """The logits of a forward pass that returns `out` or `(out, kl)`."""
    return out[0] if isinstance(out, (tuple, list)) else out


def trainable(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def run_seed(seed, data, args, device):
    xtr, ytr, xval, yval, xte, yte = data
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    train_loader = DataLoader(TensorDataset(xtr, ytr), batch_size=args.batch_size, shuffle=True, generator=gen)
    val_loader = DataLoader(TensorDataset(xval, yval), batch_size=args.batch_size)
    n_train = len(xtr)

    model = MODELS[args.model][1]()
    model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    epoch_s, epoch_cpu = [], []
    for e in range(args.epochs):
        s, c = bnn_epoch(model, train_loader, opt, n_train, device)
        epoch_s.append(s)
        epoch_cpu.append(c)
        emit(bench="bnn_epoch", seed=seed, epoch=e, seconds=s, cpu_seconds=c)

    config = {"retrain": {"prior": {"Normal": {"mu": BNN_PRIOR["prior_mu"], "sigma": BNN_PRIOR["prior_sigma"]}}, "seed": seed}}
    if args.tau_w is not None:
        config["sharing"] = {"outliers": {"tau_w": args.tau_w}}
    report = None
    if not args.timing_only:
        shared, report = swt.compress(
            model, train_loader, k=args.k, epochs=args.retrain_epochs, val_loader=val_loader, config=config
        )
    # The same BNN once more, for exactly --timed-epochs full stage-3 epochs: the time
    # comparison. On a shared machine the fastest epoch is the least disturbed one, so both
    # sides take their fastest epoch (the BNN's first, with warm-up, left out).
    timed_cfg = dict(config, retrain_stop="epochs")
    _, timed = swt.compress(model, train_loader, k=args.k, epochs=args.timed_epochs, config=timed_cfg)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t = timed.timings
    stages12 = t["gradients_s"] + t["plan_s"] + t["build_s"]
    stage3_epoch = min(h["seconds"] for h in timed.history)
    bnn_epoch_s = min(epoch_s[1:] if len(epoch_s) > 1 else epoch_s)
    # CPU seconds of the process (all its threads): with --threads 1 on a machine that other
    # work shares, what a wall clock adds for waiting on the CPU is left out.
    stages12_cpu = t["gradients_cpu_s"] + t["plan_cpu_s"] + t["build_cpu_s"]
    stage3_cpu = min(h["cpu_seconds"] for h in timed.history)
    bnn_cpu = min(epoch_cpu[1:] if len(epoch_cpu) > 1 else epoch_cpu)

    timing = {
        "stages12_s": stages12,
        "stages12_parts_s": {k: t[k] for k in ("gradients_s", "plan_s", "build_s")},
        "plan_timings_s": {k[len("plan."):]: v for k, v in t.items() if k.startswith("plan.")},
        "stage3_epoch_s": stage3_epoch,
        "bnn_epoch_s": bnn_epoch_s,
        "bnn_epochs_s": epoch_s,
        "stage3_epochs_s": [h["seconds"] for h in timed.history],
        "stages12_over_stage3_epoch": stages12 / stage3_epoch,
        "stage3_epoch_over_bnn_epoch": stage3_epoch / bnn_epoch_s,
        "cpu": {
            "stages12_s": stages12_cpu,
            "stage3_epoch_s": stage3_cpu,
            "bnn_epoch_s": bnn_cpu,
            "bnn_epochs_s": epoch_cpu,
            "stage3_epochs_s": [h["cpu_seconds"] for h in timed.history],
            "stages12_over_stage3_epoch": stages12_cpu / stage3_cpu,
            "stage3_epoch_over_bnn_epoch": stage3_cpu / bnn_cpu,
        },
    }
    common = {"bench": "seed", "seed": seed, "model": args.model, "device": str(device), "train_images": n_train}
    if args.timing_only:
        row = dict(common, k=timed.k, outliers=timed.total["outliers"], ellipses=timed.total["ellipses"], **timing)
        emit(**row)
        return row
    bnn = evaluate(model, xte, yte, args.mc_samples, args.eval_batch, device, seed)
    sh = evaluate(shared, xte, yte, args.mc_samples, args.eval_batch, device, seed)
    before, after = report.total["params_before"], report.total["params_after"]
    assert before == trainable(model) and after == trainable(shared)
    row = dict(
        common,
        bnn=bnn,
        shared=sh,
        k=report.k,
        outliers=report.total["outliers"],
        ellipses=report.total["ellipses"],
        params_before=before,
        params_after=after,
        param_reduction_pct=100.0 * (1.0 - after / before),
        stop=None if report.stop is None else report.stop["stopped_after"],
        retrain_s=report.timings["retrain_s"],
        **timing,
    )
    emit(**row)
    return row


def mean_sd(values):
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="folder with Fashion-MNIST's four IDX files")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--seed-offset", type=int, default=0)
    ap.add_argument("--train-images", type=int, default=20_000, help="training images (0: all but the validation split)")
    ap.add_argument("--val-images", type=int, default=5_000, help="validation split, taken from the end of the training file")
    ap.add_argument("--test-images", type=int, default=0, help="test images (0: all 10,000)")
    ap.add_argument("--epochs", type=int, default=3, help="BNN training epochs")
    ap.add_argument("--retrain-epochs", type=int, default=2, help="most stage-3 epochs")
    ap.add_argument("--timed-epochs", type=int, default=2, help="full stage-3 epochs of the timing run (the fastest is kept)")
    ap.add_argument("--k", type=int, default=None, help="codebook size before merging (default swbnn's 2000)")
    ap.add_argument("--tau-w", type=float, default=None, help="outlier threshold on |mu| (default swbnn's 0.2)")
    ap.add_argument("--lr", type=float, default=1e-3, help="BNN training learning rate (Adam)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--mc-samples", type=int, default=30)
    ap.add_argument("--eval-batch", type=int, default=1000)
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda[:i]")
    ap.add_argument("--model", choices=sorted(MODELS), default="resnet",
                    help="the BNN: " + "; ".join(f"{k}: {v[0]}" for k, v in MODELS.items()))
    ap.add_argument("--timing-only", action="store_true",
                    help="only the timed compress (stages 1-2, stage-3 epochs) against BNN epochs: no stop-rule "
                    "compress, no test-set evaluation")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (CPU)")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no CUDA device")
    xtr, ytr, xte, yte = load_fashion(args.data)
    if args.val_images < 1 or args.val_images >= len(xtr):
        ap.error(f"--val-images must lie in 1..{len(xtr) - 1}")
    xval, yval = xtr[-args.val_images :], ytr[-args.val_images :]
    xtr, ytr = xtr[: -args.val_images], ytr[: -args.val_images]
    if args.train_images:
        xtr, ytr = xtr[: args.train_images], ytr[: args.train_images]
    if args.test_images:
        xte, yte = xte[: args.test_images], yte[: args.test_images]
    probe = MODELS[args.model][1]()
    bayes_weights = sum(f.mu_param().numel() for f in swt._layers.find_layers(probe))
    emit(
        bench="setup", device=str(device), threads=torch.get_num_threads(), torch=torch.__version__,
        train_images=len(xtr), val_images=len(xval), test_images=len(xte), epochs=args.epochs,
        retrain_epochs=args.retrain_epochs, mc_samples=args.mc_samples, cpus=os.cpu_count(),
        model=args.model, model_description=MODELS[args.model][0], bayesian_weights=bayes_weights,
        trainable_params=trainable(probe), timed_epochs=args.timed_epochs, timing_only=args.timing_only,
    )
    del probe
    data = (xtr, ytr, xval, yval, xte, yte)
    rows = [run_seed(args.seed_offset + s, data, args, device) for s in range(args.seeds)]

    def agg(f):
        return mean_sd([f(r) for r in rows])

    timing_targets = {
        f"{name}{suffix}": {"every_seed": all(ok(pick(r)) for r in rows)}
        for suffix, pick in (("", lambda r: r), ("_cpu", lambda r: r["cpu"]))
        for name, ok in (
            ("stages12_under_10pct_of_stage3_epoch", lambda v: v["stages12_over_stage3_epoch"] < 0.10),
            ("stage3_epoch_within_1.5x_bnn_epoch", lambda v: v["stage3_epoch_over_bnn_epoch"] <= 1.5),
            ("stage3_epoch_within_1.2x_bnn_epoch", lambda v: v["stage3_epoch_over_bnn_epoch"] <= 1.2),
        )
    }
    if args.timing_only:
        emit(
            bench="summary", seeds=len(rows), model=args.model, device=str(device),
            stages12_s=agg(lambda r: r["stages12_s"]), stage3_epoch_s=agg(lambda r: r["stage3_epoch_s"]),
            bnn_epoch_s=agg(lambda r: r["bnn_epoch_s"]),
            stages12_over_stage3_epoch=agg(lambda r: r["stages12_over_stage3_epoch"]),
            stage3_epoch_over_bnn_epoch=agg(lambda r: r["stage3_epoch_over_bnn_epoch"]),
            targets=timing_targets,
        )
        return

    d_acc = [r["shared"]["accuracy"] - r["bnn"]["accuracy"] for r in rows]
    d_ece = [r["shared"]["ece"] - r["bnn"]["ece"] for r in rows]
    summary = {
        "bench": "summary",
        "seeds": len(rows),
        "model": args.model,
        "device": str(device),
        "bnn": {m: agg(lambda r, m=m: r["bnn"][m]) for m in ("accuracy", "nll", "ece")},
        "shared": {m: agg(lambda r, m=m: r["shared"][m]) for m in ("accuracy", "nll", "ece")},
        "accuracy_drop_points": mean_sd([-d for d in d_acc]),
        "ece_increase": mean_sd(d_ece),
        "params_before": agg(lambda r: r["params_before"]),
        "params_after": agg(lambda r: r["params_after"]),
        "param_reduction_pct": agg(lambda r: r["param_reduction_pct"]),
        "stages12_over_stage3_epoch": agg(lambda r: r["stages12_over_stage3_epoch"]),
        "stage3_epoch_over_bnn_epoch": agg(lambda r: r["stage3_epoch_over_bnn_epoch"]),
        "cpu_stages12_over_stage3_epoch": agg(lambda r: r["cpu"]["stages12_over_stage3_epoch"]),
        "cpu_stage3_epoch_over_bnn_epoch": agg(lambda r: r["cpu"]["stage3_epoch_over_bnn_epoch"]),
        # Targets, on the mean over the seeds and on every seed.
        "targets": {
            "accuracy_within_0.5_points": {
                "mean": statistics.fmean(d_acc) >= -0.5, "every_seed": all(d >= -0.5 for d in d_acc)},
            "ece_at_most_bnn_plus_0.005": {
                "mean": statistics.fmean(d_ece) <= 0.005, "every_seed": all(d <= 0.005 for d in d_ece)},
            "params_95pct_fewer": {"every_seed": all(r["param_reduction_pct"] >= 95.0 for r in rows)},
            **timing_targets,
        },
    }
    emit(**summary)


if __name__ == "__main__":
    main()
