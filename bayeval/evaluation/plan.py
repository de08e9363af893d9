"""A run's plan before it starts, and the rule that keeps a run no slower than the full run
it replaces.

:func:`plan` (``bayeval plan``) takes a run's own settings and predicts, from the reference
alone, the documents the run will need at its ε: reference models held out as stand-in
targets, spread over the references' range, each run through the run's own method, stop
and batch size (:mod:`bayeval.loop.plan`). :class:`Plan` gives the median and range, the
share of the task, and the time against a full run: the share itself, or, where the
costs are stated (``seconds_per_document`` a full run pays per document,
``seconds_per_call`` what each of bayeval's calls costs beyond its documents), the ratio
(n · c + calls · o) / (N · c). Where the saving is under :data:`LITTLE_SAVING` of the time
it says so, and what would save more.

:func:`evaluate` prints the plan's line first, and after the first call the plan revised
with the target's own scores (:meth:`Plan.revised`: the stand-ins whose scores are nearest
its estimate, and its interval's width against the stand-ins' widths after their first
call).

**The rule** (:class:`CallSizes`, ``rest_whole="auto"``, the default): bayeval runs the rest
of the task in one call (the harness packs it as a full run does; the estimate is then the
task's exact score, an interval of width 0) when that is predicted to be cheaper than
going on batch by batch:

* before the first call, when the plan's predicted share is :data:`WHOLE_SHARE` or more of
  the task (a batch-by-batch run could not save);
* after each call from the second on, when the documents still predicted to be needed
  (the revised plan's median less those run) at the loop's time per document over the
  last call (the evaluator's and bayeval's own: its posterior, its draws; the first
  call's holds one-time costs such as compiling) cost at least what the rest of the task
  costs at the full run's projected time per document (:mod:`bayeval.loop.timing`: what a
  full run pays, its packing, not bayeval's; without it, the evaluator's own mean time
  per document).

``rest_whole="never"`` keeps drawing batch after batch to the stop.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bayeval.loop.call_sizes import (
    CallRule,
    ahead_allowed,
    call_size,
    calls_for,
    documents_for_width,
    parse_call_rule,
)

__all__ = ["LITTLE_SAVING", "WHOLE_SHARE", "CallSizes", "Plan", "plan", "plan_of",
           "plan_wanted"]

LITTLE_SAVING = 0.15  # a saving of time under this is "little": the plan says so
WHOLE_SHARE = 0.85  # a predicted share at or above this runs the task whole at once


@dataclass(frozen=True)
class Plan:
    """What a run is predicted to need (module docstring)."""

    task: str
    documents: int  # N, the task's documents
    method: str
    batch: int
    stand_ins: tuple[str, ...]  # the reference models that stood in for the target
    stand_in_scores: tuple[float, ...]
    stand_in_documents: tuple[int, ...]  # documents each stand-in's run needed
    predicted: int  # the median of the stand-ins' (or, revised, the nearest ones')
    low: int
    high: int
    seconds_per_document: float | None = None  # the full run's, stated or measured
    seconds_per_call: float | None = None  # bayeval's per call beyond its documents
    revised_at: int = 0  # documents of the target's own scored when revised (0: not)
    estimate: float | None = None  # the target's estimate the revision used
    seconds: float = 0.0  # what making the plan took (its simulated runs)
    epsilon: float | None = None  # the stop's width (None: a stop without one)
    first_call: int = 0  # documents in the first call, where the widths below are read
    stand_in_widths: tuple[float, ...] = ()  # each stand-in's interval width there
    width: float | None = None  # the target's own width the revision used
    call_rule: dict[str, Any] | None = None  # how the calls are sized (None: the batch)

    @property
    def share(self) -> float:
        """The predicted documents' share of the task."""
        return self.predicted / self.documents

    @property
    def time_ratio(self) -> float:
        """Predicted time against a full run's: the share, or with stated costs
        (n · c + calls · o) / (N · c)."""
        c, o = self.seconds_per_document, self.seconds_per_call
        if not c or o is None:
            return self.share
        rule = None if self.call_rule is None else CallRule(**self.call_rule)
        calls = calls_for(self.predicted, max(self.batch, 1), rule, self.documents)
        return (self.predicted * c + calls * o) / (self.documents * c)

    @property
    def little_saving(self) -> bool:
        """Whether the predicted saving of time is under :data:`LITTLE_SAVING`."""
        return 1.0 - self.time_ratio < LITTLE_SAVING

    def advice(self) -> str:
        """What would save more, where this run saves little (else empty)."""
        if not self.little_saving:
            return ""
        return ("to save more: a wider epsilon (documents fall about as 1/ε²), a suite's "
                "average over several tasks (bayeval evaluate --suite), or a frozen subset "
                "(bayeval compress)")

    def line(self) -> str:
        """One line: the prediction, its share and time, the verdict."""
        own = ("" if self.width is None else f", interval width {self.width:.3f}")
        basis = (f"revised after {self.revised_at} of the target's own documents "
                 f"(estimate {self.estimate:.3f}{own})" if self.revised_at else
                 f"from {len(self.stand_ins)} reference models standing in")
        timed = ("" if self.seconds_per_document is None else
                 f", ≈ {self.time_ratio:.2f}× a full run's time")
        verdict = (f"; a saving under {LITTLE_SAVING:.0%}: {self.advice()}"
                   if self.little_saving else "")
        return (f"plan: {self.predicted} of {self.documents} documents [{self.low}, "
                f"{self.high}] ({self.share:.0%} of the task{timed}), {basis}{verdict}")

    def summary(self) -> str:
        """The line and a row per stand-in."""
        rows = [self.line(), "", f"{'stand-in':<32} {'score':>6} {'documents':>9}"]
        rows += [f"{name[:32]:<32} {score:6.3f} {docs:9d}" for name, score, docs in
                 zip(self.stand_ins, self.stand_in_scores, self.stand_in_documents,
                     strict=True)]
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.line()

    def to_dict(self) -> dict[str, Any]:
        """The plan's fields and its derived numbers (``--json``)."""
        return {**asdict(self), "share": self.share, "time_ratio": self.time_ratio,
                "little_saving": self.little_saving, "line": self.line()}

    @classmethod
    def from_stand_ins(cls, runs: Any, names: Sequence[str], *, task: str, documents: int,
                       method: Any, batch: int, seconds_per_document: float | None = None,
                       seconds_per_call: float | None = None, seconds: float = 0.0,
                       call_rule: CallRule | None = None) -> Plan:
        """The plan that the stand-ins' simulated runs ``runs``
        (:class:`~bayeval.loop.plan.StandIns`) of ``method`` give, the stand-ins named
        ``names``: their median and range, the widths after their first call that a
        revision reads, the stop's ε."""
        docs = runs.documents
        epsilon = method.params.get("epsilon")
        return cls(task=task, documents=documents, method=method.name, batch=max(batch, 1),
                   stand_ins=tuple(names),
                   stand_in_scores=tuple(float(x) for x in runs.scores),
                   stand_in_documents=tuple(int(x) for x in docs),
                   predicted=int(np.median(docs)), low=int(docs.min()),
                   high=int(docs.max()), seconds_per_document=seconds_per_document,
                   seconds_per_call=seconds_per_call, seconds=seconds,
                   epsilon=None if epsilon is None else float(epsilon),
                   first_call=int(runs.first_call),
                   stand_in_widths=tuple(float(x) for x in runs.first_width),
                   call_rule=None if call_rule is None else call_rule._asdict())

    def revised(self, estimate: float, scored: int, width: float | None = None,
                observed: int | None = None, count: int = 3) -> Plan:
        """The plan revised with the target's own scores, two ways: by the ``count``
        stand-ins whose scores are nearest its ``estimate`` (a score near 0 or 1 needs
        fewer documents), and by its interval ``width`` after ``observed`` scores of its
        own (default ``scored``) against the stand-ins' widths after their first call
        (:meth:`_by_width`: how well the references predict this target). Where both are
        known the revision is their geometric mean (median, low and high each: two
        predictions with errors of their own, docs/results/plan_accuracy.md), else the
        first. Never below ``scored``, the documents already run."""
        from bayeval.loop.plan import nearest_stand_ins

        near = np.asarray(self.stand_in_documents, np.float64)[
            nearest_stand_ins(self.stand_in_scores, estimate, count)]
        middle, low, high = float(np.median(near)), float(near.min()), float(near.max())
        by_width = self._by_width(width, scored if observed is None else observed)
        if by_width is not None:
            middle, low, high = (math.sqrt(max(a, 1.0) * max(b, 1.0)) for a, b in
                                 zip((middle, low, high), by_width, strict=True))

        def at_least(x: float) -> int:
            return max(min(round(x), self.documents), scored)

        return replace(self, predicted=at_least(middle), low=at_least(low),
                       high=at_least(high), revised_at=scored, estimate=float(estimate),
                       width=None if by_width is None else float(width))

    def _by_width(self, width: float | None, scored: int
                  ) -> tuple[float, float, float] | None:
        """(median, low, high) of the documents needed, from the target's own interval
        width w after n = ``scored`` documents: as an interval's squared width goes,
        w² ≈ k (1/n − 1/N) (a sample of n of N documents), so the width ε is reached at
        D = 1 / (ε²/k + 1/N). Each stand-in's run gives k_s from its width after the
        first call and the ratio c_s of the documents it needed to its own D_s; the
        target's D is scaled by their median (the range by their least and greatest).
        None where no width is known or no stand-in's is."""
        n, big_n = scored, self.documents
        if (width is None or self.epsilon is None or not self.stand_in_widths
                or not 0 < n < big_n or not math.isfinite(width)):
            return None
        ws = np.asarray(self.stand_in_widths, np.float64)
        docs = np.asarray(self.stand_in_documents, np.float64)
        first = self.first_call
        usable = np.isfinite(ws) & (ws > 0) & (0 < first < big_n)
        if not usable.any():
            return None

        def needed(w: np.ndarray | float, at: int) -> np.ndarray:
            return documents_for_width(np.asarray(w, np.float64), at, big_n, self.epsilon)

        ratios = docs[usable] / needed(ws[usable], first)
        if width <= 0:
            return float(n), float(n), float(n)
        own = float(needed(width, n))
        return tuple(min(own * float(r), float(big_n))  # (no more than the task)
                     for r in (np.median(ratios), ratios.min(), ratios.max()))


def plan_wanted(setting: bool | None, evaluator_kind: str) -> bool:
    """Whether a run makes a plan: ``setting`` if given; by default every run whose
    evaluator runs a model (the oracle's run is itself a simulation), unless the
    environment says ``BAYEVAL_PLAN=off``."""
    if setting is not None:
        return setting
    if os.environ.get("BAYEVAL_PLAN", "").strip().lower() in ("off", "0", "no", "false"):
        return False
    return evaluator_kind != "oracle"


def plan_of(session: Any, batch: int, concurrency: int = 1, task: str = "",
            seconds_per_document: float | None = None,
            seconds_per_call: float | None = None, call_rule: Any = None) -> Plan:
    """The plan of a fresh :class:`~bayeval.loop.session.Session`: its method, reference
    and seed, at ``batch`` (or ``concurrency``) and with the ``call_rule`` as the run will
    draw."""
    import time

    from bayeval.loop.plan import stand_in_runs

    began = time.perf_counter()
    method = session.method
    one_at_a_time = method.with_replacement  # (one target: a plan refuses several)
    runs = stand_in_runs(method, np.asarray(session.reference.scores),
                         batch=1 if one_at_a_time else max(batch, 1),
                         concurrency=1 if one_at_a_time else max(concurrency, 1),
                         seed=session.seed, call_rule=None if one_at_a_time else call_rule)
    names = [str(session.reference.models[r]) for r in runs.rows]
    return Plan.from_stand_ins(runs, names, task=task, documents=session.n_items,
                               method=method, batch=batch,
                               seconds_per_document=seconds_per_document,
                               seconds_per_call=seconds_per_call,
                               seconds=time.perf_counter() - began,
                               call_rule=None if one_at_a_time else call_rule)


def call_rule_of(session: Any, calls: str, batch: int) -> CallRule | None:
    """The call rule named ``calls`` (:data:`~bayeval.loop.call_sizes.CALL_RULES`) for a
    run of ``session`` in batches of ``batch``, tapering to the method's ε; None where
    the calls are fixed: one item at a time, several targets, draws with replacement, or
    a method without an ε to taper to."""
    method = session.method
    epsilon = method.hyper_values.get("epsilon")
    if (batch <= 1 or session.several or method.with_replacement or epsilon is None
            or not method.estimator.needs_probabilities):
        return None
    return parse_call_rule(calls, float(epsilon))


def _width_now(session: Any) -> float | None:
    """The run's interval width as a call rule reads it (None before any score)."""
    return session.width if session.n_observed else None


def in_flight_sizes(session: Any, calls: str, concurrency: int) -> Any:
    """What ``Session.run`` takes as ``batch`` with K = ``concurrency`` in flight: the
    rounds it may draw ahead of those applied (:func:`~bayeval.loop.call_sizes.
    ahead_allowed`, the taper of the call rule named ``calls``), or 1 where no rule
    applies (K in flight throughout)."""
    rule = call_rule_of(session, calls, concurrency)
    if rule is None or concurrency <= 1:
        return 1
    return lambda s: ahead_allowed(s.n_observed, concurrency, rule, _width_now(s),
                                   s.n_items)


def sizes_without_plan(session: Any, calls: str, batch: int, concurrency: int) -> Any:
    """What ``Session.run`` takes as ``batch`` for a run without a plan (a fresh one that
    makes none, or a resumed one): the call rule named ``calls`` over calls of at most
    ``batch`` items (:class:`CallSizes`), its taper with K = ``concurrency`` in flight
    (:func:`in_flight_sizes`), or ``batch`` where no rule applies."""
    if concurrency > 1:
        return in_flight_sizes(session, calls, concurrency)
    rule = call_rule_of(session, calls, batch)
    return batch if rule is None else CallSizes(None, batch, call_rule=rule)


class CallSizes:
    """The size of each call of a live run under the rule (module docstring): the
    ``call_rule``'s (:func:`~bayeval.loop.call_sizes.call_size`: ``batch`` when None), or
    every document left when running the rest whole is predicted to be cheaper (with a
    ``plan``; without one, the call rule alone). ``say`` is told the revised plan after
    the first call, and the switch."""

    def __init__(self, plan: Plan | None, batch: int, rest_whole: str = "auto",
                 say: Any = None, call_rule: CallRule | None = None) -> None:
        self.plan = plan
        self.call_rule = call_rule
        self.batch = batch
        self.rest_whole = rest_whole
        self.say = say
        self.whole_at: int | None = None  # documents run when the rest went whole
        self.revised: Plan | None = None
        self._last: tuple[float, int] | None = None  # (wall, documents) at the last call

    def _sized(self, session: Any) -> int:
        return call_size(session.n_drawn, self.batch, self.call_rule, _width_now(session),
                         session.n_items)

    def __call__(self, session: Any) -> int:
        if self.whole_at is not None:
            return self.batch
        if self.plan is None:
            return self._sized(session)
        left = session.n_items - session.n_drawn
        deciding = self.rest_whole == "auto" and left > self.batch
        if session.n_drawn == 0:
            if deciding and self.plan.share >= WHOLE_SHARE:
                return self._whole(session, left, f"the plan's {self.plan.share:.0%} of "
                                   f"the task is {WHOLE_SHARE:.0%} or more")
            return self._sized(session)
        value, _, _ = session.estimate()
        revised = self.plan.revised(value, session.n_drawn, session.width,
                                    session.n_observed)
        if self.revised is None:  # the plan revised after the first call, kept (and
            self.revised = revised  # said, whether or not the rule may run the rest)
            if self.say is not None:
                self.say(revised.line())
        if not deciding:
            return self._sized(session)
        # the loop's time per document since the last call began (the first call's
        # includes one-time costs, compiling among them: no decision on it alone)
        wall, drawn = session.times.wall_seconds(), session.n_drawn
        last, self._last = self._last, (wall, drawn)
        if last is None or drawn <= last[1]:
            return self._sized(session)
        loop = (wall - last[0]) / (drawn - last[1])
        times = session.times.summary(session.n_items)
        full = (times["full_run_seconds"] / session.n_items
                if times["full_run_seconds"] else times["item_seconds_mean"] or loop)
        needed = max(revised.predicted - drawn, 0)
        if needed * loop >= left * full:
            return self._whole(session, left, f"{needed} more documents at "
                               f"{loop * 1e3:.0f} ms each cost more than the {left} left "
                               f"at a full run's {full * 1e3:.0f} ms")
        return self._sized(session)

    def _whole(self, session: Any, left: int, why: str) -> int:
        self.whole_at = session.n_drawn
        if self.say is not None:
            self.say(f"running the {left} documents left in one call (the exact score): "
                     f"{why}")
        return left


def plan(settings: Any = None, /, *, seconds_per_document: float | None = None,
         seconds_per_call: float | None = None, **options: Any) -> Plan:
    """The plan of the run that ``settings`` (a :class:`~bayeval.evaluation.RunSettings`)
    or the keywords of :func:`bayeval.evaluate` describe, from the reference alone: no
    model is loaded, no journal written, nothing evaluated. ``seconds_per_document`` (what
    a full run pays per document) and ``seconds_per_call`` (what each of bayeval's calls
    costs beyond its documents), where known, turn the share into a time ratio. One task
    and one model only (a suite's tasks stop on their average: plan each task alone)."""
    from bayeval.devices import prepare_jax
    from bayeval.errors import BayevalError
    from bayeval.evaluation.settings import RunSettings, check_number
    from bayeval.evaluation.sources import fresh_source, run_targets
    from bayeval.loop.session import Session

    check_number(seconds_per_document, "seconds_per_document")
    check_number(seconds_per_call, "seconds_per_call")
    composed = options.pop("method", None)
    if composed is not None and isinstance(composed, str):
        options["method"], composed = composed, None
    if settings is None:
        settings = RunSettings.of(**options)
    elif not isinstance(settings, RunSettings):
        raise BayevalError(f"settings: give RunSettings (or keywords), got a "
                           f"{type(settings).__name__}")
    elif options:
        settings = settings.override(**options)
    if settings.suite or settings.models is not None:
        raise BayevalError("plan: one task and one model (a suite's tasks stop on their "
                           "average: plan each task alone)")
    live, task = settings.evaluator, settings.tasks[0]
    source, matrix = fresh_source(task.dataset, task.reference and Path(task.reference),
                                  task=task.task, metric=task.metric,
                                  filter_name=task.filter,
                                  repeated_models=task.repeated_models)
    seed = 0 if settings.seed is None else settings.seed
    kind = live.kind or "oracle"
    if kind == "oracle" or settings.model is not None:
        names, held = run_targets(settings, kind, matrix, seed)
    else:
        names, held = ["new model"], []
    name, params = settings.method_spec(composed)
    prepare_jax()
    session = Session(matrix.drop_models(held) if held else matrix, names[0], name,
                      method_params=params, seed=seed, reference_source=source)
    return plan_of(session, live.batch_size, live.concurrency or 1, task=task.label,
                   seconds_per_document=seconds_per_document,
                   seconds_per_call=seconds_per_call,
                   call_rule=call_rule_of(session, live.calls, live.batch_size))
