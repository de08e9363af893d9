"""``bayeval datasets``: the bundled score matrices."""

from __future__ import annotations

from bayeval.cli.common import app, out
from bayeval.cli.numbers import CheckedCommand


@app.command(cls=CheckedCommand)
def datasets() -> None:
    """List the bundled real score matrices with their shapes, source and metric."""
    from bayeval.data import list_datasets, load_dataset
    from bayeval.evaluation.summary import Summary

    rows = []
    for name in list_datasets():
        m = load_dataset(name)
        rows.append((name, str(m.n_models), str(m.n_items), m.kind,
                     m.metadata.get("source", ""), m.metadata.get("metric", "")))
    out.print(Summary(rows, ("name", "models", "items", "kind", "source", "metric"),
                 "bundled datasets (bayeval.data.load_dataset(name))", wrap=("source",)))
