"""Readers and writers for score matrices: ``.npz``, CSV and parquet.

CSV and parquet come in two layouts:

* **wide** — one row per model, one column per item; the first column holds model ids
  (header ``model``); an empty cell, ``nan`` or ``NA`` is "not evaluated".
* **long** — one row per (model, item, score); pairs that are absent are "not evaluated".

``read_matrix`` picks the reader from the file suffix and the layout from the header
(columns ``model``, ``item``, ``score`` mean long). Every malformed input raises a
:class:`~bayeval.errors.DataError` whose one-line message names the file and the place.

A matrix's metadata (``task``, ``metric``, ``subtasks``, ``source``, ...) travels with it:
in ``.npz`` as scalar arrays, in parquet as the schema's ``bayeval`` key, in CSV as a
sidecar ``NAME.csv.meta.json`` written beside it and read when present, so that a CSV of
harness scores still knows its lm-evaluation-harness task when a subset is exported.
"""

from __future__ import annotations

import csv
import json
import math
import os
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from bayeval.data.matrix import (
    Kind,
    ScoreMatrix,
    check_repeated_models,
    number_from_text,
    number_repeated_ids,
)
from bayeval.errors import DataError

Layout = Literal["wide", "long"]
_MISSING = {"", "nan", "na", "n/a", "null", "none"}
_LONG_COLUMNS = ("model", "item", "score")
_META_KEYS = ("source", "task", "metric")


def safe_file_name(text: object, keep: str = "-_.") -> str:
    """``text`` with every character but letters, digits and ``keep`` replaced by ``_``:
    a label (a dataset, a model, a method spec) made fit for a file name."""
    return "".join(c if c.isalnum() or c in keep else "_" for c in str(text))


def parse_score(value: object, where: str) -> float:
    """One cell as a float; NaN for a missing marker; ``DataError`` naming ``where``."""
    if value is None or value is pd.NA or value is pd.NaT:  # pandas' missing markers
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
    return number_from_text(text, where)


def _one_line(exc: BaseException, limit: int = 120) -> str:
    """An exception's message on one line, shortened."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


# ---------------------------------------------------------------------------------- npz
def _refuse_oversized(archive: np.lib.npyio.NpzFile, key: str, path: Path) -> None:
    """Refuse an array whose header declares more data than its archive member holds
    (a 1 kB file declaring an 80 GB array would otherwise be allocated first)."""
    name = key if key.endswith(".npy") else f"{key}.npy"
    try:
        info = archive.zip.getinfo(name)
        with archive.zip.open(info) as fh:
            version = np.lib.format.read_magic(fh)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read_header(fh)
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile):
        return  # not a plain .npy member: numpy's own reading reports it
    declared = math.prod(shape) * dtype.itemsize
    if declared > info.file_size:
        raise DataError(f"{path}: array {key!r} declares shape {tuple(shape)} "
                        f"({declared:,} bytes) but holds {info.file_size:,} bytes")


def _model_ids(ids, repeated_models: str):
    """A wide table's model ids, repeats numbered when ``repeated_models="number"``."""
    return number_repeated_ids(ids) if repeated_models == "number" else ids


def read_npz(path: str | os.PathLike, kind: Kind | None = None,
             repeated_models: str = "error") -> ScoreMatrix:
    """Read ``scores``, ``models``, ``items`` (+ scalar metadata) with ``allow_pickle=False``.

    A model id that appears twice is an error, or with ``repeated_models="number"`` the
    repeats are kept as ``id#2``, ``id#3``, … (as :func:`~bayeval.data.load_dataset` does
    for the leaderboard's doubly listed models)."""
    check_repeated_models(repeated_models)
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
            _refuse_oversized(archive, key, path)
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
                    kind: Kind | None, where_row: str = "line",
                    repeated_models: str = "error") -> ScoreMatrix:
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
    return ScoreMatrix(np.asarray(values, dtype=np.float64),
                       _model_ids(models, repeated_models), items, kind=kind, name=source)


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


def _long_order(header: list[str]) -> list[int]:
    """The positions of the model, item and score columns of a long table whose header
    names them in any order ([0, 1, 2] for a header that names them otherwise: a long
    layout given by the caller is read in that order)."""
    names = [h.strip().lower() for h in header]
    if sorted(names) == sorted(_LONG_COLUMNS):
        return [names.index(c) for c in _LONG_COLUMNS]
    return [0, 1, 2]


def _detect_layout(header: list[str]) -> Layout:
    """Long when the header is the columns model, item and score, in any order."""
    return ("long" if sorted(h.strip().lower() for h in header) == sorted(_LONG_COLUMNS)
            else "wide")


# the missing markers of _MISSING as pyarrow's exact-match null values, in common cases
_NULLS = sorted({v for m in _MISSING for v in (m, m.upper(), m.capitalize())}
                | {"N/A", "NaN"})


def _fast_csv(path: Path, header: list[str], layout: Layout, source: str,
              kind: Kind | None, repeated_models: str = "error") -> ScoreMatrix | None:
    """The matrix of a well-formed CSV, parsed by pyarrow's C++ reader and checked
    column-wise; None when anything is off (a ragged row, a cell that is not a plain
    number, a duplicate pair), so that the row-by-row reader names the place."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = [f"c{j}" for j in range(len(header))]
    order = _long_order(header)
    if layout == "long":
        types = {names[order[0]]: pa.string(), names[order[1]]: pa.string(),
                 names[order[2]]: pa.float64()}
    else:
        types = {n: pa.float64() for n in names}
        types[names[0]] = pa.string()
    try:
        table = pacsv.read_csv(
            path, read_options=pacsv.ReadOptions(column_names=names, skip_rows=1),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(column_types=types, null_values=_NULLS,
                                                 strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError, OSError):
        return None
    if table.num_rows == 0:
        return None
    if layout == "long":
        return _long_from_arrays(table.column(order[0]).to_pandas(),
                                 table.column(order[1]).to_pandas(),
                                 table.column(order[2]).to_numpy(zero_copy_only=False),
                                 source, kind)
    ids = [str(m).strip() for m in table.column(0).to_pylist()]
    values = np.column_stack([table.column(j).to_numpy(zero_copy_only=False)
                              for j in range(1, len(names))]) if len(names) > 1 else None
    if values is None:
        return None
    return ScoreMatrix(values.astype(np.float64), _model_ids(ids, repeated_models), header[1:],
                       kind=kind, name=source)


def _long_from_arrays(models: pd.Series, items: pd.Series, scores: np.ndarray, source: str,
                      kind: Kind | None) -> ScoreMatrix | None:
    """A long table's matrix by factorising the (stripped) id columns, in the order ids
    first appear; None on a repeated (model, item) pair, which the row-by-row reader
    reports with both lines."""
    m_codes, m_ids = pd.factorize(models.str.strip())
    i_codes, i_ids = pd.factorize(items.str.strip())
    pairs = m_codes.astype(np.int64) * len(i_ids) + i_codes
    if pairs.size and np.bincount(pairs, minlength=len(m_ids) * len(i_ids)).max() > 1:
        return None
    matrix = np.full((len(m_ids), len(i_ids)), np.nan)
    matrix[m_codes, i_codes] = scores
    return ScoreMatrix(matrix, list(m_ids), list(i_ids), kind=kind, name=source)


def read_csv(path: str | os.PathLike, layout: Layout | None = None,
             kind: Kind | None = None, repeated_models: str = "error") -> ScoreMatrix:
    """Read a wide or long CSV (layout detected from the header unless given).

    A well-formed file is parsed by pyarrow's CSV reader and validated column-wise; a
    malformed one is read again row by row, whose one-line error names the line. A model
    listed twice (wide) is an error, or numbered with ``repeated_models="number"``."""
    check_repeated_models(repeated_models)
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
            other = next((sep for sep in ";\t|" if len(header) == 1 and sep in header[0]),
                         None)
            if other is not None:
                raise DataError(f"{source}: the header is one column, {header[0][:40]!r}: "
                                f"the file looks {other!r}-separated; bayeval reads "
                                "comma-separated CSV (or .parquet, .npz)")
            layout = layout or _detect_layout(header)
            fast = None
            if (layout == "wide" and len(header) >= 2 and len(set(header)) == len(header)
                    ) or (layout == "long" and len(header) == 3):
                fast = _fast_csv(path, header, layout, source, kind, repeated_models)
            if fast is not None:
                matrix = fast
            else:
                rows = ((n, r) for n, r in enumerate(reader, start=2) if r)
                if layout == "long":
                    order = _long_order(header)
                    matrix = _long_from_rows(((n, [r[k] for k in order] if len(r) == 3
                                               else r) for n, r in rows), source, kind)
                else:
                    matrix = _wide_from_rows(rows, header, source, kind,
                                             repeated_models=repeated_models)
        return _with_metadata(matrix, _read_sidecar(path))
    except FileNotFoundError:
        raise DataError(f"{source}: no such file") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{source}: not a readable CSV file ({exc})") from None


def write_csv(matrix: ScoreMatrix, path: str | os.PathLike, layout: Layout = "wide") -> None:
    """Write a matrix as CSV; NaN cells are empty (wide) or absent (long); its metadata
    and kind go to the sidecar ``NAME.csv.meta.json``."""
    to_frame(matrix, layout).to_csv(Path(path), index=False, na_rep="")
    sidecar = _sidecar(path)
    if matrix.metadata:
        sidecar.write_text(json.dumps({"metadata": matrix.metadata}, indent=1) + "\n")
    elif sidecar.exists():  # a stale sidecar of an earlier matrix at this path
        sidecar.unlink()


def _sidecar(path: str | os.PathLike) -> Path:
    return Path(f"{path}.meta.json")


def _read_sidecar(path: Path) -> dict[str, str]:
    """The metadata of a CSV's sidecar (``{}`` when there is none); a malformed one is a
    one-line error naming it."""
    sidecar = _sidecar(path)
    if not sidecar.is_file():
        return {}
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"{sidecar}: not a readable metadata file ({_one_line(exc, 60)})"
                        ) from None
    meta = data.get("metadata") if isinstance(data, dict) else None
    if not isinstance(meta, dict):
        raise DataError(f"{sidecar}: no 'metadata' object")
    return {str(k): str(v) for k, v in meta.items()}


def _with_metadata(matrix: ScoreMatrix, meta: dict[str, str]) -> ScoreMatrix:
    if not meta:
        return matrix
    return ScoreMatrix(matrix.scores, matrix.models, matrix.items, kind=matrix.kind,
                       name=matrix.name, metadata={**meta, **matrix.metadata})


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


def _fast_frame(frame: pd.DataFrame, header: list[str], layout: Layout, name: str,
                kind: Kind | None, repeated_models: str = "error") -> ScoreMatrix | None:
    """The matrix of a DataFrame whose score columns are already numbers (or booleans),
    taken column-wise; None otherwise (text cells are parsed row by row, as a CSV's)."""
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c])
               for c in frame.columns]
    if len(frame) == 0 or len(set(header)) != len(header):
        return None
    if layout == "long":
        if len(header) != 3 or not numeric[2] or not all(
                _all_text(frame.iloc[:, col]) for col in (0, 1)):
            return None
        return _long_from_arrays(frame.iloc[:, 0], frame.iloc[:, 1],
                                 frame.iloc[:, 2].to_numpy(dtype=np.float64, na_value=np.nan),
                                 name, kind)
    if len(header) < 2 or not all(numeric[1:]) or not _all_text(frame.iloc[:, 0]):
        return None
    values = frame.iloc[:, 1:].to_numpy(dtype=np.float64, na_value=np.nan)
    return ScoreMatrix(values, _model_ids([v.strip() for v in frame.iloc[:, 0]],
                                          repeated_models), header[1:], kind=kind,
                       name=name)


def _all_text(column: pd.Series) -> bool:
    """Whether every cell of ``column`` is a string (a string dtype without missing cells,
    or an object column of str), checked without a Python loop where the dtype says it."""
    if pd.api.types.is_string_dtype(column.dtype) and not isinstance(column.dtype, np.dtype):
        return not bool(column.isna().any())
    return bool(column.map(type).eq(str).all()) if column.dtype == object else False


def from_frame(frame: pd.DataFrame, layout: Layout | None = None, kind: Kind | None = None,
               name: str = "frame", repeated_models: str = "error") -> ScoreMatrix:
    """A ScoreMatrix from a wide or long DataFrame (rows are counted from 1): numeric
    columns are taken whole; a frame with text cells is parsed row by row, whose one-line
    error names the row. A model listed twice (wide) is an error, or numbered with
    ``repeated_models="number"``."""
    check_repeated_models(repeated_models)
    header = [str(c) for c in frame.columns]
    layout = layout or _detect_layout(header)
    order = _long_order(header) if layout == "long" and len(header) == 3 else [0, 1, 2]
    if order != [0, 1, 2]:
        frame, header = frame.iloc[:, order], [header[k] for k in order]
    if layout == "wide" and (not header or header[0].strip().lower() != "model"):
        raise DataError(f"{name}: a wide table needs a first column 'model' "
                        f"(found {header[:3]}) or columns model, item, score for long")
    fast = _fast_frame(frame, header, layout, name, kind, repeated_models)
    if fast is not None:
        return fast
    rows = ((n, list(r)) for n, r in enumerate(frame.itertuples(index=False), start=1))
    if layout == "long":
        return _long_from_rows(rows, name, kind, where_row="row")
    return _wide_from_rows(rows, header, name, kind, where_row="row",
                           repeated_models=repeated_models)


def read_parquet(path: str | os.PathLike, layout: Layout | None = None,
                 kind: Kind | None = None, repeated_models: str = "error") -> ScoreMatrix:
    """Read a wide or long parquet file (``repeated_models``: see :func:`from_frame`)."""
    path = Path(path)
    try:
        frame = pd.read_parquet(path)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except Exception as exc:  # pyarrow raises several unrelated types
        raise DataError(f"{path}: not a readable parquet file ({type(exc).__name__})") from None
    if frame.index.name == "model":
        frame = frame.reset_index()
    return _with_metadata(from_frame(frame, layout, kind, name=str(path),
                                     repeated_models=repeated_models),
                          _parquet_metadata(path))


def _parquet_metadata(path: Path) -> dict[str, str]:
    """The matrix metadata written under the parquet schema's ``bayeval`` key."""
    import pyarrow.parquet as pq

    try:
        stored = (pq.read_schema(path).metadata or {}).get(b"bayeval")
        meta = json.loads(stored) if stored else {}
    except Exception:  # an unreadable key is no metadata, the scores were read
        return {}
    return {str(k): str(v) for k, v in meta.items()} if isinstance(meta, dict) else {}


def write_parquet(matrix: ScoreMatrix, path: str | os.PathLike,
                  layout: Layout = "wide") -> None:
    """Write a matrix as parquet in wide or long layout, its metadata under the schema's
    ``bayeval`` key."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(to_frame(matrix, layout), preserve_index=False)
    if matrix.metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               b"bayeval": json.dumps(matrix.metadata)})
    pq.write_table(table, Path(path))


# ---------------------------------------------------------------------------------- dispatch
def read_matrix(path: str | os.PathLike, layout: Layout | None = None,
                kind: Kind | None = None, repeated_models: str = "error") -> ScoreMatrix:
    """Read a score matrix from ``.npz``, ``.csv`` or ``.parquet`` by suffix; a model id
    listed twice is an error, or with ``repeated_models="number"`` the repeats are kept as
    ``id#2``, ``id#3``, …"""
    suffix = Path(path).suffix.lower()
    if Path(path).is_dir():
        raise DataError(f"{path}: is a folder, not a score matrix file (.npz, .csv or "
                        ".parquet)")
    if Path(path).exists() and not Path(path).is_file():  # a FIFO would block the read
        raise DataError(f"{path}: not a regular file (a score matrix is a .npz, .csv or "
                        ".parquet file)")
    if suffix == ".npz":
        return read_npz(path, kind=kind, repeated_models=repeated_models)
    if suffix == ".csv":
        return read_csv(path, layout=layout, kind=kind, repeated_models=repeated_models)
    if suffix in (".parquet", ".pq"):
        return read_parquet(path, layout=layout, kind=kind,
                            repeated_models=repeated_models)
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
