"""A stacked predictor: the calibrated-difficulty model and the scores of the reference
models most like the new one, combined by an online logistic regression (docs/methods.md §9
"any backend's Prediction as the predictor"; the ``stacked`` predictor of
:mod:`bayeval.experiments.saving_bound`, learned from the run's own draws instead of the
target's whole row).

Two component predictions of item i before each round:

* p^d_i, the calibrated-difficulty model (:mod:`bayeval.inference.difficulty`, K principal
  axes) with its online Laplace updates;
* p^s_i = Σ_m w_m r_mi, the reference models' scores on the item (NaN read as the item's
  reference mean) weighted by how often each model agreed with the new one on the items
  observed so far, A_m = Σ_{j∈O} (1 − |r_mj − s_j|):

      w_m ∝ exp(τ_s A_m / (|O| + n_s)),

  a softmax of the mean agreement that ``prior_items`` = n_s pseudo-items keep flat while
  few items are observed (τ_s = ``temperature``; with no item observed p^s is the
  reference mean).

The new model's scores follow logit P(s_i = 1) = cᵀ x_i with x_i = (1, logit p^d_i,
logit p^s_i) (each clipped to [1e-4, 1 − 1e-4]) and c ~ N(ĉ, Σ_c) from the prior
N((0, 1, 0), ``prior_sd``² I): the stack starts as the difficulty model alone. After a score
z on item I, c has the online Laplace update of the factor model
(:func:`~bayeval.inference.factor_laplace.rank_one_update`, one Newton step) at the x_I
both components gave **before** z was seen, so the combination is learned from
predictions of items that had not yet entered either component, as a stack must be; then
both components take z.

The Prediction is linearised like :func:`~bayeval.inference.factor_laplace.factor_prediction`,
around ĉ and the difficulty model's mean û (p^s held fixed): with w_i = p_i (1 − p_i),
g_c = (1/N) Σ_i w_i x_i and g_u = (ĉ_d / N) Σ_i w_i v_i (v_i the difficulty features),

    item_mean_i = σ(ĉᵀ x_i),   item_var_i = w_i (1 + w_i (x_iᵀ Σ_c x_i + ĉ_d² v_iᵀ Σ_u v_i)),
    item_cov_i = w_i (x_iᵀ Σ_c g_c + ĉ_d v_iᵀ Σ_u g_u),   var = g_cᵀ Σ_c g_c + g_uᵀ Σ_u g_u.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayeval.data.matrix import fill_with_item_means
from bayeval.inference.base import Backend, no_refit
from bayeval.inference.difficulty import CalibratedDifficulty
from bayeval.inference.factor_laplace import (
    FactorLaplace,
    FactorState,
    item_probabilities,
    rank_one_update,
)
from bayeval.types import Array, Prediction, clip_probability

LOGIT_CLIP = 1e-4  # components' probabilities are clipped to [LOGIT_CLIP, 1 − LOGIT_CLIP]


class StackedState(NamedTuple):
    """The difficulty model's state, the filled reference matrix (M, N), the agreement
    sums A (M,), the number of observed items and the stack's N(ĉ, Σ_c)."""

    difficulty: FactorState
    reference: Array
    agreement: Array
    count: Array
    mean: Array
    cov: Array


def _logit(p: Array) -> Array:
    p = jnp.clip(p, LOGIT_CLIP, 1.0 - LOGIT_CLIP)
    return jnp.log(p) - jnp.log1p(-p)


def stack_features(p_d: Array, p_s: Array) -> Array:
    """x = (1, logit p^d, logit p^s) of the module docstring, on the last axis."""
    return jnp.stack([jnp.ones_like(p_d), _logit(p_d), _logit(p_s)], axis=-1)


def similar_weights(state: StackedState, temperature: float, prior_items: float) -> Array:
    """w (M,) of the module docstring."""
    mean_agreement = state.agreement / (state.count + prior_items)
    return jax.nn.softmax(temperature * mean_agreement)


@dataclass(frozen=True)
class StackedDifficulty:
    """The stacked predictor (module docstring) as a :class:`~bayeval.inference.base.Backend`.

    components: K of the difficulty model.
    temperature: τ_s of the similarity weights.
    prior_items: n_s, the pseudo-items that flatten the weights early.
    prior_sd: the prior standard deviation of each stack coefficient.
    """

    components: int = 5
    temperature: float = 30.0
    prior_items: float = 20.0
    prior_sd: float = 0.5

    def __post_init__(self) -> None:
        if self.temperature < 0 or self.prior_items < 0 or self.prior_sd <= 0:
            raise ValueError("temperature and prior_items must be ≥ 0 and prior_sd positive, "
                             f"got {self.temperature}, {self.prior_items}, {self.prior_sd}")

    def init(self, reference_scores: Array, n_items: int) -> StackedState:
        difficulty = CalibratedDifficulty(self.components).init(reference_scores, n_items)
        filled = fill_with_item_means(reference_scores)
        return StackedState(difficulty, jnp.asarray(filled),
                            jnp.zeros(filled.shape[0], jnp.float64), jnp.zeros((), jnp.float64),
                            jnp.asarray([0.0, 1.0, 0.0]), self.prior_sd**2 * jnp.eye(3))

    def features(self, state: StackedState) -> Array:
        """x (N, 3) of every item before the next observation."""
        p_d = item_probabilities(state.difficulty.posterior.mean, state.difficulty.item_factors)
        p_s = similar_weights(state, self.temperature, self.prior_items) @ state.reference
        return stack_features(p_d, p_s)

    def observe(self, state: StackedState, item: Array, score: Array) -> StackedState:
        score = jnp.asarray(score, jnp.float64)
        p_d = item_probabilities(state.difficulty.posterior.mean,
                                 state.difficulty.item_factors[item])
        w = similar_weights(state, self.temperature, self.prior_items)
        x = stack_features(p_d, w @ state.reference[:, item])
        mean, cov, _, _ = rank_one_update(state.mean, state.cov, x, score)
        agreement = state.agreement + 1.0 - jnp.abs(state.reference[:, item] - score)
        return StackedState(FactorLaplace.observe(state.difficulty, item, score),
                            state.reference, agreement, state.count + 1.0, mean, cov)

    def predict(self, state: StackedState) -> Prediction:
        x = self.features(state)
        v = state.difficulty.item_factors
        cov_u = state.difficulty.posterior.cov
        p = clip_probability(jax.nn.sigmoid(x @ state.mean))
        w = p * (1.0 - p)
        n_items = p.shape[-1]
        b = state.mean[1]
        g_c = (w @ x) / n_items
        g_u = b * (w @ v) / n_items
        sc, su = state.cov @ g_c, cov_u @ g_u
        latent = (jnp.einsum("ik,kl,il->i", x, state.cov, x)
                  + b * b * state.difficulty.posterior.latent_var)
        return Prediction(mean=p.mean(), var=g_c @ sc + g_u @ su, item_mean=p,
                          item_var=w * (1.0 + w * latent),
                          item_cov=w * (x @ sc + b * (v @ su)),
                          n=state.difficulty.posterior.n, nearly_unique=jnp.ones((), bool))

    def backend(self) -> Backend:
        return Backend("stacked_difficulty", self.init, self.observe, self.predict,
                       no_refit)


__all__ = ["StackedDifficulty", "StackedState", "similar_weights", "stack_features"]
