"""Estimators as a stage of the loop (docs/architecture.md: one loop).

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
distribution of that draw when it was made (e.g. its predicted variance, docs/methods.md §9;
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

import jax.numpy as jnp

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
    valid only for draws without replacement (docs/methods.md §9); ``exact_when_complete``:
    whether it is wrapped by :func:`exact_when_complete` (every Method's is);
    ``model_based``: whether its interval holds only as far as the backend's model does
    (then a run is checked against the reference models' domain,
    :mod:`bayeval.estimators.domain`)."""

    name: str
    init: Callable[[int], State]
    update: Callable[[State, Prediction, Array, Array, Draw], State]
    estimate: Callable[[State, Prediction, float], Estimate]
    needs_probabilities: bool = False
    design: Callable[[Prediction, Array], Array] | None = None
    without_replacement: bool = False
    exact_when_complete: bool = False
    model_based: bool = False


class CompleteState(NamedTuple):
    """:func:`exact_when_complete`'s state: the wrapped estimator's, which items have
    been scored, and the sum of their scores (each item's first)."""

    inner: State
    seen: Array
    total: Array


def exact_when_complete(estimator: Estimator) -> Estimator:
    """``estimator``, except once every item has been scored: then the score is known,
    and the estimate is the mean of the items' scores with a zero-width interval (with
    repeated draws an item's score is its first; a score is a property of the item). Any
    estimator's interval covers R with at least its coverage, and at n = N it covers it
    exactly."""
    if estimator.exact_when_complete:
        return estimator

    def init(n_items: int) -> CompleteState:
        return CompleteState(estimator.init(n_items), jnp.zeros(n_items, bool),
                             jnp.zeros((), jnp.float64))

    def update(state: CompleteState, prediction: Prediction, item: Array, score: Array,
               draw: Draw) -> CompleteState:
        new = ~state.seen[item]
        return CompleteState(estimator.update(state.inner, prediction, item, score, draw),
                             state.seen.at[item].set(True),
                             state.total + jnp.where(new, jnp.asarray(score, jnp.float64),
                                                     0.0))

    def estimate(state: CompleteState, prediction: Prediction, z: float) -> Estimate:
        inner = estimator.estimate(state.inner, prediction, z)
        done = jnp.all(state.seen)
        mean = state.total / state.seen.shape[-1]
        exact = (mean, jnp.zeros_like(mean), mean, mean)
        return Estimate(*(jnp.where(done, e, x) for e, x in zip(exact, inner, strict=True)))

    return estimator._replace(init=init, update=update, estimate=estimate,
                              exact_when_complete=True)


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


def posterior(model_based: bool = True) -> Estimator:
    """The backend's own posterior: E[R | C] ∓ z sqrt(Var(R | C)), the Gaussian credible
    interval (BayesAME, seed 000 §3.1; for backends whose Prediction is itself an
    estimator's output, e.g. Bayes-AIPW, its interval: give ``model_based=False`` when
    that interval does not rest on the model)."""

    def estimate(state: State, prediction: Prediction, z: float) -> Estimate:
        return gaussian_estimate(prediction.mean, prediction.var, z)

    return Estimator("posterior", _no_state, _unchanged, estimate, model_based=model_based)


__all__ = ["CompleteState", "Draw", "Estimate", "Estimator", "exact_when_complete",
           "gaussian_estimate", "posterior"]
