"""Design-valid active estimation (METHODS.md §9): a martingale estimator of the benchmark
score that any backend's prediction can drive and whose interval holds whatever that
prediction gets wrong.

Items are drawn without replacement. Before round t the observed items are O and the
rest R_t; from the backend's Prediction computed on what is known before the round
(p̂_i = ``item_mean`` clipped to [0, 1]) and the draw's distribution q_t over R_t, the
round gives

    θ̂_t = (1/N) [ Σ_{j∈O} s_j + Σ_{i∈R_t} p̂_i + (s_{I_t} − p̂_{I_t}) / q_t(I_t) ],

with E[θ̂_t | past] = θ for any predictor and any q_t > 0 on R_t (Zrnic & Candès 2024,
active inference; here over a finite population). Its conditional variance is predicted
before the draw (the estimator's ``design`` statistic, journaled with the draw):

    σ̂_t² = max((1/N²) Σ_{i∈R_t} v_i / q_t(i) − Var(R | C),  κ (1/N²) Σ_{i∈R_t} v_i / q_t(i)),

v_i = p̂_i (1 − p̂_i) (the largest variance of a score in [0, 1] with mean p̂_i; exact for
binary scores; p̂ clipped to [p_min, 1 − p_min] so that a model's near-certain
predictions do not make a round look certain), κ = ``min_share`` a floor that keeps one
round from taking all the weight when the model's Var(R | C) is close to the first term
(κ = 1, the default, leaves Var(R | C) out: σ̂_t is then an upper bound under the model).
The rounds are combined with weights h_t (variance-stabilising h_t = 1/σ̂_t, Hadad et
al. 2021; scheduled h_t = (N / |R_t|) / σ̂_t; or equal h_t = 1):

    θ̃_T = Σ h_t θ̂_t / Σ h_t,   V_T = Σ h_t² (θ̂_t − θ̃_T)²,   V̂_T = V_T / (Σ h_t)².

The fixed-n interval is θ̃_T ∓ z sqrt(V̂_T). With ``floor`` (METHODS.md §9 "variance
floor") V_T is raised to at least F_T = Σ h_t² σ̂_t², the model-predicted variance of
θ̃_T times (Σ h)², which keeps the interval from collapsing when few residuals are
non-zero (scores near 0 or 1). With ``anytime`` the interval is the asymptotic confidence
sequence of Waudby-Smith et al. (2024) with the two-sided normal-mixture boundary of
Howard et al. (2021):

    θ̃_T ∓ sqrt((V + ρ) log((V + ρ) / (ρ α²))) / Σ h_t,

valid at every T at once (stop on the estimate, peek, continue), with ρ fixed before any
draw so that the boundary is tightest at intrinsic time V = m (m = ``anytime_rounds``
rounds times h_1² σ̂_1², the units of V): ρ = m / x with x = 2 log(1/α) + log(1 + x),
whose first iterate is Howard et al.'s approximation.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp

from bayeval.estimators.base import Draw, Estimator, gaussian_estimate
from bayeval.types import Array, Estimate, Prediction

WEIGHTS = ("stabilised", "scheduled", "equal")


class DesignValidState(NamedTuple):
    """Running sums of the rounds (module docstring); ``d`` is θ̂_t − c with c the first
    round's θ̂ (a shift that keeps the sums of squares well conditioned)."""

    observed: Array  # (N,) bool
    observed_sum: Array  # Σ_{j∈O} s_j
    rounds: Array  # T
    shift: Array  # c
    h: Array  # Σ h_t
    hd: Array  # Σ h_t d_t
    h2: Array  # Σ h_t²
    h2d: Array  # Σ h_t² d_t
    h2d2: Array  # Σ h_t² d_t²
    predicted: Array  # F_T = Σ h_t² σ̂_t²
    first: Array  # h_1² σ̂_1², the scale of ρ
    fit: Array  # (5,) Σ 1, Σ p̂_I, Σ s_I, Σ p̂_I², Σ p̂_I s_I over the rounds (recalibration)
    strength: Array  # n0 of the recalibration (0: off)


def item_variance(prediction: Prediction, p_min: float = 0.0) -> Array:
    """v_i = p̂_i (1 − p̂_i), p̂ = ``item_mean`` clipped to [p_min, 1 − p_min]."""
    p = jnp.clip(prediction.item_mean, p_min, 1.0 - p_min)
    return p * (1.0 - p)


def predicted_variance(prediction: Prediction, probabilities: Array,
                       min_share: float = 1.0, p_min: float = 0.0) -> Array:
    """σ̂_t² of the module docstring for a draw from ``probabilities`` ((N,), 0 outside
    R_t), from the Prediction known before it."""
    n_items = probabilities.shape[-1]
    drawn = probabilities > 0
    spread = jnp.sum(jnp.where(drawn, item_variance(prediction, p_min)
                               / jnp.where(drawn, probabilities, 1.0), 0.0)) / n_items**2
    tiny = 1e-12 / n_items**2
    return jnp.maximum(jnp.maximum(spread - prediction.var, min_share * spread), tiny)


def recalibrated(state: DesignValidState, p: Array) -> Array:
    """p̃ = clip(a + b p̂, 0, 1), (a, b) the ridge fit of the past rounds' scores on their
    predictions (prior a = 0, b = 1 with the weight of n0 rounds): a linear recalibration
    of the backend from the past alone, so that a predictor that is worse than a constant
    is shrunk towards one while every θ̂_t stays unbiased (its p̃ is known before the
    draw). With n0 = 0 it is p̂ itself."""
    count, sp, ss, spp, sps = (state.fit[k] for k in range(5))
    n0 = state.strength
    det = (count + n0) * (spp + n0) - sp * sp
    a = ((spp + n0) * ss - sp * (sps + n0)) / jnp.where(det > 0, det, 1.0)
    b = ((count + n0) * (sps + n0) - sp * ss) / jnp.where(det > 0, det, 1.0)
    return jnp.where(n0 > 0, jnp.clip(a + b * p, 0.0, 1.0), p)


def round_estimate(state: DesignValidState, prediction: Prediction, item: Array,
                   score: Array, q: Array) -> Array:
    """θ̂_t of one round (module docstring), with the recalibrated p̃ as predictor."""
    p = recalibrated(state, jnp.clip(prediction.item_mean, 0.0, 1.0))
    unseen = jnp.sum(jnp.where(state.observed, 0.0, p))
    return (state.observed_sum + unseen + (score - p[item]) / q) / p.shape[-1]


def mixture_rho(rounds: float, alpha: float) -> float:
    """The ρ that makes the two-sided normal-mixture boundary tightest at intrinsic time
    m = ``rounds``: d/dρ of (m + ρ) log((m + ρ)/(ρ α²)) vanishes at m/ρ = x with
    x = 2 log(1/α) + log(1 + x) (a contraction: solved by iteration from x = 2 log(1/α))."""
    two_log = 2.0 * math.log(1.0 / alpha)
    x = two_log
    for _ in range(100):
        x = two_log + math.log1p(x)
    return rounds / x


def mixture_boundary(v: Array, rho: Array, alpha: float) -> Array:
    """sqrt((V + ρ) log((V + ρ) / (ρ α²))): the two-sided normal-mixture boundary at
    intrinsic time V (Howard et al. 2021): the |S| at which the mixture over λ ~ N(0, 1/ρ)
    of exp(λ S − λ² V / 2) reaches 1/α."""
    return jnp.sqrt((v + rho) * (jnp.log((v + rho) / rho) - 2.0 * math.log(alpha)))


def estimator(weights: str = "stabilised", floor: bool = True, anytime: bool = False,
              anytime_rounds: float = 0.25, min_share: float = 1.0,
              p_min: float = 0.0, recalibrate: float = 10.0) -> Estimator:
    """The design-valid estimator of the module docstring.

    weights: ``"stabilised"`` (h_t = 1/σ̂_t), ``"scheduled"`` (h_t = (N / |R_t|) / σ̂_t) or
        ``"equal"``. Without replacement σ̂_t shrinks roughly like |R_t| / N, so the
        schedule brings the weights close to inverse-variance ones (the finite-population
        correction of a mean) while Σ h_t² σ_t² stays a function of t alone, the
        stability that stabilised weights give the martingale CLT.
    floor: raise V_T to the model-predicted F_T (near 0 and 1).
    anytime: report the confidence sequence instead of the fixed-n interval.
    anytime_rounds: where the confidence sequence is tightest: a number of rounds, or a
        share of the N items when below 1.
    min_share: κ, the floor of σ̂_t² as a share of its first term (1: Var(R | C) is not
        subtracted, the default: a model's Var(R | C) may be far off, e.g. a bucket GP
        before its first re-fit, and the subtraction then makes the weights erratic).
    p_min: v_i is computed from p̂ clipped to [p_min, 1 − p_min].
    recalibrate: n0 of :func:`recalibrated` (0: use the backend's p̂ as it is).
    """
    if recalibrate < 0:
        raise ValueError(f"recalibrate must be ≥ 0, got {recalibrate}")
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    if not 0.0 < min_share <= 1.0:
        raise ValueError(f"min_share must be in (0, 1], got {min_share}")
    if anytime_rounds <= 0:
        raise ValueError(f"anytime_rounds must be positive, got {anytime_rounds}")

    def init(n_items: int) -> DesignValidState:
        zero = jnp.zeros((), jnp.float64)
        return DesignValidState(jnp.zeros(n_items, bool), *([zero] * 10),
                                jnp.zeros(5, jnp.float64),
                                jnp.asarray(recalibrate, jnp.float64))

    def design(prediction: Prediction, probabilities: Array) -> Array:
        return predicted_variance(prediction, probabilities, min_share, p_min)

    def update(state: DesignValidState, prediction: Prediction, item: Array, score: Array,
               draw: Draw) -> DesignValidState:
        score = jnp.asarray(score, jnp.float64)
        theta = round_estimate(state, prediction, item, score, draw.q)
        sigma2 = draw.design
        if weights == "equal":
            h = jnp.ones((), jnp.float64)
        else:
            h = 1.0 / jnp.sqrt(sigma2)
            if weights == "scheduled":  # × N / |R_t|, a function of t alone
                n_items = state.observed.shape[-1]
                h = h * n_items / (n_items - state.rounds)
        shift = jnp.where(state.rounds == 0, theta, state.shift)
        d = theta - shift
        p = jnp.clip(prediction.item_mean[item], 0.0, 1.0)
        fit = state.fit + jnp.stack([jnp.ones_like(p), p, score, p * p, p * score])
        return DesignValidState(
            state.observed.at[item].set(True), state.observed_sum + score,
            state.rounds + 1.0, shift, state.h + h, state.hd + h * d, state.h2 + h * h,
            state.h2d + h * h * d, state.h2d2 + h * h * d * d,
            state.predicted + h * h * sigma2,
            jnp.where(state.rounds == 0, h * h * sigma2, state.first), fit, state.strength)

    def estimate(state: DesignValidState, prediction: Prediction, z: float) -> Estimate:
        started = state.rounds > 0
        total = jnp.where(started, state.h, 1.0)
        delta = state.hd / total
        spread = jnp.maximum(state.h2d2 - 2.0 * delta * state.h2d + delta**2 * state.h2, 0.0)
        if floor:
            spread = jnp.maximum(spread, state.predicted)
        value = jnp.where(started, state.shift + delta, prediction.mean)
        var = jnp.where(started, spread / total**2, 1.0)
        if not anytime:
            return gaussian_estimate(value, var, z)
        alpha = math.erfc(z / math.sqrt(2.0))
        n_items = state.observed.shape[-1]
        m = anytime_rounds if anytime_rounds >= 1 else anytime_rounds * n_items
        rho = mixture_rho(m, alpha) * jnp.where(started, state.first, 1.0)
        half = jnp.where(started, mixture_boundary(spread, rho, alpha) / total, 1e3)
        return Estimate(value, var, value - half, value + half)

    name = f"design_valid({weights}{', floor' if floor else ''}{', anytime' if anytime else ''})"
    return Estimator(name, init, update, estimate, needs_probabilities=True, design=design,
                     without_replacement=True)


__all__ = ["DesignValidState", "estimator", "item_variance", "mixture_boundary",
           "mixture_rho", "predicted_variance", "recalibrated", "round_estimate"]
