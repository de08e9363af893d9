from __future__ import annotations

import numpy as np
import pytest

from bayeval.data import ScoreMatrix, load_dataset
from bayeval.precision import enable_float64

enable_float64()  # the library refuses float32 (bayeval.precision); tests use its internals


@pytest.fixture(scope="session")
def ifeval() -> ScoreMatrix:
    return load_dataset("ifeval")


@pytest.fixture
def small() -> ScoreMatrix:
    """6 models × 8 items, binary, with one missing cell."""
    rng = np.random.default_rng(0)
    scores = (rng.random((6, 8)) < np.linspace(0.2, 0.8, 6)[:, None]).astype(float)
    scores[2, 3] = np.nan
    return ScoreMatrix(scores, [f"m{i}" for i in range(6)], [f"it{j}" for j in range(8)],
                       name="small")


@pytest.fixture(scope="session")
def ref() -> np.ndarray:
    """A binary reference matrix, 6 models × 10 items in 7 buckets (some of size > 1), for
    the multi-target tests."""
    rng = np.random.default_rng(11)
    base = (rng.random((6, 7)) < 0.5).astype(float)
    return base[:, np.array([0, 1, 2, 3, 4, 5, 6, 0, 2, 2])]
