"""Exact Gaussian inference for the bucket GP (seed 000 §3.1, App. A; METHODS.md §1).

The posterior over bucket scores θ ∈ R^B is Gaussian and is kept as state. Observing the
score s of an item of bucket b is a rank-1 update, O(B²):

    k = Σ e_b,  v = Σ_bb + N_b σ²,   μ ← μ + k (s − μ_b)/v,   Σ ← Σ − k kᵀ / v.

With m_b unobserved items left in bucket b and noise variance d_b = N_b σ² per item,

    E[R | C]   = (1/N) (Σ_{i∈C} s_i + Σ_b m_b μ_b),
    Var(R | C) = (1/N²) (mᵀ Σ m + Σ_b m_b d_b),
    Cov(R, s_i | C) = (1/N) ((Σ m)_b + d_b),   Var(s_i | C) = Σ_bb + d_b   (i in bucket b).

Hyperparameters (α, β) are re-fitted by type-II maximum likelihood (L-BFGS on log α,
log β, from α = β = 1) and the posterior is rebuilt by one dense conditioning. Both use
the sufficient statistic of a bucket: the mean ȳ_b of its n_b observed scores, with noise
d_b / n_b; buckets without observations are masked out exactly (unit diagonal, zero
residual). The prior (μ, Σ, d) is read from the NumPyro program
(:func:`gaussian_prior`), never hard-coded here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from numpyro import handlers

from bayeval.inference.base import Array, Backend, Prediction
from bayeval.models.bucket_gp import N0, bucket_gp_model, default_sigma2, make_buckets


class ExactState(NamedTuple):
    mu: Array  # (B,) posterior mean of θ
    cov: Array  # (B, B) posterior covariance of θ
    noise: Array  # (B,) d_b = N_b σ², noise variance of one item of bucket b
    remaining: Array  # (B,) m_b, unobserved items per bucket
    count: Array  # (B,) n_b, observed items per bucket
    total: Array  # (B,) Σ of observed scores per bucket
    item_bucket: Array  # (N,) bucket of each item
    observed: Array  # (N,) bool
    scores: Array  # (N,) observed scores (0 elsewhere)
    log_hyper: Array  # (2,) log α, log β of the current prior
    phi: Array  # (B, K) bucket reference vectors
    sizes: Array  # (B,) N_b
    nearly_unique: Array  # () B ≥ N − N0: information-based selection is trusted


def gaussian_prior(model: Callable, phi: Array, sizes: Array, params: dict[str, Array],
                   **model_kwargs: Any) -> tuple[Array, Array, Array]:
    """(μ, Σ, d): the prior of site ``theta`` and the per-item noise variance of each
    bucket, read from the NumPyro program ``model`` with sites in ``params`` fixed."""
    B = phi.shape[0]
    seeded = handlers.seed(handlers.substitute(model, data=params), rng_seed=0)
    trace = handlers.trace(seeded).get_trace(phi, sizes, jnp.arange(B), None, **model_kwargs)
    theta = trace["theta"]["fn"]
    noise = trace["s"]["fn"].scale ** 2
    return theta.loc, theta.covariance_matrix, noise


def _masked_system(cov0: Array, noise: Array, count: Array, mu0: Array, total: Array):
    """Matrix A = cov0 + diag(d/n) restricted to observed buckets (identity elsewhere) and
    the residual ȳ − μ0 (0 elsewhere)."""
    seen = count > 0
    n_safe = jnp.maximum(count, 1.0)
    both = seen[:, None] & seen[None, :]
    A = jnp.where(both, cov0, 0.0) + jnp.diag(jnp.where(seen, noise / n_safe, 1.0))
    resid = jnp.where(seen, total / n_safe - mu0, 0.0)
    return A, resid, seen


def negative_log_marginal(cov0: Array, noise: Array, count: Array, mu0: Array,
                          total: Array) -> Array:
    """−log p(ȳ_O) for the observed buckets' means (up to terms free of α, β)."""
    A, resid, _ = _masked_system(cov0, noise, count, mu0, total)
    chol = jnp.linalg.cholesky(A)
    z = jax.scipy.linalg.solve_triangular(chol, resid, lower=True)
    return 0.5 * z @ z + jnp.sum(jnp.log(jnp.diag(chol)))


def condition(mu0: Array, cov0: Array, noise: Array, count: Array,
              total: Array) -> tuple[Array, Array]:
    """Posterior (μ, Σ) given all observations at once (dense conditioning)."""
    A, resid, seen = _masked_system(cov0, noise, count, mu0, total)
    cross = jnp.where(seen[None, :], cov0, 0.0)  # Cov(θ, ȳ_O)
    chol = jax.scipy.linalg.cho_factor(A, lower=True)
    gain = jax.scipy.linalg.cho_solve(chol, cross.T).T
    mu = mu0 + gain @ resid
    cov = cov0 - gain @ cross.T
    return mu, 0.5 * (cov + cov.T)


def rank1_observe(state: ExactState, item: Array, score: Array) -> ExactState:
    """Add the score of one item: the O(B²) rank-1 update of the module docstring."""
    b = state.item_bucket[item]
    k = state.cov[:, b]
    v = k[b] + state.noise[b]
    mu = state.mu + k * (score - state.mu[b]) / v
    # k_i k_j = k_j k_i exactly in floating point, so a symmetric Σ stays exactly
    # symmetric without re-symmetrising (a B×B transpose per step)
    cov = state.cov - jnp.outer(k, k) / v
    return state._replace(
        mu=mu, cov=cov,
        remaining=state.remaining.at[b].add(-1.0), count=state.count.at[b].add(1.0),
        total=state.total.at[b].add(score), observed=state.observed.at[item].set(True),
        scores=state.scores.at[item].set(score))


def predict(state: ExactState) -> Prediction:
    """E[R|C], Var(R|C) and every item's predictive mean, variance and Cov with R."""
    n_items = state.item_bucket.shape[0]
    m = state.remaining
    cov_m = state.cov @ m
    mean = (jnp.sum(state.total) + m @ state.mu) / n_items
    var = (m @ cov_m + m @ state.noise) / n_items**2
    c_b = (cov_m + state.noise) / n_items
    v_b = jnp.diag(state.cov) + state.noise
    b = state.item_bucket
    unobserved = ~state.observed
    n = jnp.sum(state.count)
    return Prediction(
        mean=mean, var=jnp.maximum(var, 0.0),
        item_mean=jnp.where(unobserved, state.mu[b], state.scores),
        item_var=jnp.where(unobserved, v_b[b], 0.0),
        item_cov=jnp.where(unobserved, c_b[b], 0.0),
        n=n, nearly_unique=state.nearly_unique)


class ExactBucketGP:
    """Factory of the exact bucket-GP backend for a NumPyro ``model`` (default: the
    bucket GP of :mod:`bayeval.models.bucket_gp`).

    ``model_kwargs`` go to the model (e.g. a custom ``mean`` or ``kernel``); ``sigma2``
    defaults to the N0 rule. ``refit_every`` = F (0: never re-fit). Each re-fit runs L-BFGS
    until the gradient norm is below ``gtol`` or ``lbfgs_steps`` iterations (on IFEval
    after 150 observations it converges in 10 iterations to the optimum of 40).
    """

    def __init__(self, model: Callable = bucket_gp_model, refit_every: int = 50,
                 lbfgs_steps: int = 30, gtol: float = 1e-5, sigma2: float | None = None,
                 n0: int = N0, **model_kwargs: Any) -> None:
        self.model = model
        self.refit_every = refit_every
        self.lbfgs_steps = lbfgs_steps
        self.gtol = gtol
        self.sigma2 = sigma2
        self.n0 = n0
        self.model_kwargs = model_kwargs

    def prior(self, phi: Array, sizes: Array, log_hyper: Array,
              sigma2: Array | float) -> tuple[Array, Array, Array]:
        """(μ, Σ, d) of the model at α = exp(log_hyper[0]), β = exp(log_hyper[1])."""
        params = {"alpha": jnp.exp(log_hyper[0]), "beta": jnp.exp(log_hyper[1]),
                  "sigma2": jnp.asarray(sigma2, jnp.float64)}
        return gaussian_prior(self.model, phi, sizes, params, **self.model_kwargs)

    def init(self, reference_scores: Any, n_items: int) -> ExactState:
        """Bucket the reference matrix and set the prior with α = β = 1."""
        buckets = make_buckets(np.asarray(reference_scores))
        sigma2 = self.sigma2 if self.sigma2 is not None else default_sigma2(
            buckets.n_buckets, buckets.n_items, self.n0)
        phi = jnp.asarray(buckets.phi)
        sizes = jnp.asarray(buckets.sizes)
        log_hyper = jnp.zeros(2, jnp.float64)
        mu0, cov0, noise = self.prior(phi, sizes, log_hyper, sigma2)
        B = buckets.n_buckets
        return ExactState(
            mu=mu0, cov=0.5 * (cov0 + cov0.T), noise=noise, remaining=sizes,
            count=jnp.zeros(B), total=jnp.zeros(B),
            item_bucket=jnp.asarray(buckets.item_bucket), observed=jnp.zeros(n_items, bool),
            scores=jnp.zeros(n_items), log_hyper=log_hyper, phi=phi, sizes=sizes,
            nearly_unique=jnp.asarray(B >= n_items - self.n0))

    def _sigma2(self, state: ExactState) -> Array:
        return state.noise[0] / state.sizes[0]

    def refit(self, state: ExactState, key: Array | None = None) -> ExactState:
        """Type-II ML re-fit of (log α, log β) from α = β = 1, then a dense rebuild."""
        del key
        sigma2 = self._sigma2(state)

        def nlml(log_hyper):
            mu0, cov0, noise = self.prior(state.phi, state.sizes, log_hyper, sigma2)
            return negative_log_marginal(cov0, noise, state.count, mu0, state.total)

        solver = optax.lbfgs()
        start = jnp.zeros(2, jnp.float64)
        value_and_grad = optax.value_and_grad_from_state(nlml)

        def body(carry):
            params, opt_state, _, i = carry
            value, grad = value_and_grad(params, state=opt_state)
            updates, opt_state = solver.update(grad, opt_state, params, value=value,
                                               grad=grad, value_fn=nlml)
            params = jnp.clip(optax.apply_updates(params, updates), -12.0, 12.0)
            return params, opt_state, jnp.linalg.norm(grad), i + 1

        def more(carry):
            return (carry[3] < self.lbfgs_steps) & (carry[2] > self.gtol)

        params, *_ = jax.lax.while_loop(
            more, body, (start, solver.init(start), jnp.asarray(jnp.inf), 0))
        ok = jnp.all(jnp.isfinite(params)) & jnp.isfinite(nlml(params))
        log_hyper = jnp.where(ok, params, state.log_hyper)
        mu0, cov0, noise = self.prior(state.phi, state.sizes, log_hyper, sigma2)
        mu, cov = condition(mu0, cov0, noise, state.count, state.total)
        return state._replace(mu=mu, cov=cov, noise=noise, log_hyper=log_hyper)

    def backend(self) -> Backend:
        return Backend("exact_bucket_gp", self.init, rank1_observe, predict, self.refit,
                       self.refit_every)
