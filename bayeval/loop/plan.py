"""How many documents a run will need, predicted from the reference alone.

Before a live run nothing is known of the new model; what is known is how the run's own
method behaves on models like it. :func:`stand_in_runs` holds out reference models as
stand-in targets, spread over the references' range of scores (evenly spaced ranks), and
simulates the run on each (:func:`bayeval.loop.simulate.simulate`: the same method, stop,
batch size or concurrency; the rest of the reference as its reference) until the
stopping rule fires: the documents each stand-in needed. Stand-ins are held out a few at
a time (``per_fold`` of them leave the reference together, every fold spanning the
range), so that one compiled program runs every fold and the reference each fold sees is
nearly the run's own.

The prediction is the stand-ins' median and range; once the run has scored documents of
its own, :func:`nearest_stand_ins` narrows it to the stand-ins whose scores are nearest the
run's estimate (what a run needs depends most on its score: a score near 0 or 1 needs
fewer documents for the same width). A target beyond the references' range is predicted
by the nearest stand-ins, which is where the prediction is least sure.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = ["StandIns", "nearest_stand_ins", "stand_in_runs"]

STAND_INS = 8  # stand-in targets per plan
MOST_PER_FOLD = 8  # stand-ins held out together, at most


class StandIns(NamedTuple):
    """The simulated runs of a plan: per stand-in, its row, score and documents needed
    (every document when the rule never fired)."""

    rows: np.ndarray  # (S,) the stand-ins' rows in the reference
    scores: np.ndarray  # (S,) their full scores
    documents: np.ndarray  # (S,) documents each run needed (drawn at the stop)
    first_width: np.ndarray  # (S,) each run's interval width after its first call
    first_call: int  # the documents of that first call (where the widths are read)


def _fold_size(models: int) -> int:
    """Stand-ins held out together: a sixth of the models (the reference each fold sees
    keeps five sixths or more), at least 1 and at most :data:`MOST_PER_FOLD`."""
    return max(1, min(MOST_PER_FOLD, models // 6))


def stand_in_runs(method, scores: np.ndarray, *, batch: int = 1, concurrency: int = 1,
                  stand_ins: int = STAND_INS, seed: int = 0, call_rule=None) -> StandIns:
    """Simulated runs of ``method`` with reference models of ``scores`` (M, N) held out
    as stand-in targets (module docstring): ``stand_ins`` of them at evenly spaced ranks
    of their scores, among the rows with every score (a model with a missing score cannot
    stand in). Needs two or more complete rows. ``call_rule``: how the run sizes its
    calls (:class:`~bayeval.loop.call_sizes.CallRule`), simulated alike."""
    from bayeval.loop.call_sizes import call_size
    from bayeval.loop.simulate import simulate

    scores = np.asarray(scores, dtype=np.float64)
    complete = np.flatnonzero(~np.isnan(scores).any(axis=1))
    if complete.size < 2 or scores.shape[0] < 2:
        raise ValueError("a plan needs two or more reference models with every score "
                         f"(has {complete.size} of {scores.shape[0]})")
    count = min(stand_ins, complete.size - 1, scores.shape[0] - 1)
    ranked = complete[np.argsort(np.nanmean(scores[complete], axis=1), kind="stable")]
    rows = ranked[np.unique(np.round(np.linspace(0, ranked.size - 1, count)).astype(int))]
    per_fold = min(_fold_size(scores.shape[0]), rows.size)
    folds = math.ceil(rows.size / per_fold)
    documents = np.zeros(rows.size, np.int64)
    n = scores.shape[1]
    # the first call's documents
    first = min(max(call_size(0, batch, call_rule), concurrency, 1), n)
    widths = np.full(rows.size, np.nan)
    for f in range(folds):
        # every fold spans the range: stand-ins f, f + folds, …; a fold short of
        # per_fold is filled with other stand-ins, whose runs there are not counted (the
        # same shapes in every fold: one compiled program)
        members = np.arange(f, rows.size, folds)
        others = np.setdiff1d(np.arange(rows.size), members)
        fill = np.r_[members, others[:per_fold - members.size]]
        held = rows[fill]
        reference = np.delete(scores, held, axis=0)
        run = simulate(method, reference, scores[held], seed + fill, until_stop=True,
                       batch=batch, concurrency=concurrency, call_rule=call_rule)
        at_stop = run.drawn_at_stop if run.drawn_at_stop is not None else run.stop_n
        for j, s in enumerate(fill[:members.size]):
            documents[s] = int(at_stop[j]) if at_stop[j] > 0 else n
            widths[s] = run.upper[j, first - 1] - run.lower[j, first - 1]
    return StandIns(rows, scores[rows].mean(axis=1), documents, widths, first)


def nearest_stand_ins(scores: np.ndarray, score: float, count: int = 3) -> np.ndarray:
    """Indices of the ``count`` stand-ins (of ``scores``) whose scores are nearest
    ``score``."""
    order = np.argsort(np.abs(np.asarray(scores) - score), kind="stable")
    return order[:max(1, min(count, order.size))]
