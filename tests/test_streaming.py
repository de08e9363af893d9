"""Streaming draws (docs/methods.md §9 "Streaming"): K evaluations in flight, rounds drawn from
the scores arrived by then and applied in draw order. Unbiasedness by enumeration over
draws and completion orders; the Session against the simulator with completion delays;
the journal with items in flight; a batch as the special case of completions in blocks."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.data import ScoreMatrix
from bayeval.errors import SessionError
from bayeval.estimators.design_valid import round_estimate
from bayeval.loop.session import Session
from bayeval.loop.simulate import _compile_chunk, _compile_stream_chunk, completion_delay, simulate
from bayeval.methods import make_method


@pytest.fixture(scope="module")
def world(ifeval_slice):
    return ifeval_slice(5, 30, 40, "engine")  # test_engine's world: its programs are shared


def _enumerate(method, reference: ScoreMatrix, scores: np.ndarray, concurrency: int,
               finishes_first, in_draw_order: bool = True) -> list[float]:
    """E[θ̂_t] for every round t, by enumerating every draw sequence of a streaming run
    with ``concurrency`` items in flight, completions in the order ``finishes_first``
    (in-flight cells, their scores → the cell that finishes next) gives. Rounds are
    applied in draw order once the earlier ones are in (or, with ``in_draw_order``
    False, as they finish: the wrong way)."""
    N = reference.n_items
    expected = np.zeros(N)
    start = method.start(reference.scores, N)

    def apply(loop, item, q, design, applied, prob):
        """Add the round's θ̂ to E[θ̂_applied] and record it."""
        theta = round_estimate(loop.estimator.inner, loop.prediction, jnp.int32(item),
                               jnp.float64(scores[item]), jnp.float64(q))
        expected[applied] += prob * float(theta)
        return method.step(loop, np.int32(item), np.float64(scores[item]), _draw(q, design),
                           np.float64(applied + 1), jax.random.key(applied))[0]

    def grow(loop, drawn, flying, arrived, applied, prob):
        # 1. apply what can be applied (draw order), 2. draw while a slot is free,
        # 3. else let one item finish
        if in_draw_order and applied < len(drawn) and drawn[applied][0] in arrived:
            loop = apply(loop, *drawn[applied], applied, prob)
            return grow(loop, drawn, flying, arrived, applied + 1, prob)
        if len(drawn) == N and not flying and applied == N:
            return
        taken = {d[0] for d in drawn}
        if len(flying) < concurrency and len(drawn) < N:
            available = np.array([j not in taken for j in range(N)])
            for item in np.flatnonzero(available):
                draw = method.probability(loop, available, np.int32(item))
                q, design = float(draw.q), float(draw.design)
                grow(loop, [*drawn, (int(item), q, design)], [*flying, int(item)],
                     arrived, applied, prob * q)
            return
        done = finishes_first(flying, scores)
        rest = [c for c in flying if c != done]
        if not in_draw_order:  # apply the finished round at once, whatever came before
            round_ = drawn[[d[0] for d in drawn].index(done)]
            loop = apply(loop, *round_, applied, prob)
            return grow(loop, drawn, rest, arrived | {done}, applied + 1, prob)
        return grow(loop, drawn, rest, arrived | {done}, applied, prob)

    grow(method.begin(start, jax.random.key(0)), [], [], frozenset(), 0, 1.0)
    return list(expected)


def _draw(q, design):
    from bayeval.estimators.base import Draw

    return Draw(np.float64(q), np.float64(design))


def test_streaming_rounds_are_unbiased_by_enumeration(world):
    # 5 items, 2 in flight; the completion order depends on the items and on their
    # scores (the slow item is the one scored 1, then the larger index): every round's
    # E[θ̂_t] is the true mean to rounding. Applying rounds as they finish instead (the
    # prediction then reads a later draw's score) is biased, which shows the check bites.
    reference, _target = world
    small = ScoreMatrix(reference.scores[:8, :5], reference.models[:8], reference.items[:5],
                        name="five")
    scores = np.array([1.0, 0.0, 1.0, 0.0, 0.0])
    method = make_method("active-pai", predictor="exact", refit_every=0)

    def slow_ones_last(flying, s):
        return max(flying, key=lambda c: (-s[c], c))

    truth = scores.mean()
    for rule in (slow_ones_last, lambda flying, s: min(flying)):
        expected = _enumerate(method, small, scores, 2, rule)
        np.testing.assert_allclose(expected, truth, atol=1e-12)
    wrong = _enumerate(method, small, scores, 2, slow_ones_last, in_draw_order=False)
    assert max(abs(e - truth) for e in wrong) > 1e-4, wrong


def _event_loop(session: Session, target: np.ndarray, seed: int, concurrency: int = 1,
                batch: int = 1) -> int:
    """Run ``session`` with the simulator's clock: each round finishes after
    ``completion_delay`` (a batch after 1 together), scores are told as they finish and
    a new item is asked as a slot frees. Returns the items drawn by the end (every one
    told: after the stop, what is in flight is waited for)."""
    key = jax.random.key(seed)
    now, order, flying = 0.0, 0, []
    while True:
        if not session.done:
            if batch > 1:
                asked = session.ask(batch) if not flying else []
            else:
                asked = session.ask(1) if len(flying) < concurrency else []
            for item in asked:
                delay = 1.0 if batch > 1 else float(completion_delay(key, order, 1.0))
                flying.append((now + delay, order, item))
                order += 1
            if asked and batch == 1 and len(flying) < concurrency:
                continue
        if not flying:  # after the stop, what is in flight is still told
            return order
        flying.sort()
        now, _, item = flying.pop(0)
        session.tell(item, float(target[session.reference.item_index(item)]))


@pytest.mark.parametrize(("concurrency", "batch"), [(4, 1), (1, 6)])
def test_session_is_the_simulator_with_completion_delays(world, concurrency, batch):
    reference, target = world
    method = make_method("active-pai", epsilon=0.1)
    seeds = [0, 1]
    sim = simulate(method, reference.scores, np.stack([target] * 2), seeds, until_stop=True,
                   concurrency=concurrency, batch=batch)
    for r, seed in enumerate(seeds):
        session = Session(reference, "new", method, seed=seed)
        drawn = _event_loop(session, target, seed, concurrency, batch)
        n = session.n_observed
        # every round drawn before the stop is applied: the run reports at the last
        assert n == sim.stop_n[r] == drawn == sim.drawn_at_stop[r]
        assert [reference.item_index(i) for i, _ in session.observations] == \
            list(sim.items[r, :n])
        history = np.array([h[1:] for h in session.history])
        np.testing.assert_allclose(history[:, 0], sim.estimate[r, :n], rtol=0, atol=1e-10)
        np.testing.assert_allclose(history[:, 1], sim.lower[r, :n], rtol=0, atol=1e-9)
        np.testing.assert_allclose(history[:, 2], sim.upper[r, :n], rtol=0, atol=1e-9)
        # items were in flight when the rule fired, and their scores entered the estimate
        assert session.stopped_at[0] < n


def test_one_in_flight_is_the_one_at_a_time_run(world):
    # the streaming engine with K = 1 takes the one-at-a-time engine's every step
    reference, target = world
    method = make_method("active-pai", epsilon=0.1)
    loop0 = method.start(reference.scores, reference.n_items)
    keys = jax.vmap(jax.random.key)(jnp.arange(2))
    targets = jnp.asarray(np.stack([target] * 2))
    loops = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (2, *jnp.shape(x))), loop0)
    values = method.hyper_values
    plain = _compile_chunk(method.compiled_as, reference.n_items, False)(values, loops, keys,
                                                                       targets)
    stream = _compile_stream_chunk(method.compiled_as, reference.n_items, False, 1, 1)(
        values, loops, keys, targets, jnp.ones(targets.shape))
    np.testing.assert_array_equal(plain[0]["items"], stream[0]["items"])  # every step
    # two differently compiled programs: XLA may fuse their sums differently and round a
    # last bit apart (seen with its CPU fusion emitters off, as the tests compile), never
    # more than a few units in the last place
    np.testing.assert_allclose(plain[0]["estimate"], stream[0]["estimate"], rtol=1e-14,
                               atol=0)
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-14, atol=0),
                           plain[1], stream[1])


def test_a_crash_with_items_in_flight_loses_no_score_and_reasks_the_rest(world, tmp_path):
    reference, target = world
    method = make_method("active-pai", epsilon=0.1)

    def score(item):
        return float(target[reference.item_index(item)])

    journal = tmp_path / "run.jsonl"
    session = Session(reference, "new", method, seed=3, journal=journal)
    first = session.ask(4)
    session.tell(first[2], score(first[2]))  # finishes early: kept, not yet applied
    session.tell(first[0], score(first[0]))  # applies round 0 only
    assert session.n_observed == 1 and session.outstanding() == [first[1], first[3]]
    session.close()  # the crash: rounds 1 and 3 were in flight
    records = [json.loads(x) for x in journal.read_text().splitlines()[1:]]
    assert [r["event"] for r in records] == ["ask"] * 4 + ["tell"] * 2
    assert [r["order"] for r in records] == [0, 1, 2, 3, 2, 0]
    assert [r["n"] for r in records[4:]] == [1, 2]
    resumed = Session.resume(journal, reference)
    assert resumed.n_observed == 1
    assert resumed.ask(4) == [first[1], first[3]]  # exactly the unfinished ones, first
    for item in (first[3], first[1]):
        resumed.tell(item, score(item))
    # the uninterrupted run with the same answers, told in draw order
    straight = Session(reference, "new", method, seed=3)
    for item in straight.ask(4):
        straight.tell(item, score(item))
    assert resumed.observations == straight.observations
    assert resumed.estimate() == straight.estimate()
    assert resumed.ask(2) == straight.ask(2)
    pending = straight.outstanding()  # two rounds in flight: the later one told twice
    straight.tell(pending[1], score(pending[1]))
    with pytest.raises(SessionError, match="already told"):
        straight.tell(pending[1], score(pending[1]))
    resumed.close()


def test_run_with_concurrency_tells_as_evaluations_finish(world):
    # a threaded run: the slow items finish last; every drawn item is told, in any order,
    # and the result is that of the rounds in draw order
    import time

    reference, target = world
    method = make_method("active-pai", epsilon=0.1)

    def evaluate(item):
        j = reference.item_index(item)
        time.sleep(0.02 if j % 3 == 0 else 0.001)
        return float(target[j])

    session = Session(reference, "new", method, seed=1)
    value, lower, upper = session.run(evaluate, concurrency=4)
    assert session.done and lower <= value <= upper
    # nothing was in flight at the end: every drawn item's score is in the estimate
    assert session.n_drawn == session.n_observed and not session.outstanding()
    times = session.times.summary(reference.n_items)
    assert times["items_timed"] == session.n_observed
    assert times["evaluator_seconds"] > 0 and times["wall_seconds"] > 0
    assert times["full_run_lower"] <= times["full_run_seconds"] <= times["full_run_upper"]
