"""UCB-E, SyUCB-E, uniform sampling (US) and synchronised uniform sampling (SyUS) for
best-model identification (seed 002; METHODS.md §7).

* **UCB-E(a)**: each evaluation goes to the model maximising μ̂_i + sqrt(a / s_i) (s_i: its
  evaluations so far; unevaluated models first), on a new item of its own drawn without
  replacement; models evaluated on every item leave the arm set. The answer is the model
  of best empirical mean.
* **SyUCB-E(a)**: the same index, but one random permutation of the items is shared: model
  i's s-th evaluation is on the s-th item of it.
* **US / SyUS**: ⌊n / K⌋ evaluations per model (at most L) on independent / shared random
  items; best empirical mean.

Exact ties of the final means, and of the UCB index, are broken uniformly at random. Pure
JAX functions of (scores, key) for a static budget, vmappable over keys.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bayeval.inference.base import Array
from bayeval.selection.successive_rejects import SelectionResult, item_orders


def _ranking(means: Array, key: Array) -> Array:
    """(K,) models from the worst mean to the best, exact ties in random order."""
    tie = jax.random.uniform(key, means.shape)
    return jnp.lexsort((tie, means))


def _result(means: Array, key: Array, evaluations: Array) -> SelectionResult:
    order = _ranking(means, key)
    return SelectionResult(order[-1], order, jnp.asarray(evaluations))


def _pull(scores: Array, orders: Array, a: float, tie_key: Array, sums: Array,
          counts: Array) -> tuple[Array, Array]:
    """One UCB-E evaluation: the open model of largest μ̂_i + sqrt(a / s_i) (unevaluated
    first, ties at random) on its next item."""
    K, L = scores.shape
    index = jnp.where(counts > 0,
                      sums / jnp.maximum(counts, 1) + jnp.sqrt(a / jnp.maximum(counts, 1)),
                      jnp.inf)
    open_arm = counts < L
    best = jnp.max(jnp.where(open_arm, index, -jnp.inf))
    tie = jax.random.uniform(tie_key, (K,))
    arm = jnp.argmax(jnp.where(open_arm & (index == best), tie, -1.0))
    item = orders[arm, counts[arm]]
    return sums.at[arm].add(scores[arm, item]), counts.at[arm].add(1)


def ucb_e(scores: Array, key: Array, budget: int, a: float = 1.0,
          shared: bool = False) -> SelectionResult:
    """UCB-E(a) (``shared=False``) or SyUCB-E(a) (``shared=True``) with ``budget``
    evaluations (at most K·L are used)."""
    scores = jnp.asarray(scores)
    K, L = scores.shape
    order_key, tie_key, final_key = jax.random.split(key, 3)
    orders = item_orders(order_key, K, L, shared)
    steps = min(int(budget), K * L)

    def body(t, carry):
        return _pull(scores, orders, a, jax.random.fold_in(tie_key, t), *carry)

    sums, counts = jax.lax.fori_loop(0, steps, body, (jnp.zeros(K, scores.dtype),
                                                      jnp.zeros(K, jnp.int32)))
    means = jnp.where(counts > 0, sums / jnp.maximum(counts, 1), -jnp.inf)
    return _result(means, final_key, steps)


def uniform_sampling(scores: Array, key: Array, budget: int,
                     shared: bool = False) -> SelectionResult:
    """US (``shared=False``) or SyUS (``shared=True``): ⌊budget / K⌋ items per model."""
    scores = jnp.asarray(scores)
    K, L = scores.shape
    per_model = min(int(budget) // K, L)
    if per_model < 1:
        raise ValueError(f"a budget of {budget} cannot evaluate each of {K} models once")
    order_key, final_key = jax.random.split(key)
    orders = item_orders(order_key, K, L, shared)[:, :per_model]
    means = jnp.take_along_axis(scores, orders, axis=1).mean(axis=1)
    return _result(means, final_key, per_model * K)


def ucb_e_best(scores: Array, key: Array, budgets: Array, a: float = 1.0,
               shared: bool = False) -> Array:
    """(B,) the model of best empirical mean after each of ``budgets`` evaluations of one
    UCB-E(a) / SyUCB-E(a) run (one pass up to the largest budget; exact ties of the means
    broken at random)."""
    scores = jnp.asarray(scores)
    budgets = jnp.minimum(jnp.asarray(budgets), scores.size)
    K, L = scores.shape
    order_key, tie_key, final_key = jax.random.split(key, 3)
    orders = item_orders(order_key, K, L, shared)

    def body(t, carry):
        sums, counts, record = carry
        sums, counts = _pull(scores, orders, a, jax.random.fold_in(tie_key, t), sums, counts)
        means = jnp.where(counts > 0, sums / jnp.maximum(counts, 1), -jnp.inf)
        top = jnp.max(means)
        pick = jnp.argmax(jnp.where(means == top, jax.random.uniform(
            jax.random.fold_in(final_key, t), (K,)), -1.0))
        return sums, counts, jnp.where(budgets == t + 1, pick, record).astype(jnp.int32)

    init = (jnp.zeros(K, scores.dtype), jnp.zeros(K, jnp.int32),
            jnp.zeros(budgets.shape, jnp.int32))
    return jax.lax.fori_loop(0, jnp.max(budgets), body, init)[2]


def uniform_best(scores: Array, key: Array, budgets: Array, shared: bool = False) -> Array:
    """(B,) the model of best mean of US / SyUS at each of ``budgets`` (one item order per
    run, ⌊n / K⌋ items per model, exact ties broken at random)."""
    scores = jnp.asarray(scores)
    K, L = scores.shape
    order_key, final_key = jax.random.split(key)
    orders = item_orders(order_key, K, L, shared)
    running = jnp.cumsum(jnp.take_along_axis(scores, orders, axis=1), axis=1)
    per_model = jnp.clip(jnp.asarray(budgets) // K, 1, L)
    means = running[:, per_model - 1].T / per_model[:, None]  # (B, K)
    tie = jax.random.uniform(final_key, (K,))
    top = means.max(axis=1, keepdims=True)
    return jnp.argmax(jnp.where(means == top, tie[None, :], -1.0), axis=1)
