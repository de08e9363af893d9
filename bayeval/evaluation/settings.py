"""The settings of a live evaluation, as frozen values: one per task
(:class:`TaskSettings`), one for the evaluator (:class:`EvaluatorOptions`) and one for the
run (:class:`RunSettings`), each checked once when it is made (one-line
:class:`~bayeval.errors.BayevalError`). A run of one task is a suite of one; the same
values round-trip to a run file (TOML, :mod:`bayeval.evaluation.run_file`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from bayeval.errors import BayevalError
from bayeval.evaluation.options import (
    DEFAULT_BATCH,
    DEFAULT_DATASET,
    DEFAULT_METHOD,
    INSPECT_PREFIX,
    JOINT_METHOD,
    LM_EVAL_PREFIX,
    OLD_NAMES,
    RUN_OLD_NAMES,
    TASK_OLD_NAMES,
    CallSizing,
    EvaluatorKind,
    GroupMean,
    LmEvalMode,
    RepeatedModels,
    RestWhole,
    comma_list,
    new_names,
    task_label,
)

__all__ = ["OLD_NAMES", "RUN_OLD_NAMES", "TASK_OLD_NAMES", "EvaluatorOptions", "RunSettings",
           "TaskSettings", "check_number", "check_text", "new_names"]

# the evaluator kind of a run whose items a Python function scores
# (bayeval.evaluators.python.PYTHON); only bayeval.evaluate, given the function, runs it
PYTHON_KIND = "python"


def check_number(value: Any, name: str, integer: bool = False) -> None:
    """``value`` (None allowed) a finite number in the range of setting ``name``
    (:data:`bayeval.evaluation.numbers.RANGES`, the command line's table): else a one-line
    error naming the setting."""
    if value is None:
        return
    from bayeval.evaluation.numbers import number_problem

    problem = number_problem(name, value, integer)
    if problem is not None:
        raise BayevalError(f"{name}: {problem}")


def check_text(value: Any, name: str) -> None:
    """``value`` (None allowed) text: else a one-line error naming the setting."""
    if value is not None and not isinstance(value, str):
        raise BayevalError(f"{name}: {value!r:.60} is not text")


def _texts(settings: Any, names: tuple[str, ...]) -> None:
    """The settings ``names`` of ``settings`` are text (or None); a path is read as its
    text."""
    for name in names:
        value = getattr(settings, name)
        if isinstance(value, PurePath):
            object.__setattr__(settings, name, str(value))
        else:
            check_text(value, name)


class _Described:
    """Settings whose fields carry their meaning (``metadata["help"]``): one text for a
    Python user (``help(RunSettings)`` lists them), the run file and ``bayeval evaluate
    --help``, where each is the option of the same name."""

    @classmethod
    def help(cls, name: str) -> str:
        """What setting ``name`` means: a field of this class, of the other settings
        classes (a run's keywords mix them), or an earlier name (:data:`OLD_NAMES`)."""
        for wanted in (name, OLD_NAMES.get(name, name)):
            for owner in (cls, RunSettings, TaskSettings, EvaluatorOptions):
                for f in dataclasses.fields(owner):
                    if f.name == wanted:
                        return f.metadata["help"]
        known = sorted({f.name for c in (RunSettings, TaskSettings, EvaluatorOptions)
                        for f in dataclasses.fields(c)})
        raise BayevalError(f"no setting is named {name!r} (settings: {', '.join(known)})")


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

    ``name``, ``weight`` and ``cost`` place it in a suite; ``model``, ``command`` and
    ``inspect_task`` are its own where they differ from the run's.
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
    name: str | None = _setting(None, (
        "The task's name in a suite (default: its task, dataset or reference file's "
        "stem); it names the task's journal in the suite's folder."))
    weight: float = _setting(1.0, (
        "The task's weight in a suite's average (Σ w θ / Σ w; default 1, the plain "
        "average)."))
    cost: float | None = _setting(None, (
        "The task's cost per item, which a suite's allocation weighs (default: Inspect "
        "logs' mean tokens per sample, else 1)."))
    model: str | None = _setting(None, (
        "This task's name of the model evaluated, where it differs from the run's "
        "--model (earlier name: target)."))
    command: str | None = _setting(None, (
        "This task's --command, where it differs from the run's ({task} in the run's "
        "command is the task's name)."))
    inspect_task: str | None = _setting(None, (
        "This task's --inspect-task, where it differs from the run's."))
    repeated_models: str = _setting(RepeatedModels.error.value, (
        "A model id listed twice in --reference (a matrix file or Inspect logs): "
        "error, or number (the repeats kept as ID#2, ID#3, …, as the bundled "
        "leaderboard matrices do)."))

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        _texts(self, ("dataset", "reference", "task", "metric", "filter", "name", "model",
                      "command", "inspect_task"))
        set_(self, "repeated_models", _one_of(self.repeated_models, RepeatedModels,
                                              "repeated_models"))
        if self.dataset is not None and self.reference is not None:
            raise BayevalError("give either --dataset or --reference, not both")
        check_number(self.weight, "weight")
        check_number(self.cost, "cost")

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
        if "model" in entry:  # a suite's task entries name it as suite files did
            entry["target"] = entry.pop("model")
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
        " on the --model model (an Inspect model name such as openai/gpt-4o-mini) in"
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
        "--tasks and --samples; the harness's --limit is bayeval's --limit here)."))
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
    calls: str = _setting(CallSizing.taper.value, (
        "With --batch above 1, one task: taper (default) cuts the last calls to the "
        "items the interval's width predicts are still needed (its width shrinking as "
        "a sample's does), so that the stop lands near a call's end instead of paying "
        "for the rest of a batch; grow also starts at 8 items a call and doubles (more,"
        " smaller calls early: the first scores reach the estimator sooner); fine "
        "grows as grow does and asks half the items predicted left, down to calls of 2 "
        "(about 4 more calls a run for nearly the one-at-a-time saving: for models "
        "whose calls cost little beyond their items); fixed: every call --batch items. "
        "No call is ever larger than --batch. With --concurrency K, taper, grow and "
        "fine keep no more evaluations in flight than the items predicted left (fine: "
        "half of them; at most K); fixed keeps K."))

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.kind != PYTHON_KIND:  # a Python object's run (bayeval.evaluate)
            set_(self, "kind", _one_of(self.kind, EvaluatorKind, "evaluator"))
        set_(self, "lm_eval_mode", _one_of(self.lm_eval_mode, LmEvalMode, "lm_eval_mode"))
        set_(self, "calls", _one_of(self.calls, CallSizing, "calls"))
        _texts(self, ("command", "lm_eval_args", "inspect_task", "output_path"))
        check_number(self.timeout, "timeout")
        check_number(self.retries, "retries", integer=True)
        check_number(self.batch, "batch", integer=True)
        check_number(self.concurrency, "concurrency", integer=True)
        if self.concurrency > 1 and self.batch is not None and self.batch > 1:
            raise BayevalError("give --batch or --concurrency, not both (a batch waits for "
                               "all its items; concurrency draws as each one finishes)")
        if self.calls == CallSizing.grow.value and self.batch_size <= 1:
            raise BayevalError("calls 'grow' sizes the calls of a run in batches: give "
                               "--batch above 1")

    @property
    def batch_size(self) -> int:
        """The batch asked: ``batch``, else the kind's default (:data:`DEFAULT_BATCH`)."""
        return self.batch or DEFAULT_BATCH.get(self.kind, 1)




@_described
@dataclass(frozen=True)
class RunSettings(_Described):
    """A live evaluation: its tasks (one, or a suite of several), the evaluator, the
    model (or several ``models`` evaluated jointly, one task), the method spec (e.g.
    ``'active-pai'``, ``'faq(budget=0.1)'``), the stop (``epsilon``: the 95% interval's
    width; a suite's average, with ``task_epsilon`` for each task), a budget
    (``limit``), the seed, and the journal (a file; a folder for a suite).
    ``subtasks``: a harness group's subtasks, each with its own run, and the group's
    score (``group_mean``: ``size`` or ``equal``). ``target``, ``targets`` and
    ``max_items`` read the earlier names of ``model``, ``models`` and ``limit``."""

    tasks: tuple[TaskSettings, ...] = _setting((TaskSettings(),), (
        "The tasks of the run: one (a run of one task) or several (a suite: each task "
        "estimated with its own interval, and their weighted average). In Python a "
        "TaskSettings each, or harness/Inspect task names read from one --reference; on "
        "the command line --task (more than once) or --suite FILE."))
    evaluator: EvaluatorOptions = field(default_factory=EvaluatorOptions, metadata={
        "help": "How items are scored (EvaluatorOptions: kind, command, lm_eval_args, "
                "batch, concurrency, …); in Python also a function, a harness LM object "
                "or an Inspect Task (bayeval.evaluate's evaluator)."})
    model: str | None = _setting(None, (
        "Model to evaluate (earlier name: target). With the oracle evaluator: a model "
        "of the matrix, held out from the reference (default: one drawn with --seed). "
        "With a command or a Python function: any name for the new model; with "
        "--evaluator inspect: the Inspect model name (e.g. openai/gpt-4o-mini)."))
    models: tuple[str, ...] | None = _setting(None, (
        "Several models to evaluate in one run (comma-separated; earlier name: "
        "targets), e.g. checkpoints of one family: a joint model of their scores picks "
        "and predicts, and each gets its own design-valid interval (active-pai-joint). "
        "With a command, {target} in it is replaced by the model's name."))
    method: str | None = _setting(None, (
        "Evaluation method: active-pai (default: design-valid interval, automatic "
        "stop), bayesame, bayesame-rs, bayesame-laplace, bayes-aipw, bq, irt, random "
        "or faq, optionally with parameters, e.g. 'active-pai(anytime=true)' (an "
        "interval valid whenever you stop; predictor=exact|laplace|factor) or "
        "'faq(budget=0.1)' (FAQ: fixed budget, Pro-Active Inference interval). With "
        "--models: active-pai-joint (the default: the joint model of the targets "
        "picks and predicts, each target's items drawn at random with a design-valid "
        "interval and stop of its own) or bayesame-joint (multi-target BayesAME, "
        "model-based intervals; e.g. 'bayesame-joint(selection=mean_ig)'). In Python "
        "also a composed bayeval.methods.Method value."))
    epsilon: float | None = _setting(None, (
        "Stop once the 95% interval is at most this wide (with bayesame, also once "
        "the estimate moved less than 0.005 over the last 30 items). Default: the "
        "method's (0.05 for active-pai, 0.02 for bayesame, 0.1 for random); a suite's "
        "average: 0.05."))
    task_epsilon: float | None = _setting(None, (
        "A suite only: every task's own interval at most this wide too before the run "
        "stops (default: the average's width alone decides)."))
    limit: int | None = _setting(None, (
        "Evaluate at most this many items (a suite: over all its tasks; earlier name: "
        "max_items)."))
    seed: int | None = _setting(None, (
        "Random seed (default 0)."))
    journal: str | None = _setting(None, (
        "Append every result to this JSON-lines journal (fsync'd), so a crash loses "
        "nothing (a suite: a folder). Default: none for the oracle, "
        "bayeval-MODEL-YYYYMMDD-HHMMSS.jsonl in the current folder for a live "
        "evaluator."))
    subtasks: bool = _setting(False, (
        "For a harness group (e.g. --dataset musr): estimate each subtask with its "
        "own design-valid run and interval, and the group as the harness aggregates "
        "it, in one run (a suite of the subtasks sharing one evaluator)."))
    group_mean: str | None = _setting(None, (
        "With --subtasks: the group's score as 'size' (the mean over all its "
        "documents) or 'equal' (the unweighted mean of its subtasks); default: as the"
        " group's harness config says, else 'size'."))
    name: str | None = _setting(None, (
        "The suite's name (default: its tasks' names joined by '+', or a suite file's "
        "stem)."))
    plan: bool | None = _setting(None, (
        "Before a run of one task, predict the documents it will need from the reference "
        "alone (reference models standing in for the new model, run through the same "
        "method, stop and batch) and print that line first, then the plan revised after "
        "the first call (bayeval plan runs it alone). Default: on with a live evaluator, "
        "off with the oracle or where the environment says BAYEVAL_PLAN=off."))
    rest_whole: str = _setting("auto", (
        "auto: run the rest of the task in one call (packed as a full run packs it; the "
        "exact score) when the plan says that is cheaper than going on batch by batch "
        "(a predicted share of 85% or more before the first call; after each call, when "
        "the documents still needed at the loop's time per document cost more than the "
        "rest at a full run's); never: batch after batch to the stop."))

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        tasks = (self.tasks,) if isinstance(self.tasks, TaskSettings) else self.tasks
        if isinstance(tasks, str) or not isinstance(tasks, tuple | list):
            raise BayevalError(f"tasks: give one or more TaskSettings, got {tasks!r:.60}")
        tasks = tuple(tasks)
        if not tasks or not all(isinstance(t, TaskSettings) for t in tasks):
            raise BayevalError("tasks: give one or more TaskSettings")
        set_(self, "tasks", tasks)
        if not isinstance(self.evaluator, EvaluatorOptions):
            raise BayevalError(f"evaluator: give EvaluatorOptions, got "
                               f"{self.evaluator!r:.60}")
        if isinstance(self.models, str):
            set_(self, "models", tuple(comma_list(self.models)))
        elif self.models is not None:
            if not isinstance(self.models, tuple | list):
                raise BayevalError(f"models: give a list of model names, got "
                                   f"{self.models!r:.60}")
            set_(self, "models", tuple(str(t) for t in self.models))
        _texts(self, ("model", "method", "name", "journal"))
        set_(self, "group_mean", _one_of(self.group_mean, GroupMean, "--group-mean"))
        set_(self, "rest_whole", _one_of(self.rest_whole or RestWhole.auto.value, RestWhole,
                                         "rest_whole"))
        if self.plan is not None and not isinstance(self.plan, bool):
            raise BayevalError(f"plan must be true or false, got {self.plan!r:.60}")
        if self.models is not None and self.model is not None:
            raise BayevalError("give either --model or --models, not both")
        if self.models is not None and not self.models:
            raise BayevalError("--models needs at least one model name")
        check_number(self.epsilon, "epsilon")
        check_number(self.task_epsilon, "task_epsilon")
        check_number(self.limit, "limit", integer=True)
        check_number(self.seed, "seed", integer=True)
        if not isinstance(self.subtasks, bool):
            raise BayevalError(f"subtasks must be true or false, got {self.subtasks!r}")
        if self.group_mean is not None and not self.subtasks:
            raise BayevalError("--group-mean is for --subtasks (a harness group's score)")
        if self.subtasks and len(tasks) > 1:
            raise BayevalError("give --suite FILE or --subtasks, not both")
        if self.suite and self.models is not None:
            raise BayevalError("--models evaluates several models on one task; a suite "
                               "evaluates one model (--model) on several tasks")
        names = [t.label for t in tasks]
        twice = sorted({n for n in names if names.count(n) > 1})
        if len(tasks) > 1 and twice:
            raise BayevalError(f"two tasks are named {twice[0]!r}; give each a distinct "
                               "name")
        if len(tasks) > 1 and self.name in names:  # the harness's results name both
            raise BayevalError(f"the suite is named {self.name!r} like one of its tasks; "
                               "give it another name (name = …)")

    def method_spec(self, composed: Any = None) -> tuple[Any, dict[str, Any]]:
        """(the method's name, or the ``composed`` Method value; its parameters) with the
        run's ``epsilon`` among them: the spec's default is active-pai, active-pai-joint
        with ``models``. A composed method carries its own stop: an epsilon beside it is
        a one-line error."""
        from bayeval.methods import parse_method_spec

        if composed is not None:
            if self.epsilon is not None:
                raise BayevalError("epsilon: a composed method carries its own stop; set "
                                   "it where the method is made")
            return composed, {}
        name, params = parse_method_spec(self.method or (
            JOINT_METHOD if self.models is not None else DEFAULT_METHOD))
        if self.epsilon is not None:
            params["epsilon"] = self.epsilon
        return name, params

    # the earlier names, read
    @property
    def target(self) -> str | None:
        return self.model

    @property
    def targets(self) -> tuple[str, ...] | None:
        return self.models

    @property
    def max_items(self) -> int | None:
        return self.limit

    @property
    def suite(self) -> bool:
        """Whether the run is a suite (several tasks, or a group's subtasks)."""
        return len(self.tasks) > 1 or self.subtasks

    def replace(self, **changes: Any) -> RunSettings:
        """These settings with the run's fields ``changes`` (earlier names accepted)."""
        return dataclasses.replace(self, **new_names(changes, RUN_OLD_NAMES))

    def override(self, **changes: Any) -> RunSettings:
        """These settings with ``changes`` over them: any keyword of :meth:`of` (a run's
        field, the evaluator's, or the one task's; earlier names accepted). A task's
        field is refused for a suite of several tasks (name the task in its
        :class:`TaskSettings`)."""
        changes = new_names(changes)
        _refuse_unknown(changes)
        run = {k: changes.pop(k) for k in list(changes) if k in _RUN_KEYS}
        evaluator = run.pop("evaluator", None)
        live = {k: changes.pop(k) for k in list(changes) if k in _EVALUATOR_KEYS}
        if evaluator is not None:
            evaluator = _evaluator_of(evaluator, live)
        elif live:
            evaluator = dataclasses.replace(self.evaluator, **live)
        if evaluator is not None:
            run["evaluator"] = evaluator
        names = run.get("tasks")
        if isinstance(names, list | tuple) and len(names) == 1 and isinstance(names[0], str):
            names = run["tasks"] = names[0]
        if isinstance(names, str):  # one task's name: a field of the one task
            changes["task"] = run.pop("tasks")
        if isinstance(run.get("tasks"), list | tuple) and not all(
                isinstance(t, TaskSettings) for t in _listed(run["tasks"])):
            run.update(_tasks_of(run.pop("tasks"), changes))
        if changes:  # the one task's fields
            if "tasks" in run:
                raise BayevalError(f"{sorted(changes)[0]} is a setting of a task: give it "
                                   "in TaskSettings")
            if len(self.tasks) > 1:
                raise BayevalError(f"{sorted(changes)[0]} is a setting of one task, and "
                                   f"this run has {len(self.tasks)}: change it in that "
                                   "task's TaskSettings")
            base = dataclasses.asdict(self.tasks[0])
            if "dataset" in changes and "reference" not in changes:
                base["reference"] = None
            if "reference" in changes and "dataset" not in changes:
                base["dataset"] = None
            run["tasks"] = (TaskSettings(**{**base, **changes}),)
        return dataclasses.replace(self, **run)

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
        ``reference``, ``metric``, …) and the evaluator's (``command``, ``lm_eval_args``,
        ``batch``, …; ``evaluator`` may be its kind), in any mix. ``tasks`` may be task
        names (a harness or Inspect task each, read from one ``reference``) or
        :class:`TaskSettings`; ``suite``, a suite file whose tasks and keys the run
        takes. Earlier names (:data:`OLD_NAMES`) are accepted."""
        options = new_names(options)
        suite = options.pop("suite", None)
        base = cls()
        if suite is not None:
            from bayeval.evaluation.run_file import read_suite_file

            file = read_suite_file(Path(suite))
            spec = {k: file[k] for k in ("name", "epsilon", "task_epsilon", "method")
                    if k in file}
            if "tasks" in options:
                raise BayevalError("give suite (a file) or tasks, not both")
            base = cls(tasks=tuple(TaskSettings(**t) for t in file["tasks"]), **spec)
            options = {k: v for k, v in options.items() if v is not None}
        return base.override(**options)




def _reading_earlier_names(cls: type, names: dict[str, str]) -> None:
    """``cls(...)`` takes the earlier names ``names`` (old → new) as keywords too."""
    import functools

    init = cls.__init__

    @functools.wraps(init)
    def reading(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **new_names(kwargs, names))

    cls.__init__ = reading  # type: ignore[method-assign]


_reading_earlier_names(RunSettings, RUN_OLD_NAMES)
_reading_earlier_names(TaskSettings, TASK_OLD_NAMES)

_RUN_KEYS = {f.name for f in dataclasses.fields(RunSettings)}
_EVALUATOR_KEYS = {f.name for f in dataclasses.fields(EvaluatorOptions)} - {"kind"}
# the one task's keywords (its own model, command and Inspect task are the run's there)
_TASK_KEYS = ({f.name for f in dataclasses.fields(TaskSettings)}
              - {"model", "name", "command", "inspect_task"})


def _refuse_unknown(options: dict[str, Any]) -> None:
    unknown = sorted(set(options) - _TASK_KEYS - _EVALUATOR_KEYS - _RUN_KEYS)
    if unknown:
        import difflib

        known = sorted(_TASK_KEYS | _EVALUATOR_KEYS | _RUN_KEYS | set(OLD_NAMES))
        near = difflib.get_close_matches(unknown[0], known, 1)
        raise BayevalError(f"unknown setting {unknown[0]!r}"
                           + (f" (did you mean {near[0]!r}?)" if near else ""))


def _listed(value: Any) -> list[Any]:
    return [value] if isinstance(value, str | TaskSettings) else list(value)


def _tasks_of(names: Any, task: dict[str, Any]) -> dict[str, Any]:
    """``tasks`` given as names: one name is the one task's ``task``; several, a suite
    of tasks read from one ``reference`` (:meth:`TaskSettings.from_logs`). Consumes the
    task keywords it uses from ``task``."""
    names = [str(n) for n in _listed(names)]
    if not names:
        raise BayevalError("tasks: give one task name or more")
    if len(names) == 1:
        return {"tasks": (TaskSettings(**{**{k: task.pop(k) for k in list(task)},
                                          "task": names[0]}),)}
    extra = sorted(set(task) - {"reference", "metric", "filter"})
    if extra:
        raise BayevalError(f"{extra[0]} is a setting of one task; several tasks read from "
                           "one reference take reference, metric and filter")
    return {"tasks": TaskSettings.from_logs(task.pop("reference", None), names,
                                            task.pop("metric", None),
                                            task.pop("filter", None)),
            "name": "+".join(names)}


def _evaluator_of(evaluator: Any, live: dict[str, Any]) -> EvaluatorOptions:
    """``evaluator`` given as a kind or as :class:`EvaluatorOptions`, with the evaluator's
    keywords ``live``."""
    if isinstance(evaluator, EvaluatorOptions):
        if live:
            raise BayevalError(f"{sorted(live)[0]} is a setting of the evaluator: give it "
                               "in EvaluatorOptions")
        return evaluator
    if not isinstance(evaluator, str):
        raise BayevalError(f"evaluator: give a kind ({', '.join(k.value for k in EvaluatorKind)})"
                           f" or EvaluatorOptions, got {evaluator!r:.60}")
    return EvaluatorOptions(kind=evaluator, **live)
