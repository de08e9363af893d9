"""Runs spread over every local device: the run axis of a vmapped engine split across a
one-dimensional mesh, each device running its share of the runs as its own program.

The engines (:func:`bayeval.loop.simulate.simulate`, FAQ's
:func:`~bayeval.methods.faq.simulate_hybrid`) batch independent runs along a leading axis.
:func:`over_runs` wraps such a function in :func:`jax.shard_map` over a mesh named
``"runs"``: arguments marked as batched are split along their first axis, the others
are copied to every device, and the outputs are gathered back along the run axis. A run's
result depends only on its own inputs and keys, so it is the same whichever device runs
it and however many there are (the tests check 1 against 2 devices).

On a GPU host the devices are the accelerators. On CPU, JAX makes one device by default;
:func:`use_cpu_cores` makes one per core (the ``bayeval`` command calls it before JAX
starts when ``BAYEVAL_CPU_DEVICES`` is set), so that the runs of one chunk go to separate
cores as separate programs. On a 2-core CPU that is no faster than one device
(docs/results/cores.md): there the second core is used by worker processes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

__all__ = ["cpu_cores", "device_count", "keep_compiled_programs", "over_runs", "pad_runs",
           "prepare_jax", "release_compiled_programs", "use_cpu_cores"]

AXIS = "runs"


def cpu_cores() -> int:
    """Cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def use_cpu_cores(n: int | None = None) -> int:
    """Make JAX's CPU backend one device per core (``n`` devices; default: the cores this
    process may use, or ``BAYEVAL_CPU_DEVICES`` when set). Must run before JAX starts its
    CPU backend; afterwards it changes nothing and returns the count JAX already has.
    Returns the number of CPU devices."""
    import jax

    if n is None:
        env = os.environ.get("BAYEVAL_CPU_DEVICES", "").strip()
        if env:
            try:
                n = int(env)
            except ValueError:
                raise ValueError(f"BAYEVAL_CPU_DEVICES must be a whole number, got "
                                 f"{env!r}") from None
        else:
            n = cpu_cores()
    if n < 1:
        raise ValueError(f"need at least one CPU device, got {n}")
    try:
        jax.config.update("jax_num_cpu_devices", int(n))
    except (RuntimeError, AttributeError):  # backend already started, or an older JAX
        pass
    return len(jax.devices("cpu"))


def keep_compiled_programs() -> None:
    """Keep JAX's compiled programs on disk between processes, under
    ``$JAX_COMPILATION_CACHE_DIR`` when that is set (JAX's own variable), else
    ``$XDG_CACHE_HOME/bayeval/jax`` (default ``~/.cache``): the ``bayeval`` command and
    the benches' worker processes compile each program once per machine."""
    import jax

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = (os.environ.get("JAX_COMPILATION_CACHE_DIR", "").strip()
                 or os.path.join(base, "bayeval", "jax"))
    try:
        jax.config.update("jax_compilation_cache_dir", directory)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    except (AttributeError, ValueError):  # an older JAX without these options
        pass


def prepare_jax() -> None:
    """What a live run (:func:`bayeval.evaluate`, every ``bayeval`` command) sets up when
    JAX starts: compiled programs kept on disk (:func:`keep_compiled_programs`), and with
    ``BAYEVAL_CPU_DEVICES`` set that many CPU devices (:func:`use_cpu_cores`; a bad value
    is a one-line :class:`~bayeval.errors.BayevalError`). Float64 stays the caller's
    choice (:mod:`bayeval.precision`)."""
    from bayeval.errors import BayevalError

    if os.environ.get("BAYEVAL_CPU_DEVICES", "").strip():
        try:
            use_cpu_cores()
        except ValueError as exc:
            raise BayevalError(str(exc)) from None
    keep_compiled_programs()


def memory_maps() -> tuple[int, int] | None:
    """``(mappings, limit)``: how many memory mappings this process holds and the most the
    kernel allows one process (``vm.max_map_count``); None where the system does not say
    (not Linux)."""
    try:
        with open("/proc/sys/vm/max_map_count", "rb") as f:
            limit = int(f.read())
        with open("/proc/self/maps", "rb") as f:
            count = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except (OSError, ValueError):
        return None
    return count, limit


def release_compiled_programs(share: float = 0.5) -> bool:
    """Drop the compiled programs JAX holds in memory (:func:`jax.clear_caches`) when this
    process's memory mappings pass ``share`` of the kernel's limit; True when it did.

    XLA's CPU backend maps each loaded executable's code and data separately (about six
    mappings per program). A process that runs many differently shaped programs (a bench
    worker going through datasets, a test process) reaches Linux's default limit of 65,530
    mappings after ~10,000 programs; the next mapping then fails inside XLA ("Failed to
    materialize symbols") and the error's unwinding crashed the process. Dropped programs
    are compiled again when next called, from the persistent cache
    (:func:`keep_compiled_programs`): a cost of time, never of results."""
    found = memory_maps()
    if found is None or found[0] < share * found[1]:
        return False
    import gc

    import jax

    jax.clear_caches()
    gc.collect()
    return True


def device_count(devices: int | None = None, runs: int | None = None) -> int:
    """How many devices the engines use: ``devices`` (at most the local count) or all
    local devices of the default backend; one when a chunk of ``runs`` runs has fewer
    runs than that (the padded devices would only repeat a run)."""
    import jax

    local = jax.local_device_count()
    if devices is not None and not 1 <= devices <= local:
        raise ValueError(f"devices must be in 1..{local} (this process sees {local}), "
                         f"got {devices}")
    count = local if devices is None else int(devices)
    return 1 if runs is not None and runs < count else count


def pad_runs(n_runs: int, n_devices: int) -> int:
    """The smallest multiple of ``n_devices`` that holds ``n_runs`` runs."""
    return -(-n_runs // n_devices) * n_devices


def over_runs(fn: Callable, batched: Sequence[bool], n_devices: int) -> Callable:
    """``fn`` with its run axis split over the first ``n_devices`` local devices.

    ``batched[i]`` says whether argument i carries the run axis first (split) or is shared
    (copied); every output carries the run axis first. The run count must be a multiple
    of ``n_devices`` (:func:`pad_runs`). With one device this is ``fn`` itself. The result
    is not jitted: wrap it in :func:`jax.jit`."""
    if n_devices == 1:
        return fn
    import jax
    import numpy as np
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.asarray(jax.local_devices()[:n_devices]), (AXIS,))
    specs = tuple(P(AXIS) if b else P() for b in batched)
    # check_vma off: the engines' loops start from carries built inside the function
    # (zeros, broadcast priors) that JAX would otherwise ask to be marked per-device
    return jax.shard_map(fn, mesh=mesh, in_specs=specs, out_specs=P(AXIS), check_vma=False)
