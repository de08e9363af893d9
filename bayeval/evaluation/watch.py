"""How a caller follows a live run: a *watch* is ``watch(run, batch)``, a context manager
around the loop that yields the ``on_step`` callback the loop calls after each told
score (or None). ``run`` is the :class:`~bayeval.loop.session.Session` of one task
(``on_step(session, ..., item, score)``) or the :class:`~bayeval.loop.suite.SuiteRun` of a
suite (``on_step(k, session, item, score)``). The command line's progress bar is one."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

__all__ = ["Watch", "watched"]

Watch = Callable[[Any, int], AbstractContextManager[Callable[..., None] | None]]


def watched(watch: Watch | None, run: Any, batch: int
            ) -> AbstractContextManager[Callable[..., None] | None]:
    """``watch(run, batch)``, or a context that yields no callback."""
    return contextlib.nullcontext(None) if watch is None else watch(run, batch)
