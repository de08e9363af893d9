"""BayesAME's bucket Gaussian process (seed 000 §3.1, App. A; docs/methods.md §1).

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

**Non-Gaussian likelihoods** (seed 000 App. C.1; docs/methods.md §1, variants). With
``likelihood="bernoulli"`` a binary score is s_i ~ Bernoulli(σ(θ_b)); with
``"logit_normal"`` a score in (0, 1) is logit(s_i) ~ N(θ_b, N_b σ²). θ is then a latent
logit, and its prior mean is μ_b = logit((Σ_k φ_bk + ½) / (K + 1)) (our choice: the
smoothed mean reference score on the logit scale, finite for buckets every reference model
solved or failed). These need Laplace (:mod:`bayeval.inference.laplace`) or MCMC
(:mod:`bayeval.inference.mcmc`). For MCMC, ``centred=False`` samples θ = μ + L z with
z ~ N(0, I) (site ``theta_z``; ``theta`` becomes deterministic), which NUTS explores far
better when the GP is tightly correlated; the prior of ``theta`` itself is then not
replaceable by site name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bayeval.data.matrix import ScoreMatrix
from bayeval.models.kernels import squared_exponential
from bayeval.types import Array

N0 = 10
SIGMA2_UNIQUE = 1e-4
SIGMA2_TIED = 1e-1
JITTER = 1e-8
LIKELIHOODS = ("gaussian", "bernoulli", "logit_normal")


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


class BucketLayout(NamedTuple):
    """The bucket arrays a posterior backend starts from (see :func:`bucket_layout`)."""

    phi: np.ndarray  # (B', K), padded to the capacity with copies of bucket 0's vector
    sizes: np.ndarray  # (B',) N_b (1 for a padded bucket: a size for the noise only)
    remaining: np.ndarray  # (B',) unobserved items per bucket (0 for a padded bucket)
    item_bucket: np.ndarray  # (N,)
    sigma2: float
    nearly_unique: bool  # B ≥ N − N0


def bucket_layout(reference_scores: np.ndarray, n_items: int, sigma2: float | None = None,
                  n0: int = N0, capacity: int | None = None) -> BucketLayout:
    """Bucket the reference matrix; σ² by the N0 rule unless given; with ``capacity``,
    pad to that many buckets so that runs on reference sets with different numbers of
    buckets share one compiled program (a padded bucket has no items, so it enters no
    estimate, variance, gain or likelihood)."""
    buckets = make_buckets(np.asarray(reference_scores))
    if sigma2 is None:
        sigma2 = default_sigma2(buckets.n_buckets, buckets.n_items, n0)
    phi, sizes = buckets.phi, buckets.sizes
    if capacity is not None:
        extra = capacity - buckets.n_buckets
        if extra < 0:
            raise ValueError(f"bucket_capacity {capacity} < {buckets.n_buckets} buckets of "
                             "the reference matrix")
        phi = np.concatenate([phi, np.repeat(phi[:1], extra, axis=0)])
        sizes = np.concatenate([sizes, np.ones(extra)])
    remaining = np.where(np.arange(phi.shape[0]) < buckets.n_buckets, sizes, 0.0)
    return BucketLayout(phi, sizes, remaining, buckets.item_bucket, float(sigma2),
                        buckets.n_buckets >= n_items - n0)


def _value(name: str, spec: float | dist.Distribution) -> Array:
    if isinstance(spec, dist.Distribution):
        return numpyro.sample(name, spec)
    return numpyro.deterministic(name, jnp.asarray(spec, jnp.float64))


def logit_mean(phi: Array) -> Array:
    """μ_b = logit((Σ_k φ_bk + ½) / (K + 1)): the prior mean of a latent logit."""
    p = (phi.sum(axis=1) + 0.5) / (phi.shape[1] + 1.0)
    return jnp.log(p) - jnp.log1p(-p)


def prior_scale_tril(phi: Array, alpha: Array | float, beta: Array | float,
                     kernel: Callable[[Array, Array, Array], Array] = squared_exponential
                     ) -> Array:
    """Cholesky factor of the bucket GP's prior covariance k(φ, φ) + jitter·I."""
    cov = kernel(phi, alpha, beta) + JITTER * jnp.eye(phi.shape[0])
    return jnp.linalg.cholesky(cov)


def bucket_gp_model(phi: Array, sizes: Array, obs_bucket: Array | None = None,
                    obs: Array | None = None, *,
                    alpha: float | dist.Distribution = 1.0,
                    beta: float | dist.Distribution = 1.0,
                    sigma2: float | dist.Distribution = SIGMA2_TIED,
                    mean: Callable[[Array], Array] | None = None,
                    kernel: Callable[[Array, Array, Array], Array] = squared_exponential,
                    likelihood: str = "gaussian", centred: bool = True,
                    scale_tril: Array | None = None) -> None:
    """NumPyro program of the bucket GP.

    Sites: ``alpha``, ``beta``, ``sigma2`` (sampled when given a distribution, else
    deterministic), ``theta`` (B,) the bucket latent scores (logits for the non-Gaussian
    likelihoods), and ``s`` the observed scores of items in buckets ``obs_bucket``.
    ``scale_tril``: the Cholesky factor of the prior covariance, when ``alpha`` and
    ``beta`` are fixed and the caller factorised it once (:func:`prior_scale_tril`):
    then no B × B factorisation runs at each gradient evaluation of a NUTS run.
    """
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"unknown likelihood {likelihood!r} (known: {', '.join(LIKELIHOODS)})")
    alpha_v = _value("alpha", alpha)
    beta_v = _value("beta", beta)
    sigma2_v = _value("sigma2", sigma2)
    if mean is not None:
        loc = mean(phi)
    else:
        loc = phi.mean(axis=1) if likelihood == "gaussian" else logit_mean(phi)
    if scale_tril is None:
        scale_tril = prior_scale_tril(phi, alpha_v, beta_v, kernel)
    if centred:
        theta = numpyro.sample("theta", dist.MultivariateNormal(loc, scale_tril=scale_tril))
    else:
        z = numpyro.sample("theta_z", dist.Normal(jnp.zeros(phi.shape[0]), 1.0).to_event(1))
        theta = numpyro.deterministic("theta", loc + scale_tril @ z)
    if obs_bucket is None:
        return
    scale = jnp.sqrt(sizes[obs_bucket] * sigma2_v)
    if likelihood == "gaussian":
        numpyro.sample("s", dist.Normal(theta[obs_bucket], scale), obs=obs)
    elif likelihood == "bernoulli":
        numpyro.sample("s", dist.Bernoulli(logits=theta[obs_bucket]), obs=obs)
    else:
        numpyro.sample("s", dist.TransformedDistribution(
            dist.Normal(theta[obs_bucket], scale), dist.transforms.SigmoidTransform()),
            obs=obs)
