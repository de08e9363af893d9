"""Information gain about R of evaluating one more item (seed 000 §3.1, docs/methods.md §1).

For an unobserved item i, with c_i = Cov(R, s_i | C) and v_i = Var(s_i | C),

    IG_i = −½ log(1 − c_i² / (Var(R | C) · v_i)),

the mutual information between R and s_i under the Gaussian posterior. Items of one
bucket share it; :func:`~bayeval.acquisition.base.argmax` then picks an item of the best
bucket uniformly at random.
"""

from __future__ import annotations

import jax.numpy as jnp

from bayeval.acquisition.base import Rule, switch, uniform
from bayeval.types import Array, Prediction

_TINY = 1e-300


def information_gain(prediction: Prediction) -> Array:
    """(N,) IG of each item (0 for observed items and when Var(R | C) = 0)."""
    denom = jnp.maximum(prediction.var * prediction.item_var, _TINY)
    rho2 = jnp.clip(prediction.item_cov**2 / denom, 0.0, 1.0 - 1e-15)
    ig = -0.5 * jnp.log1p(-rho2)
    return jnp.where(prediction.item_var > 0, ig, 0.0)


def info_gain() -> Rule:
    """The information-gain rule: log-weight = IG_i."""

    def rule(prediction: Prediction, available: Array) -> Array:
        return information_gain(prediction)

    return rule


def fisher_information() -> Rule:
    """The maximum-Fisher-information rule of Fluid Benchmarking (Hofmann et al., COLM
    2025; with :func:`~bayeval.acquisition.policies.argmax`): for a backend with one
    latent ability θ and Bernoulli item noise, an item's predictive variance is its noise
    q_i = E[s_i](1 − E[s_i]) plus σ² (dp_i/dθ)², so (Var(s_i) − q_i) / q_i = σ² I_i(θ̂),
    σ² times its Fisher information (:mod:`bayeval.inference.fluid`); log-weight = its
    log."""

    def rule(prediction: Prediction, available: Array) -> Array:
        q = prediction.item_mean * (1.0 - prediction.item_mean)
        spread = prediction.item_var - q
        return jnp.log(jnp.maximum(spread, _TINY)) - jnp.log(jnp.maximum(q, _TINY))

    return rule


def bayesame_rule() -> Rule:
    """IG while the reference vectors are nearly unique (B ≥ N − N0), else random."""
    return switch(lambda p: p.nearly_unique, info_gain(), uniform())
