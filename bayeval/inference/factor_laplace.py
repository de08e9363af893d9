"""Online Laplace posterior of a new model's factor under the logistic factor model
(seed 001 §3.1 "Online Laplace updates", App. A.2.1/A.3; docs/methods.md §3).

The item factors V (N, k) are fixed from the historical fit
(:mod:`bayeval.models.factor`); the new model's factor has the Gaussian approximation
u ~ N(û, Σ), starting at the historical mean and covariance. After observing z ∈ {0, 1} on
item I, with p̂_I = σ(ûᵀ v_I) and w = p̂_I (1 − p̂_I):

    Σ ← Σ − w Σ v_I v_Iᵀ Σ / (1 + w v_Iᵀ Σ v_I)          (= (Σ⁻¹ + w v_I v_Iᵀ)⁻¹)
    û ← û + Σ (z − p̂_I) v_I                              (Σ already updated)

which is one Newton step on log N(u; û, Σ) + log p(z | u) from u = û. Every function is
pure; the state also carries s_j = v_jᵀ Σ v_j for all items, kept up to date in O(N k)
per observation instead of O(N k²).

:func:`factor_prediction` summarises the state as the
:class:`~bayeval.types.Prediction` that acquisition rules read, linearising
R = (1/N) Σ_j σ(uᵀ v_j) around û (g = (1/N) Σ_j w_j v_j):

    item_mean_j = p̂_j,   item_var_j = w_j (1 + w_j s_j)   (Bernoulli noise + latent),
    item_cov_j = Cov(R, s_j) = w_j vᵀ_j Σ g,   mean = (1/N) Σ p̂_j,   var = gᵀ Σ g,

so that item_cov_j² / item_var_j = w_j (v_jᵀ Σ g)² / (1 + w_j s_j) is FAQ's active
variance-reduction score d_j.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.inference.base import Backend, no_refit
from bayeval.models.factor import factor_prior, fit_factors
from bayeval.types import Array, Prediction, clip_probability


class FactorPosterior(NamedTuple):
    """u ~ N(mean, cov); ``latent_var`` (N,) = v_jᵀ cov v_j; ``n`` observations so far."""

    mean: Array
    cov: Array
    latent_var: Array
    n: Array


def item_probabilities(mean: Array, item_factors: Array) -> Array:
    """p̂_j = σ(ûᵀ v_j), clamped to [1e-12, 1 − 1e-12]."""
    return clip_probability(jax.nn.sigmoid(item_factors @ mean))


def factor_start(mean: Array, cov: Array, item_factors: Array) -> FactorPosterior:
    """The prior N(û0, Σ0) as a posterior state."""
    mean, cov = jnp.asarray(mean), jnp.asarray(cov)
    latent_var = jnp.einsum("jk,kl,jl->j", item_factors, cov, item_factors)
    return FactorPosterior(mean, cov, latent_var, jnp.zeros((), jnp.int32))


def rank_one_update(mean: Array, cov: Array, v: Array, z: Array
                    ) -> tuple[Array, Array, Array, Array]:
    """The update of (û, Σ) after observing ``z`` on an item of factor ``v`` (module
    docstring); also returns Σ v and w / (1 + w vᵀ Σ v) (old Σ) for derived quantities."""
    p = clip_probability(jax.nn.sigmoid(v @ mean))
    w = p * (1.0 - p)
    sv = cov @ v
    denom = 1.0 + w * (v @ sv)
    new_cov = cov - (w / denom) * jnp.outer(sv, sv)
    new_mean = mean + (z - p) * (sv / denom)  # Σ_new v = Σ v / (1 + w vᵀΣv)
    return new_mean, new_cov, sv, w / denom


def laplace_update(state: FactorPosterior, item_factors: Array, item: Array,
                   z: Array) -> FactorPosterior:
    """The online Laplace update after observing ``z`` on ``item`` (module docstring)."""
    mean, cov, sv, gain = rank_one_update(state.mean, state.cov, item_factors[item], z)
    latent_var = state.latent_var - gain * (item_factors @ sv) ** 2
    return FactorPosterior(mean, cov, latent_var, state.n + 1)


def factor_prediction(state: FactorPosterior, item_factors: Array) -> Prediction:
    """The linearised posterior summary of the module docstring."""
    p = item_probabilities(state.mean, item_factors)
    w = p * (1.0 - p)
    n_items = item_factors.shape[0]
    g = (w @ item_factors) / n_items
    sigma_g = state.cov @ g
    return Prediction(
        mean=p.mean(), var=g @ sigma_g, item_mean=p,
        item_var=w * (1.0 + w * state.latent_var), item_cov=w * (item_factors @ sigma_g),
        n=state.n, nearly_unique=jnp.ones((), bool))


class FactorState(NamedTuple):
    """The backend's state: the fixed item factors V (N, k) and the new model's factor
    posterior."""

    item_factors: Array
    posterior: FactorPosterior


def start_from_fit(reference_scores: Array, n_items: int,
                   fit: Callable[[np.ndarray], tuple[Array, Array, Array]]) -> FactorState:
    """The state of a new model under fixed item features: ``fit`` maps the reference
    matrix (checked to have ``n_items`` columns) to (V, û0, Σ0), and the new model starts
    at the prior N(û0, Σ0)."""
    ref = np.asarray(reference_scores, np.float64)
    if ref.shape[1] != n_items:
        raise ValueError(f"reference matrix has {ref.shape[1]} items, expected {n_items}")
    v, mean0, cov0 = fit(ref)
    return FactorState(v, factor_start(mean0, cov0, v))


@dataclass(frozen=True)
class FactorLaplace:
    """The factor model with online Laplace updates as a
    :class:`~bayeval.inference.base.Backend`: ``init`` fits the logistic factor model on
    the reference matrix (binary scores; NaN = not evaluated) with rank ``k`` and AdamW
    weight decay ``weight_decay`` (:func:`~bayeval.models.factor.fit_factors`) and starts
    the new model at the historical prior (:func:`~bayeval.models.factor.factor_prior`);
    ``observe`` is :func:`laplace_update`, ``predict`` :func:`factor_prediction`. Fits are
    cached per (reference matrix, k, λ, seed), so methods that differ only in their
    policy share one."""

    k: int = 8
    weight_decay: float = 0.1
    seed: int = 0

    def init(self, reference_scores: Array, n_items: int) -> FactorState:
        return start_from_fit(reference_scores, n_items, lambda ref: _fitted(
            ref.tobytes(), ref.shape, self.k, self.weight_decay, self.seed))

    @staticmethod
    def observe(state: FactorState, item: Array, score: Array) -> FactorState:
        return FactorState(state.item_factors,
                           laplace_update(state.posterior, state.item_factors, item, score))

    @staticmethod
    def predict(state: FactorState) -> Prediction:
        return factor_prediction(state.posterior, state.item_factors)

    def backend(self) -> Backend:
        return Backend("factor_laplace", self.init, self.observe, self.predict, no_refit)


def prefitted(item_factors: Array, mean0: Array, cov0: Array) -> Backend:
    """The factor-Laplace backend of an existing fit: item factors V (N, k) and the new
    model's prior N(û0, Σ0); ``init`` ignores the reference matrix (beyond its number of
    items), so one fit serves every method of an experiment."""
    v = jnp.asarray(item_factors, jnp.float64)
    start = FactorState(v, factor_start(jnp.asarray(mean0, jnp.float64),
                                        jnp.asarray(cov0, jnp.float64), v))

    def init(reference_scores: Array, n_items: int) -> FactorState:
        if n_items != v.shape[0]:
            raise ValueError(f"the fit has {v.shape[0]} items, the run {n_items}")
        return start

    return Backend("factor_laplace", init, FactorLaplace.observe, FactorLaplace.predict,
                   no_refit)


@functools.lru_cache(maxsize=8)
def _fitted(data: bytes, shape: tuple[int, int], k: int, weight_decay: float,
            seed: int) -> tuple[Array, Array, Array]:
    """(V, û0, Σ0) of the factor fit on the matrix with these bytes and shape."""
    ref = np.frombuffer(data, np.float64).reshape(shape)
    fit = fit_factors(ref, k, weight_decay, seed)
    mean0, cov0 = factor_prior(fit.U)
    return jnp.asarray(fit.V), jnp.asarray(mean0), jnp.asarray(cov0)
