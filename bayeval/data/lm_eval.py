"""Reader for lm-evaluation-harness per-sample logs (``--log_samples``).

lm-evaluation-harness writes, under ``--output_path``, one folder per model (the model
name with ``/`` replaced by ``__``) holding ``samples_<task>_<timestamp>.jsonl``: one JSON
object per line and per document, with ``doc_id``, ``doc``, ``target``, ``resps``,
``filtered_resps``, ``filter`` (the name of the answer-extraction filter), ``metrics`` (the
names of the metrics) and one top-level field per metric (``acc``, ``acc_norm``,
``exact_match``, ``prompt_level_strict_acc``, ...). Tasks with several filters (e.g.
``strict-match`` and ``flexible-extract``) write one line per document and filter.

:func:`read_lm_eval_samples` turns such logs for one task into a :class:`ScoreMatrix`
(one row per model, one column per ``doc_id``) for the metric the caller chooses.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bayeval.data.io import parse_score
from bayeval.data.matrix import Kind, ScoreMatrix
from bayeval.errors import DataError

_SAMPLES_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<stamp>\d{4}-\d{2}-\d{2}T[\d\-.:]+)\.jsonl$")


def _default_model_id(path: Path) -> str:
    return path.parent.name


def find_sample_files(root: str | os.PathLike, task: str) -> list[Path]:
    """``samples_<task>_<timestamp>.jsonl`` files under ``root``, newest run per folder.

    The task must match exactly: ``arc`` does not pick up ``samples_arc_challenge_...``.
    """
    root = Path(root)
    if not root.exists():
        raise DataError(f"{root}: no such file or folder")
    newest: dict[Path, tuple[str, Path]] = {}
    for path in sorted(root.rglob("samples_*.jsonl")):
        match = _SAMPLES_NAME.match(path.name)
        if match is None or match["task"] != task:
            continue
        stamp = match["stamp"]
        if path.parent not in newest or stamp > newest[path.parent][0]:
            newest[path.parent] = (stamp, path)
    return [p for _, p in sorted(newest.values(), key=lambda sp: str(sp[1]))]


def _metric_value(record: dict, metric: str, where: str) -> float:
    if metric not in record:
        names = record.get("metrics") or sorted(
            k for k, v in record.items()
            if isinstance(v, bool | int | float) and k not in ("doc_id",))
        raise DataError(f"{where}: no metric {metric!r} (this log has {', '.join(names)})")
    value = record[metric]
    if isinstance(value, list):  # instance-level metrics (e.g. inst_level_strict_acc)
        parts = [parse_score(v, where) for v in value]
        if not parts:
            return math.nan
        return float(np.mean(parts))
    return parse_score(value, f"{where}, metric {metric!r}")


def read_sample_file(path: str | os.PathLike, metric: str,
                     filter_name: str | None = None) -> dict[int, float]:
    """Scores by ``doc_id`` from one samples file, for ``metric`` (and one filter)."""
    path = Path(path)
    by_filter: dict[str, dict[int, float]] = {}
    try:
        fh = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    with fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(record, dict) or "doc_id" not in record:
                raise DataError(f"{where}: no 'doc_id' field (not an lm-eval samples line)")
            try:
                doc_id = int(record["doc_id"])
            except (TypeError, ValueError, OverflowError):  # e.g. Infinity
                raise DataError(f"{where}: doc_id {record['doc_id']!r} is not an integer") \
                    from None
            name = str(record.get("filter", "none"))
            if filter_name is not None and name != filter_name:
                continue
            scores = by_filter.setdefault(name, {})
            if doc_id in scores:
                raise DataError(f"{where}: duplicate doc_id {doc_id} for filter {name!r}")
            scores[doc_id] = _metric_value(record, metric, where)
    if filter_name is not None and filter_name not in by_filter:
        raise DataError(f"{path}: no lines with filter {filter_name!r}")
    if len(by_filter) > 1:
        raise DataError(f"{path}: several filters ({', '.join(sorted(by_filter))}); "
                        "choose one with filter_name=")
    if not by_filter:
        raise DataError(f"{path}: no samples")
    return next(iter(by_filter.values()))


def read_lm_eval_samples(
    paths: str | os.PathLike | Sequence[str | os.PathLike],
    task: str,
    metric: str,
    filter_name: str | None = None,
    model_id: Callable[[Path], str] = _default_model_id,
    item_prefix: str | None = None,
    kind: Kind | None = None,
) -> ScoreMatrix:
    """A ScoreMatrix for ``task`` and ``metric`` from lm-evaluation-harness sample logs.

    Parameters
    ----------
    paths: an ``--output_path`` folder (searched recursively), or a list of samples files.
    task: the task name as in the file names (e.g. ``leaderboard_ifeval``).
    metric: the per-sample field to read (``acc``, ``exact_match``, ...). Booleans become
        0/1; a list (instance-level metric) becomes its mean.
    filter_name: which filter's lines to read when a task logs several.
    model_id: maps a samples file to its model id (default: its folder's name).
    item_prefix: item ids are ``f"{item_prefix}-{doc_id:05d}"`` (default: the task name).
    """
    if isinstance(paths, str | os.PathLike):
        root = Path(paths)
        files = find_sample_files(root, task) if root.is_dir() else [root]
    else:
        files = [Path(p) for p in paths]
    if not files:
        raise DataError(f"{paths}: no samples_{task}_<timestamp>.jsonl files found")
    rows: dict[str, dict[int, float]] = {}
    for path in files:
        model = model_id(path)
        if model in rows:
            raise DataError(f"{path}: a second samples file for model {model!r}")
        rows[model] = read_sample_file(path, metric, filter_name)
    doc_ids = sorted({d for scores in rows.values() for d in scores})
    column = {d: j for j, d in enumerate(doc_ids)}
    matrix = np.full((len(rows), len(doc_ids)), np.nan)
    for i, scores in enumerate(rows.values()):
        for d, s in scores.items():
            matrix[i, column[d]] = s
    prefix = item_prefix if item_prefix is not None else task
    items = [f"{prefix}-{d:05d}" for d in doc_ids]
    return ScoreMatrix(matrix, list(rows), items, kind=kind, name=f"lm-eval:{task}",
                       metadata={"source": "lm-evaluation-harness", "task": task,
                                 "metric": metric})
