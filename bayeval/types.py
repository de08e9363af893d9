"""The shared types every part of bayeval reads (the ground floor of the layout).

* :data:`Array` — a JAX array; :data:`State` — a backend's or estimator's pytree state.
* :class:`Prediction` — the posterior summary that rules, estimators and stopping rules
  read, produced by any backend's ``predict``.
* :class:`Estimate` — what an estimator reports: the estimate of R with its interval.
* :class:`SimulationResult` — the per-step record of simulated runs.
* :data:`P_CLIP`, :func:`clip_probability` — the clamp of predicted probabilities away
  from 0 and 1 (seed 001's 1e-12), shared by every rule and backend that takes their
  logarithm.

Nothing here imports another bayeval module, so ``models/`` never needs ``inference/``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array
State = Any
P_CLIP = 1e-12


def clip_probability(p: Array) -> Array:
    """``p`` clamped to [P_CLIP, 1 − P_CLIP] (seed 001's clamp of σ(uᵀv))."""
    return jnp.clip(p, P_CLIP, 1.0 - P_CLIP)


class Prediction(NamedTuple):
    """The posterior summary that estimators, acquisition and stopping rules read.

    mean:      E[R | C], the estimate of the full-benchmark score R = (1/N) Σ_i s_i.
    var:       Var(R | C).
    item_mean: (N,) E[s_i | C] (an observed item's entry is its score).
    item_var:  (N,) Var(s_i | C) of a new observation of item i (0 once observed).
    item_cov:  (N,) Cov(R, s_i | C) (0 once observed).
    n:         number of observations (draws, repeats included, for sampling with
               replacement).
    nearly_unique: whether the model's reference vectors are nearly all distinct
               (BayesAME's B ≥ N − N0); below that, its selection falls back to random.
    """

    mean: Array
    var: Array
    item_mean: Array
    item_var: Array
    item_cov: Array
    n: Array
    nearly_unique: Array


class Estimate(NamedTuple):
    """An estimator's report after an observation.

    value: the estimate of R.
    var:   its variance (the posterior variance, or a design-based variance estimate).
    lower, upper: the interval at the method's level, unclipped (their difference is the
        width that stopping rules read); reports clip them to [0, 1].
    """

    value: Array
    var: Array
    lower: Array
    upper: Array


class SimulationResult(NamedTuple):
    """Per run r and step t (t = 0 is the first observation, so n = t + 1):"""

    estimate: np.ndarray  # (R, T) R̂_n
    var: np.ndarray  # (R, T) Var_n
    lower: np.ndarray  # (R, T) interval bounds (unclipped)
    upper: np.ndarray  # (R, T)
    items: np.ndarray  # (R, T) item chosen at step t
    stop_n: np.ndarray  # (R,) n at which the method's stopping rule first fired (0: never)
    truth: np.ndarray  # (R,) R* = mean of the target row
    refits: np.ndarray | None = None  # (R,) re-fits run (None: not recorded)
    failed_refits: np.ndarray | None = None  # (R,) re-fits whose result was not usable
    refit_r_hat: np.ndarray | None = None  # (R, T) split R̂ of an MCMC re-fit after step t
    #                                        (NaN: none there)
    refit_divergences: np.ndarray | None = None  # (R, T) its divergent transitions
    drawn_at_stop: np.ndarray | None = None  # (R,) items drawn (started) when the rule
    #                                          fired, in a streaming or batched run
    predicted: np.ndarray | None = None  # (R, T) the model's prediction of the score at
    #                                      step t, made before it was observed
    calls: np.ndarray | None = None  # (R,) evaluator calls by the stop, or in all: the
    #                                  batches; with K in flight, every evaluation
