"""The IRT estimator of a new model's score (seed 000 item 7; docs/methods.md §4).

1. :func:`calibrate` learns every item's parameters from the reference models (2PL or
   β³-IRT, :mod:`bayeval.models.irt`): the posterior mode (``"map"``: L-BFGS on NumPyro's
   potential in unconstrained space, our default for speed) or the NUTS posterior mean
   (``"nuts"``).
2. :func:`fit_ability` samples the target's ability given its coreset with NUTS
   (:func:`bayeval.inference.mcmc.run_nuts`), items fixed. Many targets (or runs) are fitted
   in one NUTS run: their abilities are independent given the items, so the joint
   posterior is the product of theirs and each coordinate's draws are that target's
   posterior (our choice: one compiled program and one adaptation for all of them).
3. From draws θ^(d), R^(d) = (1/N) (Σ_{i∈C} s_i + Σ_{j∉C} E[s_j | θ^(d)]):
   R̂ = mean_d R^(d), Var_R = Var_d R^(d) + (1/N²) Σ_{j∉C} mean_d Var(s_j | θ^(d)) (the
   second term is the unevaluated items' own noise). This is seed 000's posterior
   (``interval="posterior"``).
4. ``interval="assisted"`` (our default): the model-assisted difference estimator of
   survey sampling (Särndal, Swensson & Wretman 1992, §6.3) over the items drawn uniformly
   at random, with p̂_j = mean_d E[s_j | θ^(d)] as the model's prediction. With the
   residuals r_i = s_i − p̂_i of the n seen items, their mean r̄, and f = n/N:
   R̂ = R̂_posterior + (1 − f) r̄ (the unseen items' mean p̂ + r̄ kept in [0, 1]) and
   Var = (1 − f) S̃² / n, the design's variance of a mean residual, where
   S̃² = (Σ_C (r_i − r̄)² + k v̄_C) / (n − 1 + k) is the residuals' sample variance with the
   model's own mean Var(s_i | θ) on the seen items, v̄_C, counted as k = ``PRIOR_ITEMS``
   residuals (our choice: the first few residuals, which may lie near 0 by chance, cannot
   close the interval; at a stop of a few hundred items it moves S² by a few percent).
   The ability's posterior spread is not added: under the uniform draw the residual mean
   absorbs any error of θ (adding it made the interval 1.45 times the error's spread on
   SST-2). Why: a target whose errors follow a dimension the one-dimensional model lacks
   (weak models on SST-2, MRPC) is placed by its discrimination-weighted fit where the
   unseen items' predictions carry a bias that the posterior, items fixed, cannot see
   (coverage 0.49 and 0.73 on random targets, docs/results/validity/domain_check.md); the
   residual mean of a uniform sample measures that bias, and its variance is the design's,
   whatever the model gets wrong.

:class:`IRTAbilityNUTS` is the baseline's posterior as a backend (re-fit = a NUTS run,
warm-started); :mod:`bayeval.methods.irt` registers the method ``irt`` built on it, which
the Session and the simulator run like any other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.inference.base import Backend, refitted
from bayeval.inference.mcmc import MCMCResult, run_nuts
from bayeval.inference.optimise import lbfgs_minimise
from bayeval.models.irt import KINDS, MODELS, ItemParams, expected_score
from bayeval.types import Array, Prediction


def _model(kind: str, model: Callable | None) -> Callable:
    if kind not in KINDS:
        raise ValueError(f"unknown IRT model {kind!r} (known: {', '.join(KINDS)})")
    return MODELS[kind] if model is None else model


def calibrate(kind: str, reference_scores: np.ndarray, method: str = "map",
              steps: int = 300, seed: int = 0, model: Callable | None = None,
              **nuts: Any) -> ItemParams:
    """Item parameters from the reference matrix (M, N; NaN = missing).

    ``model``: a replacement program with the same sites (e.g. from
    :func:`~bayeval.models.priors.with_priors`). ``nuts``: options of
    :func:`~bayeval.inference.mcmc.run_nuts` for ``method="nuts"``."""

    program = _model(kind, model)
    scores = jnp.asarray(reference_scores, jnp.float64)
    if scores.ndim != 2:
        raise ValueError(f"reference scores must be a models × items matrix, got shape "
                         f"{scores.shape}")
    if method == "nuts":
        result = run_nuts(program, scores, seed=seed, **nuts)
        return ItemParams(*(jnp.asarray(result.samples[k].mean(axis=(0, 1)))
                            for k in ("discrimination", "difficulty")))
    if method != "map":
        raise ValueError(f"calibration method must be 'map' or 'nuts', got {method!r}")
    optimise, postprocess, z0 = _map_optimiser(program, scores.shape, steps, seed)
    values = postprocess(optimise(z0, scores), scores)
    return ItemParams(values["discrimination"], values["difficulty"])


_OPTIMISERS: dict[tuple, tuple] = {}


def _map_optimiser(program: Callable, shape: tuple[int, ...], steps: int, seed: int) -> tuple:
    """(optimise(z0, scores), postprocess(z, scores), z0): L-BFGS on the potential as a
    function of the data, compiled once per program, matrix shape and step count."""
    from numpyro.infer.util import initialize_model

    key = (program, shape, steps, seed)
    if key in _OPTIMISERS:
        return _OPTIMISERS[key]
    example = jnp.zeros(shape)
    info, potential_gen, postprocess_gen, _ = initialize_model(
        jax.random.key(seed), program, model_args=(example,), dynamic_args=True)
    @jax.jit
    def optimise(z0, scores):
        return lbfgs_minimise(potential_gen(scores), z0, steps)

    @jax.jit
    def postprocess(z, scores):
        return postprocess_gen(scores)(z)

    _OPTIMISERS[key] = (optimise, postprocess, info.z)
    return _OPTIMISERS[key]


def fit_ability(kind: str, items: ItemParams, scores: np.ndarray, mask: np.ndarray,
                model: Callable | None = None, **nuts: Any) -> MCMCResult:
    """NUTS draws of the abilities of M models (rows of ``scores``; ``mask`` marks the
    evaluated items) with the items fixed (arrays (N,) or (M, N))."""
    program = _model(kind, model)
    nuts.setdefault("jit_model_args", True)  # refits of the same shapes reuse the compile
    return run_nuts(program, jnp.asarray(scores, jnp.float64), jnp.asarray(mask, bool),
                    discrimination=jnp.asarray(items.discrimination, jnp.float64),
                    difficulty=jnp.asarray(items.difficulty, jnp.float64), **nuts)


def performance_draws(kind: str, ability: np.ndarray, items: ItemParams, scores: np.ndarray,
                      mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R^(d), noise): draws (D, M) of the benchmark score of every model and the (M,)
    variance of the unevaluated items' own noise, (1/N²) Σ_{j∉C} mean_d Var(s_j | θ)."""
    n_items = scores.shape[1]
    p, v = expected_score(kind, jnp.asarray(ability), items)
    p, v = np.asarray(p), np.asarray(v)
    seen = np.asarray(mask, bool)
    observed = np.where(seen, np.nan_to_num(scores), 0.0).sum(axis=1)
    unseen_sum = np.where(seen, 0.0, p).sum(axis=-1)
    noise = np.where(seen, 0.0, v).sum(axis=-1).mean(axis=0) / n_items**2
    return (observed + unseen_sum) / n_items, noise


def estimate(kind: str, ability: np.ndarray, items: ItemParams, scores: np.ndarray,
             mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R̂, Var_R) of every model from ability draws (D, M) (module docstring, step 3)."""
    draws, noise = performance_draws(kind, ability, items, scores, mask)
    return draws.mean(axis=0), np.maximum(draws.var(axis=0) + noise, 0.0)


# --------------------------------------------------------------------- the backend
class IRTState(NamedTuple):
    """The IRT posterior of one target between NUTS fits."""

    discrimination: Array  # (N,) calibrated items
    difficulty: Array  # (N,)
    observed: Array  # (N,) bool
    scores: Array  # (N,) observed scores (0 elsewhere)
    ability: Array  # (D,) ability draws of the last fit (prior draws before the first)
    last: Array  # (C,) each chain's last unconstrained ability (the next fit starts there)


INTERVALS = ("assisted", "posterior")
PRIOR_ITEMS = 10.0  # the model's variance counted as this many residuals (step 4)


def assisted(scores: Array, seen: Array, predicted: Array, model_var: Array,
             posterior_mean: Array, posterior_var: Array,
             prior_items: float = PRIOR_ITEMS) -> tuple[Array, Array, Array]:
    """(R̂, Var, item predictions) of the model-assisted difference estimator (module
    docstring, step 4; Särndal, Swensson & Wretman 1992, §6.3): the posterior's R̂ moved by
    (1 − f) r̄, the mean residual of the seen items carried to the unseen ones (their mean
    prediction kept in [0, 1]), with variance (1 − f) S̃²/n, S̃² the residuals' variance
    with ``prior_items`` residuals of the model's own
    variance. ``predicted``, ``model_var``: (N,) E[s_j] and Var(s_j | θ) averaged over the
    draws. Below 2 seen items the posterior's (``posterior_mean``, ``posterior_var``)
    stand."""
    k = prior_items
    N = seen.shape[0]
    n = seen.sum()
    residual = jnp.where(seen, scores - predicted, 0.0)
    r_bar = residual.sum() / jnp.maximum(n, 1)
    squares = jnp.where(seen, (residual - r_bar) ** 2, 0.0).sum()
    model = jnp.where(seen, model_var, 0.0).sum() / jnp.maximum(n, 1)
    s2 = (squares + k * model) / (n - 1 + k)
    unseen = N - n
    unseen_mean = jnp.where(seen, 0.0, predicted).sum() / jnp.maximum(unseen, 1)
    shift = jnp.clip(unseen_mean + r_bar, 0.0, 1.0) - unseen_mean
    mean = posterior_mean + unseen / N * shift
    var = (1.0 - n / N) * s2 / jnp.maximum(n, 1)
    ok = n >= 2
    return (jnp.where(ok, mean, posterior_mean), jnp.where(ok, var, posterior_var),
            jnp.where(ok & ~seen, predicted + shift, predicted))


def split_r_hat(draws: Array) -> Array:
    """Split R̂ of (C, S) draws (Gelman et al., BDA3 §11.4): each chain halved, then
    sqrt(((n−1)/n W + B/n) / W) over the 2C half-chains of n = ⌊S/2⌋ draws."""
    n = draws.shape[1] // 2
    halves = jnp.concatenate([draws[:, :n], draws[:, n:2 * n]], axis=0)
    within = jnp.mean(jnp.var(halves, axis=1, ddof=1))
    between = n * jnp.var(jnp.mean(halves, axis=1), ddof=1)
    pooled = (n - 1) / n * within + between / n
    return jnp.sqrt(pooled / within)


class IRTAbilityNUTS:
    """The IRT baseline's posterior (seed 000 item 7; docs/methods.md §4) as a backend.

    ``init`` calibrates the items on the reference matrix (:func:`calibrate`); between
    fits the prediction reads the last NUTS fit's ability draws with every observed score
    known (module docstring, step 3); ``refit`` is a NUTS run of the target's ability
    given its coreset (items fixed), warm-started from each chain's last state, and
    reports R̂ (split, over the chains) and the divergent transitions. A fit follows the
    1st observation, each of ``first_fits`` (our choice, so that the first estimates do
    not rest on the prior) and every ``refit_every``-th. Before the first fit the draws
    are the prior's. ``interval``: ``"assisted"`` (the model-assisted difference estimator,
    module docstring step 4; valid under the uniform draw whatever the model gets wrong) or
    ``"posterior"`` (seed 000's model-based interval, step 3).
    """

    def __init__(self, kind: str = "2pl", calibration: str = "map", refit_every: int = 50,
                 first_fits: tuple[int, ...] = (10, 25), num_warmup: int = 500,
                 num_samples: int = 1000, num_chains: int = 4, target_accept: float = 0.8,
                 max_tree_depth: int = 10, model: Callable | None = None,
                 interval: str = "assisted") -> None:
        self.program = _model(kind, model)
        if interval not in INTERVALS:
            raise ValueError(f"interval must be one of {', '.join(INTERVALS)}, got {interval!r}")
        self.interval = interval
        if refit_every < 1:
            raise ValueError(f"refit_every must be ≥ 1, got {refit_every}")
        if num_chains < 2 or num_samples < 4 or num_warmup < 0:
            raise ValueError(f"need num_chains ≥ 2 (for R̂), num_samples ≥ 4 and "
                             f"num_warmup ≥ 0, got {num_chains}, {num_samples}, {num_warmup}")
        self.kind = kind
        self.calibration = calibration
        self.refit_every = refit_every
        self.first_fits = tuple(int(n) for n in first_fits)
        self.num_warmup, self.num_samples, self.num_chains = num_warmup, num_samples, num_chains
        self.target_accept, self.max_tree_depth = target_accept, max_tree_depth
        self.model = model

    def init(self, reference_scores: Any, n_items: int) -> IRTState:
        items = calibrate(self.kind, np.asarray(reference_scores, np.float64),
                          self.calibration, model=self.model)
        D = self.num_chains * self.num_samples
        key = jax.random.key(0)
        prior = (jax.random.normal(key, (D,), jnp.float64) if self.kind == "2pl"
                 else jax.random.uniform(key, (D,), jnp.float64))  # N(0, 1); Beta(1, 1)
        last = jax.random.uniform(jax.random.key(1), (self.num_chains,), jnp.float64,
                                  -2.0, 2.0)  # NumPyro's cold start, unconstrained
        return IRTState(jnp.asarray(items.discrimination, jnp.float64),
                        jnp.asarray(items.difficulty, jnp.float64),
                        jnp.zeros(n_items, bool), jnp.zeros(n_items), prior, last)

    @staticmethod
    def observe(state: IRTState, item: Array, score: Array) -> IRTState:
        return state._replace(observed=state.observed.at[item].set(True),
                              scores=state.scores.at[item].set(score))

    def predict(self, state: IRTState) -> Prediction:
        """The performance posterior from the draws (module docstring, step 3), with the
        per-item moments BayesAME's rules read: Var(s_i) = Var_d p_i + mean_d v_i and
        Cov(R, s_i) = Cov_d(R^(d), p_i^(d)) + mean_d v_i / N for an unobserved item."""
        N = state.observed.shape[0]
        p, v = expected_score(self.kind, state.ability,
                              ItemParams(state.discrimination, state.difficulty))  # (D, N)
        seen = state.observed
        draws = (jnp.sum(jnp.where(seen, state.scores, 0.0))
                 + jnp.where(seen, 0.0, p).sum(1)) / N
        noise = jnp.where(seen, 0.0, v.mean(0))
        mean = draws.mean()
        p_mean = p.mean(0)
        cov = jnp.mean((draws - mean)[:, None] * (p - p_mean), axis=0) + noise / N
        var = jnp.maximum(draws.var() + noise.sum() / N**2, 0.0)
        if self.interval == "assisted":
            mean, var, p_mean = assisted(state.scores, seen, p_mean, v.mean(0), mean, var)
        return Prediction(
            mean=mean, var=var,
            item_mean=jnp.where(seen, state.scores, p_mean),
            item_var=jnp.where(seen, 0.0, p.var(0) + noise),
            item_cov=jnp.where(seen, 0.0, cov), n=seen.sum(),
            nearly_unique=jnp.ones((), bool))

    def refit(self, state: IRTState, key: Array) -> tuple[IRTState, Any]:
        """A NUTS run of the ability given the observed scores, from each chain's last
        state; the draws are kept only when they are finite."""
        from bayeval.inference.mcmc import compiled_nuts

        N = state.observed.shape[0]
        example = ((np.zeros((1, N)), np.zeros((1, N), bool)),
                   {"discrimination": np.zeros(N), "difficulty": np.zeros(N)})
        run, postprocess, _ = compiled_nuts(self.program, *example, self.num_warmup,
                                            self.num_samples, self.target_accept,
                                            self.max_tree_depth)
        args = (state.scores[None], state.observed[None])
        kwargs = {"discrimination": state.discrimination, "difficulty": state.difficulty}
        (z, diverging, _), last = run(jax.random.split(key, self.num_chains),
                                      {"ability": state.last[:, None]}, args, kwargs)
        ability = postprocess(z, args, kwargs)["ability"][..., 0]  # (C, S)
        ok = jnp.all(jnp.isfinite(ability)) & jnp.all(jnp.isfinite(last["ability"]))
        new = state._replace(ability=ability.reshape(-1), last=last["ability"][:, 0])
        state = jax.tree_util.tree_map(lambda a, b: jnp.where(ok, a, b), new, state)
        return state, refitted(ok, jnp.asarray(self.num_warmup + self.num_samples),
                               jnp.asarray(jnp.nan), split_r_hat(ability),
                               jnp.sum(diverging))

    def refit_due(self, n: Array, state: IRTState | None = None) -> Array:
        """After the 1st observation, each of ``first_fits`` and every ``refit_every``-th
        (whatever the ``state``)."""
        due = (n == 1) | (n % self.refit_every == 0)
        for k in self.first_fits:
            due = due | (n == k)
        return due

    def inference_data(self, state: IRTState) -> Any:
        """The last NUTS fit's posterior as ArviZ ``InferenceData`` (chains × draws): the
        ability and the benchmark score it implies (each draw's observed scores plus its
        expected scores on the unseen items, module docstring step 3), so that
        ``arviz.summary`` and ``arviz.plot_trace`` read it directly. Before the first fit
        the draws are the prior's."""
        import arviz as az

        N = state.observed.shape[0]
        p, _ = expected_score(self.kind, state.ability,
                              ItemParams(state.discrimination, state.difficulty))
        seen = state.observed
        score = (jnp.sum(jnp.where(seen, state.scores, 0.0))
                 + jnp.where(seen, 0.0, p).sum(1)) / N
        shape = (self.num_chains, self.num_samples)
        return az.from_dict(posterior={
            "ability": np.asarray(state.ability, np.float64).reshape(shape),
            "score": np.asarray(score, np.float64).reshape(shape)})

    def backend(self) -> Backend:
        return Backend(f"irt_{self.kind}_nuts", self.init, self.observe, self.predict,
                       self.refit, self.refit_every, refit_due=self.refit_due,
                       settings=self)


__all__ = ["INTERVALS", "PRIOR_ITEMS", "IRTAbilityNUTS", "IRTState", "assisted", "calibrate",
           "estimate", "fit_ability", "performance_draws", "split_r_hat"]
