"""One task's live evaluation, of one target or several jointly: the session made from
the settings (or resumed from its journal), the evaluator built from them, the loop run,
and the result (:func:`bayeval.evaluate` for a run of one task)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from bayeval.errors import BayevalError, EvaluationError
from bayeval.evaluation.evaluator_settings import (
    EvaluatorSettings,
    evaluator_kind,
    resume_from,
    row_score,
)
from bayeval.evaluation.options import (
    DEFAULT_METHOD,
    JOINT_METHOD,
    JOINT_METHODS,
    SUBPROCESS,
    TOOL_EVALUATORS,
    EvaluatorKind,
)
from bayeval.evaluation.results import failure_summary, skipped_note
from bayeval.evaluation.settings import RunSettings
from bayeval.evaluation.sources import fresh_source, resumable
from bayeval.evaluation.watch import Watch, watched

__all__ = ["correct_evaluator_args", "refuse_concurrency", "resume_single", "run_single",
           "write_inspect_log"]


def run_single(settings: RunSettings, watch: Watch | None = None) -> dict[str, Any]:
    """A fresh run of ``settings`` (one task), its result as ``evaluate --json`` prints
    it. The options and the reference are checked, and a harness model or an Inspect
    task loaded, before any journal is written."""
    session, journaled, matrix, evaluate_fn = _fresh(settings)
    return _run(session, journaled, matrix, evaluate_fn, watch, journaled.batch)


def resume_single(journal: Path, max_items: int | None = None, batch: int | None = None,
                  concurrency: int = 1, lm_eval_args: str | None = None,
                  watch: Watch | None = None) -> dict[str, Any]:
    """The run ``journal`` records, continued (its settings read from it): a new budget
    (``max_items``), batch size and concurrency may be given, and the harness options of
    a run that failed before any score."""
    from bayeval.devices import prepare_jax
    from bayeval.loop.session import Session

    if lm_eval_args is not None:
        correct_evaluator_args(journal, lm_eval_args)
    prepare_jax()
    session, journaled, matrix = resume_from(Session, journal)
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
    return _run(session, journaled, matrix, None, watch,
                batch if batch is not None else journaled.batch)


def _targets(settings: RunSettings, kind: str, matrix, seed: int
             ) -> tuple[list[str], list[str]]:
    """(the run's target names, those the matrix holds, held out of its reference): the
    names are --targets, --target, or (oracle) a model drawn with the seed; an oracle's
    targets must be models of the matrix, and leave a reference."""
    several = settings.targets is not None
    if several:
        names = list(settings.targets or ())
    elif settings.target is not None:
        names = [settings.target]
    elif kind != EvaluatorKind.oracle.value:
        raise BayevalError(f"--evaluator {kind} needs --target NAME for the new model")
    else:
        names = [str(np.random.default_rng(seed).choice(matrix.models))]
    known = set(matrix.models)
    unknown = [t for t in names if t not in known]
    if kind == EvaluatorKind.oracle.value and unknown:
        raise BayevalError(f"unknown target id{'s' if len(unknown) > 1 else ''} "
                           f"{unknown if several else repr(unknown[0])}: not "
                           f"{'models' if several else 'a model'} of {matrix.name} "
                           f"({matrix.n_models} models)")
    held = [t for t in names if t in known]
    if held and len(held) == matrix.n_models:
        raise BayevalError(
            f"{matrix.name}: the targets are all its {matrix.n_models} model(s); held "
            "out they leave no reference model" if several else
            f"{matrix.name} holds one model, {held[0]!r}: held out as the target it "
            "leaves no reference model")
    return names, held


def _journaled(settings: RunSettings, kind: str, matrix, journal: Path | None
               ) -> EvaluatorSettings:
    """The evaluator settings the journal keeps (a resume scores the same way)."""
    live, task = settings.evaluator, settings.tasks[0]
    harness_run = kind == EvaluatorKind.lm_eval.value
    inspect_run = kind == EvaluatorKind.inspect.value
    refuse_concurrency(live.concurrency, kind)
    if live.output_path is not None and not (harness_run or inspect_run):
        raise BayevalError("--output-path keeps the harness's output or Inspect's "
                           "logs: it needs --evaluator lm-eval or inspect")
    journaled = EvaluatorSettings(kind, task.command or live.command, live.timeout,
                                  live.retries, live.batch_size, live.concurrency)
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


def _fresh(settings: RunSettings):
    """(session, journaled evaluator settings, whole matrix, evaluator or None) of a
    fresh run: every option checked before JAX starts (seconds of start-up) and before
    any journal."""
    from bayeval.devices import prepare_jax

    live, task = settings.evaluator, settings.tasks[0]
    several = settings.targets is not None
    usage = "CMD {target} {item}" if several else "CMD {item}"
    command = task.command or live.command
    kind = evaluator_kind(live.kind, command, live.timeout, live.retries, usage,
                          live.lm_eval_args, harness=True,
                          inspect_task=task.inspect_task or live.inspect_task)
    if kind in TOOL_EVALUATORS and several:
        raise BayevalError(f"--evaluator {kind} evaluates one model (--target), not "
                           "--targets")
    source, matrix = fresh_source(task.dataset, task.reference and Path(task.reference),
                                  task=task.task, metric=task.metric,
                                  filter_name=task.filter,
                                  harness_evaluator=kind == EvaluatorKind.lm_eval.value,
                                  repeated_models=task.repeated_models)
    seed = 0 if settings.seed is None else settings.seed
    names, held = _targets(settings, kind, matrix, seed)
    if held:
        source["held_out"] = held
    journal = None if settings.journal is None else Path(settings.journal)
    if journal is None and kind != EvaluatorKind.oracle.value:
        from bayeval.data.io import safe_file_name

        stem = "joint" if several else safe_file_name(names[0])
        journal = Path(f"bayeval-{stem}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    journaled = _journaled(settings, kind, matrix, journal)
    from bayeval.methods import make_method, parse_method_spec

    name, params = parse_method_spec(settings.method or (JOINT_METHOD if several
                                                         else DEFAULT_METHOD))
    if settings.epsilon is not None:
        params["epsilon"] = settings.epsilon
    if several or journaled.concurrency > 1:
        chosen = make_method(name, **params)
        if several and not chosen.several_targets:
            raise BayevalError(f"--targets needs a method that evaluates several "
                               f"targets jointly ({' or '.join(JOINT_METHODS)}); "
                               f"{name!r} evaluates one")
        refuse_concurrency(journaled.concurrency, kind, chosen, several)
    evaluate_fn = None
    if kind == EvaluatorKind.lm_eval.value:  # loaded (or checked) before any journal
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
         batch: int) -> dict[str, Any]:
    """The loop run on ``session`` (its journal closed however it ends; on an
    interruption the command that continues it noted), then its result."""
    from bayeval.evaluators.base import closing

    with resumable(session, "evaluate"):
        if evaluate_fn is None:
            evaluate_fn = journaled.evaluator_for(matrix, session.target_ids,
                                                  session.several)
        with closing([evaluate_fn]), watched(watch, session, batch) as on_step:
            session.run(evaluate_fn, batch=batch, on_step=on_step,
                        max_failures=journaled.max_failures,
                        concurrency=journaled.concurrency)
        if session.n_observed == 0:
            raise EvaluationError(f"no item was evaluated ({len(session.skipped)} failed); "
                                  "there is no estimate to report")
        if session.several:
            return _joint_result(session, journaled, matrix)
        return _result(session, journaled, matrix, evaluate_fn)


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
    from bayeval.data.lm_eval import harness_task
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
        # what the model ran (the user's cost): every drawn item's evaluation
        "documents_run": session.n_drawn,
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
        "evaluator": journaled.evaluator,
        # the task's name: the harness's, else the reference file's stem (not its path)
        "task": (journaled.task or harness_task(matrix)
                 or Path(session.reference.name).stem),
        "metric": journaled.metric or matrix.metadata.get("metric"),
        "filter": journaled.filter or matrix.metadata.get("filter"),
        "inspect_logs": (journaled.output_path
                         if journaled.evaluator == EvaluatorKind.inspect.value else None),
        "times": session.times.summary(session.n_items),
    }


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


def correct_evaluator_args(journal: Path, lm_eval_args: str) -> None:
    """A resume with new harness options: replace the options a journal froze, which is
    allowed only while it holds no score (the run failed before any, e.g. on a wrong
    model path); the options are checked by the harness's parser first, and the journal's
    header is rewritten atomically."""
    import fcntl

    from bayeval.evaluators.harness import harness_config
    from bayeval.loop.session import Session
    from bayeval.records.files import write_file
    from bayeval.records.journal_check import CHECK, seal_header

    header, events, _, _ = Session.read_journal(journal)
    extra = header.get("extra") or {}
    settings = EvaluatorSettings.from_json(extra, f"journal {journal}")
    if settings.evaluator != EvaluatorKind.lm_eval.value:
        raise BayevalError(f"--lm-eval-args: {journal} is not a run of --evaluator lm-eval")
    if any(e.get("event") == "tell" for e in events):
        raise BayevalError(f"--resume reads the harness options from {journal}, which "
                           "already holds scores made with them; drop --lm-eval-args")
    try:
        harness_config(lm_eval_args, settings.task)
    except EvaluationError as exc:
        raise BayevalError(str(exc)) from None
    header = {**header, "extra": {**extra, "lm_eval_args": lm_eval_args}}
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
