"""Earlier models' per-sample scores from Inspect AI eval logs.

Inspect (``inspect-ai``) writes one log per (task, model) run, ``.eval`` or ``.json``, in
its log folder; each sample there holds its scores (one per scorer), epoch, token usage
and time. :func:`read_inspect` reads a folder of such logs into the reference of one
task: a model per log (its ``eval.model``), an item per sample id, the score of one scorer
turned into a number the way Inspect's own metrics do (``value_to_float``: C → 1, I → 0,
P → 0.5, N → 0, booleans and numbers as they are), several epochs of a sample averaged.
Each sample's tokens (summed over the models a sample called) and seconds are kept beside
the scores as its costs. Only logs whose run finished (``status == "success"``) are read;
the others are named in a warning. bayeval's own estimate logs (``eval.metadata`` with
``"bayeval"``, written by :func:`bayeval.evaluators.inspect_eval.write_estimate_log`) are passed
over: their samples are in the target's batch logs beside them.
"""

from __future__ import annotations

import functools
import math
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bayeval.data.matrix import ScoreMatrix, check_repeated_models, number_repeated_ids
from bayeval.errors import DataError

__all__ = ["ESTIMATE_KEY", "INSPECT_PREFIX", "InspectReference", "InspectWarning", "read_inspect",
           "read_inspect_logs", "sample_score", "split_metric"]

INSPECT_PREFIX = "inspect:"
# the eval metadata key of bayeval's estimate log (bayeval.evaluators.inspect_eval), whose
# samples are those of the target's own batch logs: the reader passes over it
ESTIMATE_KEY = "bayeval"


class InspectWarning(UserWarning):
    """An Inspect log was passed over (its run did not finish)."""


class InspectReference(NamedTuple):
    """A task's reference from Inspect logs: the score ``matrix`` and, aligned with it,
    each (model, sample)'s ``tokens`` and ``seconds`` (NaN where the log has none)."""

    matrix: ScoreMatrix
    tokens: np.ndarray
    seconds: np.ndarray


# the parts of a sample the reader does not need
_TRANSCRIPT = {"events", "messages", "attachments", "store"}


def _read(log: Any, where: Any, **options: Any) -> Any:
    """``inspect_ai.log.read_eval_log(where, **options)``, an unreadable log a one-line
    error naming it."""
    try:
        return log.read_eval_log(where, **options)
    except Exception as exc:  # Inspect raises its own and pydantic's errors
        name = getattr(where, "name", where)
        raise DataError(f"{name}: not a readable Inspect log "
                        f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
                        ) from None


@functools.cache
def _inspect() -> Any:
    try:
        from inspect_ai import log
        from inspect_ai.scorer import value_to_float
    except ImportError:
        raise DataError("reading Inspect logs needs Inspect AI: pip install "
                        "'bayeval[inspect]'") from None
    return log, value_to_float()


def _score(value: Any, key: str | None, where: str, to_float: Any) -> float:
    """One sample's score: ``value`` (or its ``key`` for a scorer that returns a dict)
    as a number."""
    if isinstance(value, dict):
        if key is None:
            raise DataError(f"{where}: the scorer's value holds {sorted(value)}; name one "
                            "with --metric SCORER:KEY")
        if key not in value:
            raise DataError(f"{where}: the scorer's value has no {key!r} (it holds "
                            f"{sorted(value)})")
        value = value[key]
    elif key is not None:
        raise DataError(f"{where}: the scorer's value is one number, not a dict with "
                        f"{key!r}; drop ':{key}'")
    try:
        number = float(to_float(value))
    except (TypeError, ValueError):
        raise DataError(f"{where}: score {value!r} is not a number nor one of Inspect's "
                        "C/I/P/N") from None
    if not math.isfinite(number):
        raise DataError(f"{where}: score {value!r} is not finite")
    return number


def split_metric(metric: str | None) -> tuple[str | None, str | None]:
    """(scorer, key) of ``--metric SCORER`` or ``SCORER:KEY`` (None: not given)."""
    if not metric:
        return None, None
    scorer, _, key = metric.partition(":")
    return scorer, key or None


def sample_score(sample: Any, scorer: str | None, key: str | None, where: str
                 ) -> float | None:
    """An Inspect sample's score by ``scorer`` (None: its only scorer) as a number (None
    when that scorer did not score it)."""
    _, to_float = _inspect()
    scores = sample.scores or {}
    if scorer is None:
        if len(scores) > 1:
            raise DataError(f"{where}: scored by {sorted(scores)}; name one with --metric")
        scorer = next(iter(scores), None)
    if scorer not in scores:
        return None
    return _score(scores[scorer].value, key, where, to_float)


def _tokens(sample: Any) -> float:
    usage = getattr(sample, "model_usage", None) or {}
    total = [u.total_tokens for u in usage.values() if u is not None]
    return float(sum(total)) if total else math.nan


def read_inspect(folder: str | Path, task: str | None = None, metric: str | None = None,
                 repeated_models: str = "error") -> InspectReference:
    """The reference of ``task`` (default: the only task in the logs) from the Inspect
    logs under ``folder`` (module docstring). ``metric`` names the scorer (default: the
    only one), ``SCORER:KEY`` a key of a scorer whose value is a dict. A model's finished
    logs of the task that score different samples (a run in batches) make one row; two
    that score the same sample are an error, or with ``repeated_models="number"`` each
    log is its own row (``model#2`` …)."""
    log, _ = _inspect()
    root = Path(folder)
    if not root.is_dir():
        raise DataError(f"{root}: no such folder (--reference inspect:LOG_DIR names "
                        "Inspect's --log-dir)")
    check_repeated_models(repeated_models)
    infos = log.list_eval_logs(str(root), recursive=True)
    if not infos:
        raise DataError(f"{root}: no Inspect eval logs (.eval or .json) in it")
    # the headers say each log's task and status; only the chosen logs' samples are read,
    # without their transcripts (an agent's can be most of a log's bytes)
    logs = [_read(log, info, header_only=True) for info in infos]
    tasks = sorted({lg.eval.task for lg in logs})
    if task is None:
        if len(tasks) > 1:
            raise DataError(f"{root}: logs of several tasks {tasks}; give --task NAME")
        task = tasks[0]
    elif task not in tasks:
        raise DataError(f"{root}: no log of task {task!r} (tasks: {', '.join(tasks)})")
    mine = [lg for lg in logs if lg.eval.task == task
            and ESTIMATE_KEY not in (lg.eval.metadata or {})]
    unfinished = [lg for lg in mine if lg.status != "success"]
    if unfinished:
        warnings.warn(f"{root}: passed over {len(unfinished)} log(s) of {task} whose run "
                      f"did not finish ({', '.join(sorted({lg.status for lg in unfinished}))}"
                      f"): {', '.join(Path(lg.location).name for lg in unfinished[:3])}",
                      InspectWarning, stacklevel=2)
    mine = [_read(log, lg.location, exclude_fields=_TRANSCRIPT) for lg in
            sorted((lg for lg in mine if lg.status == "success"),
                   key=lambda lg: (str(lg.eval.model), str(lg.eval.created)))]
    if not mine:
        raise DataError(f"{root}: no finished log of task {task!r}")
    scorer, key = split_metric(metric)
    if scorer is None:
        names = sorted({name for lg in mine for s in lg.samples or [] for name in
                        (s.scores or {})})
        if len(names) != 1:
            raise DataError(f"{root}: task {task!r} is scored by "
                            f"{names or 'no scorer'}; name one with --metric SCORER")
        scorer = names[0]
    rows: list[dict[str, tuple[float, float, float]]] = []
    models: list[str] = []
    items: dict[str, None] = {}
    for lg in mine:
        per: dict[str, list[tuple[float, float, float]]] = {}
        seen: dict[tuple[str, object], object] = {}  # (id as text, epoch) → the id
        for sample in lg.samples or []:
            where = f"{Path(lg.location).name}, sample {sample.id!r} epoch {sample.epoch}"
            place = (str(sample.id), sample.epoch)
            if place in seen:
                other = seen[place]
                if type(other) is type(sample.id) and other == sample.id:
                    raise DataError(f"{where}: the sample is logged twice in this epoch "
                                    "(an item has one score per epoch)")
                raise DataError(f"{where}: ids {other!r} and {sample.id!r} differ only in "
                                "type (a number and a text); give the samples distinct ids")
            seen[place] = sample.id
            value = sample_score(sample, scorer, key, where)
            if value is None:
                continue  # an unscored sample (e.g. Score.unscored or an error): missing
            seconds = sample.total_time if sample.total_time is not None else math.nan
            per.setdefault(str(sample.id), []).append((value, _tokens(sample), seconds))
        if not per:
            raise DataError(f"{Path(lg.location).name}: no sample of {task} is scored by "
                            f"{scorer!r}")
        items.update(dict.fromkeys(per))
        row = {i: tuple(np.mean(v, axis=0)) for i, v in per.items()}
        model = str(lg.eval.model)
        # a model's logs of other samples (a run in batches, bayeval's own included) are
        # one row; a sample scored in two of its logs is a rerun
        if model in models and repeated_models == "error":
            earlier = rows[models.index(model)]
            twice = sorted(set(earlier) & set(row))
            if twice:
                raise DataError(f"{root}: model {model!r} has several finished logs of "
                                f"{task} scoring the same samples (e.g. {twice[0]!r}); keep "
                                "one, or number them (repeated_models='number', "
                                "--repeated-models number)")
            earlier.update(row)
            continue
        rows.append(row)
        models.append(model)
    repeats = len(set(models)) < len(models)
    ids = list(items)
    cube = np.full((len(rows), len(ids), 3), np.nan)
    col = {i: j for j, i in enumerate(ids)}
    for r, row in enumerate(rows):
        for i, v in row.items():
            cube[r, col[i]] = v
    if repeats:  # repeated_models="number": each log its own row
        models = list(number_repeated_ids(np.asarray(models)))
    name = f"inspect:{task}"
    matrix = ScoreMatrix(cube[..., 0], models, ids, name=name,
                         metadata={"source": "inspect", "task": task,
                                   "metric": scorer if key is None else f"{scorer}:{key}"})
    return InspectReference(matrix, cube[..., 1], cube[..., 2])


def read_inspect_logs(folder: str | Path, task: str | None = None,
                      metric: str | None = None,
                      repeated_models: str = "error") -> ScoreMatrix:
    """The score matrix of :func:`read_inspect`."""
    return read_inspect(folder, task, metric, repeated_models).matrix

