"""The coregionalised multi-target model against brute-force formulas."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from numpyro import handlers
from numpyro.infer.util import log_density

from bayeval.inference.exact import gaussian_prior
from bayeval.models.bucket_gp import bucket_gp_model, make_buckets
from bayeval.models.coregional import coregional_covariance, coregional_model, default_kernels
from bayeval.models.kernels import matern32, squared_exponential


@pytest.fixture(scope="module")
def buckets():
    rng = np.random.default_rng(7)
    return make_buckets((rng.random((5, 9)) < 0.5).astype(float))


def test_covariance_is_the_sum_of_kronecker_products(buckets):
    phi = jnp.asarray(buckets.phi)
    B = phi.shape[0]
    rng = np.random.default_rng(0)
    alpha, beta, w = rng.uniform(0.5, 2, 4), rng.uniform(0.5, 2, 4), rng.normal(size=(3, 4))
    kernels = default_kernels(4)
    assert kernels == [squared_exponential] * 2 + [matern32] * 2
    cov = np.asarray(coregional_covariance(phi, jnp.asarray(alpha), jnp.asarray(beta),
                                           jnp.asarray(w), kernels))
    d = np.sqrt(((buckets.phi[:, None] - buckets.phi[None]) ** 2).sum(-1) / phi.shape[1])
    for t, tp, b, bp in [(0, 0, 1, 2), (0, 2, 3, 3), (2, 1, 0, 4), (1, 1, 2, 2)]:
        expected = 0.0
        for ell in range(4):
            if ell < 2:
                k = alpha[ell] * np.exp(-beta[ell] * d[b, bp] ** 2)
            else:
                r = np.sqrt(beta[ell]) * d[b, bp]
                k = alpha[ell] * (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r)
            expected += w[t, ell] * w[tp, ell] * k
        assert cov[t * B + b, tp * B + bp] == pytest.approx(expected, rel=1e-12)
    assert np.allclose(cov, cov.T) and np.linalg.eigvalsh(cov).min() > -1e-10


def test_one_target_one_process_is_the_single_target_prior(buckets):
    phi, sizes = jnp.asarray(buckets.phi), jnp.asarray(buckets.sizes)
    B = phi.shape[0]
    params = {"alpha": jnp.array([1.7]), "beta": jnp.array([0.6]),
              "weights": jnp.array([[1.3]]), "sigma2": 0.1}
    seeded = handlers.seed(handlers.substitute(coregional_model, data=params), rng_seed=0)
    trace = handlers.trace(seeded).get_trace(phi, sizes, 1, jnp.zeros(B, int), jnp.arange(B),
                                             None, n_latent=1)
    loc, cov, noise = gaussian_prior(bucket_gp_model, phi, sizes,
                                     {"alpha": 1.7 * 1.3**2, "beta": 0.6, "sigma2": 0.1})
    np.testing.assert_allclose(trace["theta"]["fn"].loc, loc)
    np.testing.assert_allclose(trace["theta"]["fn"].covariance_matrix, cov, atol=1e-12)
    np.testing.assert_allclose(trace["s"]["fn"].scale ** 2, noise)


def test_model_log_density_with_observations(buckets):
    phi, sizes = jnp.asarray(buckets.phi), jnp.asarray(buckets.sizes)
    B = phi.shape[0]
    theta = jnp.full(2 * B, 0.5)
    params = {"alpha": jnp.ones(2), "beta": jnp.ones(2), "weights": jnp.full((2, 2), 0.5),
              "sigma2": jnp.asarray(0.1), "theta": theta}
    obs_t, obs_b, obs = jnp.array([0, 1, 1]), jnp.array([0, 0, 3]), jnp.array([1.0, 0.0, 1.0])
    lp, _ = log_density(coregional_model, (phi, sizes, 2, obs_t, obs_b, obs), {}, params)
    # the observation term by hand: N(s | θ^t_b, N_b σ²)
    var = np.asarray(sizes)[np.asarray(obs_b)] * 0.1
    by_hand = np.sum(-0.5 * (np.asarray(obs) - 0.5) ** 2 / var - 0.5 * np.log(2 * np.pi * var))
    prior_only, _ = log_density(coregional_model, (phi, sizes, 2), {}, params)
    assert float(lp) - float(prior_only) == pytest.approx(by_hand, rel=1e-10)
