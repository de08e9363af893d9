"""Exact multi-target inference against dense Gaussian conditioning."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.inference.exact import ExactBucketGP, predict, rank1_observe, with_covariance
from bayeval.inference.joint import (
    joint_compact,
    joint_covariance,
    joint_observe,
    joint_predict,
    joint_state,
)

PARAMS = {"alpha": [1.0, 0.7], "beta": [1.5, 0.8], "weights": [[0.9, 0.2], [0.6, -0.5],
                                                               [0.1, 0.8]], "sigma2": 0.05}


@pytest.fixture(scope="module")
def ref():
    rng = np.random.default_rng(11)
    base = (rng.random((6, 7)) < 0.5).astype(float)
    return base[:, np.array([0, 1, 2, 3, 4, 5, 6, 0, 2, 2])]  # N = 10, sizes > 1


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
