"""BestRand: probe-guided choice among random subsets (seed 003; docs/methods.md §8).

1. Draw a pool of M items uniformly without replacement and evaluate P cheap probe models
   on the pool only.
2. H = the probes' mean scores over the pool, (P,): the stand-in for their full means.
3. Draw C candidate subsets of k items uniformly without replacement from the pool; h_j =
   the probes' mean scores over candidate j, (C, P).
4. Keep the candidate of least imbalance d_j = ‖h_j − H‖²; the targets are evaluated on it.

Step 3–4 is one batched tensor operation over all candidates (a gather of the pool's probe
scores, a mean, a squared distance, an arg min). With one candidate BestRand is uniform
random sampling; the pool size bounds how well H stands for the full means, the number of
candidates how close the search gets to H. Every function is a pure JAX function of a key,
vmappable over keys (the experiment runs 200+ seeds at once).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayeval.types import Array


class BestRandResult(NamedTuple):
    items: Array  # (k,) the chosen subset, item indices of the benchmark
    pool: Array  # (M,) the pool, item indices
    imbalance: Array  # (C,) d_j of every candidate
    chosen: Array  # () index of the chosen candidate


def random_subsets(key: Array, n_items: int, size: int, count: int) -> Array:
    """(count, size) independent uniform subsets of range(n_items), each without
    replacement (the ``size`` largest of i.i.d. uniform keys)."""
    if not 1 <= size <= n_items:
        raise ValueError(f"subset size must be in 1..{n_items}, got {size}")
    return jax.lax.top_k(jax.random.uniform(key, (count, n_items)), size)[1]


def candidate_imbalance(pool_scores: Array, candidates: Array) -> Array:
    """(C,) d_j = ‖h_j − H‖² for candidates (C, k) (indices into the pool) given the probes'
    scores on the pool (P, M): one batched gather–mean–distance."""
    pool_scores = jnp.asarray(pool_scores)
    reference = pool_scores.mean(axis=1)  # H, (P,)
    means = pool_scores[:, candidates].mean(axis=2)  # h, (P, C)
    return jnp.sum((means - reference[:, None]) ** 2, axis=0)


def select_candidate(pool_scores: Array, key: Array, size: int, n_candidates: int,
                     ) -> tuple[Array, Array, Array]:
    """Steps 3–4 on probe scores already measured on a pool (P, M): (the chosen candidate's
    pool positions (k,), all imbalances (C,), the chosen index)."""
    M = jnp.shape(pool_scores)[1]
    candidates = random_subsets(key, M, size, n_candidates)
    imbalance = candidate_imbalance(pool_scores, candidates)
    chosen = jnp.argmin(imbalance)
    return candidates[chosen], imbalance, chosen


def bestrand(probe_scores: Array, key: Array, size: int, pool_size: int,
             n_candidates: int) -> BestRandResult:
    """BestRand from the probes' scores on the whole benchmark (P, L), of which only the
    pool's columns are read (as only those would be evaluated)."""
    probe_scores = jnp.asarray(probe_scores)
    L = probe_scores.shape[1]
    pool_size = min(int(pool_size), L)
    if size > pool_size:
        raise ValueError(f"subset size {size} exceeds the pool of {pool_size} items")
    pool_key, search_key = jax.random.split(key)
    pool = jax.random.permutation(pool_key, L)[:pool_size]
    positions, imbalance, chosen = select_candidate(probe_scores[:, pool], search_key, size,
                                                    n_candidates)
    return BestRandResult(pool[positions], pool, imbalance, chosen)
