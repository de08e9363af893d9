"""Successive rejects (SR) and synchronised successive rejects (SySRs) for best-model
identification (seed 002; docs/methods.md §7).

Both run the phases of :func:`~bayeval.selection.schedule.phase_schedule`: at the end of
phase k every surviving model has been evaluated on n_k items and the one with the lowest
empirical mean is dropped (exact ties broken uniformly at random). They differ in which
items a model sees:

* **SR**: each model draws its own items, uniformly without replacement;
* **SySRs**: the items of phase k are n_k − n_{k−1} new items drawn uniformly without
  replacement from those not used yet, and every surviving model is evaluated on them.

Written over a full score matrix (a simulation: the scores of the evaluations an algorithm
asks for are looked up), each is a pure JAX function of (scores, key) for a static schedule,
so runs vmap over keys; :func:`run_schedules` batches many runs and many budgets
explicitly, which is much faster than ``jax.vmap`` of one run on CPU. A phase is one
batched step: the means of all surviving models on their first n_k items are read from
running sums along their item orders.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayeval.selection.schedule import phase_schedule
from bayeval.types import Array


class SelectionResult(NamedTuple):
    best: Array  # () index of the chosen model
    order: Array  # (K,) models from first eliminated to the chosen one (last)
    evaluations: Array  # () model–item evaluations spent


def item_orders(key: Array, n_models: int, n_items: int, shared: bool) -> Array:
    """(K, L) the order in which each model meets the items: one uniform permutation per
    model (SR), or one shared by all models (SySRs)."""
    if shared:
        return jnp.broadcast_to(jax.random.permutation(key, n_items), (n_models, n_items))
    keys = jax.random.split(key, n_models)
    return jax.vmap(lambda k: jax.random.permutation(k, n_items))(keys)


@functools.partial(jax.jit, static_argnames=("shared",))
def run_schedules(scores: Array, keys: Array, schedules: Array, shared: bool
                  ) -> SelectionResult:
    """SR (``shared=False``) or SySRs (``shared=True``) for R runs (``keys``, (R,)) and B
    phase schedules (``schedules``, (B, K − 1) items per surviving model at the end of
    each phase, as from :func:`~bayeval.selection.schedule.phase_schedule`), batched:
    ``best`` is (R, B), ``order`` (R, B, K), ``evaluations`` (B,). Run r draws its item
    orders and tie draws from ``keys[r]`` alone, the same for every schedule (so one run
    answers at every budget, as the experiment reads it). The schedules may be traced, so
    one compiled program serves every budget.

    Work and memory per run: one (K, L) running sum, then O(B K) per phase."""
    scores = jnp.asarray(scores)
    K, L = scores.shape
    R = keys.shape[0]
    split = jax.vmap(jax.random.split)(keys)
    orders = jax.vmap(lambda k: item_orders(k, K, L, shared))(split[:, 0])
    running = jnp.cumsum(jnp.take_along_axis(jnp.broadcast_to(scores, (R, K, L)), orders,
                                             axis=2), axis=2)  # (R, K, L)
    ties = jax.vmap(lambda k: jax.random.uniform(k, (K - 1, K)))(split[:, 1])
    return eliminate(running, ties, schedules)


def eliminate(running: Array, ties: Array, schedules: Array) -> SelectionResult:
    """The phases of successive rejects from each run's running score sums along its item
    orders (``running[r, i, m − 1]`` = sum of model i's first m scores; (R, K, L)), its tie
    draws ((R, K − 1, K): at phase k the tied worst model of largest draw goes) and B
    schedules ((B, K − 1))."""
    schedules = jnp.asarray(schedules)
    R, K, _ = running.shape
    models = jnp.arange(K)

    def phase(alive, step):  # alive: (R, B, K)
        n_k, tie = step  # (B,), (R, K)
        means = jnp.moveaxis(jnp.take(running, n_k - 1, axis=2), 2, 1) / n_k[:, None]
        worst = jnp.min(jnp.where(alive, means, jnp.inf), axis=-1, keepdims=True)
        candidates = alive & (means == worst)
        out = jnp.argmax(jnp.where(candidates, tie[:, None, :], -1.0), axis=-1)
        return alive & (models != out[..., None]), out

    alive = jnp.ones((R, schedules.shape[0], K), bool)
    alive, eliminated = jax.lax.scan(phase, alive, (schedules.T, jnp.moveaxis(ties, 1, 0)))
    best = jnp.argmax(alive, axis=-1)
    order = jnp.concatenate([jnp.moveaxis(eliminated, 0, -1), best[..., None]], axis=-1)
    return SelectionResult(best, order, jnp.sum(schedules, axis=1) + schedules[:, -1])


def run_schedule(scores: Array, key: Array, schedule: Array, shared: bool) -> SelectionResult:
    """One run of SR / SySRs for one schedule ((K − 1,)); see :func:`run_schedules`."""
    result = run_schedules(scores, key[None], jnp.asarray(schedule)[None], shared)
    return SelectionResult(result.best[0, 0], result.order[0, 0], result.evaluations[0])


def successive_rejects(scores: Array, key: Array, budget: int) -> SelectionResult:
    """SR with a budget of ``budget`` model–item evaluations."""
    K, L = jnp.shape(scores)
    return run_schedule(scores, key, phase_schedule(K, L, budget), shared=False)


def synchronised_successive_rejects(scores: Array, key: Array, budget: int) -> SelectionResult:
    """SySRs with a budget of ``budget`` model–item evaluations."""
    K, L = jnp.shape(scores)
    return run_schedule(scores, key, phase_schedule(K, L, budget), shared=True)
