"""FAQ (seed 001 Alg. 1; docs/methods.md §3): the logistic factor model fitted on the
reference matrix, online Laplace updates of the new model's factor, the hybrid policy
drawn with replacement, and Pro-Active Inference — assembled from parts:

* backend :class:`~bayeval.inference.factor_laplace.FactorLaplace`;
* rule :func:`~bayeval.acquisition.hybrid.faq_rule`, policy
  :data:`~bayeval.acquisition.policies.sample_with_replacement`;
* estimator :func:`~bayeval.estimators.pai.estimator` (the PAI sums from each round's
  pre-update prediction and draw probability);
* stopping :func:`~bayeval.stopping.rules.budget` (a fixed number of draws).

:func:`faq` is the registered method; it runs in :class:`~bayeval.loop.session.Session` and
:func:`~bayeval.loop.simulate.simulate` like every other. :func:`simulate_hybrid` is its fused
implementation for the coverage experiment (``bayeval bench coverage``): the same rounds,
batched explicitly over runs with the closed-form q, hyperparameters traced so that a
sweep compiles once; the tests check that it draws the same items and gives the same
estimates as the generic simulator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeval import acquisition as acq
from bayeval.acquisition.hybrid import hybrid_probabilities
from bayeval.acquisition.policies import draw_index
from bayeval.acquisition.schedules import exploration_weight, tempering_exponent
from bayeval.devices import device_count, over_runs, pad_runs
from bayeval.estimators import pai
from bayeval.estimators.pai import PAIState, pai_estimate, pai_start, pai_update
from bayeval.inference.base import Backend
from bayeval.inference.factor_laplace import FactorLaplace, FactorPosterior, factor_start
from bayeval.methods.base import Method, method_factory
from bayeval.precision import require_float64
from bayeval.stopping import rules as stop
from bayeval.types import Array, clip_probability


@method_factory("faq", hyper=("beta0", "rho", "gamma", "tau"))
def faq(budget: float = 0.1, beta0: float = 1.0, rho: float = 0.0, gamma: float = 0.0,
        tau: float = 0.05, k: int = 8, weight_decay: float = 0.1, level: float = 0.95,
        fit_seed: int = 0) -> Method:
    """FAQ (module docstring) for a fixed ``budget`` of draws (rounds, or a share of the
    items): rank ``k`` and AdamW weight decay ``weight_decay`` for the factor fit, the
    hybrid policy's (β0, ρ, γ, τ). Defaults: the robust (β0, τ) = (1.0, 0.05), ρ = γ = 0
    (no active phase, no tempering ramp: the tuned ρ, γ barely changed the width on
    IFEval+MuSR) and (k, λ) = (8, 0.1), chosen by cross-validation on IFEval+MuSR
    historical models (docs/results/coverage)."""
    rule = acq.faq_rule(budget, beta0, rho, gamma, tau)
    backend = FactorLaplace(k, weight_decay, fit_seed).backend()
    return Method("faq", backend, rule, acq.sample_with_replacement, stop.budget(budget),
                  level=level, estimator=pai.estimator())


def faq_with(rule: acq.Rule, budget: float, backend: Backend | None = None,
             level: float = 0.95, name: str = "faq-custom") -> Method:
    """FAQ's loop with another ``rule`` (drawn with replacement, estimated by PAI, stopped
    after ``budget`` draws) over ``backend`` (default: the factor model fitted on the
    reference matrix with k = 8, λ = 0.1; e.g.
    :func:`~bayeval.inference.factor_laplace.prefitted` to reuse one fit)."""
    backend = FactorLaplace().backend() if backend is None else backend
    return Method(name, backend, rule, acq.sample_with_replacement, stop.budget(budget),
                  level=level, estimator=pai.estimator())


class Outcome(NamedTuple):
    """Per run: the PAI estimate, its variance (bayeval's, centred at the estimate), the
    variance in the authors' form (centred at A), and the number of distinct items drawn."""

    theta: Array
    var: Array
    var_ht: Array
    distinct: Array


def _outcome(pai_state: PAIState, n_items: int, seen: Array) -> Outcome:
    theta, var = pai_estimate(pai_state, n_items, "estimate")
    _, var_ht = pai_estimate(pai_state, n_items, "ht")
    return Outcome(theta, var, var_ht, seen.sum(-1))


def _chunked(run: Callable[[Array, Array], Outcome], targets: np.ndarray, seeds: np.ndarray,
             chunk: int, progress: Callable[[int], None] | None, multiple: int = 1) -> Outcome:
    """``run(targets, keys)`` over chunks of ``chunk`` runs (rounded up to a multiple of
    ``multiple``, the last one padded to keep one compiled shape); run r's key is
    ``key(seeds[r])``."""
    targets, seeds = np.asarray(targets), np.asarray(seeds)
    if targets.shape != seeds.shape:
        raise ValueError(f"targets {targets.shape} and seeds {seeds.shape} differ in shape")
    size = pad_runs(min(chunk, len(targets)), multiple)
    out = []
    for lo in range(0, len(targets), size):
        t = np.asarray(targets[lo:lo + size], np.int32)
        sd = np.asarray(seeds[lo:lo + size], np.uint32)
        n = len(t)
        t = np.concatenate([t, np.zeros(size - n, np.int32)])
        sd = np.concatenate([sd, np.zeros(size - n, np.uint32)])
        keys = jax.vmap(jax.random.key)(jnp.asarray(sd))
        res = run(jnp.asarray(t), keys)
        out.append(jax.tree.map(lambda x, n=n: np.asarray(x)[:n], res))
        if progress is not None:
            progress(n)
    return Outcome(*(np.concatenate(parts) for parts in zip(*out, strict=True)))


class HybridParams(NamedTuple):
    """FAQ's policy hyperparameters (seed 001 Eq. 4)."""

    beta0: float = 1.0
    rho: float = 0.25
    gamma: float = 0.25
    tau: float = 0.05


def _hybrid_chunk(item_factors: Array, mean0: Array, cov0: Array, scores: Array,
                  targets: Array, keys: Array, params: Array, rounds: int,
                  active_part: bool = True) -> Outcome:
    v = item_factors
    n_items = v.shape[0]
    batch = targets.shape[0]
    beta0, rho, gamma, tau = params[0], params[1], params[2], params[3]
    rows = jnp.arange(batch)

    def step(carry, s):
        posterior, sums, seen = carry
        p = clip_probability(jax.nn.sigmoid(posterior.mean @ v.T))
        w = p * (1.0 - p)
        alpha = exploration_weight(rho, s, rounds)
        beta = tempering_exponent(beta0, gamma, s, rounds)

        def active(_):
            sigma_g = jnp.einsum("bkl,bl->bk", posterior.cov, (w @ v) / n_items)
            return w * (sigma_g @ v.T) ** 2 / (1.0 + w * posterior.latent_var)

        # α and β are shared by all runs (one round s): skip the active part once α = 0
        # and the power once β = 1, the costly steps on CPU
        d = (jax.lax.cond(alpha > 0, active, jnp.zeros_like, w) if active_part
             else jnp.zeros_like(w))
        q = jax.lax.cond(beta == 1.0,
                         lambda d: hybrid_probabilities(p, d, alpha, 1.0, tau),
                         lambda d: hybrid_probabilities(p, d, alpha, beta, tau), d)
        u = jax.vmap(lambda k: jax.random.uniform(jax.random.fold_in(k, s), (),
                                                  q.dtype))(keys)
        item = draw_index(q, u)
        z = scores[targets, item]
        sums = jax.vmap(pai_update)(sums, z, p[rows, item], q[rows, item], p.sum(1))
        # laplace_update batched by hand: vmapping it gathers V's rows per run and made
        # this loop 30% slower on CPU (tests check the two paths give the same runs)
        p_i, vi = p[rows, item], v[item]
        sv = jnp.einsum("bkl,bl->bk", posterior.cov, vi)
        w_i = p_i * (1.0 - p_i)
        gain = w_i / (1.0 + w_i * jnp.sum(vi * sv, 1))
        # the latent variances serve the active part only: with ρ = 0 (no active part,
        # known when compiling) their N k update per round is left out
        latent_var = (posterior.latent_var - gain[:, None] * (sv @ v.T) ** 2 if active_part
                      else posterior.latent_var)
        posterior = FactorPosterior(
            posterior.mean + ((z - p_i) * gain / w_i)[:, None] * sv,
            posterior.cov - gain[:, None, None] * sv[:, :, None] * sv[:, None, :],
            latent_var, posterior.n + 1)
        return (posterior, sums, seen.at[rows, item].set(True)), None

    tile = lambda x: jnp.broadcast_to(x, (batch, *x.shape))  # noqa: E731
    init = (jax.tree.map(tile, factor_start(mean0, cov0, v)),
            jax.tree.map(tile, pai_start()), jnp.zeros((batch, n_items), bool))
    (_, sums, seen), _ = jax.lax.scan(step, init, jnp.arange(rounds, dtype=jnp.float64))
    return jax.vmap(_outcome, in_axes=(0, None, 0))(sums, n_items, seen)


@functools.lru_cache(maxsize=16)
def _compiled_hybrid(rounds: int, n_devices: int, active_part: bool = True) -> Callable:
    """:func:`_hybrid_chunk` jitted for ``rounds`` (with or without the active part), its
    runs split over ``n_devices``."""
    return jax.jit(over_runs(functools.partial(_hybrid_chunk, rounds=rounds,
                                               active_part=active_part),
                             (False, False, False, False, True, True, False), n_devices))


def simulate_hybrid(item_factors: np.ndarray, mean0: np.ndarray, cov0: np.ndarray,
                    scores: np.ndarray, targets: np.ndarray, seeds: np.ndarray,
                    params: HybridParams, rounds: int, chunk: int = 128,
                    progress: Callable[[int], None] | None = None,
                    dtype=jnp.float64, devices: int | None = None) -> Outcome:
    """FAQ's rounds for every (``targets[r]``, ``seeds[r]``) pair: ``rounds`` draws on row
    ``targets[r]`` of ``scores`` (binary, fully known), from the item factors and prior of
    one factor fit, batched explicitly over runs in chunks of ``chunk`` with the
    closed-form q (:func:`~bayeval.acquisition.hybrid.hybrid_probabilities`, equal to the
    composed :func:`~bayeval.acquisition.hybrid.faq_rule`): about ten times faster than
    the generic vmapped simulator on CPU, as it avoids log-space compositions and batched
    gathers; the same keys draw the same items (run r's key is ``key(seeds[r])``, round s
    uses ``fold_in(key, s)``). Hyperparameters are traced: one compilation per (rounds,
    chunk, devices). ``progress(n)`` is called after each chunk of n runs. ``devices``:
    how many local devices share each chunk (default all; :mod:`bayeval.devices`; the
    chunk is rounded up to a multiple of it); the runs' results do not depend on it."""
    if dtype == jnp.float64:
        require_float64("FAQ's simulator")
    n_devices = device_count(devices, min(chunk, len(np.atleast_1d(targets))))
    # ρ = 0: α is 0 at every round, so the program without the active part draws the
    # same items; the other hyperparameters stay traced
    run = _compiled_hybrid(int(rounds), n_devices, bool(float(params[1]) > 0))
    cast = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    return _chunked(lambda t, keys: run(
        cast(item_factors), cast(mean0), cast(cov0), cast(scores), t, keys,
        cast(tuple(params))), targets, seeds, chunk, progress, n_devices)
