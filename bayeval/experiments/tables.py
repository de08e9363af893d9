"""Markdown tables of the experiments' reports (no extra dependency)."""

from __future__ import annotations

import numbers

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
