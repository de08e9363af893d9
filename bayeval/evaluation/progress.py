"""Progress of a live run (a watch, :mod:`bayeval.evaluation.watch`), shown by default
where a person watches: a bar on a terminal or in a notebook (with ipywidgets, as Rich
draws there), a plain line per batch (or per 10 items) where stderr is a log or a notebook
without ipywidgets, nothing with ``progress=False`` (``--quiet``). The command line and
:func:`bayeval.evaluate` show the same."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

__all__ = ["bar_of", "in_notebook", "progress_watch", "silenced_bars"]


@contextlib.contextmanager
def silenced_bars(silent: bool = True) -> Iterator[None]:
    """While the block runs (``silent``), every tqdm bar starts disabled: the progress
    bars the harness and other tools draw themselves (lm-evaluation-harness's requests'
    build and its models' calls) stay off a quiet run's output."""
    try:
        import tqdm
    except ImportError:
        silent = False
    if not silent:
        yield
        return
    original = tqdm.tqdm.__init__

    @functools.wraps(original)
    def disabled(self, *args, **kwargs):
        kwargs["disable"] = True
        original(self, *args, **kwargs)

    tqdm.tqdm.__init__ = disabled
    try:
        yield
    finally:
        tqdm.tqdm.__init__ = original


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython's ZMQ shell)."""
    shell = sys.modules.get("IPython")
    get = getattr(shell, "get_ipython", None)
    return get is not None and type(get()).__name__ == "ZMQInteractiveShell"


def progress_watch(show: bool | None = None, console: Any = None
                   ) -> Callable[[Any, int], Any] | None:
    """The watch that shows a run's progress on ``console`` (a Rich console; default:
    one on stderr), or None where nothing is shown (``show`` False). ``show`` None: a
    bar where stderr is a terminal, or a notebook that has ipywidgets; plain lines
    elsewhere (a log, a notebook without ipywidgets)."""
    if show is False:
        return None
    if console is None:
        from rich.console import Console

        notebook = in_notebook()
        bar = sys.stderr.isatty() if not notebook else _has_widgets()
        console = Console(stderr=True, force_terminal=bar or None,
                          force_jupyter=notebook and bar, soft_wrap=not bar)
    else:
        bar = console.is_terminal
    return functools.partial(_watch, console=console, bar=bar)


def _has_widgets() -> bool:
    import importlib.util

    return importlib.util.find_spec("ipywidgets") is not None


def bar_of(console: Any, verb: str) -> Any:
    """The bar of long runs: verb, bar, done/total, a status field, time."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(TextColumn(f"[bold]{verb}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                    console=console, transient=False)


def _watch(run: Any, batch: int, console: Any, bar: bool):
    from bayeval.selection.session import SelectionSession

    if isinstance(run, SelectionSession):
        return _selecting(run, console, bar)
    return _evaluating(run, batch, console, bar)


@contextlib.contextmanager
def _selecting(session: Any, err: Any, bar: bool) -> Iterator[Callable[..., None] | None]:
    """A selection's bar: its evaluations of the whole schedule, the phase, the models
    left; where stderr is a log, a plain line per tenth of the evaluations."""
    schedule = session.schedule
    total = int(schedule.sum() + schedule[-1])
    if not bar:
        shown = [(session.n_evaluations + len(session.skipped)) * 10 // total]

        def on_line(s, model, item, score):
            tenth = (s.n_evaluations + len(s.skipped)) * 10 // total
            if tenth > shown[0]:
                shown[0] = tenth
                err.print(f"selecting: {s.n_evaluations + len(s.skipped)}/{total} "
                          f"evaluations, phase {min(s.phase + 1, len(schedule))}/"
                          f"{len(schedule)}, {int(s.alive.sum())} left", highlight=False)

        yield on_line
        return
    with bar_of(err, "selecting") as progress:
        task = progress.add_task("select", total=total, status="",
                                 completed=session.n_evaluations + len(session.skipped))

        def on_step(s, model, item, score):
            phase = min(s.phase + 1, len(schedule))
            progress.update(task, completed=s.n_evaluations + len(s.skipped),
                            status=f"phase {phase}/{len(schedule)}, {int(s.alive.sum())} left")

        yield on_step


@contextlib.contextmanager
def _evaluating(run: Any, batch: int, err: Any, bar: bool
                ) -> Iterator[Callable[..., None]]:
    from bayeval.loop.suite import SuiteRun

    suite = isinstance(run, SuiteRun)
    sessions = run.sessions if suite else [run]
    limit = run.rule.max_items if suite else run.max_items
    total = sum(len(s.target_ids) * s.n_items for s in sessions)
    total = total if limit is None else min(total, limit)

    def told() -> int:
        return sum(s.n_observed for s in sessions)

    def status(k: int, session: Any, item: str, score: float | None) -> str:
        if suite:
            value, lo, hi = run.average()
            return f"average {value:.3f} [{lo:.3f}, {hi:.3f}]"
        if session.several:
            text = (f"{int(np.sum(session.stopped_at > 0))}/{len(session.target_ids)} "
                    "targets done")
        else:
            value, lo, hi = session.estimate()
            text = f"estimate {value:.3f} [{lo:.3f}, {hi:.3f}]"
        return text + (f"  (skipped {item})" if score is None else "")

    def where(asked: tuple) -> tuple[int, Any, str, float | None]:
        """(task, session, item, score) of a step, for a suite's or a session's call."""
        if suite:
            return asked  # type: ignore[return-value]
        return (0, asked[0], asked[-2], asked[-1])

    if not bar:  # a log: one plain line per batch (or per 10 items)
        every = max(batch, 10) if suite else max(batch, 10 if batch == 1 else 1)
        last = [told()]

        def on_line(*asked: Any) -> None:
            k, session, item, score = where(asked)
            done = told()
            if done - last[0] < every and (suite or not session.done):
                return
            last[0] = done
            where_ = (f"{run.names[k]} {session.n_observed}" if suite
                      else f"{run.times.wall_seconds():.0f} s")
            err.print(f"evaluating: {done}/{total} items, {where_}, "
                      f"{status(k, session, item, score)}", highlight=False)

        yield on_line
        return
    with bar_of(err, "evaluating") as progress:
        line = progress.add_task("eval", total=total, completed=told(), status="")

        def on_step(*asked: Any) -> None:
            k, session, item, score = where(asked)
            text = status(k, session, item, score)
            progress.update(line, completed=told(),
                            status=f"{run.names[k]}: {text}" if suite else text)

        yield on_step
