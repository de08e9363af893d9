"""Multi-target BayesAME: several target models evaluated jointly (seed 000 §3.2, App. C.1;
METHODS.md §2).

One :class:`JointRun` holds the joint posterior of :mod:`bayeval.inference.joint` over T
targets, the coregionalisation hyperparameters, and per-target stopping states. The loop is

1. **initial design**: every target on the same random ⌈10% N⌉ items (item by item, each
   target in turn), then a first AdamW re-fit of {α_l, β_l, w, σ²};
2. **round robin**: cycle through the targets that have not met their stopping rule; for
   target t pick the item of largest IG_t(i) under the joint posterior (or, with
   ``selection="mean_ig"``, the item of largest mean IG over targets and a target at
   random among the unfinished ones that still need it). As in the single-target method
   the gain is used only when the reference vectors are nearly unique (B ≥ N − N0);
   otherwise the item is drawn at random;
3. after each observation: compact the deferred updates when P are pending, re-fit the
   hyperparameters every F observations after the initial design, and update the observed
   target's two-condition stopping rule (window W over that target's own coreset);
4. **stop** when every target has met its rule (or a budget is spent).

:meth:`JointRun.next_pair` / :meth:`JointRun.observe` are the ask/tell pair; the oracle
simulation :func:`simulate_joint` and :class:`JointSession` both drive them, so a simulated
run and a real one make the same choices for the same seed and answers.

Cost per observation O(P J + J T) with J = T·B; a compaction O(P J² + J² T) every P
observations; a re-fit O(steps · S_fit³) for the AdamW fit on at most ``fit_pairs``
observed (target, bucket) pairs plus O(J² S + S³) to rebuild the posterior on all S
observed pairs. Memory: Σ_c (J² floats) plus transients of the same size during a rebuild.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.acquisition import multi_target as mt
from bayeval.acquisition.policies import argmax
from bayeval.errors import BayevalError
from bayeval.estimators.base import Estimator, posterior
from bayeval.estimators.interval import z_value
from bayeval.inference.exact import PENDING, fit_sizes
from bayeval.inference.joint import (
    FITTED,
    JointState,
    joint_compact,
    joint_init,
    joint_observe,
    joint_predict,
    joint_prior,
    joint_rebuild,
    joint_refit,
    per_target,
)
from bayeval.models.bucket_gp import N0, default_sigma2, make_buckets
from bayeval.models.coregional import coregional_model
from bayeval.precision import require_float64
from bayeval.stopping import rules as stop
from bayeval.types import Estimate

INIT_STREAM = 2**31 - 3
WEIGHT_STREAM = 2**31 - 2
REFIT_STREAM = 2**31 - 1


@dataclass(frozen=True, eq=False)
class JointBayesAME:
    """Settings of multi-target BayesAME (defaults: seed 000 App. C.1).

    ``learning_rate`` and ``sigma2`` default by score kind: 0.01 and 0.1 for binary, 0.001
    and 0.01 for continuous scores. ``refit_every`` = F counts observations (of any
    target) after the initial design; 0 never re-fits after the first. ``fit_pairs``: the
    AdamW fit uses a uniform random subset of at most that many observed (target, bucket)
    pairs, drawn afresh at each re-fit (None: all; the rebuild always uses all).
    ``fit_sigma2=False`` keeps σ² at the single-target rule of §1 (10⁻⁴ when the reference
    vectors are nearly unique, else 10⁻¹) instead of fitting it (an ablation: App. C.1
    fits σ²). ``target_offset`` = τ²₀ adds a constant offset per target, c_t ~ N(0, τ²),
    to the model (see :func:`~bayeval.models.coregional.coregional_model`), with τ²
    fitted from τ²₀ at every re-fit (None: the paper's model, no offset).
    """

    epsilon: float = 0.02
    epsilon1: float = 0.005
    window: int = 30
    level: float = 0.95
    n_latent: int = 2
    refit_every: int = 50
    adam_steps: int = 200
    learning_rate: float | None = None
    sigma2: float | None = None
    init_fraction: float = 0.1
    selection: str = "round_robin"
    fit_pairs: int | None = 256
    fit_sigma2: bool = True
    target_offset: float | None = None
    n0: int = N0
    pending: int = PENDING

    def __post_init__(self) -> None:
        if self.selection not in ("round_robin", "mean_ig"):
            raise BayevalError(f"selection must be 'round_robin' or 'mean_ig', got "
                               f"{self.selection!r}")
        if not 0.0 < self.init_fraction <= 1.0:
            raise BayevalError(f"init_fraction must be in (0, 1], got {self.init_fraction}")
        if self.refit_every < 0 or self.adam_steps < 0 or self.n_latent < 1:
            raise BayevalError("refit_every and adam_steps must be ≥ 0, n_latent ≥ 1")

    @property
    def params(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @functools.cached_property
    def stopping(self) -> stop.StoppingRule:
        return stop.two_condition(self.epsilon, self.epsilon1, self.window)

    # ----------------------------------------------------------- compiled pieces
    @functools.cached_property
    def prior(self) -> Callable:
        def prior(phi, sizes, params, n_targets):
            return joint_prior(coregional_model, phi, sizes, n_targets, params,
                               n_latent=self.n_latent)

        return jax.jit(prior, static_argnums=3)

    @functools.cached_property
    def observe(self) -> Callable:
        # the state is donated: without it every call would copy Σ_c (J² floats)
        return jax.jit(joint_observe, donate_argnums=0)

    @functools.cached_property
    def compact(self) -> Callable:
        return jax.jit(joint_compact, donate_argnums=0)

    @functools.cached_property
    def estimator(self) -> Estimator:
        """One estimator per target, over the joint posterior's per-target predictions
        (the posterior interval of seed 000 §3.2)."""
        return posterior()

    @functools.cached_property
    def summarize(self) -> Callable:
        """``state -> (JointPrediction, (lower, upper))``: every target's estimator's
        interval at ``level``."""
        z = z_value(self.level)
        estimator = self.estimator

        def summarize(state):
            pred = joint_predict(state)
            est = jax.vmap(lambda p: estimator.estimate(estimator.init(p.item_mean.shape[-1]),
                                                        p, z))(per_target(pred))
            return pred, (est.lower, est.upper)

        return jax.jit(summarize)

    @functools.cached_property
    def update_stopping(self) -> Callable:
        """``(stop_states, pred, bounds, target) -> (stop_states, stop)``: the rule of
        ``target`` sees its new estimate and prediction; the other targets' states are
        unchanged."""
        rule = self.stopping

        def one(s, p, lower, upper):
            return rule.update(s, Estimate(p.mean, p.var, lower, upper), p)

        def update(stop_states, pred, bounds, target):
            new, fired = jax.vmap(one)(stop_states, per_target(pred), *bounds)
            mine = jnp.arange(pred.mean.shape[0]) == target

            def pick(a, b):
                return jnp.where(mine.reshape((-1,) + (1,) * (a.ndim - 1)), a, b)

            return jax.tree_util.tree_map(pick, new, stop_states), fired[target]

        return jax.jit(update)

    @functools.cached_property
    def select(self) -> Callable:
        """``(pred, available (T, N), key, target, nearly_unique) -> (target, item)``."""
        mean_ig = self.selection == "mean_ig"

        def select(pred, available, key, target, nearly_unique):
            if mean_ig:
                log_w = mt.mean_information_gain(pred, available)
            else:
                log_w = mt.round_robin(pred, available, target)
                available = available & (jnp.arange(available.shape[0])[:, None] == target)
            log_w = jnp.where(nearly_unique, log_w, 0.0)  # random when B < N − N0
            pick = argmax(key, log_w.reshape(-1), available.reshape(-1), 1)[0]
            N = available.shape[1]
            return pick // N, pick % N

        return jax.jit(select)

    @functools.cached_property
    def refit(self) -> Callable:
        def refit(state, params, key, lr, size):
            fit = FITTED if self.fit_sigma2 else tuple(k for k in FITTED if k != "sigma2")
            return joint_refit(state, params, steps=self.adam_steps, learning_rate=lr,
                               size=size, key=key, fit=fit, n_latent=self.n_latent)

        return jax.jit(refit, static_argnums=4)

    @functools.cached_property
    def rebuild(self) -> Callable:
        def rebuild(state, params, size):
            return joint_rebuild(state, params, size, n_latent=self.n_latent)

        return jax.jit(rebuild, static_argnums=2, donate_argnums=0)


class Pair(NamedTuple):
    target: int
    item: int


class JointRun:
    """The state of one multi-target evaluation (see module docstring).

    Parameters
    ----------
    reference_scores: (M, N) reference matrix.
    n_targets: T.
    config: the settings.
    seed: seeds the initial design, the initial weights, the tie-breaks and the re-fit
        subsets.
    kind: ``binary`` or ``continuous`` (sets the learning rate and initial σ²).
    max_evaluations: stop after this many observations in all.
    """

    def __init__(self, reference_scores: Any, n_targets: int, config: JointBayesAME,
                 seed: int = 0, kind: str = "binary",
                 max_evaluations: int | None = None) -> None:
        require_float64("multi-target BayesAME")
        if n_targets < 1:
            raise BayevalError(f"need at least one target, got {n_targets}")
        if kind not in ("binary", "continuous"):
            raise BayevalError(f"kind must be 'binary' or 'continuous', got {kind!r}")
        self.config = config
        self.n_targets = T = int(n_targets)
        self.seed = int(seed)
        self.max_evaluations = max_evaluations
        buckets = make_buckets(np.asarray(reference_scores, dtype=np.float64))
        self.n_items = N = buckets.n_items
        self.n_buckets = buckets.n_buckets
        self.nearly_unique = bool(buckets.n_buckets >= N - config.n0)
        binary = kind == "binary"
        self.learning_rate = config.learning_rate or (0.01 if binary else 0.001)
        if not config.fit_sigma2:
            sigma2 = config.sigma2 or default_sigma2(buckets.n_buckets, N, config.n0)
        else:
            sigma2 = config.sigma2 or (0.1 if binary else 0.01)
        self._key = jax.random.key(self.seed)
        weights = 0.1 * jax.random.normal(jax.random.fold_in(self._key, WEIGHT_STREAM),
                                          (T, config.n_latent), jnp.float64)
        L = config.n_latent
        self.params = {"alpha": jnp.ones(L), "beta": jnp.ones(L), "weights": weights,
                       "sigma2": jnp.asarray(sigma2, jnp.float64)}
        if config.target_offset is not None:
            self.params["offset"] = jnp.asarray(config.target_offset, jnp.float64)
        phi, sizes = jnp.asarray(buckets.phi), jnp.asarray(buckets.sizes)
        prior = config.prior(phi, sizes, self.params, T)
        self.state: JointState = joint_init(phi, sizes, jnp.asarray(buckets.item_bucket),
                                            prior, T, config.pending)
        self.prediction, self.bounds = config.summarize(self.state)
        one = config.stopping.init()
        self.stop_state = jax.tree_util.tree_map(
            lambda x: jnp.broadcast_to(x, (T, *jnp.shape(x))), one)
        self.done = np.zeros(T, bool)
        self.stopped_at = np.zeros(T, np.int64)  # evaluations in all when t stopped
        self.available = np.ones((T, N), bool)
        init = np.asarray(mt.initial_design(jax.random.fold_in(self._key, INIT_STREAM), N,
                                            config.init_fraction))
        init_items = np.flatnonzero(init)
        self._init_queue = [Pair(t, int(i)) for i in init_items for t in range(T)]
        self.n_init = len(self._init_queue)
        self._init_pos = 0  # first pair of the design not yet scored or skipped
        self._init_end: int | None = None  # evaluations when the design was complete
        self.n = 0
        self.last = -1
        self.refits = 0
        self.refit_sizes = fit_sizes(T * self.n_buckets)

    # ------------------------------------------------------------------ queries
    @property
    def in_design(self) -> bool:
        """Whether pairs of the initial design are still to be scored."""
        queue = self._init_queue
        while self._init_pos < len(queue) and not self.available[queue[self._init_pos]]:
            self._init_pos += 1
        return self._init_pos < len(queue)

    @property
    def finished(self) -> bool:
        """All targets met their rule (after the initial design), or nothing is left."""
        if self.max_evaluations is not None and self.n >= self.max_evaluations:
            return True
        if self.in_design:
            return False
        return bool(np.all(self.done | ~self.available.any(1)))

    def estimates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(estimate, lower, upper) per target, intervals clipped to [0, 1]."""
        lower, upper = (np.clip(np.asarray(b), 0.0, 1.0) for b in self.bounds)
        return np.asarray(self.prediction.mean), lower, upper

    def next_pair(self) -> Pair:
        """The (target, item) to evaluate next."""
        if self.finished:
            raise BayevalError("the joint evaluation is finished; nothing to ask")
        if self.in_design:
            return self._init_queue[self._init_pos]
        cfg = self.config
        open_rows = ~self.done & self.available.any(1)
        target = int(mt.next_target(jnp.asarray(~open_rows), self.last))
        available = self.available & open_rows[:, None]
        key = jax.random.fold_in(self._key, self.n)
        t, i = cfg.select(self.prediction, jnp.asarray(available), key, target,
                          self.nearly_unique)
        return Pair(int(t), int(i))

    # ------------------------------------------------------------------ updates
    def observe(self, target: int, item: int, score: float) -> None:
        """Add the score of ``target`` on ``item`` and update everything that follows."""
        cfg = self.config
        if not (0 <= target < self.n_targets and 0 <= item < self.n_items):
            raise BayevalError(f"pair ({target}, {item}) out of range "
                               f"({self.n_targets} targets × {self.n_items} items)")
        if not self.available[target, item]:
            raise BayevalError(f"target {target} was already scored on item {item}")
        if not np.isfinite(score):
            raise BayevalError(f"score of target {target} on item {item} is not finite")
        self.state = cfg.observe(self.state, target, item, float(score))
        self.available[target, item] = False
        self.n += 1
        self.last = target
        if self._init_end is None and not self.in_design:
            self._init_end = self.n  # the design is complete: first re-fit
            due = True
        else:
            after = self.n - (self._init_end or self.n)
            due = cfg.refit_every > 0 and after > 0 and after % cfg.refit_every == 0
        if due and cfg.adam_steps > 0:
            self._refit()
        elif int(self.state.n_pending) >= cfg.pending:
            self.state = cfg.compact(self.state)
        self.prediction, self.bounds = cfg.summarize(self.state)
        self.stop_state, fired = cfg.update_stopping(self.stop_state, self.prediction,
                                                     self.bounds, target)
        if bool(fired) and not self.done[target]:
            self.done[target] = True
            self.stopped_at[target] = self.n

    def refit_slots(self) -> tuple[int, int]:
        """(fit, rebuild): the static slot counts a re-fit uses now, for the AdamW fit
        (≤ ``fit_pairs`` observed pairs) and for the rebuild (all observed pairs)."""
        pairs = int(jnp.sum(self.state.count > 0))
        size = next(s for s in self.refit_sizes if s >= pairs)
        fit = size if self.config.fit_pairs is None else next(
            s for s in self.refit_sizes if s >= min(pairs, self.config.fit_pairs))
        return fit, size

    def skip(self, target: int, item: int) -> None:
        """Leave ``target`` on ``item`` unscored (its evaluation failed); never asked again."""
        if not self.available[target, item]:
            raise BayevalError(f"target {target} on item {item} was already scored or skipped")
        self.available[target, item] = False

    def _refit(self) -> None:
        cfg = self.config
        fit, size = self.refit_slots()
        key = jax.random.fold_in(jax.random.fold_in(self._key, REFIT_STREAM), self.n)
        self.params = cfg.refit(self.state, self.params, key, self.learning_rate, fit)
        self.state = cfg.rebuild(self.state, self.params, size)
        self.refits += 1


class JointResult(NamedTuple):
    """One simulated multi-target run; step k is the (k+1)-th evaluation in all."""

    targets: np.ndarray  # (E,) target of each evaluation
    items: np.ndarray  # (E,) item of each evaluation
    estimate: np.ndarray  # (E, T) every target's estimate after each evaluation
    lower: np.ndarray  # (E, T)
    upper: np.ndarray  # (E, T)
    stopped_at: np.ndarray  # (T,) evaluations in all when each target stopped (0: never)
    n_init: int
    refits: int


def simulate_joint(config: JointBayesAME, reference_scores: np.ndarray,
                   target_scores: np.ndarray, seed: int = 0, kind: str = "binary",
                   max_evaluations: int | None = None,
                   progress: Callable[[JointRun], None] | None = None) -> JointResult:
    """Run multi-target BayesAME on targets whose full rows are known (an oracle)."""
    targets = np.asarray(target_scores, dtype=np.float64)
    if targets.ndim != 2 or np.isnan(targets).any():
        raise BayevalError("target_scores must be complete (T, N) score rows")
    run = JointRun(reference_scores, targets.shape[0], config, seed, kind, max_evaluations)
    if targets.shape[1] != run.n_items:
        raise BayevalError(f"targets have {targets.shape[1]} items, the reference "
                           f"{run.n_items}")
    pairs, est, lo, hi = [], [], [], []
    while not run.finished:
        t, i = run.next_pair()
        run.observe(t, i, targets[t, i])
        value, lower, upper = run.estimates()
        pairs.append((t, i))
        est.append(value)
        lo.append(lower)
        hi.append(upper)
        if progress is not None:
            progress(run)
    pairs_a = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return JointResult(pairs_a[:, 0], pairs_a[:, 1], np.asarray(est), np.asarray(lo),
                       np.asarray(hi), run.stopped_at.copy(), run.n_init, run.refits)


def make_joint(**params: Any) -> JointBayesAME:
    """Cached :class:`JointBayesAME` (equal settings share compiled code)."""
    return _joint_cached(tuple(sorted(params.items())))


@functools.lru_cache(maxsize=16)
def _joint_cached(frozen: tuple[tuple[str, Any], ...]) -> JointBayesAME:
    try:
        return JointBayesAME(**dict(frozen))
    except TypeError as exc:
        raise BayevalError(f"multi-target BayesAME: bad parameters ({exc})") from None


__all__: Sequence[str] = (
    "JointBayesAME",
    "JointResult",
    "JointRun",
    "Pair",
    "make_joint",
    "simulate_joint",
)
