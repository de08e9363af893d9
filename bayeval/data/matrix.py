"""The score matrix: per-item scores of models on one benchmark.

A :class:`ScoreMatrix` holds scores models × items as float64 (NaN = not evaluated), the
model ids, the item ids and the kind of score (``binary`` for {0, 1}, ``continuous`` for
[0, 1]). It is immutable: selections return new matrices.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from bayeval.errors import DataError

Kind = Literal["binary", "continuous"]
_KINDS = ("binary", "continuous")


MAX_ID_CHARS = 4096  # an id reaches a command line, where one argument holds ≤ 128 KiB


def _as_ids(values: Sequence[str] | np.ndarray, what: str, source: str) -> np.ndarray:
    if np.ndim(values) != 1:
        raise DataError(f"{source}: {what} ids must be one-dimensional, got "
                        f"{np.ndim(values)}-D")
    ids = np.asarray([str(v) for v in values], dtype=object)
    seen: dict[str, int] = {}
    for pos, v in enumerate(ids):
        if "\x00" in v:  # NumPy's strings drop trailing NULs (two ids would merge), and
            # no command or file name can hold one
            raise DataError(f"{source}: {what} id at position {pos} contains a NUL "
                            f"character ({v[:40]!r})")
        if len(v) > MAX_ID_CHARS:
            raise DataError(f"{source}: {what} id at position {pos} has {len(v):,} "
                            f"characters (at most {MAX_ID_CHARS:,}: an id is passed to an "
                            f"evaluator's command line), starting {v[:40]!r}")
        if v in seen:
            raise DataError(
                f"{source}: duplicate {what} id {v!r} at positions {seen[v]} and {pos}"
                + (" (--repeated-models number, or repeated_models='number' in Python, "
                   f"keeps both rows as {v!r}, {v + '#2'!r}, …)" if what == "model"
                   else "")
            )
        seen[v] = pos
    return ids.astype(str)


REPEATED_MODELS = ("error", "number")


def check_repeated_models(option: str) -> str:
    """A reader's ``repeated_models``: ``error`` (a model id listed twice is an error) or
    ``number`` (the repeats kept as ``id#2``, ``id#3``, …: :func:`number_repeated_ids`)."""
    if option not in REPEATED_MODELS:
        raise DataError(f"repeated_models must be 'error' or 'number', got {option!r}")
    return option


def number_repeated_ids(ids) -> list[str]:
    """Suffix repeated ids with ``#2``, ``#3``, ... in order of appearance.

    The leaderboard matrices list some models twice (two leaderboard entries with
    identical per-item rows); the rows are kept, as in the papers' 448-model matrices,
    and the repeats get distinct ids.
    """
    seen: dict[str, int] = {}
    out = []
    for raw in ids:
        key = str(raw)
        seen[key] = seen.get(key, 0) + 1
        out.append(key if seen[key] == 1 else f"{key}#{seen[key]}")
    return out


# a number as text: ASCII digits in decimal or exponent notation, or nan / inf (Python's
# float() also reads other scripts' digits, '١' = 1, and underscores, '0.0_1' = 0.01)
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(nan|inf|infinity)",
                     re.IGNORECASE | re.ASCII)


def number_from_text(text: str, where: str) -> float:
    """``text`` (stripped) as a float if it is written as a number in ASCII; a one-line
    ``DataError`` naming ``where`` otherwise."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        raise DataError(f"{where}: {text[:40]!r} is not a number")
    return float(text)


def validate_score(value: object, where: str) -> float:
    """A single score as a float in [0, 1]; ``DataError`` naming ``where`` otherwise."""
    if isinstance(value, str):
        value = number_from_text(value, where)
    try:
        score = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # e.g. an integer of 400 digits
        raise DataError(f"{where}: {value!r} is not a number") from None
    if not np.isfinite(score):
        raise DataError(f"{where}: score is {score}, a finite number in [0, 1] is required")
    if not 0.0 <= score <= 1.0:
        raise DataError(f"{where}: score {score:g} outside [0, 1]")
    return score


def observed_item_means(scores: np.ndarray, empty: float = np.nan) -> np.ndarray:
    """Each item's mean score over the models that have it, in a models × items array
    (NaN = missing); ``empty`` for an item no model has."""
    scores = np.asarray(scores, np.float64)
    seen = ~np.isnan(scores)
    counts = seen.sum(axis=0)
    sums = np.where(seen, scores, 0.0).sum(axis=0)
    return np.where(counts > 0, sums / np.maximum(counts, 1), empty)


def fill_with_item_means(scores: np.ndarray, empty: float = 0.0) -> np.ndarray:
    """A copy of the models × items ``scores`` (NaN = missing) with each missing cell set
    to its item's mean over the models that have it, and to ``empty`` in an item no model
    has."""
    scores = np.asarray(scores, np.float64)
    return np.where(np.isnan(scores), observed_item_means(scores, empty), scores)


def infer_kind(scores: np.ndarray) -> Kind:
    """``binary`` when every observed score is 0 or 1, else ``continuous``."""
    observed = scores[~np.isnan(scores)]
    return "binary" if np.all((observed == 0.0) | (observed == 1.0)) else "continuous"


@dataclass(frozen=True, eq=False)
class ScoreMatrix:
    """Scores of ``models`` (rows) on ``items`` (columns); NaN marks "not evaluated".

    Parameters
    ----------
    scores: array-like, models × items, values in [0, 1] or NaN.
    models, items: unique string ids, one per row / column.
    kind: ``binary`` or ``continuous``; inferred from the values when omitted.
    name: a label (dataset name or file path) used in messages.
    metadata: free-form string metadata (source, task, metric, ...).
    """

    scores: np.ndarray
    models: np.ndarray
    items: np.ndarray
    kind: Kind = None  # type: ignore[assignment]
    name: str = "matrix"
    metadata: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        src = self.name
        raw = np.asarray(self.scores)
        if raw.dtype == object or not (
            np.issubdtype(raw.dtype, np.number) or raw.dtype == bool
        ) or np.issubdtype(raw.dtype, np.complexfloating):
            raise DataError(f"{src}: scores must be real numbers, got dtype {raw.dtype}")
        if raw.ndim != 2:
            raise DataError(f"{src}: scores must be a 2-D models × items array, got {raw.ndim}-D")
        scores = raw.astype(np.float64)
        models = _as_ids(self.models, "model", src)
        items = _as_ids(self.items, "item", src)
        if scores.shape != (len(models), len(items)):
            raise DataError(
                f"{src}: scores have shape {scores.shape} but there are {len(models)} model ids "
                f"and {len(items)} item ids"
            )
        if scores.shape[0] == 0 or scores.shape[1] == 0:
            raise DataError(f"{src}: empty benchmark ({scores.shape[0]} models × "
                            f"{scores.shape[1]} items)")
        bad = np.isinf(scores)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise DataError(
                f"{src}: infinite score at model {str(models[r])!r}, item {str(items[c])!r}"
            )
        with np.errstate(invalid="ignore"):
            out = (scores < 0.0) | (scores > 1.0)
        if out.any():
            r, c = np.argwhere(out)[0]
            raise DataError(
                f"{src}: score {scores[r, c]:g} outside [0, 1] at model {str(models[r])!r}, "
                f"item {str(items[c])!r}"
            )
        kind = self.kind if self.kind is not None else infer_kind(scores)
        if kind not in _KINDS:
            raise DataError(f"{src}: kind must be one of {_KINDS}, got {kind!r}")
        if kind == "binary" and infer_kind(scores) != "binary":
            raise DataError(f"{src}: kind 'binary' but some scores are not 0 or 1")
        scores.setflags(write=False)
        models.setflags(write=False)
        items.setflags(write=False)
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "models", models)
        object.__setattr__(self, "items", items)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "metadata", {str(k): str(v) for k, v in self.metadata.items()})

    # ------------------------------------------------------------------ shape and lookup
    @property
    def shape(self) -> tuple[int, int]:
        return self.scores.shape  # type: ignore[return-value]

    @property
    def n_models(self) -> int:
        return self.scores.shape[0]

    @property
    def n_items(self) -> int:
        return self.scores.shape[1]

    def __repr__(self) -> str:
        return (f"ScoreMatrix({self.name!r}, {self.n_models} models × {self.n_items} items, "
                f"{self.kind}, {np.isnan(self.scores).mean():.1%} missing)")

    def model_index(self, model_id: str) -> int:
        """Row of ``model_id``; :class:`DataError` naming the id when it is unknown."""
        model_id = str(model_id)
        hits = np.flatnonzero(self.models == model_id)
        if hits.size == 0:
            raise DataError(f"{self.name}: unknown model id {model_id!r} "
                            f"({self.n_models} models)")
        return int(hits[0])

    def item_index(self, item_id: str) -> int:
        """Column of ``item_id``; :class:`DataError` naming the id when it is unknown."""
        item_id = str(item_id)
        lookup = self._item_lookup()
        try:
            return lookup[item_id]
        except KeyError:
            raise DataError(f"{self.name}: unknown item id {item_id!r}") from None

    def _item_lookup(self) -> dict[str, int]:
        cached = self.__dict__.get("_items_pos")
        if cached is None:
            cached = {v: i for i, v in enumerate(self.items)}
            object.__setattr__(self, "_items_pos", cached)
        return cached

    def row(self, model_id: str) -> np.ndarray:
        """The scores of one model (a read-only view)."""
        return self.scores[self.model_index(model_id)]

    # ------------------------------------------------------------------ selection
    def _replace(self, scores: np.ndarray, models: np.ndarray, items: np.ndarray,
                 name: str | None = None) -> ScoreMatrix:
        return ScoreMatrix(scores, models, items, kind=self.kind,
                           name=name or self.name, metadata=dict(self.metadata))

    def _positions(self, selector, ids: np.ndarray, index_of, what: str) -> np.ndarray:
        sel = np.asarray(selector)
        if sel.dtype == bool:
            if sel.shape != ids.shape:
                raise DataError(f"{self.name}: {what} mask has length {sel.size}, "
                                f"expected {ids.size}")
            return np.flatnonzero(sel)
        if np.issubdtype(sel.dtype, np.integer):
            if sel.size and (sel.min() < -ids.size or sel.max() >= ids.size):
                raise DataError(f"{self.name}: {what} position out of range 0..{ids.size - 1}")
            return sel.reshape(-1) % ids.size
        return np.asarray([index_of(s) for s in sel.reshape(-1)], dtype=int)

    def select_models(self, selector) -> ScoreMatrix:
        """Rows by ids, integer positions or a boolean mask."""
        pos = self._positions(selector, self.models, self.model_index, "model")
        return self._replace(self.scores[pos], self.models[pos], self.items)

    def select_items(self, selector) -> ScoreMatrix:
        """Columns by ids, integer positions or a boolean mask."""
        pos = self._positions(selector, self.items, self.item_index, "item")
        return self._replace(self.scores[:, pos], self.models, self.items[pos])

    def drop_models(self, model_ids: Sequence[str]) -> ScoreMatrix:
        """All rows but ``model_ids``."""
        drop = {self.models[self.model_index(m)] for m in model_ids}
        return self.select_models(np.array([m not in drop for m in self.models]))

    def split(self, target_ids: Sequence[str]) -> tuple[ScoreMatrix, ScoreMatrix]:
        """(reference, targets): the targets' rows held out from the reference."""
        targets = self.select_models(list(target_ids))
        return self.drop_models(list(target_ids)), targets

    # ------------------------------------------------------------------ summaries
    def model_means(self) -> np.ndarray:
        """Mean observed score of each model (NaN for a model with no observed score)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            counts = np.sum(~np.isnan(self.scores), axis=1)
            sums = np.nansum(self.scores, axis=1)
            return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)

    def item_means(self) -> np.ndarray:
        """Mean observed score of each item over models (NaN when no model has it)."""
        return observed_item_means(self.scores)

    def fingerprint(self) -> str:
        """SHA-256 over scores, ids and kind: identifies a reference matrix in journals."""
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.scores).tobytes())
        h.update("\x1f".join(self.models).encode())
        h.update(b"\x1e")
        h.update("\x1f".join(self.items).encode())
        h.update(self.kind.encode())
        return h.hexdigest()

    def equals(self, other: ScoreMatrix) -> bool:
        """Same ids, kind and scores (NaN equal to NaN)."""
        return (self.kind == other.kind and np.array_equal(self.models, other.models)
                and np.array_equal(self.items, other.items)
                and np.array_equal(self.scores, other.scores, equal_nan=True))
