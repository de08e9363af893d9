"""A live evaluation as one Python call: :func:`evaluate` runs what ``bayeval evaluate``
runs (one task or a suite of several, a harness group's subtasks, one target or several
jointly, with any evaluator) and returns its result; :func:`resume` continues any run
from its journal. Their settings are frozen values (:class:`RunSettings`,
:class:`TaskSettings`, :class:`EvaluatorOptions`) that a run file holds
(:mod:`bayeval.evaluation.run_file`)::

    import bayeval
    bayeval.enable_float64()
    result = bayeval.evaluate(dataset="ifeval", epsilon=0.05)
    print(result["estimate"], result["lower"], result["upper"], result["items_used"])

The layers under it: :mod:`~bayeval.evaluation.sources` (where the reference comes
from), :mod:`~bayeval.evaluation.evaluator_settings` (the evaluator a journal keeps),
:mod:`~bayeval.evaluation.single` (one task's run), :mod:`~bayeval.evaluation.suite_run`
(a suite's), :mod:`~bayeval.evaluation.results` (the result in other tools' formats);
:mod:`~bayeval.evaluation.select` is ``bayeval select``'s live run of the best-model
search the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bayeval.errors import BayevalError
from bayeval.evaluation.options import SUITE_FILE
from bayeval.evaluation.settings import EvaluatorOptions, RunSettings, TaskSettings
from bayeval.evaluation.watch import Watch

__all__ = ["EvaluatorOptions", "RunSettings", "TaskSettings", "Watch", "evaluate", "resume"]


def evaluate(settings: RunSettings | None = None, /, *, watch: Watch | None = None,
             **options: Any) -> dict[str, Any]:
    """Estimate a model's benchmark score from as few items as needed (the design-valid
    ``active-pai`` by default: docs/methods.md §9), live or simulated.

    ``settings``: the run (:class:`RunSettings`); or keywords that make one
    (:meth:`RunSettings.of`: ``dataset``/``reference``/``task``… of the one task,
    ``target``, ``method``, ``epsilon``, ``max_items``, ``seed``, ``journal``,
    ``evaluator`` (a kind or :class:`EvaluatorOptions`), ``command``…). ``watch``: follows
    the loop (:mod:`bayeval.evaluation.watch`).

    Returns the result ``bayeval evaluate --json`` prints: for one target its
    ``estimate``, ``lower``, ``upper``, ``level``, ``items_used``, ``documents_run``,
    ``times`` …; for several targets a row per target under ``targets``; for a suite a
    row per task under ``tasks`` and the weighted average. Raises a one-line
    :class:`~bayeval.errors.BayevalError` for a bad setting (before any journal is
    written) and :class:`~bayeval.errors.EvaluationError` when the evaluator fails.
    """
    if settings is None:
        settings = RunSettings.of(**options)
    elif options:
        raise BayevalError("give RunSettings or keywords, not both")
    if settings.suite:
        from bayeval.evaluation.suite_run import run_suite

        return run_suite(settings, watch)
    from bayeval.evaluation.single import run_single

    return run_single(settings, watch)


def resume(journal: str | Path, *, max_items: int | None = None, batch: int | None = None,
           concurrency: int = 1, lm_eval_args: str | None = None,
           watch: Watch | None = None) -> dict[str, Any]:
    """Continue the run ``journal`` records (a journal file, or a suite's folder) with
    nothing lost and nothing counted twice; its settings are read from it. What may
    change: the budget (``max_items``), the batch size, the concurrency, and the harness
    options of a run that failed before any score (``lm_eval_args``)."""
    journal = Path(journal)
    if (journal / SUITE_FILE).is_file():
        if lm_eval_args is not None:
            raise BayevalError("--lm-eval-args: a suite's harness options are kept in its "
                               "tasks' journals")
        from bayeval.evaluation.suite_run import resume_suite

        return resume_suite(journal, max_items, batch, watch, concurrency)
    from bayeval.evaluation.single import resume_single

    return resume_single(journal, max_items, batch, concurrency, lm_eval_args, watch)
