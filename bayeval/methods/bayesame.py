"""BayesAME (seed 000 §3.1, App. C.1; docs/methods.md §1): the bucket Gaussian process of the
reference scores, information-gain selection, the Gaussian posterior interval and
two-condition stopping; with random items (BayesAME-RS) and with a non-Gaussian
likelihood under Laplace inference."""

from __future__ import annotations

from bayeval import acquisition as acq
from bayeval.inference.exact import ExactBucketGP
from bayeval.inference.laplace import LaplaceBucketGP
from bayeval.methods.base import Method, method_factory
from bayeval.stopping import rules as stop


def _bayesame(name: str, rule, policy, epsilon: float, epsilon1: float, window: int,
              refit_every: int, lbfgs_steps: int, level: float, warm_start: bool,
              fit_buckets: int | None, bucket_capacity: int | None) -> Method:
    backend = ExactBucketGP(refit_every=refit_every, lbfgs_steps=lbfgs_steps,
                            warm_start=warm_start, fit_buckets=fit_buckets,
                            bucket_capacity=bucket_capacity).backend()
    return Method(name, backend, rule, policy, stop.two_condition(epsilon, epsilon1, window),
                  level=level)


@method_factory("bayesame", hyper=("epsilon", "epsilon1"))
def bayesame(epsilon: float = 0.02, epsilon1: float = 0.005, window: int = 30,
             refit_every: int = 50, lbfgs_steps: int = 30, level: float = 0.95,
             warm_start: bool = False, fit_buckets: int | None = 256,
             bucket_capacity: int | None = None) -> Method:
    """BayesAME (seed 000 §3.1): exact bucket GP, information-gain selection (random when
    B < N − N0), Gaussian posterior interval, two-condition stopping (ε1 over a window of
    W, ε2 on the interval width). ``warm_start``: re-fits start from the current (α, β)
    instead of α = β = 1; ``fit_buckets`` and ``bucket_capacity``: see
    :class:`~bayeval.inference.exact.ExactBucketGP`."""
    return _bayesame("bayesame", acq.bayesame_rule(), acq.argmax, epsilon, epsilon1, window,
                     refit_every, lbfgs_steps, level, warm_start, fit_buckets,
                     bucket_capacity)


@method_factory("bayesame-rs", hyper=("epsilon", "epsilon1"))
def bayesame_rs(epsilon: float = 0.02, epsilon1: float = 0.005, window: int = 30,
                refit_every: int = 50, lbfgs_steps: int = 30, level: float = 0.95,
                warm_start: bool = False, fit_buckets: int | None = 256,
                bucket_capacity: int | None = None) -> Method:
    """BayesAME-RS (seed 000 §5.1): the bucket-GP estimate with random selection."""
    return _bayesame("bayesame-rs", acq.uniform(), acq.sample, epsilon, epsilon1, window,
                     refit_every, lbfgs_steps, level, warm_start, fit_buckets,
                     bucket_capacity)


@method_factory("bayesame-laplace", hyper=("epsilon", "epsilon1"))
def bayesame_laplace(likelihood: str = "bernoulli", epsilon: float = 0.02,
                     epsilon1: float = 0.005, window: int = 30, refit_every: int = 50,
                     lbfgs_steps: int = 10, level: float = 0.95,
                     fit_buckets: int | None = 128, bucket_capacity: int | None = None,
                     relinearise_every: int = 10, selection: str = "info_gain") -> Method:
    """BayesAME with a non-Gaussian likelihood (seed 000 App. C.1): the bucket GP over
    logits under Laplace inference (:mod:`bayeval.inference.laplace`), information gain
    from the Gaussian approximation (``selection="random"``: random items), the Gaussian
    interval of R and two-condition stopping."""
    if selection not in ("info_gain", "random"):
        raise ValueError(f"selection must be 'info_gain' or 'random', got {selection!r}")
    backend = LaplaceBucketGP(likelihood, refit_every=refit_every, lbfgs_steps=lbfgs_steps,
                              fit_buckets=fit_buckets, bucket_capacity=bucket_capacity,
                              relinearise_every=relinearise_every).backend()
    rule, policy = ((acq.bayesame_rule(), acq.argmax) if selection == "info_gain"
                    else (acq.uniform(), acq.sample))
    return Method("bayesame-laplace", backend, rule, policy,
                  stop.two_condition(epsilon, epsilon1, window), level=level)
