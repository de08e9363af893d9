"""Laplace inference for the bucket GP with any of its likelihoods (seed 000 App. C.1;
docs/methods.md §1, non-Gaussian variants; Rasmussen & Williams 2006, §3.4).

The latent f ∈ R^B (logits for the Bernoulli and logit-normal likelihoods, scores for the
Gaussian one) has the GP prior N(μ, K) read from the NumPyro program
(:func:`bayeval.models.bucket_gp.bucket_gp_model`). The likelihood of a bucket depends on
its observations only through (n_b, Σ y): y = s (Bernoulli, Gaussian) or y = logit(s)
(logit-normal, scores clipped to [ε, 1 − ε], ε = 1e-3, our choice). The Laplace
posterior's mode f̂ is found by Newton's method (R&W Algorithm 3.1, warm-started from the
current mode):

    W = −∇² log p(y | f),   b = W (f − μ) + ∇ log p(y | f),
    f ← μ + K (b − S B⁻¹ S K b),   S = W^{1/2},  B = I + S K S  (Cholesky),

and the posterior is q(f | C) = N(f̂, V), V = K − (L⁻¹ S K)ᵀ (L⁻¹ S K). For the Gaussian
likelihoods one Newton step is exact.

**Online steps (our choice, for speed).** That costs O(B³) per observation. Between full
Laplace fits an observation is instead absorbed by a one-dimensional Laplace step on its
bucket's marginal followed by a Gaussian rank-1 update, O(B²) (:func:`online_update`,
the sequential Laplace / assumed-density step; exact for the Gaussian likelihoods), and the
full Laplace posterior is recomputed every ``relinearise_every`` observations (the
backend's ``compact``) and at every re-fit. ``relinearise_every=1`` gives the full Laplace
posterior after every observation.

**Performance posterior.** Given f, an item of bucket b has conditional mean p(f_b) and
variance q(f_b): p = σ, q = σ(1 − σ) (Bernoulli); p(f) = E_ε σ(f + ε), ε ~ N(0, d_b)
(logit-normal); p = f, q = d_b (Gaussian). With m_b unobserved items per bucket,

    E[R | C]  = (1/N) (Σ_{i∈C} s_i + Σ_b m_b E p_b),
    Var(R | C) = (1/N²) (Σ_b m_b E q_b + Σ_{b,b'} m_b m_b' Cov(p_b, p_b')),

with every marginal moment (E p, E p², E q) by Gauss–Hermite quadrature over N(f̂_b, V_bb)
and the cross-bucket covariances linearised, Cov(p_b, p_b') ≈ J_b J_b' V_bb' (b ≠ b'),
J_b = E p'(f_b) (statistical linearisation). The same terms give the Gaussian-approximation
information gain's Cov(R, s_i | C) and Var(s_i | C), so BayesAME's rule
(:mod:`bayeval.acquisition.info_gain`) runs unchanged. With the Gaussian likelihood every
formula reduces to the exact one (:mod:`bayeval.inference.exact`).

**Re-fit.** Every F observations (α, β) maximise the Laplace approximation of the
marginal likelihood (R&W eq. 3.32),
log q(y | α, β) = −½ (f̂ − μ)ᵀ K⁻¹ (f̂ − μ) + log p(y | f̂) − Σ log diag L,
over the observed buckets only (the GP prior of a set of buckets is the marginal of the
full one, so unobserved buckets drop out exactly), gathered into padded slots of a few
static sizes; L-BFGS on (log α, log β) from α = β = 1, differentiating through a fixed
number of Newton steps. The posterior is then rebuilt at the new (α, β).

**FAQ's factor posterior.** The online Laplace update of a new model's factor under the
logistic factor model (seed 001 App. A.3) lives in
:mod:`bayeval.inference.factor_laplace` and is re-exported here (``factor_start``,
``laplace_update``, ``factor_prediction``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.inference.base import Backend, MaintenanceInfo, refitted
from bayeval.inference.exact import (
    fit_sizes,
    hyper_params,
    observed_subset,
    program_trace,
    switch_by_size,
)
from bayeval.inference.factor_laplace import (  # noqa: F401  (re-exported)
    FactorPosterior,
    factor_prediction,
    factor_start,
    laplace_update,
)
from bayeval.inference.optimise import lbfgs_run
from bayeval.models.bucket_gp import LIKELIHOODS, N0, bucket_gp_model, bucket_layout
from bayeval.types import Array, Prediction

CLIP = 1e-3  # logit-normal: scores are clipped to [CLIP, 1 − CLIP] before the logit
QUADRATURE = 24  # Gauss–Hermite nodes per dimension


def _hermite(n: int = QUADRATURE) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of E[g(z)], z ~ N(0, 1)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(n)
    return nodes, weights / weights.sum()


class Likelihood(NamedTuple):
    """One likelihood of the bucket GP, through its sufficient statistics.

    transform: score -> y (the per-bucket sums of y are kept).
    log_lik:   (f, count, total, noise) -> (B,) log p(y_b | f_b) up to terms free of f.
    grad_w:    (f, count, total, noise) -> (gradient, W = −second derivative) per bucket.
    moments:   (x, noise) -> (p, p', q): conditional mean and variance of a score given the
               latent x, and the mean's derivative (``noise`` broadcast to ``x``).
    """

    name: str
    transform: Callable[[Array], Array]
    log_lik: Callable[[Array, Array, Array, Array], Array]
    grad_w: Callable[[Array, Array, Array, Array], tuple[Array, Array]]
    moments: Callable[[Array, Array], tuple[Array, Array, Array]]


def _gaussian_log_lik(f, count, total, noise):
    return (total * f - 0.5 * count * f * f) / noise


def _gaussian_grad_w(f, count, total, noise):
    return (total - count * f) / noise, count / noise


def _bernoulli_log_lik(f, count, total, noise):
    del noise
    return total * f - count * jnp.logaddexp(0.0, f)


def _bernoulli_grad_w(f, count, total, noise):
    del noise
    p = jax.nn.sigmoid(f)
    return total - count * p, count * p * (1.0 - p)


def _identity_moments(x, noise):
    return x, jnp.ones_like(x), jnp.broadcast_to(noise, x.shape)


def _bernoulli_moments(x, noise):
    del noise
    p = jax.nn.sigmoid(x)
    return p, p * (1.0 - p), p * (1.0 - p)


def _logit_normal_moments(x, noise):
    z, w = _hermite()
    s = jax.nn.sigmoid(x[..., None] + jnp.sqrt(noise)[..., None] * z)
    p = s @ w
    return p, (s * (1.0 - s)) @ w, jnp.maximum((s * s) @ w - p * p, 0.0)


def _clipped_logit(s):
    s = jnp.clip(s, CLIP, 1.0 - CLIP)
    return jnp.log(s) - jnp.log1p(-s)


LIKELIHOOD = {
    "gaussian": Likelihood("gaussian", lambda s: s, _gaussian_log_lik, _gaussian_grad_w,
                           _identity_moments),
    "bernoulli": Likelihood("bernoulli", lambda s: s, _bernoulli_log_lik, _bernoulli_grad_w,
                            _bernoulli_moments),
    "logit_normal": Likelihood("logit_normal", _clipped_logit, _gaussian_log_lik,
                               _gaussian_grad_w, _logit_normal_moments),
}


class LaplaceState(NamedTuple):
    mode: Array  # (B,) f̂
    cov: Array  # (B, B) V, posterior covariance of f at the mode
    prior_mean: Array  # (B,) μ
    prior_cov: Array  # (B, B) K
    noise: Array  # (B,) d_b = N_b σ² on the latent scale (unused by the Bernoulli)
    remaining: Array  # (B,) m_b
    count: Array  # (B,) n_b
    total: Array  # (B,) Σ y of the bucket's observations
    item_bucket: Array  # (N,)
    observed: Array  # (N,) bool
    scores: Array  # (N,) observed scores (0 elsewhere)
    log_hyper: Array  # (2,) log α, log β
    phi: Array  # (B, K)
    sizes: Array  # (B,)
    nearly_unique: Array  # ()


def _safe_sqrt(W: Array) -> Array:
    """√W with a zero (not NaN) derivative where W = 0 (buckets without observations)."""
    positive = W > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, W, 1.0)), 0.0)


def newton_step(lik: Likelihood, f: Array, mu: Array, K: Array, count: Array, total: Array,
                noise: Array) -> tuple[Array, Array, Array, Array]:
    """One Newton step from ``f``: (new f, Cholesky L of B, S, a = K⁻¹(f_new − μ))."""
    grad, W = lik.grad_w(f, count, total, noise)
    s = _safe_sqrt(W)
    B = jnp.eye(f.shape[0]) + s[:, None] * K * s[None, :]
    L = jnp.linalg.cholesky(B)
    b = W * (f - mu) + grad
    c = jax.scipy.linalg.cho_solve((L, True), s * (K @ b))
    a = b - s * c
    return mu + K @ a, L, s, a


def find_mode(lik: Likelihood, f0: Array, mu: Array, K: Array, count: Array, total: Array,
              noise: Array, max_iter: int = 50, tol: float = 1e-9) -> Array:
    """Newton's method from ``f0`` until max |Δf| < ``tol`` (at most ``max_iter`` steps)."""

    def body(carry):
        f, _, i = carry
        new = newton_step(lik, f, mu, K, count, total, noise)[0]
        return new, jnp.max(jnp.abs(new - f)), i + 1

    def more(carry):
        _, delta, i = carry
        return (i < max_iter) & (delta > tol)

    return jax.lax.while_loop(more, body, (f0, jnp.asarray(jnp.inf), 0))[0]


def laplace_posterior(lik: Likelihood, f0: Array, mu: Array, K: Array, count: Array,
                      total: Array, noise: Array) -> tuple[Array, Array]:
    """(f̂, V): the mode from ``f0`` and the Laplace covariance K − (L⁻¹SK)ᵀ(L⁻¹SK)."""
    mode = find_mode(lik, f0, mu, K, count, total, noise)
    _, W = lik.grad_w(mode, count, total, noise)
    s = _safe_sqrt(W)
    L = jnp.linalg.cholesky(jnp.eye(mode.shape[0]) + s[:, None] * K * s[None, :])
    C = jax.scipy.linalg.solve_triangular(L, s[:, None] * K, lower=True)
    V = K - C.T @ C
    return mode, 0.5 * (V + V.T)


def online_update(lik: Likelihood, mode: Array, cov: Array, b: Array, y: Array,
                  noise: Array, steps: int = 8) -> tuple[Array, Array]:
    """Condition N(mode, cov) on one observation y of bucket b by a one-dimensional
    Laplace step: f* = argmax log p(y | f_b) − (f_b − m_b)² / (2 v_b) (Newton, ``steps``
    iterations from m_b), w = −∂² log p(y | f*), then the Gaussian rank-1 update that moves
    the mean at b to f* with site noise 1/w:

        k = V e_b,   mode ← mode + k (f* − m_b) / v_b,   V ← V − k kᵀ / (v_b + 1/w).

    Exact for the Gaussian likelihoods."""
    m_b, v_b = mode[b], cov[b, b]
    one = jnp.ones(())

    def body(f, _):
        grad, w = lik.grad_w(f, one, y, noise)
        return f + (grad - (f - m_b) / v_b) / (w + 1.0 / v_b), None

    f_star = jax.lax.scan(body, m_b, None, length=steps)[0]
    _, w = lik.grad_w(f_star, one, y, noise)
    k = cov[:, b]
    mode = mode + k * (f_star - m_b) / v_b
    cov = cov - jnp.outer(k, k) * (w / (1.0 + w * v_b))
    return mode, cov


def laplace_evidence(lik: Likelihood, mu: Array, K: Array, count: Array, total: Array,
                     noise: Array, f0: Array, steps: int = 5) -> Array:
    """log q(y | hyperparameters) (R&W eq. 3.32) after ``steps`` Newton steps from ``f0``
    (differentiable; slots with count 0 contribute nothing)."""

    def body(f, _):
        return newton_step(lik, f, mu, K, count, total, noise)[0], None

    f = jax.lax.scan(body, f0, None, length=steps)[0]
    _, L, _, a = newton_step(lik, f, mu, K, count, total, noise)
    f = mu + K @ a  # one more step: a and f consistent
    return (-0.5 * a @ (f - mu) + jnp.sum(lik.log_lik(f, count, total, noise))
            - jnp.sum(jnp.log(jnp.diag(L))))


def marginal_moments(lik: Likelihood, mode: Array, var: Array, noise: Array
                     ) -> tuple[Array, Array, Array, Array]:
    """Per bucket (E p, Var p, E q, J = E p') under f_b ~ N(mode_b, var_b), by
    Gauss–Hermite quadrature."""
    z, w = _hermite()
    x = mode[:, None] + jnp.sqrt(jnp.maximum(var, 0.0))[:, None] * z
    p, dp, q = lik.moments(x, jnp.broadcast_to(noise[:, None], x.shape))
    ep = p @ w
    return ep, jnp.maximum((p * p) @ w - ep * ep, 0.0), q @ w, dp @ w


def predict(lik: Likelihood, state: LaplaceState) -> Prediction:
    """The performance posterior and every item's moments (module docstring)."""
    n_items = state.item_bucket.shape[0]
    m = state.remaining
    diag = jnp.diag(state.cov)
    ep, varp, eq, J = marginal_moments(lik, state.mode, diag, state.noise)
    g = m * J
    vg = state.cov @ g
    mean = (jnp.sum(state.scores) + m @ ep) / n_items
    var = (m @ eq + g @ vg - jnp.sum(g * g * diag) + jnp.sum(m * m * varp)) / n_items**2
    item_var_b = eq + varp
    item_cov_b = (J * vg - m * J * J * diag + m * varp + eq) / n_items
    b = state.item_bucket
    unobserved = ~state.observed
    return Prediction(
        mean=mean, var=jnp.maximum(var, 0.0),
        item_mean=jnp.where(unobserved, ep[b], state.scores),
        item_var=jnp.where(unobserved, item_var_b[b], 0.0),
        item_cov=jnp.where(unobserved, item_cov_b[b], 0.0),
        n=jnp.sum(state.count), nearly_unique=state.nearly_unique)


class LaplaceBucketGP:
    """Factory of the Laplace bucket-GP backend for ``likelihood`` (``"bernoulli"``,
    ``"logit_normal"`` or ``"gaussian"``) and a NumPyro ``model`` (default: the bucket GP).

    ``refit_every`` = F (0: never), ``lbfgs_steps`` L-BFGS iterations per re-fit on at
    most ``fit_buckets`` observed buckets (a random subset beyond that, as in
    :class:`~bayeval.inference.exact.ExactBucketGP`), each differentiating through
    ``newton_steps`` Newton steps from the current mode (defaults 10, 128 and 5, our
    choice: on IFEval a re-fit after 150 observations then takes 0.1 s instead of 3 s at
    15, 256 and 12, and the evidence is flat enough near its optimum that the estimate
    moves by about 0.01 either way). ``relinearise_every``: see the module docstring.
    ``alpha``, ``beta``: the starting hyperparameters; ``model_kwargs`` go to the model (a
    custom ``mean`` or ``kernel``).
    """

    def __init__(self, likelihood: str = "bernoulli", model: Callable = bucket_gp_model,
                 refit_every: int = 50, lbfgs_steps: int = 10, alpha: float = 1.0,
                 beta: float = 1.0, sigma2: float | None = None, n0: int = N0,
                 bucket_capacity: int | None = None, fit_buckets: int | None = 128,
                 newton_steps: int = 5, relinearise_every: int = 10,
                 **model_kwargs: Any) -> None:
        if likelihood not in LIKELIHOODS:
            raise ValueError(f"unknown likelihood {likelihood!r} "
                             f"(known: {', '.join(LIKELIHOODS)})")
        self.lik = LIKELIHOOD[likelihood]
        self.model = model
        self.refit_every = refit_every
        self.lbfgs_steps = lbfgs_steps
        self.start = np.log([alpha, beta])
        self.sigma2 = sigma2
        self.n0 = n0
        self.bucket_capacity = bucket_capacity
        self.fit_buckets = fit_buckets
        self.newton_steps = newton_steps
        self.relinearise_every = relinearise_every
        self.model_kwargs = model_kwargs

    def prior(self, phi: Array, sizes: Array, log_hyper: Array,
              sigma2: Array | float) -> tuple[Array, Array, Array]:
        """(μ, K, d) of the program's ``theta`` and per-item latent noise variance."""
        params = hyper_params(log_hyper, sigma2)
        trace = program_trace(self.model, phi, sizes, params, likelihood=self.lik.name,
                              **self.model_kwargs)
        theta = trace["theta"]["fn"]
        cov = theta.covariance_matrix
        return theta.loc, 0.5 * (cov + cov.T), sizes * params["sigma2"]

    def init(self, reference_scores: Any, n_items: int) -> LaplaceState:
        """Bucket the reference matrix and set the prior at the starting (α, β)."""
        layout = bucket_layout(reference_scores, n_items, self.sigma2, self.n0,
                               self.bucket_capacity)
        phi, sizes = jnp.asarray(layout.phi), jnp.asarray(layout.sizes)
        sigma2 = layout.sigma2
        log_hyper = jnp.asarray(self.start, jnp.float64)
        mu, K, noise = self.prior(phi, sizes, log_hyper, sigma2)
        B = phi.shape[0]
        return LaplaceState(
            mode=mu, cov=K, prior_mean=mu, prior_cov=K, noise=noise,
            remaining=jnp.asarray(layout.remaining), count=jnp.zeros(B), total=jnp.zeros(B),
            item_bucket=jnp.asarray(layout.item_bucket),
            observed=jnp.zeros(n_items, bool), scores=jnp.zeros(n_items),
            log_hyper=log_hyper, phi=phi, sizes=sizes,
            nearly_unique=jnp.asarray(layout.nearly_unique))

    def observe(self, state: LaplaceState, item: Array, score: Array) -> LaplaceState:
        """Add one score by the online Laplace step of the module docstring, O(B²)."""
        b = state.item_bucket[item]
        y = self.lik.transform(score)
        mode, cov = online_update(self.lik, state.mode, state.cov, b, y, state.noise[b])
        return state._replace(
            mode=mode, cov=cov, count=state.count.at[b].add(1.0),
            total=state.total.at[b].add(y), remaining=state.remaining.at[b].add(-1.0),
            observed=state.observed.at[item].set(True), scores=state.scores.at[item].set(score))

    def relinearise(self, state: LaplaceState) -> LaplaceState:
        """The full Laplace posterior of all observations (Newton from the current mode)."""
        mode, cov = laplace_posterior(self.lik, state.mode, state.prior_mean,
                                      state.prior_cov, state.count, state.total, state.noise)
        return state._replace(mode=mode, cov=cov)

    def predict(self, state: LaplaceState) -> Prediction:
        return predict(self.lik, state)

    def _sigma2(self, state: LaplaceState) -> Array:
        return state.noise[0] / state.sizes[0]

    def _optimise(self, state: LaplaceState, key: Array | None,
                  size: int) -> tuple[Array, MaintenanceInfo]:
        idx, count, total = observed_subset(state.count, state.total, key, size)
        valid = count > 0
        phi, sizes = state.phi[idx], state.sizes[idx]
        sigma2 = self._sigma2(state)
        f0 = jax.lax.stop_gradient(state.mode[idx])

        def loss(log_hyper):
            mu, K, noise = self.prior(phi, sizes, log_hyper, sigma2)
            K = K + jnp.diag(jnp.where(valid, 0.0, 1.0))  # padded slots: independent
            return -laplace_evidence(self.lik, mu, K, count, total, noise, f0,
                                     self.newton_steps)

        start = jnp.asarray(self.start, jnp.float64)
        fit = lbfgs_run(loss, start, self.lbfgs_steps, bounds=(-8.0, 8.0))
        ok = jnp.all(jnp.isfinite(fit.params)) & jnp.isfinite(loss(fit.params))
        return (jnp.where(ok, fit.params, state.log_hyper),
                refitted(ok, fit.iterations, fit.grad_norm))

    def refit(self, state: LaplaceState,
              key: Array | None = None) -> tuple[LaplaceState, MaintenanceInfo]:
        """Type-II ML (Laplace evidence) re-fit of (log α, log β), then a rebuild; with
        what the optimiser did."""
        B = state.sizes.shape[0]
        cap = B if self.fit_buckets is None else min(self.fit_buckets, B)
        log_hyper, info = switch_by_size(fit_sizes(cap), jnp.sum(state.count > 0),
                                   lambda size: lambda s: self._optimise(s, key, size), state)
        mu, K, noise = self.prior(state.phi, state.sizes, log_hyper, self._sigma2(state))
        mode, cov = laplace_posterior(self.lik, state.mode, mu, K, state.count, state.total,
                                      noise)
        return state._replace(mode=mode, cov=cov, prior_mean=mu, prior_cov=K, noise=noise,
                              log_hyper=log_hyper), info

    def backend(self) -> Backend:
        return Backend(f"laplace_bucket_gp_{self.lik.name}", self.init, self.observe,
                       self.predict, self.refit, self.refit_every, self.relinearise,
                       self.relinearise_every)


__all__ = [
    "LIKELIHOOD",
    "LaplaceBucketGP",
    "LaplaceState",
    "Likelihood",
    "find_mode",
    "laplace_evidence",
    "laplace_posterior",
    "marginal_moments",
    "newton_step",
    "online_update",
    "predict",
]
