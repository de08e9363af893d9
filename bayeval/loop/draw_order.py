"""Rounds in draw order (docs/methods.md §9 "Batches" and "Streaming"): a Session whose
draws are without replacement numbers its draws (items, or (target, item) cells); the
scores may arrive in any order, and a design-based estimate applies the rounds in draw
order, each once every earlier round is answered (each round's estimate then reads only
the past), while a model-based one applies each score as it arrives.

:class:`DrawOrder` is that bookkeeping of :class:`~bayeval.loop.session.Session`: the rounds
drawn, their draws, the answers held back, and the head of the order applied so far.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bayeval.errors import JournalError, SessionError
from bayeval.estimators.base import Draw


class DrawOrder:
    """The draw-order part of a :class:`~bayeval.loop.session.Session` (module docstring)."""

    def _start_rounds(self, n: int) -> None:
        """The bookkeeping of a fresh session with ``n`` positions."""
        self._pending = np.zeros(n, bool)  # asked, not yet applied (in flight or told)
        # how each pending item was drawn: (q, design) of its Draw
        self._pending_draw = np.full((n, 2), np.nan)
        # every asked position is a round in draw order; its score is journaled when it
        # arrives and applied once every earlier round's has, so each round's estimate
        # reads only the past (draws without repeats)
        self._rounds: list[int] = []  # cells in draw order
        self._order_of: dict[int, int] = {}  # cell → its place in the draw order
        self._applied_rounds = 0  # with draw-order application: the prefix applied
        self._arrived: dict[int, tuple[str, Any]] = {}  # cell → ("tell", s) | ("skip", why)
        self._reissue: list[int] = []  # rounds asked before a resume and not yet answered
        self._reasked = 0  # of those, the ones asked again (run twice by the evaluator)

    @property
    def _streams(self) -> bool:
        """Whether asks are rounds in a draw order (draws without replacement, of one
        target or several): their scores are applied in that order, whenever they
        arrive."""
        return not self.method.with_replacement

    def _add_round(self, c: int, q: float, design: float) -> None:
        self._pending[c] = True
        self._pending_draw[c] = (q, design)
        self._order_of[c] = len(self._rounds)
        self._rounds.append(c)

    def _answer_round(self, c: int, answer: tuple[str, Any], record: dict[str, Any],
                      draw_fields: dict[str, Any] | None = None) -> None:
        """Journal ``record``, the answer to round ``c`` (its place in the draw order and
        then ``draw_fields`` added), and take the answer (:meth:`_arrive`)."""
        where = answer[0]
        if c in self._arrived:
            done = "told" if where == "tell" else "answered"
            raise SessionError(f"{where}: {self.cells.name(c)} was already {done}")
        order = self._order_of[c]
        self._append({**record, "order": order, **(draw_fields or {})})
        self._arrive(c, answer, order, where)

    def _arrive(self, c: int, answer: tuple[str, Any], order: Any, where: str) -> None:
        """Take the answer of the round ``order`` (cell ``c``). A design-based estimate
        keeps it until every earlier round is answered and applies the rounds in draw
        order (each round's estimate then reads only the past); a model-based one applies
        it at once."""
        if (not isinstance(order, int) or not 0 <= order < len(self._rounds)
                or self._rounds[order] != c):
            raise JournalError(f"{where}: {self.cells.name(c)} was not drawn as round "
                               f"{order!r}")
        if c in self._arrived or not self._pending[c]:
            raise JournalError(f"{where}: {self.cells.name(c)} answered twice")
        if answer[0] == "tell":
            self._told += 1
        if c in self._reissue:
            self._reissue.remove(c)
        if not self._needs_draws:
            self._apply_round(c, answer)
            return
        self._arrived[c] = answer
        self._drain()

    def _apply_round(self, c: int, answer: tuple[str, Any]) -> None:
        if answer[0] == "tell":
            self._apply_tell(c, answer[1], Draw(*map(float, self._pending_draw[c])))
        else:
            self._apply_skip(c, answer[1])

    def _drain(self) -> None:
        """Apply the answered rounds at the head of the draw order. After the stop no
        round is drawn, and the rounds drawn before it (the rest of a batch, the
        evaluations in flight) are still applied as their scores arrive: every scored
        draw enters the estimate, as in the simulator (docs/methods.md §9 "Batches")."""
        while self._applied_rounds < len(self._rounds):
            c = self._rounds[self._applied_rounds]
            answer = self._arrived.pop(c, None)
            if answer is None:
                return
            self._applied_rounds += 1
            self._apply_round(c, answer)

    def _draw(self, available: np.ndarray, counter: int) -> tuple[int, float, float]:
        """One draw with the key of place ``counter`` in the draw order (the method's
        :meth:`~bayeval.methods.Method.ask`, jitted): (position, q, design)."""
        chosen, draws = self.method.select(self._loop, available, self._key,
                                           np.uint32(counter), 1)
        return (int(np.asarray(chosen)[0]), float(np.asarray(draws.q)[0]),
                float(np.asarray(draws.design)[0]))

    def _draw_rounds(self, available: np.ndarray, k: int) -> list:
        """Draw ``k`` rounds one after another, each without the items drawn before it,
        and journal them in one write."""
        records, asked = [], []
        for _ in range(k):
            # the draw's key: its place in the draw order (the applied events and the
            # rounds outstanding), as the simulator's
            c, q, design = self._draw(available, self._n_events + int(self._pending.sum()))
            records.append(self._ask_record(c, q, design))
            self._add_round(c, q, design)
            available[c] = False
            asked.append(self.cells.asked(c))
        self._append_many(records)
        self._calls += 1
        return asked

    def _draw_with_replacement(self) -> list:
        """One item per round (the policy changes after every round). A draw of an item
        already scored is a round too: it is recorded at once with the known score (a
        journaled ``tell`` marked ``repeat``) and the next round is drawn."""
        pending = np.flatnonzero(self._pending)
        if pending.size:
            return [self.cells.asked(pending[0])]
        everything = np.ones(self._observed.size, bool)
        while not self.done:
            j, q, design = self._draw(everything, self._n_events)
            if not self._observed[j]:
                self._pending[j] = True
                self._pending_draw[j] = (q, design)
                return [self.cells.asked(j)]
            self._record_tell(j, float(self._scores[j]), Draw(q, design), repeat=True)
        return []

    def outstanding(self) -> list:
        """The items asked and not yet told or skipped, in draw order."""
        return [self.cells.asked(c) for c in self._rounds
                if self._pending[c] and c not in self._arrived]


__all__ = ["DrawOrder"]
