"""Multi-target BayesAME: several target models evaluated jointly (seed 000 §3.2, App. C.1;
docs/methods.md §2).

A multi-target method is a :class:`~bayeval.methods.base.Method` composed of parts, run by
the one Session and the one simulator like any other: the joint coregional posterior over T
targets as its backend (:class:`~bayeval.inference.joint_backend.JointBackend`, one target
is T = 1), the target axis taken in turns (:class:`~bayeval.methods.targets.TargetTurns`:
the initial design, then round robin over the targets that have not met their rule), a rule
over cells, one estimator and one stopping rule per target. A round:

1. **initial design**: every target on the same random ⌈10% N⌉ items (item by item, each
   target in turn), then a first AdamW re-fit of {α_l, β_l, w, σ²} after D = T·⌈10% N⌉
   observations;
2. **round robin**: cycle through the targets that have not met their stopping rule; for
   target t pick the item of largest IG_t(i) under the joint posterior (or, with
   ``selection="mean_ig"``, the item of largest mean IG over targets and a target at
   random among the unfinished ones that still need it). As in the single-target method
   the gain is used only when the reference vectors are nearly unique (B ≥ N − N0);
   otherwise the item is drawn at random;
3. after each observation: compact the deferred updates every P observations, re-fit the
   hyperparameters every F observations after the D-th, and update the observed target's
   two-condition stopping rule (window W over that target's own coreset);
4. **stop** when every target has met its rule after the initial design.

The run's initial design (the turns' plan) and initial coregionalisation weights (the
backend's ``begin``) come from its seed, so a run is a pure function of its seed and
answers.

Cost per observation O(P J + J T) with J = T·B; a compaction O(P J² + J² T) every P
observations; a re-fit O(steps · S_fit³) for the AdamW fit on at most ``fit_pairs``
observed (target, bucket) pairs plus O(J² S + S³) to rebuild the posterior on all S
observed pairs. Memory: Σ_c (J² floats) plus transients of the same size during a rebuild.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayeval.acquisition import multi_target as mt
from bayeval.acquisition.policies import argmax, sample
from bayeval.errors import BayevalError
from bayeval.estimators.base import posterior
from bayeval.hparams import known
from bayeval.inference.exact import PENDING
from bayeval.inference.joint_backend import JointBackend
from bayeval.methods.base import Method, method_factory
from bayeval.methods.targets import JointPlan, JointProgress, TargetTurns
from bayeval.models.bucket_gp import N0
from bayeval.stopping import rules as stop
from bayeval.types import Array, Prediction

METHOD_NAME = "bayesame-joint"


def _target_rule(prediction: Prediction, available: Array) -> Array:
    """(T, N) IG_t(i) of every available cell (−inf elsewhere); the round robin passes
    the cells of one target."""
    return jnp.where(available, mt.target_information_gain(prediction), -jnp.inf)


class Selection(NamedTuple):
    """How multi-target BayesAME picks a cell: ``in_turn`` (one target per round, the
    targets in turn) and the ``rule`` over the cells it may pick from."""

    in_turn: bool
    rule: Callable[[Prediction, Array], Array]


SELECTIONS = {"round_robin": Selection(True, _target_rule),
              "mean_ig": Selection(False, mt.mean_information_gain)}


@method_factory(METHOD_NAME, hyper=("epsilon", "epsilon1", "learning_rate"))
def bayesame_joint(epsilon: float = 0.02, epsilon1: float = 0.005, window: int = 30,
                   level: float = 0.95, n_latent: int = 2, refit_every: int = 50,
                   adam_steps: int = 200, learning_rate: float | None = None,
                   sigma2: float | None = None, init_fraction: float = 0.1,
                   selection: str = "round_robin", fit_pairs: int | None = 256,
                   fit_sigma2: bool = True, target_offset: float | None = None,
                   n0: int = N0, pending: int = PENDING) -> Method:
    """Multi-target BayesAME (seed 000 §3.2; defaults: App. C.1): the joint posterior
    (:class:`~bayeval.inference.joint_backend.JointBackend`'s settings, re-fitted after
    the initial design and every ``refit_every`` observations after it), the initial
    design's share ``init_fraction``, the ``selection`` of the next cell (round robin over
    the targets, or the mean IG over them), the posterior interval per target at ``level``
    and each target's two-condition stopping rule (``epsilon``, ``epsilon1``,
    ``window``)."""
    if selection not in SELECTIONS:
        raise BayevalError(f"selection must be one of {', '.join(SELECTIONS)}, got "
                           f"{selection!r}")
    turns = TargetTurns(init_fraction, SELECTIONS[selection].in_turn)
    joint = JointBackend(n_latent=n_latent, adam_steps=adam_steps,
                         learning_rate=learning_rate, sigma2=sigma2, fit_pairs=fit_pairs,
                         fit_sigma2=fit_sigma2, target_offset=target_offset, n0=n0,
                         pending=pending, refit_every=refit_every,
                         design_fraction=init_fraction)
    return Method(METHOD_NAME, joint.backend(), SELECTIONS[selection].rule, argmax,
                  stop.two_condition(epsilon, epsilon1, window), level=level,
                  estimator=posterior(), turns=turns)


@method_factory("active-pai-joint", hyper=("epsilon", "n_min", "tau", "temperature",
                                           "p_min", "min_share", "recalibrate",
                                           "anytime_rounds"))
def active_pai_joint(epsilon: float = 0.05, n_min: int = 30, tau: float = 0.05,
                     beta: float = 0.0, temperature: float = 1.0, weights: str = "scheduled",
                     floor: bool | str = "conditional", anytime: bool = False,
                     anytime_rounds: float = 0.25,
                     p_min: float = 0.05, min_share: float = 1.0, recalibrate: float = 10.0,
                     n_latent: int = 2, refit_every: int = 50, adam_steps: int = 200,
                     init_fraction: float = 0.1, fit_pairs: int | None = 256,
                     pending: int = PENDING, level: float = 0.95) -> Method:
    """Active PAI for several targets (docs/methods.md §9 over the joint posterior of seed 000
    §3.2): the joint coregional model as the predictor, each target's draws made at
    random from active PAI's rule over its own items (the initial design in a random
    order, uniform), one design-valid estimator and one stopping rule per target (after
    ``n_min`` of its items, its interval at most ``epsilon`` wide). Whatever the joint
    model gets wrong, each target's estimate is unbiased and its interval the design's.
    ``p_min`` stays 0.05 here, the setting its per-target coverage was measured at
    (docs/results/validity/joint.md); single-target active-pai's default is 0.02."""
    from bayeval.estimators import design_valid
    from bayeval.methods.active import active_rule

    if known(epsilon) and not epsilon > 0:
        raise BayevalError(f"epsilon must be positive, got {epsilon}")
    if known(n_min) and n_min < 1:
        raise BayevalError(f"n_min must be ≥ 1, got {n_min}")
    turns = TargetTurns(init_fraction)
    joint = JointBackend(n_latent=n_latent, adam_steps=adam_steps, fit_pairs=fit_pairs,
                         pending=pending, refit_every=refit_every,
                         design_fraction=init_fraction)
    one = active_rule(beta, temperature, tau, p_min)
    estimator = design_valid.estimator(weights, floor, anytime, anytime_rounds, min_share,
                                       p_min, recalibrate)
    return Method("active-pai-joint", joint.backend(), jax.vmap(one), sample,
                  stop.width_after(n_min, epsilon), level=level, estimator=estimator,
                  turns=turns)

__all__: Sequence[str] = (
    "METHOD_NAME",
    "SELECTIONS",
    "JointPlan",
    "JointProgress",
    "active_pai_joint",
    "bayesame_joint",
)
