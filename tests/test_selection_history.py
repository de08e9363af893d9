"""History-informed SySRs (docs/methods.md §10): the estimate (★) is unbiased for every item
order enumerated, equals a brute-force sum of the finite-population estimates, is SySRs
without history, and the ask/tell session equals the pure function."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.evaluators import MatrixPairOracle
from bayeval.selection.history import (
    History,
    corrected_sums,
    history_sysrs,
    run_history_schedules,
)
from bayeval.selection.schedule import phase_schedule
from bayeval.selection.session import SelectionSession
from bayeval.selection.successive_rejects import (
    run_schedules,
    synchronised_successive_rejects,
)


def _history(n_items: int, k: int = 2, seed: int = 1) -> History:
    rng = np.random.default_rng(seed)
    return History(jnp.asarray(rng.normal(size=(n_items, k))),
                   jnp.asarray(rng.normal(size=k)), jnp.asarray(np.eye(k) * 0.7))


def test_the_estimate_is_unbiased_over_every_item_order():
    """Enumerate all 6! orders of 6 items: the mean of μ̂_n over orders is the full mean
    for every n, although the predictions (Laplace updates from the scores) differ between
    orders and are far from the scores. Exact up to float rounding."""
    L = 6
    history = _history(L)
    scores = jnp.asarray([[1.0, 0, 1, 1, 0, 0], [0, 0, 1, 0, 1, 1], [1, 1, 1, 0, 1, 1]])
    orders = jnp.asarray(list(itertools.permutations(range(L))))
    sums = np.asarray(jax.jit(jax.vmap(lambda o: corrected_sums(scores, o, history)))(orders))
    estimates = sums / np.arange(1, L + 1)
    np.testing.assert_allclose(estimates.mean(0), np.broadcast_to(
        np.asarray(scores).mean(1)[:, None], (3, L)), atol=1e-12)
    # the predictions matter: the estimate is not the plain running mean
    plain = np.cumsum(np.asarray(scores)[:, np.asarray(orders)].transpose(1, 0, 2), -1)
    assert np.abs(sums - plain)[:, :, :-1].max() > 1e-3
    np.testing.assert_allclose(sums[:, :, -1], plain[:, :, -1], atol=1e-12)  # n = L


def _laplace(mean, cov, v, z):
    """The online Laplace step written out in NumPy (docs/methods.md §3)."""
    p = 1 / (1 + np.exp(-v @ mean))
    w = p * (1 - p)
    cov = np.linalg.inv(np.linalg.inv(cov) + w * np.outer(v, v))
    return mean + cov @ v * (z - p), cov


def test_the_estimate_is_the_weighted_sum_of_finite_population_estimates():
    """(★) against its definition: Σ_t w_t θ̃_t with θ̃_t = (1/L)[Σ_{s<t} y_s + Σ_{R_t} f_t
    + |R_t| (y_t − f_t(I_t))] and w_t = L (L − n) / (n (L − t)(L − t + 1)), computed
    directly for every n with the predictions from a NumPy Laplace recursion."""
    L = 9
    history = _history(L, k=3, seed=4)
    v = np.asarray(history.item_factors)
    y = np.asarray([1.0, 0, 0, 1, 1, 0, 1, 0, 1])
    order = np.asarray([4, 0, 7, 2, 8, 1, 3, 6, 5])
    mean, cov = np.asarray(history.mean0), np.asarray(history.cov0)
    theta = []
    for t, item in enumerate(order, start=1):
        f = 1 / (1 + np.exp(-v @ mean))
        pool = np.setdiff1d(np.arange(L), order[:t - 1])
        theta.append((y[order[:t - 1]].sum() + f[pool].sum()
                      + len(pool) * (y[item] - f[item])) / L)
        mean, cov = _laplace(mean, cov, v[item], y[item])
    theta = np.asarray(theta)
    got = np.asarray(corrected_sums(jnp.asarray(y)[None], jnp.asarray(order), history))[0]
    for n in range(1, L):
        t = np.arange(1, n + 1)
        w = L * (L - n) / (n * (L - t) * (L - t + 1))
        assert w.sum() == pytest.approx(1.0)
        assert got[n - 1] / n == pytest.approx(np.dot(w, theta[:n]), abs=1e-10)


def test_without_history_or_with_constant_predictions_it_is_sysrs_exactly():
    """No history: the SySRs function itself. Constant predictions (item factors 0): every
    d_t is exactly 0, so every run's elimination order equals SySRs' bit for bit, ties
    included (0/1 scores tie often)."""
    rng = np.random.default_rng(3)
    scores = jnp.asarray((rng.random((6, 40)) < rng.random((6, 1))).astype(float))
    key = jax.random.key(5)
    a = history_sysrs(scores, key, 90, None)
    b = synchronised_successive_rejects(scores, key, 90)
    np.testing.assert_array_equal(a.order, b.order)
    flat = History(jnp.zeros((40, 2)), jnp.asarray([0.3, -0.2]), jnp.eye(2))
    keys = jax.vmap(lambda r: jax.random.fold_in(key, r))(jnp.arange(12))
    schedules = jnp.asarray(np.stack([phase_schedule(6, 40, n) for n in (12, 50, 120)]))
    h = run_history_schedules(scores, keys, schedules, flat)
    s = run_schedules(scores, keys, schedules, True)
    np.testing.assert_array_equal(h.order, s.order)
    # a real history changes some eliminations on the same runs
    real = run_history_schedules(scores, keys, schedules, _history(40))
    assert (np.asarray(real.order) != np.asarray(s.order)).any()


def test_the_session_equals_the_pure_function_and_resumes(tmp_path):
    """Ask/tell with a history (pairs told in a shuffled order within each phase) gives
    the elimination order of run_history_schedules with the same seed, and a journal
    resumed half-way finishes the same way; a changed history file is refused."""
    from bayeval.data.matrix import ScoreMatrix
    from bayeval.errors import JournalError

    rng = np.random.default_rng(8)
    K, L = 5, 30
    values = (rng.random((K, L)) < rng.random((K, 1))).astype(float)
    matrix = ScoreMatrix(values, [f"m{i}" for i in range(K)], [f"q{j}" for j in range(L)],
                         name="toy")
    history = _history(L, seed=2)
    budget = 70
    pure = history_sysrs(jnp.asarray(values), jax.random.key(11), budget, history)
    expected = [f"m{i}" for i in np.asarray(pure.order)]

    journal = tmp_path / "sel.jsonl"
    session = SelectionSession(matrix.models, matrix.items, budget, seed=11,
                               journal=journal, history=history)
    oracle = MatrixPairOracle(matrix)
    told = 0
    while not session.done and told < 25:
        pairs = session.ask()
        for p in rng.permutation(len(pairs)):
            model, item = pairs[p]
            session.tell(model, item, oracle(model, item))
            told += 1
            if told == 25:
                break
    session.close()
    resumed = SelectionSession.resume(journal)
    resumed.run(oracle)
    assert resumed.eliminated + [resumed.best] == expected
    assert resumed.ranking()[0] == expected[-1]

    (tmp_path / "sel.jsonl.history.npz").write_bytes(b"changed")
    with pytest.raises(JournalError, match="history file"):
        SelectionSession.resume(journal)


def test_the_history_protocol_splits_by_model_and_compares_on_the_same_runs():
    """history_split: references and candidates partition the models, differ between
    splits and repeat for a seed; accuracy_table runs SySRs, HI-SySRs and HW-SySRs on the candidates
    only (a dominant candidate is found by both at a generous budget)."""
    from bayeval.experiments.selection import accuracy_table, history_split

    refs, cands = history_split(14, 0.5, 0)
    assert sorted([*refs, *cands]) == list(range(14)) and len(refs) == 7
    np.testing.assert_array_equal(history_split(14, 0.5, 0)[0], refs)
    assert not np.array_equal(history_split(14, 0.5, 1)[0], refs)
    with pytest.raises(ValueError, match="references"):
        history_split(6, 0.5, 0)
    rng = np.random.default_rng(0)
    ability = rng.normal(size=(14, 1))
    scores = (rng.random((14, 60)) < 1 / (1 + np.exp(-(ability - rng.normal(size=60))))
              ).astype(float)
    table = accuracy_table(scores, ["SySRs", "HI-SySRs", "HW-SySRs"], fractions=(0.3, 1.0),
                           runs=4, history_share=0.5, splits=2, ranks=(2,))
    assert set(table.algorithm) == {"SySRs", "HI-SySRs", "HW-SySRs"}
    assert (table[table.budget == 1.0].accuracy == 1.0).all()  # every pair: exact means
    assert table.evaluations.max() == 7 * 60
