"""How HW-SySRs' accuracy depends on its two constants (docs/methods.md §10,
``bayeval.selection.design``): the share ``top`` of the strongest reference models whose
disagreement sets the item weights, and the uniform floor α.

The protocol of ``bayeval bench selection --history-share 0.5 --splits 4``: each dataset's
models split four times into references (half) and candidates, 250 runs per split, run r
with key ``fold_in(key(0), r)``; best-model accuracy at a few budgets (% of candidate ×
item pairs). α = 1 is SySRs' uniform design (its item orders are the race's, not SySRs'
permutation, so it matches SySRs in distribution, not run by run). One binomial SE of an
accuracy a over 1000 runs is √(a(1 − a)/1000) ≤ 1.6 points.

    python bench/selection_design.py --datasets commonsense,mmlu > design.md
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from bayeval.data import list_datasets, load_dataset  # noqa: E402
from bayeval.experiments.selection import (  # noqa: E402
    _budgets,
    history_split,
    ranker,
    top_m_correct,
)
from bayeval.selection.design import history_weights  # noqa: E402

BUDGETS = (0.04, 0.08, 0.12, 0.16, 0.20, 0.24, 0.28, 0.32, 0.36)
CONFIGS = ((1.0, 1.0), (0.25, 0.5), (0.25, 0.3), (0.5, 0.5), (1.0, 0.5))  # (top, α)


def accuracy(name: str, top: float, floor: float, runs: int = 1000, splits: int = 4,
             chunk: int = 50) -> np.ndarray:
    """Best-model accuracy of HW-SySRs with weights (top, α) at :data:`BUDGETS`."""
    scores = np.asarray(load_dataset(name).scores, np.float64)
    bounds = np.linspace(0, runs, splits + 1).round().astype(int)
    correct = np.zeros(len(BUDGETS))
    for sp in range(splits):
        refs, cands = history_split(scores.shape[0], 0.5, sp)
        part = scores[cands]
        budgets = _budgets(*part.shape, BUDGETS)
        run = ranker(part, "HW-SySRs", budgets, 1, None,
                     history_weights(scores[refs], top=top, floor=floor))
        keys = jax.vmap(lambda r: jax.random.fold_in(jax.random.key(0), r))(
            jnp.arange(bounds[sp], bounds[sp + 1]))
        for lo in range(0, len(keys), chunk):
            ranked = run(keys[lo:lo + chunk])
            correct += top_m_correct(part.mean(1), ranked, 1).sum(axis=1)
    return correct / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="all")
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    names = list_datasets() if args.datasets == "all" else args.datasets.split(",")
    print("| dataset | top share | α | " + " | ".join(f"{b:.0%}" for b in BUDGETS) + " |")
    print("|---|---|---|" + "---|" * len(BUDGETS))
    for name in names:
        for top, floor in CONFIGS:
            acc = accuracy(name, top, floor, args.runs)
            label = "uniform" if floor == 1.0 else f"{top:g}"
            print(f"| {name} | {label} | {floor:g} | "
                  + " | ".join(f"{100 * a:.1f}" for a in acc) + " |", flush=True)


if __name__ == "__main__":
    main()
