"""Compares two sets of initial Bayesian ResNet-20 nets: ours (files written by `swbnn train
--save-init FILE`, bayesian-torch names) against the reference script's own seeded
initialisation (`torch_reference_bbb.py`, the seeds given).

Per net it measures what a per-tensor distribution test does not see:
- the spectrum of each layer's mean weights, reshaped to `[c_out, c_in*kh*kw]`: the largest
  singular value over the Frobenius norm, and the condition number;
- the function at initialisation, with the weights at their means and BatchNorm in training
  mode (as in the first training step): the logits' standard deviation, the mean predictive
  entropy and the number of distinct predicted classes on 512 Fashion-MNIST training images and
  on 512 MNIST digits, and the penultimate features' norm and spread.
Each measure is compared between the two sets with a two-sided Mann-Whitney U test; the
p-values of all measures are then tested against the uniform distribution (Kolmogorov-Smirnov),
which is what they follow when the two sets come from one distribution.

    python3 benches/peers/compare_inits.py --ours 'inits/ours-*.safetensors' --torch-seeds 100-115
"""

import argparse
import glob
import json
import os
import statistics
import sys

import torch
from scipy import stats

sys.path.insert(0, os.path.dirname(__file__))
import torch_reference_bbb as ref  # noqa: E402

HERE = os.path.dirname(__file__)


def spectra(model):
    out = {}
    for name, mod in ref.bayesian_torch_names(model, "resnet20"):
        if isinstance(mod, (ref.Conv, ref.Linear)):
            w = mod.w.mu.detach().reshape(mod.w.mu.shape[0], -1).double()
            s = torch.linalg.svdvals(w)
            out[f"{name}: top singular value / Frobenius norm"] = float(s[0] / s.norm())
            out[f"{name}: condition number"] = float(s[0] / s[-1])
    return out


@torch.no_grad()
def function_at_init(model, images):
    for mod in model.modules():
        if isinstance(mod, ref.BayesParam):
            mod.sample = (lambda m: (lambda: m.mu))(mod)
    model.train()
    out = {}
    for tag, x in images.items():
        z = model(x)
        p = torch.softmax(z, 1).double()
        out[f"{tag}: logit sd"] = float(z.std())
        out[f"{tag}: mean entropy"] = float(ref.entropy(p).mean())
        out[f"{tag}: predicted classes"] = float(len(torch.unique(p.argmax(1))))
    features = torch.nn.Sequential(*list(model)[:-1])(images["Fashion-MNIST"])
    out["features: mean norm"] = float(features.norm(dim=1).mean())
    out["features: mean sd over images"] = float(features.std(0).mean())
    return out


def seeds(text):
    lo, _, hi = text.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--ours", required=True, help="glob of our initial nets (.safetensors)")
    a.add_argument("--torch-seeds", type=seeds, default=seeds("100-115"),
                   help="the script's seeds to initialise with, e.g. 100-115")
    a.add_argument("--data", default="/usr/share/datasets/fashion-mnist/")
    a.add_argument("--ood", default=os.path.join(HERE, "../../../shared/data/mnist-10k/"))
    a.add_argument("--json", default=None, help="also write every measure of every net here")
    args = a.parse_args()
    files = sorted(glob.glob(args.ours))
    if len(files) < 3 or len(args.torch_seeds) < 3:
        raise SystemExit(f"need at least 3 nets on each side: {len(files)} files match "
                         f"{args.ours!r}, {len(args.torch_seeds)} seeds")
    torch.set_num_threads(1)
    x, _ = ref.load(args.data + "train-")
    xo, _ = ref.load(args.ood)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    images = {"Fashion-MNIST": x[order[:512]], "MNIST": xo[:512]}

    def measure(model):
        return {**spectra(model), **function_at_init(model, images)}

    rows = {"ours": [], "script": []}
    for f in files:
        model = ref.resnet20(True)
        ref.load_bayesian_torch(model, "resnet20", f)
        rows["ours"].append(measure(model))
    for s in args.torch_seeds:
        torch.manual_seed(s)
        rows["script"].append(measure(ref.resnet20(True)))

    results = []
    for key in rows["ours"][0]:
        a_, b_ = [r[key] for r in rows["ours"]], [r[key] for r in rows["script"]]
        p = stats.mannwhitneyu(a_, b_).pvalue
        results.append((p, key, statistics.mean(a_), statistics.stdev(a_),
                        statistics.mean(b_), statistics.stdev(b_)))
    print(f"| measure | ours ({len(files)} nets) | script ({len(args.torch_seeds)} nets) | Mann-Whitney p |")
    print("|---|---|---|---|")
    for p, key, ma, sa, mb, sb in sorted(results):
        print(f"| {key} | {ma:.4f} ± {sa:.4f} | {mb:.4f} ± {sb:.4f} | {p:.3f} |")
    ps = [r[0] for r in results]
    ks = stats.kstest(ps, "uniform").pvalue
    print(f"\n{len(ps)} measures; smallest p {min(ps):.3f}; the p-values against uniform "
          f"(Kolmogorov-Smirnov): p {ks:.2f}")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"ours": dict(zip(files, rows["ours"])),
                       "script": dict(zip(map(str, args.torch_seeds), rows["script"]))}, fh)
        os.replace(tmp, args.json)


if __name__ == "__main__":
    main()
