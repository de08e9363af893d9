"""Where a reference matrix comes from, as a journal header records it: a bundled dataset
(``{"dataset": name}``) or a file (``{"path": file, "kind": …}``), optionally with the
models held out of it (``"held_out": [ids]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bayeval.data.bundled import load_dataset
from bayeval.data.io import read_matrix
from bayeval.data.matrix import ScoreMatrix
from bayeval.errors import JournalError


def load_source_matrix(source: dict[str, Any] | None,
                       journal: Path | str = "journal") -> ScoreMatrix:
    """The whole matrix a journal header's ``source`` names (held-out models included)."""
    if not source:
        raise JournalError(f"journal {journal}: the header does not say how to load the "
                           "reference matrix; pass it to Session.resume(reference=...)")
    if "dataset" in source:
        return load_dataset(source["dataset"])
    if "path" in source:
        return read_matrix(source["path"], kind=source.get("kind"))
    raise JournalError(f"journal {journal}: unknown reference source {source}")


def load_reference(source: dict[str, Any] | None, journal: Path | str = "journal") -> ScoreMatrix:
    """The reference matrix a journal header's ``source`` describes (held-out models
    removed)."""
    matrix = load_source_matrix(source, journal)
    held_out = [m for m in source.get("held_out", []) if m in set(matrix.models)]
    return matrix.drop_models(held_out) if held_out else matrix
