"""FAQ: the factor model, online Laplace, the hybrid policy and Pro-Active Inference put
together (seed 001 Alg. 1; METHODS.md §3).

One round, for a new model with posterior state ``(posterior, pai)`` and the fixed item
factors V:

1. summarise the posterior (:func:`~bayeval.inference.factor_laplace.factor_prediction`)
   and compute the policy q_s = softmax(rule(prediction)) over all N items;
2. draw I_s ~ q_s (with replacement) and observe z_{I_s};
3. add the round to the PAI sums (:mod:`bayeval.estimators.pai`) with p̂_{I_s}, q_s(I_s) and
   P_s = Σ_j p̂_j, all from before the update;
4. update the factor posterior (:func:`~bayeval.inference.factor_laplace.laplace_update`).

:func:`observe_round` is steps 3–4 given the item and the score; :class:`FAQBackend` wraps
it as a :class:`~bayeval.inference.base.Backend` for :class:`~bayeval.session.Session`
(the policy is recomputed from the state when the score arrives), and :func:`simulate` runs
many (new model, seed) runs as one vmapped ``lax.scan``, the form the coverage experiment
(``bayeval bench coverage``) uses.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.acquisition.base import Rule
from bayeval.acquisition.faq import (
    exploration_weight,
    hybrid_probabilities,
    inverse_cdf,
    probabilities,
    tempering_exponent,
)
from bayeval.estimators.pai import PAIState, pai_estimate, pai_start, pai_update
from bayeval.inference.base import Array, Backend, Prediction, no_refit
from bayeval.inference.factor_laplace import (
    P_CLIP,
    FactorPosterior,
    factor_prediction,
    factor_start,
    laplace_update,
)
from bayeval.models.factor import factor_prior, fit_factors


class RunState(NamedTuple):
    """One new model's FAQ state: the factor posterior and the PAI sums."""

    posterior: FactorPosterior
    pai: PAIState


def start(mean0: Array, cov0: Array, item_factors: Array) -> RunState:
    """Before the first round: the historical prior and empty PAI sums."""
    return RunState(factor_start(mean0, cov0, item_factors), pai_start())


def policy(rule: Rule, prediction: Prediction) -> Array:
    """q_s over all N items (sampling with replacement: every item is always available)."""
    everything = jnp.ones(prediction.item_mean.shape, bool)
    return probabilities(rule(prediction, everything), everything)


def observe_round(state: RunState, item_factors: Array, prediction: Prediction, q: Array,
                  item: Array, z: Array) -> RunState:
    """Steps 3–4 of a round: PAI sums from the pre-update ``prediction`` and ``q``, then
    the Laplace update."""
    pai = pai_update(state.pai, z, prediction.item_mean[item], q[item],
                     jnp.sum(prediction.item_mean))
    return RunState(laplace_update(state.posterior, item_factors, item, z), pai)


def summary(state: RunState, item_factors: Array) -> Prediction:
    """The linearised factor-model summary, with ``mean``/``var`` replaced by the PAI
    estimate and its variance once a round is done (before: the plug-in mean and var 1,
    an uninformative interval)."""
    prediction = factor_prediction(state.posterior, item_factors)
    theta, var = pai_estimate(state.pai, item_factors.shape[0])
    done = state.pai.rounds > 0
    return prediction._replace(mean=jnp.where(done, theta, prediction.mean),
                               var=jnp.where(done, var, 1.0))


class FAQState(NamedTuple):
    """The Session backend's state: the item factors and one run's state."""

    item_factors: Array
    run: RunState


@dataclass(frozen=True)
class FAQBackend:
    """FAQ as a :class:`~bayeval.inference.base.Backend`: ``init`` fits the logistic
    factor model on the reference matrix (binary scores; NaN = not evaluated) with the
    given (k, λ) and starts the new model at the historical prior."""

    rule: Rule
    k: int = 8
    weight_decay: float = 0.1
    seed: int = 0

    def init(self, reference_scores: Array, n_items: int) -> FAQState:
        fit = fit_factors(np.asarray(reference_scores), self.k, self.weight_decay, self.seed)
        mean0, cov0 = factor_prior(fit.U)
        v = jnp.asarray(fit.V)
        return FAQState(v, start(mean0, cov0, v))

    def observe(self, state: FAQState, item: Array, score: Array) -> FAQState:
        prediction = factor_prediction(state.run.posterior, state.item_factors)
        q = policy(self.rule, prediction)
        run = observe_round(state.run, state.item_factors, prediction, q, item, score)
        return FAQState(state.item_factors, run)

    def predict(self, state: FAQState) -> Prediction:
        return summary(state.run, state.item_factors)

    def backend(self) -> Backend:
        return Backend("faq", self.init, self.observe, self.predict, no_refit)


class Outcome(NamedTuple):
    """Per run: the PAI estimate, its variance (bayeval's, centred at the estimate), the
    variance in the authors' form (centred at A), and the number of distinct items drawn."""

    theta: Array
    var: Array
    var_ht: Array
    distinct: Array


def _outcome(pai: PAIState, n_items: int, seen: Array) -> Outcome:
    theta, var = pai_estimate(pai, n_items, "estimate")
    _, var_ht = pai_estimate(pai, n_items, "ht")
    return Outcome(theta, var, var_ht, seen.sum(-1))


@functools.partial(jax.jit, static_argnames=("make_rule", "rounds"))
def _simulate(item_factors: Array, mean0: Array, cov0: Array, scores: Array,
              targets: Array, keys: Array, rule_args: Array, make_rule: Callable,
              rounds: int) -> Outcome:
    rule = make_rule(rounds, *rule_args)
    n_items = item_factors.shape[0]

    def one(target, key):
        row = scores[target]

        def step(carry, s):
            state, seen = carry
            prediction = factor_prediction(state.posterior, item_factors)
            q = policy(rule, prediction)
            u = jax.random.uniform(jax.random.fold_in(key, s), (), q.dtype)
            item = inverse_cdf(jnp.cumsum(q), u)
            state = observe_round(state, item_factors, prediction, q, item, row[item])
            return (state, seen.at[item].set(True)), None

        init = (start(mean0, cov0, item_factors), jnp.zeros(n_items, bool))
        (state, seen), _ = jax.lax.scan(step, init, jnp.arange(rounds))
        return _outcome(state.pai, n_items, seen)

    return jax.vmap(one)(targets, keys)


def simulate(item_factors: np.ndarray, mean0: np.ndarray, cov0: np.ndarray,
             scores: np.ndarray, targets: np.ndarray, seeds: np.ndarray,
             make_rule: Callable[..., Rule], rule_args: tuple[float, ...], rounds: int,
             chunk: int = 512, progress: Callable[[int], None] | None = None) -> Outcome:
    """Run FAQ for every (``targets[r]``, ``seeds[r]``) pair: ``rounds`` draws on row
    ``targets[r]`` of ``scores`` (binary, fully known), vmapped in chunks of ``chunk`` runs.

    ``make_rule(rounds, *rule_args)`` builds the policy (e.g.
    :func:`~bayeval.acquisition.faq.faq_rule` with (β0, ρ, γ, τ)); it is traced with
    ``rule_args`` as arrays, so different hyperparameters share one compilation
    (``make_rule`` must be a hashable top-level function and must not branch in Python on
    its arguments). ``progress(n)`` is called after each chunk of n runs."""
    v = jnp.asarray(item_factors, jnp.float64)
    args = tuple(jnp.asarray(a, jnp.float64) for a in rule_args)
    return _chunked(lambda t, keys: _simulate(
        v, jnp.asarray(mean0), jnp.asarray(cov0), jnp.asarray(scores), t, keys, args,
        make_rule=make_rule, rounds=int(rounds)), targets, seeds, chunk, progress)


def _chunked(run: Callable[[Array, Array], Outcome], targets: np.ndarray, seeds: np.ndarray,
             chunk: int, progress: Callable[[int], None] | None) -> Outcome:
    """``run(targets, keys)`` over chunks of ``chunk`` runs (the last one padded to keep one
    compiled shape); run r's key is ``key(seeds[r])``."""
    targets, seeds = np.asarray(targets), np.asarray(seeds)
    if targets.shape != seeds.shape:
        raise ValueError(f"targets {targets.shape} and seeds {seeds.shape} differ in shape")
    size = min(chunk, len(targets))
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


@functools.partial(jax.jit, static_argnames=("rounds",))
def _hybrid_chunk(item_factors: Array, mean0: Array, cov0: Array, scores: Array,
                  targets: Array, keys: Array, params: Array, rounds: int) -> Outcome:
    v = item_factors
    n_items = v.shape[0]
    batch = targets.shape[0]
    beta0, rho, gamma, tau = params[0], params[1], params[2], params[3]
    rows = jnp.arange(batch)

    def step(carry, s):
        posterior, pai, seen = carry
        p = jnp.clip(jax.nn.sigmoid(posterior.mean @ v.T), P_CLIP, 1.0 - P_CLIP)
        w = p * (1.0 - p)
        alpha = exploration_weight(rho, s, rounds)
        beta = tempering_exponent(beta0, gamma, s, rounds)

        def active(_):
            sigma_g = jnp.einsum("bkl,bl->bk", posterior.cov, (w @ v) / n_items)
            return w * (sigma_g @ v.T) ** 2 / (1.0 + w * posterior.latent_var)

        # α and β are shared by all runs (one round s): skip the active part once α = 0
        # and the power once β = 1, the costly steps on CPU
        d = jax.lax.cond(alpha > 0, active, jnp.zeros_like, w)
        q = jax.lax.cond(beta == 1.0,
                         lambda d: hybrid_probabilities(p, d, alpha, 1.0, tau),
                         lambda d: hybrid_probabilities(p, d, alpha, beta, tau), d)
        u = jax.vmap(lambda k: jax.random.uniform(jax.random.fold_in(k, s), (),
                                                  q.dtype))(keys)
        item = inverse_cdf(jnp.cumsum(q, 1), u)
        z = scores[targets, item]
        pai = jax.vmap(pai_update)(pai, z, p[rows, item], q[rows, item], p.sum(1))
        # laplace_update batched by hand: vmapping it gathers V's rows per run and made
        # this loop 30% slower on CPU (tests check the two paths give the same runs)
        p_i, vi = p[rows, item], v[item]
        sv = jnp.einsum("bkl,bl->bk", posterior.cov, vi)
        w_i = p_i * (1.0 - p_i)
        gain = w_i / (1.0 + w_i * jnp.sum(vi * sv, 1))
        posterior = FactorPosterior(
            posterior.mean + ((z - p_i) * gain / w_i)[:, None] * sv,
            posterior.cov - gain[:, None, None] * sv[:, :, None] * sv[:, None, :],
            posterior.latent_var - gain[:, None] * (sv @ v.T) ** 2, posterior.n + 1)
        return (posterior, pai, seen.at[rows, item].set(True)), None

    tile = lambda x: jnp.broadcast_to(x, (batch, *x.shape))  # noqa: E731
    init = (jax.tree.map(tile, factor_start(mean0, cov0, v)),
            jax.tree.map(tile, pai_start()), jnp.zeros((batch, n_items), bool))
    (_, pai, seen), _ = jax.lax.scan(step, init, jnp.arange(rounds, dtype=jnp.float64))
    return jax.vmap(_outcome, in_axes=(0, None, 0))(pai, n_items, seen)


def simulate_hybrid(item_factors: np.ndarray, mean0: np.ndarray, cov0: np.ndarray,
                    scores: np.ndarray, targets: np.ndarray, seeds: np.ndarray,
                    params: HybridParams, rounds: int, chunk: int = 128,
                    progress: Callable[[int], None] | None = None,
                    dtype=jnp.float64) -> Outcome:
    """:func:`simulate` for FAQ's own policy, batched explicitly over runs with the
    closed-form q (:func:`~bayeval.acquisition.faq.hybrid_probabilities`; equal to the
    composed :func:`~bayeval.acquisition.faq.faq_rule`, which the tests check): about ten
    times faster than the generic vmapped path on CPU, as it avoids log-space
    compositions and batched gathers. Hyperparameters are traced: one compilation per
    (rounds, chunk)."""
    cast = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    return _chunked(lambda t, keys: _hybrid_chunk(
        cast(item_factors), cast(mean0), cast(cov0), cast(scores), t, keys,
        cast(tuple(params)), rounds=int(rounds)), targets, seeds, chunk, progress)
