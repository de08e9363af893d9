"""A model's benchmark score, with an interval, from its run on a frozen subset.

The subset file (:class:`~bayeval.compression.subset.Subset`) says which items were run
and how they combine; the run's scores come from lm-evaluation-harness ``--log_samples``
output (:func:`read_subset_run`) or from anywhere else as ``{item: score}``.

* **Uniform subsets** (``random``; ``mince`` freezes a uniform random subset of the size it
  chose; ``bestrand`` keeps the best of random candidates): the estimate is the mean of the
  subset's scores and the interval is the Wilson score interval with finite-population
  correction (:func:`~bayeval.estimators.interval.wilson_fpc_bounds`; the Wald–FPC interval
  for non-binary scores), the design-based interval of a simple random sample of n of N
  items. For ``bestrand`` the choice among candidates makes the design not quite uniform:
  the interval is then approximate, and said so.
* **Weighted subsets** (``stratified``, ``kmeans``): the estimate is Σ wᵢ sᵢ. No design
  gives an interval for k-means anchors, so the interval is empirical: ± the 95th percentile
  of |subset estimate − full score| over the models held out when the subset was built
  (``drift.held_out_q95``), given only when at least 20 models were held out.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bayeval.compression.subset import Subset
from bayeval.data.lm_eval import find_sample_files, harness_docs, read_sample_log
from bayeval.errors import DataError
from bayeval.estimators.interval import wilson_fpc_bounds, z_value

MIN_HELD_OUT = 20  # models held out below which no 95% empirical interval is given
UNIFORM = ("random", "mince")


def read_subset_run(output: str | os.PathLike, subset: Subset, model: str | None = None,
                    metric: str | None = None, filter_name: str | None = None
                    ) -> dict[str, float]:
    """``{item: score}`` of the subset's items from one model's harness run under
    ``output`` (``--output_path``; ``model``: its folder when several models are there).
    Every item of the subset must have been evaluated."""
    root = Path(output)
    if not root.is_dir():
        raise DataError(f"{root}: no such folder (the harness's --output_path)")
    name = subset.task
    if not name:
        raise DataError(f"subset of {subset.benchmark}: no lm-evaluation-harness task name "
                        "to read the run by")
    # a single task's documents are the benchmark's items: an id beyond them is refused
    docs = harness_docs(subset.items, name, subset.subtask_counts or [(name, subset.n_items)])
    metric = metric or subset.metric
    logs: dict[str, dict[int, float]] = {}
    for key in dict.fromkeys(k for k, _ in docs):
        files = find_sample_files(root, key)
        if model is not None:
            files = [f for f in files if f.parent.name == model.replace("/", "__")]
        if not files:
            raise DataError(f"{root}: no samples_{key}_<timestamp>.jsonl"
                            + (f" for model {model!r}" if model else "")
                            + " (was the harness run with --log_samples?)")
        if len(files) > 1:
            raise DataError(f"{root}: runs of {len(files)} models ("
                            f"{', '.join(f.parent.name for f in files[:3])}); choose one "
                            "with --model")
        log = read_sample_log(files[0], metric, filter_name)
        metric = metric or log.metric
        logs[key] = log.scores
    scores, missing = {}, []
    for item, (key, index) in zip(subset.items, docs, strict=True):
        value = logs[key].get(index)
        if value is None or math.isnan(value):
            missing.append((key, index))
        else:
            scores[item] = value
    if missing:
        key, index = missing[0]
        raise DataError(f"{root}: the run has no score for {len(missing)} of the subset's "
                        f"{subset.size} items, e.g. doc {index} of {key} (run the harness "
                        "with the subset's --samples file)")
    return scores


def _uniform(values: np.ndarray, big_n: int, z: float) -> tuple[float, float, float, float,
                                                                  bool]:
    """(mean, lower, upper, variance, binary) of a simple random sample of ``values.size``
    of ``big_n`` items: Wilson–FPC bounds for binary scores, Wald–FPC otherwise; the
    variance is the mean's design variance (1 − n/N) s² / n (s² = p(1 − p) n/(n − 1) for
    binary scores), the one a sum of independent samples' means adds up."""
    n = values.size
    mean = float(values.mean())
    binary = bool(np.all((values == 0) | (values == 1)))
    fpc = max(big_n - n, 0) / big_n
    s2 = float(values.var(ddof=1)) if n > 1 else 0.25
    variance = fpc * s2 / n
    if binary:
        lower, upper = (float(b) for b in wilson_fpc_bounds(mean, float(n), big_n, z))
    else:
        half = z * math.sqrt(variance)
        lower, upper = mean - half, mean + half
    return mean, max(lower, 0.0), min(upper, 1.0), variance, binary


def subtask_estimates(subset: Subset, values: np.ndarray, z: float,
                      group_mean: str = "size") -> tuple[list[dict[str, Any]],
                                                         dict[str, Any] | None]:
    """Each subtask's estimate of a uniform subset of a harness group, and the group's
    when it is the unweighted mean of its subtasks (``group_mean="equal"``; None for
    ``"size"``, whose group score is the mean over all documents, the subset's own mean).

    Given how many of the subset's items fall in subtask g (n_g of its N_g), a uniform
    subset is a uniform sample of n_g of subtask g's documents, independently across
    subtasks: each subtask's interval is the uniform one (:func:`_uniform`), and the equal
    mean (1/G) Σ_g θ̂_g has variance (1/G²) Σ_g Var θ̂_g (Wald interval). A subtask with no
    item in the subset has no estimate, and then neither has the equal mean."""
    counts = subset.subtask_counts
    keys = np.array([k for k, _ in harness_docs(subset.items, subset.task or "", counts)])
    rows: list[dict[str, Any]] = []
    variances: list[float] = []
    for name, size in counts:
        part = values[keys == name]
        row = {"task": name, "items": int(part.size), "n_items": size, "estimate": None,
               "lower": None, "upper": None}
        if part.size:
            row["estimate"], row["lower"], row["upper"], variance, _ = _uniform(part, size, z)
            variances.append(variance)
        rows.append(row)
    if group_mean == "size":
        return rows, None
    if len(variances) < len(rows):
        return rows, {"estimate": None, "lower": None, "upper": None,
                      "interval": "none: a subtask has no item in the subset"}
    g = len(rows)
    mean = sum(r["estimate"] for r in rows) / g
    half = z * math.sqrt(sum(variances)) / g
    return rows, {"estimate": mean, "lower": max(mean - half, 0.0),
                  "upper": min(mean + half, 1.0),
                  "interval": "design-based (the unweighted mean of the subtasks' "
                              "estimates, Wald–FPC given each subtask's count)"}


GROUP_MEANS = ("size", "equal")


def subset_estimate(subset: Subset, scores: Mapping[str, float], level: float = 0.95,
                    group_mean: str = "size") -> dict[str, Any]:
    """The estimate and interval (module docstring) from the subset's item scores; for a
    uniform subset of a harness group also each subtask's (``subtasks``), and the group
    score as the harness aggregates it: ``group_mean="size"`` the mean over all its
    documents (``weight_by_size: true``), ``"equal"`` the unweighted mean of its
    subtasks (:func:`subtask_estimates`)."""
    if group_mean not in GROUP_MEANS:
        raise DataError(f"group mean must be one of {', '.join(GROUP_MEANS)}, got "
                        f"{group_mean!r}")
    missing = [i for i in subset.items if i not in scores]
    if missing:
        raise DataError(f"no score for {len(missing)} of the subset's items, e.g. "
                        f"{missing[0]!r}")
    values = np.array([float(scores[i]) for i in subset.items])
    n, big_n = values.size, subset.n_items
    z = z_value(level)
    out: dict[str, Any] = {"benchmark": subset.benchmark, "method": subset.method,
                           "items": n, "n_items": big_n, "level": level}
    if subset.weights is None:
        mean, lower, upper, _, binary = _uniform(values, big_n, z)
        kind = ("design-based (Wilson–FPC)" if binary else "design-based (Wald–FPC)")
        if subset.method not in UNIFORM:
            kind += ("; approximate: the subset was chosen among random candidates, not "
                     "drawn uniformly")
        result = {**out, "estimate": mean, "lower": lower, "upper": upper, "interval": kind}
        if subset.subtask_counts:
            rows, equal = subtask_estimates(subset, values, z, group_mean)
            result["subtasks"] = rows
            result["group_mean"] = group_mean
            if equal is not None:
                result.update(equal)
        return result
    if subset.subtask_counts and group_mean != "size":
        raise DataError(f"a weighted ({subset.method}) subset estimates the mean over all "
                        "documents only: --group-mean equal needs a uniform subset")
    weights = np.asarray(subset.weights)
    estimate = float(values @ weights)
    held = int(subset.drift.get("held_out_models", 0) or 0)
    q95 = subset.drift.get("held_out_q95")
    if level != 0.95 or q95 is None or held < MIN_HELD_OUT:
        why = ("the subset file records no held-out 95th percentile" if q95 is None else
               f"only {held} models were held out (at least {MIN_HELD_OUT} are needed)"
               if held < MIN_HELD_OUT else "the empirical interval is at 95% only")
        return {**out, "estimate": estimate, "lower": None, "upper": None,
                "interval": f"none: weighted ({subset.method}) subset and {why}"}
    return {**out, "estimate": estimate, "lower": max(estimate - q95, 0.0),
            "upper": min(estimate + q95, 1.0),
            "interval": f"empirical: ± the 95th percentile of the error on {held} held-out "
                        "models (a weighted subset has no design-based interval)"}


__all__ = ["GROUP_MEANS", "read_subset_run", "subset_estimate", "subtask_estimates"]
