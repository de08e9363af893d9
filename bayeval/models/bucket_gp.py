"""BayesAME's bucket Gaussian process (seed 000 §3.1, App. A; METHODS.md §1).

Items whose reference score vectors φ_i = (s_i^{r1}, …, s_i^{rK}) are identical form one
bucket b (size N_b, representative vector φ_b). A latent θ ∈ R^B gets a Gaussian prior,

    θ ~ N(μ, Σ),   μ_b = mean(φ_b),   Σ_bb' = α exp(−(β/K) ||φ_b − φ_b'||²),

and an item i of bucket b is scored s_i | θ ~ N(θ_b, N_b σ²), with σ² = 1e-4 when the
reference vectors are nearly unique (B ≥ N − N0) and 1e-1 otherwise (N0 = 10).

:func:`bucket_gp_model` is the NumPyro program. Pass a NumPyro distribution instead of a
number for ``alpha`` or ``beta`` (or a different ``mean`` / ``kernel``) to change the
prior; :func:`bayeval.inference.exact.gaussian_prior` reads μ, Σ and the noise from the
program itself, so the exact backend follows any such change, and the same program runs
under MCMC.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bayeval.data.matrix import ScoreMatrix
from bayeval.inference.base import Array
from bayeval.models.kernels import squared_exponential

N0 = 10
SIGMA2_UNIQUE = 1e-4
SIGMA2_TIED = 1e-1
JITTER = 1e-8


class Buckets(NamedTuple):
    """item_bucket (N,) bucket of each item; sizes (B,) N_b; phi (B, K) the vectors."""

    item_bucket: np.ndarray
    sizes: np.ndarray
    phi: np.ndarray

    @property
    def n_buckets(self) -> int:
        return int(self.sizes.shape[0])

    @property
    def n_items(self) -> int:
        return int(self.item_bucket.shape[0])


def make_buckets(reference: ScoreMatrix | np.ndarray) -> Buckets:
    """Group items by identical reference score vectors (columns of the reference matrix).

    A missing reference score (NaN) is its own value when grouping; in φ it is replaced by
    that reference model's mean score (our choice), so distances stay defined.
    """
    scores = np.asarray(reference.scores if isinstance(reference, ScoreMatrix) else reference,
                        dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] == 0:
        raise ValueError("buckets need a reference matrix with at least one model")
    key = np.where(np.isnan(scores), -1.0, scores)
    _, first, inverse = np.unique(key.T, axis=0, return_index=True, return_inverse=True)
    # number buckets by first appearance, so bucket order follows item order
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    item_bucket = rank[inverse.reshape(-1)].astype(np.int32)
    sizes = np.bincount(item_bucket, minlength=order.size).astype(np.float64)
    row_means = np.nanmean(np.where(np.isnan(scores).all(1, keepdims=True), 0.5, scores), 1)
    filled = np.where(np.isnan(scores), row_means[:, None], scores)
    phi = filled[:, first[order]].T.copy()
    return Buckets(item_bucket, sizes, phi)


def default_sigma2(n_buckets: int, n_items: int, n0: int = N0) -> float:
    """σ² = 1e-4 when B ≥ N − N0 (nearly unique reference vectors), else 1e-1."""
    return SIGMA2_UNIQUE if n_buckets >= n_items - n0 else SIGMA2_TIED


def _value(name: str, spec: float | dist.Distribution) -> Array:
    if isinstance(spec, dist.Distribution):
        return numpyro.sample(name, spec)
    return numpyro.deterministic(name, jnp.asarray(spec, jnp.float64))


def bucket_gp_model(phi: Array, sizes: Array, obs_bucket: Array | None = None,
                    obs: Array | None = None, *,
                    alpha: float | dist.Distribution = 1.0,
                    beta: float | dist.Distribution = 1.0,
                    sigma2: float | dist.Distribution = SIGMA2_TIED,
                    mean: Callable[[Array], Array] | None = None,
                    kernel: Callable[[Array, Array, Array], Array] = squared_exponential,
                    ) -> None:
    """NumPyro program of the bucket GP.

    Sites: ``alpha``, ``beta``, ``sigma2`` (sampled when given a distribution, else
    deterministic), ``theta`` (B,) the bucket latent scores, and ``s`` the observed scores
    of items in buckets ``obs_bucket``.
    """
    alpha_v = _value("alpha", alpha)
    beta_v = _value("beta", beta)
    sigma2_v = _value("sigma2", sigma2)
    loc = phi.mean(axis=1) if mean is None else mean(phi)
    cov = kernel(phi, alpha_v, beta_v) + JITTER * jnp.eye(phi.shape[0])
    theta = numpyro.sample("theta", dist.MultivariateNormal(loc, covariance_matrix=cov))
    if obs_bucket is not None:
        scale = jnp.sqrt(sizes[obs_bucket] * sigma2_v)
        numpyro.sample("s", dist.Normal(theta[obs_bucket], scale), obs=obs)
