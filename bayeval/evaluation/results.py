"""What a run's result says beyond its estimate, and the result written in other tools'
formats: the causes of failed evaluations, what the estimate assumes about skipped items,
and the estimate as lm-evaluation-harness results (:mod:`bayeval.evaluators.harness_results`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["failure_summary", "result_estimate", "skipped_note", "write_estimate_results"]


def failure_summary(skipped: list[tuple[str, ...]], top: int = 3) -> list[dict[str, Any]]:
    """The most frequent reasons evaluations failed (the last field of each skip), with
    the item ids taken out so that one cause counts once, and how often each came."""
    import re
    from collections import Counter

    causes = Counter(re.sub(r"item '[^']*': ", "", record[-1]) for record in skipped)
    return [{"reason": reason, "count": count} for reason, count in causes.most_common(top)]


def skipped_note(estimator: str, skipped: int) -> str | None:
    """What the estimate assumes about the items skipped after failures (None: none)."""
    if not skipped:
        return None
    if estimator == "sample_mean":
        return (f"the estimate is the mean of the scored items: it assumes the {skipped} "
                "skipped ones score like them")
    return (f"the estimate is over all items: the {skipped} skipped ones are predicted by "
            "the model, not scored")


def result_estimate(result: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """One target's estimate in an evaluation's ``result`` as a
    :class:`~bayeval.evaluators.harness_results.TaskEstimate` — a suite's (or a group's by subtask)
    with its ``tasks`` as its subtasks — and what says how it was made (the method, its
    parameters, the seed, the stop, the journal, the reference), for the files written in
    other tools' formats."""
    from bayeval.evaluators.harness_results import TaskEstimate

    level = result["level"]
    tasks = tuple(TaskEstimate(t.get("harness_task") or t["task"], t["estimate"],
                               t["lower"], t["upper"], t["items_used"], t["n_items"], level,
                               metric=t.get("metric"), filter_name=t.get("filter"))
                  for t in result.get("tasks", ()))
    estimate = TaskEstimate(result["suite"] if tasks else result["task"],
                            result["estimate"], result["lower"], result["upper"],
                            result["items_used"], result["n_items"], level, tasks)
    info = {k: result[k] for k in ("method", "params", "seed", "stopped", "journal",
                                   "reference") if result.get(k) is not None}
    return estimate, {**info, "suite": True} if tasks else info


def write_estimate_results(result: dict[str, Any], path: Path | str) -> None:
    """One target's estimate (``result``: an evaluation's result; a suite's tasks under
    ``results`` and the suite under ``groups``) written in the harness's results layout
    to ``path`` (:mod:`bayeval.evaluators.harness_results`; a file that cannot be written is a
    one-line error)."""
    from bayeval.evaluators.harness_results import harness_results, write_harness_results

    estimate, info = result_estimate(result)
    model = result["target"] if "target" in result else result["tasks"][0]["target"]
    write_harness_results(harness_results(estimate, result.get("metric"),
                                          result.get("filter"), model, info), path)
