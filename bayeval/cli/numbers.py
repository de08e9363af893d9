"""Every numeric option of the command line checked once, where it is read: a number must
be finite and within its option's range, or the command ends with a one-line usage error
(exit status 2) before any work. The ranges are in one table, by option name (the
Python parameter's); an option not in it (a new one too) must still be a finite number
≥ 0, since no option of bayeval takes a negative one.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup

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
    "epsilon": SHARE, "retention": SHARE, "reference_fraction": SHARE, "p_obs": SHARE,
    "holdout": Range(0.0, 1.0, "()"), "max_budget": SHARE, "level": Range(0.0, 1.0, "()"),
    "history_share": Range(0.0, 0.9),
    # seeds
    "seed": Range(0, SEED_MAX), "split_seed": Range(0, SEED_MAX),
    # positive amounts
    "timeout": Range(0.0, None, "(]"), "pool": Range(0.0, None, "(]"),
    "retries": Range(0, 100, why="a failing command is not retried without end"),
    # counts
    "chains": Range(2, why="R-hat compares chains"), "draws": Range(4, why="per chain"),
    **{name: COUNT for name in (
        "max_items", "limit", "batch", "concurrency", "workers", "targets", "steps", "every",
        "runs", "splits", "seeds", "val_seeds", "kmeans_seeds", "mince_seeds", "reps", "size",
        "candidates", "step", "rows", "top", "coreset", "full_rows")},
}
DEFAULT = Range(0.0)  # no option takes a negative number


def check_numbers(command: Any, ctx: Any) -> None:
    """Refuse, with Click's usage error for that option, a parsed number of ``ctx.params``
    that is not finite or lies outside its range."""
    for name, value in ctx.params.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        allowed = RANGES.get(name, DEFAULT)
        if isinstance(value, float) and not math.isfinite(value):
            problem = "is not a finite number"
        elif not allowed.holds(value):
            problem = f"is not {allowed}{f' ({allowed.why})' if allowed.why else ''}"
        else:
            continue
        param = next((p for p in command.params if p.name == name), None)
        hint = f"'{param.opts[0]}'" if param is not None and param.opts else f"'{name}'"
        raise typer.BadParameter(f"{text(value)} {problem}", ctx=ctx, param_hint=hint)


def hide_flag_types(command: Any, ctx: Any) -> None:
    """A flag takes no value: its help row shows no ``<bool>`` type (Typer's default)."""
    for param in command.get_params(ctx):
        if getattr(param, "is_flag", False):
            param.metavar = ""


class CheckedCommand(TyperCommand):
    """Typer's command class, whose parsed numbers are checked (:func:`check_numbers`)
    before the command runs: give it as ``app.command(cls=CheckedCommand)``."""

    def invoke(self, ctx: Any) -> Any:
        check_numbers(self, ctx)
        return super().invoke(ctx)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        hide_flag_types(self, ctx)
        super().format_help(ctx, formatter)


class FlagGroup(TyperGroup):
    """Typer's group class, whose flags show no type in the help (:func:`hide_flag_types`):
    ``typer.Typer(cls=FlagGroup)``."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        hide_flag_types(self, ctx)
        super().format_help(ctx, formatter)


__all__ = ["RANGES", "SEED_MAX", "CheckedCommand", "FlagGroup", "Range", "check_numbers"]
