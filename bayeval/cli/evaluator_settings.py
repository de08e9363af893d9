"""How a command-line run scores its items: one typed value, journaled with the run.

``bayeval evaluate`` and ``bayeval select`` keep their :class:`EvaluatorSettings` in the
journal header's ``extra`` (as JSON) so that ``--resume`` scores the remaining items the
same way, and build the evaluator from them (:meth:`EvaluatorSettings.evaluator`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bayeval.cli.common import (
    FAILURES_IN_A_ROW,
    SUBPROCESS,
    EvaluatorKind,
    command_evaluator,
    load_source,
    resume_session,
)
from bayeval.errors import JournalError

__all__ = ["EvaluatorSettings", "resume_from", "row_score"]


def row_score(matrix, target: str) -> float | None:
    """The mean of the matrix's complete row named ``target`` (None without one)."""
    if target not in set(matrix.models):
        return None
    row = matrix.row(target)
    return None if np.isnan(row).any() else float(row.mean())


@dataclass(frozen=True)
class EvaluatorSettings:
    """The evaluator of a run and what it needs.

    evaluator: ``oracle`` (the target's row of the reference), ``command`` (``command``
        run per item with ``timeout`` seconds and ``retries`` retries), ``lm-eval`` or
        ``inspect`` (``inspect_task`` run on the target by Inspect AI, scored by
        ``metric``).
    batch, concurrency: items evaluated together, evaluations in flight.
    lm_eval_args, task, metric, filter, subtasks: the harness's options, its task, and
        the per-sample metric, filter and subtask weights the reference scores are.
    lm_eval_mode: ``in-process`` or ``subprocess`` (a journal from before the in-process
        route has none and ran subprocesses).
    output_path: where the harness keeps the target's own output (Inspect: its logs).
    source, history: ``bayeval select``'s reference source and history note.
    """

    evaluator: str = EvaluatorKind.oracle.value
    command: str | None = None
    timeout: float | None = None
    retries: int = 0
    batch: int = 1
    concurrency: int = 1
    lm_eval_args: str | None = None
    task: str | None = None
    metric: str | None = None
    filter: str | None = None
    subtasks: list[list[Any]] = field(default_factory=list)
    lm_eval_mode: str = SUBPROCESS
    output_path: str | None = None
    inspect_task: str | None = None
    source: dict[str, Any] | None = None
    history: str | None = None

    def __post_init__(self) -> None:
        kinds = [k.value for k in EvaluatorKind]
        if self.evaluator not in kinds:
            raise JournalError(f"evaluator {self.evaluator!r} is not one of {kinds}")

    @classmethod
    def from_json(cls, extra: dict[str, Any], where: str) -> EvaluatorSettings:
        """The settings a journal header's ``extra`` holds (keys that are not settings,
        a Python caller's own data, are left alone; none at all: the oracle); ``where``
        (the journal) names it in the error for an unknown evaluator."""
        nullable = {f.name: f.default is None for f in dataclasses.fields(cls)}
        given = {k: v for k, v in extra.items() if k in nullable
                 and (v is not None or nullable[k])}
        try:
            return cls(**given)
        except JournalError as exc:
            raise JournalError(f"{where}: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        """The JSON of the journal header (settings at their defaults included)."""
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> EvaluatorSettings:
        return dataclasses.replace(self, **changes)

    def true_score(self, matrix, target: str) -> float | None:
        """The target's full-benchmark score when the oracle answered from its complete
        row; None for a live evaluator: a reference row of the same name is another run,
        reported apart (``reference_row_score``) and never used to judge this one's
        interval."""
        return None if self.live else row_score(matrix, target)

    @property
    def live(self) -> bool:
        """Whether items are scored by running something (not read from the reference)."""
        return self.evaluator != EvaluatorKind.oracle.value

    @property
    def max_failures(self) -> int | None:
        """Failures in a row that stop a run: a live evaluator stops after
        FAILURES_IN_A_ROW; the oracle never does (a missing cell is a skip, not a
        fault)."""
        return FAILURES_IN_A_ROW if self.live else None

    def evaluator_for(self, matrix, targets: list[str], several: bool = False,
                      lm: Any = None):
        """The evaluator of a run: ``f(item)`` for one target, ``f(target, item)`` for
        several (the command gets ``{target}``; the oracle reads each target's row);
        ``lm``: the harness model another task of the run loaded (in process, used as it
        is)."""
        from bayeval.evaluators import MatrixOracle

        if self.evaluator == EvaluatorKind.lm_eval.value:
            from bayeval.harness import LmEvalCommand, LmEvalInProcess

            where = ([tuple(x) for x in self.subtasks], self.metric, self.filter)
            if self.lm_eval_mode == SUBPROCESS:
                return LmEvalCommand(self.lm_eval_args, self.task, *where,
                                     timeout=self.timeout, output_path=self.output_path)
            return LmEvalInProcess.from_args(self.lm_eval_args, self.task, *where,
                                             output_path=self.output_path, name=targets[0],
                                             lm=lm)
        if self.evaluator == EvaluatorKind.inspect.value:
            from bayeval.inspect_evaluator import InspectEvaluator

            return InspectEvaluator(self.inspect_task, targets[0], self.output_path,
                                    self.metric)
        if self.evaluator == EvaluatorKind.command.value:
            runner = command_evaluator(self.command, self.timeout, self.retries)
            return (lambda target, item: runner(item, target)) if several else runner
        if not several:
            return MatrixOracle(matrix, targets[0])
        oracles = {t: MatrixOracle(matrix, t) for t in targets}
        return lambda target, item: oracles[target](item)


def resume_from(session_class, journal: Path, given: dict[str, Any]):
    """(session, its :class:`~bayeval.cli.evaluator_settings.EvaluatorSettings`, the
    whole source matrix) from ``journal``."""
    session = resume_session(session_class, journal, given)
    settings = EvaluatorSettings.from_json(session.extra, f"journal {journal}")
    return session, settings, load_source(session.reference_source or {}, journal)
