"""``bayeval bench suite``: a suite of tasks estimated with one budget (docs/methods.md §9
"Suites", :mod:`bayeval.loop.suite`).

For a suite of bundled tasks whose rows are the same models (the Open LLM Leaderboard's
IFEval, MuSR and ARC; HELM Lite's commonsense, MATH and MMLU), each seed draws
``n_targets`` targets among the models every task holds and, per task, a random
``reference_fraction`` of its other models as the reference; each target runs ``reps``
times. Every task's runs are simulated to its last item (the task's run after n items does
not depend on the other tasks: :mod:`bayeval.loop.suite`), with ``active-pai`` and with uniform
sampling (``random``, Wilson–FPC), and the suites are composed from them at each ε:

* ``suite`` — active-pai with the suite's allocation and stop (the average's interval at
  most ε wide);
* ``independent`` — active-pai run on each task by itself, stopping when its own interval
  is at most ε_k = ε / (w_k sqrt(K)) wide (the even split of the average's variance that
  gives the average the same width), its average's interval the same MOVER combination;
* ``uniform`` — uniform sampling in every task with the suite's allocation and stop: the
  items uniform sampling needs for the same width.

Per (suite, ε, scheme): coverage of the average's and of every task's interval at the stop
(± binomial SE), mean items (and cost, where the tasks' costs are known: the bundled
matrices carry none, so cost = items), and the saving of ``suite`` against the two others.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayeval.data import ScoreMatrix
from bayeval.data.bundled import load_dataset
from bayeval.data.lm_eval import subtask_matrix
from bayeval.errors import BayevalError, DataError
from bayeval.evaluation.options import comma_list
from bayeval.experiments.metrics import coverage, covers
from bayeval.experiments.tables import markdown_table
from bayeval.experiments.units import Executor, Unit, run_units
from bayeval.experiments.validity import NOMINAL, STRATA
from bayeval.loop.simulate import simulate
from bayeval.loop.suite import (
    NEVER,
    SuiteRule,
    average_interval,
    compose,
    normalised_weights,
    task_seed,
)
from bayeval.methods import make_method, parse_method_spec, resolved_parameters

_MUSR = ("murder_mysteries", "object_placements", "team_allocation")
SUITES = {"leaderboard": ("ifeval", "musr", "arc_challenge"),
          "helm_lite": ("commonsense", "math", "mmlu"),
          # a harness group's subtasks (``evaluate --subtasks``), weighted by size as the
          # leaderboard's MuSR group aggregates them
          "musr_subtasks": tuple(f"musr:leaderboard_musr_{s}" for s in _MUSR)}
SUITE_WEIGHTS = {"musr_subtasks": (250.0, 256.0, 250.0)}
SCHEMES = ("suite", "independent", "uniform")


def task_matrix(name: str) -> ScoreMatrix:
    """A suite's task by name: a bundled dataset, or ``DATASET:SUBTASK`` one subtask of a
    bundled harness group (``musr:leaderboard_musr_team_allocation``)."""
    dataset, sep, subtask = name.partition(":")
    matrix = load_dataset(dataset)
    return subtask_matrix(matrix, subtask) if sep else matrix


def suite_split(matrices: Sequence[ScoreMatrix], n_targets: int,
                reference_fraction: float, seed: int,
                same_rows: bool = False) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(per task: the targets' rows, the reference rows) of one seed: ``n_targets``
    models every task holds (by id; with ``same_rows``, row i of every task is one model,
    as in HELM Lite, whose rows are unnamed), and per task a ``reference_fraction`` of its
    other models."""
    rng = np.random.default_rng([seed, 2025])
    if same_rows:
        n = min(m.n_models for m in matrices)
        common = [str(i) for i in range(n)]
        rows_of = [dict(zip(common, range(n), strict=True)) for _ in matrices]
    else:
        shared = set(matrices[0].models).intersection(*(m.models for m in matrices[1:]))
        common = [m for m in matrices[0].models if m in shared]
        rows_of = [{m: mat.model_index(m) for m in common} for mat in matrices]
    if n_targets >= len(common):
        raise DataError(f"the suite's tasks share {len(common)} models: too few for "
                        f"{n_targets} targets and a reference")
    chosen = rng.choice(len(common), n_targets, replace=False)
    targets, references = [], []
    for mat, rows in zip(matrices, rows_of, strict=True):
        t = np.array([rows[common[c]] for c in chosen])
        pool = np.setdiff1d(np.arange(mat.n_models), t)
        n_ref = max(1, round(reference_fraction * pool.size))
        targets.append(t)
        references.append(np.sort(rng.choice(pool, n_ref, replace=False)))
    return targets, references


def suite_unit(unit: Unit, data: dict[str, ScoreMatrix]) -> dict[str, np.ndarray]:
    """One cached unit: seed ``unit.first`` of one task of a suite under one method, every
    run simulated to the task's last item: its estimate and interval after each item and
    the target's true score."""
    s = unit.settings
    matrices = [data[name] for name in s["tasks"]]
    k = list(s["tasks"]).index(unit.dataset)
    targets, references = suite_split(matrices, s["n_targets"], s["reference_fraction"],
                                      unit.first, s["same_rows"])
    matrix = matrices[k]
    name, params = parse_method_spec(unit.method)
    method = make_method(name, **{**params, "epsilon": NEVER})
    rows = np.repeat(matrix.scores[targets[k]], s["reps"], axis=0)
    seeds = task_seed(1_000_003 * unit.first, k) + np.arange(rows.shape[0])
    result = simulate(method, matrix.scores[references[k]], rows, seeds)
    return {"estimate": result.estimate, "lower": result.lower, "upper": result.upper,
            "truth": rows.mean(1)}


def independent_stop(lower: np.ndarray, upper: np.ndarray, epsilon: float,
                     n_min: int) -> np.ndarray:
    """Items at which a task's run stops by itself: the first n ≥ ``n_min`` whose interval
    (clipped to [0, 1]) is at most ``epsilon`` wide, else its last item."""
    width = np.clip(upper, 0, 1) - np.clip(lower, 0, 1)
    steps = np.arange(1, width.shape[1] + 1)
    ok = (width <= epsilon) & (steps >= n_min)
    return np.where(ok.any(1), ok.argmax(1) + 1, width.shape[1])


def independent_runs(runs: Sequence[dict], weights: np.ndarray, epsilon: float,
                     n_min: int, batch: int = 1) -> tuple[np.ndarray, ...]:
    """(n, estimate, lower, upper), (R, K) arrays: each task's run (``runs[k]``: its
    estimate and interval after each item, (R, S_k)) stopped by itself when its interval
    (clipped to [0, 1]) is at most ε_k = ε / (w_k sqrt(K)) wide, the even split of the
    average's variance; read after each choice of ``batch`` items (the first with at least
    ``n_min``), its last full batch where none is that narrow."""
    K = len(runs)
    first = -(-n_min // batch)  # the choice at which a task may first stop
    n = np.stack([batch * independent_stop(a["lower"][:, batch - 1::batch],
                                           a["upper"][:, batch - 1::batch],
                                           epsilon / (wk * math.sqrt(K)), first)
                  for a, wk in zip(runs, weights, strict=True)], 1)
    n = np.minimum(n, [a["estimate"].shape[1] for a in runs])
    rows = np.arange(n.shape[0])
    est, low, high = (np.stack([a[f][rows, n[:, k] - 1] for k, a in enumerate(runs)], 1)
                      for f in ("estimate", "lower", "upper"))
    return n, est, np.clip(low, 0, 1), np.clip(high, 0, 1)


def compose_schemes(tasks: Sequence[str], active: Sequence[dict], uniform: Sequence[dict],
                    weights: Sequence[float], epsilon: float, n_min: int = 30,
                    task_epsilon: float | None = None) -> pd.DataFrame:
    """One row per (run, scheme) of the module docstring's three schemes at ``epsilon``:
    every task's items, estimate, interval, truth and coverage at the stop, and the
    average's."""
    w = normalised_weights(weights)
    rule = SuiteRule(epsilon, task_epsilon, n_min)
    truth = np.stack([a["truth"] for a in active], 1)
    frames = []
    for scheme, runs in (("suite", active), ("uniform", uniform)):
        r = compose([a["estimate"] for a in runs], [a["lower"] for a in runs],
                    [a["upper"] for a in runs], w, rule)
        frames.append((scheme, r.n, r.estimate, r.lower, r.upper))
    rows = np.arange(truth.shape[0])
    frames.append(("independent", *independent_runs(active, w, epsilon, n_min)))
    out = []
    true_avg = truth @ w
    for scheme, n, est, low, high in frames:
        value, lo, hi = average_interval(est, low, high, w)
        table = {"scheme": scheme, "run": rows, "items": n.sum(1), "average": value,
                 "average_lower": lo, "average_upper": hi, "average_truth": true_avg,
                 "average_covered": covers(lo, hi, true_avg)}
        for k, task in enumerate(tasks):
            table.update({f"{task}/n": n[:, k], f"{task}/estimate": est[:, k],
                          f"{task}/lower": low[:, k], f"{task}/upper": high[:, k],
                          f"{task}/truth": truth[:, k],
                          f"{task}/covered": covers(low[:, k], high[:, k], truth[:, k])})
        out.append(pd.DataFrame(table))
    return pd.concat(out, ignore_index=True).assign(epsilon=epsilon)


def _cover(runs: pd.DataFrame, column: str) -> tuple[float, float]:
    """Coverage ± SE of ``runs[column]``: clustered by target model where the runs name
    it (``cluster``), else binomial."""
    return coverage(runs[column], runs["cluster"] if "cluster" in runs else None)


def summarise(runs: pd.DataFrame, tasks: Sequence[str]) -> pd.DataFrame:
    """Per (suite, ε, scheme): coverage ± SE of the average and of each task (the SE
    clustered by target model where the runs name it: :func:`clustered_coverage`), mean
    items (per task too), and the suite scheme's saving against the others."""
    rows = []
    for (label, eps, scheme), part in runs.groupby(["suite", "epsilon", "scheme"],
                                                   sort=False):
        row = {"suite": label, "epsilon": eps, "scheme": scheme, "runs": len(part)}
        row["average_coverage"], row["average_se"] = _cover(part, "average_covered")
        if "cluster" in part:
            row["targets"] = int(part["cluster"].nunique())
        for task in tasks:
            if f"{task}/covered" not in part:
                continue
            row[f"{task}_coverage"], row[f"{task}_se"] = _cover(part, f"{task}/covered")
            row[f"{task}_items"] = float(part[f"{task}/n"].mean())
        row["items"] = float(part["items"].mean())
        row["items_se"] = float(part["items"].std(ddof=1) / math.sqrt(len(part)))
        row["width"] = float((part.average_upper - part.average_lower).mean())
        rows.append(row)
    table = pd.DataFrame(rows)
    for other in ("independent", "uniform"):
        base = table[table.scheme == other].set_index(["suite", "epsilon"])["items"]
        idx = pd.MultiIndex.from_frame(table[["suite", "epsilon"]])
        table[f"saving_vs_{other}"] = 1 - table["items"].to_numpy() / base.reindex(
            idx).to_numpy()
    return table


def strata_table(runs: pd.DataFrame, tasks: Sequence[str]) -> pd.DataFrame:
    """Coverage ± SE (clustered by target model where the runs name it) per (suite, ε,
    scheme, task, the target's score range on the task)."""
    rows = []
    for (label, eps, scheme), part in runs.groupby(["suite", "epsilon", "scheme"],
                                                   sort=False):
        for task in tasks:
            if f"{task}/truth" not in part:
                continue
            truth = part[f"{task}/truth"]
            for name, lo, hi in STRATA:
                cell = part[(truth >= lo) & (truth < hi)]
                if cell.empty:
                    continue
                cov, se = _cover(cell, f"{task}/covered")
                rows.append({"suite": label, "epsilon": eps, "scheme": scheme,
                             "task": task, "stratum": name, "runs": len(cell),
                             "coverage": cov, "coverage_se": se,
                             "items": float(cell[f"{task}/n"].mean())})
    return pd.DataFrame(rows)


def seed_unit(task: str, spec: str, seed: int, settings: dict[str, Any]) -> Unit:
    """The unit of one (task, method, seed) of a suite (:func:`suite_unit`), keyed by every
    parameter of the method, its defaults too (``resolved_parameters``), so that a unit
    cached under one default is not reused for another."""
    return Unit("suite", task, spec, seed, seed + 1,
                {**settings, "parameters": resolved_parameters(spec)})


def suite_draws(names: Sequence[str], data: dict[str, ScoreMatrix], seeds: int,
                methods: Sequence[str], n_targets: int = 20, reps: int = 5,
                reference_fraction: float = 0.5, rows: str = "auto",
                out: Path | None = None, executor: Executor | None = None,
                log: Callable[[str], None] = print
                ) -> tuple[dict[str, list[dict[str, np.ndarray]]], np.ndarray]:
    """The suite ``names``' runs over ``seeds`` draws (:func:`suite_split`, ``reps`` runs
    per target, :func:`suite_unit`): per method, one dict of arrays per task, its runs one
    after another; and each run's target model (its row of the first task), the clusters
    of the coverage SEs. ``rows``: as :func:`run_suite_bench`'s. Every (task, method,
    seed) is a unit saved under ``out``."""
    shared = bool(set(data[names[0]].models).intersection(data[names[1]].models)) \
        if len(names) > 1 else True
    same_rows = rows == "order" or (rows == "auto" and not shared)
    settings = {"tasks": list(names), "n_targets": int(n_targets), "reps": int(reps),
                "reference_fraction": float(reference_fraction),
                "same_rows": bool(same_rows)}
    units = {(name, spec): [seed_unit(name, spec, s, settings) for s in range(seeds)]
             for name in names for spec in methods}
    flat = [u for us in units.values() for u in us]
    done = dict(zip(flat, run_units(flat, suite_unit, data, out, executor, log=log),
                    strict=True))
    runs = {spec: [_joined([done[u] for u in units[name, spec]]) for name in names]
            for spec in methods}
    first = data[names[0]]
    cluster = np.concatenate([
        np.repeat(first.models[suite_split([data[n] for n in names], n_targets,
                                           reference_fraction, s, same_rows)[0][0]],
                  reps) for s in range(seeds)])
    return runs, cluster


def run_suite_bench(suites: dict[str, Sequence[str]], epsilons: Sequence[float] = (0.05,),
                    seeds: int = 10, n_targets: int = 20, reps: int = 5,
                    reference_fraction: float = 0.5, method: str = "active-pai",
                    n_min: int = 30, weights: dict[str, Sequence[float]] | None = None,
                    out: Path | None = None, executor: Executor | None = None,
                    log: Callable[[str], None] = print,
                    matrices: dict[str, ScoreMatrix] | None = None,
                    rows: str = "auto") -> pd.DataFrame:
    """Per-run rows of every suite (name → its tasks), ε and scheme (module docstring).
    A task is a bundled name (:func:`task_matrix`), or one of ``matrices`` (a user's
    score matrices by label). ``rows``: how the tasks' rows are one model: ``id`` (by
    model id), ``order`` (row i of every task, for unnamed rows) or ``auto`` (by id where
    the tasks share ids, else by order). Every (suite, task, method, seed) is a unit
    saved under ``out``."""
    if rows not in ("auto", "id", "order"):
        raise ValueError(f"rows must be auto, id or order, got {rows!r}")
    frames = []
    for label, names in suites.items():
        t0 = time.time()
        data = {name: (matrices or {}).get(name) or task_matrix(name) for name in names}
        done, cluster = suite_draws(names, data, seeds, (method, "random"), n_targets, reps,
                                    reference_fraction, rows, out, executor, log)
        active, uniform = done[method], done["random"]
        w = (weights or SUITE_WEIGHTS).get(label, [1.0] * len(names))
        for eps in epsilons:
            runs = compose_schemes(names, active, uniform, w, eps, n_min).assign(suite=label)
            runs["cluster"] = cluster[runs["run"].to_numpy()]
            frames.append(runs)
            part = runs[runs.scheme == "suite"]
            log(f"{label} ε={eps:g}: {len(part)} runs, average coverage "
                f"{part.average_covered.mean():.3f}, items {part['items'].mean():.0f}")
        log(f"{label}: {2 * len(names) * seeds} units in {time.time() - t0:.0f} s")
    return pd.concat(frames, ignore_index=True)


def _joined(parts: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The units' arrays of one task, their runs one after another."""
    return {f: np.concatenate([p[f] for p in parts]) for f in parts[0]}


def write_report(runs: pd.DataFrame, out: Path, min_coverage: float = 0.94) -> Path:
    """results.csv, strata.csv, suite.png and report.md in ``out``; every cell below
    ``min_coverage`` listed."""
    out.mkdir(parents=True, exist_ok=True)
    tasks = sorted({c.split("/")[0] for c in runs.columns if c.endswith("/covered")})
    table = summarise(runs, tasks)
    strata = strata_table(runs, tasks)
    table.to_csv(out / "results.csv", index=False)
    strata.to_csv(out / "strata.csv", index=False)
    lines = ["# Suites at the stop (docs/methods.md §9 \"Suites\")", "",
             "Coverage of the 95% interval of the suite's average and of each task at the "
             "stop ± its SE, clustered by target model (the runs of one target are not "
             "independent: `targets` distinct models); mean items (± SE) over the suite; "
             "the suite scheme's "
             "saving against independent per-task runs at the same average width and "
             "against uniform sampling with the suite's allocation and stop.", ""]
    for label, part in table.groupby("suite", sort=False):
        names = [t for t in tasks if part[f"{t}_coverage"].notna().any()]
        shown = pd.DataFrame({
            "ε": part.epsilon, "scheme": part.scheme, "runs": part.runs,
            **({"targets": part.targets} if "targets" in part else {}),
            "average": [f"{c:.3f} ± {s:.3f}" for c, s in zip(part.average_coverage,
                                                              part.average_se, strict=True)],
            **{t: [f"{c:.3f} ± {s:.3f}" for c, s in zip(part[f"{t}_coverage"],
                                                         part[f"{t}_se"], strict=True)]
               for t in names},
            "items": [f"{i:.0f} ± {s:.0f}" for i, s in zip(part["items"], part.items_se,
                                                           strict=True)],
            **{f"{t} items": part[f"{t}_items"].round(0) for t in names},
            "vs independent": [f"{s:.1%}" if s != 0 else "" for s in
                               part.saving_vs_independent],
            "vs uniform": [f"{s:.1%}" if s != 0 else "" for s in part.saving_vs_uniform]})
        lines += [f"## {label} ({', '.join(names)})", "", markdown_table(shown), ""]
    cells = [(r.suite, r.epsilon, r.scheme, "average", r.average_coverage, r.average_se)
             for r in table.itertuples()]
    cells += [(r.suite, r.epsilon, r.scheme, f"{r.task} {r.stratum} ({r.runs} runs)",
               r.coverage, r.coverage_se) for r in strata.itertuples()]
    bad = [c for c in cells if c[4] < min_coverage]
    lines += [f"## Cells below {min_coverage} ({len(bad)}, task cells per score range)",
              ""]
    lines += [markdown_table(pd.DataFrame(bad, columns=["suite", "ε", "scheme", "cell",
                                                        "coverage", "SE"]), ".3f")
              if bad else "none", ""]
    lines += ["## Coverage per task and score range", "",
              markdown_table(strata, ".3f"), ""]
    _plot(table, tasks, out / "suite.png")
    lines += ["![coverage and items](suite.png)", ""]
    report = out / "report.md"
    report.write_text("\n".join(lines), encoding="utf-8")
    return report


def _short(names: Sequence[str]) -> list[str]:
    """Axis labels: a subtask's name without its dataset and the prefix its suite's
    tasks share (``musr:leaderboard_musr_team_allocation`` → ``team_allocation``)."""
    tails = [n.split(":")[-1] for n in names]
    words = [t.split("_") for t in tails if t != "average"]
    shared = 0  # leading words every task shares, each keeping one of its own
    while len(words) > 1 and all(len(w) > shared + 1 and w[shared] == words[0][shared]
                                 for w in words):
        shared += 1
    return [t if t == "average" else "_".join(t.split("_")[shared:]) for t in tails]


def _plot(table: pd.DataFrame, tasks: Sequence[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    suites = list(dict.fromkeys(table.suite))
    fig, axes = plt.subplots(len(suites), 2, figsize=(11, 4.6 * len(suites)), squeeze=False)
    for row, label in zip(axes, suites, strict=True):
        part = table[table.suite == label]
        names = ["average"] + [t for t in tasks if part[f"{t}_coverage"].notna().any()]
        for i, scheme in enumerate(SCHEMES):
            p = part[part.scheme == scheme]
            for j, eps in enumerate(p.epsilon):
                cov = [p[f"{c}_coverage"].iloc[j] for c in names]
                se = [p[f"{c}_se"].iloc[j] for c in names]
                x = np.arange(len(names)) + 0.12 * (i - 1) + 0.04 * j
                row[0].errorbar(x, cov, yerr=se, fmt="o", ms=3,
                                label=f"{scheme} ε={eps:g}", color=f"C{i}",
                                alpha=1 - 0.25 * j)
            row[1].errorbar(p.epsilon, p["items"], yerr=p.items_se, marker="o",
                            label=scheme, color=f"C{i}")
        row[0].axhline(NOMINAL, color="grey", lw=0.8)
        row[0].axhline(0.94, color="grey", lw=0.8, ls="--")
        row[0].set_xticks(range(len(names)), _short(names))
        row[0].set_ylabel("coverage at the stop (± SE)")
        row[0].set_title(label)
        row[0].legend(fontsize=6, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.1))
        row[1].set_xlabel("ε (width of the average's interval)")
        row[1].set_ylabel("items over the suite (± SE)")
        row[1].set_yscale("log")
        row[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def suite_inputs(suites: str, references: Sequence[Path] | None, rows: str = "auto",
                 suites_given: bool = False
                 ) -> tuple[dict[str, tuple[str, ...]], dict[str, Any] | None]:
    """The suites ``bench suite`` runs (name → its tasks: a known suite of
    :data:`SUITES` or bundled datasets joined by '+') and, with
    ``references``, the user's matrices by label (one suite of them, ``rows`` saying how
    their rows match), checked before any work."""
    from bayeval.data.bundled import list_datasets

    if rows not in ("auto", "id", "order"):
        raise BayevalError(f"--rows must be auto, id or order, got {rows!r}")
    if references:
        if suites_given:
            raise BayevalError("give --suites or --reference, not both")
        if len(references) < 2:
            raise BayevalError("--reference: a suite needs two or more matrices (give "
                               "--reference once per task)")
        from bayeval.data.sources import bench_dataset

        matrices = {}
        for path in references:
            from bayeval.evaluation.sources import fresh_source

            _, matrix = fresh_source(None, path)
            label, matrix = bench_dataset(matrix)
            if label in matrices:
                raise BayevalError(f"--reference {path}: given twice")
            matrices[label] = matrix
        return {"+".join(matrices): tuple(matrices)}, matrices
    if rows != "auto":
        raise BayevalError("--rows matches the rows of your --reference matrices")
    chosen = {}
    for name in comma_list(suites):
        tasks = SUITES.get(name) or tuple(name.split("+"))
        unknown = [t for t in tasks if t.partition(":")[0] not in list_datasets()]
        if unknown or len(tasks) < 2:
            raise BayevalError(f"--suites: {name!r} is neither a known suite "
                               f"({', '.join(SUITES)}) nor two or more bundled datasets "
                               "joined by '+'")
        chosen[name] = tasks
    if not chosen:
        raise BayevalError("--suites: none given")
    return chosen, None
