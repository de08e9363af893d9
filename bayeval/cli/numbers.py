"""Every numeric option of the command line checked once, where it is read: a number must
be finite and within its option's range, or the command ends with a one-line usage error
(exit status 2) before any work. The ranges are in one table, by option name (the
Python parameter's), :mod:`bayeval.evaluation.numbers`, which the settings classes read
too; an option not in it (a new one too) must still be a finite number ≥ 0, since no
option of bayeval takes a negative one.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from bayeval.evaluation.numbers import (  # noqa: F401  (the commands' names for them)
    COUNT,
    DEFAULT,
    RANGES,
    SEED_MAX,
    SHARE,
    Range,
    number_problem,
    text,
)


def check_numbers(command: Any, ctx: Any) -> None:
    """Refuse, with Click's usage error for that option, a parsed number of ``ctx.params``
    that is not finite or lies outside its range."""
    for name, value in ctx.params.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        problem = number_problem(name, value)
        if problem is None:
            continue
        param = next((p for p in command.params if p.name == name), None)
        hint = f"'{param.opts[0]}'" if param is not None and param.opts else f"'{name}'"
        raise typer.BadParameter(problem, ctx=ctx, param_hint=hint)


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
