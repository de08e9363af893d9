"""Policies: how log-weights become draws, and the probability of each draw.

A :class:`Policy` draws ``k`` items from a rule's log-weights over the available items and
says with what probability each drawn item was drawn — what a design-based estimator
(Pro-Active Inference, docs/methods.md §3 and §9) weighs its score by:

* :data:`sample` — ∝ exp(log_w) without replacement (Gumbel-top-k); the probability of
  the j-th item of a batch is that of a sequential draw with the batch's earlier items
  removed (docs/methods.md §9 "Batches");
* :data:`argmax` — the best items, ties broken at random (probability 1: a deterministic
  design, which design-based estimators refuse);
* :data:`sample_with_replacement` — k independent draws over all available items (FAQ).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayeval.acquisition.base import probabilities
from bayeval.types import Array


class Policy(NamedTuple):
    """``draw(key, log_w, available, k) -> (k,) items`` and
    ``probabilities(log_w, available, items) -> (k,)`` the probability with which each
    item was drawn (given the batch's earlier draws). ``distributions(log_w, available,
    items) -> (k, N)``: the whole distribution each draw was made from (row j over the
    items available to the j-th draw; None where the draws are not random), which an
    estimator reads to predict its own variance before the draw (docs/methods.md §9).
    ``with_replacement``: draws may repeat items and every item stays available (the
    Session then answers a repeat from the score it already has). ``random``: the draws
    are random with the probabilities that ``probabilities`` gives (an estimator that
    weighs a score by its draw probability needs this; argmax and a plain draw function
    do not give it). Calling a Policy draws."""

    name: str
    draw: Callable[[Array, Array, Array, int], Array]
    probabilities: Callable[[Array, Array, Array], Array]
    with_replacement: bool = False
    distributions: Callable[[Array, Array, Array], Array] | None = None
    random: bool = True

    def __call__(self, key: Array, log_weights: Array, available: Array, k: int = 1) -> Array:
        return self.draw(key, log_weights, available, k)


def _sample(key: Array, log_weights: Array, available: Array, k: int = 1) -> Array:
    """Gumbel-top-k: the k largest of log_w + Gumbel noise are a draw of k items without
    replacement with probabilities ∝ exp(log_w) at each step."""
    noise = jax.random.gumbel(key, log_weights.shape, jnp.float64)
    score = jnp.where(available, log_weights + noise, -jnp.inf)
    return jax.lax.top_k(score, k)[1]


def sequential_distributions(log_weights: Array, available: Array, items: Array) -> Array:
    """(k, N): row j is the distribution ∝ exp(log_w) over the available items less
    ``items[:j]``, the one the j-th item of a batch was drawn from."""

    def one(avail, item):
        return avail.at[item].set(False), probabilities(log_weights, avail)

    return jax.lax.scan(one, available, items)[1]


def drawn_probabilities(distributions: Array, items: Array) -> Array:
    """(k,) the probability of each of ``items`` under its row of ``distributions``."""
    return distributions[jnp.arange(items.shape[0]), items]


def sequential_probabilities(log_weights: Array, available: Array, items: Array) -> Array:
    """q of each of ``items`` drawn one after another without replacement ∝ exp(log_w):
    item j's probability over the available items less ``items[:j]``."""
    return drawn_probabilities(sequential_distributions(log_weights, available, items), items)


def _argmax(key: Array, log_weights: Array, available: Array, k: int = 1) -> Array:
    """The ``k`` available items of largest log-weight, exact ties broken at random.

    Item by item: among the not yet chosen items of the largest log-weight, the one with
    the largest uniform tie-break draw (O(k N); the same choice as a lexicographic sort on
    (log-weight, draw))."""
    tie_break = jax.random.uniform(key, log_weights.shape)
    primary = jnp.where(available, log_weights, -jnp.inf)
    chosen = []
    taken = jnp.zeros(log_weights.shape, bool)
    for _ in range(k):
        best = jnp.max(jnp.where(taken, -jnp.inf, primary))
        pick = jnp.argmax(jnp.where((primary == best) & ~taken, tie_break, -1.0))
        chosen.append(pick)
        taken = taken.at[pick].set(True)
    return jnp.stack(chosen)


def _certain(log_weights: Array, available: Array, items: Array) -> Array:
    return jnp.ones(items.shape, jnp.float64)


def inverse_cdf(cdf: Array, u: Array) -> Array:
    """The item whose cumulative interval holds ``u``: ``cdf`` (..., N) cumulative
    probabilities, ``u`` (...) uniforms (leading axes broadcast)."""
    return jnp.minimum(jnp.sum(cdf <= u[..., None], -1), cdf.shape[-1] - 1)


def draw_index(weights: Array, u: Array) -> Array:
    """The item whose cumulative interval holds ``u`` (0 ≤ u < Σ weights): the item
    :func:`inverse_cdf` gives for ``cumsum(weights)``, found block by block.

    ``weights`` (..., N) are non-negative, ``u`` (...) broadcasts with the leading axes.
    The N items are cut into blocks of ⌈√N⌉; one pass sums the blocks, a cumulative sum
    over the block sums finds the block that holds ``u``, and a cumulative sum within that
    block finds the item. That is one pass over the weights and O(√N) more, where a full
    cumulative sum costs several passes (XLA's CPU backend computes it as a reduce-window:
    two thirds of a FAQ round at N = 1297, docs/results/faq_authors.md). The partial sums
    are grouped differently from a sequential cumulative sum, so the two can differ only
    where ``u`` lies within rounding error of an interval's end. A zero-weight item is never
    drawn unless ``u`` is at or beyond the total, where the last item is returned, as
    :func:`inverse_cdf` does."""
    n = weights.shape[-1]
    size = math.isqrt(n - 1) + 1 if n > 1 else 1  # ⌈√N⌉
    blocks = -(-n // size)
    lead = weights.shape[:-1]
    padded = jnp.pad(weights, [(0, 0)] * len(lead) + [(0, blocks * size - n)])
    padded = padded.reshape(*lead, blocks, size)
    ends = jnp.cumsum(padded.sum(-1), -1)  # (..., blocks): the blocks' cumulative ends
    u = jnp.broadcast_to(u, lead)
    block = jnp.minimum(jnp.sum(ends <= u[..., None], -1), blocks - 1)
    before = jnp.take_along_axis(ends, jnp.maximum(block - 1, 0)[..., None], -1)[..., 0]
    before = jnp.where(block > 0, before, 0.0)
    inside = jnp.take_along_axis(padded, block[..., None, None], -2)[..., 0, :]
    cdf = before[..., None] + jnp.cumsum(inside, -1)
    within = jnp.minimum(jnp.sum(cdf <= u[..., None], -1), size - 1)
    return jnp.minimum(block * size + within, n - 1)


def _with_replacement(key: Array, log_weights: Array, available: Array, k: int = 1) -> Array:
    """``k`` independent draws ∝ exp(log_w) over the available items (repeats possible), by
    inverting the cumulative distribution (one uniform per draw, no per-item noise)."""
    q = probabilities(log_weights, available)
    u = jax.random.uniform(key, (k,), q.dtype) * jnp.sum(q)
    return jax.vmap(draw_index, in_axes=(None, 0))(q, u)


def _independent_distributions(log_weights: Array, available: Array,
                                items: Array) -> Array:
    q = probabilities(log_weights, available)
    return jnp.broadcast_to(q, (items.shape[0], q.shape[0]))


def _independent(log_weights: Array, available: Array, items: Array) -> Array:
    return probabilities(log_weights, available)[items]


def _unknown(log_weights: Array, available: Array, items: Array) -> Array:
    return jnp.full(items.shape, jnp.nan)


def as_policy(policy: Policy | Callable) -> Policy:
    """``policy`` itself, or a plain ``draw`` function wrapped as a Policy whose draw
    probabilities are unknown (NaN), so estimators that need them refuse it."""
    if isinstance(policy, Policy):
        return policy
    return Policy(getattr(policy, "__name__", "custom"), policy, _unknown, random=False)


sample = Policy("sample", _sample, sequential_probabilities,
                distributions=sequential_distributions)
argmax = Policy("argmax", _argmax, _certain, random=False)
sample_with_replacement = Policy("sample_with_replacement", _with_replacement, _independent,
                                 with_replacement=True,
                                 distributions=_independent_distributions)
