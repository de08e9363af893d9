"""The phase schedule of successive rejects (seed 002; docs/methods.md §7).

With K models, L items and a budget of n model–item evaluations, phase k = 1..K−1 ends
when every surviving model has been evaluated on

    n_k = ⌈(1 / logbar(K)) (n − K) / (K + 1 − k)⌉ items,   logbar(K) = ½ + Σ_{i=2..K} 1/i,

after which the worst surviving model is dropped. The evaluations spent are
Σ_k (n_k − n_{k−1})(K + 1 − k) = Σ_k n_k + n_{K−1} ≤ n (the ceilings add less than one per
phase to a sum that is n − K without them).

No model can be evaluated on more than its L items: phases whose n_k exceeds L are capped
at L, and the budget this frees goes to the earlier phases in proportion to their n_k (all
uncapped n_k scaled by one factor, the largest that keeps the total within n).
"""

from __future__ import annotations

import math

import numpy as np


def logbar(n_models: int) -> float:
    """½ + Σ_{i=2..K} 1/i."""
    return 0.5 + sum(1.0 / i for i in range(2, n_models + 1))


def spent(schedule: np.ndarray) -> int:
    """Evaluations used by a schedule n_1 ≤ … ≤ n_{K−1}: Σ_k n_k + n_{K−1}."""
    schedule = np.asarray(schedule, dtype=np.int64)
    return int(schedule.sum() + schedule[-1]) if schedule.size else 0


def phase_schedule(n_models: int, n_items: int, budget: int) -> np.ndarray:
    """(K − 1,) non-decreasing items per surviving model at the end of each phase."""
    K, L, n = int(n_models), int(n_items), int(budget)
    if K < 2:
        raise ValueError(f"need at least two models, got {K}")
    if L < 1:
        raise ValueError(f"need at least one item, got {L}")
    if n < K:
        raise ValueError(f"a budget of {n} evaluations cannot evaluate each of {K} models once")
    k = np.arange(1, K)
    raw = (n - K) / (logbar(K) * (K + 1 - k))

    def at(scale: float) -> np.ndarray:
        return np.minimum(np.ceil(np.round(raw * scale, 9)).astype(np.int64), L)

    if spent(np.full(K - 1, L)) <= n:  # enough budget for every model on every item
        return np.full(K - 1, L, dtype=np.int64)
    base = np.maximum(at(1.0), 1)
    if not np.any(np.ceil(np.round(raw, 9)) > L):  # no phase capped: the closed form
        return base
    # some phases are capped: scale the rest up, as far as the budget allows
    lo, hi = 1.0, 2.0
    while spent(at(hi)) <= n and at(hi).min() < L:
        hi *= 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if spent(at(mid)) <= n:
            lo = mid
        else:
            hi = mid
    out = np.maximum(at(lo), 1)
    assert spent(out) <= n and np.all(np.diff(out) >= 0) and math.isfinite(lo)
    return out
