"""What a bench runs on: the bundled datasets it names, or the user's own score matrices
(``bayeval bench … --reference``), checked and read before any work."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bayeval.errors import BayevalError
from bayeval.evaluation.options import comma_list
from bayeval.evaluation.sources import fresh_source

__all__ = ["bench_sources", "bundled_names", "parse_shares"]


def bundled_names(value: str) -> list[str]:
    """The bundled dataset names of a ``--datasets`` / ``--suite`` value (comma-separated,
    '+' joining a suite; 'all' where the bench takes it), an unknown one refused."""
    from bayeval.data.bundled import list_datasets

    known = list_datasets()
    names = [d.strip() for part in comma_list(value) for d in part.split("+") if d.strip()]
    if not names:
        raise BayevalError("name at least one bundled dataset")
    unknown = [d for d in names if d != "all" and d not in known]
    if unknown:
        raise BayevalError(f"unknown dataset {unknown[0]!r} (bundled: {', '.join(known)})")
    return names


def bench_sources(datasets: str, reference: Path | None, task: str | None = None,
                  metric: str | None = None, filter_name: str | None = None,
                  repeated_models: str = "error") -> list:
    """The user's matrix of ``reference`` (checked and read before any work), or the
    bundled names of ``datasets`` (comma-separated; 'all': every bundled dataset)."""
    if reference is not None:
        _, matrix = fresh_source(None, reference, task=task, metric=metric,
                                 filter_name=filter_name, repeated_models=repeated_models)
        return [matrix]
    if repeated_models != "error":
        raise BayevalError("--repeated-models reads your --reference; the bundled "
                           "datasets number their repeats already")
    if task is not None or metric is not None or filter_name is not None:
        raise BayevalError("--task, --metric and --filter read lm-evaluation-harness logs: "
                           "give --reference lm-eval:OUTPUT_DIR (or inspect:LOG_DIR)")
    from bayeval.data import list_datasets

    names = comma_list(datasets)
    return list_datasets() if names == ["all"] else names


def parse_shares(option: str, text: str | Sequence[float],
                 what: str = "value must be a share") -> list[float]:
    """The numbers of a comma-separated option value (``--budgets``, ``--epsilons``), each
    in (0, 1), or a one-line error naming the option."""
    try:
        values = [float(x) for x in (comma_list(text) if isinstance(text, str) else text)]
    except ValueError:
        raise BayevalError(f"{option}: not a comma-separated list of numbers: "
                           f"{text!r}") from None
    if not values or any(not 0 < v < 1 for v in values):
        raise BayevalError(f"{option}: every {what} in (0, 1), got {text!r}")
    return values
