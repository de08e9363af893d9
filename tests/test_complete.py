"""Once every item is scored, the score is known: every method reports the mean of the
scores with a zero-width interval (``bayeval.estimators.base.exact_when_complete``, which
every Method's estimator is wrapped in), whatever its estimator, batch size or targets.

The reference is the enumeration itself: the target's mean over all N items, computed
with NumPy. Without the wrapper the design-valid estimate at n = N is not the mean (on a
world of 12 items: 0.3344 [0.3333, 0.3344] against the exact 1/3), and IRT's bounds differ
from it by 1e-16.
"""

from __future__ import annotations

import pytest

from bayeval.loop.session import Session
from bayeval.methods import method_names
from bayeval.methods.base import accepts_parameter


@pytest.fixture(scope="module")
def world(engine_world):
    """The shared world (conftest: 30 IFEval models, 40 items) and two targets: its
    target, and its last reference model (held out, the reference then 29 models) for the
    methods with a target axis, as tests/test_engine.py runs them: the programs are the
    same."""
    reference, target = engine_world
    last = reference.models[-1]
    return reference, target, reference.drop_models([last]), reference.row(last)


def _never_stopping(name: str, method_settings: dict) -> dict:
    """The shared settings of ``name`` with a stop that cannot fire before every item is
    scored (ε and n_min are values of the compiled programs, so these are the shared
    programs; FAQ's budget is structure: its own)."""
    settings = dict(method_settings.get(name, {}))
    if accepts_parameter(name, "epsilon"):
        settings["epsilon"] = 1e-9
    if accepts_parameter(name, "budget"):  # FAQ: draws with replacement, a fixed budget
        settings["budget"] = 10_000
    return settings


def _assert_exact(value, lower, upper, truth):
    assert value == pytest.approx(truth, abs=1e-12)
    assert lower == upper == value  # zero width, the endpoint exact


@pytest.mark.parametrize("name", [m for m in method_names() if "joint" not in m])
@pytest.mark.parametrize("batch", [1, 5])
def test_every_method_is_exact_once_every_item_is_scored(world, name, batch, method_settings):
    reference, truth, _, _ = world
    n_items = reference.n_items
    session = Session(reference, "new", name,
                      method_params=_never_stopping(name, method_settings), seed=3)
    seen: set[str] = set()
    while len(seen) < n_items:
        asked = session.ask(batch)
        assert asked, f"{name} stopped after {len(seen)} of {n_items} items"
        for item in asked:
            session.tell(item, truth[reference.item_index(item)])
            seen.add(item)
    _assert_exact(*session.estimate(), truth.mean())


@pytest.mark.parametrize("name", [m for m in method_names() if "joint" in m])
def test_every_joint_method_is_exact_for_each_target_once_it_is_complete(world, name,
                                                                         method_settings):
    _, target, rest, other = world
    targets = {"new": target, "other": other}
    session = Session(rest, list(targets), name,
                      method_params=_never_stopping(name, method_settings), seed=3)
    seen: dict[str, set] = {t: set() for t in targets}
    while any(len(s) < rest.n_items for s in seen.values()):
        asked = session.ask()
        assert asked, f"{name} stopped before every item of every target was scored"
        for t, item in asked:
            session.tell(item, targets[t][rest.item_index(item)], target=t)
            seen[t].add(item)
    for t, row in targets.items():
        _assert_exact(*session.estimate(t), row.mean())
