"""Ablation of active-pai's predictor on training models only.

Run: python bench/active_predictors.py [--runs-per-seed 8] [--seeds 10] [--out DIR]
    [--methods SPEC,SPEC,...] [--datasets a,b,...]

For each bundled dataset a fixed, seeded half of the models is the training pool; the
other half is never read, so a default chosen here is not tuned on it (a benchmark or a
model the method has never seen is what that half stands for). Within the pool,
``bench validity``'s protocol runs at ε = 0.05 (targets and reference models drawn from
the pool, 80% of the rest as reference), and the table gives coverage ± SE, mean items
at the stop and the saving against RS-Mean for each method.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from bayeval.data import load_dataset
from bayeval.experiments.tables import markdown_table
from bayeval.experiments.validity import run_validity, summarise
from bayeval.methods import split_method_specs
from bayeval.precision import enable_float64

DATASETS = ("ifeval", "commonsense", "math", "mmlu", "arc_challenge", "musr", "mrpc", "rte",
            "sst2")
METHODS = ("active-pai(predictor=exact)", "active-pai(predictor=difficulty)",
           "active-pai(predictor=difficulty,components=2)",
           "active-pai(predictor=difficulty,components=5)",
           "active-pai(predictor=difficulty,components=10)", "random")


def training_pool(name: str):
    """The seeded half of ``name``'s models used for tuning (the rest is never read)."""
    matrix = load_dataset(name)
    rng = np.random.default_rng([20261201, len(name)])
    keep = np.sort(rng.choice(matrix.n_models, matrix.n_models // 2, replace=False))
    return matrix.select_models(keep)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--targets", type=int, default=4)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--epsilon", type=float, default=0.05)
    parser.add_argument("--variants", default="standard")
    parser.add_argument("--out", type=Path, default=Path("results/active-predictors"))
    args = parser.parse_args()
    enable_float64()
    specs = split_method_specs(args.methods)
    args.out.mkdir(parents=True, exist_ok=True)
    parts = []
    for name in args.datasets.split(","):
        runs, _ = run_validity(training_pool(name), variants=args.variants.split(","),
                               epsilons=(args.epsilon,), methods=specs, seeds=args.seeds,
                               n_targets=args.targets, reps=args.reps,
                               reference_fraction=0.8, faq=False)
        parts.append(runs)
        runs.to_csv(args.out / f"{name}.csv", index=False)
    table = summarise(pd.concat(parts, ignore_index=True))
    table = table[table.stratum == "all"]
    cols = ["dataset", "variant", "method", "runs", "coverage", "coverage_se",
            "mean_items", "saving_vs_rs"]
    text = markdown_table(table[cols])
    (args.out / "report.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
