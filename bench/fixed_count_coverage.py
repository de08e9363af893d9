"""Coverage of ``active-pai``'s interval at fixed numbers of items, in batches: where a
run stands when a suite's stop leaves a task at a hundred or two items; beside it Fluid
Benchmarking (``fluid``, Hofmann et al. 2025) and uniform sampling, with each method's
mean absolute error at the same counts.

Per bundled dataset and variant (``standard``: random targets, half the other models as
reference; ``extrapolation``: targets among the strongest 30%, the weakest half as
reference; ``bayeval.experiments.validity.variant_split``), ``--runs`` simulated runs of
``active-pai`` in batches of ``--batch`` (a seed per draw of targets and reference, the
targets of each draw run once each), read without a stop at each count of ``--counts``:
the share of 95% intervals holding the target's full-benchmark score ± its SE, the SE
clustered by target model (a model is a target in many draws; its runs are not
independent), beside ``fluid``'s (in the same batches) and uniform sampling's (RS-Mean,
one at a time) at the same counts, and each method's mean absolute error. A cell below
0.94 is marked. ``--merge A.json,B.json`` writes one table from earlier runs' rows (the
datasets split over processes).

    python bench/fixed_count_coverage.py --datasets arc_challenge,commonsense,ifeval,math \
        --out /tmp/a.md &
    python bench/fixed_count_coverage.py --datasets mmlu,mrpc,musr,rte,sst2 --out /tmp/b.md
    python bench/fixed_count_coverage.py --merge /tmp/a.json,/tmp/b.json \
        --out docs/results/fixed_count_coverage.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_METHODS = "active-pai;fluid;random"


def cell(dataset: str, variant: str, runs: int, counts: list[int], batch: int,
         targets: int, names: list[str]) -> list[dict]:
    """The coverage rows of one dataset and variant."""
    from bayeval.data.bundled import load_dataset
    from bayeval.experiments.metrics import coverage, covers
    from bayeval.experiments.validity import variant_split
    from bayeval.loop.simulate import simulate
    from bayeval.methods import make_method
    from bayeval.methods.base import parse_method_spec

    matrix = load_dataset(dataset)
    n_items = matrix.n_items
    steps = min(max(counts), n_items)
    one_at_a_time = {"random"}  # RS-Mean's draws do not read the scores
    methods = {}
    for spec in names:
        name, params = parse_method_spec(spec)
        methods[spec] = (make_method(name, **{"epsilon": 0.05, **params}),
                         1 if name in one_at_a_time else batch)
    hit: dict[str, dict[int, list[bool]]] = {m: {n: [] for n in counts} for m in methods}
    err: dict[str, dict[int, list[float]]] = {m: {n: [] for n in counts} for m in methods}
    models: list[str] = []
    seed, began = 0, time.time()
    while len(models) < runs:
        sp = variant_split(matrix, variant, targets, 0.5, seed)
        rows = np.asarray(sp.targets.scores, np.float64)
        truth = np.nanmean(rows, axis=1)
        for name, (method, k) in methods.items():
            sim = simulate(method, np.asarray(sp.reference.scores, np.float64), rows,
                           1_000_003 * seed + np.arange(rows.shape[0]), n_steps=steps,
                           batch=k)
            for n in counts:
                if n <= steps:
                    at = n - 1
                    hit[name][n] += list(covers(sim.lower[:, at], sim.upper[:, at], truth))
                    err[name][n] += list(np.abs(sim.estimate[:, at] - truth))
        models += list(sp.targets.models)
        seed += 1
        print(f"  {dataset} {variant}: {min(len(models), runs)}/{runs} runs "
              f"({time.time() - began:.0f} s)", file=sys.stderr, flush=True)
    out = []
    for name in methods:
        for n in counts:
            if n > steps:
                continue
            got = np.asarray(hit[name][n][:runs])
            share, se = coverage(got, np.asarray(models[:runs]))
            out.append({"dataset": dataset, "variant": variant, "method": name,
                        "items": n, "N": n_items, "runs": int(got.size),
                        "coverage": share, "se": se, "draws": seed,
                        "abs_error": float(np.mean(err[name][n][:runs]))})
    return out


def write(rows: list[dict], args: argparse.Namespace, seconds: float) -> None:
    counts = sorted({r["items"] for r in rows})
    lines = ["# Coverage at fixed numbers of items, in batches", "",
             f"`python bench/fixed_count_coverage.py --runs {args.runs} --batch {args.batch}"
             f" --counts {','.join(map(str, args.counts))}"
             + ("" if args.methods == DEFAULT_METHODS else f" --methods '{args.methods}'")
             + f"` — {os.cpu_count()} cores, {seconds:.0f} s. `active-pai` (ε = 0.05, read "
             f"without its stop) in batches of {args.batch}, `fluid` (ε = 0.05, read "
             "without its stop) in the same batches, uniform sampling (RS-Mean) one at a time; "
             f"{args.runs} runs per cell, the SE clustered by target model; **bold**: "
             "below 0.94. Each cell: coverage ± SE / mean absolute error.", "",
             "| dataset | variant | method | " + " | ".join(f"n = {n}" for n in counts)
             + " |", "|---|---|---|" + "---|" * len(counts)]
    key = {(r["dataset"], r["variant"], r["method"], r["items"]): r for r in rows}
    below = []
    for d, v, m in dict.fromkeys((r["dataset"], r["variant"], r["method"]) for r in rows):
        cells = []
        for n in counts:
            r = key.get((d, v, m, n))
            if r is None:
                cells.append("–")
                continue
            text = f"{r['coverage']:.3f} ± {r['se']:.3f}"
            if r["coverage"] < 0.94:
                text = f"**{text}**"
                below.append(f"{d} {v} {m} n = {n}")
            cells.append(f"{text} / {r['abs_error']:.3f}")
        lines.append(f"| {d} | {v} | {m} | " + " | ".join(cells) + " |")
    lines.append("")
    for m in dict.fromkeys(r["method"] for r in rows):
        mine = [b for b in below if f" {m} n = " in b]
        cells = sum(r["method"] == m for r in rows)
        named = f": {'; '.join(mine)}" if mine and len(mine) <= 30 else ""
        lines.append(f"- {m}: {len(mine)} of {cells} cells below 0.94{named}.")
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="arc_challenge,commonsense,ifeval,math,mmlu,"
                        "mrpc,musr,rte,sst2")
    parser.add_argument("--variants", default="standard,extrapolation")
    parser.add_argument("--runs", type=int, default=1000, help="runs per cell")
    parser.add_argument("--targets", type=int, default=20, help="targets per draw")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--counts", default="32,50,64,100,128,200,256",
                        type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--methods", default=DEFAULT_METHODS,
                        help="method specs separated by ';' (e.g. 'active-pai(warmup=128)')")
    parser.add_argument("--merge", default="", help="comma-separated .json of earlier runs")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "docs/results/fixed_count_coverage.md")
    args = parser.parse_args()
    if args.merge:
        rows = [r for f in args.merge.split(",") for r in json.loads(Path(f).read_text())]
        write(rows, args, float("nan"))
        return 0
    from bayeval.precision import enable_float64

    enable_float64()
    rows: list[dict] = []
    began = time.time()
    for dataset in args.datasets.split(","):
        for variant in args.variants.split(","):
            t = time.time()
            rows += cell(dataset, variant, args.runs, args.counts, args.batch, args.targets,
                         args.methods.split(";"))
            print(f"{dataset} {variant}: {time.time() - t:.0f} s "
                  + ", ".join(f"{r['method']}@{r['items']} {r['coverage']:.3f}"
                              for r in rows if (r["dataset"], r["variant"]) ==
                              (dataset, variant)), file=sys.stderr, flush=True)
            write(rows, args, time.time() - began)
    return 0


if __name__ == "__main__":
    sys.exit(main())
