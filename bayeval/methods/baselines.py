"""The estimation baselines of seed 000 §5.1 (docs/methods.md §5): RS-Mean (random items, the
sample mean with a finite-population interval) and Bayes-AIPW (random items, a Bayesian
linear model of the scores on the reference scores debiased by the coreset residuals)."""

from __future__ import annotations

from bayeval import acquisition as acq
from bayeval.estimators import aipw, sample_mean
from bayeval.estimators.base import posterior
from bayeval.methods.base import Method, method_factory
from bayeval.stopping import rules as stop


@method_factory("random", hyper=("epsilon", "min_n"))
def random_sample_mean(epsilon: float = 0.1, min_n: int = 30, level: float = 0.95) -> Method:
    """Random items, RS-Mean estimate with a finite-population interval (Wilson for binary
    scores, see :mod:`bayeval.estimators.sample_mean`), stop when the ``level`` interval is
    at most ``epsilon`` wide (docs/methods.md §1 condition ii, §5).

    ``min_n`` (our choice, 30) keeps the normal approximation of the sample mean from
    being trusted on a handful of items, where S² = 0 would give a zero-width interval.
    """
    stopping = stop.all_of(stop.min_observations(min_n), stop.interval_width(epsilon))
    return Method("random", sample_mean.backend, acq.uniform(), acq.sample, stopping,
                  level=level,
                  estimator=sample_mean.estimator())


@method_factory("bayes-aipw", hyper=("epsilon", "epsilon1"))
def bayes_aipw(epsilon: float = 0.02, epsilon1: float = 0.005, window: int = 30,
               level: float = 0.95) -> Method:
    """Bayes-AIPW (seed 000 §5.1, docs/methods.md §5) with random selection: its interval is
    the AIPW estimator's, valid under the random draws whatever the model (so no check of
    the model's domain)."""
    return Method("bayes-aipw", aipw.backend, acq.uniform(), acq.sample,
                  stop.two_condition(epsilon, epsilon1, window), level=level,
                  estimator=posterior(model_based=False))
