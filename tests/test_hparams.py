"""Hyperparameters are values (bayeval.hparams): methods that differ only in a traced
setting share every compiled program, and give what the same method with the setting
baked in as a constant gives."""

from __future__ import annotations

import contextlib

import jax
import numpy as np
import pytest

from bayeval import Session, make_method
from bayeval.loop.simulate import simulate
from bayeval.methods.active import active_pai

_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
           "/jax/core/compile/backend_compile_duration")
_seen: list[str] = []


def _listen(event: str, duration: float, **kwargs) -> None:
    if event in _EVENTS:
        _seen.append(event)


jax.monitoring.register_event_duration_secs_listener(_listen)


@contextlib.contextmanager
def traces():
    """Counts the programs JAX traces or compiles inside the block (a hit of the
    in-memory jit cache does neither)."""
    start = len(_seen)
    counter = {"n": 0}
    yield counter
    counter["n"] = len(_seen) - start


@pytest.fixture(scope="module")
def world(engine_world):
    return engine_world  # conftest's: the programs of tests/test_engine.py


def _session_run(method, reference, target, rounds=6):
    session = Session(reference, "new", method=method, seed=1)
    for _ in range(rounds):
        (item,) = session.ask()
        session.tell(item, float(target[list(reference.items).index(item)]))
    return session.estimate()


@pytest.mark.parametrize("name, first, second", [
    ("active-pai", dict(epsilon=0.1, tau=0.05, p_min=0.02, temperature=1.0, n_min=5),
     dict(epsilon=0.07, tau=0.2, p_min=0.05, temperature=3.0, n_min=8)),
    ("bayesame", dict(epsilon=0.05, epsilon1=0.005), dict(epsilon=0.02, epsilon1=0.01)),
])
def test_changing_a_traced_setting_compiles_nothing(world, name, first, second,
                                                    method_settings):
    reference, target = world
    targets, seeds = np.stack([target] * 2), np.arange(2)
    shared = method_settings.get(name, {})
    first, second = {**shared, **first}, {**shared, **second}
    a = make_method(name, **first)
    _session_run(a, reference, target)
    simulate(a, reference.scores, targets, seeds, n_steps=12)
    b = make_method(name, **second)
    assert b is not a and b.compiled_as == a.compiled_as
    with traces() as count:
        estimate = _session_run(b, reference, target)
        result = simulate(b, reference.scores, targets, seeds, n_steps=12)
    assert count["n"] == 0
    assert np.isfinite(estimate[0]) and np.isfinite(result.estimate).all()


def test_joint_learning_rate_is_a_value(world, method_settings):
    # the learning rate of multi-target BayesAME's AdamW re-fits lives in its state
    reference, target = world
    rest = reference.drop_models([reference.models[-1]])
    targets = np.stack([target, reference.row(reference.models[-1])])[None]
    settings = method_settings["bayesame-joint"]
    a = make_method("bayesame-joint", **settings, learning_rate=0.01)
    simulate(a, rest.scores, targets, np.arange(1), n_steps=18)
    b = make_method("bayesame-joint", **settings, learning_rate=0.05)
    with traces() as count:
        simulate(b, rest.scores, targets, np.arange(1), n_steps=18)
    assert count["n"] == 0


def test_a_structural_setting_is_its_own_program():
    assert (make_method("active-pai", predictor="exact").compiled_as
            != make_method("active-pai", predictor="difficulty").compiled_as)
    assert (make_method("active-pai", n_min=10).compiled_as
            == make_method("active-pai", n_min=20).compiled_as)  # n_min is a value
    assert (make_method("active-pai", budget=None).compiled_as
            != make_method("active-pai", budget=100).compiled_as)


def test_traced_settings_give_what_constants_give(world):
    # the same method built by the bare factory (no program: every setting a constant of
    # its own compiled programs) runs the same rounds to the last bit
    reference, target = world
    settings = dict(epsilon=0.08, tau=0.1, p_min=0.03, recalibrate=5.0, anytime=True,
                    anytime_rounds=0.3)
    traced = make_method("active-pai", **settings)
    constant = active_pai.__wrapped__(**{**traced.params, **settings})
    assert constant.program is None and traced.program is not None
    targets, seeds = np.stack([target] * 3), np.arange(3)
    a = simulate(traced, reference.scores, targets, seeds, n_steps=25)
    b = simulate(constant, reference.scores, targets, seeds, n_steps=25)
    np.testing.assert_array_equal(a.items, b.items)
    np.testing.assert_array_equal(a.estimate, b.estimate)
    np.testing.assert_array_equal(a.lower, b.lower)
    np.testing.assert_array_equal(a.upper, b.upper)


def test_a_factory_registered_again_is_a_program_of_its_own():
    # same name, same settings, new code (a notebook cell run again after an edit): the
    # old factory's compiled programs must not be reused for the new one
    from bayeval.methods import method_factory
    from bayeval.methods.base import _REGISTRY

    def build(epsilon: float = 0.1):
        return active_pai.__wrapped__(epsilon=epsilon)

    try:
        first = method_factory("hp-test-again", hyper=("epsilon",))(build)()
        second = method_factory("hp-test-again", hyper=("epsilon",))(
            lambda epsilon=0.1: active_pai.__wrapped__(epsilon=epsilon))()
        assert first.compiled_as != second.compiled_as
        again = method_factory("hp-test-again", hyper=("epsilon",))(build)()
        assert again.compiled_as == first.compiled_as
    finally:
        _REGISTRY.pop("hp-test-again", None)  # no other test may see it


def test_a_traced_setting_is_still_checked():
    with pytest.raises(Exception, match="tau"):
        make_method("active-pai", tau=0.0)
    with pytest.raises(Exception, match="epsilon"):
        make_method("bayesame", epsilon=-1.0)


def test_params_are_the_factory_signature():
    method = make_method("active-pai", epsilon=0.1)
    assert method.params["epsilon"] == 0.1 and method.params["predictor"] == "difficulty"
    assert set(method.params) == set(active_pai.__wrapped__.__code__.co_varnames[
        :active_pai.__wrapped__.__code__.co_argcount])
    assert method.hyper["epsilon"] == 0.1 and "predictor" not in method.hyper


def test_the_shared_programs_keep_only_the_most_recently_used(monkeypatch):
    # a notebook that tries many structural settings: the programs are bounded, the
    # least recently requested dropped first; building the jitted op compiles nothing
    from bayeval.methods import base

    monkeypatch.setattr(base, "MAX_PROGRAMS", 2)
    monkeypatch.setattr(base, "_PROGRAMS", {})
    methods = [make_method("active-pai", budget=1000 + k) for k in range(4)]
    for method in methods:
        method.select  # noqa: B018 (the cached jitted op, built on first access)
    assert list(base._PROGRAMS) == [(m.compiled_as, "select") for m in methods[2:]]
    again = make_method("active-pai", budget=1002, epsilon=0.3)  # a value: same program
    assert again.compiled_as == methods[2].compiled_as
    again.select  # noqa: B018
    assert list(base._PROGRAMS)[-1] == (methods[2].compiled_as, "select")
    assert again.select.func is methods[2].select.func  # one jitted program for both
