"""Simulated evaluation runs: the Session's loop, jitted and vmapped over runs.

A run evaluates one target (its full score row is known) with one seed. Runs sharing a
reference matrix share the initial posterior; they advance in lock-step inside one
``jax.lax.while_loop`` (a ``vmap`` over runs inside), so that a re-fit every F steps is a
real branch for all runs at once. Runs are processed in chunks sized to a memory budget.

Item choices use the same keys as :class:`~bayeval.session.Session` (step t of a run with
seed s draws with ``fold_in(key(s), t)``), so a simulated run and a Session with the same
seed and answers choose the same items.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.inference.base import advance
from bayeval.methods import Method


class SimulationResult(NamedTuple):
    """Per run r and step t (t = 0 is the first observation, so n = t + 1):"""

    estimate: np.ndarray  # (R, T) R̂_n
    var: np.ndarray  # (R, T) Var_n
    lower: np.ndarray  # (R, T) interval bounds (unclipped)
    upper: np.ndarray  # (R, T)
    items: np.ndarray  # (R, T) item chosen at step t
    stop_n: np.ndarray  # (R,) n at which the method's stopping rule first fired (0: never)
    truth: np.ndarray  # (R,) R* = mean of the target row


def _tree_bytes(tree) -> int:
    return sum(int(np.prod(x.shape)) * x.dtype.itemsize for x in jax.tree_util.tree_leaves(tree))


@functools.lru_cache(maxsize=32)
def _compile_chunk(method: Method, n_steps: int, until_stop: bool) -> Callable:
    """The jitted chunk runner, cached per (method, n_steps, until_stop) so that repeated
    simulations of one method compile once."""
    backend = method.backend

    def one_select(prediction, available, key, t):
        log_w = method.rule(prediction, available)
        return method.policy(jax.random.fold_in(key, t), log_w, available, 1)[0].astype(jnp.int32)

    def one_summary(state, stop_state):
        prediction = backend.predict(state)
        bounds = method.bounds(state, prediction)
        stop_state, stop = method.stopping.update(stop_state, prediction, bounds)
        return prediction, bounds, stop_state, stop

    v_select = jax.vmap(one_select, in_axes=(0, 0, 0, None))
    v_update = jax.vmap(backend.observe)
    v_compact = jax.vmap(backend.compact) if backend.compact is not None else None
    v_summary = jax.vmap(one_summary)
    def v_refit(states, keys):
        # one run after another: a vmapped L-BFGS (nested while-loops over a batch) stalls
        # on the CPU backend, and re-fits are a small share of the steps
        return jax.lax.map(lambda sk: backend.refit(*sk), (states, keys))

    def run(states, preds, stop_states, keys, targets):
        R = targets.shape[0]
        rows = jnp.arange(R)
        records = {name: jnp.zeros((R, n_steps)) for name in ("estimate", "var", "lower",
                                                              "upper")}
        records["items"] = jnp.zeros((R, n_steps), jnp.int32)
        available = jnp.ones(targets.shape, bool)
        stop_n = jnp.zeros(R, jnp.int32)
        refit_keys = jax.vmap(method.refit_key)(keys)

        def cond(carry):
            t, *_, stop_n, _ = carry
            going = t < n_steps
            if until_stop:
                going &= jnp.any(stop_n == 0)
            return going

        def body(carry):
            t, states, preds, stop_states, available, stop_n, records = carry
            items = v_select(preds, available, keys, t)
            scores = targets[rows, items]
            states = v_update(states, items, scores)
            keys_t = (jax.vmap(jax.random.fold_in, in_axes=(0, None))(refit_keys, t + 1)
                      if backend.refit_every else None)  # re-fit keys only where re-fits run
            states = advance(backend, states, t + 1, keys_t, v_refit, v_compact)
            preds, bounds, stop_states, stop = v_summary(states, stop_states)
            stop_n = jnp.where((stop_n == 0) & stop, t + 1, stop_n)
            available = available.at[rows, items].set(False)
            records = {
                "estimate": records["estimate"].at[:, t].set(preds.mean),
                "var": records["var"].at[:, t].set(preds.var),
                "lower": records["lower"].at[:, t].set(bounds[0]),
                "upper": records["upper"].at[:, t].set(bounds[1]),
                "items": records["items"].at[:, t].set(items),
            }
            return t + 1, states, preds, stop_states, available, stop_n, records

        carry = (0, states, preds, stop_states, available, stop_n, records)
        t_end, *_, stop_n, records = jax.lax.while_loop(cond, body, carry)
        return records, stop_n, t_end

    return jax.jit(run)


def simulate(method: Method, reference_scores: np.ndarray, targets: np.ndarray,
             seeds: Sequence[int], n_steps: int | None = None, until_stop: bool = False,
             memory_budget: float = 2e9,
             progress: Callable[[int, int], None] | None = None) -> SimulationResult:
    """Run ``method`` for every (target row, seed) pair given.

    Parameters
    ----------
    reference_scores: (M, N) reference matrix shared by all runs.
    targets: (R, N) full score rows of the targets, one per run (repeat a row for seeds).
    seeds: R seeds.
    n_steps: observations per run (default N: the full benchmark). With ``until_stop`` a
        chunk ends early once every run in it has met the stopping rule; later steps are
        then NaN.
    memory_budget: bytes of run state held at once; runs are chunked to fit.
    progress: called with (runs done, runs total) after each chunk.
    """
    targets = np.asarray(targets, dtype=np.float64)
    if targets.ndim != 2 or np.isnan(targets).any():
        raise ValueError("targets must be complete (R, N) score rows")
    seeds = np.asarray(seeds, dtype=np.int64)
    R, N = targets.shape
    if seeds.shape != (R,):
        raise ValueError(f"need one seed per target row: {R} rows, {seeds.size} seeds")
    n_steps = N if n_steps is None else int(n_steps)
    if not 1 <= n_steps <= N:
        raise ValueError(f"n_steps must be in 1..{N}")
    state0, pred0, _, stop0 = method.initial(reference_scores, N)
    per_run = 4 * (_tree_bytes(state0) + 5 * n_steps * 8)
    chunk = int(max(1, min(R, memory_budget // max(per_run, 1))))
    run = _compile_chunk(method, n_steps, until_stop)
    out = {k: [] for k in ("estimate", "var", "lower", "upper", "items")}
    stops = []
    for start in range(0, R, chunk):
        size = min(chunk, R - start)

        def batch(x, size=size):
            return jnp.broadcast_to(x, (size, *jnp.shape(x)))

        keys = jax.vmap(jax.random.key)(jnp.asarray(seeds[start:start + size]))
        records, stop_n, t_end = run(jax.tree_util.tree_map(batch, state0),
                              jax.tree_util.tree_map(batch, pred0),
                              jax.tree_util.tree_map(batch, stop0), keys,
                              jnp.asarray(targets[start:start + size]))
        for k in out:
            values = np.asarray(records[k])
            if k != "items":  # steps after an early end (until_stop) were not taken
                values = np.where(np.arange(n_steps) < int(t_end), values, np.nan)
            out[k].append(values)
        stops.append(np.asarray(stop_n))
        if progress is not None:
            progress(start + size, R)
    arrays = {k: np.concatenate(v) for k, v in out.items()}
    stop_n = np.concatenate(stops)
    return SimulationResult(arrays["estimate"], arrays["var"], arrays["lower"],
                            arrays["upper"], arrays["items"], stop_n, targets.mean(axis=1))
