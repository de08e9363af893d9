"""FAQ's hybrid sampling policy from composable parts (seed 001 §3.3–3.5; METHODS.md §3).

Parts, each usable on its own with any backend's :class:`~bayeval.inference.base.Prediction`:

* :func:`oracle_optimal` — h_o(j) ∝ sqrt(p̂_j (1 − p̂_j)), the variance-minimising policy
  of the oracle superpopulation model (seed 001 Prop. 3.2), from ``item_mean``;
* :func:`variance_reduction` — h_a(j) ∝ Cov(R, s_j)² / Var(s_j), the reduction of Var(R)
  that observing item j brings under the (linearised) Gaussian posterior; with the factor
  backend this is FAQ's active score d_j = w_j (v_jᵀ Σ g)² / (1 + w_j v_jᵀ Σ v_j);
* schedules of the round s (``Prediction.n``): :func:`exploration` α_s and
  :func:`tempering` β_s;
* combinators: :func:`blend` ((1 − α) h_1 + α h_2, α a number or schedule), :func:`power`
  (h^β) and :func:`~bayeval.acquisition.base.uniform_floor` ((1 − τ) h / Σh + τ / N).

FAQ's policy is their composition (:func:`faq_rule`)::

    uniform_floor(power(blend(oracle_optimal(), variance_reduction(), exploration(ρ, T)),
                        tempering(β0, γ, T)), τ)

and items are drawn from it with replacement (:func:`sample_with_replacement`), the
probability of the drawn item being what Pro-Active Inference needs
(:mod:`bayeval.estimators.pai`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from bayeval.acquisition.base import Rule, mixture, uniform_floor
from bayeval.inference.base import Array, Prediction
from bayeval.stopping.rules import budget_rounds

Schedule = Callable[[Prediction], Array]
P_CLIP = 1e-12


def oracle_optimal() -> Rule:
    """log sqrt(p̂_j (1 − p̂_j)) with p̂_j = ``item_mean`` clamped to [1e-12, 1 − 1e-12]."""

    def rule(prediction: Prediction, available: Array) -> Array:
        p = jnp.clip(prediction.item_mean, P_CLIP, 1.0 - P_CLIP)
        return 0.5 * (jnp.log(p) + jnp.log1p(-p))

    return rule


def variance_reduction() -> Rule:
    """log (Cov(R, s_j)² / Var(s_j)): the active-learning score (−∞ where Var(s_j) = 0)."""

    def rule(prediction: Prediction, available: Array) -> Array:
        var = prediction.item_var
        d = prediction.item_cov ** 2 / jnp.where(var > 0, var, 1.0)
        return jnp.where((var > 0) & (d > 0), jnp.log(jnp.where(d > 0, d, 1.0)), -jnp.inf)

    return rule


def exploration_weight(rho: Array, s: Array, rounds: int) -> Array:
    """α_s = max(0, 1 − (s + 1)/(ρ T)), 0 when ρ = 0 (``rho`` may be traced)."""
    r = jnp.asarray(rho, jnp.float64)
    decay = 1.0 - (s + 1.0) / (jnp.where(r > 0, r, 1.0) * rounds)
    return jnp.where(r > 0, jnp.maximum(0.0, decay), 0.0)


def tempering_exponent(beta0: Array, gamma: Array, s: Array, rounds: int) -> Array:
    """β_s = β0 min((s + 1)/(γ T), 1), β0 when γ = 0 (``beta0``, ``gamma`` may be traced)."""
    g = jnp.asarray(gamma, jnp.float64)
    ramp = jnp.minimum((s + 1.0) / (jnp.where(g > 0, g, 1.0) * rounds), 1.0)
    return beta0 * jnp.where(g > 0, ramp, 1.0)


def exploration(rho: float, budget: float) -> Schedule:
    """The schedule α_s of :func:`exploration_weight` at round s = ``Prediction.n``: the
    active part's share, decaying to 0 by round ρT."""

    def alpha(prediction: Prediction) -> Array:
        rounds = budget_rounds(budget, prediction.item_mean.shape[-1])
        return exploration_weight(rho, prediction.n, rounds)

    return alpha


def tempering(beta0: float, gamma: float, budget: float) -> Schedule:
    """The schedule β_s of :func:`tempering_exponent` at round s = ``Prediction.n``: the
    exponent ramps up to β0 by round γT."""

    def beta(prediction: Prediction) -> Array:
        rounds = budget_rounds(budget, prediction.item_mean.shape[-1])
        return tempering_exponent(beta0, gamma, prediction.n, rounds)

    return beta


def _value(x: float | Schedule, prediction: Prediction) -> Array:
    return x(prediction) if callable(x) else jnp.asarray(x, jnp.float64)


def blend(first: Rule, second: Rule, alpha: float | Schedule) -> Rule:
    """(1 − α) softmax(first) + α softmax(second) as log-weights; α a number or a
    schedule."""
    return mixture([first, second], [lambda p: 1.0 - _value(alpha, p),
                                     lambda p: _value(alpha, p)])


def power(inner: Rule, exponent: float | Schedule) -> Rule:
    """h^β for h = softmax(inner): β · log h (β a number or a schedule; β → 0 flattens h
    towards uniform)."""

    def rule(prediction: Prediction, available: Array) -> Array:
        log_h = jnp.where(available, inner(prediction, available), -jnp.inf)
        log_h = log_h - jax.scipy.special.logsumexp(log_h)
        # masked after scaling: β = 0 would turn −∞ into NaN
        return jnp.where(available, _value(exponent, prediction) * log_h, -jnp.inf)

    return rule


def faq_rule(budget: float, beta0: float = 1.0, rho: float = 0.25, gamma: float = 0.25,
             tau: float = 0.05) -> Rule:
    """FAQ's hybrid policy q_s (seed 001 Eq. 4; METHODS.md §3) for a budget of T rounds.

    The defaults are the robust (β0, τ) = (1.0, 0.05) of seed 001 §5 with ρ = γ = 0.25."""
    if isinstance(tau, int | float) and not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau}")
    if any(isinstance(x, int | float) and x < 0 for x in (beta0, rho, gamma)):
        raise ValueError(f"beta0, rho and gamma must be ≥ 0, got {beta0}, {rho}, {gamma}")
    hybrid = blend(oracle_optimal(), variance_reduction(), exploration(rho, budget))
    return uniform_floor(power(hybrid, tempering(beta0, gamma, budget)), tau)


def hybrid_probabilities(p: Array, active_score: Array, alpha: Array, beta: Array,
                         tau: Array) -> Array:
    """FAQ's q_s in closed form over the last axis (METHODS.md §3), in probability space:
    h_o ∝ sqrt(p̂(1 − p̂)), h_a ∝ d (``active_score``), h = ((1 − α) h_o + α h_a)^β,
    q = (1 − τ) h / Σh + τ / N. :func:`faq_rule` composes the same q from its parts."""
    n = p.shape[-1]
    h_o = jnp.sqrt(p * (1.0 - p))
    h_o = h_o / jnp.sum(h_o, -1, keepdims=True)
    total = jnp.sum(active_score, -1, keepdims=True)
    h_a = active_score / jnp.where(total > 0, total, 1.0)
    h = (1.0 - alpha) * h_o + alpha * h_a
    h = h if isinstance(beta, int | float) and beta == 1 else h ** beta
    return (1.0 - tau) * h / jnp.sum(h, -1, keepdims=True) + tau / n


def probabilities(log_weights: Array, available: Array) -> Array:
    """softmax(log_w) over the available items (0 elsewhere)."""
    return jax.nn.softmax(jnp.where(available, log_weights, -jnp.inf))


def inverse_cdf(cdf: Array, u: Array) -> Array:
    """The item whose cumulative interval holds ``u``: ``cdf`` (..., N) cumulative
    probabilities, ``u`` (...) uniforms (leading axes broadcast)."""
    return jnp.minimum(jnp.sum(cdf <= u[..., None], -1), cdf.shape[-1] - 1)


def sample_with_replacement(key: Array, log_weights: Array, available: Array,
                            k: int = 1) -> Array:
    """``k`` independent draws ∝ exp(log_w) over the available items (repeats possible), by
    inverting the cumulative distribution (one uniform per draw, no per-item noise)."""
    cdf = jnp.cumsum(probabilities(log_weights, available))
    return inverse_cdf(cdf, jax.random.uniform(key, (k,), cdf.dtype) * cdf[-1])
