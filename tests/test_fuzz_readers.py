"""Every reader, fed arbitrary and half-valid input, returns a matrix or raises one-line
BayevalError, never another exception (hypothesis, 300 derandomised cases each, and the
hand-picked @example cases)."""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bayeval.compression.subset import Subset
from bayeval.data import ScoreMatrix
from bayeval.data.io import read_csv, read_npz, read_parquet
from bayeval.data.lm_eval import read_sample_file
from bayeval.errors import BayevalError
from bayeval.loop.session import Session
from bayeval.records.journal_check import seal_record

FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CELL = st.one_of(st.sampled_from(["0", "1", "0.5", "", "nan", "NA", "-1", "2", "1e400", "x",
                                  "true", "  1 ", "\ufeff0", '"1"', "1,2"]),
                 st.text(max_size=6))
NAME = st.one_of(st.sampled_from(["model", "item", "score", "m", "", "a,b", "\ufeffmodel"]),
                 st.text(max_size=6))


def _outcome(read, path: Path) -> object:
    """The reader's result, or its BayevalError, whose message must be one line."""
    try:
        result = read(path)
    except BayevalError as exc:
        assert "\n" not in str(exc), str(exc)
        return exc
    assert isinstance(result, ScoreMatrix | dict | Subset)
    return result


_SCRATCH = tempfile.TemporaryDirectory(prefix="bayeval-fuzz-")


def _tmp(suffix: str) -> Path:
    """One scratch file per suffix, rewritten by every case (removed with the process)."""
    path = Path(_SCRATCH.name) / f"case{suffix}"
    path.unlink(missing_ok=True)
    return path


@FUZZ
@given(st.lists(st.lists(CELL, min_size=0, max_size=5), min_size=0, max_size=6),
       st.sampled_from([None, "wide", "long"]))
def test_csv_reader(rows, layout):
    path = _tmp(".csv")
    path.write_text("\n".join(",".join(r) for r in rows), encoding="utf-8")
    _outcome(lambda p: read_csv(p, layout=layout), path)


# cells of a mostly valid matrix: numbers, missing markers in several cases, and a few
# that only the row-by-row reader accepts (true) or that are out of range
GOOD_CELL = st.one_of(st.sampled_from(["0", "1", "0.5", "", "nan", "NaN", "NA", "n/a", "None",
                                       "null", "true", "False", "1e400", "-1", "2", " 1",
                                       "0.25 ", "inf", '"0.5"', "1e-3", ".5"]),
                      st.floats(0, 1).map(repr))
ID = st.one_of(st.sampled_from(["m1", "m2", " m1", "a,b", "", "model"]), st.text(max_size=4))


def _same_outcome(read, path: Path) -> None:
    """The column-wise fast path and the row-by-row reader agree: the same matrix (ids,
    scores, kind) or the same one-line error."""
    from unittest import mock

    import bayeval.data.io as io_module

    fast = _outcome(read, path)
    with mock.patch.object(io_module, "_fast_csv", lambda *a: None), \
            mock.patch.object(io_module, "_fast_frame", lambda *a: None):
        slow = _outcome(read, path)
    if isinstance(slow, ScoreMatrix):
        assert isinstance(fast, ScoreMatrix), fast
        assert list(fast.models) == list(slow.models) and list(fast.items) == list(slow.items)
        np.testing.assert_array_equal(fast.scores, slow.scores)
        assert fast.kind == slow.kind
    else:
        assert type(fast) is type(slow) and str(fast) == str(slow)


@FUZZ
@given(st.lists(ID, min_size=1, max_size=4, unique=True),
       st.lists(st.tuples(ID, st.lists(GOOD_CELL, min_size=4, max_size=4)), max_size=5),
       st.booleans())
def test_fast_csv_reader_equals_the_row_by_row_reader(item_ids, rows, long):
    path = _tmp(".csv")
    if long:
        lines = ["model,item,score"] + [f"{m},{r[0]},{r[1]}" for m, r in rows]
    else:
        lines = [",".join(["model", *item_ids])] + [
            ",".join([m, *r[:len(item_ids)]]) for m, r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _same_outcome(read_csv, path)


@FUZZ
@given(st.integers(1, 3), st.lists(st.lists(st.one_of(
    st.floats(0, 1), st.just(float("nan")), st.sampled_from([2.0, -1.0])), min_size=3,
    max_size=3), min_size=0, max_size=4), st.booleans())
def test_fast_frame_reader_equals_the_row_by_row_reader(n_items, rows, long):
    from bayeval.data.io import from_frame

    if long:
        frame = pd.DataFrame({"model": [f"m{i % 2}" for i in range(len(rows))],
                              "item": [f"i{i}" for i in range(len(rows))],
                              "score": [r[0] for r in rows]})
    else:
        frame = pd.DataFrame({"model": [f"m{i}" for i in range(len(rows))],
                              **{f"i{j}": [r[j] for r in rows] for j in range(n_items)}})
    _same_outcome(lambda _: from_frame(frame), Path("frame"))


@pytest.mark.parametrize(("suffix", "read"), [(".csv", read_csv), (".parquet", read_parquet)])
@FUZZ
@given(data=st.binary(max_size=300))
def test_reader_on_bytes(suffix, read, data):
    path = _tmp(suffix)
    path.write_bytes(data)
    _outcome(read, path)


ARRAY = st.one_of(
    st.builds(lambda n, m, f: np.full((n, m), f), st.integers(0, 4), st.integers(0, 4),
              st.sampled_from([0.0, 1.0, 0.5, np.nan, np.inf, -1.0, 7.0])),
    st.builds(lambda n: np.array([f"x{i % 2}" for i in range(n)]), st.integers(0, 4)),
    st.builds(lambda n: np.arange(n), st.integers(0, 4)),
    st.just(np.array(3.0)), st.just(np.array("name")), st.just(np.zeros((2, 2, 2))),
    st.just(np.array([b"a", b"b"])), st.just(np.array([1 + 2j, 3j])))


@FUZZ
@given(st.dictionaries(st.sampled_from(["scores", "models", "items", "name", "kind", "x"]),
                       ARRAY, max_size=5))
def test_npz_reader(arrays):
    path = _tmp(".npz")
    np.savez(path, **arrays)
    _outcome(read_npz, path)


@FUZZ
@given(st.binary(max_size=300), st.booleans())
def test_npz_reader_on_bytes(data, as_zip):
    path = _tmp(".npz")
    if as_zip:  # a zip archive whose member is not an array
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("scores.npy", data)
        data = buffer.getvalue()
    path.write_bytes(data)
    _outcome(read_npz, path)


@FUZZ
@given(st.dictionaries(NAME, st.lists(CELL, min_size=3, max_size=3), min_size=0, max_size=4),
       st.sampled_from([None, "wide", "long"]), st.booleans())
def test_parquet_reader(columns, layout, numeric):
    path = _tmp(".parquet")
    frame = pd.DataFrame(columns)
    if numeric:
        frame = frame.apply(pd.to_numeric, errors="coerce")
    try:
        frame.to_parquet(path)
    except (ValueError, TypeError):  # pyarrow cannot write this frame: nothing to read
        return
    _outcome(lambda p: read_parquet(p, layout=layout), path)


JSON_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True),
              st.sampled_from(["0.5", "x", "acc", "none"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["acc", "doc_id", "filter", "x"]),
                                            inner, max_size=3)), max_leaves=6)
RECORD = st.fixed_dictionaries({}, optional={"doc_id": JSON_VALUE, "acc": JSON_VALUE,
                                             "filter": JSON_VALUE, "doc_hash": JSON_VALUE})


@FUZZ
@given(st.lists(st.one_of(RECORD.map(json.dumps), st.text(max_size=20)), max_size=5),
       st.sampled_from([None, "none", "x"]))
@example(['{"doc_id": Infinity, "acc": 1}'], None)  # int(inf) overflows
@example(['{"doc_id": 0, "acc": ' + "9" * 400 + "}"], None)  # float(10**400) overflows
def test_lm_eval_sample_reader(lines, filter_name):
    path = _tmp(".jsonl")
    path.write_text("\n".join(lines), encoding="utf-8")
    _outcome(lambda p: read_sample_file(p, "acc", filter_name), path)


@FUZZ
@given(st.dictionaries(st.sampled_from(["format", "version", "benchmark", "n_items", "items",
                                        "size", "weights", "method", "parameters", "seed",
                                        "task", "drift", "x"]), JSON_VALUE, max_size=8),
       st.booleans())
# required fields present but null, or of the wrong kind (found by this test)
@example({"benchmark": None, "method": None, "n_items": None, "items": None}, True)
@example({"benchmark": None, "method": None, "n_items": None, "items": [None]}, True)
@example({"benchmark": "b", "method": "m", "n_items": 3, "items": ["a"], "parameters": 5},
         True)
def test_subset_reader(fields, valid_header):
    if valid_header:
        fields = {"format": "bayeval-subset", "version": 1, **fields}
    path = _tmp(".json")
    path.write_text(json.dumps(fields), encoding="utf-8")
    _outcome(Subset.load, path)


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(
    st.fixed_dictionaries({"event": st.sampled_from(["tell", "skip", "ask", 3]),
                           "n": st.one_of(st.integers(0, 4), st.text(max_size=2)),
                           "item": st.sampled_from(["it0", "it1", "it9", 5, None]),
                           "score": JSON_VALUE, "reason": JSON_VALUE}).map(json.dumps),
    st.text(max_size=12)), max_size=4))
@pytest.mark.filterwarnings("ignore::bayeval.loop.session.JournalWarning")  # a cut last line
def test_journal_reader(small, lines):
    # the records carry their checks (as a journal written by bayeval does), so that what
    # is fuzzed is the replay's reading of their fields, not only the checks
    reference = small.drop_models(["m0"])
    path = _tmp(".journal.jsonl")
    Session(reference, "new", "random", journal=path).close()
    run = json.loads(path.read_text().splitlines()[0])["run"]

    def sealed(line: str) -> str:
        try:
            record = json.loads(line)
        except ValueError:
            return line
        return json.dumps(seal_record(record, run)) if isinstance(record, dict) else line

    with open(path, "a", encoding="utf-8") as fh:
        fh.write("\n".join(sealed(line) for line in lines))
    try:
        session = Session.resume(path, reference=reference)
    except BayevalError as exc:
        assert "\n" not in str(exc), str(exc)
        return
    session.close()
