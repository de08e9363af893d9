"""Readers and writers for score matrices: ``.npz``, CSV and parquet.

CSV and parquet come in two layouts:

* **wide** — one row per model, one column per item; the first column holds model ids
  (header ``model``); an empty cell, ``nan`` or ``NA`` is "not evaluated".
* **long** — one row per (model, item, score); pairs that are absent are "not evaluated".

``read_matrix`` picks the reader from the file suffix and the layout from the header
(columns ``model``, ``item``, ``score`` mean long). Every malformed input raises a
:class:`~bayeval.errors.DataError` whose one-line message names the file and the place.
"""

from __future__ import annotations

import csv
import math
import os
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from bayeval.data.matrix import Kind, ScoreMatrix, number_repeated_ids
from bayeval.errors import DataError

Layout = Literal["wide", "long"]
_MISSING = {"", "nan", "na", "n/a", "null", "none"}
_LONG_COLUMNS = ("model", "item", "score")
_META_KEYS = ("source", "task", "metric")


def parse_score(value: object, where: str) -> float:
    """One cell as a float; NaN for a missing marker; ``DataError`` naming ``where``."""
    if value is None:
        return math.nan
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, int | float | np.integer | np.floating):
        try:
            return float(value)
        except OverflowError:  # an integer beyond float range: out of [0, 1] anyway
            return math.inf
    text = str(value).strip()
    if text.lower() in _MISSING:
        return math.nan
    if text.lower() in ("true", "false"):
        return 1.0 if text.lower() == "true" else 0.0
    try:
        return float(text)
    except ValueError:
        raise DataError(f"{where}: {text[:40]!r} is not a number") from None


def _one_line(exc: BaseException, limit: int = 120) -> str:
    """An exception's message on one line, shortened."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


# ---------------------------------------------------------------------------------- npz
def read_npz(path: str | os.PathLike, kind: Kind | None = None,
             repeated_models: str = "error") -> ScoreMatrix:
    """Read ``scores``, ``models``, ``items`` (+ scalar metadata) with ``allow_pickle=False``.

    A model id that appears twice is an error, or with ``repeated_models="number"`` the
    repeats are kept as ``id#2``, ``id#3``, … (as :func:`~bayeval.data.load_dataset` does
    for the leaderboard's doubly listed models)."""
    if repeated_models not in ("error", "number"):
        raise DataError(f"repeated_models must be 'error' or 'number', got {repeated_models!r}")
    path = Path(path)
    try:
        archive = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        if "pickle" in str(exc):  # numpy's advice to allow pickles: bayeval never will
            raise DataError(f"{path}: not a readable .npz file (no archive of arrays; "
                            "bayeval never loads pickled data)") from None
        raise DataError(f"{path}: not a readable .npz file ({_one_line(exc)})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise DataError(f"{path}: a single .npy array, not an .npz archive of scores, "
                        "models and items")
    with archive:
        missing = [k for k in ("scores", "models", "items") if k not in archive.files]
        if missing:
            raise DataError(f"{path}: missing array(s) {', '.join(missing)} "
                            f"(found {', '.join(archive.files) or 'none'})")
        arrays = {}
        for key in archive.files:
            try:
                arrays[key] = archive[key]
            except ValueError as exc:
                if "allow_pickle" in str(exc):
                    raise DataError(
                        f"{path}: array {key!r} is pickled (object dtype); bayeval reads npz "
                        "with allow_pickle=False — save ids as string arrays"
                    ) from None
                raise DataError(f"{path}: array {key!r} unreadable ({_one_line(exc)})") from None
    meta = {k: str(v) for k, v in arrays.items()
            if k not in ("scores", "models", "items") and np.ndim(v) == 0}
    stored_kind = meta.pop("kind", None)
    models = arrays["models"]
    if repeated_models == "number" and np.ndim(models) == 1:
        models = number_repeated_ids(models)
    return ScoreMatrix(arrays["scores"], models, arrays["items"],
                       kind=kind or stored_kind, name=str(path), metadata=meta)


def write_npz(matrix: ScoreMatrix, path: str | os.PathLike) -> None:
    """Write a matrix as ``.npz`` (float64 scores, string ids, scalar metadata)."""
    extra = {k: np.asarray(v) for k, v in matrix.metadata.items()
             if k not in ("scores", "models", "items")}
    np.savez_compressed(Path(path), scores=matrix.scores, models=matrix.models.astype(str),
                        items=matrix.items.astype(str), kind=np.asarray(matrix.kind), **extra)


# ---------------------------------------------------------------------------------- CSV
def _wide_from_rows(rows: Iterable[tuple[int, list[str]]], header: list[str], source: str,
                    kind: Kind | None, where_row: str = "line") -> ScoreMatrix:
    items = header[1:]
    models: list[str] = []
    values: list[list[float]] = []
    for lineno, row in rows:
        if len(row) != len(header):
            raise DataError(f"{source} {where_row} {lineno}: {len(row)} fields, expected "
                            f"{len(header)} as in the header (ragged matrix)")
        model = str(row[0]).strip()
        models.append(model)
        values.append([parse_score(v, f"{source} {where_row} {lineno}, item {items[j]!r}")
                       for j, v in enumerate(row[1:])])
    if not models or not items:
        raise DataError(f"{source}: empty benchmark ({len(models)} models × {len(items)} items)")
    return ScoreMatrix(np.asarray(values, dtype=np.float64), models, items, kind=kind,
                       name=source)


def _long_from_rows(rows: Iterable[tuple[int, list[object]]], source: str,
                    kind: Kind | None, where_row: str = "line") -> ScoreMatrix:
    models: dict[str, int] = {}
    items: dict[str, int] = {}
    cells: dict[tuple[int, int], tuple[float, int]] = {}
    for lineno, row in rows:
        if len(row) != 3:
            raise DataError(f"{source} {where_row} {lineno}: {len(row)} fields, expected 3 "
                            "(model, item, score)")
        m = models.setdefault(str(row[0]).strip(), len(models))
        i = items.setdefault(str(row[1]).strip(), len(items))
        score = parse_score(row[2], f"{source} {where_row} {lineno}")
        if (m, i) in cells:
            raise DataError(f"{source} {where_row} {lineno}: duplicate score for model "
                            f"{row[0]!r}, item {row[1]!r} (first at {where_row} "
                            f"{cells[(m, i)][1]})")
        cells[(m, i)] = (score, lineno)
    if not cells:
        raise DataError(f"{source}: empty benchmark (no scores)")
    scores = np.full((len(models), len(items)), np.nan)
    for (m, i), (score, _) in cells.items():
        scores[m, i] = score
    return ScoreMatrix(scores, list(models), list(items), kind=kind, name=source)


def _detect_layout(header: list[str]) -> Layout:
    return "long" if [h.strip().lower() for h in header] == list(_LONG_COLUMNS) else "wide"


def read_csv(path: str | os.PathLike, layout: Layout | None = None,
             kind: Kind | None = None) -> ScoreMatrix:
    """Read a wide or long CSV (layout detected from the header unless given)."""
    path = Path(path)
    source = str(path)
    try:
        # utf-8-sig: a byte-order mark (Excel's CSV) is not part of the first column's name
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            try:
                header = next(reader)
            except StopIteration:
                raise DataError(f"{source}: empty file") from None
            layout = layout or _detect_layout(header)
            rows = ((n, r) for n, r in enumerate(reader, start=2) if r)
            if layout == "long":
                return _long_from_rows(rows, source, kind)
            return _wide_from_rows(rows, header, source, kind)
    except FileNotFoundError:
        raise DataError(f"{source}: no such file") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{source}: not a readable CSV file ({exc})") from None


def write_csv(matrix: ScoreMatrix, path: str | os.PathLike, layout: Layout = "wide") -> None:
    """Write a matrix as CSV; NaN cells are empty (wide) or absent (long)."""
    to_frame(matrix, layout).to_csv(Path(path), index=False, na_rep="")


# ---------------------------------------------------------------------------------- parquet
def to_frame(matrix: ScoreMatrix, layout: Layout = "wide") -> pd.DataFrame:
    """A pandas DataFrame in wide (``model`` + one column per item) or long layout."""
    if layout == "wide":
        frame = pd.DataFrame(matrix.scores, columns=list(matrix.items))
        frame.insert(0, "model", list(matrix.models))
        return frame
    if layout == "long":
        m, i = np.nonzero(~np.isnan(matrix.scores))
        return pd.DataFrame({"model": matrix.models[m], "item": matrix.items[i],
                             "score": matrix.scores[m, i]})
    raise DataError(f"layout must be 'wide' or 'long', got {layout!r}")


def from_frame(frame: pd.DataFrame, layout: Layout | None = None, kind: Kind | None = None,
               name: str = "frame") -> ScoreMatrix:
    """A ScoreMatrix from a wide or long DataFrame (rows are counted from 1)."""
    header = [str(c) for c in frame.columns]
    layout = layout or _detect_layout(header)
    rows = ((n, list(r)) for n, r in enumerate(frame.itertuples(index=False), start=1))
    if layout == "long":
        return _long_from_rows(rows, name, kind, where_row="row")
    if not header or header[0].strip().lower() != "model":
        raise DataError(f"{name}: a wide table needs a first column 'model' "
                        f"(found {header[:3]}) or columns model, item, score for long")
    return _wide_from_rows(rows, header, name, kind, where_row="row")


def read_parquet(path: str | os.PathLike, layout: Layout | None = None,
                 kind: Kind | None = None) -> ScoreMatrix:
    """Read a wide or long parquet file."""
    path = Path(path)
    try:
        frame = pd.read_parquet(path)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except Exception as exc:  # pyarrow raises several unrelated types
        raise DataError(f"{path}: not a readable parquet file ({type(exc).__name__})") from None
    if frame.index.name == "model":
        frame = frame.reset_index()
    return from_frame(frame, layout, kind, name=str(path))


def write_parquet(matrix: ScoreMatrix, path: str | os.PathLike,
                  layout: Layout = "wide") -> None:
    """Write a matrix as parquet in wide or long layout."""
    to_frame(matrix, layout).to_parquet(Path(path), index=False)


# ---------------------------------------------------------------------------------- dispatch
def read_matrix(path: str | os.PathLike, layout: Layout | None = None,
                kind: Kind | None = None) -> ScoreMatrix:
    """Read a score matrix from ``.npz``, ``.csv`` or ``.parquet`` by suffix."""
    suffix = Path(path).suffix.lower()
    if Path(path).is_dir():
        raise DataError(f"{path}: is a folder, not a score matrix file (.npz, .csv or "
                        ".parquet)")
    if suffix == ".npz":
        return read_npz(path, kind=kind)
    if suffix == ".csv":
        return read_csv(path, layout=layout, kind=kind)
    if suffix in (".parquet", ".pq"):
        return read_parquet(path, layout=layout, kind=kind)
    raise DataError(f"{path}: unknown format {suffix!r} (use .npz, .csv or .parquet; "
                    "lm-evaluation-harness logs: bayeval.data.read_lm_eval_samples)")


def write_matrix(matrix: ScoreMatrix, path: str | os.PathLike,
                 layout: Layout = "wide") -> None:
    """Write a score matrix to ``.npz``, ``.csv`` or ``.parquet`` by suffix."""
    suffix = Path(path).suffix.lower()
    if suffix == ".npz":
        write_npz(matrix, path)
    elif suffix == ".csv":
        write_csv(matrix, path, layout)
    elif suffix in (".parquet", ".pq"):
        write_parquet(matrix, path, layout)
    else:
        raise DataError(f"{path}: unknown format {suffix!r} (use .npz, .csv or .parquet)")
