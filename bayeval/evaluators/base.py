"""Evaluators: what answers ``Session.ask`` with the target model's score on an item.

* :class:`MatrixOracle` — simulation: the target's full row is known.
* :class:`MatrixPairOracle` — simulation for several models: any (model, item) of a matrix.
* :class:`CallableEvaluator` — any Python function ``item_id -> score``.
* :class:`CommandEvaluator` — a user's shell command, run with the item id, whose stdout's
  last non-empty line is the score.

A failure (an exception, a non-zero exit, a timeout, an answer that is not a number in
[0, 1]) raises :class:`~bayeval.errors.EvaluationError` after the allowed retries; the
session then leaves the item unevaluated and journals why. It is never recorded as a score.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import ClassVar

import numpy as np

from bayeval.data.matrix import ScoreMatrix, validate_score
from bayeval.errors import DataError, EvaluationError


class MatrixOracle:
    """Answers from a known row of scores (``matrix`` must hold ``target_id``)."""

    def __init__(self, matrix: ScoreMatrix, target_id: str) -> None:
        self.matrix = matrix
        self.target_id = str(target_id)
        self._row = matrix.row(self.target_id)

    def __call__(self, item: str) -> float:
        score = self._row[self.matrix.item_index(item)]
        if math.isnan(score):
            raise EvaluationError(f"item {item!r}: the matrix has no score of "
                                  f"{self.target_id!r} on it")
        return float(score)

    @property
    def true_score(self) -> float:
        """R* = mean of the target's row over items it has a score on."""
        return float(np.nanmean(self._row))


class MatrixPairOracle:
    """Answers (model, item) from a known score matrix (simulating several models)."""

    def __init__(self, matrix: ScoreMatrix) -> None:
        self.matrix = matrix
        self._rows = {m: i for i, m in enumerate(matrix.models)}

    def __call__(self, model: str, item: str) -> float:
        score = self.matrix.scores[self._rows[model], self.matrix.item_index(item)]
        if math.isnan(score):
            raise EvaluationError(f"the matrix has no score of {model!r} on item {item!r}")
        return float(score)


class CallableEvaluator:
    """Wraps ``fn(item_id) -> score``; exceptions and bad answers become EvaluationError."""

    def __init__(self, fn: Callable[[str], object], retries: int = 0) -> None:
        self.fn = fn
        self.retries = retries

    def __call__(self, item: str) -> float:
        reason = ""
        for _ in range(self.retries + 1):
            try:
                return validate_score(self.fn(item), f"item {item!r}")
            except DataError as exc:
                reason = str(exc)
            except Exception as exc:  # a user's evaluator may raise anything
                reason = f"item {item!r}: evaluator raised {type(exc).__name__}: {exc}"
        raise EvaluationError(f"{reason} (after {self.retries + 1} attempt(s))")


class CommandEvaluator:
    """Runs ``command`` in a shell for each item and reads the score from its stdout.

    The item id reaches the command as the environment variable ``BAYEVAL_ITEM`` and, where
    the command says ``{item}``, as one argument: the placeholder becomes
    ``"$BAYEVAL_ITEM"``, so the shell passes the id as it is, whatever characters it holds
    (an id from a data file can never run as shell code). Without ``{item}`` the id is
    appended as the last argument the same way. ``{target}`` (the model's id, when several
    models are evaluated) works alike through ``BAYEVAL_TARGET``, and ``{model}`` through
    ``BAYEVAL_MODEL`` (the same id, as ``bayeval select`` names it); all placeholders are
    replaced in one pass. A placeholder must stand unquoted in the command (it is quoted
    for you); an id that starts with ``-`` is refused unless the command puts ``--`` before
    the placeholder, so that no id reaches a script as an option.

    The last non-empty line of stdout must be a number in [0, 1]. A non-zero exit, a
    timeout or any other answer is retried ``retries`` times, then reported as
    :class:`EvaluationError`. A command that times out is killed with its whole process
    group (whatever it started).
    """

    # {model} (best-model selection) is {target} under the name the select command uses
    PLACEHOLDERS: ClassVar[dict[str, str]] = {"item": "BAYEVAL_ITEM", "target": "BAYEVAL_TARGET",
                                              "model": "BAYEVAL_MODEL"}

    def __init__(self, command: str, timeout: float = 600.0, retries: int = 1) -> None:
        if not command.strip():
            raise EvaluationError("the evaluator command is empty")
        quoted = _quoted_placeholders(command)
        if quoted:
            raise EvaluationError(
                f"--command: write {{{quoted[0]}}} without quotes around it (bayeval passes "
                f"the value quoted, as one argument); it is inside quotes in {command!r}")
        if timeout <= 0 or retries < 0:
            raise EvaluationError(f"timeout must be > 0 and retries ≥ 0, got {timeout:g} "
                                  f"and {retries}")
        self.command = command
        self.timeout = timeout
        self.retries = retries
        self._children = ChildProcesses()
        self._template = _PLACEHOLDER.sub(
            lambda m: f'"${self.PLACEHOLDERS[m.group(1)]}"', command)
        if "{item}" not in command:
            self._template += ' "$BAYEVAL_ITEM"'

    def command_for(self, item: str, target: str | None = None) -> tuple[str, dict[str, str]]:
        """(the shell command, the environment variables it reads the values from)."""
        values = {"item": item, "target": target, "model": target}
        for name, value in values.items():
            as_argument = name == "item" or "{" + name + "}" in self.command  # else env only
            if (value is not None and as_argument and value.startswith("-")
                    and not self._guarded(name)):
                raise EvaluationError(
                    f"{name} id {value!r} starts with '-' and would reach the command as an "
                    f"option; put -- before {{{name}}} in --command (or read "
                    f"${self.PLACEHOLDERS[name]})")
        env = {self.PLACEHOLDERS[k]: v for k, v in values.items() if v is not None}
        return self._template, env

    def _guarded(self, name: str) -> bool:
        """Whether ``--`` precedes the placeholder of ``name`` (or the appended id)."""
        where = self.command.find("{" + name + "}")
        before = self.command if where < 0 else self.command[:where]
        return "--" in before.split()

    def _attempt(self, command: tuple[str, dict[str, str]], item: str) -> float:
        cmd, env = command
        try:
            proc, stdout, stderr = self._children.run(cmd, self.timeout, shell=True,
                                                      env={**os.environ, **env})
        except subprocess.TimeoutExpired:
            raise EvaluationError(f"item {item!r}: command timed out after "
                                  f"{self.timeout:g}s (its process group was killed)") from None
        if proc.returncode != 0:
            err = [ln for ln in stderr.splitlines() if ln.strip()]
            detail = f": {err[-1][:120]}" if err else ""
            raise EvaluationError(f"item {item!r}: command exited with status "
                                  f"{proc.returncode}{detail}")
        lines = [ln for ln in stdout.splitlines() if ln.strip()]
        if not lines:
            raise EvaluationError(f"item {item!r}: command printed nothing")
        try:
            return validate_score(lines[-1], f"item {item!r}: command answered")
        except DataError as exc:
            raise EvaluationError(str(exc)) from None

    def cancel(self) -> None:
        """Kill the commands running now (with their process groups) and start no other
        until :meth:`restart`."""
        self._children.cancel()

    def restart(self) -> None:
        """Let commands start again after :meth:`cancel` (a new run)."""
        self._children.cancelled = False

    def __call__(self, item: str, target: str | None = None) -> float:
        command = self.command_for(item, target)  # refuses unsafe ids before any attempt
        reason = ""
        for _ in range(self.retries + 1):
            try:
                return self._attempt(command, item)
            except CancelledError:
                raise
            except EvaluationError as exc:
                if self._children.cancelled:  # killed because the run stopped: no retry
                    raise CancelledError(f"item {item!r}: the run was stopped") from None
                reason = str(exc)
        raise EvaluationError(f"{reason} (after {self.retries + 1} attempt(s))")


_PLACEHOLDER = re.compile(r"\{(item|target|model)\}")


def _quoted_placeholders(command: str) -> list[str]:
    """The placeholders that stand inside single or double quotes in ``command``."""
    found, quote, i = [], None, 0
    while i < len(command):
        c = command[i]
        if c == "\\" and quote != "'":
            i += 2
            continue
        if quote is None and c in "'\"":
            quote = c
        elif c == quote:
            quote = None
        else:
            match = _PLACEHOLDER.match(command, i)
            if match and quote is not None:
                found.append(match.group(1))
        i += 1
    return found


# The longest a wait of the main thread blocks at once. A signal sent to bayeval may be
# delivered to any of its threads (JAX starts many); the main thread, blocked in a system
# call, then sees the pending Ctrl-C or SIGTERM only when its wait returns.
WAIT_SLICE = 0.25


def communicate_in_slices(proc: subprocess.Popen, timeout: float | None) -> tuple[str, str]:
    """``proc.communicate(timeout=timeout)`` waited in slices of :data:`WAIT_SLICE`
    seconds, so that Ctrl-C or SIGTERM ends the wait at once whichever thread the signal
    was delivered to (retrying communicate loses no output)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = WAIT_SLICE if deadline is None else deadline - time.monotonic()
        try:
            return proc.communicate(timeout=max(min(left, WAIT_SLICE), 0.0))
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout) from None


def kill_group(proc: subprocess.Popen) -> None:
    """Kill ``proc``'s whole process group and reap it."""
    end_group(proc)
    try:
        proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass  # a grandchild that left the group still holds a pipe: don't wait on it


def end_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s process group (its own, started with a new session): the
    process and whatever it started that is still running, a background job of a
    command that finished included."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def start_child(argv: str | list[str], **kwargs) -> subprocess.Popen:
    """Start an evaluator process in a process group of its own (no ``preexec_fn``: a
    fork of a process running JAX's threads is unsafe), its output read as text with
    undecodable bytes replaced."""
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, errors="replace",
                            start_new_session=True, **kwargs)


# A watchdog process reads "+PGID" / "-PGID" lines on a pipe from bayeval; when the pipe
# closes (bayeval ended, by any means, SIGKILL included) it kills the groups still listed.
_WATCHDOG = """
import os, signal, sys
live = set()
for line in sys.stdin:
    sign, group = line[:1], line[1:].strip()
    if group.isdigit():
        (live.add if sign == "+" else live.discard)(int(group))
for group in live:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""


class _Watchdog:
    """The one watchdog of this process (started with the first evaluator process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None

    def say(self, line: str) -> None:
        with self._lock:
            try:
                if self._proc is None or self._proc.poll() is not None:
                    self._proc = subprocess.Popen(
                        [sys.executable, "-S", "-c", _WATCHDOG], stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                        start_new_session=True, text=True)
                self._proc.stdin.write(line + "\n")
                self._proc.stdin.flush()
            except OSError:
                pass  # no watchdog: every other way out still ends the groups


_watchdog = _Watchdog()


class ChildProcesses:
    """The evaluator processes running now, so that every way out of a run (the stop
    with evaluations in flight, an error, Ctrl-C, SIGTERM, and a SIGKILL of bayeval,
    through a watchdog process that outlives it) ends their whole process groups."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self.cancelled = False

    def run(self, argv: str | list[str], timeout: float, **kwargs) -> tuple[
            subprocess.Popen, str, str]:
        """Run ``argv`` to its end (its group killed at ``timeout`` seconds, raising
        subprocess.TimeoutExpired, or on any exception): (process, stdout, stderr).
        After :meth:`cancel` nothing starts: :class:`CancelledError` is raised instead."""
        with self._lock:
            if self.cancelled:
                raise CancelledError("the run was stopped: no evaluator process starts")
            proc = start_child(argv, **kwargs)
            self._running.add(proc)
        _watchdog.say(f"+{proc.pid}")
        try:
            stdout, stderr = communicate_in_slices(proc, timeout)
        except BaseException:
            kill_group(proc)
            raise
        finally:
            with self._lock:
                self._running.discard(proc)
            end_group(proc)  # what it left running in its group
            _watchdog.say(f"-{proc.pid}")
        return proc, stdout, stderr

    def cancel(self) -> None:
        """Kill every running process group, and start no other (the run stopped: an
        interruption, an error)."""
        with self._lock:
            self.cancelled = True
            running = list(self._running)
        for proc in running:
            end_group(proc)


@contextlib.contextmanager
def closing(evaluators: Sequence[object]) -> Iterator[None]:
    """Close each evaluator that has ``close()`` (once each, in order) however the block
    ends: an evaluator that keeps output writes its summary at the end of a run and on
    its interruption (:meth:`bayeval.evaluators.harness.LmEvalInProcess.close`)."""
    try:
        yield
    finally:
        seen: set[int] = set()
        for evaluator in evaluators:
            close = getattr(evaluator, "close", None)
            if close is not None and id(evaluator) not in seen:
                seen.add(id(evaluator))
                close()


class CancelledError(EvaluationError):
    """An evaluation ended because the run stopped (its process killed, or none started):
    never retried."""


class BatchEvaluator:
    """An evaluator that scores a batch of items in one call (a harness launch, an
    Inspect run): subclasses give ``evaluate_batch(items) -> list[float |
    EvaluationError]``; calling it on one item is a batch of one."""

    def evaluate_batch(self, items: Sequence[str]) -> list[float | EvaluationError]:
        raise NotImplementedError

    def __call__(self, item: str) -> float:
        result = self.evaluate_batch([item])[0]
        if isinstance(result, EvaluationError):
            raise result
        return result
