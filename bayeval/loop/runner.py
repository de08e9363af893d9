"""The host loop of a live run: ask, evaluate, tell, until the session is done.

:func:`run_session` drives a :class:`~bayeval.loop.session.Session` (one evaluation at a time,
batches of ``k`` items in one evaluator call, or K evaluations in flight in threads,
docs/methods.md §9 "Streaming"); :func:`evaluate_or_skip` is the one step every evaluation
passes through, for the Session and the
:class:`~bayeval.selection.session.SelectionSession` alike: the score is told, or the
item is skipped with the evaluator's reason journaled, and a run of failures stops the
run with everything so far journaled. Where the wall time goes is kept in the session's
:class:`~bayeval.loop.timing.RunTimes`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from bayeval.errors import EvaluationError, EvaluatorFailedError
from bayeval.loop.timing import RunTimes


def run_session(session: Any, evaluator: Callable[..., float],
                batch: int | Callable[[Any], int] = 1,
                on_step: Callable[..., None] | None = None,
                max_failures: int | None = None, concurrency: int = 1) -> None:
    """Run ``evaluator`` over ``session`` until it is done (see
    :meth:`bayeval.loop.session.Session.run`, whose checks come first)."""
    clock = session.times
    restart = getattr(evaluator, "restart", None)
    if restart is not None:  # an evaluator cancelled by an earlier run may start again
        restart()
    clock.start()
    try:
        if concurrency > 1:
            _streaming(session, evaluator, concurrency, on_step, max_failures,
                       batch if callable(batch) else None)
        else:
            _serial(session, evaluator, batch, on_step, max_failures)
    finally:
        clock.stop()


def evaluate_or_skip(session: Any, evaluator: Callable[..., float], args: tuple[str, ...],
                     on_step: Callable[..., None] | None, max_failures: int | None) -> None:
    """Evaluate ``evaluator(*args)`` and tell its score, or skip ``args`` with the reason
    journaled when it raises :class:`EvaluationError`; after ``max_failures`` failures in
    a row raise :class:`EvaluatorFailedError` (None: never). A session whose estimate
    weighs every drawn item cannot skip one: the failure stops the run, to be resumed
    once the evaluator is fixed."""
    try:
        score = evaluator(*args)
    except EvaluationError as exc:
        if session._needs_draws:
            raise EvaluatorFailedError(
                f"the evaluator failed on {' / '.join(args)}: {exc}; "
                f"{session.method.name} cannot leave a drawn item unevaluated (its "
                "estimate weighs every drawn item's score): fix the evaluator and "
                "--resume, which asks the same item again") from None
        session._skip_args(args, str(exc))
        session.notes.append(f"skipped {' on '.join(args)}: {exc}")
        session._failures += 1
        if on_step is not None:
            on_step(session, *args, None)
        if max_failures is not None and session._failures >= max_failures:
            raise EvaluatorFailedError(
                f"the evaluator failed {session._failures} times in a row, last on "
                f"{' / '.join(args)}: {exc}; nothing more is asked (everything so far "
                "is journaled: fix the evaluator and --resume)") from None
        return
    session._failures = 0
    session._tell_args(args, score)
    if on_step is not None:
        on_step(session, *args, score)


def _serial(session: Any, evaluator: Callable[..., float],
            batch: int | Callable[[Any], int],
            on_step: Callable[..., None] | None, max_failures: int | None) -> None:
    clock = session.times
    batched = getattr(evaluator, "evaluate_batch", None)
    packed = getattr(evaluator, "packed_size", None)
    while not session.done or session.unanswered:  # (asked before a resume: answered)
        size = batch(session) if callable(batch) else batch
        asked = session.ask(1 if session.several else size)
        if not asked:
            break
        if batched is not None and not session.several:
            # one evaluator call for the batch (one harness launch, say); each result is
            # then told or skipped as one evaluation would be
            padded = None if packed is None else packed(list(asked))
            with clock.waiting(), clock.evaluating(len(asked), padded):
                results = batched(list(asked))
            for a, result in zip(asked, results, strict=True):
                evaluate_or_skip(session, _answer(result), (a,), on_step, max_failures)
            continue
        for a in asked:
            args = tuple(a) if session.several else (a,)
            with clock.waiting():
                result, _ = _attempt(evaluator, args, clock)
            evaluate_or_skip(session, _answer(result), args, on_step, max_failures)


def _streaming(session: Any, evaluator: Callable[..., float], concurrency: int,
               on_step: Callable[..., None] | None, max_failures: int | None,
               ahead: Callable[[Any], int] | None = None) -> None:
    # after the stop nothing new is drawn; what is in flight is waited for, and its scores
    # enter the estimate (docs/methods.md §9 "Batches"). ``ahead(session)``: how many
    # rounds may be drawn ahead of the applied ones now (the call rule's taper)
    def ask(flying: list) -> tuple | None:
        if session.done and not session.unanswered:
            return None
        if (ahead is not None and flying and not session.unanswered
                and session.n_drawn - session.n_observed >= ahead(session)):
            return None  # wait for a score before drawing more
        asked = session.ask(1)
        return (evaluator, asked[0], None, session.times) if asked else None

    def tell(_: Any, item: str, result: float | EvaluationError) -> None:
        evaluate_or_skip(session, _answer(result), (item,), on_step, max_failures)

    keep_in_flight(concurrency, ask, tell, session.times.waiting)


def keep_in_flight(concurrency: int, ask: Callable[[list], tuple | None],
                   tell: Callable[[Any, str, float | EvaluationError], None],
                   waiting: Callable[[], Any] = contextlib.nullcontext) -> None:
    """K evaluations kept in flight in threads until ``ask`` has nothing more and none is
    left: ``ask(tags in flight)`` gives the next ``(evaluator, item, tag, clock)`` or
    None; each result (a score or the EvaluationError raised) goes to ``tell(tag, item,
    result)`` in the order they finished, in the caller's thread. Waits are in slices
    (:data:`bayeval.evaluators.WAIT_SLICE`, so a signal is taken at once) inside
    ``waiting()``; on the way out every evaluator still in flight is cancelled. A session
    (:func:`run_session`) and a suite (:meth:`bayeval.loop.suite.SuiteRun.run`) both stream
    through it."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    from bayeval.evaluators.base import WAIT_SLICE

    pool = ThreadPoolExecutor(concurrency, thread_name_prefix="bayeval-eval")
    flying: dict[Any, tuple[Callable[..., float], str, Any]] = {}
    try:
        while True:
            while len(flying) < concurrency:
                nxt = ask([tag for *_, tag in flying.values()])
                if nxt is None:
                    break
                evaluator, item, tag, clock = nxt
                flying[pool.submit(_attempt, evaluator, (item,), clock)] = (evaluator, item,
                                                                           tag)
            if not flying:
                return
            finished: set = set()
            with waiting():
                while not finished:  # in slices: see bayeval.evaluators.WAIT_SLICE
                    finished, _ = wait(flying, timeout=WAIT_SLICE,
                                       return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: f.result()[1]):
                _, item, tag = flying.pop(future)
                tell(tag, item, future.result()[0])
    finally:
        for evaluator in {id(e): e for e, *_ in flying.values()}.values():
            cancel = getattr(evaluator, "cancel", None)
            if cancel is not None:
                cancel()
        pool.shutdown(wait=False, cancel_futures=True)


def _attempt(evaluator: Callable[..., float], args: tuple,
             clock: RunTimes) -> tuple[float | EvaluationError, float]:
    """``evaluator(*args)``, timed: (its score or the EvaluationError it raised, when it
    finished); any other exception propagates. Results that finish together are told in
    the order they finished."""
    with clock.evaluating(1):
        try:
            result = evaluator(*args)
        except EvaluationError as exc:
            result = exc
    return result, time.perf_counter()


def _answer(result: float | EvaluationError) -> Callable[..., float]:
    """An evaluator that gives one precomputed result of a batch (raising it if it is an
    error), so that a batch's results pass through the one evaluate-or-skip step."""
    def give(*_: str) -> float:
        if isinstance(result, EvaluationError):
            raise result
        return result
    return give


__all__ = ["evaluate_or_skip", "keep_in_flight", "run_session"]
