"""Where a reference matrix comes from, as a journal header records it: a bundled dataset
(``{"dataset": name}``), a file (``{"path": file, "kind": …}``), lm-evaluation-harness
logs (``{"lm_eval": folder, "task": …, "metric": …, "filter": …}``) or Inspect AI logs
(``{"inspect": folder, "task": …, "metric": …}``), optionally with the models held out of
it (``"held_out": [ids]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bayeval.data.bundled import load_dataset
from bayeval.data.io import read_matrix, safe_file_name
from bayeval.data.matrix import ScoreMatrix
from bayeval.errors import JournalError


def load_source_matrix(source: dict[str, Any] | None,
                       journal: Path | str = "journal") -> ScoreMatrix:
    """The whole matrix a journal header's ``source`` names (held-out models included):
    with ``"subtask"``, that subtask's columns of the group the rest names."""
    if source and "subtask" in source:
        from bayeval.data.lm_eval import subtask_matrix

        rest = {k: v for k, v in source.items() if k != "subtask"}
        return subtask_matrix(load_source_matrix(rest, journal), source["subtask"])
    if not source:
        raise JournalError(f"journal {journal}: the header does not say how to load the "
                           "reference matrix (a run begun in Python on a matrix of its own); "
                           "resume it in Python: Session.resume(path, reference=matrix)")
    if "dataset" in source:
        return load_dataset(source["dataset"])
    if "path" in source:
        return read_matrix(source["path"], kind=source.get("kind"),
                           repeated_models=source.get("repeated_models", "error"))
    if "lm_eval" in source:
        from bayeval.data.lm_eval import read_lm_eval_samples

        return read_lm_eval_samples(source["lm_eval"], source["task"], source.get("metric"),
                                    source.get("filter"))
    if "inspect" in source:
        from bayeval.data.inspect_logs import read_inspect_logs

        return read_inspect_logs(source["inspect"], source.get("task"), source.get("metric"),
                                 source.get("repeated_models", "error"))
    raise JournalError(f"journal {journal}: unknown reference source {source}")


def load_reference(source: dict[str, Any] | None, journal: Path | str = "journal") -> ScoreMatrix:
    """The reference matrix a journal header's ``source`` describes (held-out models
    removed)."""
    matrix = load_source_matrix(source, journal)
    held_out = [m for m in source.get("held_out", []) if m in set(matrix.models)]
    return matrix.drop_models(held_out) if held_out else matrix


def bench_dataset(dataset: str | ScoreMatrix) -> tuple[str, ScoreMatrix]:
    """(label, matrix) of a bench's dataset: a bundled name (or ``a+b`` suite) is its own
    label; a user's matrix is labelled by its file's stem and the start of its
    fingerprint (``scores-1a2b3c4d``), so that the benches' caches of finished runs, keyed
    by label, never mistake an edited file for the one they ran on."""
    if isinstance(dataset, ScoreMatrix):
        stem = Path(dataset.name).stem or "matrix"
        safe = safe_file_name(stem)
        return f"{safe}-{dataset.fingerprint()[:8]}", dataset
    return dataset, load_dataset(dataset)
