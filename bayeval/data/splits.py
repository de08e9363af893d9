"""Reference/target splits of a score matrix (seed 000 §5.1, docs/methods.md §6).

* **Interpolation**: targets drawn uniformly at random; every other model forms the pool.
* **Extrapolation**: the best models by true score are the targets; the next
  ``discard_fraction`` of models below them are discarded (our choice: a fraction of all
  models, so that the gap between pool and targets does not shrink with the number of
  targets); the rest form the pool.

Then a random ``reference_fraction`` of the pool (at least one model) is the reference set.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np

from bayeval.data.matrix import ScoreMatrix
from bayeval.errors import DataError

Regime = Literal["interpolation", "extrapolation"]


class Split(NamedTuple):
    reference: ScoreMatrix
    targets: ScoreMatrix


def make_split(matrix: ScoreMatrix, regime: Regime = "interpolation", n_targets: int = 10,
               reference_fraction: float = 0.5, seed: int = 0,
               discard_fraction: float = 0.2, reference_seed: int | None = None) -> Split:
    """A reference/target split following the protocol of docs/methods.md §6.

    ``seed`` draws the targets and, unless ``reference_seed`` is given, the reference
    subset; with ``reference_seed`` the targets stay those of ``seed`` and only the
    reference subset is redrawn (one draw per experiment seed)."""
    if not 0.0 < reference_fraction <= 1.0:
        raise DataError(f"reference_fraction must be in (0, 1], got {reference_fraction}")
    if not 0 < n_targets < matrix.n_models:
        raise DataError(f"n_targets must be in 1..{matrix.n_models - 1}, got {n_targets}")
    rng = np.random.default_rng(seed)
    if regime == "interpolation":
        order = rng.permutation(matrix.n_models)
        targets, pool = order[:n_targets], order[n_targets:]
    elif regime == "extrapolation":
        means = matrix.model_means()
        order = np.argsort(-np.nan_to_num(means, nan=-np.inf), kind="stable")
        n_discard = round(discard_fraction * matrix.n_models)
        targets, pool = order[:n_targets], order[n_targets + n_discard:]
    else:
        raise DataError(f"regime must be 'interpolation' or 'extrapolation', got {regime!r}")
    if pool.size == 0:
        raise DataError(f"{matrix.name}: no models left for the reference pool")
    n_ref = max(1, round(reference_fraction * pool.size))
    if reference_seed is not None:
        rng = np.random.default_rng([seed, reference_seed])
    reference = rng.choice(pool, size=n_ref, replace=False)
    return Split(matrix.select_models(np.sort(reference)), matrix.select_models(targets))
