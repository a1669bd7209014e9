"""The choice of swbnn.torch's default ``outliers.tau_sd`` (docs/benchmarks.md): the benchmark's
residual CNN trained as torch_compress.py trains it, compressed at each candidate, judged on
the validation split only (the last 5,000 training images). Prints one JSON line per model.

    python python/benches/choose_tau_sd.py SEED CANDIDATES [TRAIN_IMAGES [DATA_DIR]]
    python python/benches/choose_tau_sd.py 100 0,2.5,3,4 20000
"""
import json
import sys
import time
from pathlib import Path

import torch
sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_compress as tc
from bayesian_torch.models.dnn_to_bnn import dnn_to_bnn
from torch.utils.data import DataLoader, TensorDataset
import swbnn.torch as swt

torch.set_num_threads(1)
seed = int(sys.argv[1])
zs = [float(z) for z in sys.argv[2].split(",")]
train_images = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
xtr, ytr, _, _ = tc.load_fashion(Path(sys.argv[4] if len(sys.argv) > 4 else "/usr/share/datasets/fashion-mnist"))
xval, yval = xtr[-5000:], ytr[-5000:]
xtr, ytr = xtr[:-5000][:train_images], ytr[:-5000][:train_images]
torch.manual_seed(seed)
gen = torch.Generator().manual_seed(seed)
train = DataLoader(TensorDataset(xtr, ytr), batch_size=128, shuffle=True, generator=gen)
val = DataLoader(TensorDataset(xval, yval), batch_size=128)
model = tc.SmallResNet()
dnn_to_bnn(model, dict(tc.BNN_PRIOR))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for e in range(3):
    tc.bnn_epoch(model, train, opt, len(xtr), torch.device("cpu"))
dev = torch.device("cpu")
bnn = tc.evaluate(model, xval, yval, 30, 1000, dev, seed)
print(json.dumps({"seed": seed, "model": "bnn", "val": bnn, "params": tc.trainable(model)}), flush=True)
for z in zs:
    cfg = {"retrain": {"prior": {"Normal": {"mu": 0.0, "sigma": 1.0}}, "seed": seed},
           "sharing": {"outliers": {"tau_sd": z}}}
    t = time.perf_counter()
    shared, rep = swt.compress(model, train, epochs=2, val_loader=val, config=cfg)
    sh = tc.evaluate(shared, xval, yval, 30, 1000, dev, seed)
    print(json.dumps({"seed": seed, "tau_sd": z, "val": sh, "params_after": rep.total["params_after"],
                      "reduction_pct": 100 * (1 - rep.total["params_after"] / rep.total["params_before"]),
                      "outliers": rep.total["outliers"], "k": rep.k, "seconds": time.perf_counter() - t,
                      "d_acc_points": sh["accuracy"] - bnn["accuracy"], "d_ece": sh["ece"] - bnn["ece"]}), flush=True)
