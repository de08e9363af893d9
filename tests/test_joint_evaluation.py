"""Multi-target BayesAME: posterior rebuild, held parameters, the evaluation loop."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.errors import BayevalError
from bayeval.inference.joint import (
    joint_compact,
    joint_covariance,
    joint_rebuild,
    joint_refit,
    joint_state,
)
from bayeval.inference.joint import joint_observe as _joint_observe
from bayeval.methods.multi_target import JointRun, make_joint, simulate_joint
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
    """6 references × 40 items, continuous: buckets are unique, so selection uses IG; 3
    correlated targets."""
    rng = np.random.default_rng(3)
    ability = rng.normal(size=8)
    difficulty = rng.normal(size=40)
    logits = ability[:, None] - difficulty[None, :]
    scores = 1 / (1 + np.exp(-logits)) * 0.9 + 0.05 * rng.random((8, 40))
    return scores[:5], scores[5:]


def test_joint_run_design_round_robin_and_stopping(synthetic):
    reference, targets = synthetic
    cfg = make_joint(refit_every=20, adam_steps=20, epsilon=0.2, epsilon1=0.05, window=3,
                     pending=8)
    run = JointRun(reference, 3, cfg, seed=4, kind="continuous")
    assert run.nearly_unique and run.n_init == 3 * 4  # ⌈10% of 40⌉ = 4 items, all targets
    seen = []
    while not run.finished:
        pair = run.next_pair()
        before = run.stop_state
        run.observe(pair.target, pair.item, targets[pair.target, pair.item])
        # only the observed target's stopping state moves
        for t in range(3):
            if t != pair.target:
                for a, b in zip(jax.tree_util.tree_leaves(before),
                                jax.tree_util.tree_leaves(run.stop_state), strict=True):
                    np.testing.assert_array_equal(np.asarray(a)[t], np.asarray(b)[t])
        seen.append((pair.target, pair.item, run.done.copy()))
    init = seen[:run.n_init]
    items = sorted({i for _, i, _ in init})
    assert len(items) == 4
    assert [t for t, _, _ in init] == [0, 1, 2] * 4  # item by item, every target in turn
    assert sorted((t, i) for t, i, _ in init) == [(t, i) for t in range(3) for i in items]
    order = [t for t, _, _ in seen[run.n_init:]]
    done_at = run.stopped_at
    for k, t in enumerate(order):
        n_total = run.n_init + k + 1
        # no target is asked for after it stopped
        assert done_at[t] == 0 or n_total <= done_at[t]
    assert np.all(run.done | ~run.available.any(1))
    assert run.refits >= 1
    # the same seed and answers give the same run
    again = simulate_joint(cfg, reference, targets, seed=4, kind="continuous")
    assert [(int(t), int(i)) for t, i in zip(again.targets, again.items, strict=True)] == [
        (t, i) for t, i, _ in seen]
    est, lo, hi = run.estimates()
    np.testing.assert_allclose(again.estimate[-1], est)
    assert np.all((lo <= est) & (est <= hi))


def test_round_robin_visits_unfinished_targets_in_turn(synthetic):
    reference, targets = synthetic
    cfg = make_joint(refit_every=0, adam_steps=0, epsilon=1e-9, window=3, pending=8)
    run = JointRun(reference, 3, cfg, seed=0, kind="continuous")
    while run.n < run.n_init:
        p = run.next_pair()
        run.observe(p.target, p.item, targets[p.target, p.item])
    run.done[1] = True  # as if target 1 had met its rule
    order = []
    for _ in range(6):
        p = run.next_pair()
        run.observe(p.target, p.item, targets[p.target, p.item])
        order.append(p.target)
    assert order == [0, 2, 0, 2, 0, 2]


def test_selection_takes_the_best_information_gain(synthetic):
    from bayeval.acquisition.multi_target import mean_information_gain, round_robin

    reference, targets = synthetic
    for selection in ("round_robin", "mean_ig"):
        cfg = make_joint(refit_every=0, adam_steps=0, selection=selection, pending=8)
        run = JointRun(reference, 3, cfg, seed=1, kind="continuous")
        while run.n < run.n_init:
            p = run.next_pair()
            run.observe(p.target, p.item, targets[p.target, p.item])
        p = run.next_pair()
        avail = jnp.asarray(run.available)
        if selection == "round_robin":
            assert p.target == 0  # the cycle restarts after the design's last target (2)
            w = np.asarray(round_robin(run.prediction, avail, 0))
        else:
            w = np.asarray(mean_information_gain(run.prediction, avail))
        assert w[p.target, p.item] == pytest.approx(w.max(), rel=1e-12)


def test_joint_run_rejects_bad_input(synthetic):
    reference, _ = synthetic
    cfg = make_joint(pending=8)
    run = JointRun(reference, 3, cfg, seed=0, kind="continuous", max_evaluations=2)
    run.observe(0, 5, 0.5)
    with pytest.raises(BayevalError, match="already scored"):
        run.observe(0, 5, 0.5)
    with pytest.raises(BayevalError, match="out of range"):
        run.observe(3, 0, 0.5)
    with pytest.raises(BayevalError, match="not finite"):
        run.observe(1, 0, float("nan"))
    run.observe(1, 0, 0.5)
    assert run.finished
    with pytest.raises(BayevalError, match="finished"):
        run.next_pair()
    with pytest.raises(BayevalError, match="selection"):
        make_joint(selection="greedy")
