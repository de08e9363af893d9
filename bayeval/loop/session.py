"""The ask/tell loop for real evaluations, journaled so that a crash loses nothing.

::

    session = Session(reference, "my-new-model", "random", journal="run.jsonl")
    while not session.done:
        for item in session.ask():
            session.tell(item, run_my_model_on(item))
    value, lower, upper = session.estimate()

Every draw (``ask``, with its place in the draw order and its probability), every
``tell`` (with the order it arrived in) and every ``skip`` of an item that could not be
evaluated is appended to the journal as one JSON line and ``fsync``-ed before the call
returns. The journal's first line is a header naming the reference matrix (by fingerprint
and, where known, by how to load it), the target, the method with its parameters, and the
seed. :meth:`Session.resume` replays the journal and rebuilds the state exactly: item
choices depend only on the seed and on the draw order, and the items drawn but not yet
answered are asked again first, so a resumed run continues as the uninterrupted one would
have. A crash mid-write leaves at most an incomplete last line; resume keeps every whole
line, reports the rest and cuts it off.

Scores may arrive in any order (several evaluations in flight, docs/methods.md §9
"Streaming"): a design-based estimate applies the rounds in draw order, each once every
earlier round's score is in, and the next draw reads the rounds applied so far; a
model-based one applies each score as it arrives. ``run(evaluator, concurrency=K)`` keeps
K evaluations in flight.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bayeval.data.matrix import ScoreMatrix, validate_score
from bayeval.data.sources import load_reference, load_source_matrix
from bayeval.errors import SessionError
from bayeval.estimators.base import Draw
from bayeval.estimators.domain import DomainCheck, check_observed
from bayeval.estimators.interval import clip_interval
from bayeval.inference.base import RefitWarning, refit_failure
from bayeval.loop.cells import Cells
from bayeval.loop.draw_order import DrawOrder
from bayeval.loop.runner import run_session
from bayeval.loop.session_journal import SessionJournal, _draw_fields
from bayeval.loop.timing import RunTimes
from bayeval.methods import Method, make_method
from bayeval.precision import enable_float64
from bayeval.records.journal import JournalFile, JournalWarning, PairJournal

__all__ = ["JournalFile", "JournalWarning", "PairJournal", "RefitWarning", "Session",
           "load_reference", "load_source_matrix"]

# The re-fit key of the n-th observation, compiled: eager fold_in dispatches several
# primitives (0.5 ms against 0.1 ms a step); the keys are the same.
_fold_in = jax.jit(jax.random.fold_in)

class Session(SessionJournal, DrawOrder):
    """An active evaluation of one target model, or of several jointly, against a
    reference matrix.

    Parameters
    ----------
    reference: the reference models' scores (no target may be one of them).
    target_id: a name for the model being evaluated, or a list of names for a method
        that evaluates several targets jointly (``bayesame-joint``). With several targets
        :meth:`ask` returns (target, item) pairs and ``tell`` / ``skip`` / ``estimate``
        take ``target=``.
    method: a :class:`~bayeval.methods.Method` or the name of a registered one.
    method_params: parameters for a method given by name (e.g. ``{"epsilon": 0.05}``).
    seed: seeds every random choice; equal seeds and answers give equal runs.
    journal: path of the JSON-lines journal (``None``: keep nothing on disk). It must not
        exist yet; use :meth:`resume` to continue one.
    max_items: stop after this many observations (of all targets) whatever the stopping
        rule says.
    reference_source: how to load the reference again on resume, recorded in the header:
        ``{"dataset": name}`` or ``{"path": file}``, optionally with ``"held_out": [ids]``.
    extra: free JSON data stored in the header (the CLI keeps its evaluator settings here).

    After each tell, ``history`` gets (n, estimate, lower, upper), or with several targets
    (n, target, estimate, lower, upper) of the target told; ``stopped_at`` holds, per
    target, the observation count at which its stopping rule was met (0: not yet).
    """

    def __init__(self, reference: ScoreMatrix, target_id: str | Sequence[str],
                 method: Method | str = "random", *,
                 method_params: dict[str, Any] | None = None, seed: int = 0,
                 journal: str | os.PathLike | None = None, max_items: int | None = None,
                 reference_source: dict[str, Any] | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        self._setup(reference, target_id, method, dict(method_params or {}), int(seed),
                    max_items, reference_source, dict(extra or {}))
        self._journal_path: Path | None = None
        self._journal = None
        self._start_journal(journal)

    # ------------------------------------------------------------------ construction
    def _setup(self, reference: ScoreMatrix, target_id: str | Sequence[str],
               method: Method | str, method_params: dict[str, Any], seed: int,
               max_items: int | None, reference_source: dict[str, Any] | None,
               extra: dict[str, Any]) -> None:
        if not isinstance(reference, ScoreMatrix):
            raise SessionError("reference must be a bayeval.data.ScoreMatrix")
        enable_float64()  # bayeval computes in float64 (bayeval.precision): no set-up call
        self.cells = cells = Cells(reference, target_id)
        several, ids = cells.several, cells.target_ids
        if isinstance(method, str):
            method = make_method(method, **method_params)
        elif method_params:
            raise SessionError("method_params is only for a method given by name")
        if several and not method.several_targets:
            raise SessionError(f"method {method.name!r} evaluates one target; give one "
                               "name, or use bayesame-joint for several")
        if max_items is not None and max_items < 1:
            raise SessionError(f"max_items must be ≥ 1, got {max_items}")
        self.reference = reference
        self.target_ids = ids
        self.several = several
        self.target_id = None if several else ids[0]
        self.method = method
        self.seed = seed
        self.max_items = max_items
        self.reference_source = reference_source
        self.extra = extra
        self._key = jax.random.key(seed)
        self._refit_key = method.refit_key(self._key)
        n = cells.size  # positions: cells t · N + i
        self._loop = method.init(reference.scores, reference.n_items, self._key, len(ids))
        self._stop = np.zeros(len(ids) if several else (), bool)
        self.stopped_at = np.zeros(len(ids), np.int64)  # observations when each stopped
        self._observed = np.zeros(n, bool)
        self._skipped = np.zeros(n, bool)
        self._start_rounds(n)
        self._told = 0  # tell records journaled (their "n")
        self._calls = 0  # ask calls that drew (their "call")
        self.ask_calls_replayed = 0  # of those, the ones replayed from a journal
        self._scores = np.full(n, np.nan)
        self._n_events = 0
        self.observations: list[tuple] = []
        self._predicted: list[tuple[int, float]] = []  # (cell, its score's prediction)
        self.skipped: list[tuple] = []
        self.history: list[tuple] = []
        self.refits: list[dict[str, Any]] = []
        self.notes: list[str] = []

    # ------------------------------------------------------------------ ask / tell
    @property
    def n_items(self) -> int:
        return self.reference.n_items

    @property
    def n_observed(self) -> int:
        return len(self.observations)

    def _available(self) -> np.ndarray:
        return ~(self._observed | self._skipped | self._pending)

    @property
    def done(self) -> bool:
        """True once the stopping rule fired (for every target), the budget is spent or
        no item is left: nothing more is drawn. Items drawn before the stop and not yet
        told are still applied when told (the rest of a batch, evaluations in flight)."""
        return self.stop_reason is not None

    @property
    def stop_reason(self) -> str | None:
        """Why the session is done, or None while it is not."""
        rule = self.method.stopping.name
        if np.all(self._stop):
            return f"every target met {rule}" if self.several else f"stopping rule {rule}"
        if self.max_items is not None and self.n_observed >= self.max_items:
            return f"budget of {self.max_items} items"
        left = ~(self._observed | self._skipped)
        if not self.method.with_replacement and not left.any():
            return "every item evaluated or skipped"
        if self.several and np.all(self._stop | ~left.reshape(len(self.target_ids), -1)
                                   .any(1)):
            return f"every target met {rule} or has no item left"
        return None

    def ask(self, k: int = 1) -> list:
        """Up to ``k`` item ids to evaluate next (none once :attr:`done`); with several
        targets, (target, item) pairs.

        Items are drawn one after another, each from the state that the scores applied so
        far give, with the items already asked removed (docs/methods.md §9 "Batches" and
        "Streaming"): ask again while earlier items are still being evaluated and the
        next draw reads every score told by then. Asked items are held back from later
        asks until told or skipped. Each draw is journaled (its item, its target with
        several, its place in the draw order and its probability) before ``ask``
        returns, so that a resumed session asks exactly the items still unanswered,
        first. Several targets are asked one (target, item) pair at a time.
        """
        if k < 1:
            raise SessionError(f"ask(k) needs k ≥ 1, got {k}")
        if self.several and k > 1:
            raise SessionError(f"ask(k): {self.method.name} asks one (target, item) pair "
                               f"at a time, not {k}")
        if self.method.with_replacement:
            return self._draw_with_replacement()
        again = [self.cells.asked(c) for c in self._reissue[:k]]
        del self._reissue[:len(again)]
        if again:  # sent to the model a second time: journaled, so the cost adds up
            self._reasked += len(again)
            self._append({"event": "reask", "count": len(again)})
        if again or self.done:
            return again
        available = self._available()
        if self.max_items is not None:
            k = min(k, self.max_items - self.n_observed - int(self._pending.sum()))
        k = min(k, int(available.sum()))
        if k <= 0:
            return []
        return self._draw_rounds(available, k)

    @property
    def unanswered(self) -> int:
        """Items asked before a resume whose scores the journal does not hold: the next
        :meth:`ask` returns them first."""
        return len(self._reissue)

    @property
    def documents_rerun(self) -> int:
        """Asks sent to the evaluator again after a resume, their first run's score never
        journaled (the process was killed or interrupted while they ran)."""
        return self._reasked

    @property
    def documents_sent(self) -> int:
        """Every document sent to the evaluator over the journal's life: :attr:`n_drawn`
        plus :attr:`documents_rerun` (what the model was asked to run, the user's
        cost)."""
        return self.n_drawn + self._reasked

    @property
    def n_drawn(self) -> int:
        """Items asked so far (drawn and sent to evaluation), whether or not their scores
        are in or were applied before the stop."""
        return len(self._rounds) if self._streams else self.n_evaluated + int(
            self._pending.sum())

    @property
    def n_evaluated(self) -> int:
        """Distinct items (cells, with several targets) scored; below :attr:`n_observed`
        when draws repeat items."""
        return int(self._observed.sum())

    def items_used(self, target: str | None = None) -> int:
        """Items scored or skipped for ``target`` (the one target by default)."""
        t = self.cells.target(target, "items_used")
        rows = (self._observed | self._skipped).reshape(len(self.target_ids), -1)
        return int(rows[t].sum())

    def tell(self, item: str, score: float, *, target: str | None = None) -> None:
        """Record the target's score on ``item`` (``target``'s, with several targets):
        journaled (fsync) before it returns. Asked items may be told in any order; a
        design-based estimate applies their scores in the order they were drawn."""
        item = str(item)
        c = self.cells.cell(item, target, "tell")
        if self._needs_draws and not self._pending[c]:
            raise SessionError(f"tell: item {item!r} was not asked; {self.method.name} "
                               "needs the score of the item it drew (its estimate weighs "
                               "each score by the draw's probability)")
        if self._observed[c]:
            raise SessionError(f"tell: {self.cells.name(c)} was already observed")
        score = validate_score(score, f"tell: {self.cells.name(c)}")
        if self._streams and self._pending[c]:
            return self._answer_round(
                c, ("tell", score), {"event": "tell", "n": self._told + 1,
                                     **self._target_field(c), "item": item, "score": score},
                _draw_fields(*self._pending_draw[c]))
        draw = Draw(*map(float, self._pending_draw[c]))  # NaN unless c is pending
        self._record_tell(c, score, draw)

    def _tell_args(self, args: tuple[str, ...], score: float) -> None:
        self.tell(args[-1], score, target=args[0] if self.several else None)

    def _skip_args(self, args: tuple[str, ...], reason: str) -> None:
        self.skip(args[-1], reason, target=args[0] if self.several else None)

    @property
    def _needs_draws(self) -> bool:
        """Whether every score must come from an asked item (a design-based estimate, or
        sampling with replacement)."""
        return self.method.with_replacement or self.method.estimator.needs_probabilities

    def skip(self, item: str, reason: str, *, target: str | None = None) -> None:
        """Leave ``item`` (of ``target``, with several targets) unevaluated (its evaluation
        failed); journaled, never asked again."""
        item = str(item)
        c = self.cells.cell(item, target, "skip")
        if self._needs_draws:
            raise SessionError(f"skip: {self.method.name} cannot leave item {item!r} "
                               "unevaluated: its estimate needs the score of every drawn "
                               "item; retry the evaluation or score the failure")
        if self._observed[c]:
            raise SessionError(f"skip: {self.cells.name(c)} was already observed")
        record = {"event": "skip", **self._target_field(c), "item": item, "reason": reason}
        if self._streams and self._pending[c]:
            return self._answer_round(c, ("skip", reason), record)
        self._append(record)
        self._apply_skip(c, reason)

    def _target_field(self, c: int) -> dict[str, str]:
        """A journal record's ``target`` of position ``c`` (none with one target)."""
        return {"target": self.target_ids[c // self.n_items]} if self.several else {}

    def _apply_tell(self, c: int, score: float, draw: Draw) -> None:
        n = self.n_observed + 1
        self._predicted.append((c, float(np.asarray(self._loop.prediction.item_mean)
                                         .reshape(-1)[c])))
        self._loop, stop, info = self.method.step(
            self._loop, np.int32(c), np.float64(score), Draw(*map(np.float64, draw)),
            np.float64(n),
            _fold_in(self._refit_key, n))
        stop = np.asarray(stop)
        self.stopped_at[(np.atleast_1d(stop) & ~np.atleast_1d(self._stop))] = n
        # rounds drawn before a stop are applied after it: the stop holds
        self._stop = stop | self._stop if self._streams else stop
        if bool(info.refitted):
            self.refits.append(info.refit_record(n))
            if not self.refits[-1]["accepted"]:
                self.notes.append(refit_failure(self.refits[-1]))
                warnings.warn(self.notes[-1], RefitWarning, stacklevel=3)
        self._observed[c] = True
        self._scores[c] = score
        self._pending[c] = False
        self._pending_draw[c] = np.nan
        self._skipped[c] = False
        self._n_events += 1
        target, item = self.cells.split(c)
        if self.several:
            self.observations.append((target, item, score))
            self.history.append((n, target, *self.estimate(target)))
        else:
            self.observations.append((item, score))
            self.history.append((n, *self.estimate()))

    def _apply_skip(self, c: int, reason: str) -> None:
        self._skipped[c] = True
        self._pending[c] = False
        self._pending_draw[c] = np.nan
        self._n_events += 1
        self._loop = self.method.skip(self._loop, np.int32(c))
        target, item = self.cells.split(c)
        self.skipped.append((target, item, reason) if self.several else (item, reason))

    # ------------------------------------------------------------------ results
    def estimate(self, target: str | None = None) -> tuple[float, float, float]:
        """(estimate, lower, upper): the estimator's estimate of R and its
        ``method.level`` interval, clipped to [0, 1] (of ``target``, with several)."""
        t = self.cells.target(target, "estimate")
        est = self._loop.estimate
        if self.several:
            est = jax.tree_util.tree_map(lambda x: x[t], est)
        lower, upper = clip_interval(est.lower, est.upper)
        return float(est.value), lower, upper

    @property
    def width(self) -> float:
        """The interval's width as the stopping rule reads it (unclipped; with several
        targets the widest): what the plan's revision compares with its stand-ins'
        widths, which the simulator reads unclipped too."""
        est = self._loop.estimate
        return float(np.max(np.asarray(est.upper - est.lower)))

    def estimates(self) -> dict[str, tuple[float, float, float]]:
        """{target: (estimate, lower, upper)} for every target."""
        if not self.several:
            return {self.target_id: self.estimate()}
        return {t: self.estimate(t) for t in self.target_ids}

    def domain_check(self) -> DomainCheck | None:
        """Whether the reference models explain the target's scores so far
        (:mod:`bayeval.estimators.domain`), for a method whose interval rests on them;
        None for a design-based one or several targets."""
        if self.several or not self.method.estimator.model_based:
            return None
        return check_observed(self.reference.scores, self._scores, self._predicted,
                              self._loop.estimate)

    @property
    def prediction(self):
        """The backend's current posterior summary."""
        return self._loop.prediction

    @property
    def state(self):
        """The backend's current state (for the exact backend: the bucket posterior)."""
        return self._loop.backend

    @property
    def loop(self):
        """The whole loop state (backend, estimator and stopping states, prediction,
        estimate): :class:`~bayeval.methods.base.LoopState`."""
        return self._loop

    def run(self, evaluator: Callable[..., float], batch: int | Callable[[Any], int] = 1,
            on_step: Callable[..., None] | None = None,
            max_failures: int | None = None,
            concurrency: int = 1) -> tuple[float, float, float] | dict:
        """Ask, evaluate and tell until done: ``evaluator(item)``, or
        ``evaluator(target, item)`` with several targets (whose result is then
        :meth:`estimates`). An item whose evaluation raises :class:`EvaluationError` is
        skipped with the reason journaled, never scored; ``max_failures`` failures in a
        row stop the run with :class:`EvaluatorFailedError`. An evaluator with
        ``evaluate_batch(items)`` (:mod:`bayeval.evaluators.harness`) gets each batch of ``batch``
        asked items in one call; ``batch`` may be a function of the session that gives
        each call's size (:class:`bayeval.evaluation.plan.CallSizes`), or with
        ``concurrency`` the rounds that may be drawn ahead of those applied now
        (:func:`bayeval.loop.call_sizes.ahead_allowed`).

        ``concurrency`` K > 1 keeps K evaluations in flight, each in a thread: when one
        finishes its score is told and the next item is asked from the latest state
        (docs/methods.md §9 "Streaming"), so a slow item never holds the others back. At the
        stop nothing more is drawn; the evaluations in flight are waited for and their
        scores enter the estimate, as the rest of a batch does (§9 "Batches"), so that
        every evaluation run is used. On an error or an interruption those in flight are
        abandoned (an evaluator with ``cancel()`` is asked to end them). :attr:`times`
        says where the time went."""
        if concurrency < 1:
            raise SessionError(f"concurrency must be ≥ 1, got {concurrency}")
        if concurrency > 1 and not self._streams:
            raise SessionError(f"{self.method.name} evaluates one item at a time; "
                               "concurrency > 1 needs a method that draws without "
                               "replacement for one target")
        run_session(self, evaluator, batch, on_step, max_failures, concurrency)
        return self.estimates() if self.several else self.estimate()

    @functools.cached_property
    def times(self) -> RunTimes:
        """Where the time of :meth:`run` went (:class:`~bayeval.loop.timing.RunTimes`)."""
        return RunTimes()
