"""One task's live evaluation, of one target or several jointly: the session made from
the settings (or resumed from its journal), the evaluator built from them, the loop run,
and the result (:func:`bayeval.evaluate` for a run of one task)."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bayeval.errors import BayevalError, EvaluationError
from bayeval.evaluation.evaluator_settings import (
    EvaluatorSettings,
    command_evaluator,
    evaluator_kind,
    resume_from,
    row_score,
)
from bayeval.evaluation.options import (
    JOINT_METHODS,
    SUBPROCESS,
    TOOL_EVALUATORS,
    EvaluatorKind,
    LmEvalMode,
)
from bayeval.evaluation.result_types import make_result
from bayeval.evaluation.results import failure_summary, skipped_note
from bayeval.evaluation.settings import RunSettings
from bayeval.evaluation.sources import fresh_source, resumable, run_targets
from bayeval.evaluation.watch import Watch, watched

__all__ = ["PythonEvaluator", "amend_evaluator", "refuse_concurrency", "resume_single",
           "run_single", "write_inspect_log"]


def run_single(settings: RunSettings, watch: Watch | None = None,
               given: PythonEvaluator | None = None, method: Any = None,
               say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """A fresh run of ``settings`` (one task), its result as ``evaluate --json`` prints
    it. The options and the reference are checked, and a harness model or an Inspect
    task loaded, before any journal is written. ``given``: a Python evaluator
    (:class:`PythonEvaluator`) instead of the one the settings name; ``method``: a
    composed :class:`~bayeval.methods.Method` value instead of the settings' spec.
    With a plan (:mod:`bayeval.evaluation.plan`) its line goes to ``say`` first, and
    each call's size follows its rule."""
    from bayeval.evaluation.plan import (
        CallSizes,
        call_rule_of,
        plan_of,
        plan_wanted,
        sizes_without_plan,
    )

    session, journaled, matrix, evaluate_fn = _fresh(settings, given, method)
    if (plan_wanted(settings.plan, journaled.evaluator) and not session.several
            and journaled.concurrency == 1):
        rule = call_rule_of(session, journaled.calls, journaled.batch)
        made = plan_of(session, journaled.batch, task=_task_name(journaled, matrix,
                                                                   session), call_rule=rule)
        if say is not None:
            say(made.line())
        batch = CallSizes(made, journaled.batch, settings.rest_whole, say, rule)
    else:
        batch = sizes_without_plan(session, journaled.calls, journaled.batch,
                                   journaled.concurrency)
    return _run(session, journaled, matrix, evaluate_fn, watch, batch)


def _task_name(journaled: EvaluatorSettings, matrix, session) -> str:
    """The task's name: the harness's, else the reference file's stem (not its path)."""
    from bayeval.data.lm_eval import harness_task

    return (journaled.task or harness_task(matrix) or Path(session.reference.name).stem)


@dataclass(frozen=True)
class PythonEvaluator:
    """A Python object that scores a run's items (:mod:`bayeval.evaluators.python`):
    ``obj`` (a function, a batch or async function, a harness LM, an Inspect task or
    task function), its ``kind``, and for an Inspect task its ``task_args`` and the
    ``model`` object (an Inspect ``Model``) when one was given."""

    obj: Any
    kind: str
    task_args: dict[str, Any] | None = None
    model: Any = None

    @classmethod
    def of(cls, obj: Any, task_args: dict[str, Any] | None = None,
           model: Any = None) -> PythonEvaluator:
        from bayeval.evaluators.python import evaluator_kind_of

        try:
            kind = evaluator_kind_of(obj)
        except EvaluationError as exc:
            raise BayevalError(str(exc)) from None
        if task_args is not None and kind != EvaluatorKind.inspect.value:
            raise BayevalError("task_args are an Inspect task's arguments: the evaluator "
                               "is not an Inspect task")
        return cls(obj, kind, task_args, model)

    @property
    def description(self) -> str:
        from bayeval.evaluators.python import describe

        return describe(self.obj)

    def build(self, journaled: EvaluatorSettings, target: str) -> Any:
        """The evaluator of one target, as the journaled settings say it runs."""
        from bayeval.evaluators.python import python_evaluator

        try:
            if self.kind == EvaluatorKind.lm_eval.value:  # the in-process route, on it
                args = journaled.lm_eval_args or ""
                if "--model" not in shlex.split(args):  # the object is the model: the
                    args = f"--model hf {args}"  # name only lets the harness parse the rest
                return journaled.replace(
                    python=None, lm_eval_args=args, lm_eval_mode=LmEvalMode.in_process.value
                ).evaluator_for(None, [target], lm=self.obj)
            if self.kind == EvaluatorKind.inspect.value:
                from inspect_ai import Task

                from bayeval.evaluators.inspect_eval import InspectEvaluator

                task = self.obj
                if not isinstance(task, Task):
                    try:
                        task = task(**(self.task_args or {}))
                    except Exception as exc:  # a task function raises anything
                        raise BayevalError(f"the Inspect task does not build with "
                                           f"{self.task_args or {}}: "
                                           f"{type(exc).__name__}: {exc}") from None
                return InspectEvaluator(task, self.model or target, journaled.output_path,
                                        journaled.metric)
        except EvaluationError as exc:  # a task or model that does not load
            raise BayevalError(str(exc)) from None
        return python_evaluator(self.obj, retries=journaled.retries)


def amend_evaluator(journal: Path, given: PythonEvaluator | None = None,
                    command: str | None = None, lm_eval_args: str | None = None) -> None:
    """A resume with a corrected evaluator (the user vouches that it is the same model):
    a new ``command``, new harness options, or the Python evaluator given again. The
    journal's header keeps the new settings, and what changed and when
    (:meth:`EvaluatorSettings.changed`); it is rewritten atomically, refused while another
    session runs the journal. The new evaluator is checked first (one-line errors)."""
    from bayeval.loop.session import Session

    if given is None and command is None and lm_eval_args is None:
        return
    header, _, _, _ = Session.read_journal(journal)
    settings = EvaluatorSettings.from_json(header.get("extra") or {}, f"journal {journal}")
    changes: dict[str, Any] = {}
    if command is not None:
        if settings.evaluator != EvaluatorKind.command.value:
            raise BayevalError(f"--command: {journal} is a run of --evaluator "
                               f"{settings.evaluator}, not command")
        command_evaluator(command, settings.timeout or 600.0, settings.retries)
        changes["command"] = command
    if lm_eval_args is not None:
        if settings.evaluator != EvaluatorKind.lm_eval.value:
            raise BayevalError(f"--lm-eval-args: {journal} is not a run of --evaluator "
                               "lm-eval")
        from bayeval.evaluators.harness import harness_config

        try:
            harness_config(lm_eval_args, settings.task)
        except EvaluationError as exc:
            raise BayevalError(str(exc)) from None
        changes["lm_eval_args"] = lm_eval_args
        if settings.python is not None and given is None and "--model" in shlex.split(
                lm_eval_args):  # options that name the model: the LM object is not needed
            changes["python"] = None
    if given is not None:
        if given.kind != settings.evaluator:
            raise BayevalError(f"evaluator: {journal} is a run of a {settings.evaluator} "
                               f"evaluator; the {given.description} is {given.kind}")
        changes["python"] = given.description
    _rewrite_extra(journal, header, settings.changed(**changes).to_json())


def _rewrite_extra(journal: Path, header: dict[str, Any], extra: dict[str, Any]) -> None:
    """The journal with its header's ``extra`` replaced (the rest kept byte for byte),
    written atomically, not while another session holds it."""
    import fcntl

    from bayeval.records.files import write_file
    from bayeval.records.journal_check import CHECK, seal_header

    header = {**header, "extra": {**(header.get("extra") or {}), **extra}}
    if CHECK in header:  # a journal with checks: its header's is renewed (its run kept)
        header = seal_header(header)
    with open(journal, "ab") as held:  # one writer: not while another session runs it
        try:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise BayevalError(f"journal {journal} is in use by another session") from None
        lines = journal.read_bytes().split(b"\n")
        write_file(journal, b"\n".join([json.dumps(header).encode(), *lines[1:]]),
                   durable=True)


def resume_single(journal: Path, max_items: int | None = None, batch: int | None = None,
                  concurrency: int = 1, lm_eval_args: str | None = None,
                  watch: Watch | None = None, given: PythonEvaluator | None = None,
                  command: str | None = None, method: Any = None) -> dict[str, Any]:
    """The run ``journal`` records, continued (its settings read from it): a new budget
    (``max_items``), batch size and concurrency may be given, and a corrected evaluator
    (``command``, harness options ``lm_eval_args``, or the Python evaluator ``given``
    again: :func:`amend_evaluator`)."""
    from bayeval.devices import prepare_jax
    from bayeval.loop.session import Session

    amend_evaluator(journal, given, command, lm_eval_args)
    prepare_jax()
    session, journaled, matrix = resume_from(Session, journal, method)
    mine = session.extra.get("suite")
    if isinstance(mine, dict):  # a suite's task: its budget and stop are the suite's
        session.close()
        raise BayevalError(f"journal {journal} is task {mine.get('task')!r} of a suite; "
                           f"resume the suite: bayeval evaluate --resume --journal "
                           f"{shlex.quote(str(Path(journal).parent))}")
    if max_items is not None:  # a new budget: not a setting of the estimate
        session.set_budget(max_items)
    if concurrency > 1:  # how many run at once is not a setting of the estimate
        try:
            refuse_concurrency(concurrency, journaled.evaluator, session.method,
                               session.several)
        except BayevalError:
            session.close()
            raise
        journaled = journaled.replace(concurrency=concurrency)
    evaluate_fn = None
    if given is not None:
        try:
            evaluate_fn = given.build(journaled, session.target_ids[0])
        except BaseException:
            session.close()
            raise
    from bayeval.evaluation.plan import sizes_without_plan

    return _run(session, journaled, matrix, evaluate_fn, watch, sizes_without_plan(
        session, journaled.calls, batch if batch is not None else journaled.batch,
        journaled.concurrency))


def _journaled(settings: RunSettings, kind: str, matrix, journal: Path | None,
               given: PythonEvaluator | None = None) -> EvaluatorSettings:
    """The evaluator settings the journal keeps (a resume scores the same way; a Python
    evaluator ``given`` is named, to be given again)."""
    live, task = settings.evaluator, settings.tasks[0]
    harness_run = kind == EvaluatorKind.lm_eval.value
    inspect_run = kind == EvaluatorKind.inspect.value
    refuse_concurrency(live.concurrency, kind)
    if live.output_path is not None and not (harness_run or inspect_run):
        raise BayevalError("--output-path keeps the harness's output or Inspect's "
                           "logs: it needs --evaluator lm-eval or inspect")
    journaled = EvaluatorSettings(kind, task.command or live.command, live.timeout,
                                  live.retries, live.batch_size, live.concurrency,
                                  live.calls,
                                  python=None if given is None else given.description)
    if inspect_run:
        journaled = journaled.replace(
            task=task.task, metric=task.metric,
            inspect_task=task.inspect_task or live.inspect_task,
            output_path=live.output_path or f"{journal}.inspect")
    if harness_run:
        from bayeval.evaluators.harness import harness_settings  # (pandas: after the checks)

        journaled = journaled.replace(
            **harness_settings(matrix, live.lm_eval_args, task.task, task.metric,
                               task.filter),
            lm_eval_mode=live.lm_eval_mode, output_path=live.output_path)
    return journaled


def _fresh(settings: RunSettings, given: PythonEvaluator | None = None, method: Any = None):
    """(session, journaled evaluator settings, whole matrix, evaluator or None) of a
    fresh run: every option checked before JAX starts (seconds of start-up) and before
    any journal."""
    from bayeval.devices import prepare_jax

    live, task = settings.evaluator, settings.tasks[0]
    several = settings.targets is not None
    usage = "CMD {target} {item}" if several else "CMD {item}"
    command = task.command or live.command
    if given is None:
        kind = evaluator_kind(live.kind, command, live.timeout, live.retries, usage,
                              live.lm_eval_args, harness=True,
                              inspect_task=task.inspect_task or live.inspect_task)
    else:
        kind = given.kind
        if command is not None:
            raise BayevalError("--command is for --evaluator command; the evaluator is "
                               f"a Python {given.description}")
        if several:
            raise BayevalError(f"a Python evaluator ({given.description}) evaluates one "
                               "model (model=…), not several (models=…)")
    if kind in TOOL_EVALUATORS and several:
        raise BayevalError(f"--evaluator {kind} evaluates one model (--model), not "
                           "--models")
    source, matrix = fresh_source(task.dataset, task.reference and Path(task.reference),
                                  task=task.task, metric=task.metric,
                                  filter_name=task.filter,
                                  harness_evaluator=kind == EvaluatorKind.lm_eval.value,
                                  repeated_models=task.repeated_models)
    seed = 0 if settings.seed is None else settings.seed
    names, held = run_targets(settings, kind, matrix, seed)
    if held:
        source["held_out"] = held
    journal = None if settings.journal is None else Path(settings.journal)
    if journal is None and kind != EvaluatorKind.oracle.value:
        from bayeval.data.io import safe_file_name

        stem = "joint" if several else safe_file_name(names[0])
        journal = Path(f"bayeval-{stem}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    journaled = _journaled(settings, kind, matrix, journal, given)
    from bayeval.methods import make_method

    name, params = settings.method_spec(method)
    if several or journaled.concurrency > 1:
        chosen = method if method is not None else make_method(name, **params)
        if several and not chosen.several_targets:
            raise BayevalError(f"--targets needs a method that evaluates several "
                               f"targets jointly ({' or '.join(JOINT_METHODS)}); "
                               f"{name!r} evaluates one")
        refuse_concurrency(journaled.concurrency, kind, chosen, several)
    evaluate_fn = None
    if given is not None:  # built (a task, a model loaded) before any journal
        evaluate_fn = given.build(journaled, names[0])
    elif kind == EvaluatorKind.lm_eval.value:  # loaded (or checked) before any journal
        evaluate_fn = _harness_evaluator(journaled, matrix, names[0])
    elif kind == EvaluatorKind.inspect.value:
        try:
            evaluate_fn = journaled.evaluator_for(matrix, names)
        except EvaluationError as exc:  # a task or model that does not load
            raise BayevalError(str(exc)) from None
    from bayeval.loop.session import Session

    prepare_jax()
    session = Session(matrix.drop_models(held) if held else matrix,
                      names if several else names[0], name, method_params=params,
                      seed=seed, journal=journal, max_items=settings.max_items,
                      reference_source=source, extra=journaled.to_json())
    return session, journaled, matrix, evaluate_fn


def _run(session, journaled: EvaluatorSettings, matrix, evaluate_fn, watch: Watch | None,
         batch: Any) -> Any:
    """The loop run on ``session`` (its journal closed however it ends; on an
    interruption the command that continues it noted), then its result."""
    from bayeval.evaluators.base import closing

    with resumable(session, "evaluate"):
        if evaluate_fn is None:
            evaluate_fn = journaled.evaluator_for(matrix, session.target_ids,
                                                  session.several)
        sizes = batch if callable(batch) else None
        session.times.full_size = _full_size(evaluate_fn)
        with closing([evaluate_fn]), watched(watch, session, journaled.batch) as on_step:
            session.run(evaluate_fn, batch=batch, on_step=on_step,
                        max_failures=journaled.max_failures,
                        concurrency=journaled.concurrency)
        if session.n_observed == 0:
            raise EvaluationError(f"no item was evaluated ({len(session.skipped)} failed); "
                                  "there is no estimate to report")
        if session.several:
            data = _joint_result(session, journaled, matrix)
            history = [(t, [(h[0], *h[2:]) for h in session.history if h[1] == t])
                       for t in session.target_ids]
        else:
            data = _result(session, journaled, matrix, evaluate_fn)
            if getattr(sizes, "plan", None) is not None:
                data["plan"] = sizes.plan.to_dict()
                data["plan_revised"] = (None if sizes.revised is None
                                        else sizes.revised.to_dict())
                data["rest_whole_at"] = sizes.whole_at
            history = [(data["task"], session.history)]
    return make_result(data, history, posterior_of(session))


def posterior_of(session) -> Any:
    """The ArviZ posterior of a session whose backend samples by MCMC (its settings give
    ``inference_data(state)``, e.g. :class:`~bayeval.inference.irt.IRTAbilityNUTS`);
    None for the others."""
    settings = getattr(session.method.backend, "settings", None)
    draws = getattr(settings, "inference_data", None)
    return None if draws is None else draws(session.loop.backend)


def _common(session) -> dict[str, Any]:
    return {"reference": session.reference.name,
            "reference_models": session.reference.n_models,
            "method": session.method.name,
            "params": session.method.params,
            "seed": session.seed,
            "level": session.method.level,
            "n_items": session.n_items,
            "stopped": session.stop_reason,
            "journal": None if session.journal_path is None else str(session.journal_path)}


def _joint_result(session, journaled: EvaluatorSettings, matrix) -> dict[str, Any]:
    """A joint run's result: a row per target."""
    from bayeval.estimators.interval import covers

    rows = []
    for k, target in enumerate(session.target_ids):
        value, lower, upper = session.estimate(target)
        truth = journaled.true_score(matrix, target)
        rows.append({"target": target, "estimate": value, "lower": lower, "upper": upper,
                     "true_score": truth,
                     "covered": None if truth is None else bool(covers(lower, upper, truth)),
                     "items_used": session.items_used(target),
                     "stopped_after": int(session.stopped_at[k]) or None})
    return {"targets": rows, **_common(session), "evaluations": session.n_observed,
            "skipped": len(session.skipped)}


def _result(session, journaled: EvaluatorSettings, matrix, evaluate_fn) -> dict[str, Any]:
    """One target's result: the estimate and interval, what it rests on, what the run
    cost (items, documents, harness calls, time)."""
    from bayeval.estimators.interval import covers
    from bayeval.estimators.sample_mean import items_for_width

    value, lower, upper = session.estimate()
    truth = journaled.true_score(matrix, session.target_id)
    check = session.domain_check()
    now = getattr(evaluate_fn, "launches", None)
    return {
        "target": session.target_id,
        **_common(session),
        "estimate": value,
        "lower": lower,
        "upper": upper,
        "true_score": truth,
        "covered": None if truth is None else bool(covers(lower, upper, truth)),
        "reference_row_score": (None if truth is not None
                                else row_score(matrix, session.target_id)),
        "items_used": session.n_observed,
        "items_evaluated": session.n_evaluated,
        "items_drawn": session.n_drawn,
        # what the model ran (the user's cost): every drawn item's evaluation, and the
        # ones run again after a kill or interruption (their first scores never journaled)
        "documents_run": session.documents_sent,
        "documents_rerun": session.documents_rerun,
        # RS-Mean's items for this width at this estimate
        "random_items_for_width": items_for_width(value, upper - lower, session.n_items,
                                                  session.method.level),
        "items_skipped": len(session.skipped),
        "skipped_items": skipped_note(session.method.estimator.name, len(session.skipped)),
        # what the interval rests on: the design (valid whatever the model gets wrong) or
        # the reference models' model (valid if it explains the target)
        "interval_basis": "model" if session.method.estimator.model_based else "design",
        **({} if check is None else {"domain_check": check.as_dict(),
                                     "domain_warning": check.note(session.method.name)}),
        "failures": failure_summary(session.skipped),
        "items": [item for item, _ in session.observations],
        # harness calls of the whole journal: one per ask of a batch journaled before a
        # resume, plus this process's
        "harness_launches": None if now is None else session.ask_calls_replayed + now,
        # of the in-process harness: seconds in the model's calls, and building the
        # task's requests at the start (the rest of its time is per-call overhead)
        "harness_model_seconds": getattr(evaluate_fn, "model_seconds", None),
        "harness_build_seconds": getattr(evaluate_fn, "build_seconds", None),
        # the model's batch size in each call where bayeval set it (a CPU model's calls
        # packed no worse per document than the full run; empty: the model's own)
        "harness_batch_sizes": list(getattr(evaluate_fn, "call_batch_sizes", []) or []),
        "evaluator": journaled.evaluator,
        "task": _task_name(journaled, matrix, session),
        "metric": journaled.metric or matrix.metadata.get("metric"),
        "filter": journaled.filter or matrix.metadata.get("filter"),
        "inspect_logs": (journaled.output_path
                         if journaled.evaluator == EvaluatorKind.inspect.value else None),
        "times": session.times.summary(session.n_items),
    }


def _full_size(evaluate_fn) -> float | None:
    """The whole task's padded size, where the evaluator knows its documents' requests
    (the in-process harness): what projects a full run's time (bayeval.loop.timing)."""
    packed = getattr(evaluate_fn, "packed_size", None)
    return None if packed is None else packed(None)


def refuse_concurrency(concurrency: int, kind: str, method=None, several: bool = False
                       ) -> None:
    """``--concurrency K > 1`` needs an evaluator of one item at a time (not the harness,
    which runs a batch's documents together) and rounds in a draw order: one target,
    draws without replacement (a one-line error otherwise, before any journal is
    touched)."""
    if concurrency <= 1:
        return
    if kind in TOOL_EVALUATORS:
        raise BayevalError(f"--concurrency is for --evaluator command or oracle; {kind} "
                           "runs a batch's items together (--batch)")
    if method is not None and (several or method.with_replacement):
        raise BayevalError(f"--concurrency: {method.name} evaluates one item at a time "
                           f"({'several targets' if several else 'draws with replacement'})")


def _harness_evaluator(settings: EvaluatorSettings, matrix, target: str):
    """The lm-eval evaluator of a fresh run, made before its journal: in process the
    model and the task are loaded now; per batch the options and the task are checked
    now (the harness's own parser and task index), so that a wrong option or task is a
    one-line error and no journal freezes it."""
    if settings.lm_eval_mode == SUBPROCESS:
        from bayeval.evaluators.harness import check_harness_task

        check_harness_task(settings.lm_eval_args, settings.task)
    return settings.evaluator_for(matrix, [target])


def write_inspect_log(result: dict[str, Any], path: Path) -> Path:
    """The estimate of an ``--evaluator inspect`` run's ``result`` as an Inspect eval log
    built from the target's own logs
    (:func:`bayeval.evaluators.inspect_eval.write_estimate_log`)."""
    from bayeval.evaluation.results import result_estimate
    from bayeval.evaluators.inspect_eval import write_estimate_log

    if not result.get("inspect_logs"):  # only an --evaluator inspect run has them
        raise BayevalError("--inspect-log writes the target's Inspect samples: this run "
                           f"evaluated with {result.get('evaluator')}, not inspect")
    try:
        return write_estimate_log(result["inspect_logs"], path, *result_estimate(result),
                                  result["metric"])
    except OSError as exc:
        raise BayevalError(f"--inspect-log {path}: {exc.strerror or exc}") from None
