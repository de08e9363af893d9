"""The names a live run's settings take: evaluator kinds, harness modes, methods by
default, and the file a suite's folder keeps (one home for the library and the command
line alike; nothing here imports more than the standard library and bayeval.errors)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import PurePath
from typing import Any

DEFAULT_DATASET = "ifeval"
DEFAULT_METHOD = "active-pai"
JOINT_METHOD = "active-pai-joint"  # the default for several targets
JOINT_METHODS = ("active-pai-joint", "bayesame-joint")  # the methods several targets take
FAILURES_IN_A_ROW = 3  # a live evaluator failing this often in a row stops the run
# a suite's journal folder holds this record beside its tasks' journals
SUITE_FILE = "suite.json"
LM_EVAL_PREFIX = "lm-eval:"
INSPECT_PREFIX = "inspect:"  # bayeval.data.inspect_logs.INSPECT_PREFIX, without its import


def comma_list(text: str) -> list[str]:
    """The non-empty, stripped entries of a comma-separated value (an option's, a run
    file's): ``"a, b,,c"`` → ``["a", "b", "c"]``."""
    return [part.strip() for part in text.split(",") if part.strip()]


def task_label(name: str | None, task: str | None, dataset: str | None,
               reference: str | None) -> str:
    """A task's name in a suite: its own, else its harness task, its dataset, or its
    reference's stem (a folder of ``lm-eval:DIR`` or ``inspect:DIR``); the bundled default
    where it names none."""
    if name or task or dataset:
        return str(name or task or dataset)
    if reference:
        prefix, sep, rest = str(reference).partition(":")
        path = rest if sep and prefix in ("lm-eval", "inspect") else str(reference)
        return PurePath(path).stem
    return DEFAULT_DATASET


class LmEvalMode(StrEnum):
    in_process = "in-process"
    subprocess = "subprocess"


# a journal written before the in-process route existed launched the harness per batch
SUBPROCESS = LmEvalMode.subprocess.value


class EvaluatorKind(StrEnum):
    oracle = "oracle"
    command = "command"
    lm_eval = "lm-eval"
    inspect = "inspect"


class CallSizing(StrEnum):
    """How a run in batches sizes its calls (the rules of bayeval.loop.call_sizes)."""

    fixed = "fixed"
    taper = "taper"
    grow = "grow"
    fine = "fine"


class RestWhole(StrEnum):
    """When a live run runs the rest of its task in one call (bayeval.evaluation.plan)."""

    auto = "auto"
    never = "never"


class GroupMean(StrEnum):
    """How a harness group's score combines its subtasks (the values of
    bayeval.compression.estimate.GROUP_MEANS, kept here so that imports stay light)."""

    size = "size"
    equal = "equal"


class RepeatedModels(StrEnum):
    error = "error"
    number = "number"


# items asked and evaluated together by default: one harness call (Inspect eval) per batch
DEFAULT_BATCH = {EvaluatorKind.lm_eval.value: 32, EvaluatorKind.inspect.value: 8}

# The evaluators that run a tool in this process on one model, a batch of items per call:
# their kind → (the option naming what to run, what it takes, the tool's module and name,
# how to install it).
TOOL_EVALUATORS = {
    EvaluatorKind.inspect.value: ("--inspect-task", "FILE.py@TASK (or a registered task name)",
                                  "inspect_ai", "Inspect AI", "pip install 'bayeval[inspect]'"),
    EvaluatorKind.lm_eval.value: ("--lm-eval-args",
                                  "'--model … [--model_args …] [--include_path …]'",
                                  "lm_eval", "lm-evaluation-harness", "pip install lm-eval"),
}


# Earlier names of settings, still accepted by evaluate(), RunSettings.of / replace and run
# files, read as the names the harness and Inspect use for the same things
# (docs/python.md, "Names").
OLD_NAMES = {"target": "model", "targets": "models", "max_items": "limit", "task": "tasks"}
# those of RunSettings' own fields (``task`` is the one task's; ``tasks`` are TaskSettings)
RUN_OLD_NAMES = {old: new for old, new in OLD_NAMES.items() if old != "task"}
TASK_OLD_NAMES = {"target": "model"}


def new_names(options: dict[str, Any], names: dict[str, str] = OLD_NAMES) -> dict[str, Any]:
    """``options`` with earlier names (``names``, old → new; default :data:`OLD_NAMES`)
    read as the new ones (one-line error where both are given)."""
    from bayeval.errors import BayevalError

    out = dict(options)
    for old, new in names.items():
        if old in out:
            if new in out:
                raise BayevalError(f"give {new} or its earlier name {old}, not both")
            out[new] = out.pop(old)
    return out
