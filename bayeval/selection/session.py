"""Synchronised successive rejects as an ask/tell session, journaled (seed 002; docs/methods.md
§7).

::

    session = SelectionSession(["model-a", "model-b", "model-c"], items, budget=3000,
                               journal="select.jsonl")
    while not session.done:
        pairs = session.ask()                  # every surviving model × the phase's items
        scores = my_batched_inference(pairs)   # evaluate them in one batch if you like
        for (model, item), score in zip(pairs, scores):
            session.tell(model, item, score)
    session.ranking()                           # best first

Phase k asks for every surviving model on the n_k − n_{k−1} items that come next in one
seeded permutation of the items (:func:`~bayeval.selection.schedule.phase_schedule`); when
every pair of the phase has been told (or skipped), the model of lowest mean over its
scores so far is eliminated (exact ties broken at random). With the same seed the items,
the tie draws and so the eliminations are those of
:func:`~bayeval.selection.successive_rejects.synchronised_successive_rejects` with
``jax.random.key(seed)``.

The scores of earlier models (never the candidates) can guide it in two ways (docs/methods.md
§10), alone or together:

* ``weights=`` (:func:`~bayeval.selection.design.history_weights`): the items are met in a
  seeded order drawn with probabilities ∝ the weights (HW-SySRs), where the strongest
  earlier models disagree, and each model's estimate is the design-unbiased (★w);
* ``history=`` (:func:`~bayeval.selection.history.fit_history`): each model's estimate
  uses the factor model's predictions as a control variate (HI-SySRs).

Either way the eliminations are those of
:func:`~bayeval.selection.history.run_history_schedules` with the same seed, and what the
session read of the earlier models is saved beside the journal
(``<journal>.history.npz``, its SHA-256 in the header) so that a resume uses the very same
factors and weights.

A pair that cannot be evaluated is skipped (journaled with the reason); the model's mean
is then over the items it has (with a history the estimate is then no longer exactly
unbiased: (★) and (★w) assume every asked pair is told). A model with no score at all
when its phase ends is eliminated first. Every ``tell`` and ``skip`` is an fsync-ed line
of the journal (:class:`~bayeval.loop.session.PairJournal`); :meth:`SelectionSession.resume`
replays it and the run continues as the uninterrupted one would have.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bayeval.errors import JournalError, SessionError
from bayeval.loop.runner import evaluate_or_skip
from bayeval.precision import require_float64
from bayeval.records.journal import JOURNAL_FORMAT, JOURNAL_VERSION, PairJournal
from bayeval.selection.design import corrected_total, step_term, weighted_order
from bayeval.selection.history import (
    History,
    arm_start,
    load_history,
    save_history,
    step_and_estimate,
)
from bayeval.selection.schedule import phase_schedule
from bayeval.selection.successive_rejects import item_orders

METHOD_NAME = "sysrs"


class SelectionSession(PairJournal):
    """Find the best of ``models`` on ``items`` with at most ``budget`` model–item
    evaluations by SySRs.

    Parameters
    ----------
    models: names of the candidate models (at least two, distinct).
    items: the benchmark's item ids (distinct).
    budget: model–item evaluations allowed (≥ number of models).
    seed: seeds the item permutation and the tie draws.
    journal: path of the JSON-lines journal (must not exist; see :meth:`resume`).
    extra: anything to record in the header (e.g. how the evaluator was set up).
    history: a factor model of earlier models (HI-SySRs' control variate).
    weights: (len(items),) positive item weights of the design (HW-SySRs).
    """

    def __init__(self, models: Sequence[str], items: Sequence[str], budget: int, *,
                 seed: int = 0, journal: str | os.PathLike | None = None,
                 extra: dict[str, Any] | None = None, history: History | None = None,
                 weights: Sequence[float] | np.ndarray | None = None) -> None:
        require_float64("SelectionSession")
        self._setup([str(m) for m in models], [str(i) for i in items], int(budget), int(seed),
                    dict(extra or {}), history, weights)
        if (history is not None or weights is not None) and journal is not None:
            self._check_new_journal(journal)  # before its history file is written
            self._history_file = save_history(history, Path(journal), self.weights)
        self._start_journal(journal)

    def _setup(self, models: list[str], items: list[str], budget: int, seed: int,
               extra: dict[str, Any], history: History | None = None,
               weights: Sequence[float] | np.ndarray | None = None) -> None:
        if len(models) < 2:
            raise SessionError(f"need at least two models to choose from, got {len(models)}")
        for kind, names in (("models", models), ("items", items)):
            if len(set(names)) != len(names):
                dup = next(n for n in names if names.count(n) > 1)
                raise SessionError(f"{kind} must be distinct: {dup!r} appears twice")
        if not items:
            raise SessionError("need at least one item")
        try:
            self.schedule = phase_schedule(len(models), len(items), budget)
        except ValueError as exc:
            raise SessionError(str(exc)) from None
        self.models, self.items, self.budget, self.seed, self.extra = (
            models, items, budget, seed, extra)
        K, L = len(models), len(items)
        order_key, tie_key = jax.random.split(jax.random.key(seed))
        self.weights = None if weights is None else np.asarray(weights, np.float64)
        if self.weights is None:
            self.item_order = np.asarray(item_orders(order_key, K, L, shared=True)[0])
        else:
            if self.weights.shape != (L,) or not np.all(np.isfinite(self.weights)) \
                    or not np.all(self.weights > 0):
                raise SessionError(f"the item weights must be {L} positive numbers, one per "
                                   f"item (got shape {self.weights.shape})")
            order, inverse = weighted_order(order_key, self.weights)
            self.item_order = np.asarray(order)
            self._inverse = np.asarray(inverse)  # π_t of the step that meets each item
        self._position = np.empty(L, np.int64)
        self._position[self.item_order] = np.arange(1, L + 1)  # t of each item, 1-based
        self._corrections = np.zeros(K)  # Σ_t g_t / (L − t) of (★w), with weights alone
        self._ties = np.asarray(jax.random.uniform(tie_key, (K - 1, K)))
        self._model_index = {m: i for i, m in enumerate(models)}
        self._item_index = {it: j for j, it in enumerate(items)}
        self.alive = np.ones(K, bool)
        self.eliminated: list[str] = []
        self.phase = 0
        self._sums = np.zeros(K)
        self._counts = np.zeros(K, np.int64)
        self._pending: set[tuple[int, int]] = set()
        self.observations: list[tuple[str, str, float]] = []
        self.skipped: list[tuple[str, str, str]] = []
        self.notes: list[str] = []
        self.history = history
        self._history_file: dict[str, str] | None = None
        if history is not None:
            if history.item_factors.shape[0] != L:
                raise SessionError(f"the history has {history.item_factors.shape[0]} items, "
                                   f"the selection {L}")
            start = arm_start(history)
            self._arms = [start] * K
            self._estimates = np.full(K, np.nan)
            self._phase_scores: dict[tuple[int, int], float] = {}
        self._open_phase()

    def _header(self) -> dict[str, Any]:
        return {"format": JOURNAL_FORMAT, "version": JOURNAL_VERSION,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "method": {"name": METHOD_NAME, "budget": self.budget,
                           **({"history": self._history_file} if self._history_file else {})},
                "models": self.models, "items": self.items, "seed": self.seed,
                "extra": self.extra}

    # ------------------------------------------------------------------ resume
    @classmethod
    def resume(cls, path: str | os.PathLike) -> SelectionSession:
        """Rebuild a selection session from its journal and keep appending to it."""
        path = Path(path)
        header, events, note, whole = cls.read_journal(path)
        method = header.get("method")
        if not isinstance(method, dict) or method.get("name") != METHOD_NAME:
            what = method.get("name") if isinstance(method, dict) else None
            hint = (f": continue it with bayeval evaluate --resume --journal {path}"
                    if "reference" in header else "")
            raise JournalError(f"journal {path} is not a model selection (it records "
                               f"{what!r}){hint}")
        session = cls.__new__(cls)
        record = header.get("method", {}).get("history")
        history, weights = load_history(path, record) if record else (None, None)
        try:
            session._setup(list(header["models"]), list(header["items"]),
                           int(header["method"]["budget"]), int(header["seed"]),
                           header.get("extra") or {}, history, weights)
        except KeyError as exc:
            raise JournalError(f"journal {path} line 1: header lacks field {exc}") from None
        session._history_file = record
        session._replay_journal(path, events, note, whole)
        return session

    # ------------------------------------------------------------------ phases
    def _phase_items(self, k: int) -> np.ndarray:
        start = 0 if k == 0 else int(self.schedule[k - 1])
        return self.item_order[start:int(self.schedule[k])]

    def _open_phase(self) -> None:
        """Queue the pairs of the current phase; phases with no new item end at once."""
        while not self.done:
            items = self._phase_items(self.phase)
            self._pending = {(int(i), int(j)) for i in np.flatnonzero(self.alive)
                             for j in items}
            if self._pending:
                return
            self._eliminate()

    def _estimate_array(self) -> np.ndarray:
        """Each model's estimate of its full mean (NaN before its first score): the mean of
        its scores; with weights alone the design-unbiased (★w) of
        :mod:`~bayeval.selection.design`; with a factor model the control-variate estimate
        (★) or (★w) of :mod:`~bayeval.selection.history` as of the last phase end."""
        if self.history is not None:
            return self._estimates.copy()
        totals = self._sums if self.weights is None else corrected_total(
            self._sums, self._corrections, self._counts, len(self.items))
        return np.where(self._counts > 0, totals / np.maximum(self._counts, 1), np.nan)

    def _current_means(self) -> np.ndarray:
        """:meth:`_estimate_array` with −inf for no estimate yet (such a model goes
        first)."""
        estimates = self._estimate_array()
        return np.where(np.isnan(estimates), -np.inf, estimates)

    def _advance_arms(self) -> None:
        """Feed each surviving model its scores of the phase ending now, in the item order
        (a skipped pair is left out of that model's estimate)."""
        for j in self._phase_items(self.phase):
            for i in np.flatnonzero(self.alive):
                score = self._phase_scores.pop((int(i), int(j)), None)
                if score is not None:
                    pi = None if self.weights is None else \
                        float(self._inverse[self._position[j] - 1])
                    self._arms[i], self._estimates[i] = step_and_estimate(
                        self._arms[i], self.history, int(j), score, pi)

    def _eliminate(self) -> None:
        if self.history is not None:
            self._advance_arms()
        means = self._current_means()
        worst = np.min(np.where(self.alive, means, np.inf))
        tied = np.flatnonzero(self.alive & (means == worst))
        out = int(tied[np.argmax(self._ties[self.phase, tied])])
        self.alive[out] = False
        self.eliminated.append(self.models[out])
        self.phase += 1

    def _settle(self, i: int, j: int) -> None:
        self._pending.discard((i, j))
        if not self._pending:
            self._eliminate()
            self._open_phase()

    # ------------------------------------------------------------------ ask / tell
    def _pair(self, model: str, item: str, where: str) -> tuple[int, int]:
        if model not in self._model_index:
            raise SessionError(f"{where}: {model!r} is not one of the {len(self.models)} "
                               "candidate models")
        if item not in self._item_index:
            raise SessionError(f"{where}: item {item!r} is not one of the benchmark's items")
        pair = (self._model_index[model], self._item_index[item])
        if pair not in self._pending:
            raise SessionError(f"{where}: {model!r} on item {item!r} was not asked for "
                               "(already recorded, eliminated, or not in this phase)")
        return pair

    @property
    def done(self) -> bool:
        """One model is left."""
        return int(self.alive.sum()) == 1

    @property
    def n_evaluations(self) -> int:
        return len(self.observations)

    def ask(self) -> list[tuple[str, str]]:
        """Every (model, item) pair of the current phase not yet told or skipped, in item
        order then model order; evaluate them in any order, in batches if you like."""
        if self.done:
            raise SessionError(f"the selection is done: {self.best} is the best")
        position = {int(j): p for p, j in enumerate(self._phase_items(self.phase))}
        pairs = sorted(self._pending, key=lambda ij: (position[ij[1]], ij[0]))
        return [(self.models[i], self.items[j]) for i, j in pairs]

    def tell(self, model: str, item: str, score: float) -> None:
        """Record ``model``'s score on ``item`` (journaled before returning)."""
        self._tell_pair(model, item, score)

    def skip(self, model: str, item: str, reason: str) -> None:
        """Leave ``model`` on ``item`` unevaluated (e.g. the evaluation kept failing)."""
        self._skip_pair(model, item, reason)

    def _apply_tell(self, i: int, j: int, score: float) -> None:
        self._sums[i] += score
        self._counts[i] += 1
        if self.weights is not None:
            t = int(self._position[j])
            self._corrections[i] += step_term(score, t, self._inverse[t - 1], len(self.items))
        if self.history is not None:
            self._phase_scores[(i, j)] = score
        self.observations.append((self.models[i], self.items[j], score))
        self._settle(i, j)

    def _apply_skip(self, i: int, j: int, reason: str) -> None:
        self.skipped.append((self.models[i], self.items[j], reason))
        self._settle(i, j)

    # ------------------------------------------------------------------ results
    @property
    def best(self) -> str | None:
        """The chosen model once done, else None."""
        return self.models[int(np.argmax(self.alive))] if self.done else None

    def means(self) -> dict[str, tuple[float, int]]:
        """{model: (estimate of its full mean, scores so far)} (NaN before its first
        score): the mean of its scores, or with a history the estimate (★) as of the last
        phase end."""
        estimates = self._estimate_array()
        return {m: (float(estimates[i]), int(self._counts[i]))
                for i, m in enumerate(self.models)}

    def ranking(self) -> list[str]:
        """Models best first: the survivors by current mean, then the eliminated ones,
        the last eliminated first (seed 002, App. H.2)."""
        alive = [int(i) for i in np.flatnonzero(self.alive)]
        means = self._current_means()
        alive.sort(key=lambda i: -means[i])
        return [self.models[i] for i in alive] + self.eliminated[::-1]

    def run(self, evaluator: Callable[[str, str], float],
            on_step: Callable[[SelectionSession, str, str, float | None], None] | None = None,
            max_failures: int | None = None) -> list[str]:
        """Ask, evaluate ``evaluator(model, item)`` and tell until done; a pair whose
        evaluation raises :class:`EvaluationError` is skipped with the reason journaled;
        ``max_failures`` failures in a row stop the run (:class:`EvaluatorFailedError`).
        Returns the ranking."""
        while not self.done:
            for pair in self.ask():
                evaluate_or_skip(self, evaluator, pair, on_step, max_failures)
        return self.ranking()
