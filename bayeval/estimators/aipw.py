"""Bayes-AIPW: a Bayesian linear model of scores on reference features, debiased by the
coreset residuals (seed 000 §5.1, docs/methods.md §5).

Item i has features x_i = (1, φ_i) (an intercept and its reference score vector). On the
coreset C, s_i = x_iᵀβ + ε with the conjugate Normal–Gamma prior β | λ ~ N(0, (λ I)⁻¹),
λ ~ Gamma(a0 = 1, b0 = 1) (our choice: unit prior precision relative to the noise). The
estimate is the augmented inverse-probability-weighted mean under uniform sampling,

    R̂ = (1/N) Σ_{i=1..N} x_iᵀ m + (1/n) Σ_{i∈C} (s_i − x_iᵀ m),    m = E[β | C],

and (our choice) Var_R = (1 − n/N) S_r²/n + gᵀ Cov(β | C) g with S_r² the residual
variance on C and g = (1/N) Σ_i x_i − (1/n) Σ_{i∈C} x_i. All statistics are updated in
O(K²) per observation (Sherman–Morrison on P = (I + XᵀX)⁻¹).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from bayeval.estimators.interval import finite_population_factor
from bayeval.inference.base import Backend, no_refit
from bayeval.types import Array, Prediction

A0 = 1.0
B0 = 1.0


class AIPWState(NamedTuple):
    features: Array  # (N, K+1)
    feature_sum: Array  # (K+1,) Σ over all items
    precision_inv: Array  # (K+1, K+1) P = (I + XᵀX)⁻¹
    xty: Array  # (K+1,) Xᵀy
    gram: Array  # (K+1, K+1) XᵀX
    x_sum: Array  # (K+1,) Σ_{C} x
    yy: Array  # () Σ_C s²
    y_sum: Array  # () Σ_C s
    n: Array  # ()
    observed: Array  # (N,) bool
    scores: Array  # (N,)


def init(reference_scores, n_items: int) -> AIPWState:
    ref = np.asarray(reference_scores, dtype=np.float64)
    ref = np.where(np.isnan(ref), np.nanmean(ref, axis=1, keepdims=True), ref)
    x = jnp.asarray(np.hstack([np.ones((n_items, 1)), ref.T]))
    d = x.shape[1]
    zero = jnp.zeros((), jnp.float64)
    return AIPWState(x, x.sum(0), jnp.eye(d), jnp.zeros(d), jnp.zeros((d, d)), jnp.zeros(d),
                     zero, zero, zero, jnp.zeros(n_items, bool), jnp.zeros(n_items))


def observe(state: AIPWState, item: Array, score: Array) -> AIPWState:
    x = state.features[item]
    px = state.precision_inv @ x
    p = state.precision_inv - jnp.outer(px, px) / (1.0 + x @ px)
    return state._replace(
        precision_inv=0.5 * (p + p.T), xty=state.xty + score * x,
        gram=state.gram + jnp.outer(x, x), x_sum=state.x_sum + x, yy=state.yy + score**2,
        y_sum=state.y_sum + score, n=state.n + 1.0,
        observed=state.observed.at[item].set(True), scores=state.scores.at[item].set(score))


def predict(state: AIPWState) -> Prediction:
    n_items = state.features.shape[0]
    n = state.n
    m = state.precision_inv @ state.xty
    n_safe = jnp.maximum(n, 1.0)
    estimate = state.feature_sum @ m / n_items + (state.y_sum - state.x_sum @ m) / n_safe
    rss = jnp.maximum(state.yy - 2 * m @ state.xty + m @ state.gram @ m, 0.0)
    s2 = rss / jnp.maximum(n - 1.0, 1.0)
    b_n = B0 + 0.5 * (state.yy - m @ state.xty)
    a_n = A0 + 0.5 * n
    cov_beta = (b_n / jnp.maximum(a_n - 1.0, 1e-3)) * state.precision_inv
    g = state.feature_sum / n_items - state.x_sum / n_safe
    var = finite_population_factor(n, n_items) * s2 / n_safe + g @ cov_beta @ g
    early = n < 2
    estimate = jnp.where(early, jnp.where(n > 0, state.y_sum / n_safe, 0.5), estimate)
    var = jnp.where(early, 0.25, jnp.maximum(var, 0.0))
    unobserved = ~state.observed
    item_mean = jnp.where(unobserved, state.features @ m, state.scores)
    item_var = jnp.where(unobserved, s2, 0.0)
    item_cov = jnp.where(unobserved, s2 / n_items, 0.0)
    return Prediction(estimate, var, item_mean, item_var, item_cov, n, jnp.ones((), bool))


backend = Backend("bayes_aipw", init, observe, predict, no_refit)
