"""Named evaluation methods: a posterior backend, an acquisition rule and policy, and a
stopping rule, put together and compiled once.

A :class:`Method` is what :class:`~bayeval.session.Session` runs. Methods are built by name
with :func:`make_method` so that a journal can record ``(name, params)`` and rebuild the
same method on resume. Register a new one with :func:`register_method`.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax

from bayeval import acquisition as acq
from bayeval.errors import BayevalError
from bayeval.estimators import aipw, sample_mean
from bayeval.estimators.interval import gaussian_bounds, z_value
from bayeval.inference.base import Array, Backend, Prediction, advance
from bayeval.inference.exact import ExactBucketGP
from bayeval.inference.laplace import LaplaceBucketGP
from bayeval.stopping import rules as stop

REFIT_STREAM = 2**31 - 1


def posterior_interval(state: Any, prediction: Prediction, z: float) -> tuple[Array, Array]:
    """E[R | C] ∓ z sqrt(Var(R | C)): the Gaussian credible interval."""
    del state
    return gaussian_bounds(prediction.mean, prediction.var, z)


@dataclass(frozen=True, eq=False)
class Method:
    """One way to run an evaluation (see module docstring).

    ``with_replacement``: the policy draws from all items every round, repeats included
    (FAQ); a session answers a repeat from the score it already has.

    ``step`` (observe, predict, update the stopping state) and ``select`` are jitted once
    per Method object; :func:`make_method` caches Method objects so that sessions with the
    same configuration share compiled code.
    """

    name: str
    backend: Backend
    rule: acq.Rule
    policy: acq.Policy
    stopping: stop.StoppingRule
    params: dict[str, Any] = field(default_factory=dict)
    level: float = 0.95
    interval: Callable[[Any, Prediction, float], tuple[Array, Array]] = posterior_interval
    with_replacement: bool = False

    def bounds(self, state: Any, prediction: Prediction) -> tuple[Array, Array]:
        """The ``level`` interval of R (unclipped)."""
        return self.interval(state, prediction, z_value(self.level))

    def initial(self, reference_scores: Any, n_items: int) -> tuple[Any, Prediction, Any, Any]:
        """(backend state, prediction, bounds, stopping state) before any observation.

        ``backend.init`` runs eagerly (it may bucket the reference matrix with NumPy)."""
        state = self.backend.init(reference_scores, n_items)
        prediction, bounds = self.summarize(state)
        return state, prediction, bounds, self.stopping.init()

    @functools.cached_property
    def summarize(self) -> Callable:
        """Jitted ``state -> (prediction, bounds)``."""

        def summarize(state):
            prediction = self.backend.predict(state)
            return prediction, self.bounds(state, prediction)

        return jax.jit(summarize)

    def refit_key(self, key: Array) -> Array:
        """The key stream of re-fits, apart from the selection keys ``fold_in(key, t)``."""
        return jax.random.fold_in(key, REFIT_STREAM)

    @functools.cached_property
    def step(self) -> Callable:
        """Jitted ``(state, stop_state, item, score, n, key) -> (state, pred, bounds,
        stop_state, stop)``: observe one score (the n-th), re-fit or compact when due
        (:func:`~bayeval.inference.base.advance`), predict, and update the stopping rule."""

        def step(state, stop_state, item, score, n, key):
            state = self.backend.observe(state, item, score)
            state = advance(self.backend, state, n, key)
            prediction = self.backend.predict(state)
            bounds = self.bounds(state, prediction)
            stop_state, done = self.stopping.update(stop_state, prediction, bounds)
            return state, prediction, bounds, stop_state, done

        return jax.jit(step)

    @functools.cached_property
    def select(self) -> Callable:
        """Jitted ``(prediction, available, key, counter, k) -> k item positions``.

        The key used is ``fold_in(key, counter)``; ``k`` is static.
        """

        def select(prediction, available, key, counter, k):
            key = jax.random.fold_in(key, counter)
            log_w = self.rule(prediction, available)
            return self.policy(key, log_w, available, k)

        return jax.jit(select, static_argnums=4)


_REGISTRY: dict[str, Callable[..., Method]] = {}


def register_method(name: str, factory: Callable[..., Method]) -> None:
    """Make ``factory(**params)`` available as ``make_method(name, **params)``."""
    _REGISTRY[name] = factory


def method_names() -> list[str]:
    return sorted(_REGISTRY)


@functools.lru_cache(maxsize=64)
def _cached(name: str, frozen: tuple[tuple[str, Any], ...]) -> Method:
    return _REGISTRY[name](**dict(frozen))


def accepts_parameter(name: str, parameter: str) -> bool:
    """Whether the registered method ``name`` takes ``parameter``."""
    factory = _REGISTRY.get(name)
    return factory is not None and parameter in inspect.signature(factory).parameters


def make_method(name: str, **params: Any) -> Method:
    """The method ``name`` with ``params`` (cached: equal arguments give the same object)."""
    if name not in _REGISTRY:
        raise BayevalError(f"unknown method {name!r} (known: {', '.join(method_names())})")
    try:
        return _cached(name, tuple(sorted(params.items())))
    except TypeError as exc:
        raise BayevalError(f"method {name!r}: bad parameters {params} ({exc})") from None


def parse_method_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"name"`` or ``"name(key=value, …)"`` → (name, params); values are read as bool
    (true/false), None (none), int, float or else string. E.g. ``bayesame(refit_every=0)``."""
    match = re.fullmatch(r"\s*([\w.-]+)\s*(?:\((.*)\))?\s*", spec)
    if match is None:
        raise BayevalError(f"bad method spec {spec!r} (expected name or name(key=value, ...))")
    params: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in (match.group(2) or "").split(","))):
        key, eq, raw = part.partition("=")
        if not eq or not key.strip():
            raise BayevalError(f"bad parameter {part!r} in method spec {spec!r}")
        value: Any = raw.strip()
        if value.lower() in ("true", "false"):
            value = value.lower() == "true"
        elif value.lower() == "none":
            value = None
        else:
            for cast in (int, float):
                try:
                    value = cast(value)
                    break
                except ValueError:
                    pass
        params[key.strip()] = value
    return match.group(1), params


def split_method_specs(text: str) -> list[str]:
    """Split ``"a,b(x=1, y=2),c"`` at the commas outside parentheses."""
    return [p.strip() for p in re.findall(r"(?:[^,(]|\([^)]*\))+", text) if p.strip()]


def random_sample_mean(epsilon: float = 0.1, min_n: int = 30, level: float = 0.95) -> Method:
    """Random items, RS-Mean estimate with a finite-population interval (Wilson for binary
    scores, see :mod:`bayeval.estimators.sample_mean`), stop when the ``level`` interval is
    at most ``epsilon`` wide (METHODS.md §1 condition ii, §5).

    ``min_n`` (our choice, 30) keeps the normal approximation of the sample mean from
    being trusted on a handful of items, where S² = 0 would give a zero-width interval.
    """
    stopping = stop.all_of(stop.min_observations(min_n), stop.interval_width(epsilon))
    return Method("random", sample_mean.backend, acq.uniform(), acq.sample, stopping,
                  params={"epsilon": epsilon, "min_n": min_n, "level": level}, level=level,
                  interval=sample_mean.interval)


register_method("random", random_sample_mean)



def _bayesame(name: str, rule, policy, epsilon: float, epsilon1: float, window: int,
              refit_every: int, lbfgs_steps: int, level: float, warm_start: bool,
              fit_buckets: int | None, bucket_capacity: int | None) -> Method:
    backend = ExactBucketGP(refit_every=refit_every, lbfgs_steps=lbfgs_steps,
                            warm_start=warm_start, fit_buckets=fit_buckets,
                            bucket_capacity=bucket_capacity).backend()
    params = {"epsilon": epsilon, "epsilon1": epsilon1, "window": window,
              "refit_every": refit_every, "lbfgs_steps": lbfgs_steps, "level": level,
              "warm_start": warm_start, "fit_buckets": fit_buckets,
              "bucket_capacity": bucket_capacity}
    return Method(name, backend, rule, policy, stop.two_condition(epsilon, epsilon1, window),
                  params=params, level=level)


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


def bayesame_rs(epsilon: float = 0.02, epsilon1: float = 0.005, window: int = 30,
                refit_every: int = 50, lbfgs_steps: int = 30, level: float = 0.95,
                warm_start: bool = False, fit_buckets: int | None = 256,
             bucket_capacity: int | None = None) -> Method:
    """BayesAME-RS (seed 000 §5.1): the bucket-GP estimate with random selection."""
    return _bayesame("bayesame-rs", acq.uniform(), acq.sample, epsilon, epsilon1, window,
                     refit_every, lbfgs_steps, level, warm_start, fit_buckets,
                     bucket_capacity)


def bayes_aipw(epsilon: float = 0.02, epsilon1: float = 0.005, window: int = 30,
               level: float = 0.95) -> Method:
    """Bayes-AIPW (seed 000 §5.1, METHODS.md §5) with random selection."""
    return Method("bayes-aipw", aipw.backend, acq.uniform(), acq.sample,
                  stop.two_condition(epsilon, epsilon1, window),
                  params={"epsilon": epsilon, "epsilon1": epsilon1, "window": window,
                          "level": level}, level=level)


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
    params = {"likelihood": likelihood, "epsilon": epsilon, "epsilon1": epsilon1,
              "window": window, "refit_every": refit_every, "lbfgs_steps": lbfgs_steps,
              "level": level, "fit_buckets": fit_buckets, "bucket_capacity": bucket_capacity,
              "relinearise_every": relinearise_every, "selection": selection}
    return Method("bayesame-laplace", backend, rule, policy,
                  stop.two_condition(epsilon, epsilon1, window), params=params, level=level)


def faq(budget: float = 0.1, beta0: float = 1.0, rho: float = 0.0, gamma: float = 0.0,
        tau: float = 0.05, k: int = 8, weight_decay: float = 0.1, level: float = 0.95,
        fit_seed: int = 0) -> Method:
    """FAQ (seed 001; METHODS.md §3): the logistic factor model (rank ``k``, AdamW weight
    decay ``weight_decay``) fitted on the reference matrix, online Laplace updates of the
    new model's factor, the hybrid policy (β0, ρ, γ, τ) sampled with replacement, and the
    Pro-Active Inference estimate with its Wald interval, for a fixed ``budget`` (rounds, or
    a share of the items). Defaults: the robust (β0, τ) = (1.0, 0.05), ρ = γ = 0 (no
    active phase, no tempering ramp: the tuned ρ, γ barely changed the width on
    IFEval+MuSR) and (k, λ) = (8, 0.1), chosen by cross-validation on IFEval+MuSR
    historical models (docs/results/coverage)."""
    from bayeval.faq import FAQBackend

    rule = acq.faq_rule(budget, beta0, rho, gamma, tau)
    backend = FAQBackend(rule, k, weight_decay, fit_seed).backend()
    params = {"budget": budget, "beta0": beta0, "rho": rho, "gamma": gamma, "tau": tau,
              "k": k, "weight_decay": weight_decay, "level": level, "fit_seed": fit_seed}
    return Method("faq", backend, rule, acq.sample_with_replacement, stop.budget(budget),
                  params=params, level=level, with_replacement=True)


register_method("faq", faq)
register_method("bayesame", bayesame)
register_method("bayesame-laplace", bayesame_laplace)
register_method("bayesame-rs", bayesame_rs)
register_method("bayes-aipw", bayes_aipw)
