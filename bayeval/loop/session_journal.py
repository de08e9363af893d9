"""A Session's journal: what it writes (the header, each draw and score) and how it is read
back on resume (the draws, tells and skips replayed in their order, each checked).

:class:`SessionJournal` is the journal side of :class:`~bayeval.loop.session.Session`, on top
of the file handling every journal shares (:class:`~bayeval.records.journal.JournalFile`): the
Session builds its state, this module records and restores it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Self

import numpy as np

from bayeval.data.matrix import ScoreMatrix, validate_score
from bayeval.errors import JournalError
from bayeval.estimators.base import Draw
from bayeval.methods import Method
from bayeval.records.journal import JournalFile


class SessionJournal(JournalFile):
    """The records of a :class:`~bayeval.loop.session.Session` (module docstring); the state
    they read and write is the Session's."""

    def _header(self) -> dict[str, Any]:
        who = {"targets": self.target_ids} if self.several else {"target": self.target_id}
        return {
            **self._header_base(),
            **who,
            "method": {"name": self.method.name, "params": self.method.params},
            "seed": self.seed,
            "max_items": self.max_items,
            "extra": self.extra,
        }

    # ------------------------------------------------------------------ resume

    @classmethod
    def resume(cls, path: str | os.PathLike, reference: ScoreMatrix | None = None,
               method: Method | None = None) -> Self:
        """Rebuild a session from its journal and keep appending to it.

        ``reference`` defaults to what the header's ``source`` says (a bundled dataset or
        a file, minus held-out models); either way its fingerprint must match the one the
        journal was written for. ``method`` defaults to the registered method named in the
        header, with the recorded parameters.
        """
        path = Path(path)
        header, events, note, whole = cls.read_journal(path)
        cls._check_header(path, header)
        reference = cls._resume_reference(path, header, reference)
        session = cls.__new__(cls)
        m = header["method"]
        targets = header["targets"] if "targets" in header else header["target"]
        budget = header.get("max_items", header.get("max_evaluations"))
        session._setup(reference, targets, method or m["name"],
                       {} if method is not None else m["params"], header["seed"],
                       budget, header["reference"].get("source"), header.get("extra") or {})
        session._journal = None
        session._journal_path = None
        session._replay_journal(path, events, note, whole)
        return session

    def _replay(self, event: dict[str, Any], where: str) -> None:
        kind = event.get("event")
        if kind == "budget":  # a budget given on a resume: the latest one holds
            budget = event.get("max_items")
            self.max_items = None if budget is None else _count(budget, "budget", where)
            return
        if kind == "reask":  # asks of an earlier process sent again after its resume
            self._reasked += _count(event.get("count"), "re-ask count", where)
            return
        with self._record_errors(where):
            item = str(event["item"])
            target = event.get("target") if self.several else None
            c = self.cells.cell(item, target, where)
            if kind == "ask":
                self._replay_ask(event, c, where)
            elif kind == "tell":
                if self._observed[c] and not self.method.with_replacement:
                    raise JournalError(f"{where}: {self.cells.name(c)} recorded twice")
                if event.get("n") != self._told + 1:
                    raise JournalError(f"{where}: observation number {event.get('n')} out of "
                                       f"sequence (expected {self._told + 1})")
                score = validate_score(event["score"], where)
                if "order" in event:
                    self._arrive(c, ("tell", score), event["order"], where)
                else:  # a tell applied at once (no ask recorded: an older journal)
                    self._told += 1
                    self._apply_tell(c, score, self._replayed_draw(event, c, where))
            elif kind == "skip":
                reason = str(event.get("reason", ""))
                if "order" in event:
                    self._arrive(c, ("skip", reason), event["order"], where)
                else:
                    self._apply_skip(c, reason)
            else:
                raise JournalError(f"{where}: unknown event {kind!r}")

    def _replay_ask(self, event: dict[str, Any], c: int, where: str) -> None:
        """Restore a journaled draw: the next round, with its recorded probability."""
        if not self._streams:
            raise JournalError(f"{where}: {self.method.name} records no asks")
        if event.get("order") != len(self._rounds):
            raise JournalError(f"{where}: draw number {event.get('order')} out of sequence "
                               f"(expected {len(self._rounds)})")
        if self._observed[c] or self._pending[c] or self._skipped[c]:
            raise JournalError(f"{where}: {self.cells.name(c)} drawn twice")
        q = event.get("q", float("nan"))
        if not isinstance(q, int | float) or not (math.isnan(q) or 0.0 < q <= 1.0 + 1e-9):
            raise JournalError(f"{where}: draw probability {q!r} is not in (0, 1]")
        design = event.get("design", float("nan"))
        if not isinstance(design, int | float):
            raise JournalError(f"{where}: the draw's design statistic {design!r} is not a "
                               "number")
        self._add_round(c, float(q), float(design))
        self._reissue.append(c)
        call = event.get("call")
        if isinstance(call, int) and call >= self._calls:
            self._calls = call + 1
            self.ask_calls_replayed = self._calls

    def set_budget(self, max_items: int | None) -> None:
        """Stop after ``max_items`` observations from now on (None: no budget), journaled
        so that a later resume keeps it (``--resume --max-items N``)."""
        if max_items is not None and max_items < 1:
            raise JournalError(f"max_items must be ≥ 1, got {max_items}")
        self._append({"event": "budget", "max_items": max_items})
        self.max_items = max_items

    def _ask_record(self, c: int, q: float, design: float) -> dict[str, Any]:
        return {"event": "ask", "order": len(self._rounds), "call": self._calls,
                **self._target_field(c), "item": str(self.reference.items[c % self.n_items]),
                **_draw_fields(q, design)}

    def _record_tell(self, c: int, score: float, draw: Draw, **extra: Any) -> None:
        """Journal (fsync) the score at position ``c`` and how it was drawn (its
        :class:`~bayeval.estimators.base.Draw` as numbers; NaN: not drawn by the policy,
        or no design statistic), then apply it."""
        self._told += 1
        record = {"event": "tell", "n": self._told, **self._target_field(c),
                  "item": str(self.reference.items[c % self.n_items]), "score": score,
                  **_draw_fields(*draw)}
        self._append({**record, **extra})
        self._apply_tell(c, score, draw)

    def _replayed_draw(self, event: dict[str, Any], c: int, where: str) -> Draw:
        """How a replayed tell was drawn: the recorded (q, design), else (a journal written
        without them) the policy's single draw from the current state, which is the one
        it was drawn with when asks are one item at a time."""
        if "q" in event:
            q = event["q"]
            if not isinstance(q, int | float) or not 0.0 < q <= 1.0 + 1e-9:  # float rounding
                raise JournalError(f"{where}: draw probability {q!r} is not in (0, 1]")
            design = event.get("design", float("nan"))
            if self.method.estimator.design is not None and not (
                    isinstance(design, int | float) and math.isfinite(design)):
                raise JournalError(f"{where}: the draw's design statistic {design!r} is "
                                   f"missing or not a number ({self.method.name} needs it)")
            return Draw(float(q), float(design))
        if not self._needs_draws:
            return Draw(float("nan"), float("nan"))
        available = (np.ones(self._observed.size, bool) if self.method.with_replacement
                     else ~(self._observed | self._skipped))
        draw = self.method.probability(self._loop, available, np.int32(c))
        return Draw(float(draw.q), float(draw.design))


def _draw_fields(q: float, design: float) -> dict[str, float]:
    """How an item was drawn, as a journal record keeps it: its probability ``q`` and
    the estimator's ``design`` statistic, each only where known (finite)."""
    return {name: float(value) for name, value in (("q", q), ("design", design))
            if np.isfinite(value)}


def _count(value: Any, what: str, where: str) -> int:
    """A journal record's count: a whole number ≥ 1, else a JournalError naming it."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise JournalError(f"{where}: {what} {value!r} is not a whole number ≥ 1")
    return value


__all__ = ["SessionJournal"]
