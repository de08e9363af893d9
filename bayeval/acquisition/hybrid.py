"""FAQ's hybrid sampling policy composed from parts (seed 001 Eq. 4; docs/methods.md §3)::

    uniform_floor(power(blend(oracle_optimal(), variance_reduction(), exploration(ρ, T)),
                        tempering(β0, γ, T)), τ)

drawn with replacement (:data:`~bayeval.acquisition.policies.sample_with_replacement`),
the probability of the drawn item being what Pro-Active Inference needs
(:mod:`bayeval.estimators.pai`). :func:`hybrid_probabilities` is the same q in closed
form, for FAQ's fused simulator (:mod:`bayeval.methods.faq`).
"""

from __future__ import annotations

import jax.numpy as jnp

from bayeval.acquisition.base import Rule, blend, power, uniform_floor
from bayeval.acquisition.schedules import exploration, tempering
from bayeval.acquisition.variance import oracle_optimal, variance_reduction
from bayeval.types import Array


def faq_rule(budget: float, beta0: float = 1.0, rho: float = 0.25, gamma: float = 0.25,
             tau: float = 0.05) -> Rule:
    """FAQ's hybrid policy q_s (seed 001 Eq. 4; docs/methods.md §3) for a budget of T rounds.

    The defaults are the robust (β0, τ) = (1.0, 0.05) of seed 001 §5 with ρ = γ = 0.25."""
    if isinstance(tau, int | float) and not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau}")
    if any(isinstance(x, int | float) and x < 0 for x in (beta0, rho, gamma)):
        raise ValueError(f"beta0, rho and gamma must be ≥ 0, got {beta0}, {rho}, {gamma}")
    hybrid = blend(oracle_optimal(), variance_reduction(), exploration(rho, budget))
    return uniform_floor(power(hybrid, tempering(beta0, gamma, budget)), tau)


def hybrid_probabilities(p: Array, active_score: Array, alpha: Array, beta: Array,
                         tau: Array) -> Array:
    """FAQ's q_s in closed form over the last axis (docs/methods.md §3), in probability space:
    h_o ∝ sqrt(p̂(1 − p̂)), h_a ∝ d (``active_score``), h = ((1 − α) h_o + α h_a)^β,
    q = (1 − τ) h / Σh + τ / N. :func:`faq_rule` composes the same q from its parts."""
    n = p.shape[-1]
    h_o = jnp.sqrt(p * (1.0 - p))
    h_o = h_o / jnp.sum(h_o, -1, keepdims=True)
    total = jnp.sum(active_score, -1, keepdims=True)
    h_a = active_score / jnp.where(total > 0, total, 1.0)
    h = (1.0 - alpha) * h_o + alpha * h_a
    h = h if isinstance(beta, int | float) and beta == 1 else h ** beta
    return (1.0 - tau) * h / jnp.sum(h, -1, keepdims=True) + tau / n
