"""BayesAME's multi-target model: a linear model of coregionalisation over buckets
(seed 000 §3.2, App. C.1; docs/methods.md §2).

T target models share the buckets of §1. Their bucket scores θ^t ∈ R^B are

    θ^t = μ^t + Σ_{l=1..L} w_l^t u_l,   u_l ~ N(0, K_l),

so the joint prior over θ = (θ^1, …, θ^T) ∈ R^{T·B} (target-major) is Gaussian with

    Cov(θ^t_b, θ^{t'}_{b'}) = Σ_l w_l^t w_l^{t'} K_l(φ_b, φ_b'),  i.e.  Σ = Σ_l (w_l w_lᵀ) ⊗ K_l.

The first ⌈L/2⌉ kernels are squared-exponential, the rest Matérn-3/2 (App. C.1), each with
its own (α_l, β_l). An item i of bucket b scored by target t is s^t_i | θ ~ N(θ^t_b, N_b σ²).

:func:`coregional_model` is the NumPyro program; as for :mod:`bayeval.models.bucket_gp`,
pass a distribution instead of a value for ``alpha``, ``beta``, ``weights`` or ``sigma2``
to put a prior on it, or other ``kernels`` / ``mean``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.distributions.util import lazy_property

from bayeval.models.bucket_gp import JITTER, SIGMA2_TIED
from bayeval.models.kernels import matern32, squared_exponential
from bayeval.types import Array

Kernel = Callable[[Array, Array, Array], Array]


class LazyMultivariateNormal(dist.MultivariateNormal):
    """A multivariate normal given by its covariance whose Cholesky factor is computed on
    first use (sampling, log density) rather than on construction.

    Exact inference only reads the mean and covariance off the model; building the factor
    of a (T·B)² covariance nobody uses costs a J³ decomposition in eager mode and, under
    ``jit``, about 4 J² bytes of compile-time memory (3.9 GB for J = 10 810) before XLA
    drops it."""

    def __init__(self, loc: Array, covariance_matrix: Array) -> None:
        self.loc = loc
        self.covariance_matrix = covariance_matrix
        dist.Distribution.__init__(self, batch_shape=(), event_shape=jnp.shape(loc)[-1:])

    @lazy_property
    def scale_tril(self) -> Array:
        return jnp.linalg.cholesky(self.covariance_matrix)


def default_kernels(n_latent: int) -> list[Kernel]:
    """Half squared-exponential (the first ⌈L/2⌉), half Matérn-3/2."""
    if n_latent < 1:
        raise ValueError(f"need at least one latent process, got {n_latent}")
    n_se = (n_latent + 1) // 2
    return [squared_exponential] * n_se + [matern32] * (n_latent - n_se)


def _site(name: str, spec: Array | float | dist.Distribution, shape: tuple[int, ...]) -> Array:
    if isinstance(spec, dist.Distribution):
        d = spec if spec.batch_shape == shape else spec.expand(shape)
        return numpyro.sample(name, d.to_event(len(shape)) if shape else d)
    return numpyro.deterministic(name, jnp.broadcast_to(jnp.asarray(spec, jnp.float64), shape))


def coregional_covariance(phi: Array, alpha: Array, beta: Array, weights: Array,
                          kernels: Sequence[Kernel], row_target: Array | None = None,
                          offset: Array | float = 0.0) -> Array:
    """Σ = Σ_l (w_l w_lᵀ) ⊗ K_l(φ; α_l, β_l), (T·B, T·B), target-major; ``weights`` is
    (T, L). With ``row_target`` (R,), the covariance of R given rows instead: row r is
    target ``row_target[r]`` on bucket vector ``phi[r]``,
    Σ_rs = Σ_l w_l[t_r] w_l[t_s] K_l(φ_r, φ_s). ``offset`` = τ² adds τ² to every pair of
    rows of the same target: a constant offset c_t ~ N(0, τ²) per target."""
    cov = 0.0
    for ell, kernel in enumerate(kernels):
        w = weights[:, ell]
        k = kernel(phi, alpha[ell], beta[ell])
        if row_target is None:
            cov = cov + jnp.kron(jnp.outer(w, w), k)
        else:
            wr = w[row_target]
            cov = cov + wr[:, None] * wr[None, :] * k
    T, B = weights.shape[0], phi.shape[0]
    rows = jnp.repeat(jnp.arange(T), B) if row_target is None else row_target
    return cov + offset * (rows[:, None] == rows[None, :])


def coregional_model(phi: Array, sizes: Array, n_targets: int,
                     obs_target: Array | None = None, obs_bucket: Array | None = None,
                     obs: Array | None = None, *, n_latent: int = 2,
                     alpha: Array | float | dist.Distribution = 1.0,
                     beta: Array | float | dist.Distribution = 1.0,
                     weights: Array | float | dist.Distribution | None = None,
                     sigma2: float | dist.Distribution = SIGMA2_TIED,
                     mean: Callable[[Array], Array] | None = None,
                     kernels: Sequence[Kernel] | None = None,
                     row_target: Array | None = None,
                     offset: Array | float | dist.Distribution = 0.0) -> None:
    """NumPyro program of the coregionalised bucket model.

    Sites: ``alpha`` (L,), ``beta`` (L,), ``weights`` (T, L) (None: the prior N(0, 0.1²);
    App. C.1 initialises w ~ N(0, 0.01)), ``sigma2``, ``theta`` (T·B,) target-major, and
    ``s`` the observed scores, target ``obs_target[j]`` on an item of bucket
    ``obs_bucket[j]``. ``mean(phi)`` gives the (B,) prior mean shared by all targets
    (default: the bucket's mean reference score) or a (T, B) array of per-target means.

    ``offset`` (site ``offset``) is the variance τ² of a constant offset c_t ~ N(0, τ²)
    of each target's abilities (0: none): it lets every target sit at its own level
    whatever the rank L of the shared processes (our addition; the paper's model is
    τ² = 0).

    ``row_target`` (R,) puts ``theta`` over R chosen (target, bucket) rows instead of the
    full grid: row r is target ``row_target[r]`` on the bucket of ``phi[r]`` (size
    ``sizes[r]``), and ``obs_bucket`` then indexes rows (``obs_target`` is not used). The
    marginal likelihood of a few observed pairs needs only those rows.
    """
    kernels = list(kernels) if kernels is not None else default_kernels(n_latent)
    L, B = len(kernels), phi.shape[0]
    alpha_v = _site("alpha", alpha, (L,))
    beta_v = _site("beta", beta, (L,))
    w = _site("weights", dist.Normal(0.0, 0.1) if weights is None else weights,
              (n_targets, L))
    sigma2_v = _site("sigma2", sigma2, ())
    offset_v = _site("offset", offset, ())
    loc = phi.mean(axis=1) if mean is None else mean(phi)
    if row_target is None:
        loc = jnp.broadcast_to(loc, (n_targets, B)).reshape(-1)
    elif jnp.ndim(loc) == 2:
        loc = loc[row_target, jnp.arange(B)]
    cov = coregional_covariance(phi, alpha_v, beta_v, w, kernels, row_target, offset_v)
    diag = jnp.arange(cov.shape[0])
    cov = cov.at[diag, diag].add(JITTER)  # not + JITTER·I: XLA would fold a J² constant
    theta = numpyro.sample("theta", LazyMultivariateNormal(loc, cov))
    if obs_bucket is not None:
        flat = obs_bucket if row_target is not None else obs_target * B + obs_bucket
        scale = jnp.sqrt(sizes[obs_bucket] * sigma2_v)
        numpyro.sample("s", dist.Normal(theta[flat], scale), obs=obs)
