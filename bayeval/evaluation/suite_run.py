"""A suite's live run (:func:`bayeval.evaluate` with several tasks, ``bayeval evaluate
--suite FILE``) and a harness group's subtasks (``--subtasks``): several tasks estimated in
one run with one budget (:mod:`bayeval.loop.suite`).

A suite file (:mod:`bayeval.evaluation.run_file`) names the tasks::

    epsilon = 0.05            # width of the average's interval (default: --epsilon, 0.05)
    task_epsilon = 0.15       # optional: every task's interval at most this wide too
    method = "active-pai"     # optional: the design-valid method every task runs

    [[tasks]]
    name = "ifeval"           # default: the dataset's or the task's name
    dataset = "ifeval"        # a bundled dataset, or reference = FILE | "lm-eval:DIR" |
                              #   "inspect:DIR" (relative to the suite file), with
                              #   task / metric / filter as the options of one run
    weight = 1                # default 1 (the average is Σ w θ / Σ w)
    cost = 1.0                # per item; default: Inspect logs' mean tokens per sample,
                              #   else 1
    # model = "name"          # this task's name of the model (default --model)
    # command = "…"           # this task's --command; {task} in --command is its name
    # inspect_task = "f.py@t" # this task's --inspect-task

The run keeps a folder (``--journal DIR``): ``suite.json`` (the suite and its settings) and
one journal per task, so ``--resume --journal DIR`` continues it with nothing lost; with
``--evaluator inspect`` each task's Inspect logs go to ``NAME.inspect`` there (or under
``--output-path``).
"""

from __future__ import annotations

import json
import math
import shlex
import time
import warnings
from pathlib import Path
from typing import Any

from bayeval.devices import prepare_jax
from bayeval.errors import BayevalError, EvaluationError
from bayeval.evaluation.evaluator_settings import EvaluatorSettings, evaluator_kind
from bayeval.evaluation.options import DEFAULT_METHOD, SUITE_FILE, EvaluatorKind
from bayeval.evaluation.result_types import make_result
from bayeval.evaluation.settings import RunSettings
from bayeval.evaluation.sources import fresh_source, load_source, resume_session
from bayeval.evaluation.watch import Watch, watched
from bayeval.loop.suite import task_id
from bayeval.records.journal_check import CHECK, RUN, header_altered, seal_header

__all__ = ["resume_suite", "run_suite"]

def _task_cost(source: dict[str, Any], matrix) -> float:
    """A task's cost per item where its reference says: the mean tokens per sample of
    Inspect logs (else their mean seconds); 1 otherwise."""
    if "inspect" not in source:
        return 1.0
    import numpy as np

    from bayeval.data.inspect_logs import read_inspect

    with warnings.catch_warnings():  # the logs passed over were named when first read
        warnings.simplefilter("ignore")
        ref = read_inspect(source["inspect"], source.get("task"), source.get("metric"),
                           source.get("repeated_models", "error"))
    for values in (ref.tokens, ref.seconds):
        finite = values[np.isfinite(values)]
        if finite.size and finite.mean() > 0:
            return float(finite.mean())
    return 1.0


def run_suite(settings: RunSettings, watch: Watch | None = None, given: Any = None,
              method: Any = None) -> Any:
    """A fresh suite run (several tasks), or a harness group's subtasks as one
    (``settings.subtasks``); its result as ``evaluate --json`` prints it. ``given``: a
    harness LM object every task runs on
    (:class:`~bayeval.evaluation.single.PythonEvaluator`)."""
    live = settings.evaluator
    if method is not None:
        raise BayevalError("a suite's tasks run a registered design-valid method by name "
                           "(method='active-pai(…)'); a composed Method value runs one task")
    entries = [] if settings.subtasks else [t.suite_entry() for t in settings.tasks]
    if settings.max_items is not None and len(entries) > settings.max_items:
        # before any matrix is read or file made
        raise BayevalError(f"--limit {settings.max_items} cannot give each of the "
                           f"suite's {len(entries)} tasks an item; raise it or take fewer "
                           "tasks")
    # a suite's tasks may each name their own Inspect task (and command)
    own = [t.get("inspect_task") for t in entries]
    if given is None:
        kind = evaluator_kind(live.kind, live.command or next(
            (t["command"] for t in entries if t.get("command")), None), live.timeout,
            live.retries, "CMD {item}", live.lm_eval_args, harness=True,
            inspect_task=live.inspect_task or (own[0] if own and all(own) else None))
    elif given.kind != EvaluatorKind.lm_eval.value:
        raise BayevalError(f"a suite's tasks share a harness LM object, a --command (with "
                           f"{{task}}) or the harness's or Inspect's options; the "
                           f"{given.description} evaluates one task")
    else:
        kind = given.kind
    from bayeval.evaluation.single import refuse_concurrency

    refuse_concurrency(live.concurrency, kind)
    if settings.subtasks:
        tasks = _group_tasks(settings)
        label = tasks[0]["group"]
    else:
        tasks = _suite_tasks(entries)
        label = settings.name or "+".join(t["name"] for t in entries)
    from bayeval.loop.suite import NEVER, SuiteRule
    from bayeval.methods import make_method, parse_method_spec

    name, params = parse_method_spec(settings.method or DEFAULT_METHOD)
    probe = make_method(name, **params)
    if not (probe.estimator.needs_probabilities and not probe.with_replacement):
        raise BayevalError(f"a suite's tasks run a design-valid method drawing without "
                           f"replacement (active-pai); {name!r} is not one")
    eps = settings.epsilon if settings.epsilon is not None else 0.05
    rule = SuiteRule(float(eps), settings.task_epsilon, int(params.get("n_min", 30)),
                     settings.max_items, probe.level)
    params["epsilon"] = NEVER  # the suite's rule stops the tasks
    seed = 0 if settings.seed is None else settings.seed
    names = _targets(tasks, settings.target, kind, seed)
    journal = None if settings.journal is None else Path(settings.journal)
    if journal is None and kind != EvaluatorKind.oracle.value:
        from bayeval.data.io import safe_file_name

        journal = Path(f"bayeval-suite-{safe_file_name(label)}-"
                       f"{time.strftime('%Y%m%d-%H%M%S')}")
    batch = live.batch_size  # one harness run (Inspect eval) per batch, as for one task
    return _start(label, tasks, names, kind, settings, name, params, rule, seed, journal,
                  watch, batch, given)


def _suite_tasks(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each task's source record and whole matrix (the reference and its target)."""
    tasks = []
    for t in entries:
        ref = Path(t["reference"]) if "reference" in t else None
        source, matrix = fresh_source(t.get("dataset"), ref, task=t.get("task"),
                                      metric=t.get("metric"), filter_name=t.get("filter"),
                                      repeated_models=t.get("repeated_models", "error"))
        cost = t.get("cost") or _task_cost(source, matrix)
        tasks.append({**t, "source": source, "matrix": matrix, "weight": t.get("weight", 1),
                      "cost": cost})
    return tasks


def _group_tasks(settings: RunSettings) -> list[dict[str, Any]]:
    """A harness group's subtasks as a suite's tasks, weighted as the harness aggregates
    the group (``group_mean``: by documents, or equal)."""
    from bayeval.data.lm_eval import harness_task, subtask_columns, subtask_matrix

    t = settings.tasks[0]
    source, group = fresh_source(t.dataset, t.reference and Path(t.reference), task=t.task,
                                 metric=t.metric, filter_name=t.filter,
                                 repeated_models=t.repeated_models)
    parts = subtask_columns(group)
    if len(parts) < 2:
        raise BayevalError(f"--subtasks: {group.name} is not a harness group of two or more "
                           "subtasks (its matrix names none)")
    mean = settings.group_mean
    if mean is None:
        from bayeval.compression.subset import group_aggregation

        mean = group_aggregation(harness_task(group) or "", group.metadata.get("metric"),
                                 None) or "size"
    tasks = []
    for sub, columns in parts:
        tasks.append({"name": sub, "source": {**source, "subtask": sub},
                      "matrix": subtask_matrix(group, sub, columns),
                      "weight": float(columns.size) if mean == "size" else 1.0, "cost": 1.0,
                      "group": harness_task(group) or group.name, "group_mean": mean,
                      "group_matrix": group})
    return tasks


def _targets(tasks: list[dict[str, Any]], target: str | None, kind: str,
             seed: int) -> list[str]:
    """Each task's name of the target: its own ``target``, else --target, else (oracle) a
    model every task holds, drawn with the seed."""
    import numpy as np

    if target is None and all("target" not in t for t in tasks):
        if kind != EvaluatorKind.oracle.value:
            raise BayevalError(f"--evaluator {kind} needs --model NAME for the new model")
        shared = set(tasks[0]["matrix"].models).intersection(
            *(t["matrix"].models for t in tasks[1:]))
        common = sorted(shared)
        if not common:
            raise BayevalError("the suite's tasks share no model to hold out as the target; "
                               "give --model or a model per task")
        target = str(np.random.default_rng(seed).choice(common))
    names = [str(t.get("target", target)) for t in tasks]
    if kind == EvaluatorKind.oracle.value:
        for t, n in zip(tasks, names, strict=True):
            if n not in set(t["matrix"].models):
                raise BayevalError(f"task {t['name']}: target {n!r} is not a model of "
                                   f"{t['matrix'].name} ({t['matrix'].n_models} models)")
    return names


def _settings(kind: str, task: dict[str, Any], live, journal_dir,
              given: Any = None) -> EvaluatorSettings:
    """A task's evaluator settings (journaled with it for a resume); ``live``: the run's
    :class:`~bayeval.evaluation.settings.EvaluatorOptions`."""
    cmd = task.get("command") or live.command
    if cmd is not None:
        cmd = cmd.replace("{task}", shlex.quote(task["name"]))
    settings = EvaluatorSettings(kind, cmd, live.timeout, live.retries, 1, 1,
                                 python=None if given is None else given.description)
    if kind == EvaluatorKind.lm_eval.value:  # a group's subtasks: the group's harness run
        from bayeval.evaluators.harness import harness_settings

        kept = live.output_path
        if kept is not None and "group" not in task:  # a suite: each task's output apart
            kept = Path(kept) / task["name"]
        settings = settings.replace(
            **harness_settings(task["matrix"], live.lm_eval_args,
                               task["source"].get("task") if "group" not in task else None,
                               task["source"].get("metric"), task["source"].get("filter")),
            lm_eval_mode=live.lm_eval_mode,
            output_path=None if kept is None else str(kept))
    if kind == EvaluatorKind.inspect.value:  # each task's logs a folder of their own
        base = live.output_path or journal_dir
        settings = settings.replace(
            task=task["source"].get("task"), metric=task["source"].get("metric"),
            inspect_task=task.get("inspect_task") or live.inspect_task,
            output_path=None if base is None else str(Path(base) / f"{task['name']}.inspect"))
    return settings


def _start(label, tasks, names, kind, run_settings: RunSettings, method_name, params, rule,
           seed, journal, watch, batch, given: Any = None) -> Any:
    from bayeval.data.io import safe_file_name
    from bayeval.loop.session import Session
    from bayeval.loop.suite import SuiteRun, task_seed
    from bayeval.records.files import write_file

    if journal is not None:
        journal = Path(journal)
        if journal.exists() and any(journal.iterdir()):
            raise BayevalError(f"--journal {journal}: a suite's folder must be new or empty "
                               "(continue a run with --resume)")
    group = run_settings.subtasks
    settings = [_settings(kind, t, run_settings.evaluator, journal, given) for t in tasks]
    if given is not None:  # the user's harness LM: every task runs on it
        evaluators = [given.build(s, n) for s, n in zip(settings, names, strict=True)]
        if group:
            evaluators = evaluators[:1] * len(tasks)
    elif group:  # a group's subtasks share the group's evaluator (one model, one task)
        evaluators = [settings[0].evaluator_for(tasks[0]["group_matrix"], [names[0]])
                      ] * len(tasks)
    else:
        evaluators = _task_evaluators(settings, [t["matrix"] for t in tasks], names)
    prepare_jax()
    files = [None if journal is None else
             journal / f"{k:02d}-{safe_file_name(t['name'])}.jsonl"
             for k, t in enumerate(tasks)]
    if journal is not None:
        journal.mkdir(parents=True, exist_ok=True)
        record = seal_header({
            "suite": label, "group": group, "group_mean": tasks[0].get("group_mean"),
            "epsilon": rule.epsilon, "task_epsilon": rule.task_epsilon, "n_min": rule.n_min,
            "max_items": rule.max_items, "level": rule.level, "batch": batch,
            "tasks": [{"name": t["name"], "weight": float(t["weight"]),
                       "cost": float(t["cost"]), "journal": f.name}
                      for t, f in zip(tasks, files, strict=True)]})
        write_file(journal / SUITE_FILE, json.dumps(record, indent=1), durable=True)
    sessions = []
    for k, (t, n, s, f) in enumerate(zip(tasks, names, settings, files, strict=True)):
        held = n in set(t["matrix"].models)  # the oracle's target, out of its reference
        ref = t["matrix"].drop_models([n]) if held else t["matrix"]
        source = {**t["source"], **({"held_out": [n]} if held else {})}
        # each journal names its suite and task: a journal moved to another task's place
        # is refused on resume
        extra = s.to_json() if journal is None else {
            **s.to_json(), "suite": {"run": record[RUN], "task": t["name"]}}
        sessions.append(Session(ref, n, method_name, method_params=params,
                                seed=task_seed(seed, k), journal=f, reference_source=source,
                                extra=extra))
    run = SuiteRun([t["name"] for t in tasks], sessions, [t["weight"] for t in tasks], rule,
                   [t["cost"] for t in tasks])

    truths = [st.true_score(t["matrix"], n) for t, n, st in zip(tasks, names, settings,
                                                                 strict=True)]
    return _run(run, evaluators, batch, watch, label, journal, truths, group,
                tasks[0].get("group_mean"), run_settings.evaluator.concurrency)


def _suite_record(path: Path) -> dict[str, Any]:
    """A suite folder's ``suite.json``, checked: its check (any edited value: a weight, a
    task's name or journal) and each task's entry (a name, positive finite weight and
    cost, a journal file of this folder named once). A record written before the checks
    existed (neither check nor run id) is read with a warning naming it."""
    from bayeval.records.files import read_text

    try:
        record = json.loads(read_text(path, str(path)))
    except ValueError as exc:
        raise BayevalError(f"{path}: not a suite record ({exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("tasks"), list):
        raise BayevalError(f"{path}: not a suite record (no list of tasks)")
    if (CHECK in record) != (RUN in record):
        raise BayevalError(f"{path}: the record lost its "
                           f"{CHECK if RUN in record else RUN!r} (it holds both)")
    if CHECK not in record:
        warnings.warn(f"{path} was written without its check (by an earlier bayeval): an "
                      "edit of it cannot be detected", stacklevel=2)
    elif header_altered(record):
        raise BayevalError(f"{path}: the record was altered (it does not match its check)")
    seen: set[str] = set()
    for k, entry in enumerate(record["tasks"], start=1):
        where = f"{path}: task {k}"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise BayevalError(f"{where}: not a task entry")
        task_id(entry["name"], where)
        for key in ("weight", "cost"):
            value = entry.get(key)
            if not (isinstance(value, int | float) and not isinstance(value, bool)
                    and math.isfinite(value) and value > 0):
                raise BayevalError(f"{where}: {key} must be a positive finite number, got "
                                   f"{value!r}")
        name = entry.get("journal")
        if (not isinstance(name, str) or name in ("", ".", "..") or Path(name).name != name
                or "\\" in name or name.startswith(".")):
            raise BayevalError(f"{where}: journal {name!r} is not a file of the suite's "
                               "folder")
        if name in seen:
            raise BayevalError(f"{where}: journal {name!r} is named twice")
        seen.add(name)
    return record


def resume_suite(journal: Path, max_items: int | None = None, batch: int | None = None,
                 watch: Watch | None = None, concurrency: int = 1, given: Any = None,
                 command: str | None = None, lm_eval_args: str | None = None) -> Any:
    """The suite recorded in the folder ``journal``, continued (with a new budget of
    ``max_items`` over all tasks, if given; ``batch`` and ``concurrency``: how many are
    asked at once, which the estimate does not depend on). A corrected evaluator
    (``command``, ``lm_eval_args``, the harness LM object ``given`` again) is kept in
    every task's journal (:func:`~bayeval.evaluation.single.amend_evaluator`)."""
    from bayeval.loop.session import Session
    from bayeval.loop.suite import SuiteRule, SuiteRun

    path = Path(journal) / SUITE_FILE
    if not path.is_file():
        raise BayevalError(f"--journal {journal}: no {SUITE_FILE} (not a suite's folder)")
    record = _suite_record(path)
    try:
        rule = SuiteRule(record["epsilon"], record["task_epsilon"], record["n_min"],
                         record["max_items"] if max_items is None else max_items,
                         record["level"])
        entries = record["tasks"]
    except (ValueError, KeyError, TypeError) as exc:
        raise BayevalError(f"{path}: not a suite record ({exc})") from None
    if max_items is not None and max_items != record["max_items"]:  # kept for later resumes
        from bayeval.records.files import write_file

        renewed = {**record, "max_items": max_items}
        if CHECK in record:
            renewed = seal_header(renewed)
        write_file(path, json.dumps(renewed, indent=1), durable=True)
    if given is not None or command is not None or lm_eval_args is not None:
        from bayeval.evaluation.single import amend_evaluator

        for entry in entries:
            amend_evaluator(Path(journal) / entry["journal"], given, command, lm_eval_args)
    prepare_jax()
    from bayeval.data.lm_eval import subtask_matrix

    read: dict[str, Any] = {}  # each source's matrix, read once for all the tasks it holds

    def whole(source: dict[str, Any], file: Path):
        base = {k: v for k, v in source.items() if k not in ("subtask", "held_out")}
        key = json.dumps(base, sort_keys=True)
        if key not in read:
            read[key] = load_source(base, file)
        return read[key]

    sessions, settings, matrices = [], [], []
    for entry in entries:
        file = Path(journal) / entry["journal"]
        source = _journal_source(file)
        matrix = reference = None
        if source is not None:
            matrix = whole(source, file)
            if "subtask" in source:
                matrix = subtask_matrix(matrix, source["subtask"])
            held = [m for m in source.get("held_out", []) if m in set(matrix.models)]
            reference = matrix.drop_models(held) if held else matrix
        session = resume_session(Session, file, reference)
        mine = session.extra.get("suite")
        if mine is not None and mine != {"run": record.get(RUN), "task": entry["name"]}:
            session.close()
            whose = "this suite" if mine.get("run") == record.get(RUN) else "another suite"
            raise BayevalError(f"{file}: the journal of task {mine.get('task')!r} of "
                               f"{whose}, not of task {entry['name']!r}")
        sessions.append(session)
        settings.append(EvaluatorSettings.from_json(session.extra, f"journal {file}"))
        matrices.append(matrix if matrix is not None else
                        load_source(session.reference_source or {}, file))
    truths = [st.true_score(m, s.target_id)
              for m, s, st in zip(matrices, sessions, settings, strict=True)]
    if given is not None:  # the user's harness LM: every task runs on it
        evaluators = [given.build(st, s.target_id) for st, s in zip(settings, sessions,
                                                                    strict=True)]
        if record.get("group"):
            evaluators = evaluators[:1] * len(sessions)
    elif record.get("group"):  # the group's evaluator, shared (module docstring)
        first = sessions[0]
        group = whole(first.reference_source or {}, first.journal_path)
        evaluators = [settings[0].evaluator_for(group, [first.target_id])] * len(sessions)
    else:
        evaluators = _task_evaluators(settings, matrices, [s.target_id for s in sessions])
    run = SuiteRun([e["name"] for e in entries], sessions, [e["weight"] for e in entries],
                   rule, [e["cost"] for e in entries])
    batch = batch or record.get("batch", 1)  # how many at once may change; not the estimate
    if concurrency > 1:
        from bayeval.evaluation.single import refuse_concurrency

        refuse_concurrency(concurrency, settings[0].evaluator)
    return _run(run, evaluators, batch, watch, record["suite"], Path(journal), truths,
                bool(record.get("group")), record.get("group_mean"), concurrency)


def _task_evaluators(settings: list[EvaluatorSettings], matrices: list[Any],
                     targets: list[str]) -> list[Any]:
    """Each task's evaluator; the harness in process loads the model once, for the first
    task, and every other task runs on that model (each task's requests built once)."""
    evaluators: list[Any] = []
    shared = None
    for st, matrix, target in zip(settings, matrices, targets, strict=True):
        evaluators.append(st.evaluator_for(matrix, [target], lm=shared))
        shared = shared or getattr(evaluators[-1], "lm", None)  # in process: its model
    return evaluators


def _journal_source(file: Path) -> dict[str, Any] | None:
    """The reference source a task's journal header names (None where its first line
    says none: the resume then reads and reports it as for one task)."""
    try:
        with open(file, encoding="utf-8") as f:
            source = json.loads(f.readline())["reference"]["source"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return source if isinstance(source, dict) and source else None


def _run(run, evaluators, batch, watch, label, journal, truths, group,
         group_mean, concurrency: int = 1) -> Any:
    from bayeval.estimators.interval import covers
    from bayeval.evaluators.base import closing

    try:
        with closing(evaluators), watched(watch, run, batch) as on_step:
            run.run(evaluators, batch, on_step=on_step, concurrency=concurrency)
    except KeyboardInterrupt as exc:
        if journal is not None:
            exc.add_note(f"bayeval evaluate --resume --journal {shlex.quote(str(journal))}")
        raise
    finally:
        for session in run.sessions:
            session.close()
    if any(s.n_observed == 0 for s in run.sessions):
        empty = [n for n, s in zip(run.names, run.sessions, strict=True) if not s.n_observed]
        raise EvaluationError(f"no item of {', '.join(empty)} was evaluated; there is no "
                              "estimate to report")
    result = run.result()
    for row, truth, session in zip(result["tasks"], truths, run.sessions, strict=True):
        meta = session.reference.metadata
        # the harness's own task and metric where the reference knows them (bundled
        # matrices the harness produced, harness logs); a group's subtasks are named so
        row.update(harness_task=None if group else meta.get("harness_task"),
                   metric=meta.get("metric"), filter=meta.get("filter"))
        row.update(target=session.target_id, true_score=truth,
                   covered=None if truth is None else bool(covers(row["lower"], row["upper"],
                                                                  truth)),
                   journal=None if session.journal_path is None else str(session.journal_path))
    known = all(t is not None for t in truths)
    true_avg = float(sum(w * t for w, t in zip(run.weights, truths, strict=True))) \
        if known else None
    first = run.sessions[0]
    metrics = {s.reference.metadata.get("metric") for s in run.sessions}
    for row, session in zip(result["tasks"], run.sessions, strict=True):
        row["documents_run"] = session.documents_sent  # what the model ran of this task
        row["documents_rerun"] = session.documents_rerun
    data = {"suite": label, "metric": metrics.pop() if len(metrics) == 1 else None,
            "group": label if group else None, "group_mean": group_mean,
            **result, "true_score": true_avg,
            "covered": None if true_avg is None else bool(covers(result["lower"],
                                                               result["upper"], true_avg)),
            "n_items": int(sum(s.n_items for s in run.sessions)),
            "method": first.method.name,
            # the ε asked for (each task's method runs with the suite's rule as its stop)
            "params": {**first.method.params, "epsilon": run.rule.epsilon},
            "level": first.method.level, "seed": first.seed, "epsilon": run.rule.epsilon,
            "task_epsilon": run.rule.task_epsilon,
            "journal": None if journal is None else str(journal),
            "documents_run": int(sum(s.documents_sent for s in run.sessions)),
            "documents_rerun": int(sum(s.documents_rerun for s in run.sessions)),
            **_harness_counts(evaluators)}
    return make_result(data, [(n, s.history) for n, s in zip(run.names, run.sessions,
                                                             strict=True)])


def _harness_counts(evaluators: list[Any]) -> dict[str, int]:
    """With the harness in process: how many times a model was loaded, and its calls,
    over the distinct evaluators (a group's subtasks share one); else nothing."""
    if not all(hasattr(e, "loaded_model") for e in evaluators):
        return {}
    distinct = {id(e): e for e in evaluators}.values()
    return {"harness_models_loaded": sum(e.loaded_model for e in distinct),
            "harness_launches": sum(e.launches for e in distinct)}
