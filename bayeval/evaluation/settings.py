"""The settings of a live evaluation, as frozen values: one per task
(:class:`TaskSettings`), one for the evaluator (:class:`EvaluatorOptions`) and one for the
run (:class:`RunSettings`), each checked once when it is made (one-line
:class:`~bayeval.errors.BayevalError`). A run of one task is a suite of one; the same
values round-trip to a run file (TOML, :mod:`bayeval.evaluation.run_file`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bayeval.errors import BayevalError
from bayeval.evaluation.options import (
    DEFAULT_BATCH,
    EvaluatorKind,
    GroupMean,
    LmEvalMode,
    RepeatedModels,
    task_label,
)

__all__ = ["EvaluatorOptions", "RunSettings", "TaskSettings"]


def _text(value: Any) -> str | None:
    """A path or text option as text (None stays None)."""
    return None if value is None else str(value)


def _positive(value: Any, what: str, integer: bool = False) -> None:
    if value is None:
        return
    kinds = int if integer else int | float
    if (isinstance(value, bool) or not isinstance(value, kinds)
            or not math.isfinite(value) or value <= 0):
        raise BayevalError(f"{what} must be a positive {'whole' if integer else 'finite'} "
                           f"number, got {value!r}")


def _one_of(value: Any, kinds: type, what: str) -> str | None:
    if value is None:
        return None
    allowed = [k.value for k in kinds]  # type: ignore[attr-defined]
    if str(value) not in allowed:
        raise BayevalError(f"{what} {value!r} is not one of {', '.join(allowed)}")
    return str(value)


@dataclass(frozen=True)
class TaskSettings:
    """One task of a run: where its reference scores come from, and how it counts.

    dataset: a bundled dataset (see ``bayeval datasets``); or reference: a score matrix
        file, ``lm-eval:DIR`` (harness ``--log_samples`` output, with ``task``, ``metric``,
        ``filter``) or ``inspect:DIR`` (Inspect logs, ``metric`` naming the scorer).
        Neither: the bundled default (IFEval).
    name: the task's name in a suite (default: its task, dataset or file stem).
    weight, cost: its weight in a suite's average and its cost per item (default: Inspect
        logs' mean tokens per sample, else 1).
    target, command, inspect_task: this task's own name of the target, command and
        Inspect task, where they differ from the run's.
    repeated_models: ``error`` or ``number`` (a file's repeated model ids as ID#2, …).
    """

    dataset: str | None = None
    reference: str | None = None
    task: str | None = None
    metric: str | None = None
    filter: str | None = None
    name: str | None = None
    weight: float = 1.0
    cost: float | None = None
    target: str | None = None
    command: str | None = None
    inspect_task: str | None = None
    repeated_models: str = RepeatedModels.error.value

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "reference", _text(self.reference))
        set_(self, "repeated_models", _one_of(self.repeated_models, RepeatedModels,
                                              "repeated_models"))
        if self.dataset is not None and self.reference is not None:
            raise BayevalError("give either --dataset or --reference, not both")
        _positive(self.weight, "weight")
        _positive(self.cost, "cost")

    @property
    def label(self) -> str:
        """The task's name (:func:`~bayeval.evaluation.options.task_label`)."""
        return task_label(self.name, self.task, self.dataset, self.reference)

    def suite_entry(self) -> dict[str, Any]:
        """The task as a suite file's ``[[tasks]]`` table holds it (keys at their
        default left out)."""
        entry = {k: v for k, v in dataclasses.asdict(self).items()
                 if v is not None and k != "repeated_models"}
        entry["name"] = self.label
        return entry


@dataclass(frozen=True)
class EvaluatorOptions:
    """How items are scored.

    kind: ``oracle`` (the target's row of its reference: a simulation), ``command``
        (``command`` run per item in a shell: ``{item}`` becomes the id; ``timeout``
        seconds, ``retries`` retries), ``lm-eval`` (lm-evaluation-harness with
        ``lm_eval_args``, ``lm_eval_mode`` ``in-process`` or ``subprocess``) or
        ``inspect`` (Inspect AI running ``inspect_task`` on the target).
    output_path: where the harness keeps the target's own output (Inspect: its logs).
    batch: items asked and evaluated together (default 32 for lm-eval, 8 for Inspect,
        else 1); concurrency: evaluations in flight (command or oracle).
    """

    kind: str = EvaluatorKind.oracle.value
    command: str | None = None
    timeout: float = 600.0
    retries: int = 1
    lm_eval_args: str | None = None
    lm_eval_mode: str = LmEvalMode.in_process.value
    inspect_task: str | None = None
    output_path: str | None = None
    batch: int | None = None
    concurrency: int = 1

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "kind", _one_of(self.kind, EvaluatorKind, "evaluator"))
        set_(self, "lm_eval_mode", _one_of(self.lm_eval_mode, LmEvalMode, "lm_eval_mode"))
        set_(self, "output_path", _text(self.output_path))
        _positive(self.batch, "--batch", integer=True)
        _positive(self.concurrency, "--concurrency", integer=True)
        if self.concurrency > 1 and self.batch is not None and self.batch > 1:
            raise BayevalError("give --batch or --concurrency, not both (a batch waits for "
                               "all its items; concurrency draws as each one finishes)")

    @property
    def batch_size(self) -> int:
        """The batch asked: ``batch``, else the kind's default (:data:`DEFAULT_BATCH`)."""
        return self.batch or DEFAULT_BATCH.get(self.kind, 1)


@dataclass(frozen=True)
class RunSettings:
    """A live evaluation: its tasks (one, or a suite of several), the evaluator, the
    target (or several ``targets`` evaluated jointly, one task), the method spec (e.g.
    ``'active-pai'``, ``'faq(budget=0.1)'``), the stop (``epsilon``: the 95% interval's
    width; a suite's average, with ``task_epsilon`` for each task), a budget
    (``max_items``), the seed, and the journal (a file; a folder for a suite).
    ``subtasks``: a harness group's subtasks, each with its own run, and the group's
    score (``group_mean``: ``size`` or ``equal``)."""

    tasks: tuple[TaskSettings, ...] = (TaskSettings(),)
    evaluator: EvaluatorOptions = field(default_factory=EvaluatorOptions)
    target: str | None = None
    targets: tuple[str, ...] | None = None
    method: str | None = None
    epsilon: float | None = None
    task_epsilon: float | None = None
    max_items: int | None = None
    seed: int | None = None
    journal: str | None = None
    subtasks: bool = False
    group_mean: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        tasks = (self.tasks,) if isinstance(self.tasks, TaskSettings) else tuple(self.tasks)
        if not tasks or not all(isinstance(t, TaskSettings) for t in tasks):
            raise BayevalError("tasks: give one or more TaskSettings")
        set_(self, "tasks", tasks)
        if isinstance(self.targets, str):
            set_(self, "targets", tuple(t.strip() for t in self.targets.split(",")
                                        if t.strip()))
        elif self.targets is not None:
            set_(self, "targets", tuple(str(t) for t in self.targets))
        set_(self, "journal", _text(self.journal))
        set_(self, "group_mean", _one_of(self.group_mean, GroupMean, "--group-mean"))
        if self.targets is not None and self.target is not None:
            raise BayevalError("give either --target or --targets, not both")
        if self.targets is not None and not self.targets:
            raise BayevalError("--targets needs at least one model name")
        for key in ("epsilon", "task_epsilon"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, int | float)):
                raise BayevalError(f"{key} must be a number, got {value!r}")
        if self.group_mean is not None and not self.subtasks:
            raise BayevalError("--group-mean is for --subtasks (a harness group's score)")
        if self.subtasks and len(tasks) > 1:
            raise BayevalError("give --suite FILE or --subtasks, not both")
        if self.suite and self.targets is not None:
            raise BayevalError("--targets evaluates several models on one task; a suite "
                               "evaluates one model (--target) on several tasks")
        names = [t.label for t in tasks]
        twice = sorted({n for n in names if names.count(n) > 1})
        if len(tasks) > 1 and twice:
            raise BayevalError(f"two tasks are named {twice[0]!r}; give each a distinct "
                               "name")

    @property
    def suite(self) -> bool:
        """Whether the run is a suite (several tasks, or a group's subtasks)."""
        return len(self.tasks) > 1 or self.subtasks

    def replace(self, **changes: Any) -> RunSettings:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_file(cls, path: str | Path) -> RunSettings:
        """The settings a run file (or a suite file) holds
        (:mod:`bayeval.evaluation.run_file`); a reference relative to the file is read
        from beside it; a bad key or value is a one-line error naming the file."""
        from bayeval.evaluation.run_file import read_suite_file

        path = Path(path)
        spec = read_suite_file(path, run=True)
        evaluator = spec.pop("evaluator", None) or {}
        if not isinstance(evaluator, dict):
            raise BayevalError(f"--run {path}: [evaluator] must be a table")
        try:
            return cls(tasks=tuple(TaskSettings(**t) for t in spec.pop("tasks")),
                       evaluator=EvaluatorOptions(**evaluator), **spec)
        except TypeError as exc:  # an unknown key of [evaluator]
            raise BayevalError(f"--run {path}: {exc}") from None
        except BayevalError as exc:
            raise BayevalError(f"--run {path}: {exc}") from None

    def to_toml(self) -> str:
        """These settings as a run file's text (``from_file`` reads them back equal)."""
        from bayeval.evaluation.run_file import run_file_text

        return run_file_text(self)

    @classmethod
    def of(cls, **options: Any) -> RunSettings:
        """Settings from keywords: a run's fields, the one task's fields (``dataset``,
        ``reference``, ``task``, …) and the evaluator's (``command``, ``lm_eval_args``,
        ``batch``, …; ``evaluator`` may be its kind), in any mix."""
        task_keys = ({f.name for f in dataclasses.fields(TaskSettings)}
                     - {"target", "name", "command", "inspect_task"})  # the run's: evaluator
        eval_keys = {f.name for f in dataclasses.fields(EvaluatorOptions)} - {"kind"}
        run_keys = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - task_keys - eval_keys - run_keys)
        if unknown:
            raise BayevalError(f"unknown setting {unknown[0]!r}")
        task = {k: options.pop(k) for k in list(options) if k in task_keys - run_keys}
        live = {k: options.pop(k) for k in list(options) if k in eval_keys - run_keys}
        evaluator = options.pop("evaluator", None)
        if isinstance(evaluator, EvaluatorOptions):
            if live:
                raise BayevalError(f"{sorted(live)[0]} is a setting of the evaluator: give "
                                   "it in EvaluatorOptions")
        else:
            evaluator = EvaluatorOptions(**({} if evaluator is None else
                                            {"kind": evaluator}), **live)
        if task:
            if "tasks" in options:
                raise BayevalError(f"{sorted(task)[0]} is a setting of a task: give it in "
                                   "TaskSettings")
            options["tasks"] = (TaskSettings(**task),)
        return cls(evaluator=evaluator, **options)
