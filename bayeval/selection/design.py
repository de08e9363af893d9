"""Where SySRs' items go: a design weighted by the scores of earlier models (docs/methods.md §10).

SySRs (seed 002) draws each phase's items uniformly from those not used yet. Near the end
of a selection the survivors are the strongest candidates, and they score alike on most
items: every one of them gets an easy item right. Those items cost one evaluation per
survivor and say nothing about which survivor is best. The scores of earlier models tell
in advance which items split strong models: an item that the strongest reference models
sometimes get right and sometimes wrong.

**The design.** Item j has the weight

    w_j = α + (1 − α) s_j / s̄,   s_j = √(p̄_j (1 − p̄_j)),                           (W)

with p̄_j the mean score on item j of the strongest share ``top`` of the reference models
(ranked by their mean over all items), s̄ the mean of the s_j and α ∈ (0, 1] the uniform
floor. The items are met in the order of *successive sampling*: each next item is drawn
from the unused ones R_t with probability q_t(j) = w_j / Σ_{i ∈ R_t} w_i. All survivors
share that order, as in SySRs, and a phase is still one batch (the order is drawn before
any score, from the weights alone). With α = 1 every q_t is uniform and this is SySRs'
design.

**The estimate.** Under unequal probabilities the running mean is biased; the
finite-population estimate of step t,

    θ̃_t = (1/L) [Σ_{s<t} y_s + Σ_{j ∈ R_t} f_t(j) + (y_t − f_t(I_t)) / q_t(I_t)],

is unbiased for the full mean given the past, for any prediction f_t built from the scores
before step t (f ≡ 0 without a factor model), and the estimate after n items is
Σ_{t≤n} ω_t θ̃_t with the fixed weights ω_t = L (L − n) / (n (L − t)(L − t + 1)) of (★)
in :mod:`~bayeval.selection.history`. Hence E[μ̂_n] = the full mean for every n fixed in
advance, whatever the weights and predictions (tested by enumerating every order of a
small case with its probability); μ̂_L is the full mean; with α = 1 it is (★) itself.
In running form, with m_t = L − t + 1 = |R_t| and the inverse probability
π_t = 1 / q_t(I_t),

    n μ̂_n = Σ_{t≤n} y_t − (L − n) Σ_{t≤n} g_t / (L − t),
    g_t = f_t(I_t) − mean_{R_t} f_t − (y_t − f_t(I_t)) (π_t − m_t) / m_t.               (★w)

The floor bounds the cost of wrong weights. The weights average to one over the items and
none is below α, so an item's inverse probability π = Σ_{R_t} w / w_j is at most m_t / α
times the mean weight of the unused items: 2 m_t at the start with α = ½, against m_t for
the uniform design, and it falls as the heavy items are used up. A design that points at
the wrong items therefore costs a bounded factor of variance, and one that points at the
right items stops spending evaluations on items that cannot separate the survivors. The
defaults (α = ½, the strongest quarter of the references) are one setting for every
benchmark. They were chosen on the bundled data among top shares ¼, ½, 1 and floors 0.3,
½ (``bench/selection_design.py`` prints that grid); with the top quarter or half, every
setting is as accurate as the uniform design within Monte Carlo error or better. Weights
from *all* references point at items that separate weak models from strong ones, which
the last phases do not need, and gain less.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.data.matrix import observed_item_means
from bayeval.errors import DataError
from bayeval.types import Array

TOP_SHARE = 0.25  # the references that stand in for the last survivors
FLOOR = 0.5  # α of (W): the uniform share of every weight


def history_weights(reference_scores: np.ndarray, top: float = TOP_SHARE,
                    floor: float = FLOOR) -> np.ndarray:
    """(L,) item weights (W) from the reference models' scores ((M, L) in [0, 1], NaN = not
    evaluated): the floor α plus (1 − α) times each item's score spread among the
    strongest ``top`` share of the references, relative to its mean over items. An item no
    strong reference has, or a benchmark on which they all agree everywhere, gets weight 1
    (the uniform design)."""
    ref = np.asarray(reference_scores, np.float64)
    if ref.ndim != 2 or ref.shape[0] < 1 or ref.shape[1] < 1:
        raise DataError(f"item weights need a (models, items) score matrix, got shape "
                        f"{ref.shape}")
    if not 0 < top <= 1:
        raise ValueError(f"top must be in (0, 1], got {top}")
    if not 0 < floor <= 1:
        raise ValueError(f"the floor α must be in (0, 1], got {floor}")
    with np.errstate(invalid="ignore"):
        strength = np.nanmean(ref, axis=1)
    ranked = np.argsort(-np.nan_to_num(strength, nan=-np.inf), kind="stable")
    strong = ref[ranked[:max(1, round(top * ref.shape[0]))]]
    p = observed_item_means(strong)  # NaN where no strong reference has the item
    spread = np.sqrt(np.clip(p * (1 - p), 0.0, None))
    if np.isfinite(spread).any():
        spread = np.where(np.isfinite(spread), spread, np.nanmean(spread))
    else:
        spread = np.zeros_like(spread)
    if spread.mean() <= 0:
        return np.ones(ref.shape[1])
    return floor + (1 - floor) * spread / spread.mean()


def weighted_order(key: Array, weights: Array) -> tuple[Array, Array]:
    """(order, π): the L items in the order of successive sampling with probabilities ∝
    ``weights`` (each next item drawn from the unused ones), and π_t = Σ_{R_t} w / w_{I_t},
    the inverse of the probability with which step t's item was drawn. Drawn as a race of
    exponential clocks of rates w (memoryless, so each next arrival is item j with
    probability w_j / Σ_{R_t} w)."""
    weights = jnp.asarray(weights)
    arrival = jax.random.exponential(key, weights.shape, weights.dtype) / weights
    order = jnp.argsort(arrival)
    drawn = weights[order]
    # Σ_{R_t} w as the sum of the weights not drawn before t (a reverse cumsum: no
    # cancellation, and exactly w_{I_L} at the last step)
    remaining = jnp.cumsum(drawn[::-1])[::-1]
    return order, remaining / drawn


def step_term(score, position, inverse_probability, n_items: int, predicted=0.0,
              predicted_unused=0.0):
    """g_t / (L − t) of (★w) for the score met at step ``position`` = t (1-based) with
    inverse probability π_t, the prediction f_t(I_t) of that score (``predicted``) and
    the mean prediction over the unused items R_t (``predicted_unused``); both 0 without
    a factor model. 0 at t = L. Plain arithmetic, so it serves NumPy scalars (the ask/tell
    session) and JAX arrays (the simulation) alike."""
    pool = n_items - position + 1  # m_t = |R_t|
    left = n_items - position  # L − t
    g = (predicted - predicted_unused
         - (score - predicted) * (inverse_probability - pool) / pool)
    return g * (left > 0) / (left + (left == 0))


def corrected_total(total, correction, n, n_items: int):
    """n μ̂_n = Σ y − (L − n) Σ_t g_t / (L − t), from the plain ``total`` of n scores and the
    running ``correction`` (the form shared by (★) and (★w))."""
    return total - (n_items - n) * correction


def weighted_sums(scores: Array, order: Array, inverse_probability: Array) -> Array:
    """(K, L) n μ̂_n of (★w) with f ≡ 0 for every row of ``scores`` and every prefix n of
    ``order`` (items met with inverse probabilities ``inverse_probability``): the running
    sums SySRs' elimination reads."""
    scores = jnp.asarray(scores)
    n_items = scores.shape[-1]
    t = jnp.arange(1, n_items + 1)
    g = step_term(scores[:, order], t, inverse_probability, n_items)
    return corrected_total(jnp.cumsum(scores[:, order], axis=1), jnp.cumsum(g, axis=1), t,
                           n_items)
