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


def write_report(table: pd.DataFrame, out, runs: int):
    """CSV, error-vs-budget plots and report.md (accuracy at the table budgets averaged
    over datasets beside the paper's anchors; confidence budgets per algorithm)."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "accuracy.csv", index=False)
    datasets = list(dict.fromkeys(table.dataset))
    ncols = min(3, len(datasets))
    nrows = -(-len(datasets) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.5 * nrows), squeeze=False)
    for ax in axes.flat[len(datasets):]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, datasets, strict=False):
        for algo, part in table[table.dataset == name].groupby("algorithm", sort=False):
            ax.plot(100 * part.budget, 100 * (1 - part.accuracy), label=algo)
        ax.set_xscale("log")
        ax.set_xlabel("budget (% of model–item pairs)")
        ax.set_ylabel("error rate (%)")
        ax.set_title(name)
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "selection.png", dpi=110)
    plt.close(fig)
    lines = [f"Identification accuracy (%) over {runs} runs, mean over {len(datasets)} "
             f"datasets ({', '.join(datasets)}).", "",
             "| algorithm | " + " | ".join(f"{100 * b:g}%" for b in TABLE_BUDGETS) + " |",
             "|---" * (len(TABLE_BUDGETS) + 1) + "|"]
    mean = table.groupby(["algorithm", "budget"], sort=False).accuracy.mean()
    for algo in dict.fromkeys(table.algorithm):
        vals = [mean.get((algo, b), np.nan) for b in TABLE_BUDGETS]
        lines.append(f"| {algo} | " + " | ".join(
            "—" if np.isnan(v) else f"{100 * v:.1f}" for v in vals) + " |")
        if algo in ANCHORS:
            lines.append(f"| {algo} (seed 002, 15 benchmarks) | "
                         + " | ".join(f"{v:.1f}" for v in ANCHORS[algo])
                         + " |" + " — |" * (len(TABLE_BUDGETS) - 4))
    lines += ["", "Confidence budgets (% of pairs from which accuracy stays ≥ level; mean and "
              "worst case over datasets; — : not reached on the grid):", "",
              "| algorithm | 90% mean | 90% worst | 95% mean | 95% worst | 100% mean | "
              "100% worst |", "|---" * 7 + "|"]
    for algo in dict.fromkeys(table.algorithm):
        cells = []
        for level in (0.9, 0.95, 1.0):
            cb = [confidence_budget(p.budget.to_numpy(), p.accuracy.to_numpy(), level)
                  for _, p in table[table.algorithm == algo].groupby("dataset")]
            cb = np.asarray(cb) * 100
            cells += ["—" if np.isnan(cb).any() else f"{cb.mean():.1f}",
                      "—" if np.isnan(cb).any() else f"{cb.max():.1f}"]
        lines.append(f"| {algo} | " + " | ".join(cells) + " |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return out / "report.md"
