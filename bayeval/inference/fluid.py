"""Fluid Benchmarking's posterior (Hofmann et al., COLM 2025, "Fluid Language Model
Benchmarking"): a 2PL IRT model fitted on the reference models, the new model's ability
by MAP, the benchmark score as the observed scores plus the model's expected scores on the
rest.

``init`` calibrates the items on the reference matrix (a_i, b_i: the MAP of
:func:`bayeval.inference.irt.calibrate`, P(s_i = 1 | θ) = p_i(θ) = σ(a_i (θ − b_i)));
each ``observe`` moves the ability to its MAP under the N(0, 1) prior given every score so
far (Newton's method on the log posterior, concave: Σ_seen [s_i log p_i + (1 − s_i)
log(1 − p_i)] − θ²/2; fractional scores are the Bernoulli quasi-likelihood), and its
Laplace variance σ² = 1 / (Σ_seen a_i² p_i (1 − p_i) + 1), the inverse of the Fisher
information plus the prior's precision.

The score R = (1/N) Σ_i s_i is predicted as R̂ = (1/N)(Σ_seen s_i + Σ_unseen p_i(θ̂)), with
Var(R̂) = (dR/dθ)² σ² + (1/N²) Σ_unseen p_i (1 − p_i), dR/dθ = (1/N) Σ_unseen p_i′ and
p_i′ = a_i p_i (1 − p_i) (the delta method over the ability's posterior, and each unseen
item's Bernoulli noise). An unseen item's predictive variance is Var(s_i) = p_i (1 − p_i)
+ σ² p_i′² and Cov(R, s_i) = σ² (dR/dθ) p_i′ + p_i (1 − p_i) / N. The interval rests on
the model (it is checked for its domain as BayesAME's is).

An item's share of predictive variance that comes from not knowing θ over its Bernoulli
noise, σ² p_i′² / (p_i (1 − p_i)) = σ² a_i² p_i (1 − p_i), is σ² times its Fisher
information at θ̂: :func:`bayeval.acquisition.fisher_information` reads it from the
Prediction, so the method's next item is Fluid's, the one of maximum Fisher information.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.inference.base import Backend, no_refit
from bayeval.types import Array, Prediction

NEWTON_STEPS = 50  # safeguarded Newton on a concave 1-D function: 50 steps converge
BRACKET = 40.0  # the MAP lies in [−40, 40]: the prior's −θ outweighs any likelihood there


class FluidState(NamedTuple):
    discrimination: Array  # (N,) a_i
    difficulty: Array  # (N,) b_i
    observed: Array  # (N,) bool
    scores: Array  # (N,) the observed scores (0 elsewhere)
    ability: Array  # () θ̂, the MAP
    ability_var: Array  # () σ², its Laplace variance


def map_ability(discrimination: Array, difficulty: Array, scores: Array, observed: Array,
                start: Array) -> tuple[Array, Array]:
    """(θ̂, σ²): the MAP of the ability under N(0, 1) given the observed scores, and the
    Laplace variance at it (module docstring). The log posterior is concave, so its
    gradient falls through one zero: Newton's method from ``start``, safeguarded by the
    bracket the gradient's signs keep (a step that leaves it bisects instead; plain
    Newton can cycle where steep items make the curvature change fast)."""
    a, b = discrimination, difficulty

    def moments(theta):
        p = jax.nn.sigmoid(a * (theta - b))
        grad = jnp.sum(jnp.where(observed, a * (scores - p), 0.0)) - theta
        info = jnp.sum(jnp.where(observed, a * a * p * (1.0 - p), 0.0)) + 1.0
        return grad, info

    def step(_, carry):
        theta, lo, hi = carry
        grad, info = moments(theta)
        lo, hi = jnp.where(grad > 0, theta, lo), jnp.where(grad > 0, hi, theta)
        newton = theta + grad / info
        inside = (newton > lo) & (newton < hi)
        return jnp.where(inside, newton, 0.5 * (lo + hi)), lo, hi

    start = jnp.clip(jnp.asarray(start, jnp.float64), -BRACKET, BRACKET)
    theta, _, _ = jax.lax.fori_loop(0, NEWTON_STEPS, step,
                                    (start, jnp.asarray(-BRACKET, jnp.float64),
                                     jnp.asarray(BRACKET, jnp.float64)))
    _, info = moments(theta)
    return theta, 1.0 / info


class FluidIRT:
    """Fluid Benchmarking's 2PL posterior as a backend (module docstring); items
    calibrated by ``calibration`` (map or nuts) on the reference matrix."""

    def __init__(self, calibration: str = "map") -> None:
        if calibration not in ("map", "nuts"):
            raise ValueError(f"calibration must be 'map' or 'nuts', got {calibration!r}")
        self.calibration = calibration

    def init(self, reference_scores: Any, n_items: int) -> FluidState:
        from bayeval.inference.irt import calibrate

        items = calibrate("2pl", np.asarray(reference_scores, np.float64), self.calibration)
        return FluidState(jnp.asarray(items.discrimination, jnp.float64),
                          jnp.asarray(items.difficulty, jnp.float64),
                          jnp.zeros(n_items, bool), jnp.zeros(n_items), jnp.zeros(()),
                          jnp.ones(()))

    @staticmethod
    def observe(state: FluidState, item: Array, score: Array) -> FluidState:
        observed = state.observed.at[item].set(True)
        scores = state.scores.at[item].set(score)
        theta, var = map_ability(state.discrimination, state.difficulty, scores, observed,
                                 state.ability)
        return state._replace(observed=observed, scores=scores, ability=theta,
                              ability_var=var)

    @staticmethod
    def predict(state: FluidState) -> Prediction:
        """R̂, its variance and the items' moments (module docstring)."""
        n = state.observed.shape[0]
        seen = state.observed
        p = jax.nn.sigmoid(state.discrimination * (state.ability - state.difficulty))
        noise = p * (1.0 - p)
        slope = state.discrimination * noise  # dp_i/dθ
        d_score = jnp.sum(jnp.where(seen, 0.0, slope)) / n
        mean = (jnp.sum(jnp.where(seen, state.scores, p))) / n
        var = d_score ** 2 * state.ability_var + jnp.sum(jnp.where(seen, 0.0, noise)) / n**2
        return Prediction(
            mean=mean, var=var,
            item_mean=jnp.where(seen, state.scores, p),
            item_var=jnp.where(seen, 0.0, noise + state.ability_var * slope ** 2),
            item_cov=jnp.where(seen, 0.0, state.ability_var * d_score * slope + noise / n),
            n=seen.sum(), nearly_unique=jnp.ones((), bool))

    def backend(self) -> Backend:
        return Backend("fluid_2pl", self.init, self.observe, self.predict, no_refit,
                       settings=self)


__all__ = ["FluidIRT", "FluidState", "map_ability"]
