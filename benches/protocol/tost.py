#!/usr/bin/env python3
"""The pre-registered analysis of docs/protocol.md: 2DGBNN against the BBB model it came from.

    python3 benches/protocol/tost.py power
    python3 benches/protocol/tost.py analyse RUN_DIR [...] [--seeds 200-242] [--csv FILE]
    python3 benches/protocol/tost.py objective --present DIR --candidate NAME=DIR --ood-key KEY
    python3 benches/protocol/tost.py proxy RUN_DIR [RUN_DIR ...] --proxy-key KEY --real-key KEY

`power` prints the sample size of the protocol from the paired differences of the runs already
reported in docs/results.md (read from `power_inputs` of per-run.json beside this script, each
with the doc it comes from).
`analyse` reads `seed-*/setup.json` and `seed-*/table.json` of `cargo xtask reproduce` runs and
prints, per margin, the paired 90 % t-interval of 2DGBNN - BBB and the outcome (shown, not shown,
refuted). `objective` applies the stage-3 objective rule to validation rows (`validation.json`);
`proxy` the rank-agreement rule of the tile-shuffled validation OOD set. Needs NumPy and SciPy.
"""

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats

ALPHA = 0.05  # one-sided, per margin (a two-sided 90 % interval)
POWER = 0.80

# Margins, as a distance in the bad direction: accuracy and AUROC are worse when lower, NLL and
# ECE when higher. Accuracy is a fraction here (0.003 = 0.3 points).
MARGINS = {
    "accuracy": (0.003, "higher"),
    "nll": (0.01, "lower"),
    "ece": (0.002, "lower"),
    "ood_auroc_entropy": (0.01, "higher"),
}
SECONDARY = {
    "ood_auroc_mi": (0.01, "higher"),
    "calibrated_nll": (0.01, "lower"),
    "calibrated_ece": (0.002, "lower"),
}

# Paired differences 2DGBNN - BBB (one model pair per seed) of the quick-preset runs reported
# before the protocol (docs/results.md, docs/notes/results-history.md): the sample sd over seeds,
# or the per-seed values where the tables give them. They are `power_inputs` of per-run.json,
# each with the doc it comes from (`python3 benches/protocol/aggregates.py --only power` checks
# them against those docs). The runs' own table.json files are not committed.
INPUTS = Path(__file__).resolve().with_name("per-run.json")


def load_existing(path=INPUTS):
    """[{run, seeds, metric: per-seed list or sd}] of per-run.json's power inputs, headline first."""
    out = []
    for r in json.loads(Path(path).read_text())["power_inputs"]:
        e = {"run": r["run"], "seeds": r["seeds"]}
        for m in MARGINS:
            v = r[m]
            if "per_seed" in v:
                if len(v["per_seed"]) != r["seeds"]:
                    sys.exit(f"{path}: {r['id']} {m} has {len(v['per_seed'])} values for"
                             f" {r['seeds']} seeds")
                e[m] = [float(x) for x in v["per_seed"]]
            else:
                e[m] = float(v["sd"])
        out.append(e)
    return out


def sd_of(v):
    return float(np.std(v, ddof=1)) if isinstance(v, list) else float(v)


def power_at(n, sd, margin, true_diff=0.0):
    """Power of the one-sided paired t-test of non-inferiority at `margin`, n pairs, when the
    true difference is `true_diff` in the good direction's units (0: no difference)."""
    df = n - 1
    ncp = (margin + true_diff) * np.sqrt(n) / sd
    return float(stats.nct.sf(stats.t.ppf(1 - ALPHA, df), df, ncp))


def n_exact(sd, margin, true_diff=0.0, cap=100_000):
    for n in range(2, cap):
        if power_at(n, sd, margin, true_diff) >= POWER:
            return n
    return None


def n_normal(sd, margin):
    return ((stats.norm.ppf(1 - ALPHA) + stats.norm.ppf(POWER)) * sd / margin) ** 2


def cmd_power(args):
    existing = load_existing(args.inputs)
    # The headline's mean paired OOD difference, for the power if the truth were that.
    headline_ood_mean = float(np.mean(existing[0]["ood_auroc_entropy"]))
    za, zb = stats.norm.ppf(1 - ALPHA), stats.norm.ppf(POWER)
    print(f"one-sided paired t-test, alpha {ALPHA}, power {POWER}, true difference 0")
    print(f"n_z = ((z_{1 - ALPHA:.2f} + z_{POWER:.2f}) sd / margin)^2, z = {za:.4f}, {zb:.4f};"
          " Guenther: n_z + z_alpha^2 / 2; exact: smallest n with")
    print("  1 - F_nct(t_{1-alpha, n-1}; df n-1, ncp margin sqrt(n) / sd) >= power\n")
    head = existing[0]
    plan = 0
    rows = []
    for m, (margin, _) in MARGINS.items():
        sds = [sd_of(r[m]) for r in existing]
        dfs = [r["seeds"] - 1 for r in existing]
        pooled = float(np.sqrt(sum(d * s * s for s, d in zip(sds, dfs)) / sum(dfs)))
        upper = sds[0] * np.sqrt(dfs[0] / stats.chi2.ppf(1 - POWER, dfs[0]))
        nz = n_normal(sds[0], margin)
        n_head, n_pool, n_up = (n_exact(s, margin) for s in (sds[0], pooled, upper))
        plan = max(plan, n_head, n_pool)
        rows.append((m, margin, sds, pooled, upper, nz, n_head, n_pool, n_up))
    for m, margin, sds, pooled, upper, nz, n_head, n_pool, n_up in rows:
        print(f"{m}: margin {margin}")
        for r, s in zip(existing, sds):
            print(f"  sd {s:.5f}  ({r['seeds']} seeds: {r['run']})")
        print(f"  headline sd {sds[0]:.5f}: n_z {nz:.1f}, Guenther {nz + za * za / 2:.1f},"
              f" exact n {n_head}")
        print(f"  pooled sd {pooled:.5f} (df {sum(r['seeds'] - 1 for r in existing)}):"
              f" exact n {n_pool}")
        print(f"  upper 80 % confidence limit of the headline sd {upper:.5f}: exact n {n_up}")
    print(f"\nplanned n = largest exact n over the margins, headline or pooled sd: {plan}")
    for m, margin, sds, pooled, upper, *_ in rows:
        print(f"  power at n = {plan}, {m}: headline sd {power_at(plan, sds[0], margin):.3f},"
              f" pooled {power_at(plan, pooled, margin):.3f},"
              f" upper-limit sd {power_at(plan, upper, margin):.3f}")
    if args.at:
        for m, margin, sds, pooled, upper, *_ in rows:
            print(f"  power at n = {args.at}, {m}: headline sd"
                  f" {power_at(args.at, sds[0], margin):.3f},"
                  f" pooled {power_at(args.at, pooled, margin):.3f},"
                  f" upper-limit sd {power_at(args.at, upper, margin):.3f}")
    sd_ood = sd_of(head["ood_auroc_entropy"])
    print(f"  if the true OOD difference were the headline's mean {headline_ood_mean:+.4f}:"
          f" power {power_at(plan, sd_ood, 0.01, headline_ood_mean):.3f},"
          f" n for 80 % {n_exact(sd_ood, 0.01, headline_ood_mean)}")


def parse_seeds(text):
    if not text:
        return None
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def seed_dirs(run_dirs):
    """(seed number, directory) of every seed of the given `reproduce` output folders."""
    found = []
    for d in map(Path, run_dirs):
        subs = sorted(p for p in d.glob("seed-*") if p.is_dir()) or [d]
        for s in subs:
            setup = json.loads((s / "setup.json").read_text())
            found.append((int(setup.get("seed", 0)), s, setup))
    return found


def hashes(setup):
    """Every `sha256` entry of a setup.json, as {json path: value}."""
    out = {}

    def walk(v, path):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{path}.{k}")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, f"{path}[{i}]")
        elif isinstance(v, str) and "sha256" in path:
            out[path] = v

    walk(setup, "")
    return out


def row_metrics(row):
    u = row.get("uncertainty") or {}
    c = row.get("calibrated") or {}
    return {
        "accuracy": row.get("accuracy"),
        "nll": row.get("nll"),
        "ece": row.get("ece"),
        "ood_auroc_entropy": row.get("ood_auroc_entropy"),
        "ood_auroc_mi": u.get("ood_auroc_mutual_information"),
        "calibrated_nll": c.get("nll"),
        "calibrated_ece": c.get("ece"),
    }


def interval(d, level):
    n = len(d)
    mean, sd = float(np.mean(d)), float(np.std(d, ddof=1))
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / np.sqrt(n)
    return mean, sd, mean - half, mean + half


def outcome(lo, hi, margin, better):
    """Non-inferiority at `margin` from the two-sided 90 % interval [lo, hi] of 2DGBNN - BBB."""
    if better == "lower":
        return "shown" if hi < margin else ("refuted" if lo > margin else "not shown")
    return "shown" if lo > -margin else ("refuted" if hi < -margin else "not shown")


def print_table(pairs, failed, mode, all_secondary=False):
    """The paired table; each seed in `failed` enters with the worst observed difference.
    `mode`: "outcome" (against bbb), "none" (descriptive) or "not shown" (too many failures)."""
    print("\n| metric | margin | n | mean | sd | 90 % interval | outcome | 95 % interval |")
    print("|---|---|---|---|---|---|---|---|")
    for group, label in ((MARGINS, "primary"), (SECONDARY, "secondary")):
        label = "secondary" if all_secondary else label
        for m, (margin, better) in group.items():
            d = [p[m] for p in pairs.values() if p[m] is not None]
            if d and failed:
                d += [max(d) if better == "lower" else min(d)] * len(failed)
            d = np.array(d, dtype=float)
            if len(d) < 2 or not np.all(np.isfinite(d)):
                print(f"| {m} | {margin} | {len(d)} | - | - | - | not computable | - |")
                continue
            mean, sd, lo, hi = interval(d, 0.90)
            _, _, lo95, hi95 = interval(d, 0.95)
            sign = "+" if better == "lower" else "-"
            res = {"outcome": outcome(lo, hi, margin, better), "none": "-"}.get(mode, mode)
            print(f"| {m} ({label}) | {sign}{margin} | {len(d)} | {mean:+.5f} | {sd:.5f} |"
                  f" [{lo:+.5f}, {hi:+.5f}] | {res} | [{lo95:+.5f}, {hi95:+.5f}] |")


def cmd_analyse(args):
    seeds = seed_dirs(args.runs)
    want = parse_seeds(args.seeds)
    got = sorted(s for s, _, _ in seeds)
    if len(set(got)) != len(got):
        sys.exit(f"a seed number appears twice: {got}")
    if want is not None:
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        print(f"seed numbers: {len(got)} found; missing {missing or 'none'};"
              f" not pre-registered {extra or 'none'}")
    first = hashes(seeds[0][2]) if seeds else {}
    for s, d, setup in seeds:
        if hashes(setup) != first:
            print(f"data files differ from the first seed's: seed number {s} ({d})")
    if first:
        print(f"data hashes recorded: {len(first)} entries, the same in every seed")
    pairs, failed = {}, []
    for s, d, _ in sorted(seeds, key=lambda x: x[0]):
        rows = seed_rows(d)
        if args.against not in rows:
            what = ("replace it by the next reserve number" if args.against == "bbb"
                    else "left out of this comparison")
            print(f"seed number {s}: no {args.against} row; {what}")
            continue
        b = row_metrics(rows[args.against])
        a = row_metrics(rows[args.method]) if args.method in rows else None
        if a is None or not all(a[m] is not None and np.isfinite(a[m]) for m in MARGINS):
            print(f"seed number {s}: the {args.method} row is missing or not finite: a failure"
                  " of the method, which counts as a result")
            failed.append(s)
            continue
        pairs[s] = {m: (a[m] - b[m] if a[m] is not None and b[m] is not None else None)
                    for m in a}
    print(f"\n{args.method} - {args.against}, paired by seed number, n = {len(pairs)};"
          " 90 % t-interval = the one-sided tests at alpha 0.05 (outcome: against bbb only)")
    mode = "outcome" if args.against == "bbb" else "none"
    print_table(pairs, [], mode, args.all_secondary)
    if failed:
        print(f"\nwith the {len(failed)} failed seed(s) {failed} set to the worst difference"
              " observed on the other seeds (the protocol's primary analysis):")
        worst = "not shown" if mode == "outcome" and len(failed) > 2 else mode
        print_table(pairs, failed, worst, args.all_secondary)
        if len(failed) > 2 and mode == "outcome":
            print("more than 2 seeds failed: no margin is reported as shown")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            names = list(MARGINS) + list(SECONDARY)
            w.writerow(["seed_number"] + names)
            for s, p in pairs.items():
                w.writerow([s] + [repr(p[m]) if p[m] is not None else "" for m in names])


def seed_rows(d):
    """A seed's rows by name: the main table's by method (`table.json`), and the other tables'
    by label (`tables.json`, e.g. "SNR pruning, 2DGBNN's bytes" of `--tables equal-size`)."""
    rows = {r["method"]: r for r in json.loads((d / "table.json").read_text())}
    tables = d / "tables.json"
    if tables.is_file():
        for outcome in json.loads(tables.read_text()).get("seeds", []):
            for r in outcome.get("rows", []):
                if r.get("table") != "main":
                    rows.setdefault(r["label"], r["row"])
    return rows


def validation_rows(d):
    """Seed number -> {method: validation row} of a run folder."""
    out = {}
    for s, sd, _ in seed_dirs([d]):
        out[s] = {r["method"]: r for r in json.loads((sd / "validation.json").read_text())}
    return out


def get(row, key):
    for k in key.split("."):
        row = row[k]
    return row


def cmd_objective(args):
    present = validation_rows(args.present)
    qualified = []
    for spec in args.candidate:
        name, _, d = spec.partition("=")
        cand = validation_rows(d)
        common = sorted(set(cand) & set(present))
        dnll = np.array([cand[s]["2dgbnn"]["nll"] - present[s]["2dgbnn"]["nll"] for s in common])
        ece = np.mean([cand[s]["2dgbnn"]["ece"] - cand[s]["bbb"]["ece"] for s in common])
        ood = np.mean([get(cand[s]["2dgbnn"], args.ood_key) - get(cand[s]["bbb"], args.ood_key)
                       for s in common])
        mean, sd, lo, hi = interval(dnll, 0.95)
        ok = mean < -args.nll_gain and hi < 0 and ece <= 0.002 and ood >= -0.01
        print(f"{name}: n {len(common)}, validation NLL - present {mean:+.5f} ± {sd:.5f},"
              f" 95 % [{lo:+.5f}, {hi:+.5f}]; paired ECE vs BBB {ece:+.5f},"
              f" OOD AUROC vs BBB {ood:+.4f}: {'qualifies' if ok else 'does not qualify'}")
        if ok:
            qualified.append((mean, name))
    print("decision:", min(qualified)[1] if qualified else "keep the present mixture KL")


def cmd_proxy(args):
    proxy, real = [], []
    for d in args.runs:
        for s, rows in validation_rows(d).items():
            if "bbb" not in rows:
                continue
            for method, r in rows.items():
                if method in ("bbb", "deterministic"):
                    continue
                proxy.append(get(r, args.proxy_key) - get(rows["bbb"], args.proxy_key))
                real.append(get(r, args.real_key) - get(rows["bbb"], args.real_key))
    tau = stats.kendalltau(proxy, real, variant="b", alternative="greater")
    rho = stats.spearmanr(proxy, real)
    keep = tau.statistic >= 0.5 and tau.pvalue < 0.05
    print(f"{len(proxy)} paired differences (method - its BBB); Kendall tau-b"
          f" {tau.statistic:.3f} (one-sided p {tau.pvalue:.4f}), Spearman {rho.statistic:.3f}")
    print("decision:", "keep the tile-shuffle proxy" if keep else "drop the tile-shuffle proxy")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("power", help="the sample size from the existing runs")
    w.add_argument("--at", type=int,
                   help="also the power at this n (the seeds an early end left)")
    w.add_argument("--inputs", default=INPUTS,
                   help="the JSON of the earlier runs' paired differences (default: per-run.json"
                        " beside this script)")
    a = sub.add_parser("analyse", help="the non-inferiority outcomes of finished runs")
    a.add_argument("runs", nargs="+", help="output folders of cargo xtask reproduce")
    a.add_argument("--seeds", help="the pre-registered seed numbers, e.g. 200-242")
    a.add_argument("--method", default="2dgbnn", help="the row compared (minuend)")
    a.add_argument("--against", default="bbb",
                   help="the row it is compared with: a method, or a label of tables.json")
    a.add_argument("--csv", help="write the per-seed paired differences here")
    a.add_argument("--all-secondary", action="store_true",
                   help="label every line secondary (the near-OOD runs)")
    o = sub.add_parser("objective", help="the stage-3 objective rule, validation rows only")
    o.add_argument("--present", required=True)
    o.add_argument("--candidate", action="append", required=True, help="NAME=DIR")
    o.add_argument("--ood-key", required=True, help="validation.json key of the OOD AUROC")
    o.add_argument("--nll-gain", type=float, default=0.002)
    x = sub.add_parser("proxy", help="rank agreement of the tile-shuffle proxy")
    x.add_argument("runs", nargs="+")
    x.add_argument("--proxy-key", required=True)
    x.add_argument("--real-key", required=True)
    args = p.parse_args()
    {"power": cmd_power, "analyse": cmd_analyse, "objective": cmd_objective,
     "proxy": cmd_proxy}[args.cmd](args)


if __name__ == "__main__":
    main()
