"""Where a run's reference comes from: the source record a journal keeps (a bundled
dataset, a matrix file, harness logs, Inspect logs), its whole matrix, and the session a
journal records. What their readers warn of is passed on as one
:class:`~bayeval.errors.BayevalWarning` each (the command line prints each as a line)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from bayeval.errors import BayevalError, BayevalWarning, DataError
from bayeval.evaluation.options import (
    DEFAULT_DATASET,
    INSPECT_PREFIX,
    LM_EVAL_PREFIX,
    EvaluatorKind,
)

__all__ = [
    "fresh_source",
    "load_source",
    "passed_on",
    "refuse_given",
    "resumable",
    "resume_session",
    "run_targets",
]

T = TypeVar("T")


def passed_on(make: Callable[[], T]) -> T:
    """``make()``, each warning it raised given again as a BayevalWarning (its text kept),
    so that a caller sees every one, however often the same reader warned."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = make()
    for w in caught:
        warnings.warn(str(w.message), BayevalWarning, stacklevel=3)
    return value


def fresh_source(dataset: str | None, reference: Path | None,
                 default: str = DEFAULT_DATASET, task: str | None = None,
                 metric: str | None = None, filter_name: str | None = None,
                 harness_evaluator: bool = False, repeated_models: str = "error"):
    """(source record for the journal header, the matrix) of --dataset / --reference
    (``default``: the bundled dataset when neither is given); ``--reference lm-eval:DIR``
    reads lm-evaluation-harness logs of ``task`` (with ``metric``, ``filter_name``; these
    also serve ``harness_evaluator``, the lm-eval evaluator). A missing file is said before
    pandas and JAX load. ``repeated_models="number"`` numbers a matrix file's or Inspect
    logs' repeated model ids (kept in the record, so a resume reads the same rows)."""
    repeated_models = str(repeated_models)
    if dataset is not None and reference is not None:
        raise BayevalError("give either --dataset or --reference, not both")
    harness = reference is not None and str(reference).startswith(LM_EVAL_PREFIX)
    inspect = reference is not None and str(reference).startswith(INSPECT_PREFIX)
    if inspect and filter_name is not None:
        raise BayevalError("--filter reads lm-evaluation-harness logs; Inspect logs name "
                           "their scorer with --metric")
    if not (harness or inspect or harness_evaluator) and (
            metric is not None or filter_name is not None):
        raise BayevalError("--metric and --filter read lm-evaluation-harness logs: give "
                           "--reference lm-eval:OUTPUT_DIR (or --metric with "
                           "--reference inspect:LOG_DIR)")
    source: dict[str, Any]
    if inspect:
        folder = Path(str(reference)[len(INSPECT_PREFIX):])
        if not folder.is_dir():
            raise DataError(f"{folder}: no such folder (--reference inspect:LOG_DIR names "
                            "Inspect's --log-dir)")
        source = {"inspect": str(folder.resolve()), "task": task, "metric": metric}
    elif harness:
        folder = Path(str(reference)[len(LM_EVAL_PREFIX):])
        if not folder.is_dir():
            raise DataError(f"{folder}: no such folder (--reference lm-eval:OUTPUT_DIR "
                            "names the harness's --output_path)")
        if not task:
            raise BayevalError("--reference lm-eval:DIR needs --task NAME (the harness "
                               "task or group to read)")
        source = {"lm_eval": str(folder.resolve()), "task": task, "metric": metric,
                  "filter": filter_name}
    elif reference is not None:
        reference = Path(reference)
        if not reference.exists():  # before pandas and JAX load
            raise DataError(f"{reference}: no such file")
        source = {"path": str(reference.resolve())}
    else:
        source = {"dataset": dataset or default}
    if repeated_models != "error":
        if "path" not in source and "inspect" not in source:
            raise BayevalError("--repeated-models reads a matrix file or Inspect logs "
                               "(--reference FILE or inspect:LOG_DIR); the bundled datasets "
                               "number their repeats already")
        source["repeated_models"] = repeated_models
    matrix = load_source(source)
    if harness or inspect:  # resumes read the same task, metric or scorer
        source["metric"] = matrix.metadata.get("metric", metric)
    if inspect:
        source["task"] = matrix.metadata["task"]
    return source, matrix


def load_source(source: dict[str, Any], journal: Path | str = "journal"):
    """The whole matrix of a source record (its reader's warnings, a subset run passed
    over say, passed on)."""
    from bayeval.data.sources import load_source_matrix

    return passed_on(lambda: load_source_matrix(source, journal))


def resume_session(session_class, journal: Path, reference=None, method=None):
    """The session ``journal`` records (its repair warnings passed on). ``reference``:
    its reference matrix when the caller has it already (else read from the header's
    source); ``method``: a composed method given again (a registered one is read from
    the journal)."""
    extra = {} if method is None else {"method": method}
    return passed_on(lambda: session_class.resume(journal) if reference is None and not extra
                     else session_class.resume(journal, reference, **extra))


def refuse_given(journal: Path, given: dict[str, Any]) -> None:
    """A resume reads its settings from ``journal``: ``given`` (option → value) must all
    be None."""
    clash = [k for k, v in given.items() if v is not None]
    if clash:
        raise BayevalError(f"--resume reads the settings from {journal}; drop "
                           f"{', '.join(clash)}")


@contextlib.contextmanager
def resumable(session, command: str) -> Iterator[Any]:
    """``with session``, and on Ctrl-C or SIGTERM a note on the interruption naming the
    ``bayeval COMMAND --resume`` that continues the run."""
    import shlex

    try:
        with session:
            yield session
    except KeyboardInterrupt as exc:
        if session.journal_path is not None:
            exc.add_note(f"bayeval {command} --resume --journal "
                         f"{shlex.quote(str(session.journal_path))}")
        raise


def run_targets(settings: Any, kind: str, matrix: Any, seed: int
                ) -> tuple[list[str], list[str]]:
    """(the run's target names, those the matrix holds, held out of its reference): the
    names are --targets, --target, or (oracle) a model drawn with the seed; an oracle's
    targets must be models of the matrix, and leave a reference."""
    import numpy as np

    several = settings.targets is not None
    if several:
        names = list(settings.targets or ())
    elif settings.target is not None:
        names = [settings.target]
    elif kind != EvaluatorKind.oracle.value:
        raise BayevalError(f"--evaluator {kind} needs --model NAME for the new model")
    else:
        names = [str(np.random.default_rng(seed).choice(matrix.models))]
    known = set(matrix.models)
    unknown = [t for t in names if t not in known]
    if kind == EvaluatorKind.oracle.value and unknown:
        raise BayevalError(f"unknown target id{'s' if len(unknown) > 1 else ''} "
                           f"{unknown if several else repr(unknown[0])}: not "
                           f"{'models' if several else 'a model'} of {matrix.name} "
                           f"({matrix.n_models} models)")
    held = [t for t in names if t in known]
    if held and len(held) == matrix.n_models:
        raise BayevalError(
            f"{matrix.name}: the targets are all its {matrix.n_models} model(s); held "
            "out they leave no reference model" if several else
            f"{matrix.name} holds one model, {held[0]!r}: held out as the target it "
            "leaves no reference model")
    return names, held
