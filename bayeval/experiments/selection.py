"""The best-model identification experiment of seed 002 (docs/methods.md §7) on the bundled
data, and the history-informed protocol of docs/methods.md §10.

Every model of a dataset is an arm; a run is correct when the chosen model has the best
full-benchmark mean (any model tied for best counts). For each algorithm, budget fraction
b = n / (K L) and run (key), one compiled program per dataset and algorithm: SR/SySRs take
the phase schedule as data, UCB-E records its answer at every budget in one pass, US/SyUS
read every budget off one item order.

With ``history_share`` > 0 the models are split, by a seeded permutation per split, into
references (that share) and candidates (the rest): every algorithm runs on the candidates
only. HI-SySRs (:mod:`~bayeval.selection.history`) also reads the factor model fitted on
the references, its (k, λ) chosen on them alone; HW-SySRs draws its items by the weighted
design of :mod:`~bayeval.selection.design`, its weights from the references' scores. The
runs are divided evenly over ``splits`` splits; run r uses the same key for every
algorithm, so SySRs and HI-SySRs meet the items in the same order, and all three share
their tie draws.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from bayeval.experiments.figures import panel_grid
from bayeval.experiments.units import Unit
from bayeval.selection.bandits import ucb_e_rankings, uniform_rankings
from bayeval.selection.design import FLOOR, TOP_SHARE, history_weights
from bayeval.selection.history import History, fit_history, run_history_schedules
from bayeval.selection.schedule import phase_schedule
from bayeval.selection.successive_rejects import run_schedules
from bayeval.types import Array

ALGORITHMS = ("SR", "SySRs", "UCB-E(a=0.1)", "UCB-E(a=1)", "UCB-E(a=10)", "SyUCB-E(a=1)",
              "US", "SyUS", "HI-SySRs", "HW-SySRs")
# what each history-using algorithm reads of the reference models: HI-SySRs the factor
# history of the split (its predicted means), HW-SySRs the history weights of the pairs
READS_HISTORY = {"HI-SySRs": "history", "HW-SySRs": "weights"}
HISTORY_ALGORITHMS = tuple(READS_HISTORY)
# the algorithms that hold (R, K, L) running sums and read (R, B, K) means per phase
PHASE_SUMS = ("SR", "SySRs", *HISTORY_ALGORITHMS)
# the factor ranks cross-validated for HI-SySRs in the bench: with a few hundred reference
# models the 1-SE rule never chose more than 8 on the bundled data, and k = 32, 64 cost
# most of the fit
BENCH_RANKS = (2, 4, 8, 16)
BUDGET_GRID = tuple(sorted({*(k / 100 for k in range(1, 101)),
                            0.0125, 0.015, 0.0175, 0.025, 0.035, 0.045, 0.055}))
TABLE_BUDGETS = (0.08, 0.12, 0.16, 0.20, 0.25, 0.30, 0.35)
PER_DATASET_BUDGETS = (4, 8, 12, 16, 20)  # % of pairs, the per-dataset table of the report
# seed 002 Table 2 (15 benchmarks), mean accuracy at 8/12/16/20% of pairs
TOP_M = (3, 5, 10)
TOP = max(TOP_M)
ANCHORS = {"SR": (72.4, 89.7, 95.9, 98.2), "SySRs": (83.5, 95.1, 98.5, 99.6),
           "UCB-E(a=1)": (80.9, 86.8, 89.9, 95.3)}


def _ucb_parameters(name: str) -> tuple[float, bool]:
    shared = name.startswith("Sy")
    return float(name.split("a=")[1].rstrip(")")), shared


def ranker(scores: np.ndarray, algorithm: str, budgets: np.ndarray, top: int = TOP,
           history: History | None = None, weights: np.ndarray | None = None
           ) -> Callable[[Array], np.ndarray]:
    """A compiled map from (R,) keys to (B, R, top): each run's top models, best first, at
    each budget (evaluations): the elimination order for SR/SySRs/HI-SySRs/HW-SySRs (the
    model eliminated last ranks first), the empirical means otherwise (seed 002, App.
    H.2). HI-SySRs needs the reference models' factor model ``history``, HW-SySRs the item
    ``weights`` from their scores."""
    scores_j = jnp.asarray(scores, jnp.float64)
    K, L = scores.shape
    top = min(top, K)
    budgets = np.asarray(budgets, dtype=np.int64)
    if np.any(np.diff(budgets) < 0):
        raise ValueError("budgets must be non-decreasing (UCB-E answers them in one pass)")
    if algorithm in ("SR", "SySRs", *HISTORY_ALGORITHMS):
        schedules = jnp.asarray(np.stack([phase_schedule(K, L, int(n)) for n in budgets]))
        if algorithm in HISTORY_ALGORITHMS:
            fitted = history if algorithm == "HI-SySRs" else None
            design = None if algorithm == "HI-SySRs" or weights is None \
                else jnp.asarray(weights, jnp.float64)
            if fitted is None and design is None:
                raise ValueError(f"{algorithm} needs a history (reference models)")

            def orders(keys):  # run_history_schedules is compiled already
                return run_history_schedules(scores_j, keys, schedules, fitted, design).order
        else:
            shared = algorithm == "SySRs"
            orders = jax.jit(lambda keys: run_schedules(scores_j, keys, schedules, shared
                                                        ).order)
        return lambda keys: np.asarray(orders(keys)[..., ::-1][..., :top]).transpose(1, 0, 2)
    elif algorithm.startswith(("UCB-E", "SyUCB-E")):
        a, shared = _ucb_parameters(algorithm)

        run = jax.jit(lambda keys: ucb_e_rankings(scores_j, keys, budgets, a, shared, top))
        return lambda keys: np.asarray(run(keys)).transpose(1, 0, 2)
    elif algorithm in ("US", "SyUS"):
        shared = algorithm == "SyUS"

        def one(key):
            return uniform_rankings(scores_j, key, budgets, shared, top)
    else:
        raise ValueError(f"unknown algorithm {algorithm!r} (known: {', '.join(ALGORITHMS)})")
    run = jax.jit(jax.vmap(one))
    return lambda keys: np.asarray(run(keys)).transpose(1, 0, 2)


def top_m_correct(means: np.ndarray, ranked: np.ndarray, m: int) -> np.ndarray:
    """Whether each ranking's first m models are a true top-m set (seed 002, App. H.3):
    with ties, any set consistent with the tied ranking counts, i.e. every chosen model's
    full mean is at least the m-th largest and every model above it is chosen."""
    means = np.asarray(means)
    threshold = np.sort(means)[::-1][m - 1]
    chosen = np.asarray(ranked)[..., :m]
    tol = 1e-12
    at_least = np.all(means[chosen] >= threshold - tol, axis=-1)
    above = means > threshold + tol
    # the chosen models are distinct, so containing every model above the threshold
    # amounts to counting them among the chosen
    return at_least & ((means[chosen] > threshold + tol).sum(axis=-1) == above.sum())


def history_split(n_models: int, share: float, split: int, seed: int = 0
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(references, candidates): model indices of split ``split``, a seeded permutation
    of which the first round(share · M) models are the references."""
    n_ref = round(share * n_models)
    if not 5 <= n_ref <= n_models - 2:
        raise ValueError(f"a history share of {share:g} of {n_models} models leaves "
                         f"{n_ref} references and {n_models - n_ref} candidates (need at "
                         "least 5 and 2)")
    perm = np.random.default_rng([seed, split]).permutation(n_models)
    return np.sort(perm[:n_ref]), np.sort(perm[n_ref:])


_FITS: dict[tuple, History] = {}


def split_history(scores: np.ndarray, references: np.ndarray, split: int,
                  ranks: Sequence[int] = BENCH_RANKS,
                  log: Callable[[str], None] | None = None) -> History:
    """The factor model of one split's reference rows, fitted once per process."""
    ref = np.ascontiguousarray(scores[references])
    key = (ref.tobytes(), ref.shape, split, tuple(ranks))
    if key not in _FITS:
        history, cv = fit_history(ref, seed=split, ks=ranks)
        if log is not None:
            log(f"split {split}: factor model k={cv.k}, λ={cv.weight_decay:g} on "
                f"{len(references)} reference models")
        _FITS.clear()  # one split at a time is all a bench needs
        _FITS[key] = history
    return _FITS[key]


def _parts(n_models: int, runs: int, history_share: float, splits: int, seed: int
           ) -> list[tuple[np.ndarray, np.ndarray | None, int, int]]:
    """(candidates, references or None, first run, last run) of each split."""
    if history_share <= 0:
        return [(np.arange(n_models), None, 0, runs)]
    if not 1 <= splits <= runs:
        raise ValueError(f"splits must be in [1, runs], got {splits}")
    bounds = np.linspace(0, runs, splits + 1).round().astype(int)
    parts = []
    for sp in range(splits):
        refs, cands = history_split(n_models, history_share, sp, seed)
        parts.append((cands, refs, int(bounds[sp]), int(bounds[sp + 1])))
    return parts


def _budgets(n_arms: int, n_items: int, fractions: Sequence[float]) -> np.ndarray:
    return np.maximum(np.round(np.asarray(fractions) * n_arms * n_items).astype(np.int64),
                      n_arms)


def correct_counts(scores: np.ndarray, name: str, budgets: np.ndarray, tops: Sequence[int],
                   cands: np.ndarray, refs: np.ndarray | None, split: int, first: int,
                   last: int, seed: int = 0, chunk: int = 100,
                   ranks: Sequence[int] = BENCH_RANKS,
                   log: Callable[[str], None] | None = None) -> dict[int, np.ndarray]:
    """For m in (1, *tops): how many of runs ``first`` … ``last`` − 1 of algorithm
    ``name`` on the candidate rows ``cands`` chose the top m correctly at each budget.
    Run r uses key ``fold_in(key(seed), r)`` whatever the chunking, so counts of run
    ranges add up to the count of their union."""
    part = scores[cands]
    means = part.mean(axis=1)
    reads = READS_HISTORY.get(name)
    history = split_history(scores, refs, split, ranks, log) if reads == "history" else None
    weights = history_weights(scores[refs]) if reads == "weights" else None
    # SR/SySRs hold (R, K, L) running sums and read (R, B, K) means per phase:
    # smaller chunks stay in cache
    size = min(chunk if name not in PHASE_SUMS
               else min(chunk, 20), last - first)
    all_keys = jax.vmap(lambda r: jax.random.fold_in(jax.random.key(seed), r))(
        jnp.arange(first, first + -(-(last - first) // size) * size))
    run = ranker(part, name, budgets, max(tops, default=1), history, weights)
    counts = {m: np.zeros(len(budgets), np.int64) for m in (1, *tops)}
    for start in range(0, last - first, size):  # fixed chunk shape: one compile
        ranked = run(all_keys[start:start + size])[:, :min(size, last - first - start)]
        for m in counts:
            counts[m] += top_m_correct(means, ranked, m).sum(axis=1)
    return counts


def _table(dataset: str, name: str, fractions: Sequence[float], budgets: np.ndarray,
           counts: dict[int, np.ndarray], runs: int) -> pd.DataFrame:
    tops = [m for m in counts if m != 1]
    return pd.DataFrame([{
        "dataset": dataset, "algorithm": name, "budget": float(f), "evaluations": int(n),
        "accuracy": counts[1][i] / runs,
        **{f"top{m}_error": 1 - counts[m][i] / runs for m in tops}}
        for i, (f, n) in enumerate(zip(fractions, budgets, strict=True))])


def accuracy_table(scores: np.ndarray, algorithms: Sequence[str] = ALGORITHMS,
                   fractions: Sequence[float] = BUDGET_GRID, runs: int = 1000, seed: int = 0,
                   chunk: int = 100, dataset: str = "",
                   log: Callable[[str], None] | None = None, history_share: float = 0.0,
                   splits: int = 1, ranks: Sequence[int] = BENCH_RANKS) -> pd.DataFrame:
    """One row per algorithm × budget fraction: best-model accuracy and top-m
    identification error (m in ``TOP_M``, where m ≤ K) over ``runs`` runs. Run r uses key
    ``fold_in(key(seed), r)`` whatever the chunking. With ``history_share`` > 0, the runs
    are spread evenly over ``splits`` reference/candidate splits (module docstring)."""
    scores = np.asarray(scores, dtype=np.float64)
    if history_share <= 0 and any(a in HISTORY_ALGORITHMS for a in algorithms):
        raise ValueError(f"{', '.join(HISTORY_ALGORITHMS)} need a history share > 0")
    parts = _parts(scores.shape[0], runs, history_share, splits, seed)
    budgets = _budgets(len(parts[0][0]), scores.shape[1], fractions)
    tops = [m for m in TOP_M if m <= len(parts[0][0])]
    tables = []
    for name in algorithms:
        total = {m: np.zeros(len(budgets), np.int64) for m in (1, *tops)}
        for sp, (cands, refs, first, last) in enumerate(parts):
            counts = correct_counts(scores, name, budgets, tops, cands, refs, sp, first, last,
                                    seed, chunk, ranks, log)
            for m in total:
                total[m] += counts[m]
            if log is not None:
                where = f" (split {sp + 1}/{len(parts)})" if refs is not None else ""
                log(f"{dataset} {name}{where}: {last - first} runs × {len(budgets)} budgets")
        tables.append(_table(dataset, name, fractions, budgets, total, runs))
    return pd.concat(tables, ignore_index=True)


UNIT_RUNS = 250  # runs per cached unit: small enough to spread, big enough to amortise


def selection_units(dataset: str, n_models: int, algorithm: str, fractions: Sequence[float],
                    runs: int, history_share: float = 0.0, splits: int = 1, seed: int = 0,
                    unit_runs: int = UNIT_RUNS) -> list[Unit]:
    """The cached units of one (dataset, algorithm): each split's runs in pieces of at most
    ``unit_runs``."""
    parts = _parts(n_models, runs, history_share, splits, seed)
    settings = {"fractions": [float(f) for f in fractions], "history_share":
                float(history_share), "splits": int(splits) if history_share > 0 else 1,
                "runs": int(runs), "seed": int(seed), "ranks": list(BENCH_RANKS),
                "models": int(n_models)}
    if algorithm == "HW-SySRs":  # the design's constants: a change means new units
        settings["design"] = {"top": TOP_SHARE, "floor": FLOOR}
    units = []
    for sp, (_, _, first, last) in enumerate(parts):
        for lo in range(first, last, unit_runs):
            units.append(Unit("selection", dataset, algorithm, lo, min(last, lo + unit_runs),
                              {**settings, "split": sp}))
    return units


def selection_unit(unit: Unit, data: dict[str, np.ndarray]) -> pd.DataFrame:
    """Correct counts of one :func:`selection_units` unit: a row per budget, columns
    ``correct1``, ``correct3``, … (``data``: scores by dataset label)."""
    scores = np.asarray(data[unit.dataset], np.float64)
    s = unit.settings
    cands, refs, _, _ = _parts(s["models"], s["runs"], s["history_share"], s["splits"],
                               s["seed"])[s["split"]]
    budgets = _budgets(len(cands), scores.shape[1], s["fractions"])
    tops = [m for m in TOP_M if m <= len(cands)]
    counts = correct_counts(scores, unit.method, budgets, tops, cands, refs, s["split"],
                            unit.first, unit.last, s["seed"], ranks=s["ranks"])
    return pd.DataFrame({"budget": s["fractions"], "evaluations": budgets,
                         **{f"correct{m}": c for m, c in counts.items()}})


def merge_units(dataset: str, algorithm: str, parts: Sequence[pd.DataFrame], runs: int
                ) -> pd.DataFrame:
    """The accuracy table of one (dataset, algorithm) from its units' counts."""
    total = parts[0].copy()
    for part in parts[1:]:
        for col in total.columns:
            if col.startswith("correct"):
                total[col] = total[col] + part[col]
    counts = {int(c.removeprefix("correct")): total[c].to_numpy() for c in total.columns
              if c.startswith("correct")}
    return _table(dataset, algorithm, total.budget.tolist(),
                  total.evaluations.to_numpy(), counts, runs)


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


def _confidence_cells(table: pd.DataFrame, algo: str, column: str, levels) -> list[str]:
    """Mean and worst case over datasets of the confidence budgets (%) of one algorithm,
    ``column`` holding an accuracy (or 1 − an error rate)."""
    cells = []
    part = table[table.algorithm == algo]
    for level in levels:
        cb = np.asarray([confidence_budget(p.budget.to_numpy(), p[column].to_numpy(), level)
                         for _, p in part.groupby("dataset")]) * 100
        missing = np.isnan(cb).any()
        cells += ["—" if missing else f"{cb.mean():.1f}", "—" if missing else f"{cb.max():.1f}"]
    return cells


def write_report(table: pd.DataFrame, out, runs: int):
    """accuracy.csv, error-vs-budget plots (selection.png per dataset, top_m.png averaged)
    and report.md: accuracy at the table budgets averaged over datasets beside seed 002's
    anchors, confidence budgets, and top-m identification error."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "accuracy.csv", index=False)
    datasets = list(dict.fromkeys(table.dataset))
    algorithms = list(dict.fromkeys(table.algorithm))
    fig, axes = panel_grid(len(datasets), 3, 5, 3.5)
    for ax, name in zip(axes, datasets, strict=True):
        for algo, part in table[table.dataset == name].groupby("algorithm", sort=False):
            ax.plot(100 * part.budget, 100 * (1 - part.accuracy), label=algo)
        ax.set_xscale("log")
        ax.set_xlabel("budget (% of model–item pairs)")
        ax.set_ylabel("error rate (%)")
        ax.set_title(name)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "selection.png", dpi=110)
    plt.close(fig)

    tops = [int(c[3:-6]) for c in table.columns if c.startswith("top") and c.endswith("_error")]
    complete = table.dropna(subset=[f"top{m}_error" for m in tops])
    if tops:
        fig, axes = plt.subplots(1, len(tops), figsize=(5 * len(tops), 3.5), squeeze=False)
        for ax, m in zip(axes.flat, tops, strict=True):
            mean_m = complete.groupby(["algorithm", "budget"], sort=False)[f"top{m}_error"].mean()
            for algo in algorithms:
                curve = mean_m.loc[algo]
                ax.plot(100 * curve.index, 100 * curve.to_numpy(), label=algo)
            ax.set_xscale("log")
            ax.set_xlabel("budget (% of model–item pairs)")
            ax.set_ylabel(f"top-{m} identification error (%)")
            ax.set_title(f"top-{m}, mean over {complete.dataset.nunique()} datasets")
        axes.flat[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "top_m.png", dpi=110)
        plt.close(fig)

    def header(first: str, cols) -> list[str]:
        return [f"| {first} | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]

    budget_cols = [f"{100 * b:g}%" for b in TABLE_BUDGETS]
    lines = [f"Identification accuracy (%) over {runs} runs, mean over {len(datasets)} "
             f"datasets ({', '.join(datasets)}).", "", *header("algorithm", budget_cols)]
    mean = table.groupby(["algorithm", "budget"], sort=False).accuracy.mean()
    for algo in algorithms:
        vals = [mean.get((algo, b), np.nan) for b in TABLE_BUDGETS]
        lines.append(f"| {algo} | " + " | ".join(
            "—" if np.isnan(v) else f"{100 * v:.1f}" for v in vals) + " |")
        if algo in ANCHORS:
            lines.append(f"| {algo} (seed 002, 15 benchmarks) | "
                         + " | ".join(f"{v:.1f}" for v in ANCHORS[algo])
                         + " |" + " — |" * (len(TABLE_BUDGETS) - 4))
    lines += ["", "Confidence budgets (% of pairs from which accuracy stays ≥ level on the "
              "grid; mean and worst case over datasets; — : not reached on the grid):", "",
              *header("algorithm", ["90% mean", "90% worst", "95% mean", "95% worst",
                                    "100% mean", "100% worst"])]
    for algo in algorithms:
        lines.append(f"| {algo} | " + " | ".join(
            _confidence_cells(table, algo, "accuracy", (0.9, 0.95, 1.0))) + " |")
    lines += ["", "Per dataset: accuracy (%) at 4–20% of the pairs and the 95% / 100% "
              "confidence budgets (% of pairs), one row per algorithm (one binomial SE of "
              f"an accuracy a is √(a(1 − a)/{runs})):", "",
              *header("dataset", ["algorithm", *(f"{b:g}%" for b in PER_DATASET_BUDGETS),
                                  "95% CB", "100% CB"])]
    for name in datasets:
        for algo in algorithms:
            part = table[(table.dataset == name) & (table.algorithm == algo)]
            if part.empty:
                continue
            acc = dict(zip(np.round(100 * part.budget, 6), part.accuracy, strict=True))
            cells = ["—" if b not in acc else f"{100 * acc[b]:.1f}"
                     for b in PER_DATASET_BUDGETS]
            cbs = [confidence_budget(part.budget.to_numpy(), part.accuracy.to_numpy(), lv)
                   for lv in (0.95, 1.0)]
            cells += ["—" if np.isnan(c) else f"{100 * c:g}" for c in cbs]
            lines.append(f"| {name} | {algo} | " + " | ".join(cells) + " |")
    for m in tops:
        part = complete.assign(top_ok=1 - complete[f"top{m}_error"])
        mean_m = part.groupby(["algorithm", "budget"], sort=False)[f"top{m}_error"].mean()
        lines += ["", f"Top-{m} identification error (%: the chosen {m} models are not a true "
                  f"top-{m} set, ties counted as correct), mean over "
                  f"{part.dataset.nunique()} datasets; 90%/95% confidence budgets (mean, "
                  "worst):", "",
                  *header("algorithm", [*budget_cols, "90% CB mean", "90% CB worst",
                                        "95% CB mean", "95% CB worst"])]
        for algo in algorithms:
            vals = [mean_m.get((algo, b), np.nan) for b in TABLE_BUDGETS]
            lines.append(f"| {algo} | " + " | ".join(
                "—" if np.isnan(v) else f"{100 * v:.1f}" for v in vals) + " | "
                + " | ".join(_confidence_cells(part, algo, "top_ok", (0.9, 0.95))) + " |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return out / "report.md"


def run_selection_bench(sources: Sequence, algorithms: Sequence[str], runs: int = 1000,
                        max_budget: float = 1.0, history_share: float = 0.0,
                        splits: int = 4, out: Path = Path("results/selection"),
                        executor: Any = None,
                        log: Callable[[str], None] = print) -> Path:
    """The SySRs paper's experiment (``bayeval bench selection``) on each of ``sources``
    (bundled names or the user's matrices): every algorithm's accuracy of identifying the
    best model and top-m error against the budget, in cached units of at most 250 runs,
    the report rewritten after each dataset (a crash keeps the finished ones); returns
    the report's path. Settings the algorithms cannot take are one-line errors before any
    work."""
    from bayeval.data.sources import bench_dataset
    from bayeval.errors import BayevalError
    from bayeval.experiments.units import run_units

    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise BayevalError(f"unknown algorithm(s) {unknown} (known: {', '.join(ALGORITHMS)})")
    if history_share == 0 and any(a in HISTORY_ALGORITHMS for a in algorithms):
        named = ", ".join(a for a in algorithms if a in HISTORY_ALGORITHMS)
        raise BayevalError(f"--algorithms {named} needs --history-share "
                           "(e.g. 0.5): the share of models whose scores form the history")
    if history_share > 0 and splits > runs:
        raise BayevalError(f"--splits {splits} is more than --runs {runs}")
    grid = sorted({*(b for b in BUDGET_GRID if b <= max_budget + 1e-12),
                   *(b for b in TABLE_BUDGETS if b <= max_budget + 1e-12)})
    tables = []
    for source in sources:
        name, matrix = bench_dataset(source)
        scores = matrix.scores
        if np.isnan(scores).any():
            raise BayevalError(f"{name}: the score matrix has missing entries")
        plan = {algo: selection_units(name, scores.shape[0], algo, grid, runs,
                                      history_share, splits) for algo in algorithms}
        units = [u for algo in algorithms for u in plan[algo]]
        done = iter(run_units(units, selection_unit, {name: scores}, out, executor, log=log))
        for algo in algorithms:
            parts = [next(done) for _ in plan[algo]]
            tables.append(merge_units(name, algo, parts, runs))
        write_report(pd.concat(tables), out, runs)
    return out / "report.md"
