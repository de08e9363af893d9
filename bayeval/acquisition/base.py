"""Acquisition rules and their combinators (docs/architecture.md: composable rules).

A **rule** maps a :class:`~bayeval.types.Prediction` and a boolean mask of the candidate
items still available to one log-weight per item (higher = more wanted; entries outside
the mask are ignored). Combinators build rules from rules: :func:`mixture` and
:func:`blend` (mixtures of softmaxes, weights numbers or schedules of the round),
:func:`power` (h^β), :func:`tempered` (log-weights / temperature), :func:`uniform_floor`
((1 − τ) h + τ uniform) and :func:`switch` (a regime switch). A **schedule** is a
function of the Prediction (e.g. of its round ``n``) giving a number
(:mod:`bayeval.acquisition.schedules`). Policies that turn log-weights into draws are in
:mod:`bayeval.acquisition.policies`.

Rules are pure JAX functions, so a composed rule jits and vmaps.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from bayeval.types import Array, Prediction

Rule = Callable[[Prediction, Array], Array]
Schedule = Callable[[Prediction], Array]


def uniform() -> Rule:
    """Every available item equally wanted: random selection."""

    def rule(prediction: Prediction, available: Array) -> Array:
        return jnp.zeros(available.shape, jnp.float64)

    return rule


def switch(condition, if_true: Rule, if_false: Rule) -> Rule:
    """``if_true`` where ``condition(prediction)`` holds, else ``if_false`` (a regime
    switch, e.g. BayesAME's fall-back to random selection)."""

    def rule(prediction: Prediction, available: Array) -> Array:
        return jnp.where(condition(prediction), if_true(prediction, available),
                         if_false(prediction, available))

    return rule


def probabilities(log_weights: Array, available: Array) -> Array:
    """softmax(log_w) over the available items (0 elsewhere)."""
    return jax.nn.softmax(jnp.where(available, log_weights, -jnp.inf))


def _log_softmax(log_w: Array, available: Array) -> Array:
    masked = jnp.where(available, log_w, -jnp.inf)
    total = jax.scipy.special.logsumexp(masked)
    return jnp.where(jnp.isfinite(total), masked - total, -jnp.inf)


def _value(x: float | Schedule, prediction: Prediction) -> Array:
    return x(prediction) if callable(x) else jnp.asarray(x, jnp.float64)


def mixture(rules: list[Rule], weights: list) -> Rule:
    """The distribution Σ_k w_k softmax(rule_k) over available items, as log-weights.

    A weight is a number or a schedule (a function of the :class:`Prediction`, e.g. of
    the round ``n``); weights are normalised to sum to 1. With a sampling policy this
    draws from rule k with probability w_k (FAQ's hybrid policy mixes its oracle and
    active parts this way)."""

    def rule(prediction: Prediction, available: Array) -> Array:
        w = jnp.stack([_value(x, prediction) for x in weights])
        w = w / w.sum()
        parts = jnp.stack([_log_softmax(r(prediction, available), available) for r in rules])
        return jax.scipy.special.logsumexp(parts + jnp.log(w)[:, None], axis=0)

    return rule


def blend(first: Rule, second: Rule, alpha: float | Schedule) -> Rule:
    """(1 − α) softmax(first) + α softmax(second) as log-weights; α a number or a
    schedule."""
    return mixture([first, second], [lambda p: 1.0 - _value(alpha, p),
                                     lambda p: _value(alpha, p)])


def power(inner: Rule, exponent: float | Schedule) -> Rule:
    """h^β for h = softmax(inner): β · log h (β a number or a schedule; β → 0 flattens h
    towards uniform)."""

    def rule(prediction: Prediction, available: Array) -> Array:
        log_h = jnp.where(available, inner(prediction, available), -jnp.inf)
        log_h = log_h - jax.scipy.special.logsumexp(log_h)
        # masked after scaling: β = 0 would turn −∞ into NaN
        return jnp.where(available, _value(exponent, prediction) * log_h, -jnp.inf)

    return rule


def tempered(inner: Rule, temperature: float) -> Rule:
    """log-weights divided by ``temperature`` (→ argmax as it → 0, uniform as it → ∞)."""

    def rule(prediction: Prediction, available: Array) -> Array:
        return inner(prediction, available) / temperature

    return rule


def uniform_floor(inner: Rule, tau: float) -> Rule:
    """(1 − τ) softmax(inner) + τ · uniform: every available item keeps probability ≥
    τ / #available."""
    return mixture([inner, uniform()], [1.0 - tau, tau])
