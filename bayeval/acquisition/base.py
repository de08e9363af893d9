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
    """The ``k`` available items of largest log-weight, exact ties broken at random.

    Item by item: among the not yet chosen items of the largest log-weight, the one with
    the largest uniform tie-break draw (O(k N); the same choice as a lexicographic sort on
    (log-weight, draw))."""
    tie_break = jax.random.uniform(key, log_weights.shape)
    primary = jnp.where(available, log_weights, -jnp.inf)
    chosen = []
    taken = jnp.zeros(log_weights.shape, bool)
    for _ in range(k):
        best = jnp.max(jnp.where(taken, -jnp.inf, primary))
        pick = jnp.argmax(jnp.where((primary == best) & ~taken, tie_break, -1.0))
        chosen.append(pick)
        taken = taken.at[pick].set(True)
    return jnp.stack(chosen)


def switch(condition, if_true: Rule, if_false: Rule) -> Rule:
    """``if_true`` where ``condition(prediction)`` holds, else ``if_false`` (a regime
    switch, e.g. BayesAME's fall-back to random selection)."""

    def rule(prediction: Prediction, available: Array) -> Array:
        return jnp.where(condition(prediction), if_true(prediction, available),
                         if_false(prediction, available))

    return rule


def _log_softmax(log_w: Array, available: Array) -> Array:
    masked = jnp.where(available, log_w, -jnp.inf)
    total = jax.scipy.special.logsumexp(masked)
    return jnp.where(jnp.isfinite(total), masked - total, -jnp.inf)


def mixture(rules: list[Rule], weights: list) -> Rule:
    """The distribution Σ_k w_k softmax(rule_k) over available items, as log-weights.

    A weight is a number or a function of the :class:`Prediction` (a schedule, e.g. of the
    round ``n``); weights are normalised to sum to 1. With :func:`sample` this draws from
    rule k with probability w_k (FAQ's hybrid policy mixes its oracle and active parts this
    way, :mod:`bayeval.acquisition.faq`)."""

    def rule(prediction: Prediction, available: Array) -> Array:
        w = jnp.stack([jnp.asarray(x(prediction) if callable(x) else x, jnp.float64)
                       for x in weights])
        w = w / w.sum()
        parts = jnp.stack([_log_softmax(r(prediction, available), available) for r in rules])
        return jax.scipy.special.logsumexp(parts + jnp.log(w)[:, None], axis=0)

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
