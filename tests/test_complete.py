"""Once every item is scored, the score is known: every method reports the mean of the
scores with a zero-width interval (``bayeval.estimators.base.exact_when_complete``, which
every Method's estimator is wrapped in), whatever its estimator, batch size or targets.

The reference is the enumeration itself: the target's mean over all N items, computed
with NumPy. Without the wrapper the design-valid estimate of this world at n = N is
0.3344 [0.3333, 0.3344] against the exact 1/3, and IRT's bounds differ from it by 1e-16.
"""

from __future__ import annotations

import numpy as np
import pytest

from bayeval.data import ScoreMatrix
from bayeval.methods import method_names
from bayeval.methods.base import accepts_parameter
from bayeval.session import Session

N_ITEMS = 12


@pytest.fixture(scope="module")
def world():
    """6 reference models and two targets on 12 items of graded difficulty."""
    rng = np.random.default_rng(0)
    scores = (rng.random((8, N_ITEMS)) < np.linspace(0.2, 0.8, N_ITEMS)).astype(float)
    reference = ScoreMatrix(scores[2:], [f"m{i}" for i in range(6)],
                            [f"i{j}" for j in range(N_ITEMS)], name="complete")
    return reference, {"new": scores[0], "other": scores[1]}


def _never_stopping(name: str) -> dict:
    """Settings under which ``name`` runs until every item is scored."""
    if accepts_parameter(name, "epsilon"):
        return {"epsilon": 1e-9}
    if accepts_parameter(name, "budget"):  # FAQ: draws with replacement, a fixed budget
        return {"budget": 10_000}
    return {}


def _assert_exact(value, lower, upper, truth):
    assert value == pytest.approx(truth, abs=1e-12)
    assert lower == upper == value  # zero width, the endpoint exact


@pytest.mark.parametrize("name", [m for m in method_names() if "joint" not in m])
@pytest.mark.parametrize("batch", [1, 5])
def test_every_method_is_exact_once_every_item_is_scored(world, name, batch):
    reference, targets = world
    truth = targets["new"]
    session = Session(reference, "new", name, method_params=_never_stopping(name), seed=3)
    seen: set[str] = set()
    while len(seen) < N_ITEMS:
        asked = session.ask(batch)
        assert asked, f"{name} stopped after {len(seen)} of {N_ITEMS} items"
        for item in asked:
            session.tell(item, truth[int(item[1:])])
            seen.add(item)
    _assert_exact(*session.estimate(), truth.mean())


@pytest.mark.parametrize("name", [m for m in method_names() if "joint" in m])
def test_every_joint_method_is_exact_for_each_target_once_it_is_complete(world, name):
    reference, targets = world
    session = Session(reference, list(targets), name, method_params=_never_stopping(name),
                      seed=3)
    seen: dict[str, set] = {t: set() for t in targets}
    while any(len(s) < N_ITEMS for s in seen.values()):
        asked = session.ask()
        assert asked, f"{name} stopped before every item of every target was scored"
        for target, item in asked:
            session.tell(item, targets[target][int(item[1:])], target=target)
            seen[target].add(item)
    for target, row in targets.items():
        _assert_exact(*session.estimate(target), row.mean())
