"""The ask/tell loop for several target models evaluated jointly, journaled.

::

    session = JointSession(reference, ["ckpt-1000", "ckpt-2000", "ckpt-3000"],
                           journal="family.jsonl")
    while not session.done:
        target, item = session.ask()
        session.tell(target, item, run_model_on(target, item))
    session.estimates()   # {target: (estimate, lower, upper)}

Multi-target BayesAME (:mod:`bayeval.methods.multi_target`) chooses the (target, item) pairs.
The journal has the format of :class:`~bayeval.session.Session`'s (a header line, then one
fsync-ed JSON line per ``tell`` or ``skip``); :meth:`JointSession.resume` replays it, and
the run continues exactly as the uninterrupted one would have.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bayeval.data.matrix import ScoreMatrix
from bayeval.errors import DataError, JournalError, SessionError
from bayeval.methods.multi_target import JointRun, make_joint
from bayeval.session import PairJournal

METHOD_NAME = "bayesame-joint"


class JointSession(PairJournal):
    """An active joint evaluation of several target models against a reference matrix.

    Parameters
    ----------
    reference: the reference models' scores (no target may be one of them).
    target_ids: names of the models evaluated jointly.
    params: settings of :class:`~bayeval.methods.multi_target.JointBayesAME` (e.g.
        ``{"epsilon": 0.02}``).
    seed: seeds every random choice.
    journal: path of the JSON-lines journal (must not exist; see :meth:`resume`).
    max_evaluations: stop after this many scores in all.
    reference_source, extra: recorded in the header, as for
        :class:`~bayeval.session.Session`.
    """

    pair_field = "target"

    def __init__(self, reference: ScoreMatrix, target_ids: Sequence[str],
                 params: dict[str, Any] | None = None, *, seed: int = 0,
                 journal: str | os.PathLike | None = None,
                 max_evaluations: int | None = None,
                 reference_source: dict[str, Any] | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        self._setup(reference, [str(t) for t in target_ids], dict(params or {}), int(seed),
                    max_evaluations, reference_source, dict(extra or {}))
        self._start_journal(journal)

    def _setup(self, reference: ScoreMatrix, target_ids: list[str], params: dict[str, Any],
               seed: int, max_evaluations: int | None,
               reference_source: dict[str, Any] | None, extra: dict[str, Any]) -> None:
        if not isinstance(reference, ScoreMatrix):
            raise SessionError("reference must be a bayeval.data.ScoreMatrix")
        if len(target_ids) < 1:
            raise SessionError("give at least one target")
        if len(set(target_ids)) != len(target_ids):
            raise SessionError(f"targets must be distinct, got {target_ids}")
        clash = sorted(set(target_ids) & set(reference.models))
        if clash:
            raise SessionError(f"target(s) {clash} are also reference models in "
                               f"{reference.name}; hold them out first")
        if max_evaluations is not None and max_evaluations < 1:
            raise SessionError(f"max_evaluations must be ≥ 1, got {max_evaluations}")
        self.reference = reference
        self.target_ids = target_ids
        self.config = make_joint(**params)
        self.seed = seed
        self.max_evaluations = max_evaluations
        self.reference_source = reference_source
        self.extra = extra
        self.run_state = JointRun(reference.scores, len(target_ids), self.config, seed,
                                  reference.kind, max_evaluations)
        self._target_index = {t: k for k, t in enumerate(target_ids)}
        self.observations: list[tuple[str, str, float]] = []
        self.skipped: list[tuple[str, str, str]] = []
        self.notes: list[str] = []

    def _header(self) -> dict[str, Any]:
        return {
            **self._header_base(),
            "targets": self.target_ids,
            "method": {"name": METHOD_NAME, "params": self.config.params},
            "seed": self.seed,
            "max_evaluations": self.max_evaluations,
            "extra": self.extra,
        }

    # ------------------------------------------------------------------ resume
    @classmethod
    def resume(cls, path: str | os.PathLike,
               reference: ScoreMatrix | None = None) -> JointSession:
        """Rebuild a joint session from its journal and keep appending to it."""
        path = Path(path)
        header, events, note, whole = cls.read_journal(path)
        if header.get("method", {}).get("name") != METHOD_NAME or "targets" not in header:
            raise JournalError(f"journal {path} is not a joint evaluation (use Session.resume)")
        reference = cls._resume_reference(path, header, reference)
        session = cls.__new__(cls)
        session._setup(reference, list(header["targets"]), header["method"]["params"],
                       header["seed"], header.get("max_evaluations"),
                       header["reference"].get("source"), header.get("extra") or {})
        session._replay_journal(path, events, note, whole)
        return session

    # ------------------------------------------------------------------ ask / tell
    def _pair(self, target: str, item: str, where: str) -> tuple[int, int]:
        if target not in self._target_index:
            raise SessionError(f"{where}: {target!r} is not one of the targets "
                               f"{self.target_ids}")
        try:
            j = self.reference.item_index(item)
        except DataError:
            raise SessionError(f"{where}: item {item!r} is not in the benchmark "
                               f"{self.reference.name}") from None
        t = self._target_index[target]
        if not self.run_state.available[t, j]:
            raise SessionError(f"{where}: {target!r} on item {item!r} was already recorded")
        return t, j

    @property
    def n_evaluations(self) -> int:
        return len(self.observations)

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    @property
    def stop_reason(self) -> str | None:
        """Why the session is done, or None while it is not."""
        run = self.run_state
        if self.max_evaluations is not None and run.n >= self.max_evaluations:
            return f"budget of {self.max_evaluations} evaluations"
        if run.finished:
            if run.done.all():
                return f"every target met {self.config.stopping.name}"
            return "every target stopped or has no item left"
        return None

    def ask(self) -> tuple[str, str]:
        """The (target id, item id) to evaluate next."""
        if self.done:
            raise SessionError(f"the joint evaluation is done ({self.stop_reason})")
        t, j = self.run_state.next_pair()
        return self.target_ids[t], self.reference.items[j]

    def tell(self, target: str, item: str, score: float) -> None:
        """Record the score of ``target`` on ``item`` (journaled before returning)."""
        self._tell_pair(target, item, score)

    def skip(self, target: str, item: str, reason: str) -> None:
        """Leave ``target`` on ``item`` unevaluated (e.g. the evaluation kept failing)."""
        self._skip_pair(target, item, reason)

    def _apply_tell(self, t: int, j: int, score: float) -> None:
        self.run_state.observe(t, j, score)
        self.observations.append((self.target_ids[t], self.reference.items[j], score))

    def _apply_skip(self, t: int, j: int, reason: str) -> None:
        self.run_state.skip(t, j)
        self.skipped.append((self.target_ids[t], self.reference.items[j], reason))

    def estimates(self) -> dict[str, tuple[float, float, float]]:
        """{target: (estimate, lower, upper)} at the configured level, clipped to [0, 1]."""
        value, lower, upper = self.run_state.estimates()
        return {t: (float(value[k]), float(lower[k]), float(upper[k]))
                for k, t in enumerate(self.target_ids)}

    def run(self, evaluator: Callable[[str, str], float],
            on_step: Callable[[JointSession, str, str, float | None], None] | None = None,
            max_failures: int | None = None) -> dict[str, tuple[float, float, float]]:
        """Ask, evaluate ``evaluator(target, item)`` and tell until done; a pair whose
        evaluation raises :class:`EvaluationError` is skipped with the reason journaled;
        ``max_failures`` failures in a row stop the run (:class:`EvaluatorFailedError`)."""
        while not self.done:
            self._run_one(evaluator, self.ask(), on_step, max_failures)
        return self.estimates()
