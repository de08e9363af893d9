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
    may too (main thread only).

    Python runs a signal's handler wherever the main thread is, also inside a garbage
    collector's callback (JAX registers one) or an object's ``__del__``, and drops what
    is raised there (``Exception ignored in …``): the interruption was lost and the work
    went on. From now on such a dropped interruption, SIGTERM's or Ctrl-C's, is signalled
    again, so that it is raised where the main thread goes on."""
    import signal
    import sys
    import threading

    def interrupt(signum, frame):
        _TERMINATIONS.append(Terminated())
        raise _TERMINATIONS[-1]

    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGTERM, interrupt)
    if not getattr(sys.unraisablehook, "keeps_interruptions", False):
        sys.unraisablehook = _interruptions_kept(sys.unraisablehook)


def _interruptions_kept(previous):
    """An unraisable-exception hook that signals a dropped KeyboardInterrupt (or
    :class:`Terminated`) again and passes everything else to ``previous``. The signal
    comes from another thread: signalled here, the handler would run in this hook (or
    the collector's next callback) and be dropped again; the thread signals a moment
    later, when the main thread is back in its own work (one dropped again is signalled
    again)."""
    import _thread
    import signal
    import threading

    def hook(unraisable) -> None:
        exc = unraisable.exc_value
        if isinstance(exc, KeyboardInterrupt):
            signum = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
            again = threading.Timer(0.05, _thread.interrupt_main, args=(signum,))
            again.daemon = True
            again.start()
            return
        previous(unraisable)

    hook.keeps_interruptions = True  # type: ignore[attr-defined]
    return hook


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
