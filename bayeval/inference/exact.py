"""Exact Gaussian inference for the bucket GP (seed 000 §3.1, App. A; docs/methods.md §1).

The posterior over bucket scores θ ∈ R^B is Gaussian and is kept as state. Observing the
score s of an item of bucket b is a rank-1 update:

    k = Σ e_b,  v = Σ_bb + N_b σ²,   μ ← μ + k (s − μ_b)/v,   Σ ← Σ − k kᵀ / v.

With m_b unobserved items left in bucket b and noise variance d_b = N_b σ² per item,

    E[R | C]   = (1/N) (Σ_{i∈C} s_i + Σ_b m_b μ_b),
    Var(R | C) = (1/N²) (mᵀ Σ m + Σ_b m_b d_b),
    Cov(R, s_i | C) = (1/N) ((Σ m)_b + d_b),   Var(s_i | C) = Σ_bb + d_b   (i in bucket b).

**Deferred rank-1 updates (our implementation choice, exact).** Σ is stored as
Σ = Σ_c − Uᵀ U with Σ_c the covariance at the last compaction and U (P × B) holding the
rows k/√v of the (at most P) updates since. A step then costs O(P B): the column
k = Σ_c[b] − U[:, b]ᵀ U, and the vectors Σ m and diag Σ that prediction needs are carried
along by O(B) identities,

    Σ' m' = Σ m − k (kᵀ m + d_b) / v    (m' = m − e_b),     diag Σ' = diag Σ − k² / v.

Every P observations :func:`compact` folds U into Σ_c with one B × P × B product and
recomputes Σ m and diag Σ from Σ_c (so rounding in the carried vectors never accumulates
over more than P steps). Per observation that is O(P B + B²) memory traffic amortised to
O(P B + B²/P) instead of the three O(B²) passes of the plain update.

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
from numpyro import handlers

from bayeval.inference.base import Backend, MaintenanceInfo, refitted
from bayeval.inference.optimise import lbfgs_run
from bayeval.models.bucket_gp import N0, bucket_gp_model, bucket_layout
from bayeval.types import Array, Prediction

PENDING = 32  # P: rank-1 updates held before a compaction (≈ √B balances the two costs)


class ExactState(NamedTuple):
    mu: Array  # (B,) posterior mean of θ
    base: Array  # (B, B) Σ_c, the posterior covariance at the last compaction
    pending: Array  # (P, B) rows k/√v of the updates since; Σ = Σ_c − pendingᵀ pending
    n_pending: Array  # () rows of ``pending`` in use
    cov_m: Array  # (B,) Σ m
    cov_diag: Array  # (B,) diag Σ
    noise: Array  # (B,) d_b = N_b σ², noise variance of one item of bucket b
    remaining: Array  # (B,) m_b, unobserved items per bucket
    count: Array  # (B,) n_b, observed items per bucket
    total: Array  # (B,) Σ of observed scores per bucket
    item_bucket: Array  # (N,) bucket of each item
    observed: Array  # (N,) bool
    scores: Array  # (N,) observed scores (0 elsewhere)
    log_hyper: Array  # (2,) log α, log β of the current prior
    phi: Array  # (B, K) bucket reference vectors
    sizes: Array  # (B,) N_b (1 for a padded bucket, see ``bucket_capacity``)
    nearly_unique: Array  # () B ≥ N − N0: information-based selection is trusted


def hyper_params(log_hyper: Array, sigma2: Array | float) -> dict[str, Array]:
    """The bucket GP's sites at α = exp(log_hyper[0]), β = exp(log_hyper[1]) and σ²."""
    return {"alpha": jnp.exp(log_hyper[0]), "beta": jnp.exp(log_hyper[1]),
            "sigma2": jnp.asarray(sigma2, jnp.float64)}


def program_trace(model: Callable, phi: Array, sizes: Array, params: dict[str, Array],
                  obs_bucket: Array | None = None, **model_kwargs: Any) -> dict:
    """The trace of the bucket-GP program ``model`` with the sites in ``params`` fixed
    (seeded; no scores observed), from which backends read the prior."""
    seeded = handlers.seed(handlers.substitute(model, data=params), rng_seed=0)
    return handlers.trace(seeded).get_trace(phi, sizes, obs_bucket, None, **model_kwargs)


def gaussian_prior(model: Callable, phi: Array, sizes: Array, params: dict[str, Array],
                   **model_kwargs: Any) -> tuple[Array, Array, Array]:
    """(μ, Σ, d): the prior of site ``theta`` and the per-item noise variance of each
    bucket, read from the NumPyro program ``model`` with sites in ``params`` fixed."""
    trace = program_trace(model, phi, sizes, params, jnp.arange(phi.shape[0]), **model_kwargs)
    theta = trace["theta"]["fn"]
    noise = trace["s"]["fn"].scale ** 2
    return theta.loc, theta.covariance_matrix, noise


def masked_system(cov0: Array, noise: Array, count: Array, mu0: Array, total: Array):
    """Matrix A = cov0 + diag(d/n) restricted to observed buckets (identity elsewhere) and
    the residual ȳ − μ0 (0 elsewhere)."""
    seen = count > 0
    n_safe = jnp.maximum(count, 1.0)
    both = seen[:, None] & seen[None, :]
    A = jnp.where(both, cov0, 0.0) + jnp.diag(jnp.where(seen, noise / n_safe, 1.0))
    resid = jnp.where(seen, total / n_safe - mu0, 0.0)
    return A, resid, seen


@jax.custom_vjp
def gaussian_nll(A: Array, resid: Array) -> Array:
    """½ rᵀ A⁻¹ r + ½ log|A| for a symmetric positive definite A (Cholesky), with the
    closed-form gradient ∂/∂A = ½ (A⁻¹ − a aᵀ), ∂/∂r = a, a = A⁻¹ r (Rasmussen & Williams
    eq. 5.9): one O(S³) inverse instead of differentiating through the factorisation."""
    return _gaussian_nll_fwd(A, resid)[0]


def _gaussian_nll_fwd(A: Array, resid: Array):
    chol = jnp.linalg.cholesky(A)
    a = jax.scipy.linalg.cho_solve((chol, True), resid)
    value = 0.5 * resid @ a + jnp.sum(jnp.log(jnp.diag(chol)))
    return value, (chol, a)


def _gaussian_nll_bwd(residuals, g):
    chol, a = residuals
    inverse = jax.scipy.linalg.cho_solve((chol, True), jnp.eye(chol.shape[0], dtype=chol.dtype))
    return g * 0.5 * (inverse - jnp.outer(a, a)), g * a


gaussian_nll.defvjp(_gaussian_nll_fwd, _gaussian_nll_bwd)


def negative_log_marginal(cov0: Array, noise: Array, count: Array, mu0: Array,
                          total: Array) -> Array:
    """−log p(ȳ_O) for the observed buckets' means (up to terms free of α, β)."""
    A, resid, _ = masked_system(cov0, noise, count, mu0, total)
    return gaussian_nll(A, resid)


def condition(mu0: Array, cov0: Array, noise: Array, count: Array, total: Array,
              idx: Array | None = None) -> tuple[Array, Array]:
    """Posterior (μ, Σ) given all observations at once (dense conditioning).

    ``count`` and ``total`` are per bucket, or, with ``idx``, per slot of the buckets
    ``idx`` the observations were gathered into (slots with count 0 are padding):
    Σ = Σ0 − G Σ0[O, :] with G = Σ0[:, O] A⁻¹, an O(B² |idx|) product."""
    if idx is None:
        idx = jnp.arange(mu0.shape[0])
    A, resid, seen = masked_system(cov0[idx][:, idx], noise[idx], count, mu0[idx], total)
    cross = jnp.where(seen[None, :], cov0[:, idx], 0.0)  # Cov(θ, ȳ_O)
    chol = jax.scipy.linalg.cho_factor(A, lower=True)
    gain = jax.scipy.linalg.cho_solve(chol, cross.T).T
    mu = mu0 + gain @ resid
    cov = cov0 - gain @ cross.T
    return mu, 0.5 * (cov + cov.T)


def posterior_cov(state: ExactState) -> Array:
    """The (B, B) posterior covariance Σ = Σ_c − Uᵀ U (materialised; O(B² P))."""
    return state.base - pending_outer(state.pending)


def pending_outer(pending: Array) -> Array:
    """Uᵀ U of the pending rows, exactly symmetric whatever the product's rounding."""
    gram = pending.T @ pending
    return 0.5 * (gram + gram.T)


def deferred_column(base: Array, pending: Array, j: Array) -> Array:
    """Column j of Σ = Σ_c − Uᵀ U without materialising Σ, O(P B)."""
    return base[j] - pending[:, j] @ pending


def with_covariance(state: ExactState, mu: Array, cov: Array) -> ExactState:
    """``state`` with posterior (μ, Σ) set, no pending updates, Σ m and diag Σ recomputed."""
    return state._replace(mu=mu, base=cov, pending=jnp.zeros_like(state.pending),
                          n_pending=jnp.zeros((), jnp.int32), cov_m=cov @ state.remaining,
                          cov_diag=jnp.diag(cov))


def compact(state: ExactState) -> ExactState:
    """Fold the pending rank-1 updates into Σ_c (see module docstring)."""
    return with_covariance(state, state.mu, posterior_cov(state))


class Rank1Step(NamedTuple):
    """One deferred rank-1 conditioning step on a (possibly joint) bucket vector: the
    column k = Σ e_j, v = Σ_jj + d_j, and the updated mean, pending rows and diag Σ."""

    k: Array
    v: Array
    mu: Array
    pending: Array
    n_pending: Array
    cov_diag: Array


def rank1_step(mu: Array, base: Array, pending: Array, n_pending: Array, cov_diag: Array,
               noise: Array, j: Array, score: Array) -> Rank1Step:
    """Condition on a score of bucket ``j`` (module docstring), O(P J): shared by the
    single-target backend and the joint one (:mod:`bayeval.inference.joint`). Past a full
    buffer of P pending rows the mean turns to NaN rather than losing an update."""
    k = deferred_column(base, pending, j)
    v = k[j] + noise[j]
    full = n_pending >= pending.shape[0]
    return Rank1Step(k, v, jnp.where(full, jnp.nan, mu + k * (score - mu[j]) / v),
                     pending.at[n_pending].set(k / jnp.sqrt(v)), n_pending + 1,
                     cov_diag - k * k / v)


def rank1_observe(state: ExactState, item: Array, score: Array) -> ExactState:
    """Add the score of one item: the rank-1 update of the module docstring, O(P B).

    At most P = ``state.pending.shape[0]`` updates may be pending: :func:`compact` must run
    after every P-th observation (``Backend.compact_every``; :class:`~bayeval.methods.Method`
    and :func:`~bayeval.loop.simulate.simulate` do so). A state observed past a full buffer
    turns to NaN rather than silently losing an update.
    """
    b = state.item_bucket[item]
    step = rank1_step(state.mu, state.base, state.pending, state.n_pending, state.cov_diag,
                      state.noise, b, score)
    k, v = step.k, step.v
    return state._replace(
        mu=step.mu, pending=step.pending, n_pending=step.n_pending,
        cov_m=state.cov_m - k * ((k @ state.remaining + state.noise[b]) / v),
        cov_diag=step.cov_diag,
        remaining=state.remaining.at[b].add(-1.0), count=state.count.at[b].add(1.0),
        total=state.total.at[b].add(score), observed=state.observed.at[item].set(True),
        scores=state.scores.at[item].set(score))


def predict(state: ExactState) -> Prediction:
    """E[R|C], Var(R|C) and every item's predictive mean, variance and Cov with R, O(N + B)."""
    n_items = state.item_bucket.shape[0]
    m = state.remaining
    mean = (jnp.sum(state.total) + m @ state.mu) / n_items
    var = (m @ state.cov_m + m @ state.noise) / n_items**2
    c_b = (state.cov_m + state.noise) / n_items
    v_b = state.cov_diag + state.noise
    b = state.item_bucket
    unobserved = ~state.observed
    n = jnp.sum(state.count)
    return Prediction(
        mean=mean, var=jnp.maximum(var, 0.0),
        item_mean=jnp.where(unobserved, state.mu[b], state.scores),
        item_var=jnp.where(unobserved, v_b[b], 0.0),
        item_cov=jnp.where(unobserved, c_b[b], 0.0),
        n=n, nearly_unique=state.nearly_unique)


def observed_subset(count: Array, total: Array, key: Array | None, size: int
                    ) -> tuple[Array, Array, Array]:
    """(idx, count, total) of ``size`` slots of observed buckets for a re-fit's likelihood:
    all of them when they fit, else a uniform random subset (``key``; the first ones
    without a key); slots beyond the observed buckets have count and total 0."""
    seen = count > 0
    priority = jnp.ones(seen.shape) if key is None else jax.random.uniform(key, seen.shape)
    idx = jax.lax.top_k(jnp.where(seen, priority, -1.0), size)[1]
    valid = seen[idx]
    return idx, jnp.where(valid, count[idx], 0.0), jnp.where(valid, total[idx], 0.0)


def switch_by_size(sizes: list[int], n: Array, make: Callable[[int], Callable],
                   *operands: Any) -> Any:
    """``make(size)(*operands)`` for the smallest static ``size`` ≥ ``n`` (the largest when
    none is), as one ``lax.switch`` over the sizes."""
    if len(sizes) == 1:
        return make(sizes[0])(*operands)
    index = jnp.minimum(jnp.searchsorted(jnp.asarray(sizes), n), len(sizes) - 1)
    return jax.lax.switch(index, [make(size) for size in sizes], *operands)


def fit_sizes(n_buckets: int, smallest: int = 64) -> list[int]:
    """Static sizes for the observed-bucket subsystem of a re-fit: powers of two from
    ``smallest`` below B, then B."""
    sizes = []
    size = smallest
    while size < n_buckets:
        sizes.append(size)
        size *= 2
    return [*sizes, n_buckets]


class ExactBucketGP:
    """Factory of the exact bucket-GP backend for a NumPyro ``model`` (default: the
    bucket GP of :mod:`bayeval.models.bucket_gp`).

    ``model_kwargs`` go to the model (e.g. a custom ``mean`` or ``kernel``); ``sigma2``
    defaults to the N0 rule. ``refit_every`` = F (0: never re-fit). Each re-fit runs L-BFGS
    until the gradient norm is below ``gtol`` or ``lbfgs_steps`` iterations (on IFEval
    after 150 observations it converges in 10 iterations to the optimum of 40), from
    α = β = 1 (seed 000 App. A.4), or from the current (α, β) with ``warm_start``.

    The marginal likelihood involves only the observed buckets. With ``marginal_fit``
    (default) the re-fit evaluates the model on those buckets alone — padded to the next
    of a few static sizes, so a re-fit after n observations costs O(n³) rather than O(B³).
    This is exact when the prior of a set of buckets does not depend on the other buckets
    (mean and kernel are functions of the buckets' reference vectors, as in every GP
    prior); set ``marginal_fit=False`` for a model where it does. Beyond ``fit_buckets``
    observed buckets (default 256; None: no limit) the likelihood is that of a uniform
    random subset of that many of them, drawn afresh at each re-fit from the re-fit key
    (our choice: two hyperparameters are well determined by 256 bucket means, and the fit
    then costs O(256³) per L-BFGS step however many items were observed); the rebuild of
    the posterior always conditions on every observation.

    ``bucket_capacity`` pads the bucket arrays to that many buckets (copies of bucket 0's
    vector, no items), so that runs on reference sets with different numbers of buckets
    share one compiled program. A padded bucket is never observed and has m_b = 0, so it
    enters no estimate, variance, gain or likelihood.
    """

    def __init__(self, model: Callable = bucket_gp_model, refit_every: int = 50,
                 lbfgs_steps: int = 30, gtol: float = 1e-5, sigma2: float | None = None,
                 n0: int = N0, pending: int = PENDING, warm_start: bool = False,
                 marginal_fit: bool = True, bucket_capacity: int | None = None,
                 fit_buckets: int | None = 256, **model_kwargs: Any) -> None:
        if pending < 1:
            raise ValueError(f"pending must be ≥ 1, got {pending}")
        self.model = model
        self.refit_every = refit_every
        self.lbfgs_steps = lbfgs_steps
        self.gtol = gtol
        self.sigma2 = sigma2
        self.n0 = n0
        self.pending = pending
        self.warm_start = warm_start
        self.marginal_fit = marginal_fit
        self.bucket_capacity = bucket_capacity
        self.fit_buckets = fit_buckets
        self.model_kwargs = model_kwargs

    def prior(self, phi: Array, sizes: Array, log_hyper: Array,
              sigma2: Array | float) -> tuple[Array, Array, Array]:
        """(μ, Σ, d) of the model at α = exp(log_hyper[0]), β = exp(log_hyper[1])."""
        return gaussian_prior(self.model, phi, sizes, hyper_params(log_hyper, sigma2),
                              **self.model_kwargs)

    def init(self, reference_scores: Any, n_items: int) -> ExactState:
        """Bucket the reference matrix and set the prior with α = β = 1."""
        layout = bucket_layout(reference_scores, n_items, self.sigma2, self.n0,
                               self.bucket_capacity)
        sigma2, nearly_unique, remaining = layout.sigma2, layout.nearly_unique, layout.remaining
        phi, sizes = jnp.asarray(layout.phi), jnp.asarray(layout.sizes)
        log_hyper = jnp.zeros(2, jnp.float64)
        mu0, cov0, noise = self.prior(phi, sizes, log_hyper, sigma2)
        B = phi.shape[0]
        state = ExactState(
            mu=mu0, base=cov0, pending=jnp.zeros((self.pending, B)),
            n_pending=jnp.zeros((), jnp.int32), cov_m=jnp.zeros(B), cov_diag=jnp.zeros(B),
            noise=noise, remaining=jnp.asarray(remaining), count=jnp.zeros(B), total=jnp.zeros(B),
            item_bucket=jnp.asarray(layout.item_bucket), observed=jnp.zeros(n_items, bool),
            scores=jnp.zeros(n_items), log_hyper=log_hyper, phi=phi, sizes=sizes,
            nearly_unique=jnp.asarray(nearly_unique))
        return with_covariance(state, mu0, 0.5 * (cov0 + cov0.T))

    def _sigma2(self, state: ExactState) -> Array:
        return state.noise[0] / state.sizes[0]

    def _optimise(self, state: ExactState, idx: Array, count: Array,
                  total: Array) -> tuple[Array, MaintenanceInfo]:
        """L-BFGS on −log p(ȳ) of the buckets ``idx`` (count 0 = padding, masked out); a
        non-finite result keeps the current hyperparameters and is reported as such."""
        sigma2 = self._sigma2(state)
        phi, sizes = state.phi[idx], state.sizes[idx]

        def nlml(log_hyper):
            mu0, cov0, noise = self.prior(phi, sizes, log_hyper, sigma2)
            return negative_log_marginal(cov0, noise, count, mu0, total)

        start = state.log_hyper if self.warm_start else jnp.zeros(2, jnp.float64)
        fit = lbfgs_run(nlml, start, self.lbfgs_steps, self.gtol, (-12.0, 12.0))
        ok = jnp.all(jnp.isfinite(fit.params)) & jnp.isfinite(nlml(fit.params))
        return (jnp.where(ok, fit.params, state.log_hyper),
                refitted(ok, fit.iterations, fit.grad_norm))

    def _rebuild(self, state: ExactState, log_hyper: Array, size: int) -> ExactState:
        """Posterior at ``log_hyper`` by one conditioning on the observed buckets gathered
        into ``size`` slots."""
        seen = state.count > 0
        idx = jnp.nonzero(seen, size=size, fill_value=0)[0]
        valid = jnp.arange(size) < jnp.sum(seen)
        count = jnp.where(valid, state.count[idx], 0.0)  # padded slots are masked out
        total = jnp.where(valid, state.total[idx], 0.0)
        mu0, cov0, noise = self.prior(state.phi, state.sizes, log_hyper, self._sigma2(state))
        mu, cov = condition(mu0, cov0, noise, count, total, idx)
        return with_covariance(state._replace(noise=noise, log_hyper=log_hyper), mu, cov)

    def refit(self, state: ExactState,
              key: Array | None = None) -> tuple[ExactState, MaintenanceInfo]:
        """Type-II ML re-fit of (log α, log β), then a rebuild of the posterior; with what
        the optimiser did."""
        B = state.sizes.shape[0]
        n_seen = jnp.sum(state.count > 0)
        cap = B if self.fit_buckets is None else min(self.fit_buckets, B)
        if self.marginal_fit:
            fit_at_sizes, rebuild_sizes = fit_sizes(cap), fit_sizes(B)
        else:
            fit_at_sizes, rebuild_sizes = [B], [B]
            if cap < B:
                raise ValueError("fit_buckets needs marginal_fit=True")

        def fit_at(size):
            return lambda s: self._optimise(s, *observed_subset(s.count, s.total, key, size))

        def rebuild_at(size):
            return lambda s, lh: self._rebuild(s, lh, size)

        log_hyper, info = switch_by_size(fit_at_sizes, n_seen, fit_at, state)
        return switch_by_size(rebuild_sizes, n_seen, rebuild_at, state, log_hyper), info

    def backend(self) -> Backend:
        return Backend("exact_bucket_gp", self.init, rank1_observe, predict, self.refit,
                       self.refit_every, compact, self.pending)
