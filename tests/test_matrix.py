from __future__ import annotations

import numpy as np
import pytest

from bayeval.data import ScoreMatrix, infer_kind
from bayeval.data.matrix import validate_score
from bayeval.errors import DataError


def test_basic_properties(small):
    assert small.shape == (6, 8)
    assert small.kind == "binary"
    assert small.scores.dtype == np.float64
    assert small.model_index("m3") == 3 and small.item_index("it5") == 5
    expected = np.array([np.nanmean(r) for r in small.scores])
    np.testing.assert_allclose(small.model_means(), expected)
    np.testing.assert_allclose(small.item_means(), np.nanmean(small.scores, axis=0))


def test_selection_by_ids_positions_and_masks(small):
    by_id = small.select_models(["m4", "m1"])
    assert list(by_id.models) == ["m4", "m1"]
    np.testing.assert_array_equal(by_id.scores, small.scores[[4, 1]])
    by_pos = small.select_items([0, -1])
    assert list(by_pos.items) == ["it0", "it7"]
    mask = np.arange(6) % 2 == 0
    assert list(small.select_models(mask).models) == ["m0", "m2", "m4"]
    ref, tgt = small.split(["m2", "m5"])
    assert list(tgt.models) == ["m2", "m5"] and "m2" not in set(ref.models)
    assert ref.n_models == 4


def test_kind_inference_and_override():
    s = np.array([[0.0, 0.5], [1.0, np.nan]])
    assert infer_kind(s) == "continuous"
    m = ScoreMatrix(np.array([[0.0, 1.0]]), ["a"], ["x", "y"], kind="continuous")
    assert m.kind == "continuous"
    with pytest.raises(DataError, match="not 0 or 1"):
        ScoreMatrix(s, ["a", "b"], ["x", "y"], kind="binary")


def test_immutable(small):
    with pytest.raises(ValueError):
        small.scores[0, 0] = 1.0


@pytest.mark.parametrize(
    ("scores", "models", "items", "message"),
    [
        (np.array([[0.0, np.inf]]), ["a"], ["x", "y"], "infinite score at model 'a', item 'y'"),
        (np.array([[0.0, 1.5]]), ["a"], ["x", "y"], "score 1.5 outside .0, 1. at model 'a'"),
        (np.array([[0.0, -0.1]]), ["a"], ["x", "y"], "outside"),
        (np.zeros((2, 2)), ["a", "a"], ["x", "y"], "duplicate model id 'a' at positions 0 and 1"),
        (np.zeros((1, 2)), ["a"], ["x", "x"], "duplicate item id 'x'"),
        (np.zeros((0, 2)), [], ["x", "y"], "empty benchmark"),
        (np.zeros((1, 0)), ["a"], [], "empty benchmark"),
        (np.zeros((1, 3)), ["a"], ["x", "y"], "shape .1, 3. but there are 1 model ids and 2"),
        (np.array([["0", "x"]], dtype=object), ["a"], ["x", "y"], "must be real numbers"),
        (np.array([[0.5 + 0.5j, 1.0]]), ["a"], ["x", "y"],
         "must be real numbers, got dtype complex128"),
        (np.zeros(3), ["a"], ["x", "y", "z"], "2-D"),
    ],
)
def test_bad_matrices_raise_one_line_errors(scores, models, items, message):
    with pytest.raises(DataError, match=message) as info:
        ScoreMatrix(scores, models, items, name="bad.csv")
    assert "\n" not in str(info.value) and str(info.value).startswith("bad.csv")


def test_unknown_ids(small):
    with pytest.raises(DataError, match="unknown model id 'zz'"):
        small.row("zz")
    with pytest.raises(DataError, match="unknown item id 'zz'"):
        small.select_items(["zz"])


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1.01, -0.5, "abc", None])
def test_validate_score_rejects(bad):
    with pytest.raises(DataError, match="item 'q'"):
        validate_score(bad, "item 'q'")


def test_validate_score_accepts():
    assert validate_score("0.25", "w") == 0.25 and validate_score(True, "w") == 1.0


def test_fingerprint_changes_with_content(small):
    same = ScoreMatrix(small.scores.copy(), small.models, small.items)
    assert same.fingerprint() == small.fingerprint()
    changed = small.scores.copy()
    changed[0, 0] = 1.0 - changed[0, 0]
    assert ScoreMatrix(changed, small.models, small.items).fingerprint() != small.fingerprint()
    assert small.select_models(["m0", "m1"]).fingerprint() != small.fingerprint()


def test_fill_with_item_means_against_a_loop():
    from bayeval.data.matrix import fill_with_item_means

    rng = np.random.default_rng(4)
    scores = rng.random((7, 9))
    scores[rng.random((7, 9)) < 0.3] = np.nan
    scores[:, 5] = np.nan  # an item no model has
    filled = fill_with_item_means(scores, empty=-1.0)
    for i in range(7):
        for j in range(9):
            column = [scores[m, j] for m in range(7) if not np.isnan(scores[m, j])]
            want = scores[i, j] if not np.isnan(scores[i, j]) else (
                sum(column) / len(column) if column else -1.0)
            assert filled[i, j] == pytest.approx(want, abs=1e-15)
    assert np.isnan(scores).sum() > 7  # the input is left as it was
    matrix = ScoreMatrix(scores, [f"m{i}" for i in range(7)], [f"i{j}" for j in range(9)])
    for j, mean in enumerate(matrix.item_means()):  # the same means, NaN for item 5
        column = scores[~np.isnan(scores[:, j]), j]
        assert np.isnan(mean) if j == 5 else mean == pytest.approx(column.mean(), abs=1e-15)


@pytest.mark.parametrize(("items", "message"), [
    (["a", "a\x00"], r"item id at position 1 contains a NUL character"),
    (["a", "b" * 5000], r"item id at position 1 has 5,000 characters \(at most 4,096"),
])
def test_an_id_no_command_line_can_carry_is_refused(items, message):
    # NumPy's strings drop trailing NULs ('a' and 'a\x00' merged, and holding one out
    # dropped both rows); an id of 128 KiB cannot be one argument of a command
    with pytest.raises(DataError, match=message):
        ScoreMatrix(np.ones((2, 2)), ["m", "n"], items)
