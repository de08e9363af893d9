"""Where a score goes: the positions of a run's items, by name.

One target's positions are the benchmark's items 0 … N − 1. A method that evaluates T
targets jointly (``several_targets``, :mod:`bayeval.methods.multi_target`) has positions
for (target, item) cells ``t · N + i``. :class:`Cells` turns the names a user gives
(``tell(item, score, target=...)``) into positions and back, with one-line errors that
name what is wrong and where.
"""

from __future__ import annotations

from collections.abc import Sequence

from bayeval.data.matrix import ScoreMatrix
from bayeval.errors import DataError, SessionError


class Cells:
    """The positions of a run of ``targets`` (one name, or a list of names for a joint
    method) on ``reference``'s items. Targets must be distinct and none may be a reference
    model."""

    def __init__(self, reference: ScoreMatrix, targets: str | Sequence[str]) -> None:
        several = not isinstance(targets, str)
        ids = [str(t) for t in targets] if several else [str(targets)]
        if not ids:
            raise SessionError("give at least one target")
        if len(set(ids)) != len(ids):
            raise SessionError(f"targets must be distinct, got {ids}")
        clash = sorted(set(ids) & set(reference.models))
        if clash:
            what = f"target {clash[0]!r} is" if len(clash) == 1 else f"targets {clash} are"
            raise SessionError(f"{what} also a reference model in {reference.name}; hold "
                               "it out first (ScoreMatrix.split)")
        self.reference = reference
        self.target_ids = ids
        self.several = several
        self._index = {t: k for k, t in enumerate(ids)}

    @property
    def n_items(self) -> int:
        return self.reference.n_items

    @property
    def size(self) -> int:
        """The number of positions, T · N."""
        return len(self.target_ids) * self.n_items

    def target(self, target: str | None, where: str) -> int:
        """The index of ``target`` (the one target when None and there is one)."""
        if target is None:
            if self.several:
                raise SessionError(f"{where}: name the target (one of {self.target_ids})")
            return 0
        if str(target) not in self._index:
            raise SessionError(f"{where}: {target!r} is not one of the targets "
                               f"{self.target_ids}")
        return self._index[str(target)]

    def cell(self, item: str, target: str | None, where: str) -> int:
        """The position of ``item`` (of ``target``, with several targets)."""
        try:
            j = self.reference.item_index(item)
        except DataError:
            raise SessionError(f"{where}: item {item!r} is not in the benchmark "
                               f"{self.reference.name}") from None
        if not self.several:
            if target is not None and str(target) != self.target_ids[0]:
                raise SessionError(f"{where}: {target!r} is not the target "
                                   f"{self.target_ids[0]!r}")
            return j
        if target is None:
            raise SessionError(f"{where}: name the target of item {item!r} (target=, one "
                               f"of {self.target_ids})")
        return self.target(target, where) * self.n_items + j

    def split(self, c: int) -> tuple[str, str]:
        """(target, item id) of position ``c``."""
        t, j = divmod(int(c), self.n_items)
        return self.target_ids[t], str(self.reference.items[j])

    def name(self, c: int) -> str:
        """``item 'x'``, or ``'t' on item 'x'`` with several targets (for messages)."""
        target, item = self.split(c)
        return f"{target!r} on item {item!r}" if self.several else f"item {item!r}"

    def asked(self, c: int) -> str | tuple[str, str]:
        """What ``ask`` returns for position ``c``: the item id, or (target, item)."""
        target, item = self.split(c)
        return (target, item) if self.several else item
