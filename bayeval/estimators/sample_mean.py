"""RS-Mean: the sample mean of the coreset with a finite-population interval.

Seed 000 §5.1 (baseline "RS-Mean"); docs/methods.md §5. For n observed items of N,

    R̂ = (1/n) Σ_{i∈C} s_i,    Var_R = (1 − n/N) S² / n,

with S² the unbiased sample variance (our choice: with the finite-population correction,
so the variance is 0 once every item is observed). Before two observations S² is
undefined; we use its bound 1/4 for scores in [0, 1] (our choice), and R̂ = 1/2 at n = 0.

Interval (our choice): while every observed score is 0 or 1, the Wilson score interval
with the same finite-population correction (:func:`wilson_fpc_bounds`); otherwise the Wald
interval R̂ ± z sqrt(Var_R). On IFEval the Wald interval at a width-based stop (ε = 0.1) covers
93.1% instead of 95% (it stops early when a run of equal scores shrinks S²); the Wilson
interval covers 94.7% (``bench/coverage.py``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp

from bayeval.estimators.base import Draw, Estimator
from bayeval.estimators.interval import (
    finite_population_factor,
    gaussian_bounds,
    wilson_fpc_bounds,
    z_value,
)
from bayeval.inference.base import Backend, no_refit
from bayeval.types import Array, Estimate, Prediction


def items_for_width(theta: float, width: float, n_items: int, level: float = 0.95) -> int:
    """Items RS-Mean needs for a ``level`` interval of ``width`` at a score ``theta``:
    the smallest n with 2 z sqrt((1 − (n − 1)/(N − 1)) θ(1 − θ)/n) ≤ width, without
    replacement (the Wald form of the interval above; at least 1, at most N), i.e.
    n = n₀ N / (n₀ + N − 1) with n₀ = (2z)² θ(1 − θ) / width²."""
    if width <= 0:
        return n_items
    theta = min(max(theta, 0.0), 1.0)
    n0 = (2.0 * z_value(level)) ** 2 * theta * (1.0 - theta) / width**2
    if n_items <= 1:
        return n_items
    n = n0 * n_items / (n0 + n_items - 1)
    return int(min(max(math.ceil(n - 1e-9), 1), n_items))


class SampleMeanState(NamedTuple):
    observed: Array  # (N,) bool
    scores: Array  # (N,) float64, 0 where unobserved
    count: Array  # () number observed
    total: Array  # () Σ s
    total_sq: Array  # () Σ s²
    binary: Array  # () True while every observed score is 0 or 1


def init(reference_scores: Array, n_items: int) -> SampleMeanState:
    """Empty coreset over ``n_items`` items (the reference matrix is not used)."""
    del reference_scores
    zero = jnp.zeros((), jnp.float64)
    return SampleMeanState(jnp.zeros(n_items, bool), jnp.zeros(n_items, jnp.float64),
                           zero, zero, zero, jnp.ones((), bool))


def observe(state: SampleMeanState, item: Array, score: Array) -> SampleMeanState:
    """Add the score of one item to the coreset."""
    score = jnp.asarray(score, jnp.float64)
    return SampleMeanState(state.observed.at[item].set(True), state.scores.at[item].set(score),
                           state.count + 1.0, state.total + score,
                           state.total_sq + score * score,
                           state.binary & ((score == 0.0) | (score == 1.0)))


def _moments(n: Array, total: Array, total_sq: Array, n_items: int) -> tuple[Array, Array,
                                                                            Array]:
    """(R̂, S², Var_R) of n observed scores with sum ``total`` and sum of squares
    ``total_sq`` (module docstring: R̂ = 1/2 at n = 0, S² = 1/4 below two scores)."""
    mean = jnp.where(n > 0, total / jnp.maximum(n, 1.0), 0.5)
    s2 = jnp.where(n >= 2, jnp.maximum(total_sq - n * mean * mean, 0.0) / jnp.maximum(n - 1.0, 1.0),
                   0.25)
    return mean, s2, finite_population_factor(n, n_items) * s2 / jnp.maximum(n, 1.0)


def predict(state: SampleMeanState) -> Prediction:
    """R̂ and its finite-population variance; per-item predictions are the sample mean."""
    n_items = state.observed.shape[0]
    n = state.count
    mean, s2, var = _moments(n, state.total, state.total_sq, n_items)
    unobserved = ~state.observed
    item_mean = jnp.where(unobserved, mean, state.scores)
    item_var = jnp.where(unobserved, s2, 0.0)
    # Cov(R, s_i) for an unobserved i under simple random sampling: s_i enters R with
    # weight 1/N.
    item_cov = jnp.where(unobserved, s2 / n_items, 0.0)
    return Prediction(mean, var, item_mean, item_var, item_cov, n, jnp.ones((), bool))


backend = Backend("sample_mean", init, observe, predict, no_refit)


class SampleMeanSums(NamedTuple):
    """The estimator's state: n, Σ s, Σ s², and whether every score so far is 0 or 1."""

    count: Array
    total: Array
    total_sq: Array
    binary: Array


def _start(n_items: int) -> SampleMeanSums:
    del n_items
    zero = jnp.zeros((), jnp.float64)
    return SampleMeanSums(zero, zero, zero, jnp.ones((), bool))


def _add(state: SampleMeanSums, prediction: Prediction, item: Array, score: Array,
         draw: Draw) -> SampleMeanSums:
    score = jnp.asarray(score, jnp.float64)
    return state._replace(count=state.count + 1.0, total=state.total + score,
                          total_sq=state.total_sq + score * score,
                          binary=state.binary & ((score == 0.0) | (score == 1.0)))


def _report(state: SampleMeanSums, prediction: Prediction, z: float) -> Estimate:
    """R̂ with Wilson–FPC bounds while the scores are binary, Wald–FPC bounds otherwise."""
    n_items = prediction.item_mean.shape[-1]
    mean, _, var = _moments(state.count, state.total, state.total_sq, n_items)
    w_lo, w_hi = wilson_fpc_bounds(mean, state.count, n_items, z)
    g_lo, g_hi = gaussian_bounds(mean, var, z)
    return Estimate(mean, var, jnp.where(state.binary, w_lo, g_lo),
                    jnp.where(state.binary, w_hi, g_hi))


def estimator() -> Estimator:
    """RS-Mean (module docstring) as an estimator stage: the mean of the observed scores,
    whatever backend picked them (valid as an interval only under uniform selection)."""
    return Estimator("sample_mean", _start, _add, _report)
