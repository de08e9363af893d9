"""A method's target axis: one target, or T targets taken in turn (seed 000 §3.2, App. C.1;
docs/methods.md §2).

Every :class:`~bayeval.methods.base.Method` runs T ≥ 1 targets through the same hooks; this
part says what the target axis is. Its positions are the (target, item) cells c = t · N + i;
the estimator's and the stopping rule's states carry one row per target, each target's
estimate is its own estimator's, and the stop is every target's. With one target
(:func:`one_target`, every method's default) the axis has length one and is not stored: rows,
maps and the plan vanish, so a one-target method compiles to the program it always had.
With several (:class:`TargetTurns`, the multi-target methods' part) a run:

1. asks every target on the same random ⌈``init_fraction`` · N⌉ items first (the initial
   design, item by item, each target in turn; in a random order when the estimator weighs
   each draw by its probability);
2. then draws, among the targets that have not met their stopping rule, from the method's
   rule and policy over the turn's target's items (``in_turn``: round robin after the
   target told last) or over every open target's items; the rule's weights are used only
   when the reference vectors are nearly unique (B ≥ N − N0), else the item is drawn at
   random;
3. updates the told target's estimator and stopping rule;
4. stops when every target has met its rule after the initial design.

The design and the turn live in the loop's ``plan`` (:class:`JointPlan`), so a run is a pure
function of its seed and answers. A design cell that could not be evaluated (a Session
``skip``) counts as done for the design.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bayeval.acquisition import multi_target as mt
from bayeval.acquisition.base import probabilities
from bayeval.errors import BayevalError
from bayeval.estimators.base import Draw
from bayeval.inference.joint import design_size
from bayeval.types import Array, Prediction, State

__all__ = ["INIT_STREAM", "JointPlan", "JointProgress", "OneTarget", "TargetTurns", "Turns",
           "one_target"]

INIT_STREAM = 2**31 - 3  # fold_in of a run's key: its initial design


class JointPlan(NamedTuple):
    """What the choice of the next cell reads besides the prediction."""

    design: Array  # (D,) cells of the initial design, in the order they are asked
    consumed: Array  # (D,) bool: scored, or skipped
    last: Array  # () int32: the target observed last (−1 before any); the turn goes on
    #                after it


class JointProgress(NamedTuple):
    """The stopping state of several targets: each target's rule state (leading target
    axis) and whether it has met its rule."""

    rules: State
    met: Array  # (T,) bool


def _row(tree: Any, t: Array) -> Any:
    return jax.tree_util.tree_map(lambda x: x[t], tree)


def _set_row(tree: Any, t: Array, row: Any) -> Any:
    return jax.tree_util.tree_map(lambda a, b: a.at[t].set(b), tree, row)


@dataclass(frozen=True)
class OneTarget:
    """One target: the axis of length one, not stored (module docstring)."""

    several = False
    # a draw's probability can be recomputed from the journal (Method.probability)
    replayable = True

    def check(self, name: str, n_targets: int) -> None:
        if n_targets != 1:
            raise BayevalError(f"method {name!r} evaluates one target, not {n_targets} "
                               "(bayesame-joint evaluates several jointly)")

    def plan(self, n_items: int, n_targets: int, key: Array | None = None,
             random_order: bool = False) -> None:
        """Nothing: the choice reads the prediction only."""
        return None

    @staticmethod
    def count(prediction: Prediction) -> int:
        return 1

    @staticmethod
    def stack(tree: Any, prediction: Prediction) -> Any:
        return tree

    @staticmethod
    def over(f: Callable) -> Callable:
        return f

    @staticmethod
    def split(item: Array, prediction: Prediction) -> tuple[None, Array]:
        return None, item

    @staticmethod
    def row(tree: Any, t: Any) -> Any:
        return tree

    @staticmethod
    def set_row(tree: Any, t: Any, row: Any) -> Any:
        return row

    @staticmethod
    def progress(rule_state: State, prediction: Prediction) -> State:
        """The stopping state before any observation: the rule's own."""
        return rule_state

    @staticmethod
    def told(plan: None) -> None:
        return None

    @staticmethod
    def observed(plan: None, item: Array, t: Any) -> None:
        return plan

    @staticmethod
    def skipped(plan: None, item: Array) -> None:
        return plan

    @staticmethod
    def rule_state(stopping: State, t: Any) -> State:
        return stopping

    @staticmethod
    def stopped(stopping: State, t: Any, rule_state: State, fired: Array,
                plan: None) -> tuple[State, Array]:
        """(the stopping state, the stop): the rule's."""
        return rule_state, fired

    @staticmethod
    def choose(method: Any, loop: Any, available: Array, key: Array,
               k: int) -> tuple[Array, Draw]:
        """k items drawn by the method's policy from its rule's weights, each with how it
        was drawn (:meth:`~bayeval.methods.base.Method.draws`; ``method`` is the Method,
        ``loop`` its LoopState)."""
        prediction = loop.prediction
        log_w = method.rule(prediction, available)
        items = method.policy.draw(key, log_w, available, k)
        return items, method.draws(prediction, log_w, available, items)


def one_target() -> OneTarget:
    """Every method's default target axis: one target."""
    return OneTarget()


@dataclass(frozen=True)
class TargetTurns:
    """T ≥ 1 targets, an initial design of ⌈``init_fraction`` · N⌉ items each, then turns
    (module docstring); ``in_turn``: one target per round, round robin (else every open
    target's items are drawn from at once, as the mean-IG selection does)."""

    init_fraction: float = 0.1
    in_turn: bool = True
    several = True
    # the turn is not in a journal: a draw's probability must be recorded with its tell
    replayable = False

    def __post_init__(self) -> None:
        if not 0.0 < self.init_fraction <= 1.0:
            raise BayevalError(f"init_fraction must be in (0, 1], got {self.init_fraction}")

    def design_size(self, n_items: int) -> int:
        """⌈init_fraction · N⌉ items in the initial design (each for every target)."""
        return design_size(self.init_fraction, n_items)

    def check(self, name: str, n_targets: int) -> None:
        if n_targets < 1:
            raise BayevalError(f"need at least one target, got {n_targets}")

    def plan(self, n_items: int, n_targets: int, key: Array | None = None,
             random_order: bool = False) -> JointPlan:
        """The initial design: the run's own ⌈10% N⌉ items from ``fold_in(key,
        INIT_STREAM)``, every target on each in turn (with no key, the first items); asked
        in item order, or in the drawn order where ``random_order`` (an estimator that
        weighs each draw by its probability: each design item is then uniform over those
        not yet asked)."""
        D = self.design_size(n_items)
        if key is None:
            design = jnp.arange(D * n_targets, dtype=jnp.int32)
        else:
            # the same items as acquisition.multi_target.initial_design
            items = jax.random.permutation(jax.random.fold_in(key, INIT_STREAM), n_items)[:D]
            if not random_order:
                items = jnp.sort(items)
            design = (items[:, None] + n_items * jnp.arange(n_targets)[None, :]).reshape(-1)
        return JointPlan(design.astype(jnp.int32), jnp.zeros(D * n_targets, bool),
                         jnp.asarray(-1, jnp.int32))

    @staticmethod
    def count(prediction: Prediction) -> int:
        """T, read off a prediction with a target axis."""
        return prediction.item_mean.shape[0]

    @staticmethod
    def stack(tree: Any, prediction: Prediction) -> Any:
        """One copy of a part's state per target."""
        T = prediction.item_mean.shape[0]
        return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (T, *jnp.shape(x))),
                                      tree)

    @staticmethod
    def over(f: Callable) -> Callable:
        return jax.vmap(f)

    @staticmethod
    def split(item: Array, prediction: Prediction) -> tuple[Array, Array]:
        N = prediction.item_mean.shape[1]
        return item // N, item % N

    row = staticmethod(_row)
    set_row = staticmethod(_set_row)

    def progress(self, rule_state: State, prediction: Prediction) -> JointProgress:
        """Every target's rule before any observation; none has met it."""
        return JointProgress(self.stack(rule_state, prediction),
                             jnp.zeros(prediction.item_mean.shape[0], bool))

    @staticmethod
    def told(plan: JointPlan) -> Array:
        """The target told last (the first before any)."""
        return jnp.maximum(plan.last, 0)

    @staticmethod
    def observed(plan: JointPlan, item: Array, t: Array) -> JointPlan:
        """The design cell done, the turn moved to this target."""
        return plan._replace(consumed=plan.consumed | (plan.design == item),
                             last=t.astype(jnp.int32))

    @staticmethod
    def skipped(plan: JointPlan, item: Array) -> JointPlan:
        """A skipped design cell counts as done for the design."""
        return plan._replace(consumed=plan.consumed | (plan.design == item))

    @staticmethod
    def rule_state(stopping: JointProgress, t: Array) -> State:
        return _row(stopping.rules, t)

    @staticmethod
    def stopped(stopping: JointProgress, t: Array, rule_state: State, fired: Array,
                plan: JointPlan) -> tuple[JointProgress, Array]:
        """The told target's rule updated; the stop (T,): each target has met its rule and
        the initial design is done."""
        progress = JointProgress(_set_row(stopping.rules, t, rule_state),
                                 stopping.met.at[t].set(stopping.met[t] | fired))
        return progress, progress.met & jnp.all(plan.consumed)

    def choose(self, method: Any, loop: Any, available: Array, key: Array,
               k: int) -> tuple[Array, Draw]:
        """The next cell: the first design cell not yet done, else the method's policy's
        draw from its rule's weights over the open targets' cells (in turn: the turn's
        target only). Its Draw is how it was drawn within its target's row: uniformly among
        the row's available items in the design, from the rule's weights over the row
        after it (1 for a policy that does not draw at random)."""
        if k != 1:
            raise BayevalError(f"{method.name} asks one (target, item) pair at a time, "
                               f"not {k}")
        prediction, plan = loop.prediction, loop.plan
        T, N = prediction.item_mean.shape
        avail = available.reshape(T, N)
        todo = ~plan.consumed & available[plan.design]
        in_design = todo.any()
        design_cell = plan.design[jnp.argmax(todo)]
        has_items = avail.any(1)
        open_rows = ~loop.stopping.met & has_items
        # once every target has stopped (a simulation runs on), every target with items
        open_rows = jnp.where(open_rows.any(), open_rows, has_items)
        target = mt.next_target(~open_rows, plan.last)
        cells = avail & open_rows[:, None]
        if self.in_turn:
            cells = cells & (jnp.arange(T)[:, None] == target)
        log_w = method.rule(prediction, cells)
        log_w = jnp.where(prediction.nearly_unique[0], log_w, 0.0)  # random if B < N − N0
        pick = method.policy.draw(key, log_w.reshape(-1), cells.reshape(-1), 1)[0]
        cell = jnp.where(in_design, design_cell, pick).astype(jnp.int32)
        t, i = cell // N, cell % N
        row = jnp.where(in_design, probabilities(jnp.zeros(N), avail[t]),
                        probabilities(log_w[t], cells[t]))
        q = row[i] if method.policy.random else jnp.where(in_design, row[i], 1.0)
        design = (jnp.nan if method.estimator.design is None
                  else method.estimator.design(_row(prediction, t), row))
        return cell[None], Draw(jnp.reshape(q, (1,)), jnp.full(1, design))


Turns = OneTarget | TargetTurns
