"""How a run in batches sizes its calls (bayeval.loop.call_sizes): the rule's sizes
against their formula, the width law against its closed form, the simulator's run with a
call rule against the live Session driven by the same rule (items, estimates, stop and
calls), and the rule's names and errors."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeval.evaluation.options import CallSizing
from bayeval.evaluation.plan import CallSizes, in_flight_sizes
from bayeval.loop.call_sizes import (
    CALL_RULES,
    CallRule,
    call_size,
    calls_for,
    documents_for_width,
    parse_call_rule,
)
from bayeval.loop.session import Session
from bayeval.loop.simulate import completion_delay, simulate
from bayeval.methods import make_method


@pytest.fixture(scope="module")
def world(ifeval_slice):
    return ifeval_slice(5, 30, 40, "engine")  # test_engine's world: its programs are shared


def test_the_width_law_reaches_epsilon_where_its_closed_form_says():
    # w² = k (1/n − 1/N): at D the width k (1/D − 1/N) is ε² exactly
    for width, n, big_n, eps in [(0.3, 32, 500, 0.05), (0.08, 100, 1172, 0.05),
                                 (0.2, 10, 40, 0.1)]:
        d = documents_for_width(width, n, big_n, eps)
        k = width**2 / (1 / n - 1 / big_n)
        assert k * (1 / d - 1 / big_n) == pytest.approx(eps**2, rel=1e-12)
        assert n < d < big_n


def test_call_sizes_follow_their_formula_for_numbers_and_arrays():
    rule = CallRule(first=8, rate=1.0, taper=0.5, epsilon=0.05, smallest=4)
    big_n, batch = 500, 32
    drawn = np.array([0, 8, 16, 40, 100, 200, 300])
    widths = np.array([1.0, 0.4, 0.2, 0.09, 0.06, 0.052, 0.04])
    traced = np.asarray(call_size(jnp.asarray(drawn), batch, rule, jnp.asarray(widths),
                                  big_n))
    for n, w, got in zip(drawn, widths, traced, strict=True):
        grown = min(batch, max(8, math.ceil(1.0 * n)))  # the growth, rate 1
        expected = grown
        if n > 0:
            left = documents_for_width(w, n, big_n, 0.05) - n
            expected = min(grown, max(4, math.ceil(0.5 * max(left, 0.0))))
        assert call_size(int(n), batch, rule, float(w), big_n) == expected == got, (n, w)
    # no rule: the batch; growth alone: 8, 8, 16, 32, 32, …
    assert call_size(100, batch, None, 0.06, big_n) == batch
    grow = CallRule(first=8, rate=1.0)
    sizes, drawn_so_far = [], 0
    for _ in range(5):
        sizes.append(call_size(drawn_so_far, batch, grow))
        drawn_so_far += sizes[-1]
    assert sizes == [8, 8, 16, 32, 32]
    assert calls_for(96, batch, grow) == 5 and calls_for(96, batch, None) == 3
    # with N, the taper's last calls on the width law (worked by hand for D = 100):
    # fine 8, 8, 16, 32, then half of what is left (36 → 18, 18 → 9, 9 → 5, 4 → 2) and 2;
    # the taper 32, 32, 32, then max(8, 4); without it, ⌈100/32⌉
    fine = CallRule(first=8, rate=1.0, taper=0.5, smallest=2, epsilon=0.05)
    assert calls_for(100, 32, fine, 10**9) == 9
    assert calls_for(100, 32, CallRule(taper=1.0, epsilon=0.05), 10**9) == 4
    assert calls_for(100, 32, fine) == calls_for(100, 32, fine._replace(taper=0.0)) == 6


def test_the_simulator_with_a_call_rule_is_the_session_driven_by_it(world):
    reference, target = world
    method = make_method("active-pai", epsilon=0.3, n_min=5)
    rule = CallRule(first=2, rate=1.0, taper=1.0, epsilon=0.3, smallest=2)
    seeds = [0, 1, 2]
    sim = simulate(method, reference.scores, np.stack([target] * 3), seeds, until_stop=True,
                   batch=6, call_rule=rule)
    for r, seed in enumerate(seeds):
        session = Session(reference, "new", method, seed=seed)
        sizes = CallSizes(None, 6, call_rule=rule)
        asked = []
        while not session.done:
            items = session.ask(sizes(session))
            asked.append(len(items))
            for item in items:  # a call's scores arrive together, after it
                session.tell(item, float(target[reference.item_index(item)]))
        n = session.n_observed
        assert n == sim.stop_n[r] == sim.drawn_at_stop[r] == sum(asked)
        assert len(asked) == sim.calls[r]
        assert max(asked) <= 6 and asked[0] == 2
        assert [reference.item_index(i) for i, _ in session.observations] == \
            list(sim.items[r, :n])
        history = np.array([h[1:] for h in session.history])
        np.testing.assert_allclose(history[:, 0], sim.estimate[r, :n], rtol=0, atol=1e-10)
    # without a rule every call but the last is the batch
    fixed = simulate(method, reference.scores, np.stack([target] * 3), seeds,
                     until_stop=True, batch=6)
    assert np.all(fixed.calls == np.ceil(fixed.drawn_at_stop / 6))


def _in_flight_loop(session: Session, target: np.ndarray, seed: int, concurrency: int,
                    allowed) -> int:
    """tests/test_streaming.py's event loop (each round finishes after
    ``completion_delay``, told as it finishes) with at most ``allowed(session)`` rounds
    drawn ahead of those applied. Returns the rounds drawn."""
    key = jax.random.key(seed)
    now, order, flying = 0.0, 0, []
    while True:
        if (not session.done and len(flying) < concurrency
                and session.n_drawn - session.n_observed < allowed(session)):
            [item] = session.ask(1)
            flying.append((now + float(completion_delay(key, order, 1.0)), order, item))
            order += 1
            continue
        if not flying:
            return order
        flying.sort()
        now, _, item = flying.pop(0)
        session.tell(item, float(target[session.reference.item_index(item)]))


def test_with_evaluations_in_flight_the_taper_is_the_simulators(world):
    reference, target = world
    method = make_method("active-pai", epsilon=0.3, n_min=5)
    rule = CallRule(taper=1.0, epsilon=0.3)
    seeds = [0, 1, 2]
    sim = simulate(method, reference.scores, np.stack([target] * 3), seeds, until_stop=True,
                   concurrency=4, call_rule=rule)
    for r, seed in enumerate(seeds):
        session = Session(reference, "new", method, seed=seed)
        allowed = in_flight_sizes(session, "taper", 4)  # what a live run is given
        drawn = _in_flight_loop(session, target, seed, 4, allowed)
        n = session.n_observed
        assert n == sim.stop_n[r] == drawn == sim.drawn_at_stop[r]
        assert [reference.item_index(i) for i, _ in session.observations] == \
            list(sim.items[r, :n])
    # the taper held draws back here: the runs are not those with K in flight throughout
    plain = simulate(method, reference.scores, np.stack([target] * 3), seeds,
                     until_stop=True, concurrency=4)
    assert np.any(sim.drawn_at_stop != plain.drawn_at_stop)


def test_call_rules_are_named_or_given_as_fields_and_bad_ones_are_one_line():
    assert parse_call_rule("fixed", 0.05) is None
    assert parse_call_rule("taper", 0.05) == CallRule(taper=1.0, epsilon=0.05)
    assert parse_call_rule("grow", 0.1) == CallRule(first=8, rate=1.0, taper=1.0,
                                                    epsilon=0.1)
    fine = parse_call_rule("fine", 0.05)
    assert fine == CallRule(first=8, rate=1.0, taper=0.5, smallest=2, epsilon=0.05)
    # half the documents predicted left (D − n = 40 at w = 0.05 · sqrt(2) after n = 40 of
    # N = ∞-like 10⁹: D = 2n), down to 2
    assert call_size(40, 32, fine, 0.05 * 2**0.5, 10**9) == 20
    assert call_size(200, 32, fine, 0.0501, 10**9) == 2
    assert parse_call_rule("taper=0.5,smallest=4", 0.05) == CallRule(
        taper=0.5, smallest=4, epsilon=0.05)
    # the setting's choices are the rules' names
    assert set(CALL_RULES) == {c.value for c in CallSizing} == {"fixed", "taper", "grow",
                                                                "fine"}
    for bad, says in [("sometimes", "give fixed, taper, grow"), ("taper=x", "not a number"),
                      ("first=-1", "first must be"), ("epsilon=0.1", "give fixed"),
                      ("taper=nan", "taper must be")]:
        with pytest.raises(ValueError, match=says) as caught:
            parse_call_rule(bad, 0.05)
        assert "\n" not in str(caught.value)
