"""Estimators as a stage of the loop (ARCHITECTURE.md: one loop).

An estimator is three pure functions over an explicit pytree state, in the style of
Optax's ``GradientTransformation`` (``init`` / ``update``) and BlackJAX's kernels::

    init(n_items)                                   -> state
    update(state, prediction, item, score, draw)    -> state
    estimate(state, prediction, z)                  -> Estimate

``update`` runs once per observation with the backend's Prediction from *before* the
observation (the predictor a design-based estimator corrects), the observed item, its
score and the :class:`Draw`: ``draw.q``, the probability with which the policy drew it
(from the same pre-observation prediction;
:class:`~bayeval.acquisition.policies.Policy`), and ``draw.design``, what the
estimator's optional ``design(prediction, probabilities)`` read from the whole
distribution of that draw when it was made (e.g. its predicted variance, METHODS.md §9;
NaN for estimators without one). Both are numbers, so a journal records them with the
score and a resumed run reads them back.
``estimate`` reads the state and the Prediction *after* the observation, and returns the
estimate of R with its interval at the normal quantile ``z`` (unclipped bounds).

Any estimator runs over any backend, so the same posterior can drive a model-based
interval (:func:`posterior`), Pro-Active Inference (:func:`bayeval.estimators.pai.estimator`)
or the sample mean (:func:`bayeval.estimators.sample_mean.estimator`).
``needs_probabilities`` marks estimators that weigh scores by ``q``; they refuse policies
whose draw probabilities are unknown or degenerate (argmax).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from bayeval.estimators.interval import gaussian_bounds
from bayeval.types import Array, Estimate, Prediction, State


class Draw(NamedTuple):
    """How an observed item was drawn: ``q`` its probability (NaN: unknown, e.g. an item
    the user chose), ``design`` the estimator's statistic of the draw's distribution
    (NaN where the estimator has none)."""

    q: Array
    design: Array


class Estimator(NamedTuple):
    """The three pure functions of the module docstring; whether ``update`` reads the
    draw probability (``needs_probabilities``); and ``design(prediction, probabilities)
    -> number``, computed when an item is drawn from ``probabilities`` (the (N,)
    distribution of that draw, 0 on unavailable items) and handed back as ``draw.design``
    (None: the estimator reads only ``draw.q``); ``without_replacement``: whether it is
    valid only for draws without replacement (METHODS.md §9)."""

    name: str
    init: Callable[[int], State]
    update: Callable[[State, Prediction, Array, Array, Draw], State]
    estimate: Callable[[State, Prediction, float], Estimate]
    needs_probabilities: bool = False
    design: Callable[[Prediction, Array], Array] | None = None
    without_replacement: bool = False


def gaussian_estimate(value: Array, var: Array, z: float) -> Estimate:
    """``value ∓ z sqrt(var)`` as an :class:`~bayeval.types.Estimate`."""
    lower, upper = gaussian_bounds(value, var, z)
    return Estimate(value, var, lower, upper)


def _no_state(n_items: int) -> tuple:
    del n_items
    return ()


def _unchanged(state: State, prediction: Prediction, item: Array, score: Array,
               draw: Draw) -> State:
    return state


def posterior() -> Estimator:
    """The backend's own posterior: E[R | C] ∓ z sqrt(Var(R | C)), the Gaussian credible
    interval (BayesAME, seed 000 §3.1; for backends whose Prediction is itself an
    estimator's output, e.g. Bayes-AIPW, its interval)."""

    def estimate(state: State, prediction: Prediction, z: float) -> Estimate:
        return gaussian_estimate(prediction.mean, prediction.var, z)

    return Estimator("posterior", _no_state, _unchanged, estimate)


__all__ = ["Draw", "Estimate", "Estimator", "gaussian_estimate", "posterior"]
