"""Markdown tables of the experiments' reports (no extra dependency)."""

from __future__ import annotations

import numbers
from pathlib import Path

import pandas as pd


def markdown_table(frame: pd.DataFrame, floatfmt: str = ".4g") -> str:
    """``frame`` as a GitHub markdown table, floats formatted with ``floatfmt``."""

    def cell(value: object) -> str:
        if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral | bool):
            return format(float(value), floatfmt)
        return str(value)

    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(cell(v) for v in row) + " |"
            for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def emit_report(lines: list[str], out: Path | None) -> str:
    """A report's ``lines`` joined into one text, printed, and written to ``out`` (its folder
    made) when given: the benches' one way to show and save what they measured."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return text
