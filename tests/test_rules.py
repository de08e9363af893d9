"""Sample-mean backend, policies and stopping rules against brute-force references."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.acquisition import argmax, draw_index, inverse_cdf, sample, uniform
from bayeval.estimators import clip_interval, gaussian_bounds, sample_mean, wilson_fpc_bounds
from bayeval.estimators.base import gaussian_estimate
from bayeval.stopping import (
    all_of,
    any_of,
    budget,
    interval_width,
    min_observations,
    two_condition,
    window_range,
)


def test_sample_mean_matches_numpy():
    rng = np.random.default_rng(1)
    scores = rng.random(20)
    order = rng.permutation(20)
    state = sample_mean.init(None, 20)
    for n, j in enumerate(order, start=1):
        state = sample_mean.observe(state, j, scores[j])
        pred = sample_mean.predict(state)
        seen = scores[order[:n]]
        assert float(pred.mean) == pytest.approx(seen.mean(), abs=1e-12)
        if n >= 2:
            expected = (1 - n / 20) * seen.var(ddof=1) / n
            assert float(pred.var) == pytest.approx(expected, abs=1e-12)
    assert float(pred.var) == 0.0  # every item observed: no uncertainty left
    np.testing.assert_allclose(np.asarray(pred.item_mean), scores)


def test_sample_mean_before_two_observations():
    state = sample_mean.init(None, 10)
    pred = sample_mean.predict(state)
    assert float(pred.mean) == 0.5 and float(pred.var) == pytest.approx(0.25)
    state = sample_mean.observe(state, 3, 1.0)
    assert float(sample_mean.predict(state).var) == pytest.approx(0.9 * 0.25)


def test_gaussian_bounds_and_clipping():
    lo, hi = gaussian_bounds(0.5, 0.01, 1.959964)
    assert (float(lo), float(hi)) == pytest.approx((0.5 - 0.1959964, 0.5 + 0.1959964))
    assert clip_interval(*gaussian_bounds(0.99, 0.01, 1.959964)) == pytest.approx(
        (0.99 - 0.1959964, 1.0))


@pytest.mark.parametrize(("p_hat", "n", "N"), [(0.3, 20, 100), (0.0, 30, 541), (1.0, 5, 10),
                                               (0.55, 99, 100)])
def test_wilson_fpc_matches_brute_force(p_hat, n, N):
    # The Wilson–FPC interval is {p : (p̂ − p)² ≤ z² (1 − n/N) p (1 − p) / n}; find that set
    # on a fine grid and compare its ends (grid step 1e-6).
    z = 1.959964
    grid = np.linspace(0, 1, 1_000_001)
    inside = grid[(p_hat - grid) ** 2 <= z * z * (1 - n / N) * grid * (1 - grid) / n]
    lo, hi = wilson_fpc_bounds(p_hat, n, N, z)
    assert float(lo) == pytest.approx(inside.min(), abs=2e-6)
    assert float(hi) == pytest.approx(inside.max(), abs=2e-6)


def test_wilson_fpc_edges():
    assert [float(b) for b in wilson_fpc_bounds(0.5, 0, 10, 1.96)] == [0.0, 1.0]
    assert [float(b) for b in wilson_fpc_bounds(0.7, 10, 10, 1.96)] == pytest.approx([0.7, 0.7])


def test_sample_mean_interval_switches_to_wald_for_continuous_scores():
    est = sample_mean.estimator()
    state, backend = est.init(10), sample_mean.init(None, 10)
    for j, s in enumerate([1.0, 0.0, 1.0]):
        state = est.update(state, sample_mean.predict(backend), j, s, 0.1)
        backend = sample_mean.observe(backend, j, s)
    pred = sample_mean.predict(backend)
    report = est.estimate(state, pred, 1.96)
    assert float(report.value) == pytest.approx(2 / 3)
    assert [float(report.lower), float(report.upper)] == pytest.approx(
        [float(b) for b in wilson_fpc_bounds(pred.mean, 3, 10, 1.96)])
    state = est.update(state, pred, 3, 0.5, 0.1)
    pred = sample_mean.predict(sample_mean.observe(backend, 3, 0.5))
    report = est.estimate(state, pred, 1.96)
    assert [float(report.lower), float(report.upper)] == pytest.approx(
        [float(b) for b in gaussian_bounds(pred.mean, pred.var, 1.96)])


def test_policies_pick_distinct_available_items():
    available = jnp.array([True, False, True, True, False, True])
    log_w = jnp.array([0.0, 9.0, 1.0, 3.0, 9.0, 2.0])
    for seed in range(20):
        key = jax.random.key(seed)
        picked = np.asarray(sample(key, log_w, available, 3))
        assert len(set(picked)) == 3 and all(available[picked])
    top = np.asarray(argmax(jax.random.key(0), log_w, available, 2))
    assert list(top) == [3, 5]


def test_argmax_breaks_ties_uniformly():
    available = jnp.ones(4, bool)
    log_w = jnp.array([1.0, 1.0, 0.0, 1.0])
    first = [int(argmax(jax.random.key(s), log_w, available, 1)[0]) for s in range(300)]
    counts = np.bincount(first, minlength=4)
    assert counts[2] == 0 and counts[[0, 1, 3]].min() > 70  # each ~100 of 300


def test_sample_follows_weights():
    # Gumbel-top-1 draws ∝ exp(log_w): with weights 1:2:5 over 4000 draws the counts sit
    # within 5 binomial standard deviations (≤ 0.0004% two-sided miss chance each).
    log_w = jnp.log(jnp.array([1.0, 2.0, 5.0]))
    keys = jax.random.split(jax.random.key(7), 4000)
    draws = np.asarray(jax.vmap(lambda k: sample(k, log_w, jnp.ones(3, bool), 1)[0])(keys))
    p = np.array([1, 2, 5]) / 8
    counts = np.bincount(draws, minlength=3)
    assert np.all(np.abs(counts - 4000 * p) < 5 * np.sqrt(4000 * p * (1 - p)))
    assert np.all(np.asarray(uniform()(None, jnp.ones(3, bool))) == 0)


@pytest.mark.parametrize("n", [1, 2, 3, 15, 16, 17, 1297])
def test_draw_index_is_the_inverse_cdf(n):
    # Integer weights make every partial sum exact in float64 however it is grouped, so
    # the block-by-block search must give exactly NumPy's searchsorted (the first item
    # whose cumulative weight exceeds u) for every u, zero weights included; u runs over
    # every interval end (the boundary cases) and random points, on a (2, 3) batch.
    rng = np.random.default_rng(n)
    w = rng.integers(0, 4, size=(2, 3, n)).astype(np.float64)
    w[..., rng.integers(n)] += 1.0  # no all-zero row
    cdf = np.cumsum(w, -1)
    for u in (cdf[..., rng.integers(n)], cdf[..., 0] * 0.0,
              rng.uniform(size=(2, 3)) * cdf[..., -1], np.nextafter(cdf[..., -1], 0)):
        want = np.minimum(np.array([[np.searchsorted(cdf[a, b], u[a, b], side="right")
                                     for b in range(3)] for a in range(2)]), n - 1)
        got = np.asarray(draw_index(jnp.asarray(w), jnp.asarray(u)))
        assert np.array_equal(got, want)
        assert np.array_equal(got, np.asarray(inverse_cdf(jnp.asarray(cdf), jnp.asarray(u))))
        inside = u < cdf[..., -1]  # below the total: never a zero-weight item
        assert np.all(w[np.arange(2)[:, None], np.arange(3), got][inside] > 0)
    # u at or beyond the total: the last item, as inverse_cdf
    assert np.all(np.asarray(draw_index(jnp.asarray(w), jnp.asarray(cdf[..., -1]))) == n - 1)


class _P:
    def __init__(self, n):
        self.n = jnp.asarray(n)


def _run(rule, means, vars_):
    state, out = rule.init(), []
    for n, (m, v) in enumerate(zip(means, vars_, strict=True), start=1):
        state, stop = rule.update(state, gaussian_estimate(m, v, 1.959964), _P(n))
        out.append(bool(stop))
    return out


def test_window_range_against_brute_force():
    rng = np.random.default_rng(3)
    means = np.cumsum(rng.normal(0, 0.003, 200) * np.exp(-np.arange(200) / 40)) + 0.5
    got = _run(window_range(0.005, 30), means, np.zeros(200))
    expected = [j >= 30 and np.ptp(means[j - 30: j + 1]) <= 0.005 for j in range(200)]
    assert got == expected and any(got) and not all(got)


def test_interval_width_and_combinators():
    vars_ = np.array([0.01, 0.001, 0.0005, 0.0001])
    widths = 2 * 1.959964 * np.sqrt(vars_)
    assert _run(interval_width(0.1), np.zeros(4), vars_) == list(widths <= 0.1)
    both = all_of(min_observations(3), interval_width(0.1))
    assert _run(both, np.zeros(4), vars_) == [False, False, True, True]
    either = any_of(budget(2), interval_width(0.05))
    assert _run(either, np.zeros(4), vars_) == [False, True, True, True]
    two = two_condition(0.2, epsilon1=0.0, window=2)
    assert _run(two, np.zeros(4), vars_) == [False, False, True, True]
    with pytest.raises(ValueError):
        interval_width(0.0)
