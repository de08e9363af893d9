"""Where an evaluation run's time goes: the user's measure is the wall-clock time to an
answer, not only the items.

:class:`RunTimes` is kept by a :class:`~bayeval.loop.session.Session` while it runs an
evaluator: the wall time of the run, the time the evaluator spent on each item (a batch's
time shared equally among its items; with several evaluations in flight, each thread's
own), the time the run waited for the evaluator, and so bayeval's own time (the rest: the
posterior, the draws, the journal).

The full run's time, projected. A full run does not pay what bayeval's calls pay per
document: the harness packs a whole task's requests by length, where a call of a few dozen
drawn documents pads short prompts to the longest among them. An evaluator that knows its
documents' requests says what a call of them costs in padded size (``packed_size(items)``,
:meth:`~bayeval.evaluators.harness.LmEvalInProcess.packed_size`), and what the whole task
would (``packed_size(None)``, kept as :attr:`RunTimes.full_size`). The projection is then
the ratio estimate Σ_j t_j / Σ_j P_j · P_full over the run's calls j (time t_j, padded
size P_j), with a 95% interval from the spread of t_j / P_j over the calls (the ratio
estimator's variance, the calls the units). An evaluator that does not know its documents
(a function, a command) counts each as one: the projection is then N times the run's own
mean time per document, with the finite-population correction of a sample mean over the
timed items. Either way the timed documents are drawn by the method, not uniformly: the
projection is a guide, not a design-based estimate. ``saved_seconds`` is the projection
less the run's wall time (the loop's: start-up, such as loading the model, is left out of
both), negative when the run took longer than the full run would have.
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
        self.calls: list[tuple[int, float, float]] = []  # (items, seconds, padded size)
        self.full_size: float | None = None  # the whole task's padded size, where known

    def start(self) -> None:
        self._started = time.perf_counter()

    def stop(self) -> None:
        if self._started is not None:
            self.wall += time.perf_counter() - self._started
            self._started = None

    @contextlib.contextmanager
    def evaluating(self, items: int, size: float | None = None) -> Iterator[None]:
        """Time one evaluator call on ``items`` items of padded ``size`` (module
        docstring; default: one per item)."""
        began = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - began
            with self._lock:
                self.evaluator += spent
                self.item_seconds.extend([spent / max(items, 1)] * items)
                self.calls.append((items, spent, float(items if size is None else size)))

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
        """The run's times (seconds) and the projected time of a full run of all
        ``n_items`` items, with its interval (module docstring): from the calls' padded
        sizes when :attr:`full_size` (the whole task's) is known and two or more calls
        were timed, else from the mean time per item (None before two items are
        timed)."""
        wall = self.wall_seconds()
        own = max(wall - self.waited, 0.0)
        n = len(self.item_seconds)
        out: dict[str, Any] = {
            "wall_seconds": wall, "evaluator_seconds": self.evaluator,
            "own_seconds": own, "items_timed": n,
            "own_seconds_per_item": own / n if n else None,
            "item_seconds_mean": sum(self.item_seconds) / n if n else None,
            "full_run_seconds": None, "full_run_lower": None, "full_run_upper": None,
            "full_run_basis": None, "saved_seconds": None, "calls": len(self.calls),
        }
        sized = [(t, size) for _, t, size in self.calls if size > 0]
        full_size = self.full_size
        if full_size is not None and full_size > 0 and len(sized) >= 2:
            t = [x for x, _ in sized]
            size = [y for _, y in sized]
            ratio = sum(t) / sum(size)
            j, mean_size = len(sized), sum(size) / len(sized)
            spread = sum((a - ratio * b) ** 2 for a, b in sized) / (j - 1)
            half = level_z * full_size * math.sqrt(spread / j) / mean_size
            total = ratio * full_size
            out.update(full_run_seconds=total, full_run_lower=max(total - half, 0.0),
                       full_run_upper=total + half, full_run_basis="packed")
        elif n >= 2:
            mean = out["item_seconds_mean"]
            var = sum((x - mean) ** 2 for x in self.item_seconds) / (n - 1)
            fpc = max(1.0 - n / n_items, 0.0)
            half = level_z * n_items * math.sqrt(var / n * fpc)
            total = n_items * mean
            out.update(full_run_seconds=total, full_run_lower=max(total - half, 0.0),
                       full_run_upper=total + half, full_run_basis="per document")
        if out["full_run_seconds"] is not None:
            out["saved_seconds"] = out["full_run_seconds"] - wall
        return out
