"""bayeval's estimators beside ProEval's Bayesian quadrature at fixed budgets, on the same
targets and reference models: MAE and coverage of the 95% interval.

Usage: python bench/proeval_side_by_side.py [--datasets arc_challenge,ifeval]
           [--variant standard|extremes] [--budgets 25,50,100,200] [--seeds 10]
           [--targets 10] [--reps 4] [--out DIR]

Needs the ``bench`` extra (``pip install -e '.[bench]'``, which brings PyPI ``proeval``).

Protocol. Each of ``--seeds`` draws its targets and reference models as ``bench validity``
does (``variant_split``: targets at random, or with ``--variant extremes`` from the
bottom and top 5% of models; half of the other models the reference).
For every target:

* ProEval: ``BQPriorSampler(noise_variance=0.3).plan`` on the reference scores (items ×
  models; its linear-kernel GP over the reference models' centred scores, prior mean the
  items' reference means), then ``plan.estimate`` on the target's scores of the planned
  items. Its selection reads no target score, so one plan of the largest budget serves
  every budget (its greedy picks are prefixes) and every target of the draw; it is
  deterministic, so it runs once per target (the ``--reps`` selection seeds are for the
  randomised methods). Its interval is estimate ∓ 1.96 × ``integral_std``.
* bayeval, ``--reps`` runs per target through the vmapped engine, read at each budget
  (the rule's stop is ignored: these are fixed-budget runs): ``active-pai`` (design-valid
  estimator), ``bayesame`` (bucket-GP posterior), ``random`` (RS-Mean with Wilson–FPC),
  ``bq`` (bayeval's Bayesian quadrature over the reference models: ProEval's surrogate and
  design, with the benchmark's noise in Var(R | C)), ``active-pai(predictor=linear)``
  (that surrogate as the design-valid estimator's predictor), and ``faq(budget=B)`` run
  once per budget (its schedule depends on the budget). ``--methods`` picks a subset.

Reported per (dataset, budget, method): runs, MAE with its SE over runs, coverage with
its binomial SE, mean width. ``report.md``, ``results.csv`` and ``mae.png`` go to
``--out``.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayeval.data import load_dataset
from bayeval.estimators.interval import covers
from bayeval.experiments.tables import markdown_table
from bayeval.experiments.validity import variant_split
from bayeval.loop.simulate import simulate
from bayeval.methods import (
    accepts_parameter,
    make_method,
    parse_method_spec,
    split_method_specs,
)
from bayeval.models.bucket_gp import make_buckets
from bayeval.precision import enable_float64

enable_float64()  # bayeval computes in float64 (README: "Precision")

Z = 1.959963984540054
METHODS = ("proeval", "active-pai", "bayesame", "random", "faq", "bq",
           "active-pai(predictor=linear)")


def proeval_runs(reference: np.ndarray, targets: np.ndarray, budgets: list[int]) -> list[dict]:
    """ProEval's estimate and interval at each budget for each target row."""
    from proeval import BQPriorSampler

    filled = np.where(np.isnan(reference), np.nanmean(reference, axis=0), reference)
    plan = BQPriorSampler(noise_variance=0.3).plan(filled.T, budget=max(budgets))
    rows = []
    for k, row in enumerate(targets):
        result = plan.estimate(row[list(plan.indices)])
        std = result.integral_std
        for b in budgets:
            est = float(result.estimates[b - 1])
            rows.append({"target": k, "rep": 0, "budget": b, "estimate": est,
                         "lower": est - Z * float(std[b - 1]),
                         "upper": est + Z * float(std[b - 1])})
    return rows


def bayeval_runs(spec: str, params: dict, reference: np.ndarray, targets: np.ndarray,
                 budgets: list[int], reps: int, capacity: int, seed0: int) -> list[dict]:
    """One simulation of ``--reps`` runs per target, read at each budget."""
    if accepts_parameter(spec, "bucket_capacity"):
        params = {**params, "bucket_capacity": capacity}
    method = make_method(spec, **params)
    rows_in = np.repeat(targets, reps, axis=0)
    seeds = seed0 + np.arange(rows_in.shape[0])
    result = simulate(method, reference, rows_in, seeds, n_steps=max(budgets))
    rows = []
    for r in range(rows_in.shape[0]):
        for b in budgets:
            rows.append({"target": r // reps, "rep": r % reps, "budget": b,
                         "estimate": float(result.estimate[r, b - 1]),
                         "lower": float(result.lower[r, b - 1]),
                         "upper": float(result.upper[r, b - 1])})
    return rows


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (dataset, budget, method), part in runs.groupby(["dataset", "budget", "method"],
                                                         sort=False):
        err = (part.estimate - part.truth).abs()
        cov = float(part.covered.mean())
        rows.append({"dataset": dataset, "budget": budget, "method": method,
                     "runs": len(part), "mae": float(err.mean()),
                     "mae_se": float(err.std(ddof=1) / math.sqrt(len(part))),
                     "coverage": cov,
                     "coverage_se": math.sqrt(max(cov * (1 - cov), 1e-12) / len(part)),
                     "mean_width": float((part.upper - part.lower).mean())})
    return pd.DataFrame(rows)


def plot(table: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(table.dataset))
    fig, axes = plt.subplots(2, len(names), figsize=(4 * len(names), 6.5), squeeze=False)
    for c, name in enumerate(names):
        part = table[table.dataset == name]
        for method, rows in part.groupby("method", sort=False):
            axes[0, c].errorbar(rows.budget, rows.mae, yerr=rows.mae_se, marker="o",
                                capsize=3, label=method)
            axes[1, c].errorbar(rows.budget, rows.coverage, yerr=rows.coverage_se,
                                marker="o", capsize=3, label=method)
        axes[0, c].set(title=name, xscale="log", ylabel="MAE")
        axes[1, c].axhline(0.95, color="grey", lw=0.8, ls="--")
        axes[1, c].set(xscale="log", xlabel="items evaluated", ylabel="coverage of 95%")
    for ax in axes.ravel():
        budgets = sorted(table.budget.unique())
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.minorticks_off()
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--datasets", default="arc_challenge")
    parser.add_argument("--variant", default="standard", choices=["standard", "extremes"])
    parser.add_argument("--budgets", default="25,50,100,200")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--targets", type=int, default=10)
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="'proeval', 'faq' (run once per budget) and bayeval method "
                             "specs")
    parser.add_argument("--out", type=Path, default=Path("results/proeval"))
    args = parser.parse_args()
    budgets = sorted(int(b) for b in args.budgets.split(","))
    chosen = split_method_specs(args.methods)
    specs = [(m, *parse_method_spec(m)) for m in chosen if m not in ("proeval", "faq")]
    all_runs = []
    for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        matrix = load_dataset(name)
        if max(budgets) > matrix.n_items:
            raise SystemExit(f"{name}: budget {max(budgets)} is above its "
                             f"{matrix.n_items} items")
        for s in range(args.seeds):
            split = variant_split(matrix, args.variant, args.targets, 0.5, s)
            reference, targets = split.reference.scores, split.targets.scores
            truth = targets.mean(axis=1)
            capacity = make_buckets(reference).n_buckets
            t0 = time.time()
            parts = {}
            if "proeval" in chosen:
                parts["proeval"] = proeval_runs(reference, targets, budgets)
            for spec, name_, params in specs:
                parts[spec] = bayeval_runs(name_, params, reference, targets, budgets,
                                           args.reps, capacity, 1_000_003 * s)
            for b in budgets if "faq" in chosen else []:  # its schedule depends on B
                rows = bayeval_runs("faq", {"budget": b}, reference, targets, [b],
                                    args.reps, capacity, 1_000_003 * s)
                parts.setdefault("faq", []).extend(rows)
            for method, rows in parts.items():
                frame = pd.DataFrame(rows)
                frame["truth"] = truth[frame.target.to_numpy()]
                frame["lower"] = frame.lower.clip(0.0, 1.0)
                frame["upper"] = frame.upper.clip(0.0, 1.0)
                frame["covered"] = covers(frame.lower, frame.upper, frame.truth)
                all_runs.append(frame.assign(dataset=name, variant=args.variant, seed=s,
                                             method=method))
            print(f"{name} draw {s + 1}/{args.seeds}: {time.time() - t0:.0f} s", flush=True)
    runs = pd.concat(all_runs, ignore_index=True)
    table = summarise(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    runs.to_csv(args.out / "runs.csv", index=False)
    table.to_csv(args.out / "results.csv", index=False)
    plot(table, args.out / "mae.png")
    shown = table.assign(
        mae=[f"{m:.4f} ± {e:.4f}" for m, e in zip(table.mae, table.mae_se, strict=True)],
        coverage=[f"{c:.3f} ± {e:.3f}" for c, e in zip(table.coverage, table.coverage_se,
                                                       strict=True)],
        mean_width=table.mean_width.map(lambda w: f"{w:.4f}"))
    shown = shown.drop(columns=["mae_se", "coverage_se"])
    (args.out / "report.md").write_text(
        "# bayeval beside ProEval at fixed budgets\n\n"
        f"`python bench/proeval_side_by_side.py --datasets {args.datasets} --variant "
        f"{args.variant} --budgets "
        f"{args.budgets} --seeds {args.seeds} --targets {args.targets} --reps {args.reps}`"
        "\n\n" + markdown_table(shown) + "\n\n![MAE and coverage](mae.png)\n")
    print(markdown_table(shown))


if __name__ == "__main__":
    main()
