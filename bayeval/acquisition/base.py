"""Acquisition rules and policies (ARCHITECTURE.md: composable rules).

A **rule** maps a :class:`~bayeval.inference.base.Prediction` and a boolean mask of the
candidate items still available to one log-weight per item (higher = more wanted; entries
outside the mask are ignored). A **policy** turns log-weights into a choice of ``k``
distinct available items: :func:`sample` draws proportionally to ``exp(log_w)`` without
replacement, :func:`argmax` takes the best with ties broken uniformly at random.

Rules and policies are pure JAX functions, so a composed rule jits and vmaps.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from bayeval.inference.base import Array, Prediction

Rule = Callable[[Prediction, Array], Array]
Policy = Callable[[Array, Array, Array, int], Array]


def uniform() -> Rule:
    """Every available item equally wanted: random selection."""

    def rule(prediction: Prediction, available: Array) -> Array:
        return jnp.zeros(available.shape, jnp.float64)

    return rule


def sample(key: Array, log_weights: Array, available: Array, k: int = 1) -> Array:
    """``k`` distinct available items drawn ∝ exp(log_w), sequentially without replacement.

    Gumbel-top-k: the k largest of log_w + Gumbel noise are a draw of k items without
    replacement with probabilities ∝ exp(log_w) at each step.
    """
    noise = jax.random.gumbel(key, log_weights.shape, jnp.float64)
    score = jnp.where(available, log_weights + noise, -jnp.inf)
    return jax.lax.top_k(score, k)[1]


def argmax(key: Array, log_weights: Array, available: Array, k: int = 1) -> Array:
    """The ``k`` available items of largest log-weight, exact ties broken at random."""
    tie_break = jax.random.uniform(key, log_weights.shape)
    primary = jnp.where(available, log_weights, -jnp.inf)
    order = jnp.lexsort((-tie_break, -primary))
    return order[:k]
