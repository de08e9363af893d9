"""Stopping rules (seed 000 §3.1 "stopping", docs/methods.md §1).

A stopping rule is a pair of pure functions over an explicit state::

    init()                                  -> state
    update(state, estimate, prediction)     -> (state, stop: bool array)

``update`` is called once after every observation with the estimator's report
(:class:`~bayeval.types.Estimate`: the estimate and its interval at the method's level)
and the backend's new posterior summary (its ``n`` field counts the observations). Rules
compose with :func:`all_of` and :func:`any_of`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax.numpy as jnp

from bayeval.hparams import known, shown
from bayeval.types import Array, Estimate, Prediction


class StoppingRule(NamedTuple):
    name: str
    init: Callable[[], Any]
    update: Callable[[Any, Estimate, Prediction], tuple[Any, Array]]


def interval_width(epsilon: float) -> StoppingRule:
    """Stop when the estimator's interval is at most ε2 wide (cond. ii). For a Gaussian
    posterior the width is 2 z_{(1+level)/2} sqrt(Var(R | C))."""
    if known(epsilon) and not epsilon > 0:
        raise ValueError(f"epsilon must be positive, got {epsilon}")

    def update(state, estimate: Estimate, prediction: Prediction):
        return state, estimate.upper - estimate.lower <= epsilon

    return StoppingRule(f"interval_width({shown(epsilon)})", lambda: (), update)


def window_range(epsilon: float = 0.005, window: int = 30) -> StoppingRule:
    """Stop when max − min of the estimate R̂ over the last ``window`` + 1 steps is ≤ ε1 (cond. i).

    The state is a ring buffer of the last ``window + 1`` estimates and a count; the rule
    cannot fire before ``window + 1`` estimates have been seen.
    """
    if window < 1:
        raise ValueError(f"window must be ≥ 1, got {window}")

    def init():
        return jnp.zeros(window + 1, jnp.float64), jnp.zeros((), jnp.int32)

    def update(state, estimate: Estimate, prediction: Prediction):
        buffer, count = state
        buffer = buffer.at[count % (window + 1)].set(estimate.value)
        count = count + 1
        spread = jnp.max(buffer) - jnp.min(buffer)
        return (buffer, count), (count >= window + 1) & (spread <= epsilon)

    return StoppingRule(f"window_range({shown(epsilon)}, W={window})", init, update)


def width_after(n_min: int, epsilon: float) -> StoppingRule:
    """Stop once ``n_min`` items are observed and the interval is at most ``epsilon``
    wide (the design-valid methods' rule, docs/methods.md §9 "Stopping"); refuses n_min < 1
    and an ε that is not positive (NaN included)."""
    if known(epsilon) and not epsilon > 0:
        raise ValueError(f"epsilon must be positive, got {epsilon}")
    if known(n_min) and n_min < 1:
        raise ValueError(f"n_min must be ≥ 1, got {n_min}")
    return all_of(min_observations(n_min), interval_width(epsilon))


def min_observations(n_min: int) -> StoppingRule:
    """Allows stopping only once ``n_min`` items are observed (use inside :func:`all_of`)."""

    def update(state, estimate: Estimate, prediction: Prediction):
        return state, prediction.n >= n_min

    return StoppingRule(f"min_observations({shown(n_min)})", lambda: (), update)


def budget_rounds(budget: float, n_items: int) -> int:
    """Rounds T of a budget: an integer ≥ 1 is a count, a number in (0, 1) a share of
    the N items (round(share · N), at least 1)."""
    if budget >= 1:
        if budget != int(budget):
            raise ValueError(f"a budget ≥ 1 must be a whole number of items, got {budget}")
        return int(budget)
    if budget <= 0:
        raise ValueError(f"budget must be positive, got {budget}")
    return max(1, round(budget * n_items))


def budget(n_max: float) -> StoppingRule:
    """Stop once ``n_max`` items are observed (use inside :func:`any_of`); a number in
    (0, 1) is a share of the items (:func:`budget_rounds`)."""
    budget_rounds(n_max, 1)  # validates

    def update(state, estimate: Estimate, prediction: Prediction):
        rounds = n_max if n_max >= 1 else budget_rounds(n_max, prediction.item_mean.shape[-1])
        return state, prediction.n >= rounds

    return StoppingRule(f"budget({n_max:g})", lambda: (), update)


def _combine(rules: tuple[StoppingRule, ...], reduce, word: str) -> StoppingRule:
    if not rules:
        raise ValueError(f"{word}() needs at least one rule")

    def init():
        return tuple(r.init() for r in rules)

    def update(state, estimate: Estimate, prediction: Prediction):
        new_states, stops = [], []
        for rule, s in zip(rules, state, strict=True):
            s, stop = rule.update(s, estimate, prediction)
            new_states.append(s)
            stops.append(stop)
        return tuple(new_states), reduce(jnp.stack(stops))

    return StoppingRule(f"{word}({', '.join(r.name for r in rules)})", init, update)


def all_of(*rules: StoppingRule) -> StoppingRule:
    """Stop when every rule says stop (each rule's state is updated every step)."""
    return _combine(rules, jnp.all, "all_of")


def any_of(*rules: StoppingRule) -> StoppingRule:
    """Stop when any rule says stop."""
    return _combine(rules, jnp.any, "any_of")


def two_condition(epsilon2: float, epsilon1: float = 0.005, window: int = 30) -> StoppingRule:
    """BayesAME's rule: window range ≤ ε1 and interval width ≤ ε2 (seed 000 §3.1)."""
    return all_of(window_range(epsilon1, window), interval_width(epsilon2))
