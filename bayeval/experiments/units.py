"""One result cache for every bench, and the executors that fill it.

A bench divides its work into :class:`Unit` s — (bench, dataset, method, seed chunk) plus
every setting that changes the result — and hands them to :func:`run_units` with a
function ``compute(unit, data)``. Each finished unit is saved under ``OUT/units/`` as soon
as it is done (a DataFrame as parquet, a dict of arrays as npz), written to a temporary
name and renamed, so a crash never leaves half a file and a reader never sees one. A rerun
reads the finished units back and computes only the rest; a unit whose settings changed
has another file name, so it is never mistaken for the old one.

Several processes may share one ``OUT``: a process claims a unit (``<unit>.claim``,
created exclusively, holding its host and pid) before computing it, skips units that a
live process has claimed, and at the end waits for those (or computes them itself if their
claimant died). Two processes that still compute one unit write the same bytes under the
same name, so the last rename is as good as the first.

Executors: ``local`` with one worker computes in this process; with more it starts that
many worker processes, each pinned to its own core (JAX's CPU runtime keeps two cores busy
for one program's serial loop, so separate processes are what uses a second core; see
docs/results/cores.md); ``ray`` sends the units to a Ray cluster (``address``; none: a
local one with ``workers`` CPUs), one CPU each. The data (score matrices) go to each
worker once, not with every unit. A unit's result depends only on the unit and the data,
so every executor gives the same results.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bayeval.data.io import safe_file_name
from bayeval.errors import BayevalError

__all__ = ["EXECUTORS", "Executor", "ResultCache", "Unit", "run_units"]

EXECUTORS = ("local", "ray")
_HALF_WRITTEN_S = 10.0  # an unreadable claim is stale after this many seconds
_STALE_CLAIM_S = 24 * 3600.0  # a claim from another host older than this is abandoned


def _slug(text: str) -> str:
    return safe_file_name(text, "-_=.+") or "_"


def _plain(value: Any) -> Any:
    """A JSON-able form of a setting (tuples as lists, NumPy scalars as Python numbers)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass(frozen=True, eq=False)
class Unit:
    """One piece of a bench: ``method`` on ``dataset`` for runs (or seeds) ``first`` up to
    ``last``, under ``settings`` (every other input that changes the result)."""

    bench: str
    dataset: str
    method: str
    first: int
    last: int
    settings: Mapping[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def digest(self) -> str:
        """A hash of everything that identifies the unit's result (computed once: a unit
        is hashed at every lookup, thousands of times in a bench of thousands)."""
        text = json.dumps([self.bench, self.dataset, self.method, self.first, self.last,
                           _plain(dict(self.settings))], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unit) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def stem(self, root: Path) -> Path:
        """The unit's file under ``root`` without its suffix."""
        return (Path(root) / "units" / _slug(self.bench) / _slug(self.dataset)
                / _slug(self.method) / f"{self.first:06d}-{self.last:06d}-{self.digest}")

    def __str__(self) -> str:
        return f"{self.dataset} {self.method} [{self.first}, {self.last})"


Result = pd.DataFrame | dict


class ResultCache:
    """Finished units under ``root/units`` (module docstring)."""

    def __init__(self, root: Path | str):
        self.root = Path(root)

    def _path(self, unit: Unit, kind: str) -> Path:
        return unit.stem(self.root).with_suffix(".parquet" if kind == "frame" else ".npz")

    def get(self, unit: Unit) -> Result | None:
        """The unit's saved result, or None (never saved, or unreadable: then recomputed)."""
        frame, arrays = self._path(unit, "frame"), self._path(unit, "arrays")
        try:
            if frame.exists():
                return pd.read_parquet(frame)
            if arrays.exists():
                with np.load(arrays, allow_pickle=False) as saved:
                    return {k: saved[k] for k in saved.files}
        except (OSError, ValueError, KeyError):
            return None
        return None

    def put(self, unit: Unit, result: Result) -> Path:
        """Save ``result`` (a DataFrame, or a dict of arrays) atomically."""
        kind = "frame" if isinstance(result, pd.DataFrame) else "arrays"
        path = self._path(unit, kind)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            if kind == "frame":
                result.to_parquet(tmp, index=False)
            else:
                # text columns as Unicode arrays: an object array would need pickle
                arrays = {k: np.asarray(v) for k, v in result.items()}
                with open(tmp, "wb") as fh:
                    np.savez(fh, **{k: a.astype(str) if a.dtype == object else a
                                    for k, a in arrays.items()})
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path

    def _claim_path(self, unit: Unit) -> Path:
        return unit.stem(self.root).with_suffix(".claim")

    def claim(self, unit: Unit) -> bool:
        """Take the unit for this process; False when a live process holds it."""
        path = self._claim_path(unit)
        path.parent.mkdir(parents=True, exist_ok=True)
        holder = f"{socket.gethostname()} {os.getpid()}\n"
        for _ in range(2):
            try:
                _place_whole(path, holder)
            except FileExistsError:
                if not self._stale(path):
                    return False
                path.unlink(missing_ok=True)
                continue
            return True
        return False

    def release(self, unit: Unit) -> None:
        self._claim_path(unit).unlink(missing_ok=True)

    def held_elsewhere(self, unit: Unit) -> bool:
        """Whether a live process other than this one holds the unit's claim."""
        path = self._claim_path(unit)
        return path.exists() and not self._stale(path) and not self._mine(path)

    @staticmethod
    def _mine(path: Path) -> bool:
        try:
            host, pid = path.read_text().split()
        except (OSError, ValueError):
            return False
        return host == socket.gethostname() and int(pid) == os.getpid()

    @staticmethod
    def _stale(path: Path) -> bool:
        try:
            age = time.time() - path.stat().st_mtime
        except OSError:
            return True  # gone
        try:
            host, pid = path.read_text().split()
        except (OSError, ValueError):
            # unreadable: a claim of a writer that died mid-write (claims are placed
            # whole now), stale once it is older than any write could take
            return age > _HALF_WRITTEN_S
        if host != socket.gethostname():
            return age > _STALE_CLAIM_S
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except (PermissionError, ValueError):
            return False
        return False


def _place_whole(path: Path, text: str) -> None:
    """Create ``path`` holding ``text``, or raise FileExistsError when it exists: written
    whole under a private name and linked in place, so that no other process can read the
    file half-written (a claim read empty was taken for abandoned). On a file system
    without hard links: created exclusively, then written."""
    mine = path.with_name(f"{path.name}.{socket.gethostname()}.{os.getpid()}")
    mine.write_text(text)
    try:
        os.link(mine, path)
    except FileExistsError:
        raise
    except OSError:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
    finally:
        mine.unlink(missing_ok=True)


# ---------------------------------------------------------------------------- executors

_WORKER: dict[str, Any] = {}


def _prepare_worker() -> None:
    """A worker process computes as the ``bayeval`` command does: in float64, keeping
    compiled programs on disk."""
    from bayeval.devices import keep_compiled_programs
    from bayeval.precision import enable_float64

    enable_float64()
    keep_compiled_programs()


def _start_worker(cores: Any, data: Any) -> None:
    """Process-pool initializer: pin to one core (taken from a shared queue), prepare the
    process (:func:`_prepare_worker`), hold the bench's data."""
    try:
        core = cores.get_nowait() if cores is not None else None
    except Exception:  # queue empty: more workers than cores
        core = None
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    threading.Thread(target=_end_with_parent, args=(os.getppid(),), daemon=True,
                     name="bayeval-end-with-parent").start()
    _prepare_worker()
    _WORKER["data"] = data


def _end_with_parent(parent: int, every: float = 1.0) -> None:
    """A worker's watch: end this process once the bench that started it is gone (its
    parent changes: re-parented on the parent's death). A SIGKILL leaves the bench no
    handler to end its pool (:func:`_end_workers`), and a worker inside a unit would
    otherwise compute on for minutes with no one to read its result."""
    while os.getppid() == parent:
        time.sleep(every)
    os._exit(1)


def _computed(compute: Callable, unit: Unit, data: Any) -> tuple[Unit, Result]:
    """``(unit, compute(unit, data))``; afterwards the process drops its compiled programs
    when it holds too many (:func:`bayeval.devices.release_compiled_programs`): a worker
    going through many units of different shapes would otherwise run out of memory
    mappings."""
    from bayeval.devices import release_compiled_programs

    result = compute(unit, data)
    release_compiled_programs()
    return unit, result


def _worker_call(compute: Callable, unit: Unit) -> tuple[Unit, Result]:
    return _computed(compute, unit, _WORKER["data"])


def _taking(units: Sequence[Unit], take: Callable[[Unit], bool]) -> Iterator[Unit]:
    """The units ``take`` agrees to, each asked only when a worker is free for it (so
    that another process on the same ``out`` may take the rest meanwhile)."""
    return (unit for unit in units if take(unit))


def _local(compute: Callable, units: Sequence[Unit], data: Any, workers: int,
           take: Callable[[Unit], bool]) -> Iterator[tuple[Unit, Result]]:
    if workers <= 1 or len(units) <= 1:
        from bayeval.precision import enable_float64

        enable_float64()  # in this process, as a worker would (_prepare_worker)
        for unit in _taking(units, take):
            yield _computed(compute, unit, data)
        return
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    ctx = mp.get_context("spawn")  # a fresh JAX runtime per worker (fork would copy ours)
    cores = None
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except AttributeError:
        allowed = []
    if 1 < workers <= len(allowed):
        cores = ctx.Queue()
        for core in allowed[:workers]:
            cores.put(core)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                               initializer=_start_worker, initargs=(cores, data))
    try:
        queue, running = _taking(units, take), set()
        while True:
            for unit in queue:  # one unit per free worker
                running.add(pool.submit(_worker_call, compute, unit))
                if len(running) >= workers:
                    break
            if not running:
                break
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                yield future.result()
    except BaseException:  # Ctrl-C, SIGTERM, a failed unit, the consumer gone
        _end_workers(pool)
        raise
    pool.shutdown(wait=True)


def _end_workers(pool: Any) -> None:
    """End a process pool now: nothing queued starts and the workers are killed, so that
    an interrupted bench exits at once and leaves no process behind (a pool's own
    shutdown would wait for the units in flight, minutes each). Python 3.14's
    ``ProcessPoolExecutor.kill_workers`` does this; before it, the pool's processes are
    read from its ``_processes``."""
    kill = getattr(pool, "kill_workers", None)
    processes = list((getattr(pool, "_processes", None) or {}).values())
    if kill is not None:
        kill()
    else:
        for process in processes:
            with contextlib.suppress(Exception):
                process.kill()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(timeout=5)


def _ray(compute: Callable, units: Sequence[Unit], data: Any, workers: int,
         address: str | None, take: Callable[[Unit], bool]) -> Iterator[tuple[Unit, Result]]:
    try:
        import ray
    except ImportError:
        raise RuntimeError("--executor ray needs Ray: pip install 'bayeval[ray]'") from None
    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(1, workers), log_to_driver=False, include_dashboard=False)
    try:
        @ray.remote(num_cpus=1)
        def run_one(unit, shared):
            _prepare_worker()
            return _computed(compute, unit, shared)

        shared = ray.put(data)
        slots = max(1, int(ray.cluster_resources().get("CPU", workers)))
        queue, pending = _taking(units, take), []
        while True:
            for unit in queue:  # one unit per free CPU of the cluster
                pending.append(run_one.remote(unit, shared))
                if len(pending) >= slots:
                    break
            if not pending:
                return
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
    finally:
        if started:
            ray.shutdown()


@dataclass(frozen=True)
class Executor:
    """Where a bench's units run (module docstring): ``kind`` is ``local`` (this process
    with one worker, else ``workers`` processes pinned one per core) or ``ray`` (a Ray
    cluster at ``address``; none: a local one with ``workers`` CPUs)."""

    kind: str = "local"
    workers: int = 1
    address: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise BayevalError(f"--executor: unknown executor {self.kind!r} (known: "
                               f"{', '.join(EXECUTORS)})")
        if self.workers < 1:
            raise BayevalError(f"--workers must be at least 1, got {self.workers}")
        if self.address and self.kind != "ray":
            raise BayevalError("--address is the Ray cluster's: give it with --executor ray")
        if self.kind == "ray":
            import importlib.util

            if importlib.util.find_spec("ray") is None:
                raise BayevalError("--executor ray needs Ray, which is not installed: "
                                   "pip install 'bayeval[ray]'")

    @property
    def in_process(self) -> bool:
        """Whether units run in this process (so a progress callback sees each run)."""
        return self.kind == "local" and self.workers == 1

    def run(self, compute: Callable, units: Sequence[Unit], data: Any,
            take: Callable[[Unit], bool] = lambda unit: True
            ) -> Iterator[tuple[Unit, Result]]:
        """(unit, result) of every unit that ``take`` agrees to, as each finishes;
        ``take`` is asked for a unit only when a worker is free to start it."""
        if self.kind == "ray":
            return _ray(compute, units, data, self.workers, self.address, take)
        return _local(compute, units, data, self.workers, take)


def _eta(elapsed: float, done: int, total: int) -> str:
    """``, ~N min left`` at the pace so far (nothing before the first unit or after the
    last)."""
    if done <= 0 or done >= total:
        return ""
    left = elapsed / done * (total - done)
    return f", ~{left / 60:.0f} min left" if left >= 90 else f", ~{left:.0f} s left"


def run_units(units: Sequence[Unit], compute: Callable[[Unit, Any], Result], data: Any,
              out: Path | str | None, executor: Executor | None = None,
              log: Callable[[str], None] | None = None, poll_s: float = 1.0) -> list[Result]:
    """The result of every unit, in order: read from ``out``'s cache where finished,
    otherwise computed by ``compute(unit, data)`` on ``executor`` (default: this process)
    and saved as soon as it is done (``out`` None: nothing read or saved). ``compute``
    must be importable by name (a module-level function, or a :func:`functools.partial`
    of one) for worker processes and Ray."""
    executor = executor if executor is not None else Executor()
    say = log or (lambda line: None)
    wanted, units = units, list(dict.fromkeys(units))  # a unit asked twice runs once
    if out is None:  # nothing saved: compute every unit
        found = dict(executor.run(compute, units, data))
        return [found[u] for u in wanted]
    cache = ResultCache(out)
    results: dict[Unit, Result] = {}
    for unit in units:
        saved = cache.get(unit)
        if saved is not None:
            results[unit] = saved
    todo = [u for u in units if u not in results]
    if results:
        say(f"reusing {len(results)} of {len(units)} finished units from {cache.root}/units")
    start = time.monotonic()
    while todo:
        held: list[Unit] = []

        def take(unit: Unit, held: list[Unit] = held) -> bool:
            # claimed as a worker frees, so that another process on this out takes the
            # rest meanwhile; a unit another process finished is read, not redone
            if not cache.claim(unit):
                return False
            saved = cache.get(unit)
            if saved is not None:
                cache.release(unit)
                results[unit] = saved
                return False
            held.append(unit)
            return True

        try:
            for unit, result in executor.run(compute, todo, data, take):
                cache.put(unit, result)
                cache.release(unit)
                results[unit] = result
                done = sum(u in results for u in todo)
                say(f"unit {done}/{len(todo)} done: {unit}"
                    f"{_eta(time.monotonic() - start, done, len(todo))}")
        finally:
            for unit in held:
                cache.release(unit)
        left = []
        for unit in todo:  # held by another process: wait for it, or take it over
            if unit in results:
                continue
            while cache.held_elsewhere(unit) and cache.get(unit) is None:
                time.sleep(poll_s)
            saved = cache.get(unit)
            if saved is None:
                left.append(unit)
            else:
                results[unit] = saved
        todo, start = left, time.monotonic()
    return [results[u] for u in wanted]
