"""Pro-Active Inference and the uniform Horvitz–Thompson baseline (seed 001 §3.2, App.
A.2.2; docs/methods.md §3).

The target is the finite-bank score θ = R* = (1/N) Σ_j z_j of the N items (no
superpopulation). At round s = 0..T−1 an item I_s is drawn with replacement from q_s (which
may depend on everything observed before), with predictions p̂^{(s)} made before round s's
update and P_s = Σ_j p̂_j^{(s)}:

    φ_s = P_s + (z_{I_s} − p̂_{I_s}) / q_s(I_s),        θ̂ = (1/(T N)) Σ_s φ_s,
    A = (1/T) Σ_s z_{I_s} / q_s(I_s),
    v² = max(0, (1/(T N²)) [Σ_s ((z_{I_s} − p̂_{I_s}) / q_s(I_s))² − Σ_s (A − P_s)²]),
    CI = θ̂ ± z_{1−α/2} sqrt(v² / T), clipped to [0, 1].

That v² is the authors' (``centre="ht"``); bayeval's default centres the subtracted term at
N θ̂ instead of A, with 1/(T − 1) (see :func:`pai_estimate`).

Each φ_s/N is conditionally unbiased for θ, so θ̂ is unbiased whatever the predictions and
the policy (with q_s > 0 wherever z_j ≠ p̂_j); v² estimates the mean conditional variance
of φ_s/N, A estimating N θ. :class:`PAIState` keeps the five running sums that make every
quantity O(1) per round. With constant predictions and q_s uniform, θ̂ is the sample mean
of T uniform draws with replacement and v² its sample variance (1/T for "ht", 1/(T − 1)
for the default).

The uniform baseline (the reference of the ESS multiplier) is Poisson sampling: each item
kept independently with probability π = T/N, θ̂ = (1/N) Σ_j ξ_j z_j / π (Horvitz–Thompson)
with variance estimate (1/N²) Σ_j ξ_j (1 − π) z_j² / π².
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from bayeval.estimators.base import Draw, Estimator, gaussian_estimate
from bayeval.estimators.interval import z_value
from bayeval.types import Array, Estimate, Prediction


class PAIState(NamedTuple):
    """Running sums over rounds: T, Σφ, Σ r² (r = (z − p̂)/q), Σ z/q, Σ P, Σ P²."""

    rounds: Array
    sum_phi: Array
    sum_r2: Array
    sum_a: Array
    sum_p: Array
    sum_p2: Array


def pai_start() -> PAIState:
    """No round yet."""
    zero = jnp.zeros((), jnp.float64)
    return PAIState(zero, zero, zero, zero, zero, zero)


def pai_update(state: PAIState, z: Array, p_item: Array, q_item: Array,
               total: Array) -> PAIState:
    """Add round s: score ``z`` of the drawn item, its prediction ``p_item`` and draw
    probability ``q_item`` (both before the round's update), and ``total`` = P_s."""
    r = (z - p_item) / q_item
    return PAIState(state.rounds + 1.0, state.sum_phi + total + r, state.sum_r2 + r * r,
                    state.sum_a + z / q_item, state.sum_p + total,
                    state.sum_p2 + total * total)


def pai_estimate(state: PAIState, n_items: int, centre: str = "estimate"
                 ) -> tuple[Array, Array]:
    """(θ̂, Var θ̂ = v²/T); before any round (T = 0): (NaN, NaN).

    ``centre="estimate"`` (bayeval's default) centres the subtracted term at N θ̂,
    v² = (1/((T − 1) N²)) [Σ_s r_s² − Σ_s (N θ̂ − P_s)²] (with constant predictions: the
    unbiased sample variance of the φ_s / N); ``centre="ht"`` is the authors' form of the
    module docstring, centred at A with 1/T. A = (1/T) Σ z/q is a Horvitz–Thompson
    estimate of N θ with heavy tails: when an item the model is sure it gets right (p̂ ≈ 1,
    so q is near the floor) is drawn and is right, A jumps while r stays ≈ 0, and v² can
    drop to 0 — a zero-width interval. On IFEval+MuSR at 65 draws that happened in 0.3% of
    runs and cost 1 point of coverage (docs/results/coverage/README.md)."""
    t = state.rounds
    safe_t = jnp.maximum(t, 1.0)
    theta = state.sum_phi / (safe_t * n_items)
    if centre == "ht":
        c, dof = state.sum_a / safe_t, safe_t
    elif centre == "estimate":
        c, dof = theta * n_items, jnp.maximum(t - 1.0, 1.0)
    else:
        raise ValueError(f"centre must be 'estimate' or 'ht', got {centre!r}")
    spread = t * c * c - 2.0 * c * state.sum_p + state.sum_p2  # Σ_s (c − P_s)²
    v2 = jnp.maximum(0.0, (state.sum_r2 - spread) / (dof * n_items**2))
    var = v2 / safe_t
    return jnp.where(t > 0, theta, jnp.nan), jnp.where(t > 0, var, jnp.nan)


def pai_from_rounds(z: Array, p_item: Array, q_item: Array, totals: Array,
                    n_items: int, centre: str = "estimate") -> tuple[Array, Array]:
    """(θ̂, Var θ̂) from per-round arrays, directly by the formulas (the batch form of
    :func:`pai_update` + :func:`pai_estimate`)."""
    z, p_item, q_item, totals = map(jnp.asarray, (z, p_item, q_item, totals))
    t = z.shape[-1]
    r = (z - p_item) / q_item
    theta = jnp.sum(totals + r, -1) / (t * n_items)
    if centre == "ht":
        c, dof = jnp.mean(z / q_item, -1), t
    else:
        c, dof = theta * n_items, max(t - 1, 1)
    v2 = jnp.maximum(0.0, (jnp.sum(r * r, -1) - jnp.sum((c[..., None] - totals) ** 2, -1))
                     / (dof * n_items**2))
    return theta, v2 / t


def estimator(centre: str = "estimate") -> Estimator:
    """Pro-Active Inference as an estimator stage: every observation is a round, added
    with the pre-observation ``item_mean`` as p̂ (P_s = its sum over all N items) and the
    policy's draw probability ``q``; the estimate is θ̂ ∓ z sqrt(v²/T) (the Wald interval,
    unclipped). Before the first round: the plug-in mean of the predictions with variance
    1 (an uninformative interval). For sampling with replacement (FAQ)."""
    if centre not in ("estimate", "ht"):
        raise ValueError(f"centre must be 'estimate' or 'ht', got {centre!r}")

    def init(n_items: int) -> PAIState:
        del n_items
        return pai_start()

    def update(state: PAIState, prediction: Prediction, item: Array, score: Array,
               draw: Draw) -> PAIState:
        return pai_update(state, score, prediction.item_mean[item], draw.q,
                          jnp.sum(prediction.item_mean))

    def estimate(state: PAIState, prediction: Prediction, z: float) -> Estimate:
        theta, var = pai_estimate(state, prediction.item_mean.shape[-1], centre)
        done = state.rounds > 0
        return gaussian_estimate(jnp.where(done, theta, prediction.mean),
                                 jnp.where(done, var, 1.0), z)

    return Estimator(f"pai({centre})", init, update, estimate, needs_probabilities=True)


def wald_interval(theta: Array, var: Array, level: float = 0.95) -> tuple[Array, Array]:
    """θ̂ ∓ z_{(1+level)/2} sqrt(var), clipped to [0, 1]."""
    half = z_value(level) * jnp.sqrt(var)
    return jnp.clip(theta - half, 0.0, 1.0), jnp.clip(theta + half, 0.0, 1.0)


def horvitz_thompson_uniform(z: Array, kept: Array, pi: float) -> tuple[Array, Array]:
    """(θ̂, Var θ̂) of Poisson sampling with inclusion probability ``pi`` (``kept``: the
    inclusion indicators ξ_j; ``z``: all items' scores, read only where kept)."""
    z, kept = jnp.asarray(z, jnp.float64), jnp.asarray(kept, jnp.float64)
    n_items = z.shape[-1]
    theta = jnp.sum(kept * z, -1) / (pi * n_items)
    var = jnp.sum(kept * (1.0 - pi) * z * z, -1) / (pi**2 * n_items**2)
    return theta, var


def finite_bank_target(scores: Array) -> Array:
    """R* = θ = (1/N) Σ_j z_j, the target every interval here is for (last axis = items)."""
    return jnp.mean(jnp.asarray(scores, jnp.float64), -1)
