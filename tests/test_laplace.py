"""Laplace inference for the bucket GP: the Gaussian case equals the exact backend, the
mode and covariance satisfy their defining equations (dense linear algebra), moments
match Monte Carlo, Laplace and NUTS agree on real data, and 90% intervals cover over 50
datasets simulated from each likelihood."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.inference.bucket_mcmc import bucket_gp_nuts
from bayeval.inference.exact import ExactBucketGP, negative_log_marginal
from bayeval.inference.exact import predict as exact_predict
from bayeval.inference.laplace import (
    LIKELIHOOD,
    LaplaceBucketGP,
    laplace_evidence,
    laplace_posterior,
)
from bayeval.loop.simulate import simulate
from bayeval.methods import bayesame_laplace


def _observe_all(backend, state, items, scores):
    items, scores = jnp.asarray(items), jnp.asarray(scores)

    def body(i, s):
        return backend.observe(s, items[i], scores[i])

    return jax.lax.fori_loop(0, items.shape[0], body, state)


def _posterior(laplace, ref, items, scores, relinearise=True):
    """The state after observing ``scores`` of ``items`` (one compiled program); with
    ``relinearise``, the full Laplace posterior (Newton converges to the same mode from
    any start)."""
    state = laplace.init(ref, ref.shape[1])

    def run(state):
        state = _observe_all(laplace, state, items, scores)
        return laplace.relinearise(state) if relinearise else state

    return jax.jit(run)(state)


@pytest.fixture(scope="module")
def case(ifeval):
    """A small real case: 20 IFEval reference models, 40 items, 15 scores of a held-out
    model observed."""
    rng = np.random.default_rng(0)
    ref, target = ifeval.scores[:20, :40], ifeval.scores[300, :40]
    items = rng.permutation(40)[:15]
    return ref, target, items


def test_gaussian_likelihood_equals_the_exact_backend(case):
    ref, target, items = case
    laplace = LaplaceBucketGP("gaussian", refit_every=0)
    exact = ExactBucketGP(refit_every=0)
    s_l = _posterior(laplace, ref, items, target[items], relinearise=False)
    state = jax.jit(lambda s: _observe_all(exact.backend(), s, items, target[items]))(
        exact.init(ref, 40))
    p_l, p_e = laplace.predict(s_l), exact_predict(state)
    for field in ("mean", "var", "item_mean", "item_var", "item_cov"):
        np.testing.assert_allclose(getattr(p_l, field), getattr(p_e, field), rtol=1e-8,
                                   atol=1e-12, err_msg=field)
    # the full Newton fit from the prior mean lands on the same posterior (one step)
    full = laplace.relinearise(s_l._replace(mode=s_l.prior_mean))
    np.testing.assert_allclose(full.mode, s_l.mode, atol=1e-10)
    np.testing.assert_allclose(full.cov, s_l.cov, atol=1e-10)
    # Laplace evidence of a Gaussian likelihood is the exact marginal likelihood, up to a
    # constant free of (α, β): differences between two settings agree
    gauss = LIKELIHOOD["gaussian"]

    def both(log_hyper):
        mu, K, noise = laplace.prior(s_l.phi, s_l.sizes, log_hyper, 0.1)
        ev = laplace_evidence(gauss, mu, K, s_l.count, s_l.total, noise, mu)
        return ev, -negative_log_marginal(K, noise, s_l.count, mu, s_l.total)

    (ev1, ml1), (ev2, ml2) = both(jnp.zeros(2)), both(jnp.asarray([0.7, -0.4]))
    assert float(ev1 - ev2) == pytest.approx(float(ml1 - ml2), rel=1e-8)


def test_bernoulli_mode_covariance_and_moments(case):
    ref, target, items = case
    laplace = LaplaceBucketGP("bernoulli", refit_every=0)
    state = _posterior(laplace, ref, items, target[items])
    f, V = np.asarray(state.mode), np.asarray(state.cov)
    K, mu = np.asarray(state.prior_cov), np.asarray(state.prior_mean)
    count, total = np.asarray(state.count), np.asarray(state.total)
    p = 1 / (1 + np.exp(-f))
    # the mode: ∇ log p(y|f) − K⁻¹(f − μ) = 0; the covariance: (K⁻¹ + W)⁻¹, both dense
    grad = total - count * p - np.linalg.solve(K, f - mu)
    assert np.max(np.abs(grad)) < 1e-6
    dense = np.linalg.inv(np.linalg.inv(K) + np.diag(count * p * (1 - p)))
    np.testing.assert_allclose(V, dense, atol=1e-6 * np.abs(dense).max())
    # online steps without re-linearisation stay close to the full Laplace posterior
    s_on = _posterior(laplace, ref, items, target[items], relinearise=False)
    assert abs(float(laplace.predict(s_on).mean - laplace.predict(state).mean)) < 0.01
    # moments against Monte Carlo over f ~ N(f̂, V): E[R|C] and E[s_i|C] are quadratures
    # (exact up to MC error, 4e5 draws: se < 5e-4), Var(R|C) linearises the cross-bucket
    # covariances of σ(f) (within 5% here)
    pred = laplace.predict(state)
    draws = np.random.default_rng(1).multivariate_normal(f, V, size=400_000)
    q = 1 / (1 + np.exp(-draws))
    m = np.asarray(state.remaining)
    seen = float(np.asarray(target[items]).sum())  # the observed scores
    r = (seen + q @ m) / 40
    noise = (q * (1 - q)).mean(0) @ m / 40**2
    assert float(pred.mean) == pytest.approx(r.mean(), abs=2e-3)
    assert float(pred.var) == pytest.approx(r.var() + noise, rel=0.05)
    b = np.asarray(state.item_bucket)
    unobserved = ~np.asarray(state.observed)
    np.testing.assert_allclose(np.asarray(pred.item_mean)[unobserved],
                               q.mean(0)[b][unobserved], atol=3e-3)


def test_laplace_mcmc_and_exact_agree_on_real_data(case):
    ref, target, items = case
    nuts = {"num_warmup": 200, "num_samples": 400, "num_chains": 4, "seed": 0}
    for likelihood in ("bernoulli", "gaussian"):
        laplace = LaplaceBucketGP(likelihood, refit_every=0)
        state = _posterior(laplace, ref, items, target[items])
        p_l = laplace.predict(state)
        result, p_m = bucket_gp_nuts(ref, items, target[items], likelihood, **nuts)
        # short chains for a unit test: no divergences, R-hat below 1.02 (bayeval
        # diagnose's real case meets 1.01)
        assert result.divergences == 0 and result.diagnostics.r_hat.max() < 1.02
        # the tolerance: E[R|C] within 0.01 (here ~0.005 for Bernoulli, where
        # Laplace is an approximation; the Gaussian case differs by MC error only)
        assert abs(float(p_l.mean - p_m.mean)) < 0.01, likelihood
        assert float(p_m.var) == pytest.approx(float(p_l.var), rel=0.15)
        # information gain inputs from draws and from the Gaussian approximation agree
        unobserved = ~np.asarray(state.observed)
        corr = np.corrcoef(np.asarray(p_l.item_cov)[unobserved],
                           np.asarray(p_m.item_cov)[unobserved])[0, 1]
        assert corr > 0.95, (likelihood, corr)
        if likelihood == "gaussian":
            exact = ExactBucketGP(refit_every=0)
            backend = exact.backend()
            s_e = jax.jit(lambda s, b=backend: _observe_all(b, s, items, target[items]))(
                exact.init(ref, 40))
            assert float(exact_predict(s_e).mean) == pytest.approx(float(p_l.mean), abs=1e-9)


@pytest.mark.parametrize("likelihood", ["bernoulli", "logit_normal", "gaussian"])
def test_interval_coverage_on_simulated_data(likelihood, ifeval):
    # 60 datasets drawn from the model itself (prior at α = β = 1 over the buckets of 20
    # IFEval reference models × 30 items; each dataset its own latent f, scores and 12
    # observed items). The 90% intervals of every bucket's latent f_b and of R must cover
    # at the nominal rate; the band [0.8, 0.97] (f pooled over ~1700 intervals, R
    # over 60: binomial sd 0.039, so the band is −2.6σ/+1.8σ; fixed seeds).
    ref = ifeval.scores[20:40, 100:130]
    n_items, n_obs, n_sets = 30, 12, 60
    laplace = LaplaceBucketGP(likelihood, refit_every=0, relinearise_every=1)
    state0 = laplace.init(ref, n_items)
    rng = np.random.default_rng(5)
    f = rng.multivariate_normal(np.asarray(state0.prior_mean), np.asarray(state0.prior_cov),
                                size=n_sets)
    item_f = f[:, np.asarray(state0.item_bucket)]
    noise = np.asarray(state0.noise)[np.asarray(state0.item_bucket)]
    if likelihood == "bernoulli":
        scores = (rng.random(item_f.shape) < 1 / (1 + np.exp(-item_f))).astype(float)
    elif likelihood == "logit_normal":
        scores = 1 / (1 + np.exp(-(item_f + np.sqrt(noise) * rng.normal(size=item_f.shape))))
    else:
        scores = item_f + np.sqrt(noise) * rng.normal(size=item_f.shape)
    items = np.stack([rng.permutation(n_items)[:n_obs] for _ in range(n_sets)])

    @jax.jit
    @jax.vmap
    def posterior(items, row):
        state = _observe_all(laplace, state0, items, row[items])
        state = laplace.relinearise(state)
        return state.mode, jnp.diag(state.cov), laplace.predict(state)

    mode, var, pred = posterior(jnp.asarray(items), jnp.asarray(scores))
    half = 1.6449 * np.sqrt(np.asarray(var))
    hit_f = np.abs(f - np.asarray(mode)) <= half
    truth = scores.mean(axis=1)
    hit_r = np.abs(truth - np.asarray(pred.mean)) <= 1.6449 * np.sqrt(np.asarray(pred.var))
    assert 0.8 <= hit_f.mean() <= 0.97, (likelihood, hit_f.mean())
    assert 0.8 <= hit_r.mean() <= 0.97, (likelihood, hit_r.mean())


def test_method_runs_in_the_engine_and_refits(ifeval):
    # 8 items, re-linearised every 2 observations (re-fits are checked below, on their
    # own, to compile them once); after all 8 the estimate is the true score and the
    # variance 0
    ref, targets = ifeval.scores[:12, :8], ifeval.scores[100:102, :8]
    method = bayesame_laplace(refit_every=0, relinearise_every=2)
    result = simulate(method, ref, targets, [0, 1])
    assert np.isfinite(result.estimate).all() and (result.var >= 0).all()
    np.testing.assert_allclose(result.estimate[:, -1], targets.mean(1), atol=1e-12)
    np.testing.assert_allclose(result.var[:, -1], 0.0, atol=1e-15)
    assert sorted(result.items[0]) == list(range(8))
    laplace = LaplaceBucketGP("bernoulli")
    state = _posterior(laplace, ref, np.arange(4), targets[0, :4])
    fitted, info = jax.jit(laplace.refit)(state, jax.random.key(0))
    assert bool(info.refitted) and bool(info.accepted)
    lik = LIKELIHOOD["bernoulli"]

    def evidence(s):
        seen = np.asarray(s.count) > 0
        K = np.asarray(s.prior_cov)[np.ix_(seen, seen)]
        return float(laplace_evidence(lik, s.prior_mean[seen], jnp.asarray(K),
                                      s.count[seen], s.total[seen], s.noise[seen],
                                      s.mode[seen], steps=30))

    assert evidence(fitted) >= evidence(state) - 1e-9  # the re-fit does not lower it
    mode, _ = laplace_posterior(lik, fitted.prior_mean, fitted.prior_mean, fitted.prior_cov,
                                fitted.count, fitted.total, fitted.noise)
    np.testing.assert_allclose(fitted.mode, mode, atol=1e-7)
