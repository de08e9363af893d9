"""Exact multi-target inference against dense Gaussian conditioning."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.inference.exact import ExactBucketGP, predict, rank1_observe, with_covariance
from bayeval.inference.joint import (
    joint_compact,
    joint_covariance,
    joint_state,
)
from bayeval.inference.joint import joint_observe as _joint_observe
from bayeval.inference.joint import joint_predict as _joint_predict

# compiled once per shape: eager dispatch of every small op would dominate these tests
joint_observe = jax.jit(_joint_observe)
joint_predict = jax.jit(_joint_predict)

PARAMS = {"alpha": [1.0, 0.7], "beta": [1.5, 0.8], "weights": [[0.9, 0.2], [0.6, -0.5],
                                                               [0.1, 0.8]], "sigma2": 0.05}


def test_joint_posterior_matches_dense_conditioning(ref):
    T, N = 3, ref.shape[1]
    state = joint_state(ref, T, PARAMS, pending=2)
    B = state.sizes.shape[0]
    # brute force over all T·N (target, item) scores: s = H θ + ε
    H = np.zeros((T * N, T * B))
    b = np.asarray(state.item_bucket)
    for t in range(T):
        H[t * N + np.arange(N), t * B + b] = 1.0
    cov0 = np.asarray(joint_covariance(state))
    mu = H @ np.asarray(state.mu)
    cov = H @ cov0 @ H.T + np.diag(np.tile(np.asarray(state.sizes)[b] * 0.05, T))
    rng = np.random.default_rng(0)
    pairs = [(int(rng.integers(T)), int(rng.integers(N))) for _ in range(40)]
    pairs = list(dict.fromkeys(pairs))[:12]
    scores = rng.random(len(pairs))
    for n, ((t, i), s) in enumerate(zip(pairs, scores, strict=True), start=1):
        state = joint_observe(state, t, i, s)
        if n % 2 == 0:
            state = joint_compact(state)
        o = np.array([tt * N + ii for tt, ii in pairs[:n]])
        u = np.setdiff1d(np.arange(T * N), o)
        gain = cov[np.ix_(u, o)] @ np.linalg.inv(cov[np.ix_(o, o)])
        mu_u = mu[u] + gain @ (scores[:n] - mu[o])
        cov_u = cov[np.ix_(u, u)] - gain @ cov[np.ix_(o, u)]
        pred = joint_predict(state)
        for t in range(T):
            mine = (u // N) == t
            seen = [s for (tt, _), s in zip(pairs[:n], scores, strict=False) if tt == t]
            assert float(pred.mean[t]) == pytest.approx((sum(seen) + mu_u[mine].sum()) / N,
                                                        abs=1e-9)
            block = cov_u[np.ix_(mine, mine)]
            assert float(pred.var[t]) == pytest.approx(block.sum() / N**2, abs=1e-9)
            items = u[mine] % N
            np.testing.assert_allclose(np.asarray(pred.item_cov[t])[items], block.sum(0) / N,
                                       atol=1e-9)
            np.testing.assert_allclose(np.asarray(pred.item_var[t])[items], np.diag(block),
                                       atol=1e-9)


def test_one_target_is_the_single_target_posterior(ref):
    joint = joint_state(ref, 1, {"alpha": [2.0], "beta": [0.5], "weights": [[1.0]],
                                 "sigma2": 1e-4}, n_latent=1)
    factory = ExactBucketGP(refit_every=0, sigma2=1e-4)
    single = factory.init(ref, ref.shape[1])  # α = β = 1: set the prior at α = 2, β = 0.5
    mu0, cov0, noise = factory.prior(single.phi, single.sizes, jnp.log(jnp.array([2.0, 0.5])),
                                     1e-4)
    single = with_covariance(single._replace(noise=noise), mu0, cov0)
    for i, s in ((3, 1.0), (7, 0.0), (9, 1.0), (0, 1.0)):
        joint = joint_observe(joint, 0, i, s)
        single = rank1_observe(single, i, s)
    a, b = joint_predict(joint), predict(single)
    assert float(a.mean[0]) == pytest.approx(float(b.mean), abs=1e-10)
    assert float(a.var[0]) == pytest.approx(float(b.var), abs=1e-12)
    np.testing.assert_allclose(a.item_cov[0], b.item_cov, atol=1e-12)
    np.testing.assert_allclose(a.item_var[0], b.item_var, atol=1e-12)


def test_missed_compaction_poisons_the_joint_state(ref):
    state = joint_state(ref, 2, {**PARAMS, "weights": [[0.9, 0.2], [0.6, -0.5]]}, pending=1)
    state = joint_observe(state, 0, 1, 1.0)
    assert np.isnan(np.asarray(joint_observe(state, 1, 1, 0.0).mu)).all()
    assert np.isfinite(np.asarray(joint_observe(joint_compact(state), 1, 1, 0.0).mu)).all()


def _observe_from_model(ref, T, params, n_obs, seed):
    """A state with n_obs scores drawn from the model at ``params`` (θ from the prior)."""
    state = joint_state(ref, T, params, pending=64)
    rng = np.random.default_rng(seed)
    cov = np.asarray(joint_covariance(state))
    theta = rng.multivariate_normal(np.asarray(state.mu), cov)
    N, B = ref.shape[1], state.sizes.shape[0]
    b = np.asarray(state.item_bucket)
    pairs = [(t, i) for t in range(T) for i in range(N)]
    for k in rng.permutation(len(pairs))[:n_obs]:
        t, i = pairs[k]
        s = theta[t * B + b[i]] + rng.normal() * np.sqrt(state.sizes[b[i]] * params["sigma2"])
        state = joint_observe(state, t, i, s)
    return state


def test_joint_likelihood_is_the_item_level_marginal(ref):
    # against −log N(s_O | H μ, H Σ Hᵀ + D) by dense algebra, at two parameter settings:
    # the difference must be the same constant (terms free of the parameters)
    from bayeval.inference.joint import joint_negative_log_marginal

    T = 3
    state = _observe_from_model(ref, T, PARAMS, 20, 1)
    obs = np.argwhere(np.asarray(state.observed))
    s = np.asarray(state.scores)[obs[:, 0], obs[:, 1]]
    diffs = []
    for params in (PARAMS, {**PARAMS, "beta": [0.4, 2.5], "sigma2": 0.2}):
        prior = joint_state(ref, T, params)
        B = prior.sizes.shape[0]
        j = obs[:, 0] * B + np.asarray(prior.item_bucket)[obs[:, 1]]
        C = np.asarray(joint_covariance(prior))[np.ix_(j, j)] + np.diag(
            np.asarray(prior.noise)[j])
        r = s - np.asarray(prior.mu)[j]
        dense = 0.5 * r @ np.linalg.solve(C, r) + 0.5 * np.linalg.slogdet(C)[1]
        p = {k: jnp.asarray(v, jnp.float64) for k, v in params.items()}
        ours = joint_negative_log_marginal(state, p)
        # the same on the observed pairs gathered into 20 slots (J = 21, ≤ 20 observed)
        assert float(joint_negative_log_marginal(state, p, size=20)) == pytest.approx(
            float(ours), abs=1e-9)
        diffs.append(float(ours) - dense)
    assert diffs[0] == pytest.approx(diffs[1], abs=1e-8)


def test_adamw_refit_lowers_the_negative_log_marginal(ref):
    from bayeval.inference.joint import joint_negative_log_marginal, joint_refit

    T = 3
    state = _observe_from_model(ref, T, PARAMS, 24, 2)
    start = {"alpha": [1.0, 1.0], "beta": [1.0, 1.0], "sigma2": 0.1,
             "weights": np.random.default_rng(0).normal(0, 0.1, (T, 2))}
    fitted = joint_refit(state, start, steps=150, learning_rate=0.05)

    def nlml(p):
        return float(joint_negative_log_marginal(
            state, {k: jnp.asarray(v, jnp.float64) for k, v in p.items()}))

    assert nlml(fitted) < nlml(start) - 1.0
    assert np.all(np.asarray(fitted["alpha"]) > 0) and float(fitted["sigma2"]) > 0
