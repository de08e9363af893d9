"""The best-model identification experiment of seed 002 (METHODS.md §7) on the bundled
data.

Every model of a dataset is an arm; a run is correct when the chosen model has the best
full-benchmark mean (any model tied for best counts). For each algorithm, budget fraction
b = n / (K L) and run (key), one compiled program per dataset and algorithm: SR/SySRs take
the phase schedule as data, UCB-E records its answer at every budget in one pass, US/SyUS
read every budget off one item order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from bayeval.inference.base import Array
from bayeval.selection.bandits import ucb_e_best, uniform_best
from bayeval.selection.schedule import phase_schedule
from bayeval.selection.successive_rejects import run_schedule

ALGORITHMS = ("SR", "SySRs", "UCB-E(a=0.1)", "UCB-E(a=1)", "UCB-E(a=10)", "SyUCB-E(a=1)",
              "US", "SyUS")
BUDGET_GRID = tuple(sorted({*(k / 100 for k in range(1, 101)),
                            0.0125, 0.015, 0.0175, 0.025, 0.035, 0.045, 0.055}))
TABLE_BUDGETS = (0.08, 0.12, 0.16, 0.20, 0.25, 0.30, 0.35)
# seed 002 Table 2 (15 benchmarks), mean accuracy at 8/12/16/20% of pairs
ANCHORS = {"SR": (72.4, 89.7, 95.9, 98.2), "SySRs": (83.5, 95.1, 98.5, 99.6),
           "UCB-E(a=1)": (80.9, 86.8, 89.9, 95.3)}


def _ucb_parameters(name: str) -> tuple[float, bool]:
    shared = name.startswith("Sy")
    return float(name.split("a=")[1].rstrip(")")), shared


def chosen_models(scores: np.ndarray, algorithm: str, budgets: np.ndarray, keys: Array,
                  ) -> np.ndarray:
    """(B, R) the model each run chooses at each budget (evaluations)."""
    scores_j = jnp.asarray(scores, jnp.float64)
    K, L = scores.shape
    budgets = np.asarray(budgets, dtype=np.int64)
    if algorithm in ("SR", "SySRs"):
        schedules = jnp.asarray(np.stack([phase_schedule(K, L, int(n)) for n in budgets]))
        shared = algorithm == "SySRs"

        def one(key):
            return jax.vmap(lambda s: run_schedule(scores_j, key, s, shared).best)(schedules)
    elif algorithm.startswith(("UCB-E", "SyUCB-E")):
        a, shared = _ucb_parameters(algorithm)

        def one(key):
            return ucb_e_best(scores_j, key, budgets, a, shared)
    elif algorithm in ("US", "SyUS"):
        shared = algorithm == "SyUS"

        def one(key):
            return uniform_best(scores_j, key, budgets, shared)
    else:
        raise ValueError(f"unknown algorithm {algorithm!r} (known: {', '.join(ALGORITHMS)})")
    return np.asarray(jax.jit(jax.vmap(one))(keys)).T



def accuracy_table(scores: np.ndarray, algorithms: Sequence[str] = ALGORITHMS,
                   fractions: Sequence[float] = BUDGET_GRID, runs: int = 1000, seed: int = 0,
                   chunk: int = 100, dataset: str = "",
                   log: Callable[[str], None] | None = None) -> pd.DataFrame:
    """One row per algorithm × budget fraction: accuracy over ``runs`` runs."""
    scores = np.asarray(scores, dtype=np.float64)
    K, L = scores.shape
    means = scores.mean(axis=1)
    winners = np.isclose(means, means.max(), rtol=0, atol=1e-12)
    budgets = np.maximum(np.round(np.asarray(fractions) * K * L).astype(np.int64), K)
    rows = []
    for name in algorithms:
        correct = np.zeros(len(budgets))
        for start in range(0, runs, chunk):
            keys = jax.random.split(jax.random.fold_in(jax.random.key(seed), start),
                                    min(chunk, runs - start))
            chosen = chosen_models(scores, name, budgets, keys)
            correct += winners[chosen].sum(axis=1)
        for f, n, c in zip(fractions, budgets, correct, strict=True):
            rows.append({"dataset": dataset, "algorithm": name, "budget": float(f),
                         "evaluations": int(n), "accuracy": c / runs})
        if log is not None:
            log(f"{dataset} {name}: {runs} runs × {len(budgets)} budgets")
    return pd.DataFrame(rows)


def confidence_budget(budget: np.ndarray, accuracy: np.ndarray, level: float) -> float:
    """The smallest budget fraction from which accuracy stays ≥ ``level`` (NaN: never)."""
    order = np.argsort(budget)
    b, acc = np.asarray(budget)[order], np.asarray(accuracy)[order]
    below = np.flatnonzero(acc < level - 1e-12)
    if below.size == 0:
        return float(b[0])
    if below[-1] == b.size - 1:
        return float("nan")
    return float(b[below[-1] + 1])
