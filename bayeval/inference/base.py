"""What every posterior backend provides (ARCHITECTURE.md: pure functions over state).

A backend is four pure functions over an explicit pytree state::

    init(reference_scores, n_items) -> state
    observe(state, item, score)     -> state
    predict(state)                  -> Prediction
    refit(state, key)               -> state      (identity for backends with nothing to fit)

and optionally ``compact(state) -> state``, housekeeping that ``observe`` relies on after
every ``compact_every`` observations (the exact backend folds its deferred rank-1 updates
there). :func:`advance` is the one place that schedules ``refit`` and ``compact``.

so that the interactive :class:`~bayeval.session.Session` and a vmapped simulation run the
same code. ``reference_scores`` is the models × items reference matrix as a float64 array
(NaN = not evaluated).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayeval.types import Array, Prediction, State

__all__ = ["Array", "Backend", "Prediction", "State", "advance", "no_refit"]

class Backend(NamedTuple):
    """A posterior backend: the pure functions described in the module docstring;
    ``refit`` runs after every ``refit_every``-th observation (0: never), ``compact`` after
    every ``compact_every``-th one where no re-fit is due (0: never)."""

    name: str
    init: Callable[[Array, int], State]
    observe: Callable[[State, Array, Array], State]
    predict: Callable[[State], Prediction]
    refit: Callable[[State, Array], State]
    refit_every: int = 0
    compact: Callable[[State], State] | None = None
    compact_every: int = 0


def no_refit(state: State, key: Array) -> State:
    """``refit`` for backends without hyperparameters."""
    del key
    return state


def advance(backend: Backend, state: State, n: Array, key: Array,
            refit: Callable[[State, Array], State] | None = None,
            compact: Callable[[State], State] | None = None) -> State:
    """After the n-th observation: re-fit when due, else compact when due, else nothing.

    ``n`` must be the same for every run when this is traced under ``vmap`` (as in the
    lock-step simulation engine), so that the branch is a real one; ``refit`` / ``compact``
    replace the backend's own functions (e.g. by batched versions)."""
    refit = backend.refit if refit is None else refit
    compact = backend.compact if compact is None else compact
    branches = [lambda s, k: s]
    index = jnp.zeros((), jnp.int32)
    if backend.compact_every and compact is not None:
        branches.append(lambda s, k: compact(s))
        index = jnp.where(n % backend.compact_every == 0, len(branches) - 1, index)
    if backend.refit_every:
        branches.append(refit)
        index = jnp.where(n % backend.refit_every == 0, len(branches) - 1, index)
    if len(branches) == 1:
        return state
    return jax.lax.switch(index, branches, state, key)
