"""The reference-linear Gaussian process: a new model's item scores as a linear combination
of the reference models' centred scores — Bayesian quadrature with a linear kernel over
the reference models (the surrogate of ProEval, Huang et al. 2026; here with the
benchmark score's noise in the posterior of R).

With the reference matrix S (M models × N items; NaN entries take the item's mean),
ū_i the item's reference mean and x_i = (S_{·i} − ū_i) / sqrt(M − 1) ∈ R^M:

    s_i = ū_i + x_iᵀ w + e_i,   w ~ N(0, I_M),   e_i ~ N(0, σ²),

so the prior covariance of two items' latent scores is x_iᵀ x_j, the reference models'
covariance of the items. The posterior of w after each score is a rank-1 (Kalman) update
of its mean m and covariance Σ:

    b = Σ x_i,  d = σ² + x_iᵀ b,  m ← m + b (s_i − ū_i − x_iᵀ m) / d,  Σ ← Σ − b bᵀ / d,

and with g = Σ_{i∈R} x_i over the unseen items R:

    E[s_i | C] = ū_i + x_iᵀ m,   Var(s_i | C) = x_iᵀ Σ x_i + σ²,
    E[R | C] = (Σ_{j∈O} s_j + Σ_{i∈R} E[s_i | C]) / N,
    Var(R | C) = (gᵀ Σ g + |R| σ²) / N²,   Cov(R, s_i | C) = (x_iᵀ Σ g + σ²) / N.

The diagonal x_iᵀ Σ x_i is kept up to date with each update (O(MN)), so a prediction costs
O(M² + MN). ``noise`` is σ² (0.3 by default, ProEval's value: above the largest variance
of a binary score, 1/4, so the posterior stays cautious).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from bayeval.data.matrix import observed_item_means
from bayeval.inference.base import Backend, no_refit
from bayeval.types import Array, Prediction


class ReferenceLinearState(NamedTuple):
    """The posterior of w and what the prediction reads (module docstring)."""

    features: Array  # (M, N) x_i as columns
    prior_mean: Array  # (N,) ū
    mean: Array  # (M,) m
    cov: Array  # (M, M) Σ
    diag: Array  # (N,) x_iᵀ Σ x_i
    observed: Array  # (N,) bool
    scores: Array  # (N,) observed scores (0 elsewhere)
    n: Array  # observations
    noise: Array  # σ²


def reference_features(reference_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(X, ū) of the module docstring: X (M, N) the centred reference scores over
    sqrt(M − 1) (NaN entries count as the item's mean), ū (N,) the items' means."""
    ref = np.asarray(reference_scores, np.float64)
    mean = observed_item_means(ref, empty=0.0)
    centred = np.where(np.isnan(ref), 0.0, ref - mean)
    return centred / np.sqrt(max(ref.shape[0] - 1, 1)), mean


@functools.lru_cache(maxsize=8)
def _features(data: bytes, shape: tuple[int, int]) -> tuple[Array, Array]:
    x, mean = reference_features(np.frombuffer(data, np.float64).reshape(shape))
    return jnp.asarray(x), jnp.asarray(mean)


def observe(state: ReferenceLinearState, item: Array, score: Array) -> ReferenceLinearState:
    """The rank-1 update of the module docstring for the score of ``item``."""
    x = state.features[:, item]
    b = state.cov @ x
    d = state.noise + x @ b
    residual = score - state.prior_mean[item] - x @ state.mean
    xb = state.features.T @ b  # (N,) x_jᵀ Σ x_i
    return state._replace(
        mean=state.mean + b * (residual / d), cov=state.cov - jnp.outer(b, b) / d,
        diag=state.diag - xb**2 / d, observed=state.observed.at[item].set(True),
        scores=state.scores.at[item].set(score), n=state.n + 1)


def predict(state: ReferenceLinearState) -> Prediction:
    """The Prediction of the module docstring."""
    n_items = state.prior_mean.shape[0]
    unseen = ~state.observed
    latent = state.prior_mean + state.features.T @ state.mean
    item_mean = jnp.where(state.observed, state.scores, latent)
    g = state.features @ unseen.astype(state.mean.dtype)
    cov_g = state.cov @ g
    n_unseen = jnp.sum(unseen)
    var = (g @ cov_g + n_unseen * state.noise) / n_items**2
    item_var = jnp.where(unseen, jnp.maximum(state.diag, 0.0) + state.noise, 0.0)
    item_cov = jnp.where(unseen, (state.features.T @ cov_g + state.noise) / n_items, 0.0)
    return Prediction(jnp.sum(item_mean) / n_items, jnp.maximum(var, 0.0), item_mean,
                      item_var, item_cov, state.n.astype(jnp.float64), jnp.asarray(True))


@dataclass(frozen=True)
class ReferenceLinearGP:
    """The reference-linear GP (module docstring) as a
    :class:`~bayeval.inference.base.Backend`; ``noise`` is σ²."""

    noise: float = 0.3

    def __post_init__(self) -> None:
        if not self.noise > 0:
            raise ValueError(f"noise must be positive, got {self.noise}")

    def init(self, reference_scores: Array, n_items: int) -> ReferenceLinearState:
        ref = np.ascontiguousarray(np.asarray(reference_scores, np.float64))
        if ref.shape[1] != n_items:
            raise ValueError(f"reference has {ref.shape[1]} items, expected {n_items}")
        x, mean = _features(ref.tobytes(), ref.shape)
        m = x.shape[0]
        return ReferenceLinearState(
            x, mean, jnp.zeros(m), jnp.eye(m), jnp.sum(x * x, axis=0),
            jnp.zeros(n_items, bool), jnp.zeros(n_items), jnp.zeros((), jnp.int32),
            jnp.asarray(self.noise, jnp.float64))

    def backend(self) -> Backend:
        return Backend("reference_linear", self.init, observe, predict, no_refit)


__all__ = ["ReferenceLinearGP", "ReferenceLinearState", "observe", "predict",
           "reference_features"]
