"""Simulated evaluation runs: the Session's loop, jitted and vmapped over runs.

A run evaluates one target (its full score row is known) with one seed, or, for a method
with a target axis (multi-target BayesAME), T targets at once: its positions are then the
(target, item) cells t · N + i and its estimates carry a trailing target axis. Runs sharing a
reference matrix share the initial posterior; they advance in lock-step inside one
``jax.lax.while_loop`` (a ``vmap`` over runs inside), so that a re-fit every F steps is a
real branch for all runs at once. Runs are processed in chunks sized to a memory budget.

Item choices use the same keys as :class:`~bayeval.loop.session.Session` (step t of a run with
seed s draws with ``fold_in(key(s), t)``), so a simulated run and a Session with the same
seed and answers choose the same items.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.devices import device_count, over_runs, pad_runs
from bayeval.estimators.base import Draw
from bayeval.hparams import Program
from bayeval.inference.base import nothing_done
from bayeval.loop.call_sizes import CallRule, ahead_allowed, call_size
from bayeval.methods import Method
from bayeval.types import Array, SimulationResult

__all__ = ["SimulationResult", "completion_delay", "concatenate", "simulate"]


def _tree_bytes(tree) -> int:
    return sum(int(np.prod(x.shape)) * x.dtype.itemsize for x in jax.tree_util.tree_leaves(tree))


@functools.lru_cache(maxsize=32)
def _compile_chunk(program: Program, n_steps: int, until_stop: bool,
                   n_devices: int = 1) -> Callable:
    """The jitted chunk runner ``(values, loops, keys, targets)`` of :func:`_chunk_runner`,
    cached per (program, n_steps, until_stop, devices) so that repeated simulations of one
    method, or of methods differing only in traced settings ``values``
    (:mod:`bayeval.hparams`), compile once."""

    def run(values, loops, keys, targets):
        return _chunk_runner(program.rebuild(values), n_steps, until_stop)(loops, keys,
                                                                           targets)

    return jax.jit(over_runs(run, (False, True, True, True), n_devices))


def _chunk_runner(method: Method, n_steps: int, until_stop: bool) -> Callable:
    """The chunk runner ``(loops, keys, targets)`` of one method. A round is the Session's:
    the method's :meth:`~bayeval.methods.Method.ask` and
    :meth:`~bayeval.methods.Method.tell`, vmapped over runs (a re-fit due runs for every
    run at once, one after another). With several devices each runs its share of the
    chunk's runs as its own loop (:func:`bayeval.devices.over_runs`), so ``t_end`` is per
    run: the steps its device's loop took."""
    backend = method.backend

    def one_select(loop, available, key, t):
        items, draws = method.ask(loop, available, key, t, 1)
        return items[0].astype(jnp.int32), jax.tree_util.tree_map(lambda x: x[0], draws)

    v_select = jax.vmap(one_select, in_axes=(0, 0, 0, None))
    v_compact = jax.vmap(backend.compact) if backend.compact is not None else None

    def v_refit(states, keys):
        # one run after another: a vmapped L-BFGS (nested while-loops over a batch) stalls
        # on the CPU backend, and re-fits are a small share of the steps
        return jax.lax.map(lambda sk: backend.refit(*sk), (states, keys))

    def run(loops, keys, targets):
        R = targets.shape[0]
        rows = jnp.arange(R)
        loops = jax.vmap(method.begin)(loops, keys)
        shape = loops.estimate.value.shape  # (R,) or (R, T) with a target axis
        records = _empty_records(R, n_steps, shape[1:])
        available = jnp.ones(targets.shape, bool)
        stop_n = jnp.zeros(shape, jnp.int32)
        refit_keys = jax.vmap(method.refit_key)(keys)
        quiet = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (R,)), nothing_done())
        counts = jnp.zeros(R, jnp.int32)

        def cond(carry):
            t, *_, stop_n, _, _, _ = carry
            going = t < n_steps
            if until_stop:
                going &= jnp.any(stop_n == 0)
            return going

        def body(carry):
            t, loops, available, stop_n, records, refits, failed = carry
            items, draws = v_select(loops, available, keys, t)
            predicted = _predicted(loops, rows, items)
            keys_t = jax.vmap(jax.random.fold_in, in_axes=(0, None))(refit_keys, t + 1)
            loops, stop, info = method.tell(
                loops, items, targets[rows, items], draws, t + 1, keys_t, over=jax.vmap,
                maintain=lambda s, n, k: method.maintain(s, n, k, v_refit, v_compact, quiet))
            refits = refits + info.refitted
            failed = failed + (info.refitted & ~info.accepted)
            stop_n = jnp.where((stop_n == 0) & stop, t + 1, stop_n)
            if not method.with_replacement:
                available = available.at[rows, items].set(False)
            records = _write_records(records, rows, t, loops.estimate, items, predicted, info)
            return t + 1, loops, available, stop_n, records, refits, failed

        carry = (0, loops, available, stop_n, records, counts, counts)
        t_end, *_, stop_n, records, refits, failed = jax.lax.while_loop(cond, body, carry)
        return records, stop_n, jnp.full(R, t_end, jnp.int32), refits, failed

    return run


def _predicted(loops, rows: Array, items: Array) -> Array:
    """Each run's prediction of the score of its position ``items`` (a cell t · N + i
    with a target axis), from the state before that score is observed."""
    return loops.prediction.item_mean.reshape(rows.shape[0], -1)[rows, items]


def _empty_records(R: int, n_steps: int, tail: tuple = ()) -> dict[str, Array]:
    """What a chunk records per run and step (``tail``: a target axis): the estimate,
    its variance and bounds, the item, the model's prediction of its score made before
    it was observed, and a re-fit's R̂ and divergences there."""
    records = {name: jnp.zeros((R, n_steps, *tail)) for name in (
        "estimate", "var", "lower", "upper")}
    records["items"] = jnp.zeros((R, n_steps), jnp.int32)
    records["predicted"] = jnp.zeros((R, n_steps))
    records["r_hat"] = jnp.full((R, n_steps), jnp.nan)
    records["divergences"] = jnp.zeros((R, n_steps), jnp.int32)
    return records


def _write_records(records: dict[str, Array], rows: Array, step: Array, est, items: Array,
                   predicted: Array, info, where: Array | bool = True) -> dict[str, Array]:
    """``records`` with step ``step`` (a step per run, or one for all) of each run set to
    its estimate ``est``, item, the ``predicted`` score of the item and re-fit
    diagnostics ``info``, where ``where`` holds."""
    values = {"estimate": est.value, "var": est.var, "lower": est.lower, "upper": est.upper,
              "items": items, "predicted": predicted,
              "r_hat": jnp.where(info.refitted, info.r_hat, jnp.nan),
              "divergences": jnp.where(info.refitted, info.divergences, 0)}
    out = {}
    for name, value in values.items():
        old = records[name][rows, step]
        keep = jnp.reshape(where, jnp.shape(where) + (1,) * (jnp.ndim(old) - jnp.ndim(where)))
        out[name] = records[name].at[rows, step].set(jnp.where(keep, value, old))
    return out


DELAY_STREAM = 2**31 - 2  # fold_in of a run's key: the stream of its completion delays


def completion_delay(key: Array, order: Array, item_time: Array) -> Array:
    """How long the evaluation of the round drawn ``order``-th takes in a simulated
    streaming run: ``item_time`` (the item's mean time) × an Exp(1) draw from the run's
    delay stream ``fold_in(fold_in(key, DELAY_STREAM), order)``."""
    stream = jax.random.fold_in(jax.random.fold_in(key, DELAY_STREAM), order)
    return item_time * jax.random.exponential(stream, (), jnp.float64)


@functools.lru_cache(maxsize=32)
def _compile_stream_chunk(program: Program, n_steps: int, until_stop: bool, concurrency: int,
                          batch: int, n_devices: int = 1,
                          call_rule: CallRule | None = None) -> Callable:
    """:func:`_stream_runner` jitted, its traced settings the first argument (as
    :func:`_compile_chunk`)."""

    def run(values, loops, keys, targets, item_times):
        return _stream_runner(program.rebuild(values), n_steps, until_stop, concurrency,
                              batch, call_rule)(loops, keys, targets, item_times)

    return jax.jit(over_runs(run, (False, True, True, True, True), n_devices))


def _stream_runner(method: Method, n_steps: int, until_stop: bool, concurrency: int,
                   batch: int, call_rule: CallRule | None = None) -> Callable:
    """The chunk runner of a streaming run (docs/methods.md §9 "Streaming"): up to
    ``concurrency`` evaluations in flight, each finishing after
    :func:`completion_delay`; or, with ``batch`` > 1, batches of ``batch`` items drawn
    from one state and finishing together (with ``call_rule``, calls of
    :func:`~bayeval.loop.call_sizes.call_size` items). Rounds are drawn one at a time with the key
    ``fold_in(key, d)`` (d: the draw's place in the draw order) from the state of the
    rounds applied so far, and applied in draw order once each earlier round's score has
    arrived: the Session's loop when scores are told as they finish. An iteration of a run
    moves its clock to the next finish when it can neither apply nor draw, applies the
    next round if its score is in, and then draws if a slot is free and no applied round
    is waiting, as the Session does (it applies every answered round before the next
    ask)."""
    quiet0 = nothing_done()
    batched = batch > 1 or (call_rule is not None and concurrency == 1)
    # with K in flight the rule's taper caps the rounds drawn ahead of the estimate
    ahead_rule = None if batched else call_rule

    def one_select(loop, available, key, counter):
        items, draws = method.ask(loop, available, key, counter, 1)
        return items[0].astype(jnp.int32), jax.tree_util.tree_map(lambda x: x[0], draws)

    v_select = jax.vmap(one_select)

    def v_maintain(states, n, keys, applied):
        # run by run (a real branch for each: a re-fit costs only where it is due)
        def one(args):
            state, n, key, applied = args
            return jax.lax.cond(applied, lambda: method.maintain(state, n, key),
                                lambda: (state, quiet0))

        return jax.lax.map(one, (states, n, keys, applied))

    def pick(mask, new, old):
        def choose(a, b):
            m = mask.reshape(mask.shape + (1,) * (a.ndim - 1))
            return jnp.where(m, a, b)

        return jax.tree_util.tree_map(choose, new, old)

    def run(loops, keys, targets, item_times):
        R, N = targets.shape
        rows = jnp.arange(R)
        slots = jnp.arange(n_steps)
        loops = jax.vmap(method.begin)(loops, keys)
        shape = loops.estimate.value.shape
        records = _empty_records(R, n_steps)
        refit_keys = jax.vmap(method.refit_key)(keys)
        zeros = jnp.zeros(R, jnp.int32)
        carry = dict(
            loops=loops, available=jnp.ones((R, N), bool),
            rounds=jnp.zeros((R, n_steps), jnp.int32),
            q=jnp.ones((R, n_steps)), design=jnp.ones((R, n_steps)),
            finish=jnp.full((R, n_steps), jnp.inf), drawn=zeros, applied=zeros,
            now=jnp.zeros(R), batch_end=jnp.full(R, batch, jnp.int32),
            stop_n=jnp.zeros(shape, jnp.int32), drawn_at_stop=zeros, calls=zeros,
            calls_at_stop=zeros, records=records,
            refits=zeros, failed=zeros)

        def live(c):
            # after the stop no round is drawn, and every round drawn before it is
            # applied once its score is in (docs/methods.md §9 "Batches")
            going = c["applied"] < n_steps
            if until_stop:
                going &= (c["stop_n"] == 0) | (c["applied"] < c["drawn"])
            return going

        def drawing(c):
            return live(c) & (c["stop_n"] == 0) if until_stop else live(c)

        def next_ready(c):
            head = jnp.minimum(c["applied"], n_steps - 1)
            return (c["applied"] < c["drawn"]) & (c["finish"][rows, head] <= c["now"])

        def in_flight(c):  # (R, n_steps): rounds drawn, not applied, not yet finished
            return ((slots[None, :] >= c["applied"][:, None])
                    & (slots[None, :] < c["drawn"][:, None])
                    & (c["finish"] > c["now"][:, None]))

        def slot_free(c):
            if batched:
                return c["drawn"] < c["batch_end"]
            free = jnp.sum(in_flight(c), 1) < concurrency
            if ahead_rule is not None:
                allowed = ahead_allowed(c["applied"], concurrency, ahead_rule, width(c), N)
                free &= (c["drawn"] - c["applied"]) < allowed
            return free

        def width(c):
            est = c["loops"].estimate
            return est.upper - est.lower

        def can_draw(c):
            if batched:  # a new batch once the last one is applied
                c = {**c, "batch_end": jnp.where(
                    c["applied"] == c["drawn"],
                    c["drawn"] + call_size(c["drawn"], batch, call_rule, width(c), N),
                    c["batch_end"])}
            return drawing(c) & (c["drawn"] < n_steps) & slot_free(c), c

        def body(c):
            on = live(c)
            drawable, _ = can_draw(c)
            stuck = on & ~next_ready(c) & ~drawable
            soonest = jnp.min(jnp.where(in_flight(c), c["finish"], jnp.inf), 1)
            c = {**c, "now": jnp.where(stuck & jnp.isfinite(soonest), soonest, c["now"])}
            # apply the next round where its score is in
            apply = on & next_ready(c)
            head = jnp.minimum(c["applied"], n_steps - 1)
            items = c["rounds"][rows, head]
            draws = Draw(c["q"][rows, head], c["design"][rows, head])
            n = head + 1
            predicted = _predicted(c["loops"], rows, items)
            keys_n = jax.vmap(jax.random.fold_in)(refit_keys, n)
            new, stop, info = method.tell(
                c["loops"], items, targets[rows, items], draws, n, keys_n, over=jax.vmap,
                maintain=lambda s, n, k: v_maintain(s, n, k, apply))
            loops = pick(apply, new, c["loops"])
            stopping = apply & (c["stop_n"] == 0) & stop
            records = _write_records(c["records"], rows, head, new.estimate, items,
                                     predicted, info, apply)
            c = {**c, "loops": loops, "records": records,
                 "applied": c["applied"] + apply,
                 "stop_n": jnp.where(stopping, n, c["stop_n"]),
                 "drawn_at_stop": jnp.where(stopping, c["drawn"], c["drawn_at_stop"]),
                 "calls_at_stop": jnp.where(stopping, c["calls"], c["calls_at_stop"]),
                 "refits": c["refits"] + (apply & info.refitted),
                 "failed": c["failed"] + (apply & info.refitted & ~info.accepted)}
            # then draw where a slot is free and no answered round waits
            drawable, c = can_draw(c)
            draw = drawable & ~next_ready(c)
            item, dr = v_select(c["loops"], c["available"], keys, c["drawn"])
            spot = jnp.minimum(c["drawn"], n_steps - 1)
            if batched:
                delay = jnp.ones(R)
            else:
                delay = jax.vmap(completion_delay)(keys, c["drawn"], item_times[rows, item])

            def put_round(name, value):
                return c[name].at[rows, spot].set(jnp.where(draw, value, c[name][rows, spot]))

            return {**c, "rounds": put_round("rounds", item), "q": put_round("q", dr.q),
                    "design": put_round("design", dr.design),
                    "finish": put_round("finish", c["now"] + delay),
                    "available": c["available"].at[rows, item].set(
                        c["available"][rows, item] & ~draw),
                    "drawn": c["drawn"] + draw,
                    # a call begins with a draw when every earlier one is applied
                    "calls": c["calls"] + (draw & (c["applied"] == c["drawn"]))}

        def cond(c):
            return jnp.any(live(c))

        c = jax.lax.while_loop(cond, body, carry)
        # a run reports once every round drawn before its stop is applied
        reported = jnp.where(c["stop_n"] > 0, c["drawn_at_stop"], 0)
        calls = jnp.where(c["stop_n"] > 0, c["calls_at_stop"], c["calls"])
        if not batched:  # with K in flight every evaluation is a call of its own
            calls = jnp.where(c["stop_n"] > 0, c["drawn_at_stop"], c["drawn"])
        return (c["records"], reported, c["applied"], c["refits"], c["failed"],
                (c["drawn_at_stop"], calls))

    return run


def simulate(method: Method, reference_scores: np.ndarray, targets: np.ndarray,
             seeds: Sequence[int], n_steps: int | None = None, until_stop: bool = False,
             memory_budget: float = 2e9,
             progress: Callable[[int, int], None] | None = None,
             devices: int | None = None, concurrency: int = 1, batch: int = 1,
             item_times: np.ndarray | None = None,
             call_rule: CallRule | None = None) -> SimulationResult:
    """Run ``method`` for every (target row, seed) pair given, exactly as a
    :class:`~bayeval.loop.session.Session` would (sampling with replacement included).

    Parameters
    ----------
    reference_scores: (M, N) reference matrix shared by all runs.
    targets: (R, N) full score rows of the targets, one per run (repeat a row for seeds);
        for a method with a target axis, (R, T, N): T targets per run. The result's
        estimates are then (R, steps, T), its items the cells t · N + i and its
        ``stop_n`` (R, T): when each target met its rule.
    seeds: R seeds.
    n_steps: observations (draws) per run (default N, or T · N: the full benchmark; above
        that only for methods that sample with replacement). With ``until_stop`` a
        chunk ends early once every run in it has met the stopping rule; later steps are
        then NaN.
    memory_budget: bytes of run state held at once; runs are chunked to fit.
    progress: called with (runs done, runs total) after each chunk.
    devices: how many local devices share each chunk's runs (default: all of them; see
        :mod:`bayeval.devices`). The runs' results do not depend on it.
    concurrency: evaluations in flight (docs/methods.md §9 "Streaming"): each round finishes
        after :func:`completion_delay` and its score is applied in draw order once every
        earlier one's is in; the next item is drawn as a slot frees. 1: one at a time.
    batch: items drawn together from one state and evaluated as one batch (a harness
        launch); the next batch is drawn once all of them are applied.
    call_rule: how a batched run sizes its calls, at most ``batch`` items each
        (:class:`~bayeval.loop.call_sizes.CallRule`: small first calls that grow, last
        calls cut to the items predicted left; None: every call ``batch`` items); with
        ``concurrency`` its taper alone, at most the items predicted left drawn ahead of
        the rounds applied (and never more than K in flight).
    item_times: (R, N) or (N,) mean evaluation time of each item (default 1), which
        scales the completion delays of a streaming run.

    With ``concurrency`` or ``batch`` above 1 the result's ``drawn_at_stop`` says how many
    items had been drawn (started) when the stopping rule fired. No item is drawn after
    the stop, and every one drawn before it is applied once its score is in (a batch is
    used whole; the evaluations in flight are waited for), so a run reports at
    ``stop_n`` = ``drawn_at_stop``: no evaluation is run for nothing (docs/methods.md §9
    "Batches").
    """
    targets = np.asarray(targets, dtype=np.float64)
    if targets.ndim not in (2, 3) or np.isnan(targets).any():
        raise ValueError("targets must be complete (R, N) score rows, or (R, T, N) for "
                         "several targets per run")
    if targets.ndim == 3 and not method.several_targets:
        raise ValueError(f"method {method.name!r} evaluates one target per run: give "
                         "(R, N) rows")
    several = method.several_targets
    if several and targets.ndim == 2:
        targets = targets[:, None, :]  # one target per run, on the target axis
    seeds = np.asarray(seeds, dtype=np.int64)
    R, N = targets.shape[0], targets.shape[-1]
    T = targets.shape[1] if several else 1
    if seeds.shape != (R,):
        raise ValueError(f"need one seed per target row: {R} rows, {seeds.size} seeds")
    cells = T * N
    n_steps = cells if n_steps is None else int(n_steps)
    if n_steps < 1 or (n_steps > cells and not method.with_replacement):
        raise ValueError(f"n_steps must be in 1..{cells}")
    if call_rule is not None:
        call_rule = CallRule(*call_rule).check()
    if concurrency < 1 or batch < 1 or (concurrency > 1 and batch > 1):
        raise ValueError(f"give concurrency ≥ 1 or batch ≥ 1, not both above 1 (got "
                         f"{concurrency} and {batch})")
    streaming = concurrency > 1 or batch > 1 or call_rule is not None
    if streaming and (several or method.with_replacement):
        raise ValueError(f"method {method.name!r} evaluates one item at a time: "
                         "concurrency and batch need one target and draws without "
                         "replacement")
    if concurrency > 1 and not method.estimator.needs_probabilities:
        raise ValueError(f"method {method.name!r}: a streaming simulation applies rounds in "
                         "draw order, as a design-based estimator does; a model-based "
                         "Session applies scores as they arrive (simulate it with "
                         "batch=K instead)")
    times = np.ones((R, N)) if item_times is None else np.broadcast_to(
        np.asarray(item_times, np.float64), (R, N))
    if streaming and not (np.all(np.isfinite(times)) and np.all(times > 0)):
        raise ValueError("item_times must be positive and finite")
    loop0 = method.start(reference_scores, N, T)
    truth = targets.mean(axis=-1)
    targets = targets.reshape(R, cells)
    per_run = 4 * (_tree_bytes(loop0) + 5 * n_steps * 8 * T)
    chunk = int(max(1, min(R, memory_budget // max(per_run, 1))))
    n_devices = device_count(devices, chunk)
    chunk = pad_runs(chunk, n_devices)
    if streaming:
        run = functools.partial(_compile_stream_chunk(
            method.compiled_as, n_steps, until_stop, concurrency, batch, n_devices, call_rule),
            method.hyper_values)
    else:
        plain = _compile_chunk(method.compiled_as, n_steps, until_stop, n_devices)

        def run(loops, keys, targets, times):
            return (*plain(method.hyper_values, loops, keys, targets), None)
    out = {k: [] for k in ("estimate", "var", "lower", "upper", "items", "r_hat",
                           "divergences", "predicted")}
    stops, refit_counts, failed_counts, drawn, calls = [], [], [], [], []
    for start in range(0, R, chunk):
        size = min(chunk, R - start)
        # a last chunk short of a multiple of the devices repeats its first run
        width = pad_runs(size, n_devices)
        fill = np.r_[np.arange(start, start + size), np.full(width - size, start)]

        def widen(x, width=width):
            return jnp.broadcast_to(x, (width, *jnp.shape(x)))

        keys = jax.vmap(jax.random.key)(jnp.asarray(seeds[fill]))
        records, stop_n, t_end, refits, failed, at_stop = run(
            jax.tree_util.tree_map(widen, loop0), keys, jnp.asarray(targets[fill]),
            jnp.asarray(times[fill]))
        if at_stop is not None:
            drawn.append(np.asarray(at_stop[0])[:size])
            calls.append(np.asarray(at_stop[1])[:size])
        t_end = np.asarray(t_end)[:size]
        for k in out:
            values = np.asarray(records[k])[:size]
            if k in ("estimate", "var", "lower", "upper", "predicted"):  # steps after
                # an early end (until_stop) were not taken
                taken = np.arange(n_steps)[None, :] < t_end[:, None]
                values = np.where(taken.reshape(*taken.shape, *([1] * (values.ndim - 2))),
                                  values, np.nan)
            out[k].append(values)
        stops.append(np.asarray(stop_n)[:size])
        refit_counts.append(np.asarray(refits)[:size])
        failed_counts.append(np.asarray(failed)[:size])
        if progress is not None:
            progress(start + size, R)
    arrays = {k: np.concatenate(v) for k, v in out.items()}
    stop_n = np.concatenate(stops)
    return SimulationResult(arrays["estimate"], arrays["var"], arrays["lower"],
                            arrays["upper"], arrays["items"], stop_n, truth,
                            np.concatenate(refit_counts), np.concatenate(failed_counts),
                            arrays["r_hat"], arrays["divergences"],
                            np.concatenate(drawn) if drawn else None, arrays["predicted"],
                            np.concatenate(calls) if calls else None)


def concatenate(parts: Sequence[SimulationResult]) -> SimulationResult:
    """The runs of several :func:`simulate` calls of the same length as one result."""
    return SimulationResult(*(None if any(p is None for p in x) else np.concatenate(x)
                              for x in zip(*parts, strict=True)))
