"""What every posterior backend provides (docs/architecture.md: pure functions over state).

A backend is four pure functions over an explicit pytree state::

    init(reference_scores, n_items) -> state
    observe(state, item, score)     -> state
    predict(state)                  -> Prediction
    refit(state, key)               -> (state, MaintenanceInfo)

and optionally ``compact(state) -> state``, housekeeping that ``observe`` relies on after
every ``compact_every`` observations (the exact backend folds its deferred rank-1 updates
there). :func:`advance` is the one place that schedules ``refit`` and ``compact``; it
returns a :class:`MaintenanceInfo` saying what ran and how it went (a re-fit that failed
is reported, never dropped silently; backends with nothing to fit use :func:`no_refit`).

so that the interactive :class:`~bayeval.loop.session.Session` and a vmapped simulation run the
same code. ``reference_scores`` is the models × items reference matrix as a float64 array
(NaN = not evaluated).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.types import Array, Prediction, State

__all__ = [
    "Array",
    "Backend",
    "MaintenanceInfo",
    "Prediction",
    "RefitInPieces",
    "RefitWarning",
    "State",
    "advance",
    "no_refit",
    "nothing_done",
    "refit_failure",
    "refit_schedule",
    "refitted",
]


class MaintenanceInfo(NamedTuple):
    """What the maintenance after an observation did.

    refitted:   a re-fit ran.
    accepted:   its result was used (False: it failed, e.g. a non-finite optimum, and the
                previous hyperparameters were kept).
    iterations: optimiser iterations of the re-fit (0 when none ran).
    grad_norm:  gradient norm at the optimiser's last iterate (NaN when none ran).
    compacted:  deferred updates were folded into the stored covariance.
    r_hat:      for a re-fit by MCMC, the largest split R̂ of its draws (NaN otherwise).
    divergences: for a re-fit by NUTS, its divergent transitions (0 otherwise).
    """

    refitted: Array
    accepted: Array
    iterations: Array
    grad_norm: Array
    compacted: Array
    r_hat: Array
    divergences: Array

    def refit_record(self, n: int) -> dict[str, Any]:
        """What the re-fit after the n-th observation did, as a journal-ready dict (R̂
        and divergences only for a re-fit by MCMC)."""
        record = {"n": n, "accepted": bool(self.accepted),
                  "iterations": int(self.iterations), "grad_norm": float(self.grad_norm)}
        if np.isfinite(self.r_hat):
            record.update(r_hat=float(self.r_hat), divergences=int(self.divergences))
        return record


class RefitWarning(UserWarning):
    """A backend's hyperparameter re-fit failed; the run went on with the previous
    hyperparameters (:attr:`bayeval.Session.refits` lists every re-fit)."""


def refit_failure(record: dict[str, Any]) -> str:
    """The note for a failed re-fit's ``record`` (:meth:`MaintenanceInfo.refit_record`)."""
    return (f"re-fit after observation {record['n']} failed (non-finite optimum after "
            f"{record['iterations']} iterations); the previous hyperparameters are kept")


def nothing_done() -> MaintenanceInfo:
    """The info of a step without maintenance."""
    no = jnp.zeros((), bool)
    return MaintenanceInfo(no, jnp.ones((), bool), jnp.zeros((), jnp.int32),
                           jnp.full((), jnp.nan), no, jnp.full((), jnp.nan),
                           jnp.zeros((), jnp.int32))


def refitted(accepted: Array, iterations: Array, grad_norm: Array,
             r_hat: Array = jnp.nan, divergences: Array = 0) -> MaintenanceInfo:
    """The info of a re-fit."""
    return MaintenanceInfo(jnp.ones((), bool), jnp.asarray(accepted, bool),
                           jnp.asarray(iterations, jnp.int32),
                           jnp.asarray(grad_norm, jnp.float64), jnp.zeros((), bool),
                           jnp.asarray(r_hat, jnp.float64),
                           jnp.asarray(divergences, jnp.int32))


class Backend(NamedTuple):
    """A posterior backend: the pure functions described in the module docstring;
    ``refit`` runs after every ``refit_every``-th observation (0: never), or where
    ``refit_due(n, state)`` says so when it is given (a schedule of its own, e.g. the IRT
    baseline's fits after 1, 10, 25 and every 50 observations, or the joint posterior's
    after its initial design); ``compact`` after every ``compact_every``-th one where no
    re-fit is due (0: never). ``begin(state, key)``, when given, makes the shared initial
    state one run's own from the run's key (the joint posterior draws its starting
    weights). ``settings``: the object that built the backend, where it has more to
    offer (:class:`RefitInPieces`)."""

    name: str
    init: Callable[[Array, int], State]
    observe: Callable[[State, Array, Array], State]
    predict: Callable[[State], Prediction]
    refit: Callable[[State, Array], tuple[State, MaintenanceInfo]]
    refit_every: int = 0
    compact: Callable[[State], State] | None = None
    compact_every: int = 0
    refit_due: Callable[[Array, State], Array] | None = None
    begin: Callable[[State, Array], State] | None = None
    settings: Any = None


@runtime_checkable
class RefitInPieces(Protocol):
    """Backend settings whose re-fit a Session runs as two programs at slot counts picked in
    Python, each donating the state's buffers (a state too large to copy at every step:
    :meth:`bayeval.methods.base.Method.step`); a vmapped simulation runs ``refit``."""

    def refit_slots(self, state: State) -> tuple[int, int]:
        """(fit, rebuild) slot counts for one run's ``state``."""
        ...

    def fit_at(self, state: State, key: Array, fit_size: int) -> dict[str, Array]:
        """The new hyperparameters, fitted in ``fit_size`` slots."""
        ...

    def rebuild_at(self, state: State, params: dict[str, Array],
                   size: int) -> tuple[State, MaintenanceInfo]:
        """The state rebuilt under ``params`` in ``size`` slots, with what the re-fit did."""
        ...


def no_refit(state: State, key: Array) -> tuple[State, MaintenanceInfo]:
    """``refit`` for backends without hyperparameters."""
    del key
    return state, nothing_done()


def refit_schedule(backend: Backend, state: State, n: Any) -> Any:
    """Whether ``backend`` re-fits after the n-th observation (``n`` a number or an array):
    every ``refit_every``-th, or where its own ``refit_due(n, state)`` says; None when it
    never re-fits."""
    if backend.refit_due is not None:
        return backend.refit_due(n, state)
    if backend.refit_every:
        return n % backend.refit_every == 0
    return None


def advance(backend: Backend, state: State, n: Array, key: Array,
            refit: Callable[[State, Array], tuple[State, MaintenanceInfo]] | None = None,
            compact: Callable[[State], State] | None = None,
            quiet: MaintenanceInfo | None = None,
            refit_due: Array | None = None) -> tuple[State, MaintenanceInfo]:
    """After the n-th observation: re-fit when due, else compact when due, else nothing;
    returns the state and what was done.

    A re-fit is due every ``backend.refit_every`` observations, or where
    ``backend.refit_due(n, state)`` says, or where ``refit_due`` (a boolean of ``n``) says
    so.

    ``n`` must be the same for every run when this is traced under ``vmap`` (as in the
    lock-step simulation engine), so that the branch is a real one; ``refit`` / ``compact``
    replace the backend's own functions (e.g. by batched versions), ``quiet`` the info of
    no maintenance (batched likewise)."""
    refit = backend.refit if refit is None else refit
    compact = backend.compact if compact is None else compact
    quiet = nothing_done() if quiet is None else quiet
    branches = [lambda s, k: (s, quiet)]
    index = jnp.zeros((), jnp.int32)
    if backend.compact_every and compact is not None:
        branches.append(lambda s, k: (compact(s), quiet._replace(
            compacted=jnp.ones_like(quiet.compacted))))
        index = jnp.where(n % backend.compact_every == 0, len(branches) - 1, index)
    due = refit_schedule(backend, state, n) if refit_due is None else refit_due
    if due is not None:
        branches.append(refit)
        index = jnp.where(due, len(branches) - 1, index)
    if len(branches) == 1:
        return state, quiet
    return jax.lax.switch(index, branches, state, key)
