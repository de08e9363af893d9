"""Reader for lm-evaluation-harness per-sample logs (``--log_samples``).

lm-evaluation-harness writes, under ``--output_path``, one folder per model (the model
name with ``/`` replaced by ``__``) holding, per run, ``results_<timestamp>.json`` (the
aggregate results, with the real ``model_name``, ``n-samples: {task: {original,
effective}}`` and ``group_subtasks``) and ``samples_<task>_<timestamp>.jsonl``: one JSON
object per line and per document, with ``doc_id``, ``doc``, ``target``, ``resps``,
``filter`` (the answer-extraction filter), ``metrics`` (the metric names), ``doc_hash``
(a hash of the document) and one top-level field per metric (``acc``, ``acc_norm``,
``exact_match``, ``prompt_level_strict_acc``, ...). Tasks with several filters (e.g.
``strict-match`` and ``flexible-extract``) write one line per document and filter.

:func:`read_lm_eval_samples` turns such logs for one task, or one group of tasks, into a
:class:`ScoreMatrix` (one row per model, one column per document):

* a model is named by its results file's ``model_name`` (the folder name when absent);
* of several runs of a task in one folder, the one with the most documents is kept (the
  newest among equals): a subset run (``--samples``, ``--limit``) written into the same
  folder never replaces a fuller run, and a :class:`SubsetRunWarning` says which was kept;
* every document's ``doc_hash`` must agree across models: logs of different dataset
  versions are a one-line :class:`~bayeval.errors.DataError` naming the first mismatch;
* a group (``leaderboard_musr``, an MMLU group) is read as one matrix of its subtasks'
  documents, with item ids ``<subtask>/<doc_id>``; a single task's ids are
  ``<task>-<doc_id:05d>``. Either way :func:`harness_samples` maps items back to the
  harness's ``{task: [doc indices]}``.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bayeval.data.io import parse_score
from bayeval.data.matrix import Kind, ScoreMatrix
from bayeval.errors import DataError

_STAMP = r"\d{4}-\d{2}-\d{2}T[\d\-.:]+"
_SAMPLES_NAME = re.compile(rf"^samples_(?P<task>.+)_(?P<stamp>{_STAMP})\.jsonl$")
_RESULTS_NAME = re.compile(rf"^results_(?P<stamp>{_STAMP})\.json$")
_SINGLE_ITEM = re.compile(r"^(?P<prefix>.+)-(?P<doc>\d+)$")
SOURCE = "lm-evaluation-harness"


class SubsetRunWarning(UserWarning):
    """A folder held a run of the task with fewer documents than the one kept."""


@dataclass
class SampleLog:
    """One samples file read for one metric and filter: scores and hashes by doc_id."""

    path: Path
    scores: dict[int, float]
    hashes: dict[int, str] = field(default_factory=dict)
    metric: str = ""


def _results_for(samples: Path) -> dict:
    """The results file of the run that wrote ``samples`` (same folder and timestamp),
    or ``{}`` when there is none or it cannot be read."""
    match = _SAMPLES_NAME.match(samples.name)
    if match is None:
        return {}
    path = samples.parent / f"results_{match['stamp']}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _default_model_id(path: Path) -> str:
    """The run's ``model_name`` from its results file, else the folder's name."""
    name = _results_for(path).get("model_name")
    return name if isinstance(name, str) and name.strip() else path.parent.name


def files_under(root: str | os.PathLike, pattern: str) -> list[Path]:
    """The files named like ``pattern`` anywhere under ``root``, symbolic links to folders
    followed (a folder of logs whose model folders are links to where the runs were
    written is read whole), each real folder once (a link back up is not walked again);
    sorted."""
    import fnmatch

    found, seen = [], set()
    for folder, subfolders, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            subfolders[:] = []
            continue
        seen.add(real)
        found += [Path(folder) / f for f in files if fnmatch.fnmatchcase(f, pattern)]
    return sorted(found)


def _runs(root: Path, task: str) -> dict[Path, list[tuple[str, Path]]]:
    """Every ``samples_<task>_<stamp>.jsonl`` under ``root``, by folder, oldest first.
    The task must match exactly: ``arc`` does not pick up ``samples_arc_challenge_...``."""
    runs: dict[Path, list[tuple[str, Path]]] = {}
    for path in files_under(root, "samples_*.jsonl"):
        match = _SAMPLES_NAME.match(path.name)
        if match is not None and match["task"] == task:
            runs.setdefault(path.parent, []).append((match["stamp"], path))
    return {folder: sorted(found) for folder, found in runs.items()}


def _line_count(path: Path) -> int:
    try:
        with open(path, "rb") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return 0


def find_sample_files(root: str | os.PathLike, task: str) -> list[Path]:
    """One ``samples_<task>_<timestamp>.jsonl`` per folder under ``root``: the run with
    the most documents, the newest among equals. A :class:`SubsetRunWarning` names every
    newer run that was passed over for having fewer documents."""
    root = Path(root)
    if not root.exists():
        raise DataError(f"{root}: no such file or folder")
    chosen = []
    for folder, found in sorted(_runs(root, task).items()):
        sizes = [(_line_count(path), stamp, path) for stamp, path in found]
        size, stamp, path = max(sizes)
        for other_size, other_stamp, _ in sizes:
            if other_stamp > stamp:
                warnings.warn(SubsetRunWarning(
                    f"{folder}: kept the {task} run of {stamp} ({size} lines), not the "
                    f"newer run of {other_stamp} with fewer ({other_size}: a subset run)"),
                    stacklevel=2)
        chosen.append(path)
    return chosen


def _metric_value(record: dict, metric: str, where: str) -> float:
    if metric not in record:
        names = record.get("metrics") or sorted(
            k for k, v in record.items()
            if isinstance(v, bool | int | float) and k not in ("doc_id",))
        raise DataError(f"{where}: no metric {metric!r} (this log has "
                        f"{', '.join(map(str, names))})")
    value = record[metric]
    if isinstance(value, list):  # instance-level metrics (e.g. inst_level_strict_acc)
        parts = [parse_score(v, where) for v in value]
        if not parts:
            return math.nan
        return float(np.mean(parts))
    return parse_score(value, f"{where}, metric {metric!r}")


def _first_metric(record: dict, where: str) -> str:
    names = record.get("metrics")
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0]
    raise DataError(f"{where}: no 'metrics' list to take a default metric from; "
                    "name one (--metric)")


def read_sample_log(path: str | os.PathLike, metric: str | None = None,
                    filter_name: str | None = None) -> SampleLog:
    """Scores and ``doc_hash`` by ``doc_id`` from one samples file, for ``metric`` (the
    log's first metric when None) and one filter."""
    path = Path(path)
    try:
        fh = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror})") from None

    def records():
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: not valid JSON ({exc.msg})") from None

    with fh:
        try:
            return parse_sample_records(records(), path, metric, filter_name)
        except UnicodeDecodeError:
            raise DataError(f"{path}: not UTF-8 text (not an lm-eval samples file)") from None


def parse_sample_records(records: Iterable[tuple[str, object]], path: Path | str,
                         metric: str | None = None,
                         filter_name: str | None = None) -> SampleLog:
    """One task's per-sample records (``(where, record)`` pairs: a file's lines, or the
    ``samples`` that ``lm_eval.simple_evaluate`` returns) for ``metric`` and one filter."""
    by_filter: dict[str, SampleLog] = {}
    for where, record in records:
        if not isinstance(record, dict) or "doc_id" not in record:
            raise DataError(f"{where}: no 'doc_id' field (not an lm-eval samples line)")
        try:
            doc_id = int(record["doc_id"])
        except (TypeError, ValueError, OverflowError):  # e.g. Infinity
            raise DataError(f"{where}: doc_id {record['doc_id']!r} is not an integer") \
                from None
        if doc_id < 0:
            raise DataError(f"{where}: doc_id {doc_id} is negative")
        name = str(record.get("filter", "none"))
        if filter_name is not None and name != filter_name:
            continue
        if metric is None:
            metric = _first_metric(record, where)
        log = by_filter.get(name)
        if log is None:  # (made once: a setdefault default would be made at every line)
            log = by_filter[name] = SampleLog(Path(path), {}, {}, metric)
        if doc_id in log.scores:
            raise DataError(f"{where}: duplicate doc_id {doc_id} for filter {name!r}")
        log.scores[doc_id] = _metric_value(record, metric, where)
        if isinstance(record.get("doc_hash"), str):
            log.hashes[doc_id] = record["doc_hash"]
    if filter_name is not None and filter_name not in by_filter:
        raise DataError(f"{path}: no lines with filter {filter_name!r}")
    if len(by_filter) > 1:
        raise DataError(f"{path}: several filters ({', '.join(sorted(by_filter))}); "
                        "choose one (--filter, filter_name=)")
    if not by_filter:
        raise DataError(f"{path}: no samples")
    return next(iter(by_filter.values()))


def read_sample_file(path: str | os.PathLike, metric: str,
                     filter_name: str | None = None) -> dict[int, float]:
    """Scores by ``doc_id`` from one samples file, for ``metric`` (and one filter)."""
    return read_sample_log(path, metric, filter_name).scores


def group_subtasks(root: str | os.PathLike, group: str) -> list[str]:
    """The leaf tasks of ``group`` as the results files under ``root`` record them
    (``group_subtasks``, nested groups expanded), in their recorded order; ``[]`` when no
    results file names the group."""
    tree: dict[str, list[str]] = {}
    for path in files_under(root, "results_*.json"):
        if _RESULTS_NAME.match(path.name) is None:
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        subtasks = data.get("group_subtasks") if isinstance(data, dict) else None
        if isinstance(subtasks, dict):
            for name, children in subtasks.items():
                if isinstance(children, list) and children and name not in tree:
                    tree[str(name)] = [str(c) for c in children]

    def leaves(name: str, seen: frozenset[str]) -> list[str]:
        if name not in tree or name in seen:
            return [name]
        return [leaf for child in tree[name] for leaf in leaves(child, seen | {name})]

    return leaves(group, frozenset()) if group in tree else []


def _check_hashes(logs: dict[str, SampleLog], task: str) -> None:
    """Every document's ``doc_hash`` the same in every model's log."""
    first: dict[int, tuple[str, str]] = {}
    for model, log in logs.items():
        for doc_id, digest in log.hashes.items():
            seen = first.setdefault(doc_id, (digest, model))
            if seen[0] != digest:
                raise DataError(
                    f"{log.path}: doc {doc_id} of {task} has doc_hash {digest[:12]}… but "
                    f"model {seen[1]!r} logged {seen[0][:12]}…: the logs are of different "
                    "versions of the dataset")


def _read_task(files: list[Path], task: str, metric: str | None, filter_name: str | None,
               model_id: Callable[[Path], str]) -> tuple[dict[str, SampleLog], str]:
    logs: dict[str, SampleLog] = {}
    for path in files:
        model = model_id(path)
        if model in logs:
            raise DataError(f"{path}: a second samples file for model {model!r} (first: "
                            f"{logs[model].path})")
        logs[model] = read_sample_log(path, metric, filter_name)
        metric = metric or logs[model].metric
    _check_hashes(logs, task)
    return logs, str(metric)


def _original_docs(files: list[Path], task: str) -> int | None:
    """The task's full document count, from a results file's ``n-samples``."""
    for path in files:
        counts = _results_for(path).get("n-samples")
        entry = counts.get(task) if isinstance(counts, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("original"), int):
            return entry["original"]
    return None


def read_lm_eval_samples(
    paths: str | os.PathLike | Sequence[str | os.PathLike],
    task: str,
    metric: str | None = None,
    filter_name: str | None = None,
    model_id: Callable[[Path], str] = _default_model_id,
    item_prefix: str | None = None,
    kind: Kind | None = None,
) -> ScoreMatrix:
    """A ScoreMatrix for ``task`` (a task or a group) and ``metric`` from
    lm-evaluation-harness sample logs.

    Parameters
    ----------
    paths: an ``--output_path`` folder (searched recursively), or a list of samples files.
    task: the task name as in the file names (e.g. ``leaderboard_ifeval``), or a group
        its results files list in ``group_subtasks`` (e.g. ``leaderboard_musr``).
    metric: the per-sample field to read (``acc``, ``exact_match``, ...; default: the
        log's first metric). Booleans become 0/1; a list (instance-level) its mean.
    filter_name: which filter's lines to read when a task logs several.
    model_id: maps a samples file to its model id (default: the run's ``model_name``).
    item_prefix: single-task item ids are ``f"{item_prefix}-{doc_id:05d}"`` (default: the
        task name); a group's are ``<subtask>/<doc_id>``.
    """
    if isinstance(paths, str | os.PathLike):
        root = Path(paths)
        if root.is_dir():
            files = find_sample_files(root, task)
            if not files:
                leaves = group_subtasks(root, task)
                if leaves:
                    return _read_group(root, task, leaves, metric, filter_name, model_id,
                                       kind)
        else:
            files = [root]
    else:
        files = [Path(p) for p in paths]
    if not files:
        raise DataError(f"{paths}: no samples_{task}_<timestamp>.jsonl files found (and no "
                        f"results file lists {task!r} as a group)")
    logs, metric = _read_task(files, task, metric, filter_name, model_id)
    doc_ids = sorted({d for log in logs.values() for d in log.scores})
    prefix = item_prefix if item_prefix is not None else task
    items = [f"{prefix}-{d:05d}" for d in doc_ids]
    meta = {"source": SOURCE, "task": task, "metric": metric}
    if filter_name is not None:
        meta["filter"] = filter_name
    original = _original_docs(files, task)
    meta["subtasks"] = f"{task}:{original if original is not None else doc_ids[-1] + 1}"
    return _matrix(logs, doc_ids, items, task, kind, meta)


def _matrix(logs: dict[str, SampleLog], doc_ids: list, items: list[str], name: str,
            kind: Kind | None, meta: dict[str, str]) -> ScoreMatrix:
    column = {d: j for j, d in enumerate(doc_ids)}
    matrix = np.full((len(logs), len(doc_ids)), np.nan)
    for i, log in enumerate(logs.values()):
        for d, s in log.scores.items():
            matrix[i, column[d]] = s
    return ScoreMatrix(matrix, list(logs), items, kind=kind, name=f"lm-eval:{name}",
                       metadata=meta)


def _read_group(root: Path, group: str, leaves: list[str], metric: str | None,
                filter_name: str | None, model_id: Callable[[Path], str],
                kind: Kind | None) -> ScoreMatrix:
    """The subtasks of ``group`` side by side, item ids ``<subtask>/<doc_id>``; a model
    missing from a subtask has NaN there."""
    merged: dict[str, SampleLog] = {}
    keys: list[tuple[str, int]] = []
    counts = []
    for leaf in leaves:
        files = find_sample_files(root, leaf)
        if not files:
            raise DataError(f"{root}: group {group!r} lists subtask {leaf!r} but no "
                            f"samples_{leaf}_<timestamp>.jsonl file holds it")
        logs, metric = _read_task(files, leaf, metric, filter_name, model_id)
        doc_ids = sorted({d for log in logs.values() for d in log.scores})
        keys += [(leaf, d) for d in doc_ids]
        original = _original_docs(files, leaf)
        counts.append(f"{leaf}:{original if original is not None else doc_ids[-1] + 1}")
        for model, log in logs.items():
            into = merged.setdefault(model, SampleLog(log.path, {}, {}, str(metric)))
            into.scores.update({(leaf, d): s for d, s in log.scores.items()})
    meta = {"source": SOURCE, "task": group, "metric": str(metric),
            "subtasks": ",".join(counts)}
    if filter_name is not None:
        meta["filter"] = filter_name
    return _matrix(merged, keys, [f"{leaf}/{d}" for leaf, d in keys], group, kind, meta)


def parse_subtasks(text: str | None) -> list[tuple[str, int]]:
    """``"a:250,b:256"`` (a matrix's ``subtasks`` metadata) as ``[("a", 250), ("b", 256)]``."""
    out = []
    for part in (text or "").split(","):
        name, _, count = part.strip().rpartition(":")
        if name and count.isdigit():
            out.append((name, int(count)))
    return out


def harness_docs(items: Sequence[str], task: str,
                 subtasks: Sequence[tuple[str, int]] = ()) -> list[tuple[str, int]]:
    """The ``(task, doc index)`` of every item, for ``lm_eval --samples``.

    ``<subtask>/<doc_id>`` ids (a group read from logs) go to their subtask. ``<x>-<n>``
    ids go to ``task``, or, when ``subtasks`` gives a split of the columns in order (the
    bundled MuSR: 250, 256, 250 documents), ``n`` is a column index split over them. Every
    index is checked against its subtask's document count where known; the ``<x>-<n>``
    ids must share one prefix ``x`` (the items of one matrix), and no two items may be
    the same document."""
    counts = dict(subtasks)
    offsets = []
    start = 0
    for name, count in subtasks:
        offsets.append((start, start + count, name))
        start += count
    out = []
    seen: dict[tuple[str, int], str] = {}
    prefix = None
    for item in items:
        name, sep, doc = str(item).rpartition("/")
        if sep and doc.isdigit():
            key, index = name, int(doc)
        else:
            match = _SINGLE_ITEM.match(str(item))
            if match is None:
                raise DataError(f"item {item!r} carries no doc index (ids look like "
                                "'<task>-<doc_id>' or '<subtask>/<doc_id>')")
            prefix = prefix or match["prefix"]
            if match["prefix"] != prefix:
                raise DataError(f"item {item!r} is not an item of {task}: its items are "
                                f"'{prefix}-<doc_id>'")
            key, index = task, int(match["doc"])
            if len(offsets) > 1:
                hit = [(lo, name) for lo, hi, name in offsets if lo <= index < hi]
                if not hit:
                    raise DataError(f"item {item!r}: column {index} is beyond the "
                                    f"{start} documents of {task}'s subtasks")
                key, index = hit[0][1], index - hit[0][0]
        if key in counts and index >= counts[key]:
            raise DataError(f"item {item!r}: doc {index} is beyond the {counts[key]} "
                            f"documents of {key}")
        if (key, index) in seen:
            raise DataError(f"items {seen[key, index]!r} and {item!r} are the same doc "
                            f"{index} of {key}")
        seen[key, index] = str(item)
        out.append((key, index))
    return out


def subtask_columns(matrix: ScoreMatrix) -> list[tuple[str, np.ndarray]]:
    """Each subtask of a harness group's matrix with its columns, in the group's order
    (its ``subtasks`` metadata; items ``<subtask>/<doc_id>`` read from the harness's logs,
    or ``<x>-<n>`` split over the subtasks in column order, as the bundled MuSR); [] for
    a matrix of one task or one that names no subtasks."""
    counts = parse_subtasks(matrix.metadata.get("subtasks"))
    if len(counts) < 2:
        return []
    keys = np.array([k for k, _ in harness_docs(matrix.items, harness_task(matrix) or "",
                                                counts)])
    return [(name, np.flatnonzero(keys == name)) for name, _ in counts
            if (keys == name).any()]


def subtask_matrix(matrix: ScoreMatrix, subtask: str,
                   columns: np.ndarray | None = None) -> ScoreMatrix:
    """The columns of one ``subtask`` of a harness group's matrix (``columns``: those
    :func:`subtask_columns` gave it, when the caller has them). Its metadata stays the
    group's (the item ids resolve to documents through it) with ``subtask`` added."""
    if columns is None:
        every = dict(subtask_columns(matrix))
        if subtask not in every:
            raise DataError(f"{matrix.name}: no subtask {subtask!r} (subtasks: "
                            f"{', '.join(every) or 'none'})")
        columns = every[subtask]
    part = matrix.select_items(columns)
    return ScoreMatrix(part.scores, part.models, part.items, name=f"{matrix.name}:{subtask}",
                       metadata={**matrix.metadata, "subtask": subtask})


def harness_samples(items: Sequence[str], task: str,
                    subtasks: Sequence[tuple[str, int]] = ()) -> dict[str, list[int]]:
    """``{task: [doc indices]}`` for ``lm_eval --samples`` (see :func:`harness_docs`)."""
    out: dict[str, list[int]] = {}
    for key, index in harness_docs(items, task, subtasks):
        out.setdefault(key, []).append(index)
    for docs in out.values():
        docs.sort()
    return out


def harness_task(matrix: ScoreMatrix) -> str | None:
    """The lm-evaluation-harness task a matrix holds: ``harness_task`` in its metadata (the
    bundled matrices the harness made), or ``task`` when it was read from harness logs
    (directly or through a file that kept the metadata); None otherwise."""
    meta = matrix.metadata
    if meta.get("harness_task"):
        return meta["harness_task"]
    if meta.get("source") == SOURCE and meta.get("task"):
        return meta["task"]
    return None
