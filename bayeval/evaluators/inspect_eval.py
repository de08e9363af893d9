"""The target run on the asked samples by Inspect AI, in this process.

:class:`InspectEvaluator` holds an Inspect task and a model, built once, and evaluates a
batch of asked items (Inspect sample ids) with one ``inspect_ai.eval(task, model=…,
sample_id=[…])`` call: only those samples run, and each call leaves its own eval log in
``log_dir``, so that the target's logs can later join the reference
(:mod:`bayeval.data.inspect_logs` reads them). A sample's score is read the way the
reference's are (the scorer named by ``metric``, Inspect's ``value_to_float``, epochs
averaged). Like the harness evaluators (:mod:`bayeval.evaluators.harness`) it exposes
``evaluate_batch(items) -> list[float | EvaluationError]``, which
:meth:`bayeval.Session.run` calls once per batch, and ``launches``.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bayeval.data.inspect_logs import ESTIMATE_KEY, sample_score, split_metric
from bayeval.data.matrix import validate_score
from bayeval.errors import DataError, EvaluationError
from bayeval.evaluators.base import BatchEvaluator
from bayeval.evaluators.harness_results import TaskEstimate

__all__ = ["InspectEvaluator", "load_task", "write_estimate_log"]


def load_task(spec: str) -> Any:
    """The Inspect task a ``--inspect-task`` names: ``FILE.py@NAME`` is imported here,
    once, and the task built with its defaults,
    so that whatever the file registers (a model provider, say) exists before the model
    is built; any other spec (a registered name such as ``inspect_evals/gsm8k``) is
    handed to Inspect as it is."""
    from inspect_ai import Task

    path, _, name = spec.partition("@")
    if not path.endswith(".py"):
        return spec
    file = Path(path)
    if not file.is_file():
        raise EvaluationError(f"--inspect-task {spec}: no such file {file}")
    module_name = f"bayeval_inspect_task_{abs(hash(str(file.resolve())))}"
    module = sys.modules.get(module_name)
    if module is None:
        loader = importlib.util.spec_from_file_location(module_name, file)
        module = importlib.util.module_from_spec(loader)
        try:
            loader.loader.exec_module(module)
        except Exception as exc:
            raise EvaluationError(f"--inspect-task {spec}: {file} does not load "
                                  f"({type(exc).__name__}: {exc})") from None
        sys.modules[module_name] = module
    found = getattr(module, name, None) if name else None
    if not callable(found):
        tasks = sorted(k for k, v in vars(module).items()
                       if callable(v) and getattr(v, "__module__", None) == module_name
                       and not k.startswith("_"))
        raise EvaluationError(f"--inspect-task {spec}: name the task as {file}@NAME; "
                              f"{file} has {'no ' + repr(name) if name else 'several'} "
                              f"(its functions: {', '.join(tasks) or 'none'})")
    try:
        built = found()
    except Exception as exc:
        raise EvaluationError(f"--inspect-task {spec}: the task does not build "
                              f"({type(exc).__name__}: {exc})") from None
    if not isinstance(built, Task):
        raise EvaluationError(f"--inspect-task {spec}: {name}() gave a "
                              f"{type(built).__name__}, not an Inspect Task")
    return built


def _sample_id(item: str) -> str | int:
    """Inspect's id of ``item``: an integer where it reads as one (Inspect numbers the
    samples of a dataset without ids 1, 2, …), else the string."""
    return int(item) if item.lstrip("-").isdigit() else item


class InspectEvaluator(BatchEvaluator):
    """Scores asked items with Inspect (module docstring). ``task``: an Inspect ``Task``
    or a task spec (``file.py@name``, loaded once by :func:`load_task`); ``model``: an
    Inspect ``Model`` or a model name (``provider/model``), built once here, after the
    task; ``metric``: the scorer (``SCORER:KEY`` for a
    dict value; default: the only one); ``eval_args``: further arguments of
    ``inspect_ai.eval`` (``epochs``, ``max_connections``, …)."""

    def __init__(self, task: Any, model: Any, log_dir: str | Path, metric: str | None = None,
                 **eval_args: Any) -> None:
        try:
            from inspect_ai.model import get_model
        except ImportError:
            raise EvaluationError("--evaluator inspect needs Inspect AI: pip install "
                                  "'bayeval[inspect]'") from None
        self.task = load_task(task) if isinstance(task, str) else task
        try:
            self.model = get_model(model) if isinstance(model, str) else model
        except Exception as exc:  # an unknown provider, a missing API key, …
            message = str(exc).strip().splitlines()
            raise EvaluationError(f"Inspect model {model!r}: {type(exc).__name__}"
                                  f"{': ' + message[0][:200] if message else ''}") from None
        self.log_dir = Path(log_dir)
        self.scorer, self.key = split_metric(metric)
        self.eval_args = eval_args
        self.launches = 0

    def evaluate_batch(self, items: Sequence[str]) -> list[float | EvaluationError]:
        """Each item's score, or the EvaluationError that kept it from one, from one
        Inspect run of those samples."""
        from inspect_ai import eval as inspect_eval

        self.launches += 1
        try:
            logs = inspect_eval(self.task, model=self.model,
                                sample_id=[_sample_id(str(i)) for i in items],
                                log_dir=str(self.log_dir), display="none", **self.eval_args)
        except Exception as exc:  # Inspect's own errors, a task that does not load, …
            message = str(exc).splitlines()[0][:200] if str(exc) else ""
            return [EvaluationError(f"Inspect: {type(exc).__name__}: {message}")
                    for _ in items]
        log = logs[0]
        if log.status != "success" and not log.samples:
            reason = log.error.message.splitlines()[0][:200] if log.error else log.status
            return [EvaluationError(f"Inspect run {log.status}: {reason}") for _ in items]
        scores: dict[str, list[float]] = {}
        failed: dict[str, str] = {}
        for sample in log.samples or []:
            where = f"sample {sample.id!r} epoch {sample.epoch}"
            if sample.error is not None:
                failed[str(sample.id)] = f"{where}: {sample.error.message.splitlines()[0]}"
                continue
            try:
                value = sample_score(sample, self.scorer, self.key, where)
            except DataError as exc:
                failed[str(sample.id)] = str(exc)
                continue
            if value is not None:
                scores.setdefault(str(sample.id), []).append(value)
        out: list[float | EvaluationError] = []
        for item in items:
            if str(item) in scores:
                try:
                    out.append(validate_score(float(np.mean(scores[str(item)])),
                                              f"item {item!r}: Inspect's score"))
                except DataError as exc:  # e.g. a scorer's value outside [0, 1]
                    out.append(EvaluationError(str(exc)))
            else:
                out.append(EvaluationError(failed.get(str(item), f"item {item!r}: Inspect "
                                                      "logged no score for it")))
        return out


def write_estimate_log(log_dir: str | Path, path: str | Path, estimate: TaskEstimate,
                       info: dict[str, Any], metric: str | None = None) -> Path:
    """The estimate of an ``--evaluator inspect`` run as one Inspect eval log that
    ``inspect view`` opens: the header of the target's logs under ``log_dir`` (task,
    model, dataset), every sample they scored (a sample asked again after a SIGKILL once),
    and as the scorer's metrics the estimate (``accuracy``), its standard error (the
    interval's half-width over z), the interval (``lower``, ``upper``) and the items
    evaluated of all; its ``eval.metadata["bayeval"]`` says it is an estimate and how it
    was made (``info``; the reference reader passes over such logs: its samples are in
    the batch logs). ``path``: a ``.eval``/``.json`` file, or a folder for a named one."""
    import datetime

    from inspect_ai.log import (
        EvalMetric,
        EvalResults,
        EvalScore,
        list_eval_logs,
        read_eval_log,
        write_eval_log,
    )

    logs = [read_eval_log(info) for info in list_eval_logs(str(log_dir))]
    logs = sorted((lg for lg in logs if lg.status == "success"
                   and ESTIMATE_KEY not in (lg.eval.metadata or {})),
                  key=lambda lg: str(lg.eval.created))
    if not logs:
        raise EvaluationError(f"{log_dir}: no finished Inspect log of the target to build "
                              "the estimate's log from")
    samples = {}
    for lg in logs:
        for sample in lg.samples or []:
            samples[(str(sample.id), sample.epoch)] = sample
    scorer, _ = split_metric(metric)
    if scorer is None:
        names = sorted({n for s in samples.values() for n in (s.scores or {})})
        scorer = names[0] if len(names) == 1 else "score"
    out = logs[-1].model_copy(deep=True)
    out.samples = [samples[k] for k in sorted(samples)]
    metrics = {"accuracy": estimate.value, "stderr": estimate.stderr,
               "lower": estimate.lower, "upper": estimate.upper}
    out.results = EvalResults(
        total_samples=int(estimate.n_items), completed_samples=int(estimate.evaluated),
        scores=[EvalScore(name=scorer, scorer=scorer, scored_samples=int(estimate.evaluated),
                          unscored_samples=0,
                          metrics={k: EvalMetric(name=k, value=float(v))
                                   for k, v in metrics.items()})])
    record = {"estimate": True, "level": estimate.level, **info,
              "items_used": estimate.evaluated, "n_items": estimate.n_items}
    out.eval.metadata = {**(out.eval.metadata or {}), ESTIMATE_KEY: record}
    out.eval.created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    target = Path(path)
    if target.is_dir() or not target.suffix:
        target.mkdir(parents=True, exist_ok=True)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H-%M-%S")
        target = target / f"{stamp}_{out.eval.task}_bayeval-estimate.eval"
    write_eval_log(out, str(target))
    return target
