"""The run file: a run's settings as TOML (or YAML where PyYAML is installed), one schema
for a suite of several tasks and a run of one. ``bayeval evaluate --run FILE`` reads all
of it and ``--save-run FILE`` writes it; ``--suite FILE`` reads a suite's keys (``name``,
``epsilon``, ``task_epsilon``, ``method`` and two or more ``[[tasks]]``), the rest coming
from the command's options::

    name = "board"            # the suite's name (default: the file's stem)
    epsilon = 0.05            # the interval's width (a suite: its average's)
    task_epsilon = 0.15       # optional: every task's interval at most this wide too
    method = "active-pai"     # optional: the method spec
    # model, models, limit, seed, journal, subtasks, group_mean, plan, rest_whole: as the
    # options of ``bayeval evaluate`` (a run file written by --save-run holds them; the earlier
    # names target, targets and max_items are read too); a relative journal is read
    # from beside the file, as a relative reference is

    [evaluator]               # optional: how items are scored (default: the oracle)
    kind = "command"          # oracle | command | lm-eval | inspect
    command = "./score.sh {item}"
    # timeout, retries, lm_eval_args, lm_eval_mode, inspect_task, output_path, batch,
    # concurrency, calls

    [[tasks]]
    name = "ifeval"           # default: the dataset's or the task's name
    dataset = "ifeval"        # a bundled dataset, or reference = FILE | "lm-eval:DIR" |
                              #   "inspect:DIR" (relative to the run file), with
                              #   task / metric / filter as the options of one run
    weight = 1                # default 1 (the average is Σ w θ / Σ w)
    cost = 1.0                # per item; default: Inspect logs' mean tokens per sample,
                              #   else 1
    # model = "name"          # this task's name of the model (default: the run's)
    # command = "…"           # this task's command; {task} in the command is its name
    # inspect_task = "f.py@t" # this task's Inspect task
    # repeated_models = "number"

:meth:`RunSettings.from_file <bayeval.evaluation.settings.RunSettings.from_file>` reads
one, :func:`run_file_text` writes settings back (what is read back is equal).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bayeval.errors import BayevalError

__all__ = ["read_suite_file", "run_file_text"]

_TOP = {"name", "epsilon", "task_epsilon", "method", "tasks"}
# what a run file holds beyond a suite file's keys
_RUN = {"evaluator", "model", "models", "limit", "seed", "journal", "subtasks",
        "group_mean", "plan", "rest_whole"}
_TASK = {"name", "dataset", "reference", "task", "metric", "filter", "weight", "cost",
         "model", "command", "inspect_task", "repeated_models"}


# the task keys whose values are text
_TEXT = {"name", "dataset", "reference", "task", "metric", "filter", "model", "command",
         "inspect_task"}
# aliases a YAML suite may use (each may expand to a copy of a whole subtree)
_YAML_ALIASES = 50
# tasks a suite file may hold (each is a journal and a matrix in memory)
_TASK_LIMIT = 1000


def _read_yaml(text: str, path: Path, flag: str = "--suite") -> Any:
    """A YAML suite read safely: duplicate keys refused, at most a few aliases (their
    expansion cannot blow up)."""
    try:
        import yaml
    except ImportError:
        raise BayevalError(f"{flag} {path}: a YAML suite needs PyYAML (pip install "
                           "pyyaml); or write it as TOML") from None

    class Loader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                Loader.aliases += 1
                if Loader.aliases > _YAML_ALIASES:
                    raise BayevalError(f"{flag} {path}: more than {_YAML_ALIASES} YAML "
                                       "aliases (*name); write the values out")
            return super().compose_node(parent, index)

        def construct_mapping(self, node, deep=False):
            keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
            twice = sorted({str(k) for k in keys if keys.count(k) > 1})
            if twice:
                raise BayevalError(f"{flag} {path}: key {twice[0]!r} is given twice "
                                   f"(line {node.start_mark.line + 1})")
            return super().construct_mapping(node, deep=deep)

    return yaml.load(text, Loader=Loader)  # a SafeLoader


def read_suite_file(path: Path, run: bool = False) -> dict[str, Any]:
    """The suite a TOML (or YAML) file describes, checked: every task has a source and a
    distinct name, weights and costs are positive numbers, no unknown key (one-line
    errors naming the file and the key). ``run``: a run file (one task or more, and the
    run's own keys, :data:`_RUN`)."""
    from bayeval.evaluation.options import RUN_OLD_NAMES, TASK_OLD_NAMES, new_names, task_label
    from bayeval.loop.suite import task_id  # (JAX: after the file is found)
    from bayeval.records.files import read_text

    flag = "--run" if run else "--suite"

    text = read_text(path, f"{flag} {path}")
    try:
        if path.suffix in (".yaml", ".yml"):
            spec = _read_yaml(text, path, flag)
        else:
            import tomllib

            spec = tomllib.loads(text)
    except BayevalError:
        raise
    except Exception as exc:  # tomllib's and yaml's own errors
        raise BayevalError(f"{flag} {path}: not a readable suite file "
                           f"({str(exc).splitlines()[0]})") from None
    if not isinstance(spec, dict):
        raise BayevalError(f"{flag} {path}: expected a table with [[tasks]]")
    top = _TOP | _RUN if run else _TOP
    if run:  # earlier names of the run's keys
        try:
            spec = new_names(spec, RUN_OLD_NAMES)
        except BayevalError as exc:
            raise BayevalError(f"{flag} {path}: {exc}") from None
    unknown = sorted(set(spec) - top)
    if unknown:
        raise BayevalError(f"{flag} {path}: unknown key {unknown[0]!r} (known: "
                           f"{', '.join(sorted(top))})")
    tasks = spec.get("tasks")
    least = 1 if run else 2
    if not isinstance(tasks, list) or len(tasks) < least or not all(isinstance(t, dict)
                                                                   for t in tasks):
        raise BayevalError(f"{flag} {path}: a {'run' if run else 'suite'} needs "
                           f"{'one' if run else 'two'} or more [[tasks]] tables")
    if len(tasks) > _TASK_LIMIT:
        raise BayevalError(f"{flag} {path}: {len(tasks)} tasks; a suite holds at most "
                           f"{_TASK_LIMIT}")
    out, labels = [], []
    for i, task in enumerate(tasks, start=1):
        where = f"{flag} {path}: task {i}"
        try:  # the earlier name of a task's model
            task = new_names(task, TASK_OLD_NAMES)
        except BayevalError as exc:
            raise BayevalError(f"{where}: {exc}") from None
        bad = sorted(set(task) - _TASK)
        if bad:
            raise BayevalError(f"{where}: unknown key {bad[0]!r} (known: "
                               f"{', '.join(sorted(_TASK))})")
        if ("dataset" in task) == ("reference" in task) and not (
                run and "dataset" not in task):  # a run of one: the bundled default
            raise BayevalError(f"{where}: give either dataset or reference")
        entry = dict(task)
        if "reference" in entry:
            ref = str(entry["reference"])
            prefix, sep, rest = ref.partition(":")
            if sep and prefix in ("lm-eval", "inspect"):
                entry["reference"] = f"{prefix}:{(path.parent / rest).resolve()}"
            else:
                entry["reference"] = str((path.parent / ref).resolve())
        label = task_label(entry.get("name"), entry.get("task"), entry.get("dataset"),
                           entry.get("reference"))
        if not run or "name" in entry:  # a run file's settings keep a name not given unset
            entry["name"] = label
        for key in ("weight", "cost"):
            if key in entry and not (isinstance(entry[key], int | float)
                                     and not isinstance(entry[key], bool)
                                     and math.isfinite(entry[key]) and entry[key] > 0):
                raise BayevalError(f"{where}: {key} must be a positive finite number, got "
                                   f"{entry[key]!r}")
        for key in sorted(_TEXT & set(entry)):
            if not isinstance(entry[key], str):
                raise BayevalError(f"{where}: {key} must be a string, got {entry[key]!r}")
        task_id(label, where)
        labels.append(label)
        out.append(entry)
    twice = sorted({n for n in labels if labels.count(n) > 1})
    if twice:
        raise BayevalError(f"{flag} {path}: two tasks are named {twice[0]!r}; give each a "
                           "distinct name")
    for key in ("epsilon", "task_epsilon"):
        if key in spec and not (isinstance(spec[key], int | float) and 0 < spec[key] < 1):
            raise BayevalError(f"{flag} {path}: {key} must be in (0, 1), got {spec[key]!r}")
    if run and isinstance(spec.get("journal"), str):  # beside the file, as a reference is
        spec["journal"] = str((path.parent / spec["journal"]).resolve())
    name = spec.get("name") or (None if run else path.stem)
    return {**spec, "tasks": out, "name": None if name is None else str(name)}


def run_file_text(settings) -> str:
    """``settings`` (:class:`~bayeval.evaluation.settings.RunSettings`) as a run file's
    TOML: the run's keys, ``[evaluator]`` and one ``[[tasks]]`` table per task, settings
    left at None not written, a reference's path made absolute)."""
    import dataclasses

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, tuple | list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        import json

        return json.dumps(str(v), ensure_ascii=False)  # a TOML basic string

    def table(fields: dict[str, Any]) -> list[str]:
        return [f"{k} = {value(v)}" for k, v in fields.items() if v is not None]

    run = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)
           if f.name not in ("tasks", "evaluator")}
    if not run["subtasks"]:
        run.pop("subtasks")
    lines = table(run)
    defaults = type(settings.evaluator)()
    live = {f.name: getattr(settings.evaluator, f.name)
            for f in dataclasses.fields(settings.evaluator)}
    lines += ["", "[evaluator]", *table({k: v for k, v in live.items()
                                         if k == "kind" or v != getattr(defaults, k)})]
    for task in settings.tasks:
        fields = {f.name: getattr(task, f.name) for f in dataclasses.fields(task)}
        if task.reference is not None:  # read from anywhere the file is taken
            prefix, sep, rest = task.reference.partition(":")
            tool = sep and prefix in ("lm-eval", "inspect")
            where = Path(rest if tool else task.reference).resolve()
            fields["reference"] = f"{prefix}:{where}" if tool else str(where)
        if fields["repeated_models"] == "error":
            fields.pop("repeated_models")
        lines += ["", "[[tasks]]", *table(fields)]
    return "\n".join(lines) + "\n"
