"""What every ``bayeval`` command shares: the Typer apps, the consoles, JAX set-up, the
one-line error exit, progress bars, the reference source of --dataset / --reference, the
resume of a journaled session."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress

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
    CallSizing,
    EvaluatorKind,
    GroupMean,
    LmEvalMode,
    RepeatedModels,
    RestWhole,
    comma_list,
)
from bayeval.evaluation.settings import EvaluatorOptions, RunSettings, TaskSettings
from bayeval.records.files import check_output, json_text  # noqa: F401  (the commands')

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
    from bayeval.errors import EvaluationError

    try:
        yield
    except EvaluationError as exc:
        raise fail(str(exc), EXIT_EVALUATION) from None
    except BayevalError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt as exc:
        notes = getattr(exc, "__notes__", [])
        raise interrupted(exc, f"continue with: {notes[-1]}" if notes else "") from None


def interrupted(exc: BaseException, hint: str = "") -> SystemExit:
    """Say ``interrupted`` (and ``hint``: how to continue); the exit, 130 or 143 on SIGTERM.
    A SystemExit: Typer's 130 is then an interruption no command has said (cli.main)."""
    from bayeval.errors import interrupt_status

    err.print(f"interrupted{f'; {hint}' if hint else ''}", highlight=False, markup=False,
              soft_wrap=True)
    return SystemExit(interrupt_status(exc))


def progress_bar(verb: str) -> Progress:
    """The progress bar of long runs: verb, bar, done/total, a status field, time."""
    from bayeval.evaluation.progress import bar_of

    return bar_of(err, verb)


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
TimeoutOption = Annotated[float, typer.Option(help=EvaluatorOptions.help("timeout"))]
RetriesOption = Annotated[int, typer.Option(help=EvaluatorOptions.help("retries"))]
SeedOption = Annotated[int | None, typer.Option(help=RunSettings.help("seed"))]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
ReferenceOption = Annotated[Path | None, typer.Option(help=TaskSettings.help("reference"))]
RepeatedModelsOption = Annotated[RepeatedModels, typer.Option(
    help=TaskSettings.help("repeated_models"))]
TaskOption = Annotated[str | None, typer.Option(help=TaskSettings.help("task"))]
MetricOption = Annotated[str | None, typer.Option(help=TaskSettings.help("metric"))]
FilterOption = Annotated[str | None, typer.Option("--filter",
                                                  help=TaskSettings.help("filter"))]


HarnessResultsOption = Annotated[str | None, typer.Option(
    metavar="PATH",  # text, not a Path: its trailing slash says "a folder"
    help="Also write the estimate in lm-evaluation-harness's results layout (the "
         "metric, its stderr-like half-width / z, the interval, n-samples evaluated of "
         "all, an alias marked '(bayeval estimate)'): to this file, or to "
         "results_DATE.json in this folder (a path ending in / is a folder, made if "
         "missing). Written after the estimate is shown.")]
