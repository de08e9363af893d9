"""MINCE: Monte Carlo sizing of a frozen subset (seed 004; docs/methods.md §8).

With the scores of a few calibration models (K_c, L), for each candidate size n_t on a
fixed step draw R random subsets S of n_t items and measure the worst drift over the
calibration models,

    δ*(S) = max_m |acc(S, m) − acc(full, m)|,

and its 95th percentile P95(n_t) over the R subsets. The chosen size n* is the first n_t
whose marginal gain P95(n_{t−1}) − P95(n_t) falls below τ (1 percentage point by default);
one random subset of size n* is then frozen (seed 42). The drift of the frozen subset is
reported on models that were not used for calibration.

The R subsets are batched (their means for every calibration model and every size at once,
from running sums along R random permutations), in chunks that keep memory bounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.compression.bestrand import random_subsets
from bayeval.types import Array

FREEZE_SEED = 42


class MinceSizing(NamedTuple):
    sizes: np.ndarray  # (T,) candidate sizes
    p95: np.ndarray  # (T,) 95th percentile of δ* per size
    gains: np.ndarray  # (T,) P95(n_{t−1}) − P95(n_t) (NaN for the first)
    size: int  # n*


def worst_drift(scores: Array, subsets: Array) -> Array:
    """(R,) δ*(S) for subsets (R, n) of the items of ``scores`` (K_c, L)."""
    scores = jnp.asarray(scores)
    full = scores.mean(axis=1)  # (K_c,)
    means = scores[:, subsets].mean(axis=2)  # (K_c, R)
    return jnp.max(jnp.abs(means - full[:, None]), axis=0)


@jax.jit
def _nested_drifts(scores: Array, key: Array, sizes: Array) -> Array:
    """(R, T) δ* of the first n_t items of R uniform permutations (one row per key)."""
    L = scores.shape[1]
    orders = jax.vmap(lambda k: jax.random.permutation(k, L))(key)  # (R, L)
    running = jnp.cumsum(scores[:, orders], axis=2)  # (K_c, R, L)
    means = running[:, :, sizes - 1] / sizes  # (K_c, R, T)
    return jnp.max(jnp.abs(means - scores.mean(axis=1)[:, None, None]), axis=0)


def drift_percentiles(scores: Array, key: Array, sizes: Sequence[int],
                      n_subsets: int = 10_000, q: float = 95.0, chunk: int = 500
                      ) -> np.ndarray:
    """(T,) the q-th percentile of δ* over ``n_subsets`` uniform subsets at each size.

    Subset r of size n_t is the first n_t items of the r-th random permutation, so each
    size sees R uniform subsets and all sizes are read off one pass (common random
    numbers across sizes make the marginal gains less noisy)."""
    scores = jnp.asarray(scores, jnp.float64)
    sizes = jnp.asarray(np.asarray(sizes, dtype=np.int64))
    keys = jax.random.split(key, -(-n_subsets // chunk) * chunk)
    drifts = np.concatenate([np.asarray(_nested_drifts(scores, keys[s:s + chunk], sizes))
                             for s in range(0, keys.shape[0], chunk)])[:n_subsets]
    return np.percentile(drifts, q, axis=0)


def candidate_sizes(n_items: int, step: int) -> np.ndarray:
    """step, 2·step, … up to (not including) the whole benchmark."""
    if step < 1:
        raise ValueError(f"the size step must be ≥ 1, got {step}")
    return np.arange(step, n_items, step)


def choose_size(sizes: np.ndarray, p95: np.ndarray, tau: float) -> int:
    """n* = the first n_t (t ≥ 2) with P95(n_{t−1}) − P95(n_t) < τ; the last size if the
    gain never falls below τ."""
    gains = -np.diff(np.asarray(p95))
    below = np.flatnonzero(gains < tau)
    return int(sizes[below[0] + 1]) if below.size else int(sizes[-1])


def mince_sizing(calibration_scores: Array, key: Array, step: int, tau: float = 0.01,
                 n_subsets: int = 10_000, sizes: np.ndarray | None = None) -> MinceSizing:
    """P95 of the worst calibration drift at every candidate size, and n*."""
    scores = np.asarray(calibration_scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] < 1:
        raise ValueError("calibration scores must be (models, items) with ≥ 1 model")
    if np.isnan(scores).any():
        raise ValueError("calibration scores have missing entries")
    sizes = candidate_sizes(scores.shape[1], step) if sizes is None else np.asarray(sizes)
    if sizes.size < 2:
        raise ValueError(f"need at least two candidate sizes below {scores.shape[1]} items "
                         f"(step {step})")
    p95 = drift_percentiles(scores, key, sizes, n_subsets)
    gains = np.concatenate([[np.nan], -np.diff(p95)])
    return MinceSizing(sizes, p95, gains, choose_size(sizes, p95, tau))


def freeze_subset(n_items: int, size: int, seed: int = FREEZE_SEED) -> np.ndarray:
    """The frozen subset: ``size`` items drawn uniformly with ``seed``, sorted."""
    key = jax.random.key(seed)
    return np.sort(np.asarray(random_subsets(key, n_items, size, 1)[0]))
