"""Frozen benchmark subsets: a JSON file format, and export for lm-evaluation-harness.

A subset file is one JSON object::

    {"format": "bayeval-subset", "version": 1,
     "benchmark": "arc_challenge", "task": "arc_challenge", "n_items": 1172,
     "items": ["arc_challenge-00012", ...], "size": 117, "weights": null,
     "method": "mince", "parameters": {...}, "seed": 42,
     "calibration_models": [...], "drift": {"held_out_max": 0.021, ...}}

``weights`` (same length as ``items``, summing to 1) is present only when the estimate is a
weighted mean (stratified and k-means subsets); otherwise the estimate is the plain mean.

lm-evaluation-harness runs a subset with ``lm_eval ... --samples FILE`` where FILE holds
``{"task_name": [doc indices]}``. Item ids carry the doc index: ``<task>-<doc_id>`` for a
single task, ``<subtask>/<doc_id>`` for a group read from logs, or a column index split
over ``subtasks`` (``[[name, documents], ...]``, as the bundled MuSR records its three);
:func:`bayeval.data.lm_eval.harness_samples` maps them and
:func:`export_lm_eval_samples` writes the file, after checking every key against the
harness's task list when lm-evaluation-harness is installed: the harness ignores a key it
does not run and would evaluate the whole benchmark.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bayeval.errors import DataError
from bayeval.records.files import write_file

SUBSET_FORMAT = "bayeval-subset"
SUBSET_VERSION = 1


@dataclass
class Subset:
    """A frozen subset of a benchmark with how it was made and how far it drifts."""

    benchmark: str
    n_items: int
    items: list[str]
    method: str
    parameters: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    calibration_models: list[str] = field(default_factory=list)
    drift: dict[str, Any] = field(default_factory=dict)
    weights: list[float] | None = None
    task: str | None = None
    subtasks: list[list[Any]] | None = None
    metric: str | None = None
    # how the harness aggregates a group's subtasks (group_aggregation below):
    # "size", "equal", or None when not known
    group_mean: str | None = None

    def __post_init__(self) -> None:
        self.items = [str(i) for i in self.items]
        if not self.items:
            raise DataError("a subset needs at least one item")
        if len(set(self.items)) != len(self.items):
            raise DataError("subset items must be distinct")
        if len(self.items) > self.n_items:
            raise DataError(f"subset of {len(self.items)} items is larger than the benchmark "
                            f"({self.n_items})")
        if self.weights is not None:
            self.weights = [float(w) for w in self.weights]
            if len(self.weights) != len(self.items):
                raise DataError(f"{len(self.weights)} weights for {len(self.items)} items")
            if any(w < 0 for w in self.weights) or not math.isclose(sum(self.weights), 1.0,
                                                                    abs_tol=1e-9):
                raise DataError("subset weights must be ≥ 0 and sum to 1")

    @property
    def size(self) -> int:
        return len(self.items)

    @property
    def subtask_counts(self) -> list[tuple[str, int]]:
        """``subtasks`` as (name, documents) pairs, ``[]`` for a single task."""
        return [(str(n), int(c)) for n, c in self.subtasks or []]

    def harness_samples(self, task: str | None = None) -> dict[str, list[int]]:
        """``{task: [doc indices]}`` of the items for ``lm_eval --samples`` (the task:
        ``task``, else the subset's); a subset that names no task is refused, since its
        benchmark name (a file path, say) is no harness task."""
        from bayeval.data.lm_eval import harness_samples

        name = task or self.task
        if not name:
            raise DataError(f"subset of {self.benchmark}: no lm-evaluation-harness task name "
                            "(the matrix records none); give one (--task NAME)")
        return harness_samples(self.items, name, self.subtask_counts)

    def to_json(self) -> dict[str, Any]:
        body = asdict(self)
        return {"format": SUBSET_FORMAT, "version": SUBSET_VERSION, "size": self.size, **body}

    def save(self, path: str | os.PathLike) -> Path:
        """Write the subset file (whole or not at all: :func:`bayeval.records.files.write_file`)."""
        path = Path(path)
        write_file(path, json.dumps(self.to_json(), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> Subset:
        """Read a subset file; a malformed one raises one-line :class:`DataError`."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise DataError(f"subset file {path}: no such file") from None
        except ValueError as exc:
            raise DataError(f"subset file {path}: not JSON ({str(exc)[:60]})") from None
        if not isinstance(data, dict) or data.get("format") != SUBSET_FORMAT:
            raise DataError(f"subset file {path}: not a bayeval subset (format "
                            f"{data.get('format') if isinstance(data, dict) else None!r})")
        if data.get("version") != SUBSET_VERSION:
            raise DataError(f"subset file {path}: version {data.get('version')} is not "
                            f"supported (this bayeval reads {SUBSET_VERSION})")
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        missing = [k for k in ("benchmark", "n_items", "items", "method") if k not in data]
        if missing:
            raise DataError(f"subset file {path}: missing field(s) {', '.join(missing)}")
        kinds = {"benchmark": str, "method": str, "n_items": int, "items": list,
                 "parameters": dict, "drift": dict, "calibration_models": list,
                 "weights": list | None, "seed": int | None, "task": str | None,
                 "subtasks": list | None, "metric": str | None, "group_mean": str | None}
        for key, kind in kinds.items():
            if key not in data:
                continue
            value = data[key]
            if not isinstance(value, kind) or isinstance(value, bool):  # bool is an int
                expected = getattr(kind, "__name__", str(kind))
                raise DataError(f"subset file {path}: field {key!r} must be a {expected}, "
                                f"got {type(value).__name__}")
        bad = [i for i in data["items"] if not isinstance(i, str | int) or isinstance(i, bool)]
        if bad:
            raise DataError(f"subset file {path}: item ids must be strings, got {bad[0]!r}")
        try:
            subset = cls(**fields)
        except (TypeError, ValueError) as exc:  # an optional field of the wrong type
            raise DataError(f"subset file {path}: malformed field ({exc})") from None
        if data.get("size", subset.size) != subset.size:
            raise DataError(f"subset file {path}: size {data['size']} but {subset.size} items")
        return subset


def known_harness_tasks(include_path: str | os.PathLike | None = None) -> set[str] | None:
    """Every task, group and tag name lm-evaluation-harness knows (with the tasks under
    ``include_path``), or None when the harness is not installed.

    Indexing the harness's own tasks reads some 15 000 YAML files (seconds): the names are
    kept per harness version in ``$XDG_CACHE_HOME/bayeval/`` (``~/.cache/bayeval/``); an
    ``include_path`` is indexed alone, every time."""
    try:
        from lm_eval.tasks import TaskManager
    except ImportError:
        return None
    known = set(_default_harness_index()["tasks"])
    if include_path is not None:
        known |= set(TaskManager(include_path=str(include_path),
                                 include_defaults=False).all_tasks)
    return known


def group_aggregation(group: str, metric: str | None = None,
                      include_path: str | os.PathLike | None = None) -> str | None:
    """How lm-evaluation-harness aggregates ``group``'s ``metric`` over its subtasks, read
    from the group's YAML (its ``aggregate_metric_list``; any metric when ``metric`` is
    None): ``"size"`` weighted by the subtasks' document counts (``weight_by_size``, the
    harness's default), ``"equal"`` the unweighted mean of the subtasks' scores; None when
    the harness is not installed or cannot be indexed, does not know the group, or the
    group reports no aggregate of that metric (the harness then prints no group score).
    A group under ``include_path`` is read there; the harness's own groups from the index
    kept with its task names (:func:`known_harness_tasks`)."""
    try:
        from lm_eval.tasks import TaskManager
    except ImportError:
        return None
    try:
        local = (TaskManager(include_path=str(include_path), include_defaults=False)
                 if include_path is not None else None)
        if local is not None and group in local.task_index:
            aggregates = _aggregates(local).get(group, [])
        else:
            aggregates = _default_harness_index()["aggregates"].get(group, [])
    except Exception:  # a YAML the harness cannot index: no answer, not an error
        return None
    for name, by_size in aggregates:
        if metric in (None, name):
            return "size" if by_size else "equal"
    return None


def _aggregates(manager: Any) -> dict[str, list[list[Any]]]:
    """``{group: [[metric, weight_by_size], ...]}`` of every group of a harness
    ``TaskManager``'s index that declares an ``aggregate_metric_list``."""
    out = {}
    for name, entry in manager.task_index.items():
        listed = (getattr(entry, "cfg", None) or {}).get("aggregate_metric_list")
        if isinstance(listed, list):
            out[name] = [[a.get("metric"), bool(a.get("weight_by_size", True))]
                         for a in listed if isinstance(a, dict)]
    return out


def _default_harness_index() -> dict[str, Any]:
    """The installed harness's own index: its task names and its groups' aggregations."""
    import lm_eval

    return _harness_index(str(getattr(lm_eval, "__version__", "unknown")))


@functools.cache
def _harness_index(version: str) -> dict[str, Any]:
    from lm_eval.tasks import TaskManager

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    cache = Path(base) / "bayeval" / f"lm-eval-{version}-index.json"
    try:
        index = json.loads(cache.read_text())
        if isinstance(index, dict) and index.get("tasks") and isinstance(
                index.get("aggregates"), dict):
            return index
    except (OSError, ValueError):
        pass
    manager = TaskManager()
    index = {"tasks": sorted(manager.all_tasks), "aggregates": _aggregates(manager)}
    try:  # written whole or not at all: several processes may fill the cache at once
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_file(cache, json.dumps(index))
    except OSError:
        pass
    return index


def check_harness_keys(samples: dict[str, list[int]],
                       include_path: str | os.PathLike | None = None) -> None:
    """Refuse a ``--samples`` key the installed harness does not know: it would ignore the
    key and run the whole benchmark. Without the harness installed nothing is checked."""
    known = known_harness_tasks(include_path)
    if known is None:
        return
    unknown = [k for k in samples if k not in known]
    if unknown:
        where = f" (with --include-path {include_path})" if include_path else ""
        raise DataError(f"task {unknown[0]!r} is not a task lm-evaluation-harness "
                        f"knows{where}; the harness would ignore it and run the whole "
                        "benchmark: give the harness's task name (--task)")


def export_lm_eval_samples(subset: Subset, path: str | os.PathLike | None = None,
                           task: str | None = None, check: bool = True,
                           include_path: str | os.PathLike | None = None,
                           ) -> dict[str, list[int]]:
    """``{task: [doc indices]}`` for ``lm_eval --samples``; written to ``path`` if given.
    The task name is ``task``, else the subset's; with ``check`` every key is checked
    against the harness's task list when lm-evaluation-harness is installed."""
    samples = subset.harness_samples(task)
    if check:
        check_harness_keys(samples, include_path)
    if path is not None:
        Path(path).write_text(json.dumps(samples) + "\n")
    return samples
