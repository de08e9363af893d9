"""Variance-driven rules, usable with any backend's Prediction (seed 001 §3.3–3.4;
docs/methods.md §3, §9):

* :func:`oracle_optimal` — h_o(j) ∝ sqrt(p̂_j (1 − p̂_j)), the variance-minimising policy
  of the oracle superpopulation model (seed 001 Prop. 3.2), from ``item_mean``;
* :func:`variance_reduction` — h_a(j) ∝ Cov(R, s_j)² / Var(s_j), the reduction of Var(R)
  that observing item j brings under the (linearised) Gaussian posterior; with the factor
  backend this is FAQ's active score d_j = w_j (v_jᵀ Σ g)² / (1 + w_j v_jᵀ Σ v_j).
"""

from __future__ import annotations

import jax.numpy as jnp

from bayeval.acquisition.base import Rule
from bayeval.hparams import known
from bayeval.types import P_CLIP, Array, Prediction, clip_probability


def oracle_optimal(p_min: float = P_CLIP) -> Rule:
    """log sqrt(p̂_j (1 − p̂_j)) with p̂_j = ``item_mean`` clamped to [p_min, 1 − p_min]
    (default 1e-12; a larger ``p_min`` distrusts a model's near-certain predictions)."""
    if known(p_min) and not 0.0 < p_min < 0.5:
        raise ValueError(f"p_min must be in (0, 0.5), got {p_min}")

    def rule(prediction: Prediction, available: Array) -> Array:
        p = jnp.clip(clip_probability(prediction.item_mean), p_min, 1.0 - p_min)
        return 0.5 * (jnp.log(p) + jnp.log1p(-p))

    return rule


def variance_reduction() -> Rule:
    """log (Cov(R, s_j)² / Var(s_j)): the active-learning score (−∞ where Var(s_j) = 0)."""

    def rule(prediction: Prediction, available: Array) -> Array:
        var = prediction.item_var
        d = prediction.item_cov ** 2 / jnp.where(var > 0, var, 1.0)
        return jnp.where((var > 0) & (d > 0), jnp.log(jnp.where(d > 0, d, 1.0)), -jnp.inf)

    return rule
