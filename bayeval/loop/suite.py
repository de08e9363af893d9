"""Suites: several tasks, one budget, and the weighted average of their scores with an
interval (docs/methods.md §9 "Suites").

A suite is K tasks, each with its own reference matrix and its own design-valid run
(one :class:`~bayeval.loop.session.Session` per task, its items drawn by its own method), and
a weight per task (normalised to sum to 1; equal by default, as leaderboards average). It
reports every task's estimate and interval and the weighted average θ̄ = Σ_k w_k θ_k.

**The average's interval** is the MOVER combination of the tasks' intervals (Zou &
Donner 2008, "Construction of confidence limits about effect measures", eq. for a sum of
parameters with positive coefficients): with task k's estimate θ̂_k and interval
[l_k, u_k],

    L = Σ w_k θ̂_k − sqrt(Σ w_k² (θ̂_k − l_k)²),   U = Σ w_k θ̂_k + sqrt(Σ w_k² (u_k − θ̂_k)²),

which is the Wald interval of the average when every task's interval is symmetric and
keeps each task's own asymmetry (a Wilson-like interval near 0 or 1) otherwise. The tasks'
draws are independent given the allocation, which reads only what is already observed.

**Allocation** (where the next item goes): first every task gets ``n_min`` items (its own
interval needs them), then the task whose next item buys the most of the average's
variance per unit of cost, gain_k = w_k² V_k / ((n_k + 1) c_k) with V_k = ((u_k − l_k) /
2z)² its interval's variance and c_k its cost per item (the reduction V_k − V_k n_k/(n_k
+ 1) of a variance falling as 1/n). Given per-item variances σ_k² instead (``variances``:
planning values, known beforehand or frozen after a pilot), V_k = σ_k² / n_k, and the
allocation no longer reads the tasks' intervals (the stop still does). **Stop** once
every task has ``n_min`` items and the average's interval is at most ε wide (and, with
``task_epsilon``, every task's is at most that wide), at the budget, or when every item
is used.

The allocation reads each task's state only: a task's run after n items is the same
whatever the other tasks did, so a suite of simulated runs is their trajectories composed
by this rule (:func:`compose`), exactly as the live :class:`SuiteRun` would run them
(``tests/test_suite.py`` checks the two against each other).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayeval.errors import BayevalError
from bayeval.estimators.interval import z_value

__all__ = ["NEVER", "TASK_NAME_LIMIT", "SuiteRule", "SuiteRun", "average_interval",
           "choose_task", "compose", "normalised_weights", "task_id", "task_seed"]

# a task of a suite never stops on its own interval: its method gets this ε (a width an
# interval reaches only once every item is scored) and the suite's rule decides
NEVER = 1e-12


def task_seed(seed: int, k: int) -> int:
    """The seed of task k's run in a suite run with ``seed``: distinct per task, so that
    the tasks' draws are independent (equal seeds would draw with the same uniforms)."""
    return int(seed) + 100_003 * int(k)


def normalised_weights(weights: Sequence[float]) -> np.ndarray:
    """The tasks' weights divided by their sum (each must be positive and finite)."""
    try:
        w = np.asarray(weights, np.float64)
    except (TypeError, ValueError):
        raise BayevalError(f"suite weights must be positive numbers, got {list(weights)}"
                           ) from None
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise BayevalError(f"suite weights must be positive numbers, got {list(weights)}")
    w = w / w.max()  # first to at most 1: the sum of huge weights does not overflow
    return w / w.sum()


@dataclass(frozen=True)
class SuiteRule:
    """When a suite stops and how it allocates: ``epsilon`` the width of the average's
    ``level`` interval to reach; ``task_epsilon`` (optional) the width each task's interval
    must reach too; ``n_min`` items every task gets first; ``max_items`` a budget of items
    over all tasks (None: none)."""

    epsilon: float = 0.05
    task_epsilon: float | None = None
    n_min: int = 30
    max_items: int | None = None
    level: float = 0.95

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise BayevalError(f"suite epsilon must be positive, got {self.epsilon}")
        if self.task_epsilon is not None and not (math.isfinite(self.task_epsilon)
                                                  and self.task_epsilon > 0):
            raise BayevalError(f"suite task_epsilon must be positive, got "
                               f"{self.task_epsilon}")
        if self.n_min < 1:
            raise BayevalError(f"suite n_min must be ≥ 1, got {self.n_min}")
        if self.max_items is not None and self.max_items < 1:
            raise BayevalError(f"suite max_items must be ≥ 1, got {self.max_items}")
        z_value(self.level)  # refuses a level outside (0, 1)

    def room(self, used, batch: int):
        """Items the next choice may take after ``used`` items (a count, or an array of
        them): ``batch``, cut to what is left of the budget (0 once it is spent)."""
        if self.max_items is None:
            return np.full_like(np.asarray(used), batch)
        return np.clip(self.max_items - np.asarray(used), 0, batch)


def average_interval(estimate: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                     weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(θ̄, L, U): the weighted average of the tasks' estimates and its MOVER interval
    (module docstring), over the last axis (the tasks) of ``(..., K)`` arrays, clipped to
    [0, 1]. ``weights`` are normalised (:func:`normalised_weights`)."""
    est = np.asarray(estimate, np.float64)
    below = np.maximum(est - lower, 0.0)
    above = np.maximum(upper - est, 0.0)
    value = (weights * est).sum(-1)
    low = value - np.sqrt((weights**2 * below**2).sum(-1))
    high = value + np.sqrt((weights**2 * above**2).sum(-1))
    return value, np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)


def choose_task(n: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                estimate: np.ndarray, left: np.ndarray, weights: np.ndarray,
                costs: np.ndarray, rule: SuiteRule,
                variances: np.ndarray | None = None) -> np.ndarray:
    """The task the next item goes to, or -1 where the suite stops (module docstring),
    for ``(..., K)`` arrays of each task's items so far ``n``, its interval and estimate
    (read only where ``n ≥ rule.n_min``) and whether it has items ``left``; -1 too once
    the budget (``rule.max_items`` over all tasks) is spent. ``variances``: per-item
    variances σ_k² (broadcast to ``n``) the allocation reads instead of the intervals."""
    n = np.asarray(n)
    z = z_value(rule.level)
    warm = (n < rule.n_min) & left
    width = np.where(n > 0, upper - lower, np.inf)
    _, low, high = average_interval(np.where(n > 0, estimate, 0.5),
                                    np.where(n > 0, lower, 0.0),
                                    np.where(n > 0, upper, 1.0), weights)
    wide = (high - low) > rule.epsilon
    if variances is None:
        var = (width / (2 * z)) ** 2
    else:
        var = np.asarray(variances, np.float64) / np.maximum(n, 1)
    with np.errstate(invalid="ignore"):
        gain = np.where(left, weights**2 * var / ((n + 1) * costs), -np.inf)
    task_wide = left & (width > rule.task_epsilon) if rule.task_epsilon is not None \
        else np.zeros_like(left)
    first = np.argmin(np.where(warm, n, np.iinfo(np.int64).max), -1)
    best = np.argmax(gain, -1)
    needy = np.argmax(np.where(task_wide, gain, -np.inf), -1)
    pick = np.where(wide & left.any(-1), best, np.where(task_wide.any(-1), needy, -1))
    pick = np.where(warm.any(-1), first, pick)
    return np.where(rule.room(n.sum(-1), 1) > 0, pick, -1)


@dataclass
class SuiteResult:
    """A composed suite of simulated runs (:func:`compose`): per run and task the items
    at the stop ``n`` (R, K) and the task's estimate and interval there; per run the
    average and its interval, its items and cost."""

    n: np.ndarray
    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    average: np.ndarray
    average_lower: np.ndarray
    average_upper: np.ndarray
    items: np.ndarray
    cost: np.ndarray


def compose(estimates: Sequence[np.ndarray], lowers: Sequence[np.ndarray],
            uppers: Sequence[np.ndarray], weights: Sequence[float], rule: SuiteRule,
            costs: Sequence[float] | None = None, batch: int = 1,
            variances: np.ndarray | None = None) -> SuiteResult:
    """The suite of R runs whose tasks' trajectories are given: for task k, its
    estimate and interval after each of its items, (R, S_k) arrays (a simulated run's
    records, :func:`bayeval.loop.simulate.simulate`, with S_k up to its N_k items), allocated
    and stopped by :func:`choose_task` as a live :class:`SuiteRun` with the same seeds would
    be (``batch`` items per choice, as its runs were simulated); ``variances`` (K,) or
    (R, K): the per-item variances the allocation reads instead of the intervals
    (:func:`choose_task`). A trajectory that ends (NaN) before the rule stops its suite is
    an error: simulate further."""
    K = len(estimates)
    w = normalised_weights(weights)
    c = np.ones(K) if costs is None else np.asarray(costs, np.float64)
    R = estimates[0].shape[0]
    sizes = np.array([e.shape[1] for e in estimates])
    rows = np.arange(R)
    n = np.zeros((R, K), np.int64)
    going = np.ones(R, bool)

    def at(arrays: Sequence[np.ndarray], fill: float) -> np.ndarray:
        out = np.full((R, K), fill)
        for k, a in enumerate(arrays):
            seen = n[:, k] > 0
            out[seen, k] = a[rows[seen], n[seen, k] - 1]
        return out

    while going.any():
        est = at(estimates, 0.5)
        low, high = np.clip(at(lowers, 0.0), 0, 1), np.clip(at(uppers, 1.0), 0, 1)
        if np.isnan(est[going]).any():
            raise ValueError("a task's trajectory ended before its suite stopped: "
                             "simulate its runs further (until_stop=False)")
        left = n < sizes
        pick = choose_task(n, low, high, est, left, w, c, rule, variances)
        going &= pick >= 0
        take = rows[going]
        k = pick[going]
        n[take, k] += np.minimum(rule.room(n[take].sum(1), batch), sizes[k] - n[take, k])
    est, low, high = at(estimates, np.nan), at(lowers, np.nan), at(uppers, np.nan)
    value, lo, hi = average_interval(est, np.clip(low, 0, 1), np.clip(high, 0, 1), w)
    return SuiteResult(n, est, np.clip(low, 0, 1), np.clip(high, 0, 1), value, lo, hi,
                       n.sum(1), (n * c).sum(1))


def _per_task(values: Sequence[float], tasks: int, what: str) -> np.ndarray:
    """``values`` as one positive number per task (a one-line error naming ``what``
    otherwise)."""
    array = np.asarray(values, np.float64)
    if array.shape != (tasks,) or np.any(~(array > 0)):
        raise BayevalError(f"suite {what} must be positive, one per task, got {array.tolist()}")
    return array


class SuiteRun:
    """A live suite: one :class:`~bayeval.loop.session.Session` per task (each journaled on its
    own, each with a method whose ε is :data:`NEVER`), allocated and stopped by
    :func:`choose_task`. ``names``: the tasks' names; ``weights``, ``costs``: per task
    (costs per item, default 1); ``variances``: per-item planning variances the allocation
    reads instead of the tasks' intervals (default: the intervals)."""

    def __init__(self, names: Sequence[str], sessions: Sequence[Any],
                 weights: Sequence[float], rule: SuiteRule,
                 costs: Sequence[float] | None = None,
                 variances: Sequence[float] | None = None) -> None:
        if len(names) != len(sessions) or len(set(names)) != len(names):
            raise BayevalError(f"a suite needs one session per task and distinct task "
                               f"names, got {list(names)}")
        self.names = list(names)
        self.sessions = list(sessions)
        self.weights = normalised_weights(weights)
        self.costs = _per_task(np.ones(len(names)) if costs is None else costs,
                               len(names), "costs")
        self.variances = None if variances is None else _per_task(variances, len(names),
                                                                  "variances")
        self.rule = rule
        self._stuck: set[int] = set()  # tasks that had nothing left to ask

    def _state(self, flying: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """(items per task, estimates, lower and upper bounds, tasks with items left);
        ``flying``: items per task asked and not yet told, counted as taken."""
        n = np.array([s.n_observed for s in self.sessions])
        if flying is not None:
            n = n + flying
        rows = [s.estimate() if s.n_observed else (0.5, 0.0, 1.0) for s in self.sessions]
        est, low, high = (np.array(col, np.float64) for col in zip(*rows, strict=True))
        left = np.array([not s.done and k not in self._stuck
                         for k, s in enumerate(self.sessions)])
        return n, est, low, high, left

    def next_task(self, flying: np.ndarray | None = None) -> int:
        """The task the next item goes to, or -1 once the suite is done (``flying``: items
        per task in flight, counted as taken)."""
        n, est, low, high, left = self._state(flying)
        return int(choose_task(n, low, high, est, left, self.weights, self.costs,
                               self.rule, self.variances))

    @property
    def stop_reason(self) -> str | None:
        """Why the suite stopped (None while it goes on)."""
        if self.next_task() >= 0:
            return None
        n, *_, left = self._state()
        if self.rule.room(n.sum(), 1) == 0:
            return f"budget of {self.rule.max_items} items"
        if not left.any():
            return "every task evaluated or stopped"
        what = f"average's interval at most {self.rule.epsilon:g} wide"
        if self.rule.task_epsilon is not None:
            what += f", every task's at most {self.rule.task_epsilon:g}"
        return what

    def run(self, evaluators: Sequence[Callable[[str], float]], batch: int = 1,
            on_step: Callable[[int, Any, str, float | None], None] | None = None,
            max_failures: int | None = None, concurrency: int = 1) -> None:
        """Ask, evaluate and tell until the suite stops: ``evaluators[k](item)`` scores
        an item of task k; a batch of ``batch`` items of the chosen task is asked at
        once (one evaluator call where it has ``evaluate_batch``), or with ``concurrency``
        K > 1 K evaluations are kept in flight across the tasks (:meth:`_streaming`).
        Failures pass through :func:`bayeval.loop.runner.evaluate_or_skip` as in a one-task
        run; ``on_step(k, session, item, score)`` after each."""
        from bayeval.loop.runner import _answer, evaluate_or_skip

        if len(evaluators) != len(self.sessions):
            raise BayevalError("a suite needs one evaluator per task")
        if concurrency > 1:
            self._streaming(evaluators, concurrency, on_step, max_failures)
            return
        # a resumed task's items asked before the interruption are answered first, as the
        # interrupted run would have: then the allocation goes on from the same states
        owed = [(k, s.unanswered) for k, s in enumerate(self.sessions) if s.unanswered]
        while owed or (k := self.next_task()) >= 0:
            if owed:
                k, size = owed.pop(0)
            else:  # the last batch within the budget
                size = int(self.rule.room(sum(s.n_observed for s in self.sessions), batch))
            session, evaluator = self.sessions[k], evaluators[k]
            asked = session.ask(size)
            if not asked:  # nothing it can still ask (every item used or held back)
                self._stuck.add(k)
                continue
            step = None if on_step is None else (
                lambda s, item, score, k=k: on_step(k, s, item, score))
            batched = getattr(evaluator, "evaluate_batch", None)
            if batched is not None:
                results = batched(list(asked))
                for item, result in zip(asked, results, strict=True):
                    evaluate_or_skip(session, _answer(result), (item,), step, max_failures)
                continue
            for item in asked:
                evaluate_or_skip(session, evaluator, (item,), step, max_failures)

    def _streaming(self, evaluators: Sequence[Callable[[str], float]], concurrency: int,
                   on_step: Callable[[int, Any, str, float | None], None] | None,
                   max_failures: int | None) -> None:
        """K evaluations in flight across the tasks (docs/methods.md §9 "Streaming" and
        "Suites"): whenever one finishes its score is told to its task, and the next item
        goes to the task the allocation picks from what is told so far, the items in
        flight counted as taken (toward the budget too). Each task's session draws as it
        does with K in flight alone (its rounds applied in draw order), so each task's
        interval stays design-valid; what is in flight at the stop is waited for and
        told."""
        from bayeval.loop.runner import _answer, evaluate_or_skip, keep_in_flight

        K = len(self.sessions)
        owed = [k for k, s in enumerate(self.sessions) for _ in range(s.unanswered)]

        def ask(flying: list[int]) -> tuple | None:
            counts = np.bincount(flying, minlength=K)
            while (k := owed.pop(0) if owed else self.next_task(counts)) >= 0:
                asked = self.sessions[k].ask(1)
                if asked:
                    return evaluators[k], asked[0], k, self.sessions[k].times
                self._stuck.add(k)  # nothing it can still ask
            return None

        def tell(k: int, item: str, result: Any) -> None:
            step = None if on_step is None else (
                lambda s, i, score: on_step(k, s, i, score))
            evaluate_or_skip(self.sessions[k], _answer(result), (item,), step, max_failures)

        keep_in_flight(concurrency, ask, tell)

    def average(self) -> tuple[float, float, float]:
        """(θ̄, L, U): the weighted average so far and its interval."""
        _, est, low, high, _ = self._state()
        value, lo, hi = average_interval(est, low, high, self.weights)
        return float(value), float(lo), float(hi)

    def result(self) -> dict[str, Any]:
        """Every task's estimate, interval, items and weight, and the average's."""
        n, est, low, high, _ = self._state()
        value, lo, hi = average_interval(est, low, high, self.weights)
        tasks = [{"task": name, "weight": float(w), "cost_per_item": float(c),
                  "estimate": float(e), "lower": float(a), "upper": float(b),
                  "items_used": int(m), "n_items": s.n_items}
                 for name, w, c, e, a, b, m, s in zip(
                     self.names, self.weights, self.costs, est, low, high, n, self.sessions,
                     strict=True)]
        return {"tasks": tasks, "estimate": float(value), "lower": float(lo),
                "upper": float(hi), "items_used": int(n.sum()),
                "cost": float((n * self.costs).sum()), "stopped": self.stop_reason}


TASK_NAME_LIMIT = 200  # characters of a task's name


def task_id(name: str, where: str) -> str:
    """``name`` if it can name a task's files: not empty, at most 200 characters, no NUL
    or other control character, no path separator and not ``.`` or ``..`` (a one-line
    error naming ``where`` otherwise)."""
    if not name or len(name) > TASK_NAME_LIMIT:
        raise BayevalError(f"{where}: a task name must have 1 to {TASK_NAME_LIMIT} characters, "
                           f"got {len(name)}")
    bad = [c for c in name if ord(c) < 32 or c in "/\\\x7f"]
    if bad or name in (".", ".."):
        raise BayevalError(f"{where}: the task name {name[:60]!r} cannot name its files "
                           "(no control character, no / or \\, not . or ..)")
    return name
