"""Multi-target BayesAME: several target models evaluated jointly (seed 000 §3.2, App. C.1;
METHODS.md §2).

The method is a :class:`~bayeval.methods.base.Method` with a target axis, run by the one
Session and the one simulator: its positions are the (target, item) cells c = t · N + i,
its backend is the joint coregional posterior of :mod:`bayeval.inference.joint` over T
targets (one target is T = 1), its estimator runs once per target, and its stopping rule
once per target. A round:

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

The run's initial design and initial coregionalisation weights come from its seed
(:meth:`JointMethod.begin`); the round-robin turn and the design's progress live in the
loop's ``plan`` (:class:`JointPlan`), so a run is a pure function of its seed and answers.
A design pair that could not be evaluated (a Session ``skip``) counts as done for the
design; the first re-fit then still comes after the D-th observation.

Cost per observation O(P J + J T) with J = T·B; a compaction O(P J² + J² T) every P
observations; a re-fit O(steps · S_fit³) for the AdamW fit on at most ``fit_pairs``
observed (target, bucket) pairs plus O(J² S + S³) to rebuild the posterior on all S
observed pairs. Memory: Σ_c (J² floats) plus transients of the same size during a rebuild.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.acquisition import multi_target as mt
from bayeval.acquisition.base import probabilities
from bayeval.acquisition.policies import argmax, sample
from bayeval.data.matrix import infer_kind
from bayeval.errors import BayevalError
from bayeval.estimators.base import Draw, posterior
from bayeval.hparams import known
from bayeval.inference.base import Backend, advance, nothing_done, refitted
from bayeval.inference.exact import PENDING, fit_sizes, switch_by_size
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
from bayeval.methods.base import LoopState, Method, method_factory
from bayeval.models.bucket_gp import N0, default_sigma2, make_buckets
from bayeval.models.coregional import coregional_model
from bayeval.precision import require_float64
from bayeval.stopping import rules as stop
from bayeval.types import Array, Prediction, State

METHOD_NAME = "bayesame-joint"
INIT_STREAM = 2**31 - 3
WEIGHT_STREAM = 2**31 - 2


class JointBackendState(NamedTuple):
    """The joint posterior with its hyperparameters and the AdamW learning rate."""

    joint: JointState
    params: dict[str, Array]
    learning_rate: Array  # ()
    nearly_unique: Array  # () bool: B ≥ N − N0


class JointPlan(NamedTuple):
    """What the choice of the next cell reads besides the prediction."""

    design: Array  # (D,) cells of the initial design, in the order they are asked
    consumed: Array  # (D,) bool: scored, or skipped
    last: Array  # () int32: the target observed last (−1 before any); round robin goes on
    #                after it


class JointProgress(NamedTuple):
    """The stopping state: each target's rule state (leading target axis) and whether it
    has met its rule."""

    rules: State
    met: Array  # (T,) bool


@dataclass(frozen=True, eq=False)
class JointBayesAME:
    """Settings of multi-target BayesAME (defaults: seed 000 App. C.1).

    ``learning_rate`` and ``sigma2`` default by score kind (read off the reference
    matrix): 0.01 and 0.1 for binary, 0.001 and 0.01 for continuous scores.
    ``refit_every`` = F counts observations (of any target) after the initial design; 0
    never re-fits after the first. ``fit_pairs``: the AdamW fit uses a uniform random
    subset of at most that many observed (target, bucket) pairs, drawn afresh at each
    re-fit (None: all; the rebuild always uses all). ``fit_sigma2=False`` keeps σ² at the
    single-target rule of §1 (10⁻⁴ when the reference vectors are nearly unique, else
    10⁻¹) instead of fitting it (an ablation: App. C.1 fits σ²). ``target_offset`` = τ²₀
    adds a constant offset per target, c_t ~ N(0, τ²), to the model (see
    :func:`~bayeval.models.coregional.coregional_model`), with τ² fitted from τ²₀ at every
    re-fit (None: the paper's model, no offset).
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
        if self.selection not in SELECTIONS:
            raise BayevalError(f"selection must be one of {', '.join(SELECTIONS)}, got "
                               f"{self.selection!r}")
        if not 0.0 < self.init_fraction <= 1.0:
            raise BayevalError(f"init_fraction must be in (0, 1], got {self.init_fraction}")
        if self.refit_every < 0 or self.adam_steps < 0 or self.n_latent < 1:
            raise BayevalError("refit_every and adam_steps must be ≥ 0, n_latent ≥ 1")
        if self.pending < 1:
            raise BayevalError(f"pending must be ≥ 1, got {self.pending}")

    @property
    def params(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    def design_size(self, n_items: int) -> int:
        """⌈init_fraction · N⌉ items in the initial design (each for every target)."""
        return max(1, math.ceil(round(self.init_fraction * n_items, 9)))

    def hyperparameters(self, key: Array, n_targets: int, sigma2: Array) -> dict[str, Array]:
        """The starting hyperparameters: α = β = 1, weights ~ N(0, 0.1²) from ``key``."""
        L = self.n_latent
        weights = 0.1 * jax.random.normal(key, (n_targets, L), jnp.float64)
        params = {"alpha": jnp.ones(L), "beta": jnp.ones(L), "weights": weights,
                  "sigma2": jnp.asarray(sigma2, jnp.float64)}
        if self.target_offset is not None:
            params["offset"] = jnp.asarray(self.target_offset, jnp.float64)
        return params

    def prior(self, phi: Array, sizes: Array, params: dict[str, Array],
              n_targets: int) -> tuple[Array, Array, Array]:
        return joint_prior(coregional_model, phi, sizes, n_targets, params,
                           n_latent=self.n_latent)

    # ------------------------------------------------------------------ backend
    def init(self, reference_scores: Any, n_cells: int) -> JointBackendState:
        """Bucket the reference matrix and set the prior for n_cells / N targets (weights
        from a fixed key; :meth:`JointMethod.begin` draws each run's own)."""
        ref = np.asarray(reference_scores, dtype=np.float64)
        buckets = make_buckets(ref)
        N = buckets.n_items
        if n_cells % N or n_cells < N:
            raise BayevalError(f"{n_cells} cells are not a whole number of targets × "
                               f"{N} items")
        T = n_cells // N
        binary = infer_kind(ref) == "binary"
        if not self.fit_sigma2:
            sigma2 = self.sigma2 or default_sigma2(buckets.n_buckets, N, self.n0)
        else:
            sigma2 = self.sigma2 or (0.1 if binary else 0.01)
        params = self.hyperparameters(jax.random.key(0), T, sigma2)
        phi, sizes = jnp.asarray(buckets.phi), jnp.asarray(buckets.sizes)
        joint = joint_init(phi, sizes, jnp.asarray(buckets.item_bucket),
                           self.prior(phi, sizes, params, T), T, self.pending)
        return JointBackendState(
            joint, params, jnp.asarray(self.learning_rate or (0.01 if binary else 0.001),
                                       jnp.float64),
            jnp.asarray(buckets.n_buckets >= N - self.n0))

    @staticmethod
    def observe(state: JointBackendState, cell: Array, score: Array) -> JointBackendState:
        N = state.joint.observed.shape[1]
        return state._replace(joint=joint_observe(state.joint, cell // N, cell % N, score))

    @staticmethod
    def predict(state: JointBackendState) -> Prediction:
        """Every target's posterior summary: a Prediction with a leading target axis."""
        pred = per_target(joint_predict(state.joint))
        return pred._replace(nearly_unique=jnp.broadcast_to(state.nearly_unique,
                                                            pred.mean.shape))

    def refit_sizes(self, state: JointBackendState) -> list[int]:
        """The static slot counts a re-fit may use (powers of two from 64, then J)."""
        return fit_sizes(state.joint.mu.shape[-1])

    def fitted_pairs(self, pairs: Any) -> Any:
        """How many of the ``pairs`` observed (target, bucket) pairs the AdamW fit reads."""
        return pairs if self.fit_pairs is None else jnp.minimum(pairs, self.fit_pairs)

    def fit_at(self, state: JointBackendState, key: Array, fit_size: int) -> dict[str, Array]:
        """AdamW on the marginal likelihood of at most ``fit_pairs`` observed pairs
        (gathered into ``fit_size`` slots; a uniform subset drawn with ``key`` when there
        are more): the new hyperparameters."""
        fit = FITTED if self.fit_sigma2 else tuple(k for k in FITTED if k != "sigma2")
        return joint_refit(state.joint, state.params, steps=self.adam_steps,
                           learning_rate=state.learning_rate, size=fit_size, key=key,
                           fit=fit, n_latent=self.n_latent)

    def rebuild_at(self, state: JointBackendState, params: dict[str, Array],
                   size: int) -> tuple[JointBackendState, Any]:
        """The posterior under ``params`` rebuilt on every observed pair (``size`` slots),
        with what the re-fit did."""
        joint = joint_rebuild(state.joint, params, size, n_latent=self.n_latent)
        ok = jnp.all(jnp.asarray([jnp.all(jnp.isfinite(v)) for v in
                                  jax.tree_util.tree_leaves(params)]))
        return (state._replace(joint=joint, params=params),
                refitted(ok, jnp.asarray(self.adam_steps), jnp.asarray(jnp.nan)))

    def slots(self, state: JointBackendState, pairs: int) -> tuple[int, int]:
        """(fit, rebuild) slot counts for ``pairs`` observed pairs: the smallest of
        :meth:`refit_sizes` that hold the fitted pairs and all pairs."""
        sizes = self.refit_sizes(state)
        fit = int(self.fitted_pairs(pairs))
        return (next((s for s in sizes if s >= fit), sizes[-1]),
                next((s for s in sizes if s >= pairs), sizes[-1]))

    def refit(self, state: JointBackendState, key: Array) -> tuple[JointBackendState, Any]:
        """:meth:`fit_at` then :meth:`rebuild_at` at the smallest slot counts that hold
        the pairs, each one ``lax.switch`` over the sizes (for a jitted loop; the Session
        picks the sizes in Python, :meth:`JointMethod.step`)."""
        sizes = self.refit_sizes(state)
        if self.fit_pairs is not None:  # the fit never needs more slots than fit_pairs
            sizes_fit = [s for s in sizes if s < self.fit_pairs]
            sizes_fit.append(next((s for s in sizes if s >= self.fit_pairs), sizes[-1]))
        else:
            sizes_fit = sizes
        pairs = jnp.sum(state.joint.count > 0)
        params = switch_by_size(sizes_fit, self.fitted_pairs(pairs),
                                lambda f: lambda s, k: self.fit_at(s, k, f), state, key)
        return switch_by_size(sizes, pairs, lambda b: lambda s, p: self.rebuild_at(s, p, b),
                              state, params)

    @staticmethod
    def compact(state: JointBackendState) -> JointBackendState:
        return state._replace(joint=joint_compact(state.joint))

    def backend(self) -> Backend:
        """The joint posterior as a :class:`~bayeval.inference.base.Backend` over cells.
        Its re-fits follow the method's schedule (:meth:`JointMethod.maintain`), so
        ``refit_every`` is 0 here."""
        return Backend("joint_coregional", self.init, self.observe, self.predict,
                       self.refit, 0, self.compact, self.pending)


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


def _row(tree: Any, t: Array) -> Any:
    return jax.tree_util.tree_map(lambda x: x[t], tree)


def _set_row(tree: Any, t: Array, row: Any) -> Any:
    return jax.tree_util.tree_map(lambda a, b: a.at[t].set(b), tree, row)


@dataclass(frozen=True, eq=False)
class JointMethod(Method):
    """Multi-target BayesAME as a Method with a target axis (module docstring);
    ``config`` holds its settings. Positions are cells t · N + i; estimates, and the stop
    that :meth:`report` returns, carry a trailing (T,) axis."""

    config: JointBayesAME = field(default_factory=JointBayesAME)
    several_targets = True

    # ------------------------------------------------------------------ a run
    def start(self, reference_scores: Any, n_items: int, n_targets: int = 1) -> LoopState:
        require_float64(f"method {self.name!r}")
        if n_targets < 1:
            raise BayevalError(f"need at least one target, got {n_targets}")
        state = self.backend.init(reference_scores, n_items * n_targets)
        D = self.config.design_size(n_items)
        plan = JointPlan(jnp.arange(D * n_targets, dtype=jnp.int32),
                         jnp.zeros(D * n_targets, bool), jnp.asarray(-1, jnp.int32))
        return self._first_jitted(state, plan)

    def _first(self, state: JointBackendState, plan: JointPlan) -> LoopState:
        """The loop state before any observation (no stopping rule has seen anything)."""
        prediction = self.backend.predict(state)
        T, N = prediction.item_mean.shape

        def stack(x):
            return jnp.broadcast_to(x, (T, *jnp.shape(x)))

        est = jax.tree_util.tree_map(stack, self.estimator.init(N))
        rules = jax.tree_util.tree_map(stack, self.stopping.init())
        return LoopState(state, est, JointProgress(rules, jnp.zeros(T, bool)), prediction,
                         self._estimates(est, prediction), plan)

    @functools.cached_property
    def _first_jitted(self) -> Callable:
        return self._compiled("joint-first", JointMethod._first)

    def _estimates(self, est: State, prediction: Prediction):
        return jax.vmap(lambda s, p: self.estimator.estimate(s, p, self.z))(est, prediction)

    def begin(self, loop: LoopState, key: Array) -> LoopState:
        """The run's own initial design (⌈10% N⌉ items from ``fold_in(key, INIT_STREAM)``,
        every target on each in turn) and initial weights (``fold_in(key, WEIGHT_STREAM)``),
        with the prior rebuilt for them."""
        return self._begin(loop, key)

    @functools.cached_property
    def _begin(self) -> Callable:
        return self._compiled("joint-begin", JointMethod._begin_run)

    def _begin_run(self, loop: LoopState, key: Array) -> LoopState:
        """:meth:`begin`, traced."""
        cfg = self.config
        joint = loop.backend.joint
        T, N = joint.observed.shape
        params = cfg.hyperparameters(jax.random.fold_in(key, WEIGHT_STREAM), T,
                                     loop.backend.params["sigma2"])
        prior = cfg.prior(joint.phi, joint.sizes, params, T)
        joint = joint_init(joint.phi, joint.sizes, joint.item_bucket, prior, T,
                           joint.pending.shape[0])
        D = cfg.design_size(N)
        # the same items as acquisition.multi_target.initial_design; asked in item
        # order, or in the drawn order where an estimator weighs each draw by its
        # probability (then each design item is uniform over those not yet asked)
        items = jax.random.permutation(jax.random.fold_in(key, INIT_STREAM), N)[:D]
        if not self.estimator.needs_probabilities:
            items = jnp.sort(items)
        design = (items[:, None] + N * jnp.arange(T)[None, :]).reshape(-1)
        plan = JointPlan(design.astype(jnp.int32), jnp.zeros(D * T, bool),
                         jnp.asarray(-1, jnp.int32))
        state = loop.backend._replace(joint=joint, params=params)
        return self._first(state, plan)

    def choose(self, loop: LoopState, available: Array, key: Array,
               k: int) -> tuple[Array, Draw]:
        """The next cell: the first design cell not yet done, else the policy's draw from
        the rule's weights over the open targets' cells (round robin: the turn's target
        only). Its Draw is how it was drawn within its target's row: uniformly among the
        row's available items in the design (a random order, for a design-based
        estimator), from the rule's weights over the row after it (1 for argmax)."""
        if k != 1:
            raise BayevalError(f"{self.name} asks one (target, item) pair at a time, not {k}")
        prediction, plan = loop.prediction, loop.plan
        T, N = prediction.item_mean.shape
        avail = available.reshape(T, N)
        todo = ~plan.consumed & available[plan.design]
        in_design = todo.any()
        design_cell = plan.design[jnp.argmax(todo)]
        has_items = avail.any(1)
        open_rows = ~loop.stopping.met & has_items
        # once every target has stopped (a simulation runs on), every target with items
        open_rows = jnp.where(open_rows.any(), open_rows, has_items)
        target = mt.next_target(~open_rows, plan.last)
        cells = avail & open_rows[:, None]
        if SELECTIONS[self.config.selection].in_turn:
            cells = cells & (jnp.arange(T)[:, None] == target)
        log_w = self.rule(prediction, cells)
        log_w = jnp.where(prediction.nearly_unique[0], log_w, 0.0)  # random if B < N − N0
        pick = self.policy.draw(key, log_w.reshape(-1), cells.reshape(-1), 1)[0]
        cell = jnp.where(in_design, design_cell, pick).astype(jnp.int32)
        t, i = cell // N, cell % N
        row = jnp.where(in_design, probabilities(jnp.zeros(N), avail[t]),
                        probabilities(log_w[t], cells[t]))
        q = row[i] if self.policy.random else jnp.where(in_design, row[i], 1.0)
        design = (jnp.nan if self.estimator.design is None
                  else self.estimator.design(_row(prediction, t), row))
        return cell[None], Draw(jnp.reshape(q, (1,)), jnp.full(1, design))

    @property
    def probability(self) -> Callable:
        """Refused: the draw of a cell depends on the round-robin turn, which a journal
        without the draw's probability does not record (every journal of a method with a
        target axis records it)."""

        def refuse(loop, available, item):
            raise BayevalError(f"{self.name}: a draw's probability cannot be recomputed "
                               "from the journal; it must be recorded with the tell")

        return refuse

    def record(self, loop: LoopState, item: Array, score: Array, draw: Draw) -> LoopState:
        """The observed target's estimator update, the backend's observe, and the plan:
        the design cell done, the turn moved to this target."""
        N = loop.prediction.item_mean.shape[1]
        t, i = item // N, item % N
        est = self.estimator.update(_row(loop.estimator, t), _row(loop.prediction, t), i,
                                    score, draw)
        plan = loop.plan
        plan = plan._replace(consumed=plan.consumed | (plan.design == item),
                             last=t.astype(jnp.int32))
        return loop._replace(backend=self.backend.observe(loop.backend, item, score),
                             estimator=_set_row(loop.estimator, t, est), plan=plan)

    def skip(self, loop: LoopState, item: Array) -> LoopState:
        """A skipped design cell counts as done for the design."""
        return self._skip(loop, item)

    @functools.cached_property
    def _skip(self) -> Callable:
        def skip(method, loop, item):
            plan = loop.plan
            return loop._replace(plan=plan._replace(
                consumed=plan.consumed | (plan.design == item)))

        return self._compiled("joint-skip", skip)

    def refit_due(self, n: Any, n_targets: int, n_items: int) -> Any:
        """Whether a re-fit follows the n-th observation: after the D-th (D = the initial
        design's size) and every F after it (None: never). ``n`` may be an int or an
        array."""
        cfg = self.config
        if cfg.adam_steps == 0:
            return None
        D = n_targets * cfg.design_size(n_items)
        due = n == D
        if cfg.refit_every > 0:
            due = due | ((n > D) & ((n - D) % cfg.refit_every == 0))
        return due

    def maintain(self, state: State, n: Array, key: Array, refit: Callable | None = None,
                 compact: Callable | None = None, quiet: Any = None) -> tuple[State, Any]:
        """Compact every P observations; re-fit on :meth:`refit_due`'s schedule."""
        due = self.refit_due(n, *state.joint.observed.shape[-2:])  # (runs batched in front)
        return advance(self.backend, state, n, key, refit, compact, quiet, refit_due=due)

    @functools.cached_property
    def step(self) -> Callable:
        """``(loop, item, score, draw, n, key) -> (loop, stop, info)`` as
        :meth:`Method.step` — record, :meth:`maintain`, report — with the maintenance
        chosen in Python (``n`` is a number here) and the joint state's buffers donated
        to each piece, so that a Session's step never copies Σ_c (J² floats). The loop
        passed in must not be used again."""
        record = self._compiled("joint-record", JointMethod._record_apart,
                                donate_argnums=(0,))
        fit_at = self._compiled("joint-fit", lambda m, *a: m.config.fit_at(*a),
                                static_argnums=(2,))
        rebuild_at = self._compiled("joint-rebuild", lambda m, *a: m.config.rebuild_at(*a),
                                    static_argnums=(2,), donate_argnums=(0,))
        compact = self._compiled("joint-compact", lambda m, *a: m.backend.compact(*a),
                                 donate_argnums=(0,))
        report = self._compiled("joint-report", JointMethod._report_apart)
        every = self.backend.compact_every

        def step(loop, item, score, draw, n, key):
            backend, rest = record(loop.backend, loop._replace(backend=None), item, score,
                                   draw)
            n = int(n)
            info = nothing_done()
            if self.refit_due(n, *rest.prediction.item_mean.shape):
                fit, size = self.config.slots(backend,
                                              int(jnp.sum(backend.joint.count > 0)))
                backend, info = rebuild_at(backend, fit_at(backend, key, fit), size)
            elif every and n % every == 0:
                backend = compact(backend)
                info = info._replace(compacted=jnp.ones((), bool))
            rest, stop = report(backend, rest)
            return rest._replace(backend=backend), stop, info

        return step

    def _record_apart(self, backend: State, loop: LoopState, item: Array, score: Array,
                      draw: Draw) -> tuple[State, LoopState]:
        loop = self.record(loop._replace(backend=backend), item, score, draw)
        return loop.backend, loop._replace(backend=None)

    def _report_apart(self, backend: State, loop: LoopState) -> tuple[LoopState, Array]:
        loop, stop = self.report(loop._replace(backend=backend))
        return loop._replace(backend=None), stop

    def report(self, loop: LoopState) -> tuple[LoopState, Array]:
        """Predict, every target's estimate, the observed target's stopping rule; the
        stop (T,): each target met its rule and the initial design is done."""
        prediction = self.backend.predict(loop.backend)
        estimate = self._estimates(loop.estimator, prediction)
        progress, t = loop.stopping, jnp.maximum(loop.plan.last, 0)
        rule_state, fired = self.stopping.update(_row(progress.rules, t), _row(estimate, t),
                                                 _row(prediction, t))
        progress = JointProgress(_set_row(progress.rules, t, rule_state),
                                 progress.met.at[t].set(progress.met[t] | fired))
        stop_now = progress.met & jnp.all(loop.plan.consumed)
        return loop._replace(stopping=progress, prediction=prediction,
                             estimate=estimate), stop_now


@method_factory(METHOD_NAME, hyper=("epsilon", "epsilon1", "learning_rate"))
def bayesame_joint(epsilon: float = 0.02, epsilon1: float = 0.005, window: int = 30,
                   level: float = 0.95, n_latent: int = 2, refit_every: int = 50,
                   adam_steps: int = 200, learning_rate: float | None = None,
                   sigma2: float | None = None, init_fraction: float = 0.1,
                   selection: str = "round_robin", fit_pairs: int | None = 256,
                   fit_sigma2: bool = True, target_offset: float | None = None,
                   n0: int = N0, pending: int = PENDING) -> JointMethod:
    """Multi-target BayesAME (seed 000 §3.2) with the settings of :class:`JointBayesAME`,
    the posterior interval per target and each target's two-condition stopping rule."""
    config = JointBayesAME(epsilon, epsilon1, window, level, n_latent, refit_every,
                           adam_steps, learning_rate, sigma2, init_fraction, selection,
                           fit_pairs, fit_sigma2, target_offset, n0, pending)
    return JointMethod(METHOD_NAME, config.backend(), SELECTIONS[selection].rule, argmax,
                       stop.two_condition(epsilon, epsilon1, window), level=level,
                       estimator=posterior(), config=config)


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
                     pending: int = PENDING, level: float = 0.95) -> JointMethod:
    """Active PAI for several targets (METHODS.md §9 over the joint posterior of seed 000
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
    config = JointBayesAME(epsilon=epsilon, level=level, n_latent=n_latent,
                           refit_every=refit_every, adam_steps=adam_steps,
                           init_fraction=init_fraction, fit_pairs=fit_pairs, pending=pending)
    one = active_rule(beta, temperature, tau, p_min)
    estimator = design_valid.estimator(weights, floor, anytime, anytime_rounds, min_share,
                                       p_min, recalibrate)
    return JointMethod("active-pai-joint", config.backend(), jax.vmap(one), sample,
                       stop.width_after(n_min, epsilon), level=level, estimator=estimator,
                       config=config)

__all__: Sequence[str] = (
    "METHOD_NAME",
    "JointBackendState",
    "JointBayesAME",
    "JointMethod",
    "JointPlan",
    "JointProgress",
    "active_pai_joint",
    "bayesame_joint",
)
