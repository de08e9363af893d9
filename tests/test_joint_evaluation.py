"""Multi-target BayesAME: posterior rebuild, held parameters, and the method in the one
loop (design, round robin, per-target stopping, the same run in the Session and the
simulator)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.data import ScoreMatrix
from bayeval.errors import BayevalError, SessionError
from bayeval.inference.joint import (
    joint_compact,
    joint_covariance,
    joint_rebuild,
    joint_refit,
    joint_state,
)
from bayeval.inference.joint import joint_observe as _joint_observe
from bayeval.loop.session import Session
from bayeval.loop.simulate import simulate
from bayeval.methods import make_method
from bayeval.models.coregional import coregional_covariance, default_kernels

joint_observe = jax.jit(_joint_observe)

PARAMS = {"alpha": [1.0, 0.7], "beta": [1.5, 0.8], "weights": [[0.9, 0.2], [0.6, -0.5],
                                                               [0.1, 0.8]], "sigma2": 0.05}


def _jparams(p):
    return {k: jnp.asarray(v, jnp.float64) for k, v in p.items()}


def test_pair_rows_are_the_grid_covariance_rows():
    rng = np.random.default_rng(0)
    phi = jnp.asarray(rng.random((5, 4)))
    w = jnp.asarray(rng.normal(size=(3, 2)))
    kernels = default_kernels(2)
    alpha, beta = jnp.array([1.0, 0.5]), jnp.array([2.0, 0.7])
    grid = np.asarray(coregional_covariance(phi, alpha, beta, w, kernels))
    t, b = np.array([2, 0, 1, 2, 0]), np.array([4, 1, 1, 0, 3])
    rows = np.asarray(coregional_covariance(phi[b], alpha, beta, w, kernels, jnp.asarray(t)))
    j = t * 5 + b
    np.testing.assert_allclose(rows, grid[np.ix_(j, j)], atol=1e-14)
    # a per-target offset c_t ~ N(0, τ²) adds τ² exactly to the pairs of one target
    with_offset = np.asarray(coregional_covariance(phi, alpha, beta, w, kernels, offset=0.3))
    same = (np.arange(15)[:, None] // 5) == (np.arange(15)[None, :] // 5)
    np.testing.assert_allclose(with_offset - grid, 0.3 * same, atol=1e-14)
    rows_offset = coregional_covariance(phi[b], alpha, beta, w, kernels, jnp.asarray(t), 0.3)
    np.testing.assert_allclose(np.asarray(rows_offset), with_offset[np.ix_(j, j)], atol=1e-14)


def test_rebuild_at_the_same_parameters_is_the_sequential_posterior(ref):
    # batch conditioning on all observations (the re-fit's rebuild) vs rank-1 updates
    T = 3
    state = joint_state(ref, T, PARAMS, pending=4)
    rng = np.random.default_rng(5)
    pairs = [(t, i) for t in range(T) for i in range(ref.shape[1])]
    for n, k in enumerate(rng.permutation(len(pairs))[:13], start=1):
        t, i = pairs[k]
        state = joint_observe(state, t, i, float(rng.random()))
        if n % 4 == 0:
            state = joint_compact(state)
    rebuilt = joint_rebuild(state, _jparams(PARAMS), size=int(state.sizes.shape[0]) * T)
    np.testing.assert_allclose(np.asarray(rebuilt.mu), np.asarray(state.mu), atol=1e-10)
    np.testing.assert_allclose(np.asarray(joint_covariance(rebuilt)),
                               np.asarray(joint_covariance(state)), atol=1e-10)
    np.testing.assert_allclose(np.asarray(rebuilt.cov_rem),
                               np.asarray(joint_compact(state).cov_rem), atol=1e-10)
    # fewer slots than the 3·7 buckets, but enough for the observed pairs: the same
    small = joint_rebuild(state, _jparams(PARAMS), size=16)
    np.testing.assert_allclose(np.asarray(small.mu), np.asarray(state.mu), atol=1e-10)


def test_refit_holds_the_parameters_it_does_not_fit(ref):
    T = 3
    state = joint_state(ref, T, PARAMS)
    rng = np.random.default_rng(2)
    for t in range(T):
        for i in range(6):
            state = joint_observe(state, t, i, float(rng.random()))
    fitted = joint_refit(state, PARAMS, steps=30, learning_rate=0.05,
                         fit=("alpha", "beta", "weights"))
    assert float(fitted["sigma2"]) == pytest.approx(0.05, abs=1e-15)
    assert not np.allclose(np.asarray(fitted["alpha"]), PARAMS["alpha"])
    with pytest.raises(ValueError, match="cannot fit"):
        joint_refit(state, PARAMS, steps=1, fit=("gamma",))


@pytest.fixture(scope="module")
def synthetic():
    """5 references × 40 items, continuous: buckets are unique, so selection uses IG; 3
    correlated targets."""
    rng = np.random.default_rng(3)
    ability = rng.normal(size=8)
    difficulty = rng.normal(size=40)
    logits = ability[:, None] - difficulty[None, :]
    scores = 1 / (1 + np.exp(-logits)) * 0.9 + 0.05 * rng.random((8, 40))
    reference = ScoreMatrix(scores[:5], [f"r{i}" for i in range(5)],
                            [f"q{j:02d}" for j in range(40)])
    return reference, scores[5:]


TARGETS = ["a", "b", "c"]
# small settings: the design (3 × 4 pairs), a re-fit after it and every 20 after, stops
FAST = {"refit_every": 20, "adam_steps": 20, "epsilon": 0.2, "epsilon1": 0.05, "window": 3,
        "pending": 8}


def _session_run(method, reference, targets, seed):
    session = Session(reference, TARGETS, method, seed=seed)
    seen, rules = [], []
    while not session.done:
        (t, item), = session.ask()
        k, j = TARGETS.index(t), reference.item_index(item)
        before = session.loop.stopping.rules
        session.tell(item, float(targets[k, j]), target=t)
        rules.append((k, before, session.loop.stopping.rules))
        seen.append((k, j))
    return session, seen, rules


def test_joint_run_design_round_robin_stopping_and_the_simulator(synthetic):
    reference, targets = synthetic
    method = make_method("bayesame-joint", **FAST)
    session, seen, rules = _session_run(method, reference, targets, seed=4)
    n_init = 3 * 4  # ⌈10% of 40⌉ = 4 items, every target
    assert session.loop.plan.design.size == n_init and bool(session.prediction.nearly_unique[0])
    # only the observed target's stopping state moves
    for k, before, after in rules:
        for a, b in zip(jax.tree_util.tree_leaves(before), jax.tree_util.tree_leaves(after),
                        strict=True):
            others = np.arange(3) != k
            np.testing.assert_array_equal(np.asarray(a)[others], np.asarray(b)[others])
    init = seen[:n_init]
    items = sorted({j for _, j in init})
    assert len(items) == 4
    assert [t for t, _ in init] == [0, 1, 2] * 4  # item by item, every target in turn
    assert sorted(init) == [(t, j) for t in range(3) for j in items]
    for k, (t, _) in enumerate(seen[n_init:]):
        # no target is asked for after it stopped
        done_at = session.stopped_at[t]
        assert done_at == 0 or n_init + k + 1 <= done_at
    assert session.stop_reason.startswith("every target met")
    assert np.all(session.stopped_at > n_init - 1) and len(session.refits) >= 1
    # the simulator makes the same run: same cells, same estimates and bounds, same stops
    sim = simulate(method, reference.scores, targets[None], [4], until_stop=True)
    n = session.n_observed
    np.testing.assert_array_equal(sim.items[0, :n], [t * 40 + j for t, j in seen])
    np.testing.assert_array_equal(sim.stop_n[0], session.stopped_at)
    assert sim.truth.shape == (1, 3) and sim.estimate.shape[2] == 3
    for t, name in enumerate(TARGETS):
        value, lower, upper = session.estimate(name)
        assert value == pytest.approx(sim.estimate[0, n - 1, t], abs=1e-12)
        assert (lower, upper) == pytest.approx(
            tuple(np.clip([sim.lower[0, n - 1, t], sim.upper[0, n - 1, t]], 0, 1)), abs=1e-12)
        assert lower <= value <= upper
    assert int(sim.refits[0]) == len(session.refits)


def test_round_robin_skips_finished_targets_and_takes_the_best_gain(synthetic):
    from bayeval.acquisition.multi_target import mean_information_gain, round_robin

    reference, targets = synthetic
    for selection in ("round_robin", "mean_ig"):
        method = make_method("bayesame-joint", refit_every=0, adam_steps=0,
                             selection=selection, pending=8)
        session = Session(reference, TARGETS, method, seed=1)
        while session.n_observed < session.loop.plan.design.size:
            (t, item), = session.ask()
            session.tell(item, float(targets[TARGETS.index(t), reference.item_index(item)]),
                         target=t)
        loop = session.loop
        available = ~session._observed
        cell = int(method.choose(loop, jnp.asarray(available), jax.random.key(0), 1)[0][0])
        t, j = divmod(cell, 40)
        avail = jnp.asarray(available.reshape(3, 40))
        if selection == "round_robin":
            assert t == 0  # the cycle restarts after the design's last target (2)
            w = np.asarray(round_robin(loop.prediction, avail, 0))
            # as if target 1 had met its rule: the turns go 0, 2, 0, 2, …
            met = loop.stopping._replace(met=loop.stopping.met.at[1].set(True))
            order = []
            for last in (0, 2, 0, 2):
                turn = loop._replace(stopping=met, plan=loop.plan._replace(last=last))
                c = method.choose(turn, jnp.asarray(available), jax.random.key(1), 1)[0][0]
                order.append(int(c) // 40)
            assert order == [2, 0, 2, 0]
        else:
            w = np.asarray(mean_information_gain(loop.prediction, avail))
        assert w[t, j] == pytest.approx(w.max(), rel=1e-12)


def test_joint_session_refuses_bad_input(synthetic):
    reference, _ = synthetic
    with pytest.raises(BayevalError, match="selection"):
        make_method("bayesame-joint", selection="greedy")
    with pytest.raises(SessionError, match="evaluates one target"):
        Session(reference, TARGETS, "bayesame")
    method = make_method("bayesame-joint", **FAST)
    session = Session(reference, TARGETS, method, max_items=2)
    with pytest.raises(SessionError, match="one .target, item. pair at a time"):
        session.ask(2)
    session.tell("q05", 0.5, target="a")
    with pytest.raises(SessionError, match="already observed"):
        session.tell("q05", 0.5, target="a")
    with pytest.raises(SessionError, match="not one of the targets"):
        session.tell("q00", 0.5, target="d")
    with pytest.raises(SessionError, match="name the target"):
        session.tell("q00", 0.5)
    with pytest.raises(BayevalError, match="finite"):
        session.tell("q00", float("nan"), target="b")
    session.tell("q00", 0.5, target="b")
    assert session.done and session.ask() == []


def test_active_pai_joint_draws_carry_their_probabilities(synthetic, tmp_path):
    # the design in a random order, each item uniform over the target's items not yet
    # asked (q = 1/40, 1/39, …); after it, each target's draw from the rule's weights over
    # its own row; every q journaled, and no skip allowed
    reference, targets = synthetic
    method = make_method("active-pai-joint", epsilon=0.3, n_min=3, refit_every=0,
                         adam_steps=5, pending=8)
    path = tmp_path / "j.jsonl"
    session = Session(reference, TARGETS, method, seed=2, journal=path)
    for _ in range(14):
        (t, item), = session.ask()
        session.tell(item, float(targets[TARGETS.index(t), reference.item_index(item)]),
                     target=t)
    with pytest.raises(SessionError, match="cannot leave"):
        (t, item), = session.ask()
        session.skip(item, "failed", target=t)
    session.close()
    import json

    records = [json.loads(x) for x in path.read_text().splitlines()[1:]]
    told = [x for x in records if x["event"] == "tell"]
    # each pair is journaled when asked (its place in the draw order, its draw), as one
    # target's items are, and told with the same order and draw
    asked = [x for x in records if x["event"] == "ask"]
    assert [x["order"] for x in asked] == list(range(15))
    assert [(x["target"], x["item"], x["q"]) for x in asked[:14]] == [
        (x["target"], x["item"], x["q"]) for x in told]
    design = told[:12]
    assert [x["target"] for x in design] == TARGETS * 4
    np.testing.assert_allclose([x["q"] for x in design], np.repeat(1 / (40 - np.arange(4)), 3))
    from bayeval.methods.targets import INIT_STREAM

    # the drawn order of the design items (bayesame-joint asks the same items sorted)
    drawn = jax.random.permutation(jax.random.fold_in(jax.random.key(2), INIT_STREAM), 40)
    assert [int(x["item"][1:]) for x in design[::3]] == [int(i) for i in drawn[:4]]
    after = told[12:]
    assert all(0 < x["q"] < 1 and np.isfinite(x["design"]) for x in after)
    assert [x["target"] for x in after] == ["a", "b"]  # the round robin after the design
