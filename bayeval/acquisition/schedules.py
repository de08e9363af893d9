"""Schedules of the round s (``Prediction.n``) for FAQ's hybrid policy (seed 001 §3.3–3.5;
docs/methods.md §3): the exploration weight α_s and the tempering exponent β_s, as traced
formulas (:func:`exploration_weight`, :func:`tempering_exponent`, shared with FAQ's fused
simulator) and as schedules that combinators take (:func:`exploration`,
:func:`tempering`)."""

from __future__ import annotations

import jax.numpy as jnp

from bayeval.acquisition.base import Schedule
from bayeval.stopping.rules import budget_rounds
from bayeval.types import Array, Prediction


def exploration_weight(rho: Array, s: Array, rounds: int) -> Array:
    """α_s = max(0, 1 − (s + 1)/(ρ T)), 0 when ρ = 0 (``rho`` may be traced)."""
    r = jnp.asarray(rho, jnp.float64)
    decay = 1.0 - (s + 1.0) / (jnp.where(r > 0, r, 1.0) * rounds)
    return jnp.where(r > 0, jnp.maximum(0.0, decay), 0.0)


def tempering_exponent(beta0: Array, gamma: Array, s: Array, rounds: int) -> Array:
    """β_s = β0 min((s + 1)/(γ T), 1), β0 when γ = 0 (``beta0``, ``gamma`` may be traced)."""
    g = jnp.asarray(gamma, jnp.float64)
    ramp = jnp.minimum((s + 1.0) / (jnp.where(g > 0, g, 1.0) * rounds), 1.0)
    return beta0 * jnp.where(g > 0, ramp, 1.0)


def exploration(rho: float, budget: float) -> Schedule:
    """The schedule α_s of :func:`exploration_weight` at round s = ``Prediction.n``: the
    active part's share, decaying to 0 by round ρT."""

    def alpha(prediction: Prediction) -> Array:
        rounds = budget_rounds(budget, prediction.item_mean.shape[-1])
        return exploration_weight(rho, prediction.n, rounds)

    return alpha


def tempering(beta0: float, gamma: float, budget: float) -> Schedule:
    """The schedule β_s of :func:`tempering_exponent` at round s = ``Prediction.n``: the
    exponent ramps up to β0 by round γT."""

    def beta(prediction: Prediction) -> Array:
        rounds = budget_rounds(budget, prediction.item_mean.shape[-1])
        return tempering_exponent(beta0, gamma, prediction.n, rounds)

    return beta
