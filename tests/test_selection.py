"""Successive rejects: the phase schedule, and SR / SySRs against a step-by-step reference."""

from __future__ import annotations

import functools
import itertools
import math

import jax
import numpy as np
import pytest

from bayeval.selection.schedule import logbar, phase_schedule, spent
from bayeval.selection.successive_rejects import (
    item_orders,
    successive_rejects,
    synchronised_successive_rejects,
)


def test_schedule_is_the_closed_form_when_no_phase_is_capped():
    for K, L, n in ((5, 1000, 200), (10, 500, 700), (3, 50, 20), (30, 1172, 5000)):
        want = [math.ceil((n - K) / (logbar(K) * (K + 1 - k))) for k in range(1, K)]
        assert max(want) <= L
        assert phase_schedule(K, L, n).tolist() == want
        assert spent(phase_schedule(K, L, n)) <= n


def test_schedule_never_exceeds_the_budget_or_the_items():
    rng = np.random.default_rng(0)
    for _ in range(300):
        K, L = int(rng.integers(2, 40)), int(rng.integers(1, 300))
        n = int(rng.integers(K, K * L + 5))
        s = phase_schedule(K, L, n)
        assert s.shape == (K - 1,) and spent(s) <= n
        assert np.all(np.diff(s) >= 0) and s.min() >= 1 and s.max() <= L
        plain = np.minimum([math.ceil((n - K) / (logbar(K) * (K + 1 - k))) for k in
                            range(1, K)], L)
        # freed budget goes to earlier phases: never fewer items than the plain capped form
        assert np.all(s >= np.maximum(plain, 1)) or spent(np.maximum(plain, 1)) > n
    with pytest.raises(ValueError, match="budget"):
        phase_schedule(5, 10, 4)


def _reference(scores, key, budget, shared):
    """SR / SySRs step by step with explicit item sets (same item orders and tie draws)."""
    K, L = scores.shape
    order_key, tie_key = jax.random.split(key)
    orders = np.asarray(item_orders(order_key, K, L, shared))
    ties = np.asarray(jax.random.uniform(tie_key, (K - 1, K)))
    schedule = phase_schedule(K, L, budget)
    seen = [[] for _ in range(K)]
    alive = list(range(K))
    out, used, prev = [], 0, 0
    for k, n_k in enumerate(schedule):
        new = orders[0, prev:n_k]  # SySRs: the phase's new items, shared
        for i in alive:
            items = new if shared else orders[i, prev:n_k]
            assert not set(items) & set(seen[i])  # never an item twice
            seen[i].extend(int(j) for j in items)
            used += len(items)
        means = {i: scores[i, seen[i]].mean() for i in alive}
        worst = min(means.values())
        tied = [i for i in alive if means[i] == worst]
        drop = max(tied, key=lambda i: ties[k, i])
        out.append(drop)
        alive.remove(drop)
        prev = n_k
    if shared:
        phases = [set(orders[0, a:b]) for a, b in zip([0, *schedule[:-1]], schedule,
                                                      strict=True)]
        assert sum(map(len, phases)) == len(set().union(*phases))  # unique over phases
    return out + alive, used


@pytest.mark.parametrize("shared", [False, True])
def test_matches_the_step_by_step_reference(shared):
    rng = np.random.default_rng(1)
    scores = (rng.random((7, 40)) < rng.random((7, 1))).astype(float)  # binary: many ties
    algo = synchronised_successive_rejects if shared else successive_rejects
    for seed in range(6):
        for budget in (30, 90, 200, 280):
            key = jax.random.key(seed)
            result = algo(scores, key, budget)
            order, used = _reference(scores, key, budget, shared)
            assert np.asarray(result.order).tolist() == order
            assert int(result.best) == order[-1] and int(result.evaluations) == used <= budget


def _ucb_reference(scores, key, budgets, a, shared):
    """UCB-E step by step: the index of every model recomputed at every step, ties to the
    run's priority; the ranking by mean at each budget."""
    from bayeval.selection.bandits import _ranking
    from bayeval.selection.bandits import item_orders as orders_of

    K, L = scores.shape
    order_key, priority_key, rank_key = jax.random.split(key, 3)
    orders = np.asarray(orders_of(order_key, K, L, shared))
    priority = np.asarray(jax.random.uniform(priority_key, (K,)))
    sums, counts = np.zeros(K), np.zeros(K, int)
    rankings = []
    for b, budget in enumerate(budgets):
        for _ in range(int(counts.sum()), min(budget, K * L)):
            index = np.array([np.inf if counts[i] == 0 else -np.inf if counts[i] == L else
                              sums[i] / counts[i] + np.sqrt(a / counts[i]) for i in range(K)])
            arm = max(np.flatnonzero(index == index.max()), key=lambda i: priority[i])
            assert counts[arm] < L  # fully evaluated models have left the arm set
            sums[arm] += scores[arm, orders[arm, counts[arm]]]
            counts[arm] += 1
        means = np.where(counts > 0, sums / np.maximum(counts, 1), -np.inf)
        rankings.append(np.asarray(_ranking(means, jax.random.fold_in(rank_key, b)))[::-1])
    return np.array(rankings), counts


@pytest.mark.parametrize("shared", [False, True])
def test_ucb_e_matches_the_step_by_step_reference(shared):
    from bayeval.selection.bandits import ucb_e, ucb_e_rankings

    rng = np.random.default_rng(3)
    for K, a in ((5, 0.1), (8, 1.0), (9, 10.0)):  # trees of 8, 8, 16 leaves: padded, full
        scores = (rng.random((K, 12)) < rng.random((K, 1))).astype(float)
        budgets = np.array([3, 20, 45, 45, K * 12 + 5])
        keys = jax.random.split(jax.random.key(K), 3)
        got = np.asarray(ucb_e_rankings(scores, keys, budgets, a, shared))
        for r in range(3):
            want, counts = _ucb_reference(scores, keys[r], budgets, a, shared)
            np.testing.assert_array_equal(got[r], want)
            assert counts.sum() == K * 12 and counts.max() == 12
        # the whole matrix: the full means decide
        assert scores.mean(1)[got[0, -1, 0]] == scores.mean(1).max()
    result = ucb_e(scores, jax.random.key(4), 30, 1.0, shared)
    want, counts = _ucb_reference(scores, jax.random.key(4), [30], 1.0, shared)
    assert np.asarray(result.order).tolist() == want[0][::-1].tolist()
    assert int(result.evaluations) == counts.sum() == 30


def test_every_algorithm_finds_a_dominant_model():
    from bayeval.selection.bandits import ucb_e, uniform_sampling

    rng = np.random.default_rng(2)
    scores = (rng.random((12, 300)) < 0.5).astype(float)
    scores[4] = (rng.random(300) < 0.9).astype(float)
    keys = jax.random.split(jax.random.key(1), 100)
    algorithms = [successive_rejects, synchronised_successive_rejects]
    for shared in (False, True):
        algorithms += [functools.partial(ucb_e, a=1.0, shared=shared),
                       functools.partial(uniform_sampling, shared=shared)]
    for algo in algorithms:  # 20% of the pairs
        run = jax.jit(jax.vmap(functools.partial(algo, scores, budget=720)))
        assert np.all(np.asarray(run(keys).best) == 4)
    us = uniform_sampling(scores, jax.random.key(0), 725)
    assert int(us.evaluations) == 12 * 60


def test_top_m_correct_counts_tied_sets():
    from bayeval.experiments.selection import top_m_correct

    means = np.array([0.9, 0.8, 0.8, 0.7, 0.5])  # models 1 and 2 tied for ranks 2-3
    ranked = np.array([[0, 1, 4], [0, 2, 1], [1, 0, 3], [0, 3, 1], [2, 0, 4]])
    np.testing.assert_array_equal(top_m_correct(means, ranked, 1), [1, 1, 0, 1, 0])
    np.testing.assert_array_equal(top_m_correct(means, ranked, 2), [1, 1, 1, 0, 1])
    np.testing.assert_array_equal(top_m_correct(means, ranked, 3), [0, 1, 0, 0, 0])
    # brute force: a set is right iff some ranking consistent with the ties starts with it
    rng = np.random.default_rng(0)
    for _ in range(40):
        means = rng.integers(0, 4, 6) / 4
        ranked = np.stack([rng.permutation(6) for _ in range(5)])
        for m in (1, 2, 3, 4):
            proper = {frozenset(p[:m]) for p in itertools.permutations(range(6))
                      if np.all(np.diff(means[list(p)]) <= 0)}
            want = [frozenset(r[:m]) in proper for r in ranked]
            np.testing.assert_array_equal(top_m_correct(means, ranked, m), want)


def test_accuracy_table_and_confidence_budget():
    from bayeval.experiments.selection import accuracy_table, confidence_budget

    rng = np.random.default_rng(4)
    scores = (rng.random((6, 50)) < 0.4).astype(float)
    scores[2] = (rng.random(50) < 0.95).astype(float)
    algorithms = ("SR", "SySRs", "UCB-E(a=0.1)", "SyUS")  # one of each kind of ranker
    table = accuracy_table(scores, algorithms, fractions=(0.2, 1.0), runs=40, chunk=40)
    assert list(dict.fromkeys(table.algorithm)) == list(algorithms) and len(table) == 8
    full = table[table.budget == 1.0]
    # every pair evaluated: the true best, and the true top 3 and top 5
    assert np.all(full.accuracy == 1.0) and np.all(full.top3_error == 0)
    assert np.all(full.top5_error == 0) and "top10_error" not in table  # m ≤ K only
    at_20 = table[table.budget == 0.2].set_index("algorithm").accuracy
    # 0.95 vs 0.4 over 10 items per model: SR-type phases cannot miss it; the greedy
    # UCB-E(a = 0.1) may, rarely
    assert at_20["SR"] == at_20["SySRs"] == 1.0 and at_20.min() >= 0.9
    assert confidence_budget(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.9, 1.0, 0.95, 1.0]),
                             0.95) == 0.2
    assert confidence_budget(np.array([0.1, 0.2, 0.3]), np.array([0.9, 1.0, 0.9]), 0.95) != 0.2
    assert confidence_budget(np.array([0.1, 0.2]), np.array([1.0, 1.0]), 1.0) == 0.1
