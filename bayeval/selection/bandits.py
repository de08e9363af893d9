"""UCB-E, SyUCB-E, uniform sampling (US) and synchronised uniform sampling (SyUS) for
best-model identification (seed 002; docs/methods.md §7).

* **UCB-E(a)**: each evaluation goes to the model maximising μ̂_i + sqrt(a / s_i) (s_i: its
  evaluations so far; unevaluated models first), on a new item of its own drawn without
  replacement; models evaluated on every item leave the arm set. The answer is the model
  of best empirical mean.
* **SyUCB-E(a)**: the same index, but one random permutation of the items is shared: model
  i's s-th evaluation is on the s-th item of it.
* **US / SyUS**: ⌊n / K⌋ evaluations per model (at most L) on independent / shared random
  items; best empirical mean.

Exact ties of the UCB index are broken by a random priority of the models drawn once per
run, and ties of the final means uniformly at random. Pure JAX functions of (scores, key)
for static budgets, vmappable over keys; the ``*_rankings`` forms answer at many budgets
from one run (the top models by mean, best first), as the experiment needs.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from bayeval.selection.successive_rejects import SelectionResult, item_orders
from bayeval.types import Array


def _ranking(means: Array, key: Array) -> Array:
    """(K,) models from the worst mean to the best, exact ties in random order."""
    tie = jax.random.uniform(key, means.shape)
    return jnp.lexsort((tie, means))


def _tree_size(n_models: int) -> int:
    return 1 << max(int(n_models) - 1, 1).bit_length()


def _better(left: Array, right: Array, value: Array, priority: Array) -> Array:
    """The winner of two arms (flat indices into ``value``/``priority``): larger value,
    equal values by larger priority."""
    vl, vr = value[left], value[right]
    take_left = (vl > vr) | ((vl == vr) & (priority[left] > priority[right]))
    return jnp.where(take_left, left, right)


def _tree_build(value: Array, priority: Array) -> Array:
    """(R, 2P) one tournament tree per run over its P leaves (``value``, ``priority``:
    (R, P); arm i at leaf P + i, node 1 the root): each inner node holds the winning arm
    of its subtree, as a flat index r·P + i into the (R·P,) arrays."""
    R, P = value.shape
    leaves = jnp.arange(R, dtype=jnp.int32)[:, None] * P + jnp.arange(P, dtype=jnp.int32)
    win = jnp.concatenate([jnp.zeros((R, P), jnp.int32), leaves], axis=1)
    flat_value, flat_priority = value.reshape(-1), priority.reshape(-1)
    size = P // 2
    while size >= 1:
        nodes = jnp.arange(size, 2 * size)
        win = win.at[:, nodes].set(_better(win[:, 2 * nodes], win[:, 2 * nodes + 1],
                                           flat_value, flat_priority))
        size //= 2
    return win.reshape(-1)


@functools.partial(jax.jit, static_argnames=("a", "shared", "top"))
def ucb_e_rankings(scores: Array, keys: Array, budgets: Array, a: float = 1.0,
                   shared: bool = False, top: int | None = None) -> Array:
    """(R, B, top) for each key (one run each), the models ranked by empirical mean, best
    first, after each of the non-decreasing ``budgets`` evaluations of UCB-E(a) /
    SyUCB-E(a) (one pass up to the largest budget; budgets beyond K·L read the full
    matrix).

    Each evaluation goes to the open model of largest μ̂_i + sqrt(a / s_i) (unevaluated
    first). The arg max is kept in a tournament tree, so a step costs O(log K), not O(K):
    only the evaluated model's index changes. Exact ties of the index are broken by a
    random priority of the models drawn once per run (every tie is resolved uniformly at
    random); ties of the means in a ranking afresh at each budget.

    The runs are batched here rather than by ``jax.vmap``: the tree walk is a few scalar
    gathers per run and level, and flat indices into (R·…,) arrays keep them plain
    (vmap's batched gathers cost about 7× more on CPU).
    """
    scores = jnp.asarray(scores)
    K, L = scores.shape
    R = keys.shape[0]
    top = K if top is None else min(int(top), K)
    budgets = jnp.minimum(jnp.asarray(budgets, jnp.int32), K * L)
    starts = jnp.minimum(jnp.concatenate([jnp.zeros(1, jnp.int32), budgets[:-1]]), budgets)
    order_keys, priority_keys, rank_keys = jnp.moveaxis(
        jax.vmap(lambda k: jax.random.split(k, 3))(keys), 1, 0)
    orders = jax.vmap(lambda k: item_orders(k, K, L, shared))(order_keys)
    orders = orders.astype(jnp.int32).reshape(-1)  # run r, model i, s-th item: (rK + i)L + s
    P = _tree_size(K)
    depth = P.bit_length() - 1
    priority = jnp.concatenate([jax.vmap(lambda k: jax.random.uniform(k, (K,)))(priority_keys),
                                jnp.full((R, P - K), -1.0)], axis=1)
    value = jnp.concatenate([jnp.full((R, K), jnp.inf), jnp.full((R, P - K), -jnp.inf)],
                            axis=1)
    runs = jnp.arange(R, dtype=jnp.int32)
    flat_scores = scores.reshape(-1)
    flat_priority = priority.reshape(-1)

    def pull(_, state):
        sums, counts, value, win = state
        leaf = win[runs * 2 * P + 1]  # the root's winner, r·P + arm
        arm = leaf - runs * P
        slot = runs * K + arm
        count = counts[slot]
        total = sums[slot] + flat_scores[arm * L + orders[slot * L + count]]
        count = count + 1
        index = jnp.where(count < L, total / count + jnp.sqrt(a / count), -jnp.inf)
        sums = sums.at[slot].set(total, unique_indices=True)
        counts = counts.at[slot].set(count, unique_indices=True)
        value = value.at[leaf].set(index, unique_indices=True)
        node = (P + arm) // 2
        for _ in range(depth):  # replay the matches above the leaf
            base = runs * 2 * P
            winner = _better(win[base + 2 * node], win[base + 2 * node + 1], value,
                             flat_priority)
            win = win.at[base + node].set(winner, unique_indices=True)
            node = node // 2
        return sums, counts, value, win

    def segment(state, step):
        start, stop, b = step
        state = jax.lax.fori_loop(start, stop, pull, state)
        sums, counts = state[0].reshape(R, K), state[1].reshape(R, K)
        means = jnp.where(counts > 0, sums / jnp.maximum(counts, 1), -jnp.inf)
        ranking = jax.vmap(lambda m, k: _ranking(m, jax.random.fold_in(k, b)))(means,
                                                                                rank_keys)
        return state, ranking[:, ::-1][:, :top].astype(jnp.int32)

    init = (jnp.zeros(R * K, scores.dtype), jnp.zeros(R * K, jnp.int32), value.reshape(-1),
            _tree_build(value, priority))
    steps = (starts, budgets, jnp.arange(budgets.shape[0]))
    return jnp.moveaxis(jax.lax.scan(segment, init, steps)[1], 0, 1)


def ucb_e(scores: Array, key: Array, budget: int, a: float = 1.0,
          shared: bool = False) -> SelectionResult:
    """UCB-E(a) (``shared=False``) or SyUCB-E(a) (``shared=True``) with ``budget``
    evaluations (at most K·L are used); the order ranks every model by its mean. For many
    runs, :func:`ucb_e_rankings` with all the keys at once is faster than ``jax.vmap``."""
    K, L = jnp.shape(scores)
    ranking = ucb_e_rankings(scores, key[None], jnp.asarray([budget]), a, shared)[0, 0]
    return SelectionResult(ranking[0], ranking[::-1], jnp.asarray(min(int(budget), K * L)))


def uniform_sampling(scores: Array, key: Array, budget: int,
                     shared: bool = False) -> SelectionResult:
    """US (``shared=False``) or SyUS (``shared=True``): ⌊budget / K⌋ items per model (see
    :func:`uniform_rankings`)."""
    K, L = jnp.shape(scores)
    per_model = min(int(budget) // K, L)
    if per_model < 1:
        raise ValueError(f"a budget of {budget} cannot evaluate each of {K} models once")
    ranking = uniform_rankings(scores, key, jnp.asarray([budget]), shared)[0]
    return SelectionResult(ranking[0], ranking[::-1], jnp.asarray(per_model * K))


def uniform_rankings(scores: Array, key: Array, budgets: Array, shared: bool = False,
                     top: int | None = None) -> Array:
    """(B, top) US / SyUS rankings by mean, best first, at each of ``budgets`` (one item
    order per run, ⌊n / K⌋ items per model, exact ties broken at random)."""
    scores = jnp.asarray(scores)
    K, L = scores.shape
    top = K if top is None else min(int(top), K)
    order_key, final_key = jax.random.split(key)
    orders = item_orders(order_key, K, L, shared)
    running = jnp.cumsum(jnp.take_along_axis(scores, orders, axis=1), axis=1)
    per_model = jnp.clip(jnp.asarray(budgets) // K, 1, L)
    means = running[:, per_model - 1].T / per_model[:, None]  # (B, K)
    order = jax.vmap(lambda m: _ranking(m, final_key))(means)
    return order[:, ::-1][:, :top].astype(jnp.int32)
