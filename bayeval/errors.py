"""Error types of bayeval.

Every error bayeval raises on bad input is a :class:`BayevalError` whose message is one
line that names the problem and where it is (file, line, model, item). The CLI prints
that line and exits with status 2 instead of a traceback.
"""

from __future__ import annotations


class BayevalError(ValueError):
    """Base class: a one-line, user-facing message."""


class DataError(BayevalError):
    """A score matrix or a file holding one is malformed."""


class JournalError(BayevalError):
    """A session journal cannot be used (another matrix, corrupt middle line, ...)."""


class EvaluationError(BayevalError):
    """An evaluator could not produce a score for an item."""


class EvaluatorFailedError(EvaluationError):
    """The evaluator failed on several items in a row: the run stops instead of walking
    the benchmark on failures."""


class SessionError(BayevalError):
    """An ask/tell call that the session cannot accept."""


class BayevalWarning(UserWarning):
    """Something a run's user should read but that does not stop it (a log passed over,
    a journal repaired); the command line prints each as one ``warning:`` line."""


class Terminated(KeyboardInterrupt):
    """SIGTERM: the command ends as on Ctrl-C (journal closed, evaluator processes ended),
    with exit status 143 (128 + SIGTERM) instead of 130."""


_TERMINATIONS: list[Terminated] = []


def terminate_like_interrupt() -> None:
    """From now on SIGTERM ends this process's work as Ctrl-C does: a :class:`Terminated`
    (a KeyboardInterrupt) is raised, so journals are closed and evaluator processes and
    bench workers ended, exit status 143. The command line installs it first; a script
    may too (main thread only)."""
    import signal
    import threading

    def interrupt(signum, frame):
        _TERMINATIONS.append(Terminated())
        raise _TERMINATIONS[-1]

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def last_interruption() -> KeyboardInterrupt:
    """The SIGTERM that :func:`terminate_like_interrupt` raised, if any; else Ctrl-C's."""
    return _TERMINATIONS[-1] if _TERMINATIONS else KeyboardInterrupt()


def interrupt_status(exc: BaseException | None) -> int:
    """The exit status of an interruption: 143 for SIGTERM, 130 for Ctrl-C."""
    while exc is not None:
        if isinstance(exc, Terminated):
            return 143
        exc = exc.__cause__ or exc.__context__
    return 130
