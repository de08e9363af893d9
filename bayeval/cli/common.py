"""What every ``bayeval`` command shares: the Typer apps, the consoles, JAX set-up, the
one-line error exit, progress bars, the reference source of --dataset / --reference, the
resume of a journaled session."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bayeval.cli.numbers import FlagGroup
from bayeval.errors import BayevalError, DataError

app = typer.Typer(
    help="bayeval: evaluate a language model on fewer items, with an interval and a "
         "stopping rule, using the per-item scores of models evaluated before.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
    pretty_exceptions_enable=False,
    cls=FlagGroup,
)
# Output that is no terminal (a file, a pipe, a log) has no width to fit: tables and
# lines are printed whole instead of cut at Rich's default of 80 columns.
UNBOUNDED = 100_000


class _TrimmedLines:
    """A text stream that writes each line without the spaces a table pads it with."""

    def __init__(self, stderr: bool) -> None:
        self.stderr = stderr
        self._partial = ""

    @property
    def _stream(self):
        return sys.stderr if self.stderr else sys.stdout  # as it is now (tests swap it)

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        if lines:
            self._stream.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self._stream.write(self._partial)
            self._partial = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", "utf-8") or "utf-8"


def _console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if (hasattr(stream, "isatty") and stream.isatty()) or os.environ.get("COLUMNS"):
        return Console(stderr=stderr)
    return Console(file=_TrimmedLines(stderr), width=UNBOUNDED)


out = _console()
err = _console(stderr=True)

DEFAULT_DATASET = "ifeval"
EXIT_USAGE = 2  # a bad option, file or journal (also typer's own usage errors)
EXIT_EVALUATION = 3  # the evaluator failed (several items in a row, or every item)
FAILURES_IN_A_ROW = 3  # a command evaluator failing this often in a row stops the run
DEFAULT_METHOD = "active-pai"
JOINT_METHOD = "active-pai-joint"  # the default with --targets
JOINT_METHODS = ("active-pai-joint", "bayesame-joint")  # the methods --targets takes


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


class PairEvaluatorKind(StrEnum):
    """The evaluators of (model, item) pairs (``bayeval select``)."""

    oracle = "oracle"
    command = "command"


def setup_jax() -> None:
    """Keep compiled JAX programs between runs of the command (first run compiles); with
    ``BAYEVAL_CPU_DEVICES`` set, make that many CPU devices for the engines to split their
    runs over (:mod:`bayeval.devices`; on this project's 2-core CPU one device is as fast:
    docs/results/cores.md)."""
    import os

    from bayeval.devices import keep_compiled_programs

    if os.environ.get("BAYEVAL_CPU_DEVICES", "").strip():
        from bayeval.devices import use_cpu_cores

        try:
            use_cpu_cores()
        except ValueError as exc:
            raise fail(str(exc)) from None

    keep_compiled_programs()


def _version(value: bool) -> None:
    if value:
        from bayeval import __version__

        print(f"bayeval {__version__}")
        raise typer.Exit()


@app.callback()
def _configure(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print the version and exit.")] = False) -> None:
    # every command computes in float64 (bayeval.precision); the library leaves that to
    # the program that uses it. Before JAX is imported the environment says so, which
    # keeps option and file checks free of JAX's start-up time.
    if "jax" in sys.modules:
        from bayeval.precision import enable_float64

        enable_float64()
    else:
        os.environ["JAX_ENABLE_X64"] = "True"


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``message`` as the command's one-line error (taken as plain text: a bracket in
    it, ``[[tasks]]`` or a path, is shown, not read as markup) and the exit to raise."""
    from rich.markup import escape

    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True,
              soft_wrap=True)
    return typer.Exit(code)


@contextlib.contextmanager
def evaluation_errors() -> Iterator[None]:
    """How a command that evaluates reports failures: a failed evaluation exits 3, any
    other bayeval error 2 (one line each), Ctrl-C 130, SIGTERM 143."""
    from bayeval.errors import EvaluationError, interrupt_status

    try:
        yield
    except EvaluationError as exc:
        raise fail(str(exc), EXIT_EVALUATION) from None
    except BayevalError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt as exc:
        notes = getattr(exc, "__notes__", [])
        err.print(f"interrupted{f'; continue with: {notes[-1]}' if notes else ''}",
                  highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(interrupt_status(exc)) from None


@contextlib.contextmanager
def resumable(session: Any, command: str) -> Iterator[Any]:
    """``with session``, and on Ctrl-C or SIGTERM a note on the interruption of the
    command that continues the run (:func:`evaluation_errors` prints it)."""
    import shlex

    try:
        with session:
            yield session
    except KeyboardInterrupt as exc:
        if session.journal_path is not None:
            exc.add_note(f"bayeval {command} --resume --journal "
                         f"{shlex.quote(str(session.journal_path))}")
        raise


def comma_list(text: str) -> list[str]:
    """The non-empty, stripped entries of a comma-separated option value."""
    return [part.strip() for part in text.split(",") if part.strip()]


def comma_floats(option: str, text: str) -> list[float]:
    """The numbers of a comma-separated option value (``option``: its name, e.g.
    ``--budgets``), or a one-line error naming the option."""
    try:
        return [float(part) for part in comma_list(text)]
    except ValueError:
        raise fail(f"{option}: not a comma-separated list of numbers: {text!r}") from None


def command_evaluator(command: str, timeout: float, retries: int):
    """The CommandEvaluator of ``--command``; a command it refuses (a quoted placeholder,
    say) is a bad option, exit status 2, said before any journal is written."""
    from bayeval.errors import EvaluationError
    from bayeval.evaluators import CommandEvaluator

    try:
        return CommandEvaluator(command, timeout=timeout, retries=retries)
    except EvaluationError as exc:
        raise BayevalError(str(exc)) from None


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


def _check_tool(kind: str, tool_kind: str, given: str | None, harness: bool) -> None:
    """``--evaluator TOOL_KIND`` (:data:`TOOL_EVALUATORS`): offered by this command,
    given its option, and its tool installed; its option refused with another kind."""
    import importlib.util

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


def evaluator_kind(evaluator: EvaluatorKind | None, command: str | None, timeout: float,
                   retries: int, usage: str, lm_eval_args: str | None = None,
                   harness: bool = False, inspect_task: str | None = None) -> str:
    """The kind of ``--evaluator`` (oracle by default), with ``--command`` checked before
    any work: required, and accepted by the CommandEvaluator, for ``command``; refused
    otherwise. ``usage``: the command's form for the error, e.g. ``'CMD {item}'``.
    ``harness``: whether this command offers ``--evaluator lm-eval`` (it needs
    ``--lm-eval-args`` and an installed lm-evaluation-harness) and ``--evaluator
    inspect`` (it needs ``--inspect-task`` and an installed Inspect AI)."""
    kind = (evaluator or EvaluatorKind.oracle).value
    _check_tool(kind, EvaluatorKind.inspect.value, inspect_task, harness)
    _check_tool(kind, EvaluatorKind.lm_eval.value, lm_eval_args, harness)
    if kind == EvaluatorKind.lm_eval.value:
        from bayeval.errors import EvaluationError
        from bayeval.harness import LmEvalCommand

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


def resume_session(session_class, journal: Path, given: dict[str, Any], reference=None):
    """The session ``journal`` records, its repair warnings printed; options that the
    journal fixes must not be given again. ``reference``: its reference matrix when the
    caller has it already (else read from the header's source)."""
    clash = [k for k, v in given.items() if v is not None]
    if clash:
        raise BayevalError(f"--resume reads the settings from {journal}; drop "
                           f"{', '.join(clash)}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = (session_class.resume(journal) if reference is None
                   else session_class.resume(journal, reference))
    for w in caught:
        err.print(f"[yellow]warning:[/] {w.message}", highlight=False)
    return session


def names_table(headers: list[str], rows: list[list[str]], title: str | None = None,
                wrap: tuple[str, ...] = ()) -> Table:
    """A result table whose first column (model or dataset names, variables) is never
    broken or cut at any terminal width, whose numbers are never wrapped, and whose
    ``wrap`` columns (free text) wrap at spaces only; columns of words (the first, and
    those whose cells start with a letter) are left-aligned, numbers right-aligned."""
    from rich import box

    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for k, header in enumerate(headers):
        cells = [header, *(row[k] for row in rows)]
        words = k == 0 or header in wrap or all(c[:1].isalpha() for c in cells[1:] if c)
        table.add_column(header, justify="left" if words else "right",
                         no_wrap=header not in wrap, overflow="fold" if header in wrap
                         else "ellipsis", min_width=min(max(map(len, cells)), 60)
                         if k == 0 else None)
    for row in rows:
        table.add_row(*row)
    return _Fitted(table, headers, rows, _width_needed(headers, rows, wrap))


def _width_needed(headers: list[str], rows: list[list[str]], wrap: tuple[str, ...]) -> int:
    """The columns a table needs with no cell cut: each column's longest cell (its
    header included), the longest word for a column that wraps, two spaces between."""
    widths = []
    for k, header in enumerate(headers):
        cells = [header, *(row[k] for row in rows)]
        pieces = [w for c in cells for w in c.split()] if header in wrap else cells
        widths.append(max(map(len, pieces), default=0))
    return sum(widths) + 2 * (len(headers) - 1)


class _Fitted:
    """A table printed as it is where the console is wide enough for every column's
    unbreakable content (``needed`` columns: the cells of columns that do not wrap, the
    longest word of those that do, two spaces between columns), else as records (the
    first column's cell, then ``header: value`` lines), so that no cell is ever cut, at
    80 columns or fewer."""

    def __init__(self, table: Table, headers: list[str], rows: list[list[str]],
                 needed: int):
        self.table, self.headers, self.rows, self.needed = table, headers, rows, needed

    def __rich_console__(self, console, options):
        if self.needed <= options.max_width:
            yield self.table
            return
        from rich.text import Text

        if self.table.title:
            yield Text(str(self.table.title), style="italic")
        for row in self.rows:
            yield Text(f"{self.headers[0]}: {row[0]}", style="bold")
            for header, cell in zip(self.headers[1:], row[1:], strict=True):
                if cell:
                    yield Text(f"  {header}: {cell}")


def field_table():
    """The two-column table of a command's result: bold field names, then values."""
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")  # a path longer than the line breaks, never cut
    return table


def progress_bar(verb: str) -> Progress:
    """The progress bar of long runs: verb, bar, done/total, a status field, time."""
    return Progress(TextColumn(f"[bold]{verb}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=err,
                    transient=False)


@contextlib.contextmanager
def working(message: str) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr while work without a count runs (a NUTS run, a subset search);
    yields ``say(text)`` that changes its text to the current phase. Where stderr is not
    a terminal (a CI log, a file) the message and each phase are a plain line, with the
    seconds since the start, and the end says how long it took."""
    import threading
    import time

    if not err.is_terminal:
        # the first line waits a second, so that an option refused at once stays the
        # command's one line
        start = time.perf_counter()
        said = threading.Event()

        def line(text: str) -> None:
            said.set()
            err.print(f"{text} ({time.perf_counter() - start:.0f} s)", highlight=False,
                      markup=False, soft_wrap=True)

        timer = threading.Timer(1.0, line, [f"{message}: started"])
        timer.daemon = True
        timer.start()
        try:
            yield line
        finally:
            timer.cancel()
        if said.is_set():
            line(f"{message}: done")
        return
    with err.status(message, spinner="dots") as status:
        yield lambda text: status.update(text)


LM_EVAL_PREFIX = "lm-eval:"
INSPECT_PREFIX = "inspect:"  # bayeval.data.inspect_logs.INSPECT_PREFIX, without its import


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
    """The whole matrix of a source record, its reader's warnings (a subset run passed
    over, say) printed as one line each."""
    from bayeval.data.sources import load_source_matrix

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        matrix = load_source_matrix(source, journal)
    for w in caught:
        err.print(f"[yellow]warning:[/] {w.message}", highlight=False)
    return matrix


bench_app = typer.Typer(help="Experiments that reproduce the papers' tables.",
                        no_args_is_help=True, cls=FlagGroup)
app.add_typer(bench_app, name="bench")


# Options several commands share (one definition, one help text)
TimeoutOption = Annotated[float, typer.Option(help="Seconds before a command is killed.")]
RetriesOption = Annotated[int, typer.Option(
    help="Retries of a failing command (a non-zero exit, no number in [0, 1] on its last "
         "line, or a timeout) before the item (or pair) counts as failed; a stop (Ctrl-C, "
         "SIGTERM) retries nothing.")]
SeedOption = Annotated[int | None, typer.Option(help="Random seed (default 0).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
REFERENCE_HELP = ("A score matrix file (.npz, .csv or .parquet, wide or long) instead of a "
                  "bundled dataset, lm-eval:OUTPUT_DIR for lm-evaluation-harness "
                  "--log_samples output (with --task), or inspect:LOG_DIR for Inspect AI "
                  "eval logs (pip install 'bayeval[inspect]').")
ReferenceOption = Annotated[Path | None, typer.Option(help=REFERENCE_HELP)]


# a suite's journal folder holds this record beside its tasks' journals (evaluate --suite)
SUITE_FILE = "suite.json"


class GroupMean(StrEnum):
    """How a harness group's score combines its subtasks (the values of
    bayeval.compression.estimate.GROUP_MEANS, kept here so the CLI's imports stay light)."""

    size = "size"
    equal = "equal"


class RepeatedModels(StrEnum):
    error = "error"
    number = "number"


RepeatedModelsOption = Annotated[RepeatedModels, typer.Option(
    help="A model id listed twice in --reference (a matrix file or Inspect logs): error, "
         "or number (the repeats kept as ID#2, ID#3, …, as the bundled leaderboard "
         "matrices do).")]
TaskOption = Annotated[str | None, typer.Option(
    help="The task to read with --reference lm-eval:DIR (a harness task or group, e.g. "
         "leaderboard_ifeval) or inspect:DIR (default there: the logs' only task).")]
MetricOption = Annotated[str | None, typer.Option(
    help="With --reference lm-eval:DIR: the per-sample metric (default: the log's first, "
         "e.g. acc); with inspect:DIR: the scorer (default: the only one), SCORER:KEY for "
         "a scorer whose value is a dict.")]
FilterOption = Annotated[str | None, typer.Option(
    "--filter", help="With --reference lm-eval:DIR: the harness filter to read when a task "
                     "logs several (e.g. strict-match).")]


def check_output(path: Path | None, flag: str, folder: bool = False) -> None:
    """Refuse, before any work, an output that cannot be written: a file path that is a
    folder or lies in a missing folder, a folder path that is a file, an unwritable place."""
    if path is None:
        return
    if folder:
        if path.exists() and not path.is_dir():
            raise BayevalError(f"{flag} {path}: is a file, not a folder")
        base = path if path.exists() else path.parent
        while not base.exists():
            base = base.parent
        if not base.is_dir() or not os.access(base, os.W_OK):
            raise BayevalError(f"{flag} {path}: cannot create a folder in {base}")
        return
    if path.is_dir():
        raise BayevalError(f"{flag} {path}: is a folder; give a file path")
    if not path.parent.is_dir():
        what = "is a file, not a folder" if path.parent.exists() else "does not exist"
        raise BayevalError(f"{flag} {path}: {path.parent} {what}")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise BayevalError(f"{flag} {path}: not writable")


def failure_summary(skipped: list[tuple[str, ...]], top: int = 3) -> list[dict[str, Any]]:
    """The most frequent reasons evaluations failed (the last field of each skip), with
    the item ids taken out so that one cause counts once, and how often each came."""
    import re
    from collections import Counter

    causes = Counter(re.sub(r"item '[^']*': ", "", record[-1]) for record in skipped)
    return [{"reason": reason, "count": count} for reason, count in causes.most_common(top)]


HarnessResultsOption = Annotated[str | None, typer.Option(
    metavar="PATH",  # text, not a Path: its trailing slash says "a folder"
    help="Also write the estimate in lm-evaluation-harness's results layout (the "
         "metric, its stderr-like half-width / z, the interval, n-samples evaluated of "
         "all, an alias marked '(bayeval estimate)'): to this file, or to "
         "results_DATE.json in this folder (a path ending in / is a folder, made if "
         "missing). Written after the estimate is shown.")]


def result_estimate(result: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """One target's estimate in ``evaluate``'s JSON ``result`` as a
    :class:`~bayeval.harness_results.TaskEstimate` — a suite's (or a group's by subtask)
    with its ``tasks`` as its subtasks — and what says how it was made (the method, its
    parameters, the seed, the stop, the journal, the reference), for the files written in
    other tools' formats."""
    from bayeval.harness_results import TaskEstimate

    level = result["level"]
    tasks = tuple(TaskEstimate(t.get("harness_task") or t["task"], t["estimate"],
                               t["lower"], t["upper"], t["items_used"], t["n_items"], level,
                               metric=t.get("metric"), filter_name=t.get("filter"))
                  for t in result.get("tasks", ()))
    estimate = TaskEstimate(result["suite"] if tasks else result["task"],
                            result["estimate"], result["lower"], result["upper"],
                            result["items_used"], result["n_items"], level, tasks)
    info = {k: result[k] for k in ("method", "params", "seed", "stopped", "journal",
                                   "reference") if result.get(k) is not None}
    return estimate, {**info, "suite": True} if tasks else info


def write_estimate_results(result: dict[str, Any], path: Path) -> None:
    """``--harness-results PATH``: one target's estimate (``result``: the command's JSON
    result; a suite's tasks under ``results`` and the suite under ``groups``) written in
    the harness's results layout (:mod:`bayeval.harness_results`; a file that cannot be
    written is the command's one-line file error)."""
    from bayeval.harness_results import harness_results, write_harness_results

    estimate, info = result_estimate(result)
    model = result["target"] if "target" in result else result["tasks"][0]["target"]
    write_harness_results(harness_results(estimate, result.get("metric"),
                                          result.get("filter"), model, info), path)


def json_text(value: Any, indent: int | None = None) -> str:
    """``value`` as strict JSON (what ``--json`` prints): a float that is not finite (NaN,
    ±inf), which JSON cannot hold, becomes null."""
    import math

    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean(value), indent=indent, allow_nan=False)
