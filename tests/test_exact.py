"""Exact bucket-GP inference against dense linear algebra and brute force."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest

from bayeval.acquisition import information_gain
from bayeval.inference.base import advance
from bayeval.inference.exact import (
    ExactBucketGP,
    compact,
    condition,
    gaussian_prior,
    negative_log_marginal,
    posterior_cov,
    predict,
    rank1_observe,
)
from bayeval.models.bucket_gp import bucket_gp_model, make_buckets


@pytest.fixture(scope="module")
def small_ref():
    # 6 reference models × 14 items, with repeated columns so that buckets have sizes > 1
    rng = np.random.default_rng(5)
    base = (rng.random((6, 8)) < 0.5).astype(float)
    cols = np.concatenate([np.arange(8), [0, 0, 3, 5, 5, 5]])
    return base[:, cols]


def _item_level_dense(state0, observed_items, scores):
    """Brute force: the joint Gaussian of all N item scores, s = H θ + ε, conditioned on
    the observed items by a dense solve."""
    b = np.asarray(state0.item_bucket)
    H = np.eye(len(state0.mu))[b]
    mu = H @ np.asarray(state0.mu)
    cov = H @ np.asarray(posterior_cov(state0)) @ H.T + np.diag(np.asarray(state0.noise)[b])
    o = np.array(observed_items)
    u = np.setdiff1d(np.arange(len(b)), o)
    gain = cov[np.ix_(u, o)] @ np.linalg.inv(cov[np.ix_(o, o)])
    mu_u = mu[u] + gain @ (scores - mu[o])
    cov_u = cov[np.ix_(u, u)] - gain @ cov[np.ix_(o, u)]
    return u, mu_u, cov_u


def test_buckets(small_ref):
    buckets = make_buckets(small_ref)
    assert buckets.n_buckets == 8 and buckets.n_items == 14
    assert list(buckets.sizes) == [3, 1, 1, 2, 1, 4, 1, 1]
    np.testing.assert_array_equal(buckets.phi[buckets.item_bucket], small_ref.T)


def test_prior_is_read_from_the_model(small_ref):
    factory = ExactBucketGP(refit_every=0)
    state = factory.init(small_ref, 14)
    phi, sizes = np.asarray(state.phi), np.asarray(state.sizes)
    d2 = ((phi[:, None] - phi[None]) ** 2).sum(-1) / phi.shape[1]
    np.testing.assert_allclose(posterior_cov(state), np.exp(-d2) + 1e-8 * np.eye(8), atol=1e-12)
    np.testing.assert_allclose(state.mu, phi.mean(1), atol=1e-12)
    # B = 8 ≥ N − N0 = 4: nearly unique reference vectors, σ² = 1e-4
    np.testing.assert_allclose(state.noise, sizes * 1e-4)
    assert bool(state.nearly_unique)
    # a custom prior mean and a different α flow through without touching the backend
    custom = ExactBucketGP(refit_every=0, mean=lambda p: jnp.full(p.shape[0], 0.3))
    loc, cov, _ = custom.prior(jnp.asarray(phi), jnp.asarray(sizes), jnp.log(jnp.array([2.0, 1.0])),
                               0.1)
    np.testing.assert_allclose(loc, 0.3)
    np.testing.assert_allclose(cov, 2 * np.exp(-d2) + 1e-8 * np.eye(8), atol=1e-12)


def test_rank1_matches_dense_conditioning(small_ref):
    factory = ExactBucketGP(refit_every=0)
    state0 = factory.init(small_ref, 14)
    rng = np.random.default_rng(0)
    order = rng.permutation(14)
    scores = rng.random(14)
    state = state0
    for t, j in enumerate(order[:10], start=1):
        state = rank1_observe(state, j, scores[j])
        # (1) bucket posterior vs dense conditioning on the bucket means
        mu, cov = condition(state0.mu, posterior_cov(state0), state0.noise, state.count,
                            state.total)
        np.testing.assert_allclose(state.mu, mu, atol=1e-8)
        np.testing.assert_allclose(posterior_cov(state), cov, atol=1e-8)
        # the carried Σ m and diag Σ equal the materialised ones
        np.testing.assert_allclose(state.cov_m, cov @ np.asarray(state.remaining), atol=1e-10)
        np.testing.assert_allclose(state.cov_diag, np.diag(cov), atol=1e-10)
        # (2) E[R|C], Var(R|C), Cov(R, s_i|C), Var(s_i|C) vs item-level brute force
        u, mu_u, cov_u = _item_level_dense(state0, order[:t], scores[order[:t]])
        pred = predict(state)
        n = 14
        assert float(pred.mean) == pytest.approx((scores[order[:t]].sum() + mu_u.sum()) / n,
                                                 abs=1e-8)
        assert float(pred.var) == pytest.approx(cov_u.sum() / n**2, abs=1e-8)
        np.testing.assert_allclose(np.asarray(pred.item_cov)[u], cov_u.sum(0) / n, atol=1e-8)
        np.testing.assert_allclose(np.asarray(pred.item_var)[u], np.diag(cov_u), atol=1e-8)
        # (3) IG vs −½ log(1 − ρ²) from the brute-force joint
        rho2 = (cov_u.sum(0) / n) ** 2 / (cov_u.sum() / n**2 * np.diag(cov_u))
        np.testing.assert_allclose(np.asarray(information_gain(pred))[u],
                                   -0.5 * np.log1p(-rho2), atol=1e-8)
        assert np.all(np.asarray(information_gain(pred))[order[:t]] == 0)


def test_information_gain_is_mutual_information(small_ref):
    # I(R; s_i) = H(R) − E H(R | s_i): for Gaussians ½ log(Var R / Var(R | s_i)).
    state = ExactBucketGP(refit_every=0).init(small_ref, 14)
    state = rank1_observe(state, 2, 1.0)
    pred = predict(state)
    ig = np.asarray(information_gain(pred))
    for i in (0, 5, 13):
        after = predict(rank1_observe(state, i, 0.0))
        var_R_given_si = float(after.var)  # Gaussian: does not depend on the value seen
        # observing s_i removes it from R's unknown part: Var(R|s_i) = Var(R) − c²/v
        c, v = float(pred.item_cov[i]), float(pred.item_var[i])
        assert float(pred.var) - c * c / v == pytest.approx(var_R_given_si, abs=1e-10)
        assert ig[i] == pytest.approx(0.5 * np.log(float(pred.var) / var_R_given_si), abs=1e-8)


def test_covariance_stays_symmetric_psd_after_10000_updates():
    # 60 buckets of 200 items each (N = 12 000); 10 000 rank-1 updates in one jitted scan.
    rng = np.random.default_rng(1)
    base = (rng.random((12, 60)) < 0.5).astype(float)
    ref = np.repeat(base, 200, axis=1)
    state0 = ExactBucketGP(refit_every=0, sigma2=1e-4).init(ref, ref.shape[1])
    order = jnp.asarray(rng.permutation(ref.shape[1])[:10_000])
    scores = jnp.asarray((rng.random(10_000) < 0.6).astype(float))

    backend = ExactBucketGP(refit_every=0).backend()

    def body(state, xs):
        n, item, score = xs
        state, info = advance(backend, rank1_observe(state, item, score), n, None)
        return state, info.compacted

    ns = jnp.arange(1, 10_001)
    # 9 999 = 312 · 32 + 15: the last 15 updates are still pending
    state, compacted = jax.lax.scan(body, state0, (ns[:-1], order[:-1], scores[:-1]))
    assert int(compacted.sum()) == 312  # every 32nd observation, reported as such
    assert int(state.n_pending) == 15
    state = rank1_observe(state, order[-1], scores[-1])
    cov = np.asarray(posterior_cov(state))
    assert np.array_equal(cov, cov.T)
    assert np.linalg.eigvalsh(cov).min() > -1e-12
    compacted = compact(state)
    assert np.array_equal(compacted.base, compacted.base.T)
    np.testing.assert_allclose(compacted.base, cov, atol=1e-14)
    mu, dense = condition(state0.mu, posterior_cov(state0), state0.noise, state.count,
                          state.total)
    np.testing.assert_allclose(cov, dense, atol=1e-9)
    np.testing.assert_allclose(state.mu, mu, atol=1e-8)


def test_refit_increases_marginal_likelihood(small_ref):
    factory = ExactBucketGP(refit_every=0)
    state = factory.init(small_ref, 14)
    rng = np.random.default_rng(2)
    for j in rng.permutation(14)[:9]:
        state = rank1_observe(state, j, float(rng.random() < 0.7))
    fitted, info = factory.refit(state, None)
    assert bool(info.refitted) and bool(info.accepted) and int(info.iterations) >= 1

    def nlml(lh):
        mu0, cov0, noise = factory.prior(state.phi, state.sizes, lh, 1e-4)
        return float(negative_log_marginal(cov0, noise, state.count, mu0, state.total))

    assert nlml(fitted.log_hyper) <= nlml(jnp.zeros(2)) + 1e-12
    # the optimum is a stationary point: no grid neighbour is better by more than 1e-6
    for d in ([0.05, 0], [-0.05, 0], [0, 0.05], [0, -0.05]):
        assert nlml(fitted.log_hyper) <= nlml(fitted.log_hyper + jnp.array(d)) + 1e-6
    mu0, cov0, noise = factory.prior(state.phi, state.sizes, fitted.log_hyper, 1e-4)
    mu, cov = condition(mu0, cov0, noise, state.count, state.total)
    np.testing.assert_allclose(fitted.mu, mu, atol=1e-12)
    np.testing.assert_allclose(posterior_cov(fitted), cov, atol=1e-12)
    assert int(fitted.n_pending) == 0


def test_model_runs_as_a_numpyro_program(small_ref):
    # the same program gives a log density under NumPyro, with a prior swapped for a
    # distribution — what an MCMC backend needs.
    from numpyro.infer.util import log_density

    buckets = make_buckets(small_ref)
    phi, sizes = jnp.asarray(buckets.phi), jnp.asarray(buckets.sizes)
    obs_b = jnp.asarray(buckets.item_bucket[:5])
    params = {"alpha": 1.0, "beta": 2.0, "theta": jnp.full(8, 0.5)}
    lp, _ = log_density(bucket_gp_model, (phi, sizes, obs_b, jnp.ones(5)),
                        {"alpha": dist.LogNormal(0.0, 1.0), "beta": 2.0}, params)
    assert np.isfinite(float(lp))
    loc, cov, noise = gaussian_prior(bucket_gp_model, phi, sizes,
                                     {"alpha": 1.0, "beta": 1.0, "sigma2": 0.1})
    assert loc.shape == (8,) and cov.shape == (8, 8) and noise.shape == (8,)


def test_missed_compaction_poisons_the_state(small_ref):
    state = ExactBucketGP(refit_every=0, pending=2).init(small_ref, 14)
    for item in (0, 1):
        state = rank1_observe(state, item, 1.0)
    assert np.isfinite(np.asarray(state.mu)).all()
    assert np.isnan(np.asarray(rank1_observe(state, 2, 1.0).mu)).all()
    # after the scheduled compaction the third update is exact again
    state = rank1_observe(compact(state), 2, 1.0)
    state0 = ExactBucketGP(refit_every=0).init(small_ref, 14)
    mu, cov = condition(state0.mu, posterior_cov(state0), state0.noise, state.count,
                        state.total)
    np.testing.assert_allclose(state.mu, mu, atol=1e-10)
    np.testing.assert_allclose(posterior_cov(state), cov, atol=1e-10)


def test_refit_on_observed_buckets_equals_full_refit():
    # B = 100 buckets, 40 observed: the re-fit runs on a 64-slot subsystem; it must give
    # the same optimum and posterior as the fit over all B buckets with masking.
    rng = np.random.default_rng(3)
    ref = (rng.random((9, 100)) < 0.5).astype(float)
    ref[0] = np.arange(100) / 100  # all columns distinct
    fast, full = ExactBucketGP(refit_every=0), ExactBucketGP(refit_every=0, marginal_fit=False)
    state = fast.init(ref, 100)
    for j in rng.permutation(100)[:40]:
        state = rank1_observe(state, j, float(rng.random() < 0.5))
    (a, _), (b, _) = jax.jit(fast.refit)(state, None), jax.jit(full.refit)(state, None)
    np.testing.assert_allclose(a.log_hyper, b.log_hyper, atol=1e-6)
    np.testing.assert_allclose(a.mu, b.mu, atol=1e-8)
    np.testing.assert_allclose(posterior_cov(a), posterior_cov(b), atol=1e-8)
    assert not np.allclose(a.log_hyper, 0.0)


def test_gaussian_nll_gradient_matches_autodiff():
    from bayeval.inference.exact import gaussian_nll

    rng = np.random.default_rng(4)
    X = rng.normal(size=(7, 7))
    A, r = jnp.asarray(X @ X.T + 7 * np.eye(7)), jnp.asarray(rng.normal(size=7))

    def plain(A, r):  # differentiated through the factorisation by JAX
        L = jnp.linalg.cholesky(A)
        z = jax.scipy.linalg.solve_triangular(L, r, lower=True)
        return 0.5 * z @ z + jnp.sum(jnp.log(jnp.diag(L)))

    An, rn = np.asarray(A), np.asarray(r)
    dense = float(0.5 * rn @ np.linalg.solve(An, rn) + 0.5 * np.linalg.slogdet(An)[1])
    assert float(gaussian_nll(A, r)) == pytest.approx(dense, abs=1e-12)
    # through a symmetric parametrisation A(t) = A + t (E + Eᵀ), as the prior builds it
    E = jnp.asarray(rng.normal(size=(7, 7)))
    ours = jax.grad(lambda t: gaussian_nll(A + t * (E + E.T), r * (1 + t)))(0.1)
    ref = jax.grad(lambda t: plain(A + t * (E + E.T), r * (1 + t)))(0.1)
    assert float(ours) == pytest.approx(float(ref), rel=1e-10)


def test_padded_buckets_change_nothing(small_ref):
    plain, padded = ExactBucketGP(refit_every=0), ExactBucketGP(refit_every=0,
                                                                bucket_capacity=13)
    a, b = plain.init(small_ref, 14), padded.init(small_ref, 14)
    assert b.mu.shape == (13,) and bool(a.nearly_unique) == bool(b.nearly_unique)
    for j, s in ((3, 1.0), (9, 0.0), (0, 1.0), (12, 1.0)):
        a, b = rank1_observe(a, j, s), rank1_observe(b, j, s)
    pa, pb = predict(a), predict(b)
    for x, y in zip(pa, pb, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-12)
    (fa, _), (fb, _) = plain.refit(a, None), padded.refit(b, None)
    np.testing.assert_allclose(fa.log_hyper, fb.log_hyper, atol=1e-8)
    np.testing.assert_allclose(predict(fa).mean, predict(fb).mean, atol=1e-10)
    with pytest.raises(ValueError, match="bucket_capacity"):
        ExactBucketGP(bucket_capacity=5).init(small_ref, 14)


def test_refit_on_a_random_subset_still_conditions_on_everything():
    rng = np.random.default_rng(3)
    ref = (rng.random((9, 100)) < 0.5).astype(float)
    ref[0] = np.arange(100) / 100
    factory = ExactBucketGP(refit_every=0, fit_buckets=16)
    state = factory.init(ref, 100)
    for j in rng.permutation(100)[:40]:
        state = rank1_observe(state, j, float(rng.random() < 0.5))
    refit = jax.jit(factory.refit)
    a, b, c = (refit(state, jax.random.key(k))[0] for k in (0, 0, 1))
    np.testing.assert_array_equal(a.log_hyper, b.log_hyper)  # the key decides the subset
    assert not np.allclose(a.log_hyper, c.log_hyper)
    # the posterior conditions on all 40 observations at the fitted (α, β)
    mu0, cov0, noise = factory.prior(state.phi, state.sizes, a.log_hyper, 1e-4)
    mu, cov = condition(mu0, cov0, noise, state.count, state.total)
    np.testing.assert_allclose(a.mu, mu, atol=1e-8)
    np.testing.assert_allclose(posterior_cov(a), cov, atol=1e-8)


def test_a_failed_refit_is_reported_and_keeps_the_hyperparameters(fragile_refit):
    # the re-fit must be refused and said so, the hyperparameters kept
    fragile, ref = fragile_refit
    rng = np.random.default_rng(4)
    factory = ExactBucketGP(refit_every=0, kernel=fragile)
    state = factory.init(ref, 100)
    for j in rng.permutation(100)[:40]:
        state = rank1_observe(state, j, float(rng.random() < 0.5))
    fitted, info = factory.refit(state, None)
    assert bool(info.refitted) and not bool(info.accepted)
    np.testing.assert_array_equal(fitted.log_hyper, state.log_hyper)
    assert np.all(np.isfinite(np.asarray(predict(fitted).item_mean)))
