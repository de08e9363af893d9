"""The command line's watch of a live run (:mod:`bayeval.evaluation.watch`): a progress
bar on a terminal, a plain line per batch (or per 10 items) where stderr is a log, nothing
with ``--quiet``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from bayeval.cli.common import err, progress_bar

__all__ = ["progress_watch"]


def progress_watch(quiet: bool) -> Callable[[Any, int], Any] | None:
    """The watch ``bayeval evaluate`` passes to :func:`bayeval.evaluate` (None: quiet)."""
    return None if quiet else _watch


def _watch(run: Any, batch: int):
    from bayeval.selection.session import SelectionSession

    if isinstance(run, SelectionSession):
        return _selecting(run)
    return _evaluating(run, batch)


@contextlib.contextmanager
def _selecting(session: Any) -> Iterator[Callable[..., None] | None]:
    """A selection's bar: its evaluations of the whole schedule, the phase, the models
    left; where stderr is a log, a plain line per tenth of the evaluations."""
    schedule = session.schedule
    total = int(schedule.sum() + schedule[-1])
    if not err.is_terminal:
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
    with progress_bar("selecting") as progress:
        task = progress.add_task("select", total=total, status="",
                                 completed=session.n_evaluations + len(session.skipped))

        def on_step(s, model, item, score):
            phase = min(s.phase + 1, len(schedule))
            progress.update(task, completed=s.n_evaluations + len(s.skipped),
                            status=f"phase {phase}/{len(schedule)}, {int(s.alive.sum())} left")

        yield on_step


@contextlib.contextmanager
def _evaluating(run: Any, batch: int) -> Iterator[Callable[..., None]]:
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

    if not err.is_terminal:  # a log: one plain line per batch (or per 10 items)
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
    with progress_bar("evaluating") as progress:
        bar = progress.add_task("eval", total=total, completed=told(), status="")

        def on_step(*asked: Any) -> None:
            k, session, item, score = where(asked)
            text = status(k, session, item, score)
            progress.update(bar, completed=told(),
                            status=f"{run.names[k]}: {text}" if suite else text)

        yield on_step
