from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bayeval.data import (
    ScoreMatrix,
    from_frame,
    read_csv,
    read_matrix,
    read_npz,
    write_matrix,
)
from bayeval.errors import DataError


@pytest.mark.parametrize("suffix", [".npz", ".csv", ".parquet"])
@pytest.mark.parametrize("layout", ["wide", "long"])
def test_round_trip(tmp_path, small, suffix, layout):
    path = tmp_path / f"m{suffix}"
    write_matrix(small, path, layout=layout)
    back = read_matrix(path)
    assert back.equals(small)


def test_continuous_round_trip_keeps_kind(tmp_path):
    m = ScoreMatrix(np.array([[0.25, 1.0], [0.0, np.nan]]), ["a", "b"], ["x", "y"])
    for name in ("c.npz", "c.csv", "c.parquet"):
        back = read_matrix(tmp_path / name) if write_matrix(m, tmp_path / name) is None else None
        assert back.kind == "continuous" and back.equals(m)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 5), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_csv_round_trip_property(tmp_path, n_models, n_items, seed):
    rng = np.random.default_rng(seed)
    scores = rng.random((n_models, n_items))
    scores[rng.random(scores.shape) < 0.2] = np.nan
    m = ScoreMatrix(scores, [f"m,{i}" for i in range(n_models)],
                    [f'i"{j}' for j in range(n_items)])
    path = tmp_path / f"p{seed}.csv"
    write_matrix(m, path)
    back = read_csv(path)
    np.testing.assert_array_equal(back.scores, m.scores)  # repr of floats round-trips
    assert list(back.models) == list(m.models) and list(back.items) == list(m.items)


def _write(path, text):
    path.write_text(text)
    return path


def test_ragged_csv(tmp_path):
    p = _write(tmp_path / "r.csv", "model,a,b\nm1,1,0\nm2,1\n")
    with pytest.raises(DataError, match=r"r.csv line 3: 2 fields, expected 3 .*ragged"):
        read_csv(p)


def test_non_numeric_cell(tmp_path):
    p = _write(tmp_path / "n.csv", "model,a,b\nm1,1,0\nm2,1,yes please\n")
    with pytest.raises(DataError, match=r"n.csv line 3, item 'b': 'yes please' is not a number"):
        read_csv(p)


@pytest.mark.parametrize("cell", ["١", "0.0_1", "１", "0x1"])
def test_a_cell_is_a_number_only_in_ascii_decimal(tmp_path, cell):
    # Python's float() reads '١' (Arabic-Indic one), '１' (full width) and '0.0_1'
    p = _write(tmp_path / "u.csv", f"model,a,b\nm1,1,0\nm2,1,{cell}\n")
    with pytest.raises(DataError, match=rf"u.csv line 3, item 'b': '{cell}' is not a number"):
        read_csv(p)


def test_missing_markers_and_booleans(tmp_path):
    p = _write(tmp_path / "m.csv", "model,a,b,c\nm1,,NA,true\nm2,nan,1,False\n")
    m = read_csv(p)
    assert np.isnan(m.scores[0, :2]).all() and np.isnan(m.scores[1, 0])
    assert m.scores[1, 1] == 1.0 and list(m.scores[:, 2]) == [1.0, 0.0]


def test_out_of_range_and_inf_in_file(tmp_path):
    with pytest.raises(DataError, match=r"score 2 outside \[0, 1\] at model 'm2', item 'b'"):
        read_csv(_write(tmp_path / "o.csv", "model,a,b\nm1,1,0\nm2,1,2\n"))
    with pytest.raises(DataError, match=r"infinite score at model 'm1', item 'a'"):
        read_csv(_write(tmp_path / "i.csv", "model,a,b\nm1,inf,0\n"))


def test_duplicates_in_files(tmp_path):
    with pytest.raises(DataError, match="duplicate model id 'm1'"):
        read_csv(_write(tmp_path / "d.csv", "model,a\nm1,1\nm1,0\n"))
    with pytest.raises(DataError, match="duplicate item id 'a'"):
        read_csv(_write(tmp_path / "e.csv", "model,a,a\nm1,1,0\n"))
    with pytest.raises(DataError, match=r"l.csv line 3: duplicate score for model 'm1', item "
                                        r"'a' \(first at line 2\)"):
        read_csv(_write(tmp_path / "l.csv", "model,item,score\nm1,a,1\nm1,a,0\n"))


def test_empty_files(tmp_path):
    with pytest.raises(DataError, match="empty file"):
        read_csv(_write(tmp_path / "z.csv", ""))
    with pytest.raises(DataError, match="empty benchmark"):
        read_csv(_write(tmp_path / "h.csv", "model,a,b\n"))
    with pytest.raises(DataError, match="empty benchmark"):
        read_csv(_write(tmp_path / "k.csv", "model,item,score\n"))


def test_long_csv_with_gaps(tmp_path):
    p = _write(tmp_path / "g.csv", "model,item,score\nm1,a,1\nm2,b,0.5\n")
    m = read_csv(p)
    assert m.kind == "continuous" and m.shape == (2, 2)
    assert np.isnan(m.scores[0, 1]) and m.scores[1, 1] == 0.5


@pytest.mark.parametrize("order", ["model,item,score", "item,model,score",
                                   "score,item,model", "Item, Score, Model"])
def test_a_long_table_is_read_with_its_columns_in_any_order(tmp_path, order):
    # the header names the columns: their order does not matter (the fast and the
    # row-by-row CSV readers, a DataFrame, parquet); a bad cell still names its line
    names = [c.strip().lower() for c in order.split(",")]
    cells = [("m1", "a", "1"), ("m1", "b", "0"), ("m2", "a", "0.5")]
    rows = ["".join(",".join(dict(zip(("model", "item", "score"), c, strict=True))[n]
                             for n in names)) for c in cells]
    csv = _write(tmp_path / "l.csv", order + "\n" + "\n".join(rows) + "\n")
    frame = pd.read_csv(csv)
    frame.to_parquet(tmp_path / "l.parquet")
    for m in (read_csv(csv), from_frame(frame), read_matrix(tmp_path / "l.parquet")):
        assert list(m.models) == ["m1", "m2"] and list(m.items) == ["a", "b"]
        np.testing.assert_array_equal(m.scores, [[1, 0], [0.5, np.nan]])
    bad = _write(tmp_path / "bad.csv", order + "\n" + rows[0] + "\n"
                 + rows[1].replace(",0", ",x").replace("0,", "x,") + "\n")
    with pytest.raises(DataError, match=r"bad.csv line 3: 'x' is not a number"):
        read_csv(bad)


def test_pickled_npz_is_refused(tmp_path):
    p = tmp_path / "p.npz"
    np.savez(p, scores=np.zeros((1, 2)), models=np.array(["a"], dtype=object),
             items=np.array(["x", "y"]))
    with pytest.raises(DataError, match=r"p.npz: array 'models' is pickled"):
        read_npz(p)


def test_npz_missing_arrays_and_garbage(tmp_path):
    p = tmp_path / "q.npz"
    np.savez(p, scores=np.zeros((1, 2)))
    with pytest.raises(DataError, match="missing array.s. models, items"):
        read_npz(p)
    g = _write(tmp_path / "g.npz", "not a zip")
    with pytest.raises(DataError, match="g.npz: not a readable .npz"):
        read_npz(g)


def test_parquet_errors(tmp_path):
    frame = pd.DataFrame({"model": ["m1", "m2"], "a": [1.0, 0.0], "b": ["0", "x"]})
    frame.to_parquet(tmp_path / "w.parquet")
    with pytest.raises(DataError, match=r"w.parquet row 2, item 'b': 'x' is not a number"):
        read_matrix(tmp_path / "w.parquet")
    _write(tmp_path / "bad.parquet", "nope")
    with pytest.raises(DataError, match="not a readable parquet"):
        read_matrix(tmp_path / "bad.parquet")


def test_from_frame_needs_model_column():
    with pytest.raises(DataError, match="first column 'model'"):
        from_frame(pd.DataFrame({"x": [1.0]}))


def test_unknown_suffix_and_missing_file(tmp_path):
    with pytest.raises(DataError, match="unknown format '.xlsx'"):
        read_matrix(tmp_path / "a.xlsx")
    with pytest.raises(DataError, match="no such file"):
        read_matrix(tmp_path / "missing.csv")


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".npz"])
def test_metadata_travels_with_the_matrix(tmp_path, small, suffix):
    """The harness task, metric and subtask split survive a CSV (sidecar NAME.csv.meta.json)
    or parquet (schema key) round trip, so a subset exported from the file keeps the
    harness's task name instead of the file path."""
    from bayeval.compression.build import build_subset
    from bayeval.data.lm_eval import harness_task

    meta = {"source": "lm-evaluation-harness", "task": "toy_add", "metric": "acc",
            "subtasks": "toy_add:8"}
    scores = np.nan_to_num(small.scores)  # compress needs a complete matrix
    matrix = ScoreMatrix(scores, small.models, [f"toy_add-{j:05d}" for j in range(8)],
                         metadata=meta)
    path = tmp_path / f"scores{suffix}"
    write_matrix(matrix, path)
    again = read_matrix(path)
    assert {k: again.metadata[k] for k in meta} == meta and harness_task(again) == "toy_add"
    subset = build_subset(again, "random", size=3, seed=0)
    assert subset.task == "toy_add" and subset.metric == "acc"
    assert list(subset.harness_samples()) == ["toy_add"]
    if suffix == ".csv":  # a matrix without metadata written over it drops the stale sidecar
        write_matrix(ScoreMatrix(small.scores, small.models, small.items), path)
        assert not Path(f"{path}.meta.json").exists() and read_matrix(path).metadata == {}


def test_an_npz_declaring_more_data_than_it_holds_is_refused_before_allocation(tmp_path):
    # a 1 kB archive whose header declares 80 GB: refused from the header, not allocated
    import io
    import zipfile

    from bayeval.data.io import read_npz

    def member(array) -> bytes:
        out = io.BytesIO()
        np.lib.format.write_array(out, array)
        return out.getvalue()

    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("scores.npy", member(np.zeros(3)).replace(b"(3,)", b"(10000000000,)"))
        archive.writestr("models.npy", member(np.array(["m"])))
        archive.writestr("items.npy", member(np.array(["i"])))
    assert path.stat().st_size < 1024
    with pytest.raises(DataError, match=r"array 'scores' declares shape \(10000000000,\) "
                                        r"\(80,000,000,000 bytes\) but holds"):
        read_npz(path)


def test_a_semicolon_separated_csv_is_named_as_such(tmp_path):
    # it was read as one column: "0 items"
    p = _write(tmp_path / "s.csv", "model;a;b\nm1;1;0\nm2;0;1\n")
    with pytest.raises(DataError, match=r"the file looks ';'-separated; bayeval reads "
                                        r"comma-separated CSV"):
        read_csv(p)


def test_a_pandas_missing_value_in_a_text_column_is_missing(tmp_path):
    # a nullable string column writes pandas' <NA>: it is a missing cell, not "not a number"
    frame = pd.DataFrame({"model": ["m1", "m2", "m3"],
                          "a": pd.array(["1", None, "0"], dtype="string"),
                          "b": pd.array([1.0, 0.0, 1.0], dtype="Float64")})
    frame.to_parquet(tmp_path / "na.parquet")
    m = read_matrix(tmp_path / "na.parquet")
    assert np.isnan(m.scores[1, 0]) and m.scores[0, 0] == 1.0 and m.scores[2, 0] == 0.0
