"""Python objects as evaluators of :func:`bayeval.evaluate`: what a notebook user already
holds, run as the command line's evaluators run (journaled, resumable, with ``batch`` or
``concurrency``).

* a function ``item_id -> score`` (:class:`~bayeval.evaluators.base.CallableEvaluator`);
* a batch function ``list[item_id] -> list[score]``, marked with :func:`batched`
  (:class:`BatchFunction`: one call per batch of ``batch`` items);
* an ``async`` function ``item_id -> score`` (:class:`AsyncFunction`: with
  ``concurrency`` K, K calls in flight on one event loop of its own);
* a harness ``LM`` object the user built (``HFLM(pretrained=model)``), run as the
  in-process harness evaluator runs (:class:`~bayeval.evaluators.harness.LmEvalInProcess`
  with ``lm=``);
* an Inspect ``Task`` object or task function (with its task arguments), and a model name
  or ``Model`` object (:class:`~bayeval.evaluators.inspect_eval.InspectEvaluator`).

:func:`evaluator_kind_of` says which evaluator kind such an object is; a function cannot
be stored in a journal, so its journal says ``python`` and :func:`bayeval.resume` takes it
again (``resume(journal, evaluator=fn)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from bayeval.data.matrix import validate_score
from bayeval.errors import DataError, EvaluationError
from bayeval.evaluators.base import WAIT_SLICE, BatchEvaluator, CallableEvaluator

__all__ = ["PYTHON", "AsyncFunction", "BatchFunction", "batched", "describe",
           "evaluator_kind_of", "is_harness_lm", "is_inspect_task", "python_evaluator"]

# the journal's evaluator kind of a Python function (it cannot be stored: a resume takes
# it again)
PYTHON = "python"


def batched(fn: Callable[[list[str]], Sequence[float]]) -> BatchFunction:
    """Mark ``fn(items) -> scores`` as a batch function: :func:`bayeval.evaluate` calls it
    once per batch of ``batch`` items (e.g. a model's batched generation), one score per
    item in order."""
    return BatchFunction(fn)


def _score(value: Any, item: str) -> float | EvaluationError:
    try:
        return validate_score(value, f"item {item!r}")
    except DataError as exc:
        return EvaluationError(str(exc))


class BatchFunction(BatchEvaluator):
    """A function of a batch of item ids, giving their scores in order (:func:`batched`).
    An exception, or a list of another length, fails every item of the batch; a value
    that is not a score in [0, 1] fails its item."""

    def __init__(self, fn: Callable[[list[str]], Sequence[float]]) -> None:
        if not callable(fn):
            raise TypeError(f"batched() takes a function, got {type(fn).__name__}")
        self.fn = fn
        self.launches = 0
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def evaluate_batch(self, items: Sequence[str]) -> list[float | EvaluationError]:
        self.launches += 1
        try:
            scores = list(self.fn(list(items)))
        except Exception as exc:  # a user's function may raise anything
            return [EvaluationError(f"item {item!r}: the batch function raised "
                                    f"{type(exc).__name__}: {exc}") for item in items]
        if len(scores) != len(items):
            return [EvaluationError(f"the batch function gave {len(scores)} scores for "
                                    f"{len(items)} items") for _ in items]
        return [_score(s, item) for s, item in zip(scores, items, strict=True)]


class AsyncFunction:
    """An ``async`` function ``item -> score`` run on one event loop in a thread of its
    own: each call submits a coroutine and waits for it (in slices, so that Ctrl-C is
    taken at once), so that K evaluations in flight (``concurrency``) are K coroutines on
    that loop. :meth:`cancel` cancels those in flight; :meth:`close` ends the loop."""

    def __init__(self, fn: Callable[[str], Any]) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._flying: set[Future] = set()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, daemon=True,
                                          name="bayeval-async-evaluator")
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    async def _one(self, item: str) -> Any:
        return await self.fn(item)

    def __call__(self, item: str) -> float:
        from concurrent.futures import CancelledError as FutureCancelled
        from concurrent.futures import wait

        from bayeval.evaluators.base import CancelledError

        future = asyncio.run_coroutine_threadsafe(self._one(item), self._running_loop())
        with self._lock:
            self._flying.add(future)
        try:
            while not future.done():  # in slices: a signal is taken at once
                wait([future], timeout=WAIT_SLICE)
            value = future.result()
        except FutureCancelled:
            raise CancelledError(f"item {item!r}: the run was stopped") from None
        except Exception as exc:  # a user's coroutine may raise anything
            raise EvaluationError(f"item {item!r}: evaluator raised "
                                  f"{type(exc).__name__}: {exc}") from None
        except BaseException:  # Ctrl-C, SIGTERM: the coroutine is cancelled too
            future.cancel()
            raise
        finally:
            with self._lock:
                self._flying.discard(future)
        score = _score(value, item)
        if isinstance(score, EvaluationError):
            raise score
        return score

    def cancel(self) -> None:
        """Cancel the coroutines in flight (the run stopped)."""
        with self._lock:
            flying = list(self._flying)
        for future in flying:
            future.cancel()

    def close(self) -> None:
        """End the event loop and its thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None:
            with contextlib.suppress(Exception):  # the cancelled coroutines run to their end
                asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(timeout=5)
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(timeout=5)
            if not loop.is_running():
                loop.close()


async def _cancel_all() -> None:
    """Cancel every other task of the running loop and wait for them to finish (their
    ``finally`` blocks run)."""
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


def _is_async(obj: Any) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    call = type(obj).__dict__.get("__call__") if not inspect.isfunction(obj) else None
    return inspect.iscoroutinefunction(obj) or inspect.iscoroutinefunction(call)


def is_harness_lm(obj: Any) -> bool:
    """Whether ``obj`` is an lm-evaluation-harness model (an ``lm_eval.api.model.LM``),
    without importing the harness when it is not loaded."""
    import sys

    module = sys.modules.get("lm_eval.api.model")
    return module is not None and isinstance(obj, module.LM)


def is_inspect_task(obj: Any) -> bool:
    """Whether ``obj`` is an Inspect ``Task`` or a function registered with ``@task``."""
    import sys

    if "inspect_ai" not in sys.modules:
        return False
    from inspect_ai import Task

    if isinstance(obj, Task):
        return True
    info = getattr(obj, "__registry_info__", None)  # what Inspect's @task attaches
    return getattr(info, "type", None) == "task"


def is_inspect_model(obj: Any) -> bool:
    import sys

    if "inspect_ai" not in sys.modules:
        return False
    from inspect_ai.model import Model

    return isinstance(obj, Model)


def evaluator_kind_of(obj: Any) -> str:
    """The evaluator kind a Python object is: ``lm-eval`` (a harness LM), ``inspect`` (an
    Inspect task), or :data:`PYTHON` (a function, batch function or async function)."""
    if is_harness_lm(obj):
        return "lm-eval"
    if is_inspect_task(obj):
        return "inspect"
    if callable(obj):
        return PYTHON
    raise EvaluationError(f"evaluator: a {type(obj).__name__} is not an evaluator (give a "
                          "kind, EvaluatorOptions, a function item -> score, "
                          "bayeval.batched(fn), an async function, a harness LM object or "
                          "an Inspect Task)")


def describe(obj: Any) -> str:
    """What a journal says of a Python evaluator: its kind and name."""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) \
        or type(obj).__name__
    if isinstance(obj, BatchFunction):
        return f"batch function {obj.__name__}"
    if _is_async(obj) or isinstance(obj, AsyncFunction):
        return f"async function {getattr(obj, '__name__', name)}"
    if is_harness_lm(obj):
        return f"harness LM {type(obj).__module__}.{type(obj).__name__}"
    if is_inspect_task(obj):
        return f"Inspect task {getattr(obj, 'name', None) or name}"
    return f"function {name}"


def python_evaluator(obj: Any, retries: int = 0) -> Any:
    """The evaluator of a function-like ``obj`` (:data:`PYTHON` kind): a batch function
    as it is, an ``async`` function on its own event loop, any other callable with
    ``retries`` retries of a failing call."""
    if isinstance(obj, BatchEvaluator | AsyncFunction):
        return obj
    if _is_async(obj):
        return AsyncFunction(obj)
    return CallableEvaluator(obj, retries=retries)
