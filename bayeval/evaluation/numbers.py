"""The allowed values of every number a setting or an option takes, in one table by name
(the Python parameter's and the settings field's): a number must be finite and within its
range. The command line checks its options against it (:mod:`bayeval.cli.numbers`) and the
settings classes their fields (:mod:`bayeval.evaluation.settings`), so that a run file and
a Python call meet the same checks as the command line. A name not in the table must
still be a finite number ≥ 0: no setting of bayeval takes a negative one."""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["COUNT", "DEFAULT", "RANGES", "SEED_MAX", "SHARE", "Range", "number_problem",
           "text"]

SEED_MAX = 2**63 - 1  # JAX keys and NumPy generators take 64-bit seeds


def text(x: float) -> str:
    """A number as an option would be written: ``0.1``, ``5``, ``nan``, ``2**63`` in
    full."""
    return f"{x:g}" if isinstance(x, float) else str(x)


class Range(NamedTuple):
    """An option's allowed values: from ``low`` to ``high`` (None: unbounded), each end
    included or not as ``ends`` says (``"[]"``, ``"(]"``, ``"[)"`` or ``"()"``), and why,
    where the range is not obvious."""

    low: float | None
    high: float | None = None
    ends: str = "[]"
    why: str = ""

    def holds(self, x: float) -> bool:
        low_ok = self.low is None or (x > self.low if self.ends[0] == "(" else x >= self.low)
        high_ok = self.high is None or (x < self.high if self.ends[1] == ")" else
                                        x <= self.high)
        return low_ok and high_ok

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.ends[0] == '(' else '≥'} {text(self.low)}"
        return f"in {self.ends[0]}{text(self.low)}, {text(self.high)}{self.ends[1]}"


SHARE = Range(0.0, 1.0, "(]")
COUNT = Range(1)
RANGES: dict[str, Range] = {
    # shares and widths of the score scale, probability levels
    "epsilon": SHARE, "task_epsilon": SHARE, "retention": SHARE, "reference_fraction": SHARE,
    "p_obs": SHARE,
    "holdout": Range(0.0, 1.0, "()"), "max_budget": SHARE, "level": Range(0.0, 1.0, "()"),
    "history_share": Range(0.0, 0.9),
    # seeds
    "seed": Range(0, SEED_MAX), "split_seed": Range(0, SEED_MAX),
    # positive amounts
    "timeout": Range(0.0, None, "(]"), "pool": Range(0.0, None, "(]"),
    "weight": Range(0.0, None, "(]"), "cost": Range(0.0, None, "(]"),
    "seconds_per_document": Range(0.0, None, "(]"), "seconds_per_call": Range(0.0, None),
    "retries": Range(0, 100, why="a failing command is not retried without end"),
    # counts
    "chains": Range(2, why="R-hat compares chains"), "draws": Range(4, why="per chain"),
    **{name: COUNT for name in (
        "max_items", "limit", "batch", "concurrency", "workers", "targets", "steps", "every",
        "runs", "splits", "seeds", "val_seeds", "kmeans_seeds", "mince_seeds", "reps", "size",
        "candidates", "step", "rows", "top", "coreset", "full_rows")},
}
DEFAULT = Range(0.0)  # no option takes a negative number




def number_problem(name: str, value: object, integer: bool = False) -> str | None:
    """What is wrong with ``value`` for the number ``name`` (None: nothing): not a number
    (a bool, text), not whole where ``integer``, not finite, or outside its range."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value!r:.60} is not a {'whole ' if integer else ''}number"
    if integer and not isinstance(value, int):
        return f"{text(value)} is not a whole number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{text(value)} is not a finite number"
    allowed = RANGES.get(name, DEFAULT)
    if not allowed.holds(value):
        return f"{text(value)} is not {allowed}{f' ({allowed.why})' if allowed.why else ''}"
    return None
