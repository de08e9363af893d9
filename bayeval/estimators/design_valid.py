"""Design-valid active estimation (docs/methods.md §9): a martingale estimator of the benchmark
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

The fixed-n interval is θ̃_T ∓ z sqrt(V̂_T). With ``floor="model"`` (docs/methods.md §9
"variance floor") V_T is raised to at least F_T = Σ h_t² σ̂_t², the model-predicted
variance of θ̃_T times (Σ h)², which keeps the interval from collapsing when few residuals
are non-zero (scores near 0 or 1). That floor assumes every item's variance is at least
p_min (1 − p_min), which for a model scoring 1% is five times too much. ``floor="score"``
(the default) inverts a score-type floor instead, as the Wilson interval does for a mean:

    {θ0 : |θ̃_T − θ0| ≤ z sqrt(max(V_T, F_T g(θ0))) / Σ h_t},
    g(θ0) = min(1, θ0 (1 − θ0) / (p_min (1 − p_min))).

Near 0 the rounds' variance comes from the rare items scored 1 that the prediction missed
(near 1, the rare 0s); with a prediction of 0 everywhere it is θ (1 − θ) per item, so the
floor F_T g(θ0) is the predicted variance at the candidate θ0, and for θ0 in
[p_min, 1 − p_min] it is F_T itself (the model floor). With no residual seen the interval
is Wilson's, [θ̃, ≈ z² (1 − n/N)/n], not a fixed width. The reported interval is the
hull of that set (:func:`invert_interval`): towards the nearer bound of [0, 1] |θ̃ − θ0|
grows while the floor shrinks, but a centre outside [0, 1] can leave the set and enter it
again, so each side is read on a grid before the last crossing is bisected.

In [p_min, 1 − p_min] that floor stops growing with θ0 (g = 1), while a target's item
variance keeps growing towards θ0 (1 − θ0); a fixed-n interval read at a data-dependent
stop then misses where the draws so far have missed what the target solves (sparse
benchmarks, targets scoring 5–20%). ``floor="conditional"`` (the default) lets the floor
grow there as far as the observed items say it must: given them, a score θ0 fixes the
mean of the unseen ones, m_t(θ0) = (N θ0 − Σ_{j∈O_t} s_j) / |R_t|, and moving each
round's predicted variance to a predictor off by the constant that makes the score θ0
gives

    C(θ0) = Σ_t h_t² σ̂_t² [m_t(θ0) (1 − m_t(θ0)) − S_t²] / v̄_t,

S_t² = Var_{i∈R_t} p̂_i and v̄_t = mean_{i∈R_t} v_i (mean_{R_t} (p̂ + d)(1 − p̂ − d) =
m (1 − m) − S² for the shift d = m − mean p̂), a quadratic in θ0 kept as three running
sums. The floor is F_T g(θ0) outside [p_min, 1 − p_min] and C(θ0) kept between F_T and
F_T u(θ0), u(θ0) = θ0 (1 − θ0) / (p_min (1 − p_min)) (g without its cap), inside:

    {θ0 ∈ [L, U] : |θ̃_T − θ0| ≤ z sqrt(max(V_T, F_T g(θ0), min(C(θ0), F_T u(θ0)))) / Σ h_t},

with [L, U] = [Σ_O s / N, (Σ_O s + |R|) / N] the scores still possible for scores in
[0, 1]. Where the prediction is calibrated on the unseen items, m_t is their predicted
mean and C stays below the model floor (the clip of p̂ only raises v̄), so the interval
is the score floor's cut to [L, U]. On the sparse variants of IFEval and MuSR (1000 runs
each, ε = 0.05) it raised the coverage of targets scoring 5–95% from 0.942 and 0.913 to
0.954 and 0.948 with 3–4% fewer items; uncapped, C cost 17% more items below 5% on IFEval
for no coverage, and [L, U] alone left MuSR's cell at 0.907.

With ``anytime`` the interval is the asymptotic confidence sequence of Waudby-Smith et
al. (2024) with the two-sided normal-mixture boundary of Howard et al. (2021):

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
from jax import lax

from bayeval.estimators.base import Draw, Estimator
from bayeval.hparams import known
from bayeval.types import Array, Estimate, Prediction


def _stabilised(sigma2: Array, n_items: int, rounds: Array) -> Array:
    return 1.0 / jnp.sqrt(sigma2)


def _scheduled(sigma2: Array, n_items: int, rounds: Array) -> Array:
    # × N / |R_t|, a function of t alone
    return _stabilised(sigma2, n_items, rounds) * n_items / (n_items - rounds)


def _equal(sigma2: Array, n_items: int, rounds: Array) -> Array:
    return jnp.ones((), jnp.float64)


# each kind of round weight h_t from (σ̂_t², N, rounds before t) (module docstring)
WEIGHT_RULES = {"stabilised": _stabilised, "scheduled": _scheduled, "equal": _equal}
WEIGHTS = tuple(WEIGHT_RULES)


class Floor(NamedTuple):
    """What a variance floor does (module docstring): ``model`` raises V_T to F_T;
    ``inverted`` reports the interval that inverts the score-type floor F_T g(θ0);
    ``conditional`` grows that floor by C(θ0) and keeps the interval within the scores
    still possible."""

    model: bool
    inverted: bool
    conditional: bool


FLOOR_KINDS = {"conditional": Floor(False, True, True), "score": Floor(False, True, False),
               "model": Floor(True, False, False), "none": Floor(False, False, False)}
FLOORS = tuple(FLOOR_KINDS)
SIDE_POINTS = 65  # points read on each side of the centre before the last crossing's bisection
BISECTIONS = 40  # halvings of that crossing's bracket: reach / (64 · 2^40), below any digit


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
    null: Array  # (3,) coefficients of the conditional floor C(θ0) = c0 + c1 θ0 + c2 θ0²


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


def score_floor_scale(theta0: Array, p_min: float) -> Array:
    """g(θ0) = min(1, θ0 (1 − θ0) / (p_min (1 − p_min))) of the module docstring, θ0
    clipped to [0, 1]; 1 everywhere when p_min = 0 (no clip, no score floor)."""
    x = jnp.clip(theta0, 0.0, 1.0)
    positive = p_min > 0.0
    scale = jnp.where(positive, p_min * (1.0 - p_min), 1.0)
    return jnp.where(positive, jnp.minimum(1.0, x * (1.0 - x) / scale), jnp.ones_like(x))


def null_floor_terms(observed: Array, observed_sum: Array, prediction: Prediction,
                     weight: Array, p_min: float) -> Array:
    """One round's coefficients (c0, c1, c2) of the conditional floor (module docstring):
    w [m(θ0) (1 − m(θ0)) − S²] with m(θ0) = (N θ0 − Σ_{j∈O} s_j) / |R| the mean the
    unseen items R must have if the score is θ0, S² = Var_{i∈R} p̂_i and
    w = h² σ̂² / mean_{i∈R} v_i (``weight`` = h² σ̂²): the round's predicted variance, its
    items' variance moved to what a predictor off by a constant on R would give at θ0."""
    n_items = observed.shape[-1]
    unseen = ~observed
    size = jnp.maximum(jnp.sum(unseen), 1.0)
    p = jnp.clip(prediction.item_mean, 0.0, 1.0)
    mean_p = jnp.sum(jnp.where(unseen, p, 0.0)) / size
    spread = jnp.sum(jnp.where(unseen, (p - mean_p) ** 2, 0.0)) / size
    mean_v = jnp.sum(jnp.where(unseen, item_variance(prediction, p_min), 0.0)) / size
    w = weight / jnp.maximum(mean_v, 1e-12)
    a, g = n_items / size, -observed_sum / size  # m(θ0) = a θ0 + g
    return w * jnp.stack([g - g * g - spread, a - 2.0 * a * g, -a * a])


def invert_interval(centre: Array, half_at, reach: Array, points: int = SIDE_POINTS,
                    steps: int = BISECTIONS) -> tuple[Array, Array]:
    """The hull of {θ0 : |centre − θ0| ≤ half_at(θ0)} for a half-width ``half_at``
    (vectorised over θ0) that is at most ``reach`` everywhere. On each side of the centre
    the bracket [centre, centre ± reach] is read at ``points`` evenly spaced θ0, and the
    last crossing out of the set is found by bisection between the last point inside and
    the next; each end is the outer end of its final bracket, so the interval errs on the
    wide side by < reach / ((points − 1) 2^steps)."""
    fractions = jnp.linspace(0.0, 1.0, points)

    def side(sign: float) -> Array:
        xs = centre + sign * reach * fractions
        inside = jnp.abs(centre - xs) <= half_at(xs)
        last = jnp.max(jnp.where(inside, jnp.arange(points), 0))
        inner, outer = xs[last], xs[jnp.minimum(last + 1, points - 1)]

        def halve(_, ends):
            inner, outer = ends
            mid = 0.5 * (inner + outer)
            inside = jnp.abs(centre - mid) <= half_at(mid)
            return jnp.where(inside, mid, inner), jnp.where(inside, outer, mid)

        return lax.fori_loop(0, steps, halve, (inner, outer))[1]

    return side(-1.0), side(1.0)


def student_quantile(z: float, dof: Array) -> Array:
    """Student's t quantile with ``dof`` degrees of freedom at the normal quantile ``z``,
    by its Cornish–Fisher expansion in 1/ν to the third term (Abramowitz & Stegun 26.7.5;
    within 3e-3 of the exact quantile at ν ≥ 5 for z = 1.96)."""
    z2 = z * z
    g1 = (z2 + 1.0) * z / 4.0
    g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0
    g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0
    return z + g1 / dof + g2 / dof**2 + g3 / dof**3


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


def floor_kind(floor: bool | str) -> str:
    """``floor`` as one of :data:`FLOORS` (True: ``"model"``, False: ``"none"``)."""
    if floor is True:
        return "model"
    if floor is False:
        return "none"
    if floor not in FLOORS:
        raise ValueError(f"floor must be one of {', '.join(FLOORS)}, got {floor!r}")
    return floor


def estimator(weights: str = "stabilised", floor: bool | str = "conditional", anytime: bool = False,
              anytime_rounds: float = 0.25, min_share: float = 1.0,
              p_min: float = 0.0, recalibrate: float = 10.0,
              small_sample: bool = False) -> Estimator:
    """The design-valid estimator of the module docstring.

    weights: ``"stabilised"`` (h_t = 1/σ̂_t), ``"scheduled"`` (h_t = (N / |R_t|) / σ̂_t) or
        ``"equal"``. Without replacement σ̂_t shrinks roughly like |R_t| / N, so the
        schedule brings the weights close to inverse-variance ones (the finite-population
        correction of a mean) while Σ h_t² σ_t² stays a function of t alone, the
        stability that stabilised weights give the martingale CLT.
    floor: ``"conditional"`` (the score-type floor, grown in [p_min, 1 − p_min] by the
        floor C(θ0) given the observed items, within the scores still possible),
        ``"score"`` (invert the score-type floor F_T g(θ0)), ``"model"`` (raise V_T to
        the model-predicted F_T) or ``"none"``; True and False are ``"model"`` and
        ``"none"``.
    anytime: report the confidence sequence instead of the fixed-n interval.
    anytime_rounds: where the confidence sequence is tightest: a number of rounds, or a
        share of the N items when below 1.
    min_share: κ, the floor of σ̂_t² as a share of its first term (1: Var(R | C) is not
        subtracted, the default: a model's Var(R | C) may be far off, e.g. a bucket GP
        before its first re-fit, and the subtraction then makes the weights erratic).
    p_min: v_i is computed from p̂ clipped to [p_min, 1 − p_min].
    recalibrate: n0 of :func:`recalibrated` (0: use the backend's p̂ as it is).
    small_sample: read the fixed-n interval with n_eff − 1 degrees of freedom,
        n_eff = (Σ h_t)² / Σ h_t² the rounds' effective number: V_T × n_eff / (n_eff − 1)
        (θ̃_T estimated from the same rounds) and Student's quantile
        (:func:`student_quantile`) in place of z; the confidence sequence (``anytime``)
        is left as it is.
    """
    if known(recalibrate) and not recalibrate >= 0:
        raise ValueError(f"recalibrate must be ≥ 0, got {recalibrate}")
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    if known(min_share) and not 0.0 < min_share <= 1.0:
        raise ValueError(f"min_share must be in (0, 1], got {min_share}")
    if known(anytime_rounds) and not anytime_rounds > 0:
        raise ValueError(f"anytime_rounds must be positive, got {anytime_rounds}")
    floor = floor_kind(floor)
    weight_of, does = WEIGHT_RULES[weights], FLOOR_KINDS[floor]

    def init(n_items: int) -> DesignValidState:
        zero = jnp.zeros((), jnp.float64)
        return DesignValidState(jnp.zeros(n_items, bool), *([zero] * 10),
                                jnp.zeros(5, jnp.float64),
                                jnp.asarray(recalibrate, jnp.float64),
                                jnp.zeros(3, jnp.float64))

    def design(prediction: Prediction, probabilities: Array) -> Array:
        return predicted_variance(prediction, probabilities, min_share, p_min)

    def update(state: DesignValidState, prediction: Prediction, item: Array, score: Array,
               draw: Draw) -> DesignValidState:
        score = jnp.asarray(score, jnp.float64)
        theta = round_estimate(state, prediction, item, score, draw.q)
        sigma2 = draw.design
        h = weight_of(sigma2, state.observed.shape[-1], state.rounds)
        shift = jnp.where(state.rounds == 0, theta, state.shift)
        d = theta - shift
        p = jnp.clip(prediction.item_mean[item], 0.0, 1.0)
        fit = state.fit + jnp.stack([jnp.ones_like(p), p, score, p * p, p * score])
        null = state.null
        if does.conditional:
            null = null + null_floor_terms(state.observed, state.observed_sum, prediction,
                                           h * h * sigma2, p_min)
        return DesignValidState(
            state.observed.at[item].set(True), state.observed_sum + score,
            state.rounds + 1.0, shift, state.h + h, state.hd + h * d, state.h2 + h * h,
            state.h2d + h * h * d, state.h2d2 + h * h * d * d,
            state.predicted + h * h * sigma2,
            jnp.where(state.rounds == 0, h * h * sigma2, state.first), fit, state.strength,
            null)

    def estimate(state: DesignValidState, prediction: Prediction, z: float) -> Estimate:
        started = state.rounds > 0
        total = jnp.where(started, state.h, 1.0)
        delta = state.hd / total
        spread = jnp.maximum(state.h2d2 - 2.0 * delta * state.h2d + delta**2 * state.h2, 0.0)
        quantile = z
        if small_sample and not anytime:  # the fixed-n interval's correction only
            dof = jnp.maximum(total**2 / jnp.where(started, state.h2, 1.0) - 1.0, 1.0)
            spread = spread * (dof + 1.0) / dof
            quantile = student_quantile(z, dof)
        if does.model:
            spread = jnp.maximum(spread, state.predicted)
        value = jnp.where(started, state.shift + delta, prediction.mean)
        if anytime:
            alpha = math.erfc(z / math.sqrt(2.0))
            n_items = state.observed.shape[-1]
            m = jnp.where(anytime_rounds >= 1, anytime_rounds, anytime_rounds * n_items)
            rho = mixture_rho(m, alpha) * jnp.where(started, state.first, 1.0)

            def half_of(v: Array) -> Array:
                return mixture_boundary(v, rho, alpha) / total
        else:

            def half_of(v: Array) -> Array:
                return quantile * jnp.sqrt(v / total**2)

        if does.inverted:
            n_items = state.observed.shape[-1]
            low = state.observed_sum / n_items  # the score's range given the observed items
            high = (state.observed_sum + n_items - state.rounds) / n_items
            c0, c1, c2 = state.null[0], state.null[1], state.null[2]

            def floor_at(theta0: Array) -> Array:
                score_type = state.predicted * score_floor_scale(theta0, p_min)
                if not does.conditional:
                    return score_type
                x = jnp.clip(theta0, low, high)
                conditional = c0 + c1 * x + c2 * x * x
                # at most the score type's growth without its cap at 1 (where p_min > 0)
                y = jnp.clip(theta0, 0.0, 1.0)
                scale = jnp.where(p_min > 0.0, p_min * (1.0 - p_min), 1.0)
                conditional = jnp.where(p_min > 0.0, jnp.minimum(
                    conditional, state.predicted * y * (1.0 - y) / scale), conditional)
                return jnp.maximum(score_type, conditional)

            def half_at(theta0: Array) -> Array:
                return half_of(jnp.maximum(spread, floor_at(theta0)))

            top = state.predicted
            if does.conditional:  # the largest C(θ0) on [low, high] (c2 ≤ 0)
                vertex = jnp.clip(-c1 / jnp.where(c2 < 0, 2.0 * c2, -1.0), low, high)
                top = jnp.maximum(top, jnp.max(jnp.stack(
                    [c0 + c1 * x + c2 * x * x for x in (low, high, vertex)])))
            lower, upper = invert_interval(value, half_at, half_of(jnp.maximum(spread, top)))
            if does.conditional:  # no score outside [low, high] is possible; the
                # estimate stays unbiased, so it may lie outside, and the interval keeps it
                lower = jnp.clip(lower, jnp.minimum(low, value), jnp.maximum(high, value))
                upper = jnp.clip(upper, jnp.minimum(low, value), jnp.maximum(high, value))
            # Closed at the extremes the data allow: with every observed score 0, a score
            # of 0 is possible, and a lower bound within one item's share (1/N) above it is
            # the edge of a normal interval where the variance vanishes (at θ0 = 0), not
            # evidence against 0; the bound is closed at 0 (the interval only widens).
            # Likewise at 1 when every observed score is 1.
            step = 1.0 / n_items
            lower = jnp.where((state.observed_sum == 0.0) & (lower < step),
                              jnp.minimum(lower, 0.0), lower)
            upper = jnp.where((state.observed_sum == state.rounds) & (upper > 1.0 - step),
                              jnp.maximum(upper, 1.0), upper)
            if anytime:
                centre = 0.5 * (lower + upper)
                var = jnp.maximum(spread, floor_at(centre))
            else:  # the variance whose z-interval is as wide as the reported one
                var = ((upper - lower) / (2.0 * z)) ** 2 * total**2
        else:
            half = half_of(spread)
            lower, upper, var = value - half, value + half, spread
        var = jnp.where(started, var / total**2, 1.0)
        unstarted = 1e3 if anytime else z
        lower = jnp.where(started, lower, value - unstarted)
        upper = jnp.where(started, upper, value + unstarted)
        return Estimate(value, var, lower, upper)

    name = (f"design_valid({weights}{'' if floor == 'none' else f', {floor} floor'}"
            f"{', anytime' if anytime else ''})")
    return Estimator(name, init, update, estimate, needs_probabilities=True, design=design,
                     without_replacement=True)


__all__ = ["FLOORS", "DesignValidState", "estimator", "floor_kind", "invert_interval",
           "item_variance", "mixture_boundary", "mixture_rho", "predicted_variance",
           "recalibrated", "round_estimate", "score_floor_scale"]
