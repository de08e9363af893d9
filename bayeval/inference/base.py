"""What every posterior backend provides (ARCHITECTURE.md: pure functions over state).

A backend is four pure functions over an explicit pytree state::

    init(reference_scores, n_items) -> state
    observe(state, item, score)     -> state
    predict(state)                  -> Prediction
    refit(state, key)               -> state      (identity for backends with nothing to fit)

so that the interactive :class:`~bayeval.session.Session` and a vmapped simulation run the
same code. ``reference_scores`` is the models × items reference matrix as a float64 array
(NaN = not evaluated).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

Array = jax.Array
State = Any


class Prediction(NamedTuple):
    """The posterior summary that estimators, acquisition and stopping rules read.

    mean:      E[R | C], the estimate of the full-benchmark score R = (1/N) Σ_i s_i.
    var:       Var(R | C).
    item_mean: (N,) E[s_i | C] (an observed item's entry is its score).
    item_var:  (N,) Var(s_i | C) of a new observation of item i (0 once observed).
    item_cov:  (N,) Cov(R, s_i | C) (0 once observed).
    n:         number of observed items.
    nearly_unique: whether the model's reference vectors are nearly all distinct
               (BayesAME's B ≥ N − N0); below that, its selection falls back to random.
    """

    mean: Array
    var: Array
    item_mean: Array
    item_var: Array
    item_cov: Array
    n: Array
    nearly_unique: Array


class Backend(NamedTuple):
    """A posterior backend: the four pure functions described in the module docstring,
    and ``refit_every`` = F: ``refit`` runs after every F-th observation (0: never)."""

    name: str
    init: Callable[[Array, int], State]
    observe: Callable[[State, Array, Array], State]
    predict: Callable[[State], Prediction]
    refit: Callable[[State, Array], State]
    refit_every: int = 0


def no_refit(state: State, key: Array) -> State:
    """``refit`` for backends without hyperparameters."""
    del key
    return state
