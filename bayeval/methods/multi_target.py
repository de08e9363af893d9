"""Multi-target BayesAME: several target models evaluated jointly (seed 000 §3.2, App. C.1;
docs/methods.md §2).

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

from bayeval.acquisition import multi_target as mt
from bayeval.acquisition.base import probabilities
from bayeval.acquisition.policies import argmax, sample
from bayeval.errors import BayevalError
from bayeval.estimators.base import Draw, posterior
from bayeval.hparams import known
from bayeval.inference.base import advance, nothing_done
from bayeval.inference.exact import PENDING
from bayeval.inference.joint import joint_init
from bayeval.inference.joint_backend import JointBackend, JointBackendState
from bayeval.methods.base import LoopState, Method, method_factory
from bayeval.models.bucket_gp import N0
from bayeval.precision import require_float64
from bayeval.stopping import rules as stop
from bayeval.types import Array, Prediction, State

METHOD_NAME = "bayesame-joint"
INIT_STREAM = 2**31 - 3
WEIGHT_STREAM = 2**31 - 2


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
    """Settings of multi-target BayesAME (defaults: seed 000 App. C.1): the stopping
    rule's (``epsilon``, ``epsilon1``, ``window``), the interval's ``level``, the
    re-fit schedule (``refit_every`` = F counts observations of any target after the
    initial design; 0 never re-fits after the first), the initial design's share
    ``init_fraction``, the ``selection`` of the next cell, and ``posterior``: the joint
    coregional posterior's settings (:class:`~bayeval.inference.joint_backend.
    JointBackend`)."""

    epsilon: float = 0.02
    epsilon1: float = 0.005
    window: int = 30
    level: float = 0.95
    refit_every: int = 50
    init_fraction: float = 0.1
    selection: str = "round_robin"
    posterior: JointBackend = field(default_factory=JointBackend)

    def __post_init__(self) -> None:
        if self.selection not in SELECTIONS:
            raise BayevalError(f"selection must be one of {', '.join(SELECTIONS)}, got "
                               f"{self.selection!r}")
        if not 0.0 < self.init_fraction <= 1.0:
            raise BayevalError(f"init_fraction must be in (0, 1], got {self.init_fraction}")
        if self.refit_every < 0:
            raise BayevalError(f"refit_every must be ≥ 0, got {self.refit_every}")

    def design_size(self, n_items: int) -> int:
        """⌈init_fraction · N⌉ items in the initial design (each for every target)."""
        return max(1, math.ceil(round(self.init_fraction * n_items, 9)))


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
        params = cfg.posterior.hyperparameters(jax.random.fold_in(key, WEIGHT_STREAM), T,
                                     loop.backend.params["sigma2"])
        prior = cfg.posterior.prior(joint.phi, joint.sizes, params, T)
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
        if cfg.posterior.adam_steps == 0:
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
        fit_at = self._compiled("joint-fit", lambda m, *a: m.config.posterior.fit_at(*a),
                                static_argnums=(2,))
        rebuild_at = self._compiled(
            "joint-rebuild", lambda m, *a: m.config.posterior.rebuild_at(*a),
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
                fit, size = self.config.posterior.slots(backend,
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
    joint = JointBackend(n_latent=n_latent, adam_steps=adam_steps,
                             learning_rate=learning_rate, sigma2=sigma2, fit_pairs=fit_pairs,
                             fit_sigma2=fit_sigma2, target_offset=target_offset, n0=n0,
                             pending=pending)
    config = JointBayesAME(epsilon=epsilon, epsilon1=epsilon1, window=window, level=level,
                           refit_every=refit_every, init_fraction=init_fraction,
                           selection=selection, posterior=joint)
    return JointMethod(METHOD_NAME, joint.backend(), SELECTIONS[selection].rule, argmax,
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
    joint = JointBackend(n_latent=n_latent, adam_steps=adam_steps, fit_pairs=fit_pairs,
                             pending=pending)
    config = JointBayesAME(epsilon=epsilon, level=level, refit_every=refit_every,
                           init_fraction=init_fraction, posterior=joint)
    one = active_rule(beta, temperature, tau, p_min)
    estimator = design_valid.estimator(weights, floor, anytime, anytime_rounds, min_share,
                                       p_min, recalibrate)
    return JointMethod("active-pai-joint", joint.backend(), jax.vmap(one), sample,
                       stop.width_after(n_min, epsilon), level=level, estimator=estimator,
                       config=config)

__all__: Sequence[str] = (
    "METHOD_NAME",
    "JointBayesAME",
    "JointMethod",
    "JointPlan",
    "JointProgress",
    "active_pai_joint",
    "bayesame_joint",
)
