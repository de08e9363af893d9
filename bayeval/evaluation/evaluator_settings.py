"""How a live run scores its items: one typed value, journaled with the run.

:func:`bayeval.evaluate` and ``bayeval select`` keep their :class:`EvaluatorSettings` in
the journal header's ``extra`` (as JSON) so that a resume scores the remaining items the
same way, and build the evaluator from them (:meth:`EvaluatorSettings.evaluator_for`).
:func:`evaluator_kind` checks an evaluator's options before any work.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bayeval.errors import BayevalError, JournalError
from bayeval.evaluation.options import (
    FAILURES_IN_A_ROW,
    SUBPROCESS,
    TOOL_EVALUATORS,
    EvaluatorKind,
)
from bayeval.evaluation.settings import PYTHON_KIND
from bayeval.evaluation.sources import load_source, resume_session

__all__ = ["EvaluatorSettings", "command_evaluator", "evaluator_kind", "resume_from",
           "row_score"]


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
    calls: how a run in batches sizes its calls (``fixed``, ``taper``, ``grow``, ``fine``:
        :data:`bayeval.loop.call_sizes.CALL_RULES`); a journal from before the rules has
        none and ran fixed calls.
    lm_eval_args, task, metric, filter, subtasks: the harness's options, its task, and
        the per-sample metric, filter and subtask weights the reference scores are.
    lm_eval_mode: ``in-process`` or ``subprocess`` (a journal from before the in-process
        route has none and ran subprocesses).
    output_path: where the harness keeps the target's own output (Inspect: its logs).
    source, history: ``bayeval select``'s reference source and history note.
    python: the Python object that evaluated (``function f``, ``harness LM …``,
        ``Inspect task …``), which a journal cannot hold: a resume takes it again.
    changes: what a resume changed of the evaluator, and when (a corrected command,
        harness options, a Python evaluator given again).
    """

    evaluator: str = EvaluatorKind.oracle.value
    command: str | None = None
    timeout: float | None = None
    retries: int = 0
    batch: int = 1
    concurrency: int = 1
    calls: str = "fixed"
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
    python: str | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        kinds = [k.value for k in EvaluatorKind] + [PYTHON_KIND]
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
    def needs_object(self) -> bool:
        """Whether scoring needs a Python object the journal cannot hold (a function, a
        harness LM object, an Inspect Task object)."""
        return self.evaluator == PYTHON_KIND or self.python is not None

    def changed(self, **changes: Any) -> EvaluatorSettings:
        """These settings with ``changes`` made by a resume, which the journal keeps:
        each change's old and new value and when (UTC)."""
        import time

        record = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  **{k: {"was": getattr(self, k), "now": v} for k, v in changes.items()}}
        return self.replace(**changes, changes=[*self.changes, record])

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
        from bayeval.evaluators.base import MatrixOracle

        if self.needs_object:
            raise BayevalError(f"this run's evaluator was a Python object ({self.python}), "
                               "which a journal cannot hold: give it again, "
                               "bayeval.resume(journal, evaluator=…)")
        if self.evaluator == EvaluatorKind.lm_eval.value:
            from bayeval.evaluators.harness import LmEvalCommand, LmEvalInProcess

            where = ([tuple(x) for x in self.subtasks], self.metric, self.filter)
            if self.lm_eval_mode == SUBPROCESS:
                return LmEvalCommand(self.lm_eval_args, self.task, *where,
                                     timeout=self.timeout, output_path=self.output_path)
            return LmEvalInProcess.from_args(self.lm_eval_args, self.task, *where,
                                             output_path=self.output_path, name=targets[0],
                                             lm=lm)
        if self.evaluator == EvaluatorKind.inspect.value:
            from bayeval.evaluators.inspect_eval import InspectEvaluator

            return InspectEvaluator(self.inspect_task, targets[0], self.output_path,
                                    self.metric)
        if self.evaluator == EvaluatorKind.command.value:
            runner = command_evaluator(self.command, self.timeout, self.retries)
            return (lambda target, item: runner(item, target)) if several else runner
        if not several:
            return MatrixOracle(matrix, targets[0])
        oracles = {t: MatrixOracle(matrix, t) for t in targets}
        return lambda target, item: oracles[target](item)


def resume_from(session_class, journal: Path, method=None):
    """(session, its :class:`EvaluatorSettings`, the whole source matrix) from
    ``journal`` (``method``: a composed method given again)."""
    session = resume_session(session_class, journal, method=method)
    settings = EvaluatorSettings.from_json(session.extra, f"journal {journal}")
    return session, settings, load_source(session.reference_source or {}, journal)


def command_evaluator(command: str, timeout: float, retries: int):
    """The CommandEvaluator of ``--command``; a command it refuses (a quoted placeholder,
    say) is a bad option, exit status 2, said before any journal is written."""
    from bayeval.errors import EvaluationError
    from bayeval.evaluators.base import CommandEvaluator

    try:
        return CommandEvaluator(command, timeout=timeout, retries=retries)
    except EvaluationError as exc:
        raise BayevalError(str(exc)) from None


def _check_tool(kind: str, tool_kind: str, given: str | None, harness: bool) -> None:
    """``--evaluator TOOL_KIND`` (:data:`TOOL_EVALUATORS`): offered by this command,
    given its option, and its tool installed; its option refused with another kind."""
    import importlib.util
    import sys

    option, takes, module, tool, install = TOOL_EVALUATORS[tool_kind]
    if kind != tool_kind:
        if given is not None:
            raise BayevalError(f"{option} is only used with --evaluator {tool_kind}")
        return
    if not harness:
        raise BayevalError(f"--evaluator {tool_kind} evaluates one model's items (bayeval "
                           "evaluate); use command here")
    if not given:
        raise BayevalError(f"--evaluator {tool_kind} needs {option} {takes}")
    if importlib.util.find_spec(module) is None:
        raise BayevalError(f"--evaluator {tool_kind}: {tool} is not installed in this "
                           f"Python ({sys.executable}); {install}")


def evaluator_kind(evaluator: str | None, command: str | None, timeout: float,
                   retries: int, usage: str, lm_eval_args: str | None = None,
                   harness: bool = False, inspect_task: str | None = None) -> str:
    """The kind of ``--evaluator`` (oracle by default), with ``--command`` checked before
    any work: required, and accepted by the CommandEvaluator, for ``command``; refused
    otherwise. ``usage``: the command's form for the error, e.g. ``'CMD {item}'``.
    ``harness``: whether this command offers ``--evaluator lm-eval`` (it needs
    ``--lm-eval-args`` and an installed lm-evaluation-harness) and ``--evaluator
    inspect`` (it needs ``--inspect-task`` and an installed Inspect AI)."""
    kinds = [k.value for k in EvaluatorKind]
    kind = str(evaluator or EvaluatorKind.oracle.value)
    if kind == PYTHON_KIND:
        raise BayevalError("evaluator python: give the function itself, "
                           "bayeval.evaluate(…, evaluator=fn)")
    if kind not in kinds:
        raise BayevalError(f"--evaluator {kind!r} is not one of {', '.join(kinds)}")
    _check_tool(kind, EvaluatorKind.inspect.value, inspect_task, harness)
    _check_tool(kind, EvaluatorKind.lm_eval.value, lm_eval_args, harness)
    if kind == EvaluatorKind.lm_eval.value:
        from bayeval.errors import EvaluationError
        from bayeval.evaluators.harness import LmEvalCommand

        try:  # its arguments are refused before any journal
            LmEvalCommand(lm_eval_args, "task", timeout=timeout)
        except EvaluationError as exc:
            raise BayevalError(str(exc)) from None
    if kind == EvaluatorKind.command.value:
        if not command:
            raise BayevalError(f"--evaluator command needs --command {usage!r}")
        command_evaluator(command, timeout, retries)  # refused before any journal
    elif command is not None:
        raise BayevalError("--command is only used with --evaluator command")
    return kind
