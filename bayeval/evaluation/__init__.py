"""A live evaluation as one Python call: :func:`evaluate` runs what ``bayeval evaluate``
runs (one task or a suite of several, a harness group's subtasks, one target or several
jointly, with any evaluator) and returns its result; :func:`resume` continues any run
from its journal. Their settings are frozen values (:class:`RunSettings`,
:class:`TaskSettings`, :class:`EvaluatorOptions`) that a run file holds
(:mod:`bayeval.evaluation.run_file`)::

    import bayeval
    result = bayeval.evaluate(dataset="ifeval", epsilon=0.05)
    print(result.estimate, result.lower, result.upper, result.items_used)
    result.summary(); result.to_pandas(); result.plot()

The layers under it: :mod:`~bayeval.evaluation.sources` (where the reference comes
from), :mod:`~bayeval.evaluation.evaluator_settings` (the evaluator a journal keeps),
:mod:`~bayeval.evaluation.single` (one task's run), :mod:`~bayeval.evaluation.suite_run`
(a suite's), :mod:`~bayeval.evaluation.results` (the result in other tools' formats);
:mod:`~bayeval.evaluation.select` is ``bayeval select``'s live run of the best-model
search the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bayeval.errors import BayevalError
from bayeval.evaluation.options import SUITE_FILE
from bayeval.evaluation.result_types import Result, SuiteResult, TargetsResult, TaskResult
from bayeval.evaluation.settings import EvaluatorOptions, RunSettings, TaskSettings
from bayeval.evaluation.watch import Watch

__all__ = ["EvaluatorOptions", "Result", "RunSettings", "SuiteResult", "TargetsResult",
           "TaskResult", "TaskSettings", "Watch", "evaluate", "resume"]


def _python_parts(evaluator: Any, model: Any, method: Any, task_args: dict | None
                  ) -> tuple[Any, Any, Any, Any, Any]:
    """(evaluator setting, model name, method spec, the Python evaluator or None, the
    composed Method or None) of evaluate()'s keywords: Python objects are taken out of
    the settings, which a run file and a journal hold."""
    from bayeval.evaluation.single import PythonEvaluator

    given = None
    inspect_model = None
    if model is not None and not isinstance(model, str):
        from bayeval.evaluators.python import is_harness_lm, is_inspect_model

        if is_harness_lm(model):  # the harness's habit: the LM object is the model
            if evaluator is not None and not isinstance(evaluator, str):
                raise BayevalError("give the harness LM as model= or as evaluator=, not "
                                   "both")
            evaluator, model = model, _lm_name(model)
        elif is_inspect_model(model):  # Inspect's: a Model object
            inspect_model, model = model, str(model)
        elif not isinstance(model, list | tuple):
            raise BayevalError(f"model: give a name, a harness LM or an Inspect Model, got "
                               f"a {type(model).__name__}")
    if evaluator is not None and not isinstance(evaluator, str | EvaluatorOptions):
        given = PythonEvaluator.of(evaluator, task_args, inspect_model)
        evaluator = given.kind
    elif task_args is not None or inspect_model is not None:
        raise BayevalError("task_args and an Inspect Model object go with an Inspect task "
                           "as evaluator=")
    composed = None
    if method is not None and not isinstance(method, str):
        from bayeval.methods import Method

        if not isinstance(method, Method):
            raise BayevalError(f"method: give a spec such as 'active-pai(epsilon=0.05)' or "
                               f"a bayeval.methods.Method, got a {type(method).__name__}")
        composed, method = method, None
    return evaluator, model, method, given, composed


def _lm_name(lm: Any) -> str:
    """A harness LM's model name: its Hugging Face name or path where it has one."""
    for path in (("pretrained",), ("config", "_name_or_path"), ("model", "name_or_path")):
        value: Any = lm
        for part in path:
            value = getattr(value, part, None)
        if isinstance(value, str) and value:
            return value
    return type(lm).__name__


def evaluate(
    settings: RunSettings | None = None, /, *,
    # what the reference is: one task (or a suite of tasks)
    dataset: str | None = None,
    reference: str | Path | None = None,
    tasks: str | Sequence[str] | Sequence[TaskSettings] | None = None,
    metric: str | None = None,
    filter: str | None = None,
    repeated_models: str | None = None,
    suite: str | Path | None = None,
    subtasks: bool | None = None,
    group_mean: str | None = None,
    # who is evaluated, and how
    model: str | Any | None = None,
    models: str | Sequence[str] | None = None,
    evaluator: str | EvaluatorOptions | Callable[..., Any] | Any | None = None,
    task_args: dict[str, Any] | None = None,
    command: str | None = None,
    timeout: float | None = None,
    retries: int | None = None,
    lm_eval_args: str | None = None,
    lm_eval_mode: str | None = None,
    inspect_task: str | None = None,
    output_path: str | Path | None = None,
    batch: int | None = None,
    concurrency: int | None = None,
    calls: str | None = None,
    # the estimate and its stop
    method: str | Any | None = None,
    epsilon: float | None = None,
    task_epsilon: float | None = None,
    limit: int | None = None,
    seed: int | None = None,
    journal: str | Path | None = None,
    name: str | None = None,
    # the plan before it, and when the rest runs whole
    plan: bool | None = None,
    rest_whole: str | None = None,
    # how it is followed
    progress: bool | None = None,
    watch: Watch | None = None,
    **earlier_names: Any,
) -> Result:
    """Estimate a model's benchmark score from as few items as needed (the design-valid
    ``active-pai`` by default: docs/methods.md §9), live or simulated; what ``bayeval
    evaluate`` runs, with the same names (docs/python.md).

    ``settings``: a :class:`RunSettings` (or one read by ``RunSettings.from_file``); every
    keyword given beside it overrides its value (``evaluate(settings, journal="new.jsonl")``).
    Without it the keywords make the run; a keyword left at None takes its default:

    * ``dataset`` (default ``ifeval``, a bundled matrix) or ``reference`` (a score matrix
      file, ``lm-eval:DIR`` or ``inspect:DIR``), with ``tasks`` (a harness or Inspect task
      name; several names read from one ``reference`` make a suite), ``metric``,
      ``filter``, ``repeated_models``; ``suite`` (a suite file); ``subtasks`` and
      ``group_mean`` for a harness group.
    * ``model``: the evaluated model's name (default: with the oracle, a model of the
      matrix drawn with the seed), or a harness ``LM`` object, or an Inspect ``Model``;
      ``models``: several, jointly.
    * ``evaluator``: ``"oracle"`` (default: the model's known row), ``"command"`` (with
      ``command``, ``timeout`` 600 s, ``retries`` 1), ``"lm-eval"`` (``lm_eval_args``,
      ``lm_eval_mode`` in-process), ``"inspect"`` (``inspect_task``), an
      :class:`EvaluatorOptions`, or a Python object: a function ``item -> score``, a batch
      function (:func:`bayeval.batched`), an ``async`` function (``concurrency`` K in
      flight on one event loop), a harness ``LM`` object, an Inspect ``Task`` or task
      function (with ``task_args``). ``output_path`` keeps the harness's or Inspect's
      output; ``batch`` items per call (default 32 with the harness, 8 with Inspect, else
      1) or ``concurrency`` evaluations in flight (default 1); ``calls`` how a run of one
      task in batches sizes its calls: ``taper`` (default: the last calls cut to the
      items predicted left), ``grow`` (8 items first, doubling, and the taper),
      ``fine`` (as grow, asking half the items predicted left, down to 2) or ``fixed``
      (:mod:`bayeval.loop.call_sizes`).
    * ``method``: a spec (default ``active-pai``; ``active-pai-joint`` with ``models``) or
      a composed :class:`~bayeval.methods.Method`; ``epsilon`` the interval's width at the
      stop (default: the method's, 0.05 for active-pai), ``task_epsilon`` each suite
      task's, ``limit`` a budget of items, ``seed`` (default 0), ``journal`` (a file, a
      folder for a suite; default: none for the oracle, ``bayeval-MODEL-DATE.jsonl`` for a
      live evaluator), ``name`` (a suite's).
    * ``plan``: predict the documents the run will need before it starts and print that
      line first (default: on with a live evaluator; :func:`bayeval.plan` alone);
      ``rest_whole``: ``auto`` (default) runs the rest of the task in one call where the
      plan says that is cheaper, ``never`` draws batches to the stop
      (:mod:`bayeval.evaluation.plan`).
    * ``progress``: None (default) shows a bar on a terminal or in a notebook and plain
      lines in a log; False nothing, the harness's own bars included. ``watch``: a watch
      of your own (:mod:`bayeval.evaluation.watch`) instead.

    Earlier names are still read: ``target`` (``model``), ``targets`` (``models``),
    ``max_items`` (``limit``), ``task`` (``tasks``).

    bayeval computes in float64: the run turns on JAX's 64-bit mode for the process
    (``jax_enable_x64``, :func:`bayeval.enable_float64`; when its session starts, after
    the settings and the reference are checked) if it is off, and leaves it on.

    Returns a :class:`TaskResult`, :class:`SuiteResult` or :class:`TargetsResult` (their
    ``to_dict()`` is what ``--json`` prints). Raises a one-line
    :class:`~bayeval.errors.BayevalError` for a bad setting (before any journal is
    written) and :class:`~bayeval.errors.EvaluationError` when the evaluator fails.
    """
    from bayeval.evaluation.progress import progress_watch, silenced_bars

    evaluator, model, method, given, composed = _python_parts(evaluator, model, method,
                                                              task_args)
    options = {"dataset": dataset, "reference": reference, "tasks": tasks, "metric": metric,
               "filter": filter, "repeated_models": repeated_models, "subtasks": subtasks,
               "group_mean": group_mean, "model": model, "models": models,
               "evaluator": evaluator, "command": command, "timeout": timeout,
               "retries": retries, "lm_eval_args": lm_eval_args,
               "lm_eval_mode": lm_eval_mode, "inspect_task": inspect_task,
               "output_path": None if output_path is None else str(output_path),
               "batch": batch, "concurrency": concurrency, "calls": calls,
               "method": method,
               "epsilon": epsilon, "task_epsilon": task_epsilon, "limit": limit,
               "seed": seed, "journal": journal, "name": name, "plan": plan,
               "rest_whole": rest_whole}
    options = {k: v for k, v in options.items() if v is not None}
    unknown = sorted(set(earlier_names) - {"target", "targets", "max_items", "task"})
    if unknown:
        RunSettings.of(**{unknown[0]: None})  # the one-line error, with a suggestion
    options.update(earlier_names)
    if settings is None:
        settings = RunSettings.of(**options, **({} if suite is None else {"suite": suite}))
    elif not isinstance(settings, RunSettings):
        raise BayevalError(f"settings: give RunSettings (or keywords), got a "
                           f"{type(settings).__name__}")
    else:
        if suite is not None:
            raise BayevalError("suite: these settings already hold the run's tasks")
        settings = settings.override(**options)
    shown = watch if watch is not None else progress_watch(progress)
    with silenced_bars(progress is False):
        if settings.suite:
            from bayeval.evaluation.suite_run import run_suite

            return run_suite(settings, shown, given, composed)
        from bayeval.evaluation.single import run_single

        return run_single(settings, shown, given, composed,
                          None if progress is False else _say)


def _say(line: str) -> None:
    """A line of the run's own (its plan) on stderr, where progress goes."""
    import sys

    print(line, file=sys.stderr, flush=True)


def resume(journal: str | Path, *, limit: int | None = None, batch: int | None = None,
           concurrency: int = 1, evaluator: Callable[..., Any] | Any | None = None,
           task_args: dict[str, Any] | None = None, model: Any = None,
           command: str | None = None, lm_eval_args: str | None = None,
           method: Any = None, progress: bool | None = None, watch: Watch | None = None,
           max_items: int | None = None) -> Result:
    """Continue the run ``journal`` records (a journal file, or a suite's folder) with
    nothing lost and nothing counted twice; its settings are read from it. What may
    change: the budget (``limit``; earlier name ``max_items``), the batch size, the
    concurrency, and the evaluator, corrected (the caller vouches it is the same model;
    the journal keeps what changed and when): a ``command``, the harness options
    ``lm_eval_args``, or a Python ``evaluator`` given again (a function, a harness LM or
    an Inspect task with ``task_args`` and an Inspect ``model`` object), which a journal
    cannot hold. ``method``: a composed :class:`~bayeval.methods.Method` given again.
    Turns on JAX's 64-bit mode, as :func:`evaluate` does."""
    from bayeval.evaluation.progress import progress_watch, silenced_bars
    from bayeval.evaluation.settings import check_number, check_text, new_names
    from bayeval.evaluation.single import PythonEvaluator

    given_limit = {k: v for k, v in (("limit", limit), ("max_items", max_items))
                   if v is not None}
    limit = new_names(given_limit).get("limit")
    for name, value in (("limit", limit), ("batch", batch), ("concurrency", concurrency)):
        check_number(value, name, integer=True)  # the settings' checks, as a run's
    check_text(command, "command")
    check_text(lm_eval_args, "lm_eval_args")
    given = None
    if evaluator is not None or model is not None:
        if evaluator is None:
            evaluator, model = model, None  # a harness LM given as the model
        given = PythonEvaluator.of(evaluator, task_args, model)
    shown = watch if watch is not None else progress_watch(progress)
    journal = Path(journal)
    with silenced_bars(progress is False):
        if (journal / SUITE_FILE).is_file():
            from bayeval.evaluation.suite_run import resume_suite

            return resume_suite(journal, limit, batch, shown, concurrency, given, command,
                                lm_eval_args)
        from bayeval.evaluation.single import resume_single

        return resume_single(journal, limit, batch, concurrency, lm_eval_args, shown,
                             given, command, method)
