"""The ``bayeval`` command line: one module per command over the shared options and
helpers of :mod:`bayeval.cli.common`; the work itself is in the library."""

from __future__ import annotations

import importlib

from bayeval.cli.common import app

# in the order ``bayeval --help`` lists them
COMMANDS = ("datasets", "evaluate", "select", "compress", "diagnose", "bench")
for _name in COMMANDS:
    importlib.import_module(f"bayeval.cli.{_name}")

__all__ = ["COMMANDS", "app", "main"]


def main() -> None:  # pragma: no cover - console entry point alias
    app()
