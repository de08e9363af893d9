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

import math
import shlex
import subprocess
from collections.abc import Callable

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

    ``{item}`` in the command is replaced by the (shell-quoted) item id; without it the id
    is appended as the last argument. ``{target}`` is replaced by the target model's id
    when one is given (several targets evaluated jointly). The last non-empty line of
    stdout must be a number in [0, 1]. A non-zero exit, a timeout or any other answer is
    retried ``retries`` times, then reported as :class:`EvaluationError`.
    """

    def __init__(self, command: str, timeout: float = 600.0, retries: int = 1) -> None:
        if not command.strip():
            raise EvaluationError("the evaluator command is empty")
        self.command = command
        self.timeout = timeout
        self.retries = retries

    def command_for(self, item: str, target: str | None = None) -> str:
        quoted = shlex.quote(item)
        command = self.command
        if target is not None:
            command = command.replace("{target}", shlex.quote(target))
        if "{item}" in command:
            return command.replace("{item}", quoted)
        return f"{command} {quoted}"

    def _attempt(self, item: str, target: str | None = None) -> float:
        cmd = self.command_for(item, target)
        try:
            done = subprocess.run(cmd, shell=True, capture_output=True, text=True,
                                  timeout=self.timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise EvaluationError(f"item {item!r}: command timed out after "
                                  f"{self.timeout:g}s") from None
        if done.returncode != 0:
            err = [ln for ln in done.stderr.splitlines() if ln.strip()]
            detail = f": {err[-1][:120]}" if err else ""
            raise EvaluationError(f"item {item!r}: command exited with status "
                                  f"{done.returncode}{detail}")
        lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
        if not lines:
            raise EvaluationError(f"item {item!r}: command printed nothing")
        try:
            return validate_score(lines[-1], f"item {item!r}: command answered")
        except DataError as exc:
            raise EvaluationError(str(exc)) from None

    def __call__(self, item: str, target: str | None = None) -> float:
        reason = ""
        for _ in range(self.retries + 1):
            try:
                return self._attempt(item, target)
            except EvaluationError as exc:
                reason = str(exc)
        raise EvaluationError(f"{reason} (after {self.retries + 1} attempt(s))")
