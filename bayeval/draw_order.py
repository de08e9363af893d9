"""Rounds in draw order (METHODS.md §9 "Batches" and "Streaming"): a Session with one
target and draws without replacement numbers its draws; the scores may arrive in any
order, and a design-based estimate applies the rounds in draw order, each once every
earlier round is answered (each round's estimate then reads only the past), while a
model-based one applies each score as it arrives.

:class:`DrawOrder` is that bookkeeping of :class:`~bayeval.session.Session`: the rounds
drawn, their draws, the answers held back, and the head of the order applied so far.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bayeval.errors import JournalError
from bayeval.estimators.base import Draw


class DrawOrder:
    """The draw-order part of a :class:`~bayeval.session.Session` (module docstring)."""

    def _add_round(self, c: int, q: float, design: float) -> None:
        self._pending[c] = True
        self._pending_draw[c] = (q, design)
        self._order_of[c] = len(self._rounds)
        self._rounds.append(c)

    def _arrive(self, c: int, answer: tuple[str, Any], order: Any, where: str) -> None:
        """Take the answer of the round ``order`` (cell ``c``). A design-based estimate
        keeps it until every earlier round is answered and applies the rounds in draw
        order (each round's estimate then reads only the past); a model-based one applies
        it at once."""
        if (not isinstance(order, int) or not 0 <= order < len(self._rounds)
                or self._rounds[order] != c):
            raise JournalError(f"{where}: {self._name(c)} was not drawn as round {order!r}")
        if c in self._arrived or not self._pending[c]:
            raise JournalError(f"{where}: {self._name(c)} answered twice")
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
        """Apply the answered rounds at the head of the draw order, until the stopping
        rule fires: the estimate is the one at the stop (scores that arrive later stay
        in the journal, unapplied), as in the simulator."""
        while self._applied_rounds < len(self._rounds) and not np.all(self._stop):
            c = self._rounds[self._applied_rounds]
            answer = self._arrived.pop(c, None)
            if answer is None:
                return
            self._applied_rounds += 1
            self._apply_round(c, answer)



    def outstanding(self) -> list:
        """The items asked and not yet told or skipped, in draw order."""
        return [self._asked_form(c) for c in self._rounds
                if self._pending[c] and c not in self._arrived]




__all__ = ["DrawOrder"]
