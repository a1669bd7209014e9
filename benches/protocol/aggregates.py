#!/usr/bin/env python3
"""The aggregates over several runs that README.md and docs/ print, recomputed from per-run values.

    python3 benches/protocol/aggregates.py                # each aggregate: the doc's text, the value
    python3 benches/protocol/aggregates.py --check        # exit 1 where a doc and the values disagree
    python3 benches/protocol/aggregates.py --only ID      # one block of per-run.json (or "power", "scan")

Four kinds of check:
- `per-run.json` blocks: the per-seed (per-round) values behind each aggregate, with the doc that
  prints them. Each value list must still appear in that doc; each aggregate (mean ± sd, paired
  difference, median [min-max], range, percentage, count) is computed from the values and
  compared with the doc's text.
- `power`: the power inputs tost.py reads (`power_inputs` of per-run.json) against the docs they
  were taken from, and tost.py's sample size and power against protocol.md's table and
  results.md's power column.
- `scan`: every "M ± S (v1, v2, ...)" in README.md and docs/ (a mean ± sd printed beside its
  per-seed values) recomputed from those values.
- `cross`: numbers one doc repeats from another (the README's headline table from results.md).

A value computed from per-seed values as printed (rounded) can differ from the doc's, which was
computed from the full-precision values, by the rounding of those values: such a line says
"rounding" and passes; "DIFF" (the value is further off than rounding explains) and "MISSING"
(the text or the value list is not in the doc) fail `--check`. The runs' own files
(`seed-*/table.json`, the bench outputs) are not committed; per-run.json says so per block.
Needs NumPy (and SciPy for the power part, through tost.py).
"""

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DATA = HERE / "per-run.json"
NUMBER = re.compile(r"(?<![\d.,])[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
SCAN = re.compile(r"([+-]?\d+\.\d+) ± (\d+\.\d+) \(([^()]*)\)")
SCAN_DOCS = ["README.md", "docs/*.md", "docs/*/*.md"]

_docs = {}


def doc_text(rel):
    """A doc with `**` removed and every run of white space one space (texts wrap in the docs)."""
    if rel not in _docs:
        _docs[rel] = re.sub(r"\s+", " ", (ROOT / rel).read_text().replace("**", ""))
    return _docs[rel]


def norm(text):
    return re.sub(r"\s+", " ", text.replace("**", ""))


def decimals(token):
    return len(token.split(".")[1]) if "." in token else 0


def fmt_decimals(fmt):
    m = re.search(r"\.(\d+)f", fmt or "")
    return int(m.group(1)) if m else 0


def numbers(text):
    """[(value, decimals)] of every number in a text, in order ("1.07-1.61" is 1.07 and 1.61)."""
    return [(float(t.replace(",", "")), decimals(t)) for t in NUMBER.findall(text)]


def join(values, fmt, sep=", ", last_sep=None):
    parts = [format(v, fmt) for v in values]
    if last_sep and len(parts) > 1:
        return sep.join(parts[:-1]) + last_sep + parts[-1]
    return sep.join(parts)


class Report:
    def __init__(self, show):
        self.show = show
        self.failed = []
        self.counts = {"ok": 0, "rounding": 0, "DIFF": 0, "MISSING": 0, "known": 0}

    def line(self, status, where, what, detail=""):
        self.counts[status] += 1
        if status in ("DIFF", "MISSING"):
            self.failed.append(f"{status} {where}: {what} {detail}")
        if self.show or status in ("DIFF", "MISSING"):
            print(f"{status:8} {where}: {what}{'  ' + detail if detail else ''}")

    def compare(self, where, rel, text, computed, eps, known=None):
        """Is `text` in doc `rel`, and do its numbers contain `computed` (within rounding)?"""
        t = norm(text)
        if t not in doc_text(rel):
            self.line("MISSING", where, f"{text!r} not in {rel}")
            return
        toks = numbers(t)
        k = len(computed)
        best = None
        for i in range(len(toks) - k + 1):
            window = toks[i:i + k]
            errs, exact = [], True
            for (v, d), c, e in zip(window, computed, eps):
                tol = 0.5 * 10 ** -d + e + 1e-9
                errs.append(abs(v - c) / tol)
                exact &= format(c, f".{d}f") == format(v, f".{d}f")
            score = (max(errs) if errs else 0.0, not exact)
            if best is None or score < best[0]:
                best = (score, window)
        shown = ", ".join(f"{c:.{d + 2}f}" for c, (_, d) in zip(computed, best[1])) if best else ""
        if best is None or best[0][0] > 1:
            status = "known" if known else "DIFF"
            self.line(status, where, f"{rel}: {text!r}", f"computed {shown}" +
                      (f" ({known})" if known else ""))
        else:
            self.line("rounding" if best[0][1] else "ok", where, f"{rel}: {text!r}",
                      f"computed {shown}")


# ---- per-run.json blocks -------------------------------------------------------------------

def series_eps(spec):
    if spec.get("exact"):
        return 0.0
    return 0.5 * 10 ** -fmt_decimals(spec["fmt"])


def build_series(block, rep):
    """name -> (np.array values, np.array eps per value); checks each list is in the doc."""
    out = {}
    rel = block["doc"]
    for name, spec in block.get("series", {}).items():
        v = np.array(spec["values"], dtype=float)
        out[name] = (v, np.full(len(v), series_eps(spec)))
        check = spec.get("check", True)
        where = f"{block['id']} {name}"
        if check == "each":
            missing = [format(x, spec["fmt"]) for x in spec["values"]
                       if format(x, spec["fmt"]) not in doc_text(rel)]
            if missing:
                rep.line("MISSING", where, f"values {missing} not in {rel}")
            else:
                rep.line("ok", where, f"{len(v)} values in {rel}")
        elif check:
            text = join(spec["values"], spec["fmt"], spec.get("sep", ", "), spec.get("last_sep"))
            if text in doc_text(rel):
                rep.line("ok", where, f"values {text!r} in {rel}")
            else:
                rep.line("MISSING", where, f"values {text!r} not in {rel}")
    for name, op in block.get("derive", {}).items():
        kind = op[0]
        if kind in ("sub", "div"):
            (a, ea), (b, eb) = out[op[1]], out[op[2]]
            if kind == "sub":
                v, e = a - b, ea + eb
            else:
                v = a / b
                e = np.abs(v) * (ea / np.abs(a) + eb / np.abs(b))
            out[name] = (v, e)
            if op[3]:
                text = join(v, op[3])
                ok = text in doc_text(rel)
                rep.line("ok" if ok else "MISSING", f"{block['id']} {name}",
                         f"{kind} {op[1]}, {op[2]} = {text!r} {'in' if ok else 'not in'} {rel}")
        elif kind == "concat":
            out[name] = (np.concatenate([out[n][0] for n in op[1]]),
                         np.concatenate([out[n][1] for n in op[1]]))
        elif kind == "means":
            out[name] = (np.array([out[n][0].mean() for n in op[1]]),
                         np.array([out[n][1].max() for n in op[1]]))
        else:
            raise ValueError(f"unknown derive {kind}")
    return out


def stat_value(s, v, e):
    """(computed numbers, their rounding tolerances) of one stat over values v with eps e."""
    n, em = len(v), float(e.max()) if len(e) else 0.0
    sd_e = em * math.sqrt(n / (n - 1)) if n > 1 else 0.0
    kind = s["stat"]
    ref = s.get("ref")
    if kind == "mean_sd":
        return [v.mean(), v.std(ddof=1)], [em, sd_e]
    if kind == "mean":
        return [v.mean()], [em]
    if kind == "se":
        return [v.std(ddof=1) / math.sqrt(n)], [sd_e / math.sqrt(n)]
    if kind == "median":
        return [float(np.median(v))], [em]
    if kind == "median_range":
        return [float(np.median(v)), v.min(), v.max()], [em] * 3
    if kind == "range":
        k = s.get("scale", 1.0)
        return [v.min() * k, v.max() * k], [em * k] * 2
    if kind == "range_per_s":
        r = s["images"] / v
        return [r.min(), r.max()], [float((r * e / v).max())] * 2
    if kind == "percent_range":
        return [100 * v.min() / ref, 100 * v.max() / ref], [100 * em / ref] * 2
    if kind == "fewer_min":
        return [100 * (1 - v.max() / ref)], [100 * em / ref]
    if kind == "fewer_max":
        return [100 * (1 - v.min() / ref)], [100 * em / ref]
    if kind == "fewer_each":
        return list(100 * (1 - v / ref)), list(100 * e / ref)
    if kind == "each":
        return list(v), list(e)
    if kind == "each_percent":
        return list(100 * v), list(100 * e)
    if kind in ("count_le0", "count_gt0"):
        le0 = v <= 0  # a printed -0.000 counts as <= 0, as the doc counts it
        k = int(le0.sum()) if kind == "count_le0" else int((~le0).sum())
        out = [k, n] if s.get("with_n", True) else [k]
        return out, [0.0] * len(out)
    raise ValueError(f"unknown stat {kind}")


def run_block(block, rep):
    series = build_series(block, rep)
    for s in block.get("stats", []):
        v, e = series[s["of"]]
        computed, eps = stat_value(s, v, e)
        for rel in s.get("docs", [block["doc"]]):
            rep.compare(f"{block['id']} {s['stat']}({s['of']})", rel, s["text"], computed, eps,
                        s.get("known"))


# ---- power (tost.py) -----------------------------------------------------------------------

# Texts of protocol.md's power paragraph that tost.py's output no longer rounds to. protocol.md
# is pre-registered: its body is not edited after the runs (its own rule), so these are listed
# here and in results.md instead of being corrected there.
PROTOCOL_KNOWN = {
    "0.98 at the pooled one": "tost.py power prints 0.985 (0.98525), which rounds to 0.99",
}


def run_power(rep):
    sys.path.insert(0, str(HERE))
    import tost  # tost.py beside this file
    from scipy import stats

    data = json.loads(DATA.read_text())
    for r in data["power_inputs"]:
        for m in tost.MARGINS:
            spec = r[m]
            where = f"power {r['id']} {m}"
            if "per_seed" in spec:
                vals = spec["per_seed"]
                if len(vals) != r["seeds"]:
                    rep.line("DIFF", where, f"{len(vals)} values for {r['seeds']} seeds")
                text = join(vals, spec["fmt"])
                ok = text in doc_text(r["doc"])
                rep.line("ok" if ok else "MISSING", where,
                         f"per-seed {text!r} {'in' if ok else 'not in'} {r['doc']}")
                v = np.array(vals)
                e = 0.5 * 10 ** -fmt_decimals(spec["fmt"])
                sd_e = e * math.sqrt(len(v) / (len(v) - 1))
                rep.compare(where, r["doc"], spec["text"], [v.mean(), v.std(ddof=1)], [e, sd_e])
            else:
                d = fmt_decimals(spec["fmt"])
                text = f"{spec['mean']:{spec['fmt']}} ± {spec['sd']:.{d}f}"
                ok = text in doc_text(r["doc"])
                rep.line("ok" if ok else "MISSING", where,
                         f"mean ± sd {text!r} {'in' if ok else 'not in'} {r['doc']}")

    existing = tost.load_existing()
    sd_of = tost.sd_of
    labels = {"accuracy": "accuracy", "nll": "NLL", "ece": "ECE",
              "ood_auroc_entropy": "OOD AUROC (entropy)"}
    plan, rows = 0, {}
    for m, (margin, _) in tost.MARGINS.items():
        sds = [sd_of(r[m]) for r in existing]
        dfs = [r["seeds"] - 1 for r in existing]
        pooled = float(np.sqrt(sum(d * s * s for s, d in zip(sds, dfs)) / sum(dfs)))
        n_head, n_pool = tost.n_exact(sds[0], margin), tost.n_exact(pooled, margin)
        plan = max(plan, n_head, n_pool)
        rows[m] = (margin, sds, pooled, n_head, n_pool)
        row = (f"| {labels[m]} | {margin:g} | {sds[0]:.4f} | {sds[1]:.4f} / {sds[2]:.4f} |"
               f" {pooled:.4f} | {tost.n_normal(sds[0], margin):.1f} | {n_head} | {n_pool} |")
        ok = norm(row) in doc_text("docs/protocol.md")
        rep.line("ok" if ok else "DIFF", f"power table {m}", f"docs/protocol.md row {row!r}"
                 + ("" if ok else " not found"))
    P = "docs/protocol.md"
    rep.compare("power n", P, f"n = {plan}, the largest exact n", [plan], [0])
    margin, sds, pooled, _, _ = rows["ood_auroc_entropy"]
    df = existing[0]["seeds"] - 1
    upper = sds[0] * np.sqrt(df / stats.chi2.ppf(1 - tost.POWER, df))
    rep.compare("power ood at n", P, "for OOD AUROC it is 0.80 at the headline sd",
                [tost.power_at(plan, sds[0], margin)], [0])
    text = "0.98 at the pooled one"
    rep.compare("power ood at n", P, text, [tost.power_at(plan, pooled, margin)], [0],
                PROTOCOL_KNOWN.get(text))
    rep.compare("power upper sd", P, "the upper 80 % confidence limit, 0.040, would need 103 seeds",
                [upper, tost.n_exact(upper, margin)], [0, 0])
    mean = float(np.mean(existing[0]["ood_auroc_entropy"]))
    rep.compare("power true diff", P, "if the true difference were the headline's mean -0.006",
                [mean], [0])
    rep.compare("power true diff", P, "the power at 43 would be 0.27 (237 seeds for 80 %)",
                [plan, tost.power_at(plan, sds[0], margin, mean),
                 tost.n_exact(sds[0], margin, mean)], [0] * 3)
    low = min(tost.power_at(plan, s, rows[m][0]) for m in ("accuracy", "nll", "ece")
              for s in (rows[m][1][0], rows[m][2]))
    status = "ok" if low >= 0.997 else "DIFF"
    rep.line(status, "power others at n", f"{P}: 'the power is >= 0.997 for accuracy, NLL and"
             f" ECE under either estimate'", f"computed lowest {low:.5f}")
    R = "docs/results.md"
    texts = {"accuracy": "| [-0.14, +0.05] | shown | 1.00 / 1.00 |",
             "nll": "| [-0.0009, +0.0017] | shown | 1.00 / 1.00 |",
             "ece": "| [-0.0027, +0.0011] | shown | 0.71 / 0.48 |",
             "ood_auroc_entropy": "| [-0.041, +0.010] | not shown | 0.21 / 0.35 |"}
    for m, text in texts.items():
        margin, sds, pooled, _, _ = rows[m]
        rep.compare(f"power at n = 6 {m}", R, text,
                    [tost.power_at(6, sds[0], margin), tost.power_at(6, pooled, margin)], [0, 0])


# ---- scan: "M ± S (v1, v2, ...)" anywhere ---------------------------------------------------

def run_scan(rep):
    files = []
    for pattern in SCAN_DOCS:
        files += sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob(pattern))
    for rel in files:
        for m in SCAN.finditer(doc_text(rel)):
            parts = re.split(r",\s*|\s*/\s*", m.group(3).strip())
            if len(parts) < 2 or not all(re.fullmatch(r"[+-]?\d+\.\d+", p) for p in parts):
                continue
            v = np.array([float(p) for p in parts])
            e = 0.5 * 10 ** -max(decimals(p) for p in parts)
            sd_e = e * math.sqrt(len(v) / (len(v) - 1))
            rep.compare("scan", rel, m.group(0), [v.mean(), v.std(ddof=1)], [e, sd_e])


# ---- cross: numbers repeated from another doc -----------------------------------------------

CROSS = [
    # (doc, its text, source doc, the source's text): the same numbers, to the coarser rounding
    ("README.md", "2,368-2,456", "docs/results.md", "2,368-2,456 trainable parameters"),
    ("README.md", "1.9-2.0 % of its trainable parameters", "docs/results.md",
     "(1.9-2.0 % of BBB's 123,412"),
    ("README.md", "in a file of 12-13 % of its size", "docs/results.md", "(12.3-12.8 % of BBB's full file)"),
    ("README.md", "61-64 kB", "docs/results.md", "files of 60.7-63.5 kB"),
    ("README.md", "runs from -0.041 to +0.010", "docs/results.md", "| [-0.041, +0.010] | not shown"),
    ("docs/quick-run/README.md", "the paired difference is -0.0008 ± 0.0023", "docs/results.md",
     "| -0.0008 ± 0.0023 | [-0.0027, +0.0011]"),
    ("docs/guide/reproducing.md", "on OOD detection it is -0.006 ± 0.026", "docs/results.md",
     "-0.006 ± 0.026 (-0.025"),
]
HEADLINE_COPIES = ["README.md", "docs/guide/reproducing.md"]


def run_cross(rep):
    for rel, text, src, src_text in CROSS:
        if norm(src_text) not in doc_text(src):
            rep.line("MISSING", "cross", f"{src_text!r} not in {src}")
            continue
        rep.compare(f"cross {src}", rel, text, [v for v, _ in numbers(norm(src_text))][:len(
            numbers(norm(text)))], [0.5 * 10 ** -d for _, d in numbers(norm(src_text))])
    results = doc_text("docs/results.md")
    for rel in HEADLINE_COPIES:
        raw = (ROOT / rel).read_text()
        table = [ln for ln in raw.splitlines() if ln.startswith("| ") and "±" in ln
                 and ("LeNet-5" in ln or "ResNet-20" in ln or ln.startswith("| |"))]
        cells = sorted({c for ln in table
                        for c in re.findall(r"[+-]?\d+\.\d+ ± \d+\.\d+", ln)})
        missing = [c for c in cells if c not in results]
        if missing:
            rep.line("DIFF", "cross headline table", f"{rel}: {missing} not in docs/results.md")
        else:
            rep.line("ok", "cross headline table",
                     f"{rel}: all {len(cells)} mean ± sd cells of its headline table in docs/results.md")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true",
                   help="print only disagreements; exit 1 if there is one")
    p.add_argument("--only", help="one block id of per-run.json, or power, scan or cross")
    args = p.parse_args()
    rep = Report(show=not args.check)
    data = json.loads(DATA.read_text())
    ids = [b["id"] for b in data["blocks"]] + ["power", "scan", "cross"]
    if args.only and args.only not in ids:
        p.error(f"--only: one of {', '.join(ids)}")
    for block in data["blocks"]:
        if args.only in (None, block["id"]):
            if not args.check:
                print(f"\n## {block['id']}: {block['what']} ({block['doc']}; files {block['files']})")
            run_block(block, rep)
    for name, fn in (("power", run_power), ("scan", run_scan), ("cross", run_cross)):
        if args.only in (None, name):
            if not args.check:
                print(f"\n## {name}")
            fn(rep)
    c = rep.counts
    print(f"\n{c['ok']} ok, {c['rounding']} within the rounding of the per-seed values,"
          f" {c['known']} known (listed in the script), {c['DIFF']} differ, {c['MISSING']} missing")
    if args.check and rep.failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
