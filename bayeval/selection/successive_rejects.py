"""Successive rejects (SR) and synchronised successive rejects (SySRs) for best-model
identification (seed 002; METHODS.md §7).

Both run the phases of :func:`~bayeval.selection.schedule.phase_schedule`: at the end of
phase k every surviving model has been evaluated on n_k items and the one with the lowest
empirical mean is dropped (exact ties broken uniformly at random). They differ in which
items a model sees:

* **SR**: each model draws its own items, uniformly without replacement;
* **SySRs**: the items of phase k are n_k − n_{k−1} new items drawn uniformly without
  replacement from those not used yet, and every surviving model is evaluated on them.

Written over a full score matrix (a simulation: the scores of the evaluations an algorithm
asks for are looked up), each is a pure JAX function of (scores, key) for a static schedule,
so runs vmap over keys. A phase is one batched step: the means of all surviving models on
their first n_k items are read from running sums along their item orders.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayeval.inference.base import Array
from bayeval.selection.schedule import phase_schedule


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


def run_schedule(scores: Array, key: Array, schedule: Array, shared: bool) -> SelectionResult:
    """SR (``shared=False``) or SySRs (``shared=True``) for a given phase schedule
    ((K − 1,) items per surviving model at the end of each phase, as from
    :func:`~bayeval.selection.schedule.phase_schedule`). The schedule may be a traced
    array, so one compiled program serves every budget."""
    scores = jnp.asarray(scores)
    K, L = scores.shape
    order_key, tie_key = jax.random.split(key)
    orders = item_orders(order_key, K, L, shared)
    running = jnp.cumsum(jnp.take_along_axis(scores, orders, axis=1), axis=1)  # (K, L)
    return eliminate(running, tie_key, schedule)


def eliminate(running: Array, tie_key: Array, schedule: Array) -> SelectionResult:
    """The phases of successive rejects given each model's running score sums along its
    item order (``running[i, m − 1]`` = sum of its first m scores)."""
    schedule = jnp.asarray(schedule)
    K = running.shape[0]
    alive = jnp.ones(K, bool)
    eliminated = []
    ties = jax.random.uniform(tie_key, (K - 1, K))
    for k in range(K - 1):
        n_k = schedule[k]
        means = running[:, n_k - 1] / n_k
        worst = jnp.min(jnp.where(alive, means, jnp.inf))
        candidates = alive & (means == worst)
        out = jnp.argmax(jnp.where(candidates, ties[k], -1.0))
        eliminated.append(out)
        alive = alive.at[out].set(False)
    best = jnp.argmax(alive)
    return SelectionResult(best, jnp.stack([*eliminated, best]),
                           jnp.sum(schedule) + schedule[-1])


def successive_rejects(scores: Array, key: Array, budget: int) -> SelectionResult:
    """SR with a budget of ``budget`` model–item evaluations."""
    K, L = jnp.shape(scores)
    return run_schedule(scores, key, phase_schedule(K, L, budget), shared=False)


def synchronised_successive_rejects(scores: Array, key: Array, budget: int) -> SelectionResult:
    """SySRs with a budget of ``budget`` model–item evaluations."""
    K, L = jnp.shape(scores)
    return run_schedule(scores, key, phase_schedule(K, L, budget), shared=True)
