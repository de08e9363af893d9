"""A benchmark shrunk to a fixed subset and a score estimated from a run on it, as one call
each (what ``bayeval compress`` and ``bayeval estimate`` run): BestRand and MINCE
(:mod:`bayeval.compression.build`), the estimate of :mod:`bayeval.compression.estimate`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from bayeval.errors import BayevalError
from bayeval.evaluation.sources import fresh_source
from bayeval.records.files import check_output

__all__ = ["compress", "estimate_from_subset", "write_subset_results"]


def compress(method: str = "bestrand", dataset: str | None = None,
             reference: Path | str | None = None, *, retention: float | None = None,
             size: int | None = None, probes: Sequence[str] | None = None,
             pool: float = 4.0, candidates: int = 1000,
             calibration: Sequence[str] | None = None, step: int = 50, tau: float = 0.01,
             categories: Path | None = None, holdout: float = 0.5, seed: int = 0,
             out: Path = Path("subset.json"), export_samples: Path | None = None,
             task: str | None = None, metric: str | None = None,
             filter_name: str | None = None, include_path: Path | None = None,
             repeated_models: str = "error",
             working: Callable[[str], AbstractContextManager] | None = None,
             ) -> dict[str, Any]:
    """Choose a subset of a benchmark's items (``method``: bestrand, mince, random, kmeans,
    stratified), write it to ``out`` (and the harness's ``--samples`` file to
    ``export_samples``), and return it with its drift on the models held out of its
    construction. Both outputs are checked before any work; ``working(message)`` (a
    context manager) follows the search."""
    check_output(out, "--out")
    check_output(export_samples, "--export-samples")
    _, matrix = fresh_source(dataset or ("arc_challenge" if reference is None else None),
                             reference, task=task, metric=metric, filter_name=filter_name,
                             repeated_models=repeated_models)
    from bayeval.compression.build import build_subset, read_categories
    from bayeval.compression.subset import export_lm_eval_samples, group_aggregation
    from bayeval.data.lm_eval import harness_task

    if export_samples is not None and not (task or harness_task(matrix)):
        raise BayevalError(f"--export-samples: {matrix.name} records no lm-evaluation-harness "
                           "task; give the harness's task name (--task NAME)")
    follow = working or (lambda message: nullcontext())
    with follow(f"{method}: choosing a subset of {matrix.name} "
                f"({matrix.n_models} models × {matrix.n_items} items)"):
        subset = build_subset(
            matrix, method, retention=retention, size=size,
            probes=None if probes is None else list(probes), pool=pool,
            candidates=candidates,
            calibration=None if calibration is None else list(calibration), step=step,
            tau=tau, categories=None if categories is None else read_categories(categories),
            holdout=holdout, seed=seed, task=task)
    if subset.subtasks and subset.task:  # a group: how the harness combines its subtasks
        subset.group_mean = group_aggregation(subset.task, subset.metric, include_path)
    if export_samples is not None:
        # its doc indices and task key are checked before anything is written
        export_lm_eval_samples(subset, include_path=include_path)
    subset.save(out)
    result = {**subset.to_json(), "file": str(out)}
    if export_samples is not None:
        export_lm_eval_samples(subset, export_samples, check=False)
        result["samples_file"] = str(export_samples)
    return result


def estimate_from_subset(subset: Path, samples: Path, model: str | None = None,
                         metric: str | None = None, filter_name: str | None = None,
                         level: float = 0.95, group_mean: str | None = None,
                         ) -> dict[str, Any]:
    """A model's full-benchmark score from its harness run (``samples``: the run's
    ``--output_path``) on the subset file ``subset``: the subset's mean with a Wilson–FPC
    interval (uniform subsets) or its weighted mean with an empirical interval (stratified,
    kmeans); a group's subtasks each too, the group combined by ``group_mean`` (default:
    as the subset records the group's harness config, else 'size')."""
    if not Path(subset).is_file():
        raise BayevalError(f"--subset {subset}: no such file")
    if not Path(samples).is_dir():
        raise BayevalError(f"--samples {samples}: no such folder (the harness's "
                           "--output_path)")
    from bayeval.compression.estimate import read_subset_run, subset_estimate
    from bayeval.compression.subset import Subset

    frozen = Subset.load(subset)
    scores = read_subset_run(samples, frozen, model, metric, filter_name)
    result = subset_estimate(frozen, scores, level, str(group_mean or frozen.group_mean
                                                        or "size"))
    if frozen.subtasks:
        result["group_mean_from"] = (
            "--group-mean" if group_mean else "the group's aggregate_metric_list"
            if frozen.group_mean else
            "default (the subset records no aggregation of the group)")
    return result


def write_subset_results(result: dict[str, Any], subset: Path, path: Path | str,
                         model: str, metric: str | None = None,
                         filter_name: str | None = None) -> Path:
    """:func:`estimate_from_subset`'s estimate written in the harness's results layout
    (``path``: a file, or a folder for ``results_DATE.json``); the file written."""
    if result["estimate"] is None:
        raise BayevalError(f"--harness-results: no group score to write ({result['interval']})")
    from bayeval.compression.subset import Subset
    from bayeval.evaluators.harness_results import (
        TaskEstimate,
        harness_results,
        write_harness_results,
    )

    frozen = Subset.load(subset)
    subtasks = tuple(TaskEstimate(r["task"], r["estimate"], r["lower"], r["upper"],
                                  r["items"], r["n_items"], result["level"])
                     for r in result.get("subtasks", []) if r["estimate"] is not None)
    estimate = TaskEstimate(frozen.task or frozen.benchmark, result["estimate"],
                            result["lower"], result["upper"], result["items"],
                            result["n_items"], result["level"], subtasks)
    info = {"method": f"subset ({result['method']})", "interval": result["interval"]}
    return write_harness_results(harness_results(estimate, metric or frozen.metric,
                                                 filter_name, model, info), path)
