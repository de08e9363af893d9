"""The calibrated-difficulty model: a new model's item scores from how hard the reference
models found each item, with online Laplace updates (docs/methods.md §3's update on fixed item
features; a logistic analogue of the Rasch / 2PL models of seed 003 whose item side is
read off the reference matrix instead of being fitted).

Each item i gets the features x_i = (1, f_i, c_i1, …, c_iK) from the reference matrix
(models × items, NaN = not evaluated):

* f_i = logit(μ̄_i), μ̄_i = (Σ_j s_ji + ½) / (n_i + 1) the reference mean of the item,
  shrunk away from 0 and 1 so that the logit is finite;
* c_ik: the item's coordinates on the K leading principal axes of the centred reference
  scores s_ji − μ̄_i (K = ``components``; 0 by default), scaled to unit variance over the
  items — the directions in which the reference models disagree beyond difficulty.

A model's scores follow logit P(s_i = 1) = uᵀ x_i. Each reference model's u_j is fitted
by ridge-penalised logistic regression on its own row (Newton's method; fractional scores
in [0, 1] are the Bernoulli quasi-likelihood), and the new model's prior is the Gaussian
with their mean and covariance, the covariance inflated by ``inflate`` (a new model may
lie outside the reference range). Observations update u ~ N(û, Σ) with
:func:`~bayeval.inference.factor_laplace.laplace_update` (one Newton step per score), and
the Prediction is :func:`~bayeval.inference.factor_laplace.factor_prediction`: the
same pure functions as the factor model, on features that need no optimiser to fit.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from bayeval.inference.base import Backend, no_refit
from bayeval.inference.factor_laplace import FactorLaplace, FactorState, start_from_fit
from bayeval.types import Array


def item_features(reference_scores: np.ndarray, components: int = 0) -> np.ndarray:
    """x_i = (1, f_i, c_i1, …, c_iK) of the module docstring, (N, 2 + K)."""
    ref = np.asarray(reference_scores, np.float64)
    seen = ~np.isnan(ref)
    counts = seen.sum(0)
    total = np.where(seen, ref, 0.0).sum(0)
    mean = (total + 0.5) / (counts + 1.0)
    columns = [np.ones(ref.shape[1]), np.log(mean / (1.0 - mean))]
    if components > 0:
        centred = np.where(seen, ref - mean, 0.0)
        _, _, axes = np.linalg.svd(centred, full_matrices=False)
        k = min(components, axes.shape[0])
        coords = axes[:k].T  # (N, k), the item side of the leading axes
        coords = coords / np.maximum(coords.std(0), 1e-12)
        columns.extend(coords.T)
    return np.column_stack(columns)


def fit_rows(reference_scores: np.ndarray, features: np.ndarray, ridge: float = 1.0,
             iterations: int = 30) -> np.ndarray:
    """Each reference model's u_j (M, d): the ridge-penalised logistic regression of its
    scores on the item features (module docstring), by Newton's method for all rows at
    once; entries that are NaN carry no weight. The intercept is not penalised."""
    ref = np.asarray(reference_scores, np.float64)
    seen = ~np.isnan(ref)
    y = np.where(seen, ref, 0.0)
    m, d = ref.shape[0], features.shape[1]
    penalty = np.full(d, ridge)
    penalty[0] = 1e-6
    u = np.zeros((m, d))
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(u @ features.T)))
        w = np.where(seen, p * (1.0 - p), 0.0)
        grad = np.where(seen, p - y, 0.0) @ features + penalty * u
        hess = np.einsum("mi,ik,il->mkl", w, features, features) + np.diag(penalty)
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        u -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return u


@dataclass(frozen=True)
class CalibratedDifficulty:
    """The calibrated-difficulty model (module docstring) as a
    :class:`~bayeval.inference.base.Backend`.

    components: K principal axes beside the difficulty (0: difficulty only).
    ridge: the penalty of each reference row's regression (not on the intercept).
    inflate: the factor on the prior covariance of the new model's u.
    """

    components: int = 0
    ridge: float = 1.0
    inflate: float = 2.0

    def __post_init__(self) -> None:
        if self.components < 0:
            raise ValueError(f"components must be ≥ 0, got {self.components}")
        if self.ridge <= 0 or self.inflate <= 0:
            raise ValueError(f"ridge and inflate must be positive, got {self.ridge}, "
                             f"{self.inflate}")

    def init(self, reference_scores: Array, n_items: int) -> FactorState:
        return start_from_fit(reference_scores, n_items, lambda ref: _fitted(
            ref.tobytes(), ref.shape, self.components, self.ridge, self.inflate))

    def backend(self) -> Backend:
        return Backend("calibrated_difficulty", self.init, FactorLaplace.observe,
                       FactorLaplace.predict, no_refit)


@functools.lru_cache(maxsize=8)
def _fitted(data: bytes, shape: tuple[int, int], components: int, ridge: float,
            inflate: float) -> tuple[Array, Array, Array]:
    """(features, û0, Σ0) for the reference matrix with these bytes and shape."""
    ref = np.frombuffer(data, np.float64).reshape(shape)
    x = item_features(ref, components)
    u = fit_rows(ref, x, ridge)
    mean0 = u.mean(0)
    cov0 = np.atleast_2d(np.cov(u, rowvar=False)) if u.shape[0] > 1 else np.eye(x.shape[1])
    cov0 = inflate * cov0 + 1e-6 * np.eye(x.shape[1])
    return jnp.asarray(x), jnp.asarray(mean0), jnp.asarray(cov0)


__all__ = ["CalibratedDifficulty", "fit_rows", "item_features"]
