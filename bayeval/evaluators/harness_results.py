"""An estimate written in lm-evaluation-harness's results layout.

The harness writes ``results_<date>.json`` per run (its ``lm_eval.result_schema.
EvalResults``): per task a ``"metric,filter"`` value and its ``"metric_stderr,filter"``,
``n-samples`` (documents in the split and documents evaluated), ``versions``,
``higher_is_better``, ``group_subtasks`` and, for a group, a ``groups`` entry. Tools
that read those files (the harness's own ``make_table``, leaderboards, trackers) can read
bayeval's estimate the same way. Per task bayeval writes

* ``"METRIC,FILTER"``: the estimate of the full-benchmark score;
* ``"METRIC_stderr,FILTER"``: the interval's half-width divided by its z (the standard
  error the interval stands for; the harness's own is a bootstrap or closed-form SE);
* ``"METRIC_lower,FILTER"`` and ``"METRIC_upper,FILTER"``: the interval at its level;
* ``"alias"``: the task name with ``(bayeval estimate)``, so every table that shows the
  row says it is an estimate; ``sample_len`` and ``n-samples`` ``effective``: the
  documents evaluated, ``original``: all of them;

and a top-level ``"bayeval"`` record: ``estimate: true``, the method, the interval's
level and kind, the seed, the journal, why it stopped.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bayeval.estimators.interval import z_value

__all__ = ["TaskEstimate", "harness_results", "write_harness_results"]

MARKER = "(bayeval estimate)"


@dataclass(frozen=True)
class TaskEstimate:
    """One task's (or group's) estimate: ``value`` in [``lower``, ``upper``] at ``level``
    from ``evaluated`` of ``n_items`` documents (``None`` bounds: no interval)."""

    task: str
    value: float
    lower: float | None
    upper: float | None
    evaluated: int
    n_items: int
    level: float = 0.95
    subtasks: Sequence[TaskEstimate] = field(default_factory=tuple)
    # a subtask's own metric and filter where it differs from the group's (a suite of
    # tasks with different metrics); None: the record's
    metric: str | None = None
    filter_name: str | None = None

    @property
    def stderr(self) -> float | None:
        """The standard error the interval stands for: its half-width over z (None
        without an interval)."""
        if self.lower is None or self.upper is None:
            return None
        return (float(self.upper) - float(self.lower)) / 2 / z_value(self.level)

    def metrics(self, metric: str, filter_name: str) -> dict[str, Any]:
        """The task's entry of ``results`` (or ``groups``)."""
        key = f",{filter_name}"
        entry: dict[str, Any] = {"alias": f"{self.task} {MARKER}", "name": self.task,
                                 "sample_len": int(self.evaluated),
                                 metric + key: float(self.value)}
        if self.stderr is not None:
            entry[f"{metric}_stderr{key}"] = self.stderr
            entry[f"{metric}_lower{key}"] = float(self.lower)
            entry[f"{metric}_upper{key}"] = float(self.upper)
        else:
            entry[f"{metric}_stderr{key}"] = "N/A"  # as the harness writes a missing SE
        return entry


def harness_results(estimate: TaskEstimate, metric: str | None, filter_name: str | None,
                    model: str, info: Mapping[str, Any]) -> dict[str, Any]:
    """The results record (module docstring) of ``estimate`` — a task, or a group with
    its ``subtasks`` — of ``model``; ``metric``: the per-document metric the scores are
    (``score`` when unknown), ``filter_name``: its filter (``none``); ``info``: the
    ``bayeval`` record's fields (method, interval, seed, journal, stopped…)."""
    metric = metric or "score"
    filter_name = filter_name or "none"
    leaves = list(estimate.subtasks) or [estimate]
    results = {t.task: t.metrics(t.metric or metric, t.filter_name or filter_name)
               for t in leaves}
    record: dict[str, Any] = {"results": results}
    if estimate.subtasks:
        record["groups"] = {estimate.task: estimate.metrics(metric, filter_name)}
        record["group_subtasks"] = {estimate.task: [t.task for t in leaves],
                                    **{t.task: [] for t in leaves}}
    else:
        record["group_subtasks"] = {estimate.task: []}
    every = [*leaves, *([estimate] if estimate.subtasks else [])]
    record.update({
        "configs": {},
        "versions": {t.task: None for t in every},
        "higher_is_better": {t.task: {t.metric or metric: True} for t in every},
        "n-samples": {t.task: {"original": int(t.n_items), "effective": int(t.evaluated)}
                      for t in leaves},
        "config": {"model": "bayeval", "model_args": None, "limit": None},
        "model_name": model,
        "model_name_sanitized": model.replace("/", "__"),
        "date": time.time(),
        "bayeval": {"estimate": True, "level": estimate.level, **dict(info)},
    })
    return record


def write_harness_results(record: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write ``record`` as the harness writes its results (indented JSON): to ``path``,
    or, when ``path`` is a folder (or ends with a slash: a folder made for it), to
    ``path/results_<date>.json``. A failure is a one-line error naming the file."""
    from bayeval.errors import BayevalError
    from bayeval.records.files import write_file

    target = Path(path)
    try:
        if str(path).endswith(("/", os.sep)):
            target.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            stamp = time.strftime("%Y-%m-%dT%H-%M-%S")
            target = target / f"results_{stamp}.json"
        if target.exists() and not target.is_file():  # a FIFO would block, a device fail
            raise OSError(0, "not a regular file (a FIFO, a device)")
        return write_file(target, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise BayevalError(f"--harness-results {target}: cannot be written "
                           f"({exc.strerror or exc})") from None
