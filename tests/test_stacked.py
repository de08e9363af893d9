"""The stacked predictor (bayeval.inference.stacked) against independent references: its
start is the difficulty model, its stack posterior the dense Gaussian algebra on features
taken before each score, its linearised variance a Monte Carlo over the posterior; it
learns a reference model's twin.
tests/test_engine.py runs it in the Session and the simulator."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

from bayeval.inference.difficulty import CalibratedDifficulty
from bayeval.inference.factor_laplace import FactorLaplace
from bayeval.inference.stacked import LOGIT_CLIP, StackedDifficulty


@pytest.fixture(scope="module")
def world() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A reference of 20 models × 60 items from a two-factor logistic model (a few entries
    missing), a target that is reference model 3 with 5% of its scores flipped, and a
    target drawn afresh from the same model."""
    rng = np.random.default_rng(8)
    logits = rng.normal(0, 1.5, (21, 2)) @ rng.normal(0, 1.2, (2, 60)) + rng.normal(0, 1, 60)
    scores = (rng.random((21, 60)) < special.expit(logits)).astype(float)
    reference, fresh = scores[:20], scores[20]
    target = reference[3].copy()
    flip = rng.random(60) < 0.05
    target[flip] = 1.0 - target[flip]
    reference[rng.random(reference.shape) < 0.03] = np.nan
    reference[3] = np.where(np.isnan(reference[3]), target, reference[3])
    return reference, target, fresh


def test_before_any_score_the_stack_is_the_difficulty_model(world):
    reference, _, _ = world
    stacked = StackedDifficulty(components=2)
    p = stacked.predict(stacked.init(reference, 60)).item_mean
    base = CalibratedDifficulty(2)
    p_d = FactorLaplace.predict(base.init(reference, 60)).item_mean
    inside = (p_d > LOGIT_CLIP) & (p_d < 1 - LOGIT_CLIP)
    assert inside.sum() > 50
    np.testing.assert_allclose(p[inside], p_d[inside], rtol=1e-12, atol=1e-14)


def test_stack_posterior_is_the_gaussian_algebra_on_features_before_each_score(world):
    # a NumPy transcription: p^s from the softmax of mean agreements, p^d from the
    # difficulty model's own state before the score, then one Newton step of the logistic
    # log-posterior from ĉ with the precision updated densely, Σ = (Σ⁻¹ + w x xᵀ)⁻¹
    reference, target, _ = world
    stacked = StackedDifficulty(components=2, temperature=30.0, prior_items=20.0,
                                prior_sd=0.5)
    state = stacked.init(reference, 60)
    filled = np.where(np.isnan(reference), np.nanmean(reference, axis=0), reference)
    mean, cov = np.array([0.0, 1.0, 0.0]), 0.25 * np.eye(3)
    agreement, count = np.zeros(20), 0
    base = CalibratedDifficulty(2).init(reference, 60)
    for item in np.random.default_rng(1).permutation(60)[:25]:
        p_d = float(FactorLaplace.predict(base).item_mean[item])
        w = np.exp(30.0 * agreement / (count + 20.0))
        p_s = float((w / w.sum()) @ filled[:, item])
        x = np.array([1.0, *special.logit(np.clip([p_d, p_s], LOGIT_CLIP, 1 - LOGIT_CLIP))])
        p = special.expit(x @ mean)
        cov = np.linalg.inv(np.linalg.inv(cov) + p * (1 - p) * np.outer(x, x))
        mean = mean + cov @ x * (target[item] - p)
        agreement += 1.0 - np.abs(filled[:, item] - target[item])
        count += 1
        base = FactorLaplace.observe(base, item, target[item])
        state = stacked.observe(state, item, target[item])
    np.testing.assert_allclose(state.mean, mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(state.cov, cov, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(state.agreement, agreement, rtol=1e-12)


def test_it_learns_a_reference_models_twin(world):
    # the target is reference model 3 with 5% flipped: after 30 scores the similarity
    # weights sit on model 3 and the stack leans on them, so the unseen items are predicted
    # far better than by the difficulty model alone: a Brier score at most 0.7 of its
    # (0.060 against 0.104 on this world; the 5% flips alone would give ≈ 0.05)
    reference, target, _ = world
    order = np.random.default_rng(2).permutation(60)
    seen, unseen = order[:30], order[30:]
    stacked = StackedDifficulty(components=2)
    state = stacked.init(reference, 60)
    base = CalibratedDifficulty(2).init(reference, 60)
    for item in seen:
        state = stacked.observe(state, item, target[item])
        base = FactorLaplace.observe(base, item, target[item])
    brier_stacked = np.mean((stacked.predict(state).item_mean[unseen] - target[unseen]) ** 2)
    brier_base = np.mean((FactorLaplace.predict(base).item_mean[unseen] - target[unseen]) ** 2)
    assert brier_stacked <= 0.7 * brier_base, (brier_stacked, brier_base)
    assert float(state.mean[2]) > 0.5  # the weight on p^s grew from its prior mean 0


def test_linearised_variance_of_the_score_matches_monte_carlo(world):
    # R = mean_i σ(cᵀ x_i(u)) with c ~ N(ĉ, Σ_c) and u ~ N(û, Σ_u) independent, p^s fixed:
    # the delta method's Var(R) against 40 000 draws. The delta method is first order: on
    # this world after all 60 scores it is 7% above the Monte Carlo value (the sigmoid's
    # curvature over the posterior's spread), so the formula is checked with both
    # covariances shrunk 100-fold, where the curvature term is ~0.1% and the tolerance 3%
    # is four times the Monte Carlo error of a variance from 40 000 draws (~0.7%)
    reference, _, target = world
    stacked = StackedDifficulty(components=2)
    state = stacked.init(reference, 60)
    for item in np.random.default_rng(3).permutation(60):
        state = stacked.observe(state, item, target[item])
    post = state.difficulty.posterior
    state = state._replace(cov=0.01 * state.cov, difficulty=state.difficulty._replace(
        posterior=post._replace(cov=0.01 * post.cov)))
    var = float(stacked.predict(state).var)
    x = stacked.features(state)
    v = state.difficulty.item_factors
    key_c, key_u = jax.random.split(jax.random.key(0))
    cs = jax.random.multivariate_normal(key_c, state.mean, state.cov, (40_000,))
    us = jax.random.multivariate_normal(key_u, post.mean, 0.01 * post.cov, (40_000,))
    p_d = jnp.clip(jax.nn.sigmoid(us @ v.T), LOGIT_CLIP, 1 - LOGIT_CLIP)
    logit_d = jnp.log(p_d) - jnp.log1p(-p_d)
    r = jnp.mean(jax.nn.sigmoid(cs[:, :1] + cs[:, 1:2] * logit_d + cs[:, 2:3] * x[:, 2]),
                 axis=1)
    assert var == pytest.approx(float(jnp.var(r)), rel=0.03)
