"""Active PAI: design-valid active estimation with automatic stopping (docs/methods.md §9).

Assembled from parts, with any backend as the predictor:

* backend ``predictor``: ``"difficulty"`` (the default: the calibrated-difficulty model,
  logistic in the item's reference difficulty and its coordinates on the ``components``
  = 5 leading principal axes of the reference scores, with online Laplace updates;
  :mod:`bayeval.inference.difficulty`), ``"exact"`` (the bucket GP of seed 000 with
  exact Gaussian inference), ``"laplace"`` (the bucket GP over logits, Bernoulli
  likelihood), ``"factor"`` (the logistic factor model of seed 001 with online Laplace
  updates), ``"linear"`` (the reference-linear GP of ``bq``,
  :mod:`bayeval.inference.reference_linear`) or ``"stacked"`` (the difficulty model and
  the reference models most like the target, combined by an online logistic stack learned
  from predictions made before each score; :mod:`bayeval.inference.stacked`). The default
  was chosen by
  ``bench/active_predictors.py`` on training models only (a seeded half of each bundled
  dataset's models; the other half is never read):
  at ε = 0.05 over the nine datasets it saved 20.1% of
  RS-Mean's items on average against 17.7% for the exact bucket GP (more on each of the
  nine, within Monte-Carlo error on most), in half the time per run. ``refit_every`` = 0
  by default: the recalibration below learns the predictor's scale from the rounds, and
  on commonsense, MMLU, IFEval and MATH (training models) the bucket GP's RMSE with no
  re-fits was within 0.03 of RS-Mean's ratio with re-fits every 50 items, at a tenth of the cost;
* rule: the oracle rule q ∝ sqrt(p̂ (1 − p̂)) blended with a tempered softmax of the
  information gain (weight ``beta``, temperature ``temperature``), then a uniform floor
  ``tau`` (every unseen item keeps q ≥ τ/|R|); policy :data:`~bayeval.acquisition.sample`
  (without replacement; batches drawn in turn with the earlier items removed);
* estimator :func:`~bayeval.estimators.design_valid.estimator` (the martingale estimator,
  the variance floor; the anytime-valid confidence sequence with ``anytime``). The floor
  is ``"conditional"`` by default: a Wilson-like inversion of the model floor that shrinks
  with the candidate score below p_min and above 1 − p_min (``"score"``: on the hard
  variants of the bundled datasets, 400 runs per cell, ε = 0.05, it needed 18–35% fewer
  items than the model floor, ``floor="model"``, for targets scoring below 5% or above
  95%, and kept their coverage at 0.98–1.0), grown in between as far as the observed items
  say it must, and cut to the scores still possible (1000 runs on the sparse variants of
  IFEval and MuSR: coverage for targets scoring 5–95% 0.942 → 0.954 and 0.913 → 0.948,
  with 3–7% fewer items in every stratum). Its
  ``weights`` are ``"scheduled"`` by default, variance-stabilising weights times N/|R_t|:
  in the same training-model ablation they needed fewer items than plain stabilised
  weights in each of the 18 (dataset, variant) cells (2–5% fewer; 22.7% against 20.1%
  mean saving on the standard variant) with the same coverage within its SE. The item
  variances and the rule read p̂ clipped to [``p_min``, 1 − ``p_min``], ``p_min`` = 0.02:
  the clip sets the scale of the floor, which binds at the stop, and in the same kind of
  training-model ablation (docs/results/validity/p_min/) 0.02 needed 2.5–17% fewer items
  than 0.05 in every standard and extremes cell at ε = 0.05 (mean saving 22.6% → 28.7%)
  with every cell's coverage ≥ 0.94, where 0.01 dropped MMLU's to 0.93;
* warm-up (``warmup`` W items, 32 by default): the uniform share of each draw is
  τ_n = max(τ, 1 − n/W), 1 at the first draw and falling to τ by W items, so that the
  first items are a near-uniform sample while the predictor knows least about the
  target (in batches of 32, the first call is a uniform sample). Where the references'
  predictor misses a target beyond them, its small predicted variances send the oracle
  rule's first draws to few items and the rounds' residuals grow heavy-tailed. In
  batches of 32 beyond the references (1000 runs per cell, docs/results/warmup.md), W = 32
  raised the coverage at 32–64 items from 0.928–0.937 to 0.945–0.952 on IFEval and from
  0.939–0.940 to 0.949–0.959 on ARC, and left no cell of the nine datasets at 32, 64, 128
  or 256 items below 0.94 (at 50 items two, 0.936–0.937), for 0.2 points of mean saving
  at the stop one at a time (28.4% → 28.2% on the standard variant, 16.3% → 16.1% beyond
  the references; commonsense beyond them 15.6% → 14.1%); W = 128 covered as well for
  1.1–1.4 points (docs/results/fixed_count_coverage_warmup.md). ``warmup=0`` draws by
  the rule from the first item;
* small samples (``small_sample``, on by default): the interval read with Student's
  quantile at n_eff − 1 degrees of freedom and V_T × n_eff / (n_eff − 1)
  (:func:`~bayeval.estimators.design_valid.estimator`), where the normal quantile and V_T
  are short at a few dozen to a couple of hundred items: a suite leaves its tasks there,
  and so does a small ``budget``. In batches of 32 beyond the references (1000 runs per
  cell, docs/results/small_sample_intervals.md; measured without the warm-up) it halves
  the cells under 0.94 at 32–256 items (16 → 8 of 35; at the counts 32, 64, 128 and
  256, 8 → 2 of 20), and with the warm-up leaves none there, for 0.5 points of mean
  saving at the stop; ``small_sample=false`` reads z and V_T as they are;
* stopping: after ``n_min`` items, when the interval is at most ``epsilon`` wide, or at
  ``budget`` items (a count, or a share of the items below 1; None: no budget).

Whatever the predictor gets wrong, the estimate is unbiased at every round and the
interval is the design's, not the model's.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from bayeval import acquisition as acq
from bayeval.estimators import design_valid
from bayeval.hparams import known
from bayeval.inference.base import Backend
from bayeval.inference.difficulty import CalibratedDifficulty
from bayeval.inference.exact import ExactBucketGP
from bayeval.inference.factor_laplace import FactorLaplace
from bayeval.inference.laplace import LaplaceBucketGP
from bayeval.inference.reference_linear import ReferenceLinearGP
from bayeval.inference.stacked import StackedDifficulty
from bayeval.methods.base import Method, method_factory
from bayeval.stopping import rules as stop
from bayeval.types import P_CLIP, Array

# each predictor's backend from (refit_every, bucket_capacity, components)
_BACKENDS = {
    "exact": lambda refit, capacity, _: ExactBucketGP(refit_every=refit,
                                                      bucket_capacity=capacity),
    "laplace": lambda refit, capacity, _: LaplaceBucketGP("bernoulli", refit_every=refit,
                                                          bucket_capacity=capacity),
    "factor": lambda *_: FactorLaplace(),
    "difficulty": lambda _, __, components: CalibratedDifficulty(components),
    "linear": lambda *_: ReferenceLinearGP(),
    "stacked": lambda _, __, components: StackedDifficulty(components),
}
PREDICTORS = tuple(_BACKENDS)
BUCKETED_PREDICTORS = ("exact", "laplace")  # the predictors that read bucket_capacity


def predictor_backend(predictor: str, refit_every: int = 50,
                      bucket_capacity: int | None = None, components: int = 0) -> Backend:
    """The backend named ``predictor`` (module docstring) with its default settings
    (``bucket_capacity``: see :class:`~bayeval.inference.exact.ExactBucketGP`)."""
    if predictor not in _BACKENDS:
        raise ValueError(f"predictor must be one of {', '.join(PREDICTORS)}, got "
                         f"{predictor!r}")
    return _BACKENDS[predictor](refit_every, bucket_capacity, components).backend()


def warmup_share(tau: float, warmup: float) -> acq.Schedule:
    """τ_n = max(τ, 1 − n / W), n the scores the prediction has read and W = ``warmup``
    > 0 items: the uniform share of the draw, 1 at the first draw and falling to the
    floor τ by W items (module docstring, "warm-up"; W = 0 is :func:`active_rule`'s
    plain floor τ)."""

    def share(prediction) -> Array:
        return jnp.maximum(tau, 1.0 - prediction.n / warmup)

    return share


def active_rule(beta: float, temperature: float, tau: float,
                p_min: float = P_CLIP, warmup: float = 0.0) -> acq.Rule:
    """(1 − τ_n) [(1 − β) oracle + β softmax(IG / temperature)] + τ_n uniform, the oracle
    reading p̂ clipped to [p_min, 1 − p_min]; τ_n = max(τ, 1 − n / ``warmup``)
    (:func:`warmup_share`; τ throughout when ``warmup`` = 0)."""
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    if known(tau) and not 0.0 < tau <= 1.0:
        raise ValueError(f"tau must be in (0, 1], got {tau}")
    if known(temperature) and not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if not (isinstance(warmup, int | float) and math.isfinite(warmup) and warmup >= 0):
        raise ValueError(f"warmup must be a number of items ≥ 0, got {warmup!r}")
    inner = acq.oracle_optimal(p_min)
    if beta > 0:
        inner = acq.blend(inner, acq.tempered(acq.info_gain(), temperature), beta)
    if not warmup:  # (a structural setting: 0 is the floor τ from the first draw)
        return acq.uniform_floor(inner, tau)
    share = warmup_share(tau, warmup)
    return acq.mixture([inner, acq.uniform()], [lambda p: 1.0 - share(p), share])


@method_factory("active-pai", hyper=("epsilon", "n_min", "tau", "temperature", "p_min",
                                     "min_share", "recalibrate", "anytime_rounds"))
def active_pai(epsilon: float = 0.05, predictor: str = "difficulty", anytime: bool = False,
               budget: float | None = None, n_min: int = 30, tau: float = 0.05,
               beta: float = 0.0, temperature: float = 1.0, weights: str = "scheduled",
               floor: bool | str = "conditional", anytime_rounds: float = 0.25,
               refit_every: int = 0,
               p_min: float = 0.02, min_share: float = 1.0, recalibrate: float = 10.0,
               bucket_capacity: int | None = None, components: int = 5,
               level: float = 0.95, warmup: float = 32.0, small_sample: bool = True) -> Method:
    """Active PAI (module docstring): stop once ``n_min`` items are scored and the
    ``level`` interval is at most ``epsilon`` wide, or at ``budget`` items."""
    width = stop.width_after(n_min, epsilon)
    stopping = width if budget is None else stop.any_of(width, stop.budget(budget))
    estimator = design_valid.estimator(weights, floor, anytime, anytime_rounds, min_share,
                                       p_min, recalibrate, small_sample)
    return Method("active-pai", predictor_backend(predictor, refit_every, bucket_capacity,
                                                    components),
                  active_rule(beta, temperature, tau, p_min, warmup), acq.sample, stopping,
                  level=level, estimator=estimator)
