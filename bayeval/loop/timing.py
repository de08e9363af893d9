"""Where an evaluation run's time goes: the user's measure is the wall-clock time to an
answer, not only the items.

:class:`RunTimes` is kept by a :class:`~bayeval.loop.session.Session` while it runs an
evaluator: the wall time of the run, the time the evaluator spent on each item (a batch's
time shared equally among its items; with several evaluations in flight, each thread's
own), the time the run waited for the evaluator, and so bayeval's own time (the rest: the
posterior, the draws, the journal). From the per-item times it projects what evaluating
every item one after another would take, with a 95% interval: the items' mean time is
estimated from the timed items with the finite-population correction of a sample mean
(the timed items are drawn by the method, not uniformly, so the projection is a guide, not
a design-based estimate).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["RunTimes"]


class RunTimes:
    """Clocks of one run (module docstring); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: float | None = None
        self.wall = 0.0  # seconds between start and stop (summed over runs)
        self.waited = 0.0  # seconds the run waited for the evaluator
        self.evaluator = 0.0  # seconds the evaluator worked, summed over its calls
        self.item_seconds: list[float] = []  # each evaluated item's share of its call

    def start(self) -> None:
        self._started = time.perf_counter()

    def stop(self) -> None:
        if self._started is not None:
            self.wall += time.perf_counter() - self._started
            self._started = None

    @contextlib.contextmanager
    def evaluating(self, items: int) -> Iterator[None]:
        """Time one evaluator call on ``items`` items."""
        began = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - began
            with self._lock:
                self.evaluator += spent
                self.item_seconds.extend([spent / max(items, 1)] * items)

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Time the run spends blocked on the evaluator."""
        began = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.waited += time.perf_counter() - began

    def wall_seconds(self) -> float:
        """The run's wall time so far (a run under way counts up to now)."""
        return self.wall + (0.0 if self._started is None
                            else time.perf_counter() - self._started)

    def summary(self, n_items: int, level_z: float = 1.959963984540054) -> dict[str, Any]:
        """The run's times (seconds) and the projected time of evaluating all ``n_items``
        items one after another, with its interval (None before two items are timed)."""
        wall = self.wall_seconds()
        own = max(wall - self.waited, 0.0)
        n = len(self.item_seconds)
        out: dict[str, Any] = {
            "wall_seconds": wall, "evaluator_seconds": self.evaluator,
            "own_seconds": own, "items_timed": n,
            "own_seconds_per_item": own / n if n else None,
            "item_seconds_mean": sum(self.item_seconds) / n if n else None,
            "full_run_seconds": None, "full_run_lower": None, "full_run_upper": None,
        }
        if n >= 2:
            mean = out["item_seconds_mean"]
            var = sum((x - mean) ** 2 for x in self.item_seconds) / (n - 1)
            fpc = max(1.0 - n / n_items, 0.0)
            half = level_z * n_items * math.sqrt(var / n * fpc)
            total = n_items * mean
            out.update(full_run_seconds=total, full_run_lower=max(total - half, 0.0),
                       full_run_upper=total + half)
        return out
