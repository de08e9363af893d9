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
from bayeval.errors import BayevalError
from bayeval.evaluation.options import (  # noqa: F401  (the commands' names for them)
    DEFAULT_DATASET,
    DEFAULT_METHOD,
    FAILURES_IN_A_ROW,
    JOINT_METHOD,
    JOINT_METHODS,
    SUBPROCESS,
    SUITE_FILE,
    TOOL_EVALUATORS,
    EvaluatorKind,
    GroupMean,
    LmEvalMode,
    RepeatedModels,
)

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
EXIT_USAGE = 2  # a bad option, file or journal (also typer's own usage errors)
EXIT_EVALUATION = 3  # the evaluator failed (several items in a row, or every item)


class PairEvaluatorKind(StrEnum):
    """The evaluators of (model, item) pairs (``bayeval select``)."""

    oracle = "oracle"
    command = "command"


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

def setup_jax() -> None:
    """JAX set up as every run needs it (:func:`bayeval.devices.prepare_jax`), a bad
    ``BAYEVAL_CPU_DEVICES`` the command's one-line error."""
    from bayeval.devices import prepare_jax

    try:
        prepare_jax()
    except BayevalError as exc:
        raise fail(str(exc)) from None


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
    show_warnings()
    if "jax" in sys.modules:
        from bayeval.precision import enable_float64

        enable_float64()
    else:
        os.environ["JAX_ENABLE_X64"] = "True"


def show_warnings() -> None:
    """Print each :class:`~bayeval.errors.BayevalWarning` the library gives as one
    ``warning:`` line on stderr, every time it comes (other warnings as Python shows
    them)."""
    from bayeval.errors import BayevalWarning

    warnings.simplefilter("always", BayevalWarning)
    shown = warnings.showwarning
    if getattr(shown, "bayeval", False):
        return

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, BayevalWarning):
            err.print(f"[yellow]warning:[/] {message}", highlight=False)
        else:
            shown(message, category, filename, lineno, file, line)

    show.bayeval = True  # type: ignore[attr-defined]
    warnings.showwarning = show


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


HarnessResultsOption = Annotated[str | None, typer.Option(
    metavar="PATH",  # text, not a Path: its trailing slash says "a folder"
    help="Also write the estimate in lm-evaluation-harness's results layout (the "
         "metric, its stderr-like half-width / z, the interval, n-samples evaluated of "
         "all, an alias marked '(bayeval estimate)'): to this file, or to "
         "results_DATE.json in this folder (a path ending in / is a folder, made if "
         "missing). Written after the estimate is shown.")]


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
