"""A 20-run slice of each bench against the committed figures in docs/results.

Usage: python bench/reproduce.py --out SLICES [--against OTHER_SLICES] [--run]
       python bench/reproduce.py --out - --validity RUNS   (the K = 1 validity table)

With ``--run`` the five slices are run first (skipping those already in ``--out``):

* estimation — IFEval interpolation, 10 targets × 2 seeds (20 full-length runs per method);
* selection — ARC-Challenge, 20 runs per algorithm and budget;
* compression — ARC-Challenge, 20 seeds (model splits) for random and BestRand;
* multitarget — IFEval interpolation, 5 targets × 4 seeds (20 target runs), re-fit every 250;
* coverage — ARC-Challenge, fully observed history, budgets 5% and 10%, 20 seeds per new
  model.

Each figure of a slice is set beside the committed one (run on 200 runs, 1000 runs, 200
seeds, 10 seeds and 100 seeds per model) with the slice's Monte-Carlo standard error and
|Δ| / SE: a refactor that keeps behaviour stays within a few SE. ``--against`` also
compares the slice's saved runs with another slice run (e.g. one made from an earlier
checkout with ``PYTHONPATH=that/checkout``): equal runs must give equal numbers to the
last digit. Prints markdown tables.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bayeval.experiments.metrics import integrated_rmse, rmse_curve

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
SLICES = {
    "est": ["estimation", "--datasets", "ifeval", "--regimes", "interpolation", "--targets",
            "10", "--seeds", "2"],
    "sel": ["selection", "--datasets", "arc_challenge", "--runs", "20"],
    "comp": ["compression", "--datasets", "arc_challenge", "--seeds", "20", "--kmeans-seeds",
             "2", "--mince-seeds", "2", "--no-ablation"],
    "multi": ["multitarget", "--datasets", "ifeval", "--regimes", "interpolation",
              "--targets", "5", "--seeds", "4", "--refit-every", "250"],
    "cov": ["coverage", "--suite", "arc_challenge", "--history", "full", "--budgets",
            "0.05,0.1", "--seeds", "20"],
}
METHOD_FILES = {"BayesAME": "bayesame", "BayesAME-RS": "bayesame-rs", "RS-Mean": "random",
                "Bayes-AIPW": "bayes-aipw"}


def run(out: Path) -> None:
    for name, args in SLICES.items():
        if (out / name).exists():
            continue
        code = "import sys; from bayeval.cli import app; sys.argv[0] = 'bayeval'; app()"
        subprocess.run([sys.executable, "-c", code, "bench", *args, "--out", str(out / name)],
                       check=True)


def _row(name: str, committed: float, value: float, se: float) -> str:
    ratio = abs(value - committed) / se if se > 0 else (0.0 if value == committed else np.inf)
    return f"| {name} | {committed:.4f} | {value:.4f} | {se:.4f} | {ratio:.1f} |"


def _irmse(est: np.ndarray, truth: np.ndarray) -> float:
    return integrated_rmse(rmse_curve(est, truth))


def estimation(out: Path) -> list[str]:
    committed = pd.read_csv(RESULTS / "estimation" / "ifeval_interp" / "irmse.csv")
    rows = []
    rng = np.random.default_rng(0)
    for method, stem in METHOD_FILES.items():
        runs = np.load(out / "est" / "runs" / f"ifeval-interpolation-{stem}.npz")
        est, truth = runs["estimate"], runs["truth"]
        value = _irmse(est, truth)
        boots = [_irmse(est[b], truth[b])
                 for b in rng.integers(0, len(truth), (400, len(truth)))]
        ref = committed[(committed.method == method)].irmse.iloc[0]
        rows.append(_row(f"IRMSE {method}", ref, value, float(np.std(boots))))
    return rows


def selection(out: Path) -> list[str]:
    committed = pd.read_csv(RESULTS / "selection" / "accuracy.csv")
    mine = pd.read_csv(out / "sel" / "accuracy.csv")
    rows = []
    for algorithm in ("SR", "SySRs", "UCB-E(a=1)"):
        for budget in (0.04, 0.08, 0.12, 0.16, 0.2):
            pick = lambda t, a=algorithm, b=budget: t[(t.dataset == "arc_challenge")  # noqa: E731
                                                      & (t.algorithm == a)
                                                      & np.isclose(t.budget, b)]
            ref, value = pick(committed).accuracy.iloc[0], pick(mine).accuracy.iloc[0]
            se = max(np.sqrt(ref * (1 - ref) / 20), 1 / 20 / 2)
            rows.append(_row(f"accuracy {algorithm} at {budget:.0%}", ref, value, se))
    return rows


def compression(out: Path) -> list[str]:
    from bayeval.experiments.compression import saved_errors

    committed = RESULTS / "compression" / "runs" / "arc_challenge_errors.npz"
    # the slice's errors as its bench saved them (its unit under out/comp/units)
    mine = saved_errors(out / "comp", "arc_challenge", seeds=20, kmeans_seeds=2,
                        mince_seeds=2)
    missing = ([str(committed)] if not committed.exists() else []) + (
        [f"{out / 'comp'} (no run of the slice's settings)"] if mine is None else [])
    if missing:
        return [f"| compression: not compared ({', '.join(missing)} missing) | | | | |"]
    errors = np.load(committed)
    rows = []
    for method in ("random", "bestrand"):
        for retention in (0.02, 0.1, 0.5):
            key = f"{method}@{retention}"
            ref, value = np.abs(errors[key]), np.abs(mine[key])
            # SE over the 20 seeds (model splits): each seed's mean |error| is one draw
            per_seed = value.reshape(20, -1).mean(axis=1)
            rows.append(_row(f"MAE {method} at {retention:.0%}", ref.mean(), value.mean(),
                             float(per_seed.std(ddof=1) / np.sqrt(20))))
            # seed s is fold_in(key(0), s) whatever the count: the slice is the committed
            # run's first 20 seeds (errors seed-major)
            gap = float(np.abs(value - ref[:value.size]).max())
            rows.append(f"| {method} at {retention:.0%}: max abs(Δ) of the 20 seeds' errors "
                        f"against the committed first 20 | {gap:.1e} | | | |")
    return rows


def multitarget(out: Path) -> list[str]:
    committed = pd.read_csv(RESULTS / "multitarget" / "costs.csv")
    mine = pd.read_csv(out / "multi" / "costs.csv")
    ref = committed[(committed.dataset == "ifeval") & (committed.regime == "interpolation")]
    mine = mine[(mine.dataset == "ifeval") & (mine.regime == "interpolation")]
    rows = []
    for column in ("joint_total", "single_total", "joint_cover", "single_cover"):
        se = float(mine[column].std(ddof=1) / np.sqrt(len(mine)))
        rows.append(_row(f"{column} (mean over seeds)", ref[column].mean(), mine[column].mean(),
                         se))
    # the slice's seeds are the committed run's first seeds: the same runs
    columns = ["joint_total", "single_total", "joint_cover", "single_cover"]
    first = ref.sort_values("seed").head(len(mine))[columns].to_numpy()
    same = np.array_equal(first, mine.sort_values("seed")[columns].to_numpy())
    rows.append(f"| seeds 0–{len(mine) - 1}: totals and coverage equal to the committed "
                f"runs' | {same} | | | |")
    return rows


def coverage(out: Path) -> list[str]:
    committed = pd.read_csv(RESULTS / "coverage" / "arc_challenge_full" / "results.csv")
    mine = pd.read_csv(out / "cov" / "results.csv")
    rows = []
    for method in ("FAQ (default)", "uniform"):
        for budget in (0.05, 0.1):
            pick = lambda t, m=method, b=budget: t[(t.method == m) & np.isclose(t.budget, b)]  # noqa: E731
            ref, value = pick(committed).iloc[0], pick(mine).iloc[0]
            rows.append(_row(f"coverage {method} at {budget:.0%}", ref.coverage,
                             value.coverage, value.coverage_se))
            if method != "uniform":
                rows.append(_row(f"ESS × {method} at {budget:.0%}", ref.ess_multiplier,
                                 value.ess_multiplier, value.ess_multiplier_se))
    return rows


def exact(out: Path, other: Path) -> list[str]:
    """Saved runs of two slice folders, compared to the last digit."""
    rows = []
    for path in sorted((out / "est" / "runs").glob("*.npz")):
        a, b = np.load(path), np.load(other / "est" / "runs" / path.name)
        same = all(np.array_equal(a[k], b[k], equal_nan=True) for k in a.files if k != "spec")
        rows.append(f"| estimation {path.stem} | {same} |")
    for sub, file in (("sel", "accuracy.csv"), ("comp", "results.csv"), ("multi", "costs.csv"),
                      ("cov", "results.csv")):
        a, b = pd.read_csv(out / sub / file), pd.read_csv(other / sub / file)
        drop = [c for c in a.columns if "seconds" in c]
        same = a.drop(columns=drop).equals(b.drop(columns=drop))
        rows.append(f"| {sub} {file} | {same} |")
    return rows


def validity(runs: Path) -> list[str]:
    """Each ``runs/<dataset>/results.csv`` of ``bayeval bench validity --datasets <dataset>
    --variants standard --epsilons 0.05 --methods active-pai --no-faq`` against the K = 1
    table of docs/results/streaming.md, field by field (columns the table has)."""
    table = pd.read_csv(RESULTS / "streaming" / "results_k1.csv")
    key = ["dataset", "variant", "epsilon", "method", "stratum"]
    rows = []
    for path in sorted(runs.glob("*/results.csv")):
        new = pd.read_csv(path)
        old = table[table.dataset.isin(new.dataset.unique())]
        both = old.merge(new, on=key, suffixes=("", "_new"), how="outer", indicator=True)
        fields = [c for c in old.columns if c not in key and f"{c}_new" in both]
        differ = sum(int((both[c].astype(str) != both[f"{c}_new"].astype(str)).sum())
                     for c in fields)
        missing = int((both._merge != "both").sum())
        rows.append(f"| {path.parent.name} | {int((both._merge == 'both').sum())} | "
                    f"{differ} | {missing} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--against", type=Path, default=None)
    parser.add_argument("--run", action="store_true")
    parser.add_argument("--validity", type=Path, default=None,
                        help="compare DIR/<dataset>/results.csv with the K = 1 validity "
                             "table (and nothing else)")
    args = parser.parse_args()
    if args.validity is not None:
        print("| dataset | cells | fields that differ | cells in one only |")
        print("|---|---|---|---|")
        for row in validity(args.validity):
            print(row)
        return
    if args.run:
        run(args.out)
    print("| figure | committed | slice | slice SE | abs(Δ)/SE |")
    print("|---|---|---|---|---|")
    for part in (estimation, selection, compression, multitarget, coverage):
        for row in part(args.out):
            print(row)
    if args.against is not None:
        print(f"\n| slice output | equal to {args.against} |")
        print("|---|---|")
        for row in exact(args.out, args.against):
            print(row)


if __name__ == "__main__":
    main()
