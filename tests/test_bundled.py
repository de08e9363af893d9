from __future__ import annotations

import numpy as np
import pytest

from bayeval.data import list_datasets, load_dataset, make_split
from bayeval.errors import DataError

# Shapes as published in the bundled README (shared data provenance table).
SHAPES = {"ifeval": (448, 541), "musr": (448, 756), "arc_challenge": (218, 1172),
          "commonsense": (83, 500), "math": (83, 437), "mmlu": (83, 567), "mrpc": (87, 408),
          "rte": (87, 277), "sst2": (87, 872)}


def test_every_bundled_dataset_loads_with_its_shape():
    assert list_datasets() == sorted(SHAPES)
    for name, shape in SHAPES.items():
        m = load_dataset(name)
        assert m.shape == shape and m.kind == "binary" and m.name == name
        assert {"source", "task", "metric"} <= set(m.metadata)
        assert len(set(m.models)) == m.n_models


def test_repeated_leaderboard_entries_get_numbered(ifeval):
    assert "gpt2#2" in set(ifeval.models)
    np.testing.assert_array_equal(ifeval.row("gpt2"), ifeval.row("gpt2#2"))


def test_unknown_dataset():
    with pytest.raises(DataError, match="unknown dataset 'nope' .bundled: arc_challenge"):
        load_dataset("nope")


def test_interpolation_split(ifeval):
    s = make_split(ifeval, "interpolation", n_targets=10, reference_fraction=0.5, seed=3)
    assert s.targets.n_models == 10
    assert s.reference.n_models == round(0.5 * (448 - 10))
    assert not set(s.targets.models) & set(s.reference.models)
    again = make_split(ifeval, "interpolation", n_targets=10, reference_fraction=0.5, seed=3)
    assert list(again.targets.models) == list(s.targets.models)


def test_extrapolation_split_takes_the_best_as_targets(ifeval):
    s = make_split(ifeval, "extrapolation", n_targets=10, reference_fraction=0.9, seed=0)
    means = ifeval.model_means()
    best = set(ifeval.models[np.argsort(-means, kind="stable")[:10]])
    assert set(s.targets.models) == best
    # the discarded 20% sit between targets and pool: every reference model is worse than
    # every model in the discarded band
    assert s.reference.model_means().max() <= np.sort(means)[::-1][10 + round(0.2 * 448)]
    assert s.reference.n_models == round(0.9 * (448 - 10 - round(0.2 * 448)))


def test_split_argument_errors(small):
    with pytest.raises(DataError, match="reference_fraction"):
        make_split(small, reference_fraction=0.0)
    with pytest.raises(DataError, match="n_targets"):
        make_split(small, n_targets=6)
    with pytest.raises(DataError, match="regime"):
        make_split(small, regime="sideways", n_targets=2)  # type: ignore[arg-type]
