"""Fluid Benchmarking (``fluid``): the ability's MAP and Laplace variance against a
one-dimensional optimiser and finite differences, the score's moments against their
definitions (the observed scores plus the model's expected ones; the delta method against
Monte Carlo draws of the ability), and the next item the one of maximum Fisher
information."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

from bayeval.inference.fluid import FluidIRT, map_ability
from bayeval.loop.session import Session


def _map(a, b, s, seen):
    """The log posterior's stationary point by Brent's root finder on its gradient
    (numpy), bracketed in [−8, 8]."""

    def grad(theta):
        p = 1.0 / (1.0 + np.exp(-a * (theta - b)))
        return np.where(seen, a * (s - p), 0.0).sum() - theta

    return brentq(grad, -8, 8, xtol=1e-14)


def _neg_log_posterior(theta, a, b, s, seen):
    p = 1.0 / (1.0 + np.exp(-a * (theta - b)))
    ll = np.where(seen, s * np.log(p) + (1 - s) * np.log1p(-p), 0.0).sum()
    return -(ll - theta ** 2 / 2)


@pytest.fixture(scope="module")
def items():
    rng = np.random.default_rng(0)
    n = 40
    a, b = rng.lognormal(0, 0.5, n), rng.normal(0, 1.5, n)
    seen = np.zeros(n, bool)
    seen[rng.choice(n, 15, replace=False)] = True
    s = np.where(seen, (rng.random(n) < 0.6).astype(float), 0.0)
    s[np.flatnonzero(seen)[:3]] = 0.5  # fractional scores: the quasi-likelihood
    return a, b, s, seen


def test_the_ability_is_the_map_with_its_laplace_variance(items):
    a, b, s, seen = items
    theta, var = map_ability(a, b, s, seen, 0.0)
    best = _map(a, b, s, seen)
    assert float(theta) == pytest.approx(best, abs=1e-9)
    h = 1e-4  # the curvature by central differences (error O(h²) on a smooth function)
    f = [_neg_log_posterior(float(theta) + k * h, a, b, s, seen) for k in (-1, 0, 1)]
    assert float(var) == pytest.approx(h * h / (f[0] - 2 * f[1] + f[2]), rel=1e-5)
    # from far away, too
    assert float(map_ability(a, b, s, seen, 6.0)[0]) == pytest.approx(best, abs=1e-9)
    # steep items (a = 6, as a 2PL calibrated on a benchmark near chance has), where plain
    # Newton steps from 0 cycle between two points instead of converging
    steep = np.full(a.size, 6.0)
    hard = np.linspace(-2.5, 1.0, a.size)
    right = (np.arange(a.size) % 4 != 0).astype(float)
    everything = np.ones(a.size, bool)
    got = map_ability(steep, hard, right, everything, 0.0)[0]
    assert float(got) == pytest.approx(_map(steep, hard, right, everything), abs=1e-9)


def test_the_score_is_observed_plus_expected_with_the_delta_methods_variance(items):
    a, b, s, seen = items
    theta, var = map_ability(a, b, s, seen, 0.0)
    import jax.numpy as jnp

    from bayeval.inference.fluid import FluidState

    state = FluidState(jnp.asarray(a), jnp.asarray(b), jnp.asarray(seen), jnp.asarray(s),
                       theta, var)
    pred = FluidIRT.predict(state)
    n = a.size
    p = 1.0 / (1.0 + np.exp(-a * (float(theta) - b)))
    assert float(pred.mean) == pytest.approx((s[seen].sum() + p[~seen].sum()) / n,
                                             abs=1e-12)
    # the model's part by Monte Carlo over the ability's Laplace posterior (its spread is
    # small here: the delta method's linearisation holds to a few per cent; 200,000 draws
    # put the Monte Carlo variance within 1% of its value)
    draws = np.random.default_rng(1).normal(float(theta), np.sqrt(float(var)), 200_000)
    pd = 1.0 / (1.0 + np.exp(-a[~seen] * (draws[:, None] - b[~seen])))
    model_part = np.var((s[seen].sum() + pd.sum(1)) / n)
    noise = (p[~seen] * (1 - p[~seen])).sum() / n ** 2
    assert float(pred.var) - noise == pytest.approx(model_part, rel=0.05)
    assert np.all(np.asarray(pred.item_var)[seen] == 0)


def test_the_next_item_has_the_most_fisher_information(engine_world):
    reference, target = engine_world  # the registry's tests' world: programs shared
    session = Session(reference, "new", "fluid", method_params={"epsilon": 1e-9}, seed=0)
    state = session._loop.backend
    a, b = np.asarray(state.discrimination), np.asarray(state.difficulty)
    for _ in range(6):
        theta = float(session._loop.backend.ability)
        p = 1.0 / (1.0 + np.exp(-a * (theta - b)))
        info = np.where(np.asarray(session._loop.backend.observed), -np.inf,
                        a * a * p * (1 - p))
        [item] = session.ask()
        assert reference.item_index(item) == int(np.argmax(info))
        session.tell(item, float(target[reference.item_index(item)]))
