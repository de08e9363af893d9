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
``{"task_name": [doc indices]}``. Item ids carry the doc index as their trailing integer
(``<task>-<doc_id>``, as :func:`bayeval.data.lm_eval.read_lm_eval_samples` and the bundled
matrices name them); :func:`export_lm_eval_samples` writes that file.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bayeval.errors import DataError

SUBSET_FORMAT = "bayeval-subset"
SUBSET_VERSION = 1
_DOC_INDEX = re.compile(r"(?:^|[-_:/])(\d+)$")


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

    def doc_indices(self) -> list[int]:
        """The lm-evaluation-harness doc index of every item (its id's trailing integer)."""
        out = []
        for item in self.items:
            match = _DOC_INDEX.search(item)
            if match is None:
                raise DataError(f"item {item!r} carries no doc index (ids look like "
                                "'<task>-<doc_id>')")
            out.append(int(match.group(1)))
        if len(set(out)) != len(out):
            raise DataError("two items of the subset map to the same doc index")
        return out

    def to_json(self) -> dict[str, Any]:
        body = asdict(self)
        return {"format": SUBSET_FORMAT, "version": SUBSET_VERSION, "size": self.size, **body}

    def save(self, path: str | os.PathLike) -> Path:
        """Write the subset file (atomically)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n")
        os.replace(tmp, path)
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
                 "weights": list | None, "seed": int | None, "task": str | None}
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


def export_lm_eval_samples(subset: Subset, path: str | os.PathLike | None = None,
                           task: str | None = None) -> dict[str, list[int]]:
    """``{task: [doc indices]}`` for ``lm_eval --samples``; written to ``path`` if given.
    The task name is ``task``, else the subset's, else its benchmark's."""
    name = task or subset.task or subset.benchmark
    samples = {name: sorted(subset.doc_indices())}
    if path is not None:
        Path(path).write_text(json.dumps(samples) + "\n")
    return samples
