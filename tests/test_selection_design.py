"""The weighted design of SySRs' items (docs/methods.md §10, bayeval.selection.design): the
estimate (★w) is unbiased over every item order weighted by its successive-sampling
probability, with and without a factor model; it equals its definition Σ ω_t θ̃_t; the
exponential race draws orders with those probabilities; with the floor α = 1 it is SySRs;
the weights follow (W) from the references."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.selection.design import history_weights, weighted_order, weighted_sums
from bayeval.selection.history import History, corrected_sums, run_history_schedules
from bayeval.selection.schedule import phase_schedule
from bayeval.selection.successive_rejects import run_schedules


def _inverse_probabilities(order, w):
    """π_t = Σ_{R_t} w / w_{I_t}, written out."""
    return np.asarray([w[order[t:]].sum() / w[order[t]] for t in range(len(order))])


def _order_probability(order, w):
    return float(np.prod(1 / _inverse_probabilities(order, w)))


W5 = np.asarray([0.5, 2.2, 0.9, 0.5, 1.4])  # unequal weights over 5 items
Y5 = np.asarray([[1.0, 0, 1, 1, 0], [0, 1, 1, 0, 1], [1, 1, 0, 0, 0]])


def test_weighted_estimate_is_unbiased_over_every_order_with_its_probability():
    """All 5! orders, each with its probability Π_t w_{I_t} / Σ_{R_t} w: the expected
    μ̂_n is each row's full mean at every n, without a factor model (f ≡ 0) and with one
    whose predictions move with the scores. The plain running mean is biased under this
    design (the check that the weights matter). Exact up to float rounding."""
    orders = np.asarray(list(itertools.permutations(range(5))))
    prob = np.asarray([_order_probability(o, W5) for o in orders])
    assert prob.sum() == pytest.approx(1.0, abs=1e-12)
    inverse = jnp.asarray(np.stack([_inverse_probabilities(o, W5) for o in orders]))
    y = jnp.asarray(Y5)
    n = np.arange(1, 6)
    full = np.broadcast_to(Y5.mean(1)[:, None], (3, 5))
    plain = np.asarray(jax.vmap(lambda o, pi: weighted_sums(y, o, pi))(
        jnp.asarray(orders), inverse))
    rng = np.random.default_rng(2)
    history = History(jnp.asarray(rng.normal(size=(5, 2))), jnp.asarray([0.4, -0.3]),
                      jnp.asarray(np.eye(2) * 0.8))
    with_f = np.asarray(jax.vmap(lambda o, pi: corrected_sums(y, o, history, pi))(
        jnp.asarray(orders), inverse))
    for sums in (plain, with_f):
        np.testing.assert_allclose(np.tensordot(prob, sums / n, 1), full, atol=1e-12)
        np.testing.assert_allclose(sums[:, :, -1], Y5.sum(1)[None].repeat(120, 0), atol=1e-12)
    assert np.abs(with_f - plain).max() > 1e-3  # the predictions enter
    running = np.cumsum(Y5[:, orders].transpose(1, 0, 2), -1) / n
    assert np.abs(np.tensordot(prob, running, 1) - full)[:, :-1].max() > 1e-2


def test_weighted_estimate_is_the_weighted_sum_of_finite_population_estimates():
    """(★w) against its definition, without a factor model: Σ_t ω_t θ̃_t with
    θ̃_t = (1/L)[Σ_{s<t} y_s + π_t y_t] and ω_t = L (L − n) / (n (L − t)(L − t + 1))."""
    L = 8
    w = np.asarray([0.5, 3.0, 1.0, 0.7, 0.5, 1.8, 0.5, 1.0])
    y = np.asarray([1.0, 0, 1, 1, 0, 1, 0, 0])
    order = np.asarray([1, 5, 2, 0, 7, 3, 6, 4])
    pi = _inverse_probabilities(order, w)
    theta = np.asarray([(y[order[:t]].sum() + pi[t] * y[order[t]]) / L for t in range(L)])
    got = np.asarray(weighted_sums(jnp.asarray(y)[None], jnp.asarray(order),
                                   jnp.asarray(pi)))[0]
    for n in range(1, L):
        t = np.arange(1, n + 1)
        omega = L * (L - n) / (n * (L - t) * (L - t + 1))
        assert got[n - 1] / n == pytest.approx(np.dot(omega, theta[:n]), abs=1e-12)
    assert got[-1] == pytest.approx(y.sum(), abs=1e-12)


def test_the_exponential_race_draws_successive_sampling():
    """20 000 orders of 3 items with weights (1, 2, 5): each of the 6 orders appears with
    its successive-sampling probability (tolerance 4.5 binomial SEs, so a false alarm is
    below 1e-4 over the 6 cells), and π is Σ_{R_t} w / w_{I_t} exactly."""
    w = np.asarray([1.0, 2.0, 5.0])
    keys = jax.random.split(jax.random.key(0), 20_000)
    orders, pis = jax.jit(jax.vmap(lambda k: weighted_order(k, jnp.asarray(w))))(keys)
    orders, pis = np.asarray(orders), np.asarray(pis)
    for o in itertools.permutations(range(3)):
        p = _order_probability(np.asarray(o), w)
        freq = np.mean((orders == np.asarray(o)).all(1))
        assert abs(freq - p) < 4.5 * np.sqrt(p * (1 - p) / len(keys)), (o, freq, p)
    for r in range(5):
        np.testing.assert_allclose(pis[r], _inverse_probabilities(orders[r], w), rtol=1e-14)


def test_with_the_floor_at_one_it_is_sysrs():
    """α = 1: every weight is 1, π_t = |R_t| exactly, the estimate is the plain running
    sum, and the elimination orders are SySRs' on the same item orders and tie draws."""
    rng = np.random.default_rng(4)
    refs = (rng.random((9, 30)) < 0.6).astype(float)
    w = history_weights(refs, floor=1.0)
    np.testing.assert_array_equal(w, np.ones(30))
    order, pi = weighted_order(jax.random.key(3), jnp.asarray(w))
    np.testing.assert_array_equal(np.asarray(pi), 30 - np.arange(30))
    scores = jnp.asarray((rng.random((5, 30)) < rng.random((5, 1))).astype(float))
    np.testing.assert_array_equal(np.asarray(weighted_sums(scores, order, pi)),
                                  np.cumsum(np.asarray(scores)[:, np.asarray(order)], 1))
    keys = jax.vmap(lambda r: jax.random.fold_in(jax.random.key(1), r))(jnp.arange(6))
    schedules = jnp.asarray(np.stack([phase_schedule(5, 30, n) for n in (20, 60)]))
    weighted = run_history_schedules(scores, keys, schedules, None, jnp.asarray(w))
    # SySRs on the orders the race drew: permute the items so that SySRs' own order is it
    split = jax.vmap(jax.random.split)(keys)
    for r in range(6):
        race = np.asarray(weighted_order(split[r, 0], jnp.asarray(w))[0])
        sysrs_order = np.asarray(jax.random.permutation(jax.random.split(keys[r])[0], 30))
        relabel = np.empty(30, int)
        relabel[sysrs_order] = race  # SySRs' t-th item is the race's t-th item
        s = run_schedules(scores[:, relabel], keys[r:r + 1], schedules, True)
        np.testing.assert_array_equal(np.asarray(weighted.order[r]), np.asarray(s.order[0]))


def test_history_weights_follow_the_formula():
    """(W) by a loop: the strongest quarter of the references by mean (NaN-aware), their
    item means p̄, s = √(p̄(1 − p̄)), w = α + (1 − α) s / mean(s); an item no strong model
    has gets the mean spread; weights average to one; all-agreeing references give ones."""
    rng = np.random.default_rng(6)
    refs = (rng.random((12, 10)) < rng.random((12, 1))).astype(float)
    refs[0, 3] = np.nan
    got = history_weights(refs, top=0.25, floor=0.4)
    strength = [np.nanmean(r) for r in refs]
    strong = [refs[i] for i in sorted(range(12), key=lambda i: -strength[i])[:3]]
    spread = []
    for j in range(10):
        col = [r[j] for r in strong if not np.isnan(r[j])]
        spread.append(np.sqrt(np.mean(col) * (1 - np.mean(col))))
    spread = np.asarray(spread)
    np.testing.assert_allclose(got, 0.4 + 0.6 * spread / spread.mean(), rtol=1e-12)
    assert got.mean() == pytest.approx(1.0)
    np.testing.assert_array_equal(history_weights(np.ones((6, 4))), np.ones(4))
    with pytest.raises(ValueError, match="floor"):
        history_weights(refs, floor=0.0)


@pytest.mark.parametrize("with_factors", [False, True])
def test_the_session_with_weights_equals_the_pure_function_and_resumes(tmp_path,
                                                                      with_factors):
    """Ask/tell with item weights (and, in the second case, a factor model too), pairs told
    in a shuffled order and the journal resumed part-way: the elimination order is that of
    run_history_schedules with the same seed and weights; the weights come back from the
    history file."""
    from bayeval.data.matrix import ScoreMatrix
    from bayeval.evaluators import MatrixPairOracle
    from bayeval.selection.session import SelectionSession

    rng = np.random.default_rng(9)
    K, L, budget = 5, 30, 70
    values = (rng.random((K, L)) < rng.random((K, 1))).astype(float)
    matrix = ScoreMatrix(values, [f"m{i}" for i in range(K)], [f"q{j}" for j in range(L)],
                         name="toy")
    w = history_weights((rng.random((8, L)) < 0.7).astype(float))
    history = History(jnp.asarray(rng.normal(size=(L, 2))), jnp.asarray([0.2, 0.1]),
                      jnp.asarray(np.eye(2) * 0.5)) if with_factors else None
    schedule = jnp.asarray(phase_schedule(K, L, budget))[None]
    pure = run_history_schedules(jnp.asarray(values), jax.random.key(13)[None], schedule,
                                 history, jnp.asarray(w))
    expected = [f"m{i}" for i in np.asarray(pure.order[0, 0])]

    journal = tmp_path / "sel.jsonl"
    session = SelectionSession(matrix.models, matrix.items, budget, seed=13,
                               journal=journal, history=history, weights=w)
    oracle = MatrixPairOracle(matrix)
    told = 0
    while not session.done and told < 22:
        pairs = session.ask()
        for p in rng.permutation(len(pairs))[:22 - told]:
            session.tell(*pairs[p], oracle(*pairs[p]))
            told += 1
    session.close()
    resumed = SelectionSession.resume(journal)
    np.testing.assert_array_equal(resumed.weights, w)
    resumed.run(oracle)
    assert resumed.eliminated + [resumed.best] == expected
    # the order is the race's for the seed, and each model's estimate is (★w) / (★) on it
    order, pi = weighted_order(jax.random.split(jax.random.key(13))[0], jnp.asarray(w))
    np.testing.assert_array_equal(resumed.item_order, np.asarray(order))
    sums = np.asarray(weighted_sums(jnp.asarray(values), order, pi) if history is None
                      else corrected_sums(jnp.asarray(values), order, history, pi))
    means = resumed.means()
    for i, m in enumerate(matrix.models):
        estimate, n = means[m]
        assert estimate == pytest.approx(sums[i, n - 1] / n, abs=1e-12)
    assert any(abs(means[m][0] - values[i, np.asarray(order)[:means[m][1]]].mean()) > 1e-3
               for i, m in enumerate(matrix.models))  # not the plain mean
