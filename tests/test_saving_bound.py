"""The saving ceiling (bayeval.experiments.saving_bound) against independent references:
the Poisson-sampling variance against enumeration of every sample, the Godambe–Joshi
inclusion probabilities against a numerical minimiser, the item count against a scan."""

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize

from bayeval.estimators.interval import z_value
from bayeval.experiments.saving_bound import (
    NOMINAL,
    difficulty_predictor,
    godambe_joshi_variance,
    inclusion_probabilities,
    items_for_width,
    poisson_variance,
    policy_variance,
    target_items,
)


def test_poisson_variance_equals_enumeration_of_every_sample():
    rng = np.random.default_rng(3)
    n = 8
    scores = rng.integers(0, 2, n).astype(float)
    p = rng.uniform(0.05, 0.95, n)  # a wrong predictor: the variance holds for any
    pi = rng.uniform(0.1, 1.0, n)
    mean, second = 0.0, 0.0
    for sample in itertools.product((0, 1), repeat=n):
        s = np.array(sample, bool)
        prob = np.prod(np.where(s, pi, 1.0 - pi))
        estimate = (p.sum() + np.sum((scores[s] - p[s]) / pi[s])) / n
        mean += prob * estimate
        second += prob * estimate**2
    assert mean == pytest.approx(scores.mean(), abs=1e-12)  # design-unbiased
    assert second - mean**2 == pytest.approx(poisson_variance(pi, (scores - p) ** 2),
                                             rel=1e-10)


@pytest.mark.parametrize("n", [1.5, 4.0, 7.0])
def test_inclusion_probabilities_minimise_the_bound(n):
    rng = np.random.default_rng(5)
    sigma2 = rng.uniform(0.001, 0.25, 9) * np.r_[1.0, 1.0, 30.0, np.ones(6)] / 30.0
    pi = inclusion_probabilities(np.sqrt(sigma2), n)
    assert pi.sum() == pytest.approx(n, rel=1e-12)
    assert np.all((pi > 0) & (pi <= 1.0 + 1e-12))
    # an independent reference: SLSQP on Σ σ²/π subject to Σ π = n, 0 < π ≤ 1
    result = minimize(lambda x: np.sum(sigma2 / x), np.full(9, n / 9),
                      constraints=[{"type": "eq", "fun": lambda x: x.sum() - n}],
                      bounds=[(1e-6, 1.0)] * 9, method="SLSQP",
                      options={"ftol": 1e-14, "maxiter": 500})
    assert result.success
    assert np.sum(sigma2 / pi) <= result.fun * (1 + 1e-8)
    np.testing.assert_allclose(pi, result.x, atol=1e-4)
    # the bound is below the variance of every other design with the same expected size
    for _ in range(20):
        other = inclusion_probabilities(rng.uniform(0.1, 1.0, 9), n)
        assert godambe_joshi_variance(sigma2, n) <= poisson_variance(other, sigma2) + 1e-15


def test_policy_design_with_calibrated_residuals_is_above_the_bound():
    rng = np.random.default_rng(7)
    p = rng.uniform(0.01, 0.99, 50)
    sigma2 = p * (1 - p)
    for n in (5, 20, 45):
        # expected residual² of a calibrated predictor is σ²: the policy's design is
        # then a design the bound is taken over
        assert policy_variance(sigma2, sigma2, n) >= godambe_joshi_variance(sigma2, n)


def test_items_for_width_equals_a_scan():
    for eps in (0.02, 0.05, 0.1, 0.5):
        def var(n):
            return 0.21 * (1.0 / n - 1.0 / 300)
        scan = next(n for n in range(1, 301) if 2 * 1.959963984540054 * np.sqrt(var(n)) <= eps)
        assert items_for_width(var, eps, 300, 1.959963984540054) == scan


def test_floored_design_with_a_perfect_predictor_is_the_clip_floor_in_closed_form():
    # a predictor that knows every score leaves no residual, so the floored design's
    # variance is the floor alone; with p_min = 0.5 every clipped v is 1/4 and π = n/N,
    # so V(n) = (1/4)(1/n − 1/N) and the least n with 2 z sqrt(V(n)) ≤ ε is
    # ceil(1 / ((ε/z)² + 1/N)); the unfloored policy needs one item
    scores = (np.random.default_rng(4).random(300) < 0.3).astype(float)
    perfect = {"perfect": (lambda reference, s, folds: s.copy(), True)}
    z = z_value(NOMINAL)
    for eps in (0.05, 0.1):
        row, = target_items(np.zeros((3, 300)), scores, [eps], perfect, p_min=0.5)
        assert row["perfect floored"] == int(np.ceil(1.0 / ((eps / z) ** 2 + 1.0 / 300)))
        assert row["perfect policy"] == 1
    # a floor can only add items: floored ≥ policy for a real predictor at p_min = 0.02
    rng = np.random.default_rng(5)
    reference = (rng.random((30, 300)) < rng.uniform(0.1, 0.9, 300)).astype(float)
    rows = target_items(reference, scores, [0.05, 0.1],
                        {"d": (difficulty_predictor(2), True)}, p_min=0.02)
    assert all(r["d floored"] >= r["d policy"] for r in rows)
