"""``bayeval datasets``: the bundled score matrices."""

from __future__ import annotations

from rich import box
from rich.table import Table

from bayeval.cli.common import (
    app,
    out,
)
from bayeval.cli.numbers import CheckedCommand


@app.command(cls=CheckedCommand)
def datasets() -> None:
    """List the bundled real score matrices with their shapes, source and metric."""
    from bayeval.data import list_datasets, load_dataset

    table = Table(title="bundled datasets (bayeval.data.load_dataset(name))",
                  box=box.SIMPLE_HEAD)
    for col in ("name", "models", "items", "kind", "source", "metric"):
        table.add_column(col, justify="right" if col in ("models", "items") else "left",
                         no_wrap=col not in ("source", "metric"), overflow="fold")
    for name in list_datasets():
        m = load_dataset(name)
        table.add_row(name, str(m.n_models), str(m.n_items), m.kind,
                      m.metadata.get("source", ""), m.metadata.get("metric", ""))
    out.print(table)
