"""BayesAME end to end: composed rules, Session ↔ simulation agreement, resume with
re-fits, and the experiment metrics against brute force."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from bayeval import acquisition as acq
from bayeval.data import ScoreMatrix
from bayeval.evaluators import MatrixOracle
from bayeval.experiments.metrics import integrated_rmse, rmse_curve, stopping_points
from bayeval.inference.exact import ExactBucketGP
from bayeval.loop.session import Session
from bayeval.loop.simulate import simulate
from bayeval.methods import Method, make_method
from bayeval.stopping import any_of, budget, two_condition

PARAMS = {"epsilon": 0.05, "refit_every": 10}


@pytest.fixture(scope="module")
def world() -> ScoreMatrix:
    rng = np.random.default_rng(3)
    ability = rng.uniform(-1, 1, 16)[:, None]
    difficulty = rng.normal(0, 1, 30)[None, :]
    p = 1 / (1 + np.exp(-(3 * ability - difficulty)))
    scores = (rng.random((16, 30)) < p).astype(float)
    return ScoreMatrix(scores, [f"m{i}" for i in range(16)], [f"q{j:02d}" for j in range(30)],
                       name="world")


def test_a_user_composes_a_rule_in_a_few_lines(world):
    # information gain, tempered, mixed with uniform; sampled; stops at 12 items or by
    # BayesAME's rule — a new method from parts, run by the ordinary Session
    rule = acq.uniform_floor(acq.tempered(acq.info_gain(), 0.1), tau=0.2)
    method = Method("my-rule", ExactBucketGP(refit_every=0).backend(), rule, acq.sample,
                    any_of(budget(12), two_condition(0.01)))
    session = Session(world.drop_models(["m0"]), "m0", method, seed=1)
    session.run(MatrixOracle(world, "m0"))
    assert session.n_observed == 12
    # the mixture keeps every available item at probability ≥ τ / #available
    pred = session.prediction
    available = jnp.ones(30, bool)
    p = np.exp(np.asarray(rule(pred, available)))
    assert p.sum() == pytest.approx(1.0) and p.min() >= 0.2 / 30 - 1e-12


def test_switch_falls_back_to_random_when_buckets_tie():
    pred = type("P", (), {})()
    pred.nearly_unique = jnp.asarray(False)
    rule = acq.switch(lambda p: p.nearly_unique, lambda p, a: jnp.arange(3.0),
                      acq.uniform())
    assert list(np.asarray(rule(pred, jnp.ones(3, bool)))) == [0, 0, 0]


@pytest.mark.parametrize("name", ["bayesame", "bayesame-rs", "bayes-aipw", "random"])
def test_simulation_matches_the_session(world, name):
    # the vmapped engine and the interactive Session run the same code with the same keys:
    # the same items in the same order and the same estimates (re-fits included)
    reference = world.drop_models(["m0", "m1"])
    method = make_method(name, **({"epsilon": 0.05} if name in ("random", "bayes-aipw")
                                  else PARAMS))
    rows = world.select_models(["m0", "m1"]).scores
    sim = simulate(method, reference.scores, rows, [4, 5], n_steps=25)
    for r, (target, seed) in enumerate([("m0", 4), ("m1", 5)]):
        session = Session(reference, target, method, seed=seed, max_items=25)
        session.run(MatrixOracle(world, target))
        items = [world.item_index(i) for i, _ in session.observations]
        assert items == list(sim.items[r])
        np.testing.assert_allclose([h[1] for h in session.history], sim.estimate[r],
                                   atol=1e-9)


def test_deferred_updates_and_refits_agree_between_session_and_simulation(world):
    # 4 pending updates at most: compactions at n = 4, 8, …, re-fits at n = 10, 20; both
    # drivers schedule them alike and the final posterior is the dense conditioning
    from bayeval.inference.exact import condition, posterior_cov

    factory = ExactBucketGP(refit_every=10, pending=4)
    method = Method("small-buffer", factory.backend(), acq.bayesame_rule(), acq.argmax,
                    budget(30))
    reference = world.drop_models(["m0"])
    sim = simulate(method, reference.scores, world.select_models(["m0"]).scores, [3],
                   n_steps=23)
    session = Session(reference, "m0", method, seed=3, max_items=23)
    session.run(MatrixOracle(world, "m0"))
    assert [world.item_index(i) for i, _ in session.observations] == list(sim.items[0])
    np.testing.assert_allclose([h[1] for h in session.history], sim.estimate[0], atol=1e-9)
    state = session.state
    assert int(state.n_pending) == 3  # 23 = 20 (re-fit) + 3
    mu0, cov0, noise = factory.prior(state.phi, state.sizes, state.log_hyper,
                                     float(state.noise[0] / state.sizes[0]))
    mu, cov = condition(mu0, cov0, noise, state.count, state.total)
    np.testing.assert_allclose(state.mu, mu, atol=1e-9)
    np.testing.assert_allclose(posterior_cov(state), cov, atol=1e-9)


def test_bayesame_resume_replays_refits(tmp_path, world):
    reference = world.drop_models(["m0"])
    oracle = MatrixOracle(world, "m0")
    straight = Session(reference, "m0", "bayesame", method_params=PARAMS, seed=2)
    straight.run(oracle)
    path = tmp_path / "j.jsonl"
    first = Session(reference, "m0", "bayesame", method_params=PARAMS, seed=2, journal=path)
    for _ in range(17):  # past one re-fit
        (item,) = first.ask()
        first.tell(item, oracle(item))
    first.close()
    again = Session.resume(path, reference=reference)
    assert again.run(oracle) == straight.estimate()
    assert again.observations == straight.observations
    assert again.stop_reason == straight.stop_reason


def test_information_gain_selection_is_not_random(world):
    # with near-unique reference vectors BayesAME picks the argmax-IG bucket
    reference = world.drop_models(["m0"])
    session = Session(reference, "m0", "bayesame", method_params=PARAMS, seed=0)
    ig = np.asarray(acq.information_gain(session.prediction))
    assert bool(session.prediction.nearly_unique)
    (item,) = session.ask()
    assert ig[world.item_index(item)] == pytest.approx(ig.max())


def test_metrics_against_brute_force():
    rng = np.random.default_rng(0)
    est = rng.random((5, 40))
    truth = rng.random(5)
    rmse = rmse_curve(est, truth)
    for n in (0, 17, 39):
        assert rmse[n] == pytest.approx(np.sqrt(np.mean([(est[r, n] - truth[r]) ** 2
                                                         for r in range(5)])))
    weights = np.arange(1, 41)
    assert integrated_rmse(rmse) == pytest.approx(100 * sum(weights * rmse) / sum(weights))
    # stopping: first t ≥ W with range(est[t−W..t]) ≤ ε1 and width ≤ ε2, else the last step
    est = np.cumsum(rng.normal(0, 0.01, (6, 80)) * np.exp(-np.arange(80) / 15), axis=1)
    width = np.tile(np.linspace(0.1, 0.0, 80), (6, 1))
    stops = stopping_points(est, np.zeros_like(width), width, 0.05, 0.005, 10)
    for r in range(6):
        ok = [t for t in range(10, 80) if np.ptp(est[r, t - 10:t + 1]) <= 0.005
              and width[r, t] <= 0.05]
        assert stops[r] == (ok[0] if ok else 79)


def test_irmse_ratio_interval_resamples_groups():
    from bayeval.experiments.metrics import irmse_ratio_interval

    rng = np.random.default_rng(1)
    truth = rng.random(12)
    a = truth[:, None] + 0.01 * rng.normal(size=(12, 30))
    b = truth[:, None] + 0.02 * rng.normal(size=(12, 30))
    groups = np.repeat(np.arange(4), 3)
    ratio, lo, hi = irmse_ratio_interval(a, b, truth, groups, n_boot=300)
    assert ratio == pytest.approx(integrated_rmse(rmse_curve(a, truth))
                                  / integrated_rmse(rmse_curve(b, truth)))
    assert lo <= ratio <= hi and 0.3 < lo and hi < 0.8
    # one group only: every resample is the full set, the interval collapses
    assert irmse_ratio_interval(a, b, truth, np.zeros(12), n_boot=20)[1:] == pytest.approx(
        (ratio, ratio))
