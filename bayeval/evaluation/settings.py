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
    DEFAULT_DATASET,
    INSPECT_PREFIX,
    LM_EVAL_PREFIX,
    EvaluatorKind,
    GroupMean,
    LmEvalMode,
    RepeatedModels,
    comma_list,
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


class _Described:
    """Settings whose fields carry their meaning (``metadata["help"]``): one text for a
    Python user (``help(RunSettings)`` lists them), the run file and ``bayeval evaluate
    --help``, where each is the option of the same name."""

    @classmethod
    def help(cls, name: str) -> str:
        """What setting ``name`` means."""
        return next(f for f in dataclasses.fields(cls) if f.name == name).metadata["help"]


def _setting(default: Any, text: str) -> Any:
    """A field whose meaning is ``text`` (:meth:`_Described.help`)."""
    return field(default=default, metadata={"help": text})


def _described(cls: type) -> type:
    """``cls`` with its fields' meanings appended to its docstring."""
    import textwrap

    lines = [textwrap.fill(f"{f.name}: {f.metadata['help']}", 88, initial_indent="    ",
                           subsequent_indent="        ")
             for f in dataclasses.fields(cls) if "help" in f.metadata]
    cls.__doc__ = f"{cls.__doc__}\n\n    What the fields mean (each also an option of " \
                  f"``bayeval evaluate``):\n\n" + "\n".join(lines) + "\n"
    return cls


def _one_of(value: Any, kinds: type, what: str) -> str | None:
    if value is None:
        return None
    allowed = [k.value for k in kinds]  # type: ignore[attr-defined]
    if str(value) not in allowed:
        raise BayevalError(f"{what} {value!r} is not one of {', '.join(allowed)}")
    return str(value)


@_described
@dataclass(frozen=True)
class TaskSettings(_Described):
    """One task of a run: where its reference scores come from (``dataset``, or
    ``reference`` with ``task``, ``metric``, ``filter``: below), and how it counts.

    name: the task's name in a suite (default: its task, dataset or file stem).
    weight, cost: its weight in a suite's average and its cost per item (default: Inspect
        logs' mean tokens per sample, else 1).
    target, command, inspect_task: this task's own name of the target, command and
        Inspect task, where they differ from the run's.
    """

    dataset: str | None = _setting(None, (
        "Bundled dataset to use as reference (see `bayeval datasets`). Default: "
        f"{DEFAULT_DATASET}."))
    reference: str | None = _setting(None, (
        "A score matrix file (.npz, .csv or .parquet, wide or long) instead of a "
        "bundled dataset, lm-eval:OUTPUT_DIR for lm-evaluation-harness --log_samples "
        "output (with --task), or inspect:LOG_DIR for Inspect AI eval logs (pip "
        "install 'bayeval[inspect]')."))
    task: str | None = _setting(None, (
        "The task to read with --reference lm-eval:DIR (a harness task or group, e.g."
        " leaderboard_ifeval) or inspect:DIR (default there: the logs' only task)."))
    metric: str | None = _setting(None, (
        "With --reference lm-eval:DIR: the per-sample metric (default: the log's "
        "first, e.g. acc); with inspect:DIR: the scorer (default: the only one), "
        "SCORER:KEY for a scorer whose value is a dict."))
    filter: str | None = _setting(None, (
        "With --reference lm-eval:DIR: the harness filter to read when a task logs "
        "several (e.g. strict-match)."))
    name: str | None = None
    weight: float = 1.0
    cost: float | None = None
    target: str | None = None
    command: str | None = None
    inspect_task: str | None = None
    repeated_models: str = _setting(RepeatedModels.error.value, (
        "A model id listed twice in --reference (a matrix file or Inspect logs): "
        "error, or number (the repeats kept as ID#2, ID#3, …, as the bundled "
        "leaderboard matrices do)."))

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "reference", _text(self.reference))
        set_(self, "repeated_models", _one_of(self.repeated_models, RepeatedModels,
                                              "repeated_models"))
        if self.dataset is not None and self.reference is not None:
            raise BayevalError("give either --dataset or --reference, not both")
        _positive(self.weight, "weight")
        _positive(self.cost, "cost")

    @classmethod
    def from_logs(cls, reference: str | Path, tasks: list[str] | tuple[str, ...],
                  metric: str | None = None, filter: str | None = None,
                  ) -> tuple[TaskSettings, ...]:
        """Several tasks read from one ``lm-eval:DIR`` or ``inspect:DIR`` ``reference``
        (``bayeval evaluate --task A --task B``), each named by its task, equally
        weighted."""
        from bayeval.loop.suite import task_id

        if reference is None or not str(reference).startswith((LM_EVAL_PREFIX,
                                                               INSPECT_PREFIX)):
            raise BayevalError("several --task make a suite of tasks read from one "
                               "--reference lm-eval:DIR or inspect:DIR (bundled datasets: "
                               "--suite FILE)")
        twice = sorted({t for t in tasks if tasks.count(t) > 1})
        if twice:
            raise BayevalError(f"--task {twice[0]} is given twice")
        for t in tasks:  # a task's name names its files in the suite's folder
            task_id(t, f"--task {t[:60]!r}")
        return tuple(cls(name=t, reference=str(reference), task=t, metric=metric,
                         filter=filter) for t in tasks)

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


@_described
@dataclass(frozen=True)
class EvaluatorOptions(_Described):
    """How items are scored: by the oracle (a simulation), a command per item,
    lm-evaluation-harness or Inspect AI (``kind``), with the settings below."""

    kind: str = _setting(EvaluatorKind.oracle.value, (
        "oracle: simulate with the target's known row; command: run --command for "
        "each item; lm-eval: lm-evaluation-harness, the model and task loaded once in"
        " this process and run on each batch of --batch items (see --lm-eval-mode), "
        "reading the reference's metric back; inspect: Inspect AI runs --inspect-task"
        " on the --target model (an Inspect model name such as openai/gpt-4o-mini) in"
        " this process, one eval per batch of --batch items (default 8), scored by "
        "--metric, its logs kept in --output-path."))
    command: str | None = _setting(None, (
        "Shell command that evaluates one item and prints its score (0..1) as the "
        "last line; {item} (unquoted: it is passed quoted, as one argument) becomes "
        "the item id, also in $BAYEVAL_ITEM (without {item} the id is appended). An "
        "item that still fails after --retries stops active-pai, active-pai-joint and"
        " faq (their estimate weighs every drawn item; --resume asks it again); the "
        "other methods skip it and stop after three failures in a row. Either way the"
        " exit status is 3."))
    timeout: float = _setting(600.0, (
        "Seconds before a command is killed."))
    retries: int = _setting(1, (
        "Retries of a failing command (a non-zero exit, no number in [0, 1] on its "
        "last line, or a timeout) before the item (or pair) counts as failed; a stop "
        "(Ctrl-C, SIGTERM) retries nothing."))
    lm_eval_args: str | None = _setting(None, (
        "With --evaluator lm-eval: the harness's options as `lm_eval run` takes them,"
        " e.g. '--model hf --model_args pretrained=gpt2 --include_path tasks/' or "
        "'--model local-completions --model_args model=M,base_url=URL' (bayeval sets "
        "--tasks and --samples; --limit is --max-items here)."))
    lm_eval_mode: str = _setting(LmEvalMode.in_process.value, (
        "in-process: load the model and the task once and run each batch on them "
        "(fast); subprocess: launch `lm_eval run` once per batch (isolated, but every"
        " launch loads the model again)."))
    inspect_task: str | None = _setting(None, (
        "With --evaluator inspect: the Inspect task, FILE.py@TASK (imported once, "
        "with what it registers) or a registered task name; its sample ids are the "
        "reference's item ids (e.g. --reference inspect:LOG_DIR of earlier runs)."))
    output_path: str | None = _setting(None, (
        "With --evaluator lm-eval: keep the harness's own per-document output of the "
        "target here (samples and results files, as --log_samples writes them); with "
        "--evaluator inspect: the folder of the target's eval logs (default: "
        "JOURNAL.inspect), so the new model can join the reference."))
    batch: int | None = _setting(None, (
        "Items asked and evaluated together (default 32 with --evaluator lm-eval: one"
        " harness call per batch; else 1). Draw probabilities stay those of the state"
        " before the batch."))
    concurrency: int = _setting(1, (
        "Evaluations kept in flight (--evaluator command or oracle): when one "
        "finishes, its score is told and the next item is drawn from the latest "
        "state, so a slow item never holds the others back; the interval stays "
        "design-valid (rounds are applied in draw order). A suite keeps K in flight "
        "across its tasks, each next item going where the allocation says."))

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


@_described
@dataclass(frozen=True)
class RunSettings(_Described):
    """A live evaluation: its tasks (one, or a suite of several), the evaluator, the
    target (or several ``targets`` evaluated jointly, one task), the method spec (e.g.
    ``'active-pai'``, ``'faq(budget=0.1)'``), the stop (``epsilon``: the 95% interval's
    width; a suite's average, with ``task_epsilon`` for each task), a budget
    (``max_items``), the seed, and the journal (a file; a folder for a suite).
    ``subtasks``: a harness group's subtasks, each with its own run, and the group's
    score (``group_mean``: ``size`` or ``equal``)."""

    tasks: tuple[TaskSettings, ...] = (TaskSettings(),)
    evaluator: EvaluatorOptions = field(default_factory=EvaluatorOptions)
    target: str | None = _setting(None, (
        "Model to evaluate. With the oracle evaluator: a model of the matrix, held "
        "out from the reference (default: one drawn with --seed). With a command: any"
        " name for the new model."))
    targets: tuple[str, ...] | None = _setting(None, (
        "Several models to evaluate in one run (comma-separated), e.g. checkpoints of"
        " one family: a joint model of their scores picks and predicts, and each gets"
        " its own design-valid interval (active-pai-joint). With a command, {target} "
        "in it is replaced by the model's name."))
    method: str | None = _setting(None, (
        "Evaluation method: active-pai (default: design-valid interval, automatic "
        "stop), bayesame, bayesame-rs, bayesame-laplace, bayes-aipw, bq, irt, random "
        "or faq, optionally with parameters, e.g. 'active-pai(anytime=true)' (an "
        "interval valid whenever you stop; predictor=exact|laplace|factor) or "
        "'faq(budget=0.1)' (FAQ: fixed budget, Pro-Active Inference interval). With "
        "--targets: active-pai-joint (the default: the joint model of the targets "
        "picks and predicts, each target's items drawn at random with a design-valid "
        "interval and stop of its own) or bayesame-joint (multi-target BayesAME, "
        "model-based intervals; e.g. 'bayesame-joint(selection=mean_ig)')."))
    epsilon: float | None = _setting(None, (
        "Stop once the 95% interval is at most this wide (with bayesame, also once "
        "the estimate moved less than 0.005 over the last 30 items). Default: the "
        "method's (0.05 for active-pai, 0.02 for bayesame, 0.1 for random)."))
    task_epsilon: float | None = None
    max_items: int | None = _setting(None, (
        "Evaluate at most this many items."))
    seed: int | None = _setting(None, (
        "Random seed (default 0)."))
    journal: str | None = _setting(None, (
        "Append every result to this JSON-lines journal (fsync'd), so a crash loses "
        "nothing. Default: none for the oracle, bayeval-TARGET-YYYYMMDD-HHMMSS.jsonl "
        "in the current folder for a command."))
    subtasks: bool = _setting(False, (
        "For a harness group (e.g. --dataset musr): estimate each subtask with its "
        "own design-valid run and interval, and the group as the harness aggregates "
        "it, in one run (a suite of the subtasks sharing one evaluator)."))
    group_mean: str | None = _setting(None, (
        "With --subtasks: the group's score as 'size' (the mean over all its "
        "documents) or 'equal' (the unweighted mean of its subtasks); default: as the"
        " group's harness config says, else 'size'."))
    name: str | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        tasks = (self.tasks,) if isinstance(self.tasks, TaskSettings) else tuple(self.tasks)
        if not tasks or not all(isinstance(t, TaskSettings) for t in tasks):
            raise BayevalError("tasks: give one or more TaskSettings")
        set_(self, "tasks", tasks)
        if isinstance(self.targets, str):
            set_(self, "targets", tuple(comma_list(self.targets)))
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
