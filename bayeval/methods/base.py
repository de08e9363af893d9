"""A method is backend + rule + policy + estimator + stopping, run by one loop.

docs/architecture.md's round, for every method: predict → rule → policy (items and their draw
probabilities) → evaluate → estimator update (with the pre-observation prediction) →
backend observe → maintenance (re-fit, compaction) → predict → estimate → stopping.
:class:`Method` holds the parts and composes the round into two pure functions,
:meth:`Method.ask` and :meth:`Method.tell`; the interactive
:class:`~bayeval.loop.session.Session` and the vmapped :func:`~bayeval.loop.simulate.simulate` both
run those two, so a simulated run and a Session with the same seed and answers choose the
same items and give the same estimates.

Methods are built by name with :func:`make_method` so that a journal can record ``(name,
params)`` and rebuild the same method on resume; one file per method family in this
package registers its methods (:func:`register_method`).
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bayeval.acquisition.base import Rule
from bayeval.acquisition.policies import Policy, as_policy, drawn_probabilities
from bayeval.errors import BayevalError
from bayeval.estimators.base import Draw, Estimator, exact_when_complete, posterior
from bayeval.estimators.interval import z_value
from bayeval.hparams import Program, as_values
from bayeval.inference.base import (
    Backend,
    RefitInPieces,
    advance,
    nothing_done,
    refit_schedule,
)
from bayeval.methods.targets import Turns, one_target
from bayeval.precision import require_float64
from bayeval.stopping.rules import StoppingRule
from bayeval.types import Array, Estimate, Prediction, State

REFIT_STREAM = 2**31 - 1


class LoopState(NamedTuple):
    """Everything one run carries between rounds: the backend's, estimator's and stopping
    rule's states, the current prediction (the one the next draw and the next estimator
    update read), the current estimate, and ``plan``: what a method's choice of the next
    item reads beyond the prediction (None for most; multi-target BayesAME keeps its
    initial design and round-robin turn there)."""

    backend: State
    estimator: State
    stopping: State
    prediction: Prediction
    estimate: Estimate
    plan: State = None


@dataclass(frozen=True, eq=False)
class Method:
    """One way to run an evaluation (module docstring).

    ``policy`` draws the items and says with what probability
    (:class:`~bayeval.acquisition.policies.Policy`; a plain draw function is accepted, its
    probabilities then unknown); ``estimator`` turns the observations into the estimate
    and its interval at ``level`` (default: the backend's posterior). An estimator that
    weighs scores by their draw probability needs a policy that draws at random.

    A run is two pure functions of its :class:`LoopState`, in the BlackJAX way:
    :meth:`ask` (the next items and how they were drawn) and :meth:`tell` (record a score,
    re-fit when due, report), from :meth:`init`. The Session is a journal around a host
    loop over them, jitted once per program (:attr:`select`, :attr:`step`; methods that
    differ only in traced settings share the programs, :mod:`bayeval.hparams`); the
    simulator is a ``while_loop`` over them vmapped over runs.

    ``turns`` is the target axis (:mod:`bayeval.methods.targets`): T ≥ 1 targets, their
    positions the (target, item) cells ``t · N + i``, one estimator and stopping rule state
    per target, the next cell chosen in their turn. Every method runs the same hooks
    whatever T; one target (the default) stores no axis, several
    (:class:`~bayeval.methods.targets.TargetTurns`, with a joint backend) are what the
    multi-target methods compose.
    """

    name: str
    backend: Backend
    rule: Rule
    policy: Policy
    stopping: StoppingRule
    params: dict[str, Any] = field(default_factory=dict)
    level: float = 0.95
    estimator: Estimator = field(default_factory=posterior)
    program: Program | None = None
    hyper: dict[str, float] = field(default_factory=dict)
    turns: Turns = field(default_factory=one_target)

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", as_policy(self.policy))
        object.__setattr__(self, "estimator", exact_when_complete(self.estimator))
        z_value(self.level)  # validates the level
        if self.estimator.needs_probabilities and not self.policy.random:
            raise BayevalError(
                f"method {self.name!r}: estimator {self.estimator.name} weighs each score "
                f"by its draw probability, which policy {self.policy.name!r} does not give "
                "(use a sampling policy, e.g. acquisition.sample)")
        if self.estimator.design is not None and self.policy.distributions is None:
            raise BayevalError(
                f"method {self.name!r}: estimator {self.estimator.name} reads the "
                f"distribution of each draw, which policy {self.policy.name!r} does not "
                "give (use acquisition.sample)")
        if self.estimator.without_replacement and self.policy.with_replacement:
            raise BayevalError(
                f"method {self.name!r}: estimator {self.estimator.name} is for draws "
                f"without replacement; policy {self.policy.name!r} draws with replacement")

    @property
    def with_replacement(self) -> bool:
        """Whether the policy draws from all items every round, repeats included (FAQ)."""
        return self.policy.with_replacement

    @property
    def z(self) -> float:
        return z_value(self.level)

    @property
    def several_targets(self) -> bool:
        """Whether a run may evaluate several targets jointly (its ``turns``)."""
        return self.turns.several

    # ------------------------------------------------------------------ the round
    def record(self, loop: LoopState, item: Array, score: Array, draw: Draw) -> LoopState:
        """The told target's estimator update (with the pre-observation prediction and the
        draw), the backend's observe, and the plan's record of it."""
        turns = self.turns
        t, i = turns.split(item, loop.prediction)
        est = self.estimator.update(turns.row(loop.estimator, t),
                                    turns.row(loop.prediction, t), i, score, draw)
        return loop._replace(backend=self.backend.observe(loop.backend, item, score),
                             estimator=turns.set_row(loop.estimator, t, est),
                             plan=turns.observed(loop.plan, item, t))

    def report(self, loop: LoopState) -> tuple[LoopState, Array]:
        """Predict, estimate every target and update the told target's stopping rule:
        (loop, stop)."""
        turns = self.turns
        prediction = self.backend.predict(loop.backend)
        estimate = turns.over(self._estimate)(loop.estimator, prediction)
        t = turns.told(loop.plan)
        rule_state, fired = self.stopping.update(turns.rule_state(loop.stopping, t),
                                                 turns.row(estimate, t),
                                                 turns.row(prediction, t))
        stopping, stop = turns.stopped(loop.stopping, t, rule_state, fired, loop.plan)
        return loop._replace(stopping=stopping, prediction=prediction,
                             estimate=estimate), stop

    def _estimate(self, est: State, prediction: Prediction) -> Estimate:
        return self.estimator.estimate(est, prediction, self.z)

    def start(self, reference_scores: Any, n_items: int, n_targets: int = 1) -> LoopState:
        """The loop state before any observation, shared by every run on this reference.
        ``backend.init`` runs eagerly (it may bucket or fit the reference matrix with
        NumPy) over the ``n_items · n_targets`` cells."""
        require_float64(f"method {self.name!r}")
        self.turns.check(self.name, n_targets)
        state = self.backend.init(reference_scores, n_items * n_targets)
        return self._first_report(state, self.turns.plan(n_items, n_targets), n_items)

    def begin(self, loop: LoopState, key: Array) -> LoopState:
        """The start of one run with ``key`` (pure, vmapped by the simulator): the shared
        state of :meth:`start` made the run's own — the backend's (``Backend.begin``) and
        the plan's — where either has one (nothing to do for most methods)."""
        if self.backend.begin is None and loop.plan is None:
            return loop
        return self._begin(loop, key)

    def skip(self, loop: LoopState, item: Array) -> LoopState:
        """``item`` will not be scored (its evaluation failed): the plan's record of it
        (nothing to do for most methods; the Session only stops offering it)."""
        if loop.plan is None:
            return loop
        return self._skip(loop, item)

    def maintain(self, state: State, n: Array, key: Array, refit: Callable | None = None,
                 compact: Callable | None = None, quiet: Any = None) -> tuple[State, Any]:
        """After the n-th observation: re-fit or compact the backend state when due
        (:func:`~bayeval.inference.base.advance`, whose arguments these are)."""
        return advance(self.backend, state, n, key, refit, compact, quiet)

    @functools.cached_property
    def compiled_as(self) -> Program:
        """What this method's compiled programs are keyed by (:mod:`bayeval.hparams`):
        its factory's program when :func:`method_factory` built it, so that methods
        differing only in traced settings share them; else this object alone."""
        return self.program if self.program is not None else Program(self, lambda _: self)

    @functools.cached_property
    def hyper_values(self) -> dict[str, Array]:
        """The traced settings passed to every compiled program (:func:`as_values`)."""
        return as_values(self.hyper)

    def _compiled(self, op: str, fn: Callable, static_argnums: tuple[int, ...] = (),
                  donate_argnums: tuple[int, ...] = ()) -> Callable:
        """``fn(method, *args)`` jitted once per program and op (its traced settings the
        first argument, bound here to this method's); ``static_argnums`` and
        ``donate_argnums`` count the ``args``."""
        program = self.compiled_as
        jitted = _PROGRAMS.pop((program, op), None)
        if jitted is None:
            rebuild = program.rebuild

            def run(values, *args):
                return fn(rebuild(values), *args)

            jitted = jax.jit(run, static_argnums=tuple(i + 1 for i in static_argnums),
                             donate_argnums=tuple(i + 1 for i in donate_argnums))
        if self.program is not None:  # a hand-built method's programs live on it
            _PROGRAMS[(program, op)] = jitted  # the most recently used last
            while len(_PROGRAMS) > MAX_PROGRAMS:
                del _PROGRAMS[next(iter(_PROGRAMS))]
        return functools.partial(jitted, self.hyper_values)

    def _first(self, state: State, plan: State, n_items: int) -> LoopState:
        """The loop state before any observation (no stopping rule has seen anything)."""
        turns = self.turns
        prediction = self.backend.predict(state)
        est = turns.stack(self.estimator.init(n_items), prediction)
        return LoopState(state, est, turns.progress(self.stopping.init(), prediction),
                         prediction, turns.over(self._estimate)(est, prediction), plan)

    @functools.cached_property
    def _first_report(self) -> Callable:
        return self._compiled("first", Method._first, static_argnums=(2,))

    @functools.cached_property
    def _begin(self) -> Callable:
        def begin(method, loop, key):
            T, N = method.turns.count(loop.prediction), loop.prediction.item_mean.shape[-1]
            state = loop.backend
            if method.backend.begin is not None:
                state = method.backend.begin(state, key)
            plan = method.turns.plan(N, T, key, method.estimator.needs_probabilities)
            return method._first(state, plan, N)

        return self._compiled("begin", begin)

    @functools.cached_property
    def _skip(self) -> Callable:
        def skip(method, loop, item):
            return loop._replace(plan=method.turns.skipped(loop.plan, item))

        return self._compiled("skip", skip)

    def refit_key(self, key: Array) -> Array:
        """The key stream of re-fits, apart from the selection keys ``fold_in(key, t)``."""
        return jax.random.fold_in(key, REFIT_STREAM)

    # ------------------------------------------------------------------ ask / tell
    def init(self, reference_scores: Any, n_items: int, key: Array,
             n_targets: int = 1) -> LoopState:
        """The state of one run with ``key`` before any observation: :meth:`begin` of
        :meth:`start` (the simulator runs :meth:`start` once for all its runs and vmaps
        :meth:`begin`)."""
        return self.begin(self.start(reference_scores, n_items, n_targets), key)

    def ask(self, loop: LoopState, available: Array, key: Array, counter: Array,
            k: int) -> tuple[Array, Draw]:
        """The next ``k`` item positions and how each was drawn (a Draw of (k,) arrays):
        :meth:`choose` with the key ``fold_in(key, counter)``, ``counter`` being the
        draw's place in the draw order. Pure: the Session runs it jitted
        (:attr:`select`), the simulator vmapped over runs inside its ``while_loop``."""
        return self.choose(loop, available, jax.random.fold_in(key, counter), k)

    def tell(self, loop: LoopState, item: Array, score: Array, draw: Draw, n: Array,
             key: Array, *, over: Callable | None = None,
             maintain: Callable | None = None) -> tuple[LoopState, Array, Any]:
        """The n-th observation, ``score`` of ``item`` drawn as ``draw``: :meth:`record`,
        re-fit or compaction when due (:meth:`maintain` with the re-fit key ``key``;
        ``info`` says what it did), then :meth:`report`: ``(loop, stop, info)``. Pure:
        the Session runs it jitted (:attr:`step`); the simulator passes ``over=jax.vmap``
        (the run axis) and ``maintain``, its maintenance of the batched states."""
        over = over if over is not None else (lambda f: f)
        maintain = maintain if maintain is not None else self.maintain
        loop = over(self.record)(loop, item, score, draw)
        state, info = maintain(loop.backend, n, key)
        loop, stop = over(self.report)(loop._replace(backend=state))
        return loop, stop, info

    @functools.cached_property
    def step(self) -> Callable:
        """:meth:`tell` jitted once per program: ``(loop, item, score, draw, n, key) ->
        (loop, stop, info)``; for a backend that re-fits in pieces, :meth:`_step_in_pieces`."""
        if isinstance(self.backend.settings, RefitInPieces):
            return self._step_in_pieces()
        return self._compiled("step", lambda method, *args: method.tell(*args))

    def _step_in_pieces(self) -> Callable:
        """:meth:`tell` for a backend whose state is large (the joint posterior's Σ_c, J²
        floats): record, maintenance chosen in Python (``n`` is a number here; a re-fit's
        slot counts :meth:`RefitInPieces.refit_slots` picked for the pairs observed),
        report, each a program of its own with the backend state's buffers donated, so
        that a Session's step never copies that state. The loop passed in must not be
        used again."""
        record = self._compiled("record", Method._record_apart, donate_argnums=(0,))
        fit_at = self._compiled("fit", lambda m, *a: m.backend.settings.fit_at(*a),
                                static_argnums=(2,))
        rebuild_at = self._compiled(
            "rebuild", lambda m, *a: m.backend.settings.rebuild_at(*a),
            static_argnums=(2,), donate_argnums=(0,))
        compact = self._compiled("compact", lambda m, *a: m.backend.compact(*a),
                                 donate_argnums=(0,))
        report = self._compiled("report", Method._report_apart)
        backend = self.backend

        def step(loop, item, score, draw, n, key):
            state, rest = record(loop.backend, loop._replace(backend=None), item, score,
                                 draw)
            n = int(n)
            info = nothing_done()
            due = refit_schedule(backend, state, n)
            if due is not None and bool(due):
                fit, size = backend.settings.refit_slots(state)
                state, info = rebuild_at(state, fit_at(state, key, fit), size)
            elif backend.compact_every and n % backend.compact_every == 0:
                state = compact(state)
                info = info._replace(compacted=jnp.ones((), bool))
            rest, stop = report(state, rest)
            return rest._replace(backend=state), stop, info

        return step

    def _record_apart(self, backend: State, loop: LoopState, item: Array, score: Array,
                      draw: Draw) -> tuple[State, LoopState]:
        loop = self.record(loop._replace(backend=backend), item, score, draw)
        return loop.backend, loop._replace(backend=None)

    def _report_apart(self, backend: State, loop: LoopState) -> tuple[LoopState, Array]:
        loop, stop = self.report(loop._replace(backend=backend))
        return loop._replace(backend=None), stop

    def choose(self, loop: LoopState, available: Array, key: Array,
               k: int) -> tuple[Array, Draw]:
        """(k positions, how each was drawn: a Draw of (k,) arrays) from ``key``: the
        target axis's choice (:mod:`bayeval.methods.targets`) over this method's rule and
        policy."""
        return self.turns.choose(self, loop, available, key, k)

    def draws(self, prediction: Prediction, log_w: Array, available: Array,
              items: Array) -> Draw:
        """The Draw of each of ``items`` drawn in turn from ``log_w`` over ``available``:
        its probability and, for an estimator with a ``design``, that statistic of the
        distribution it was drawn from (the batch's earlier items removed)."""
        if self.estimator.design is None:
            q = self.policy.probabilities(log_w, available, items)
            return Draw(q, jnp.full(q.shape, jnp.nan))
        dists = self.policy.distributions(log_w, available, items)  # q read off them
        return Draw(drawn_probabilities(dists, items),
                    jax.vmap(self.estimator.design, in_axes=(None, 0))(prediction, dists))

    @functools.cached_property
    def select(self) -> Callable:
        """:meth:`ask` jitted once per program: ``(loop, available, key, counter, k) ->
        (items, draws)``; ``k`` is static."""
        return self._compiled("select", lambda method, *args: method.ask(*args),
                              static_argnums=(4,))

    @functools.cached_property
    def probability(self) -> Callable:
        """Jitted ``(loop, available, item) -> Draw``: how the policy would draw
        ``item`` as a single draw (for journals recorded without it). Refused where the
        draw depends on a turn the journal does not record (several targets: every
        journal of theirs records the draw)."""
        if not self.turns.replayable:
            def refuse(loop, available, item):
                raise BayevalError(f"{self.name}: a draw's probability cannot be "
                                   "recomputed from the journal; it must be recorded with "
                                   "the tell")

            return refuse

        def probability(method, loop, available, item):
            prediction = loop.prediction
            log_w = method.rule(prediction, available)
            return jax.tree_util.tree_map(lambda x: x[0], method.draws(
                prediction, log_w, available, item[None]))

        return self._compiled("probability", probability)


# The compiled programs of factory-built methods, by (program, op): shared by every
# method of one program whatever its traced settings.
# The least recently used are dropped beyond MAX_PROGRAMS (with their compiled code,
# once no method holds them), so that a long notebook session that tries many structural
# settings does not keep every program it ever compiled.
MAX_PROGRAMS = 512
_PROGRAMS: dict[tuple[Program, str], Callable] = {}


_REGISTRY: dict[str, Callable[..., Method]] = {}


def register_method(name: str, factory: Callable[..., Method]) -> None:
    """Make ``factory(**params)`` available as ``make_method(name, **params)``."""
    _REGISTRY[name] = factory


def method_factory(name: str, hyper: tuple[str, ...] = ()) -> Callable:
    """Decorate a factory of the method ``name`` and register it (:func:`make_method`).

    The factory's parameters are the method's: their signature is the one home of the
    method's settings, read by the CLI's spec, the journal header (:attr:`Method.params`:
    every parameter, defaults filled in) and the bench's unit keys. ``hyper`` names the
    numeric settings that are values rather than structure (:mod:`bayeval.hparams`):
    the method's compiled programs take them as arguments, so that changing one compiles
    nothing; the factory builds its parts from them as tracers too, and checks their
    ranges only where they are known (:func:`bayeval.hparams.known`). A setting that is
    None (e.g. no budget) is structure."""

    def wrap(factory: Callable[..., Method]) -> Callable[..., Method]:
        signature = inspect.signature(factory)
        missing = [h for h in hyper if h not in signature.parameters]
        if missing:
            raise TypeError(f"method {name!r}: hyper {missing} are not parameters")

        @functools.wraps(factory)
        def build(*args: Any, **kwargs: Any) -> Method:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            params = dict(bound.arguments)
            method = factory(**params)
            values = {h: float(params[h]) for h in hyper
                      if isinstance(params[h], int | float) and not isinstance(params[h], bool)}
            structure = {k: v for k, v in params.items() if k not in values}
            # the factory itself is part of the key: a factory registered again under the
            # same name (a notebook cell run after an edit) must not reuse the old programs
            key = (name, factory, tuple(sorted(structure.items(), key=lambda kv: kv[0])))
            program = Program(key, functools.partial(_rebuild, factory, structure))
            for attribute, value in (("name", name), ("params", params),
                                     ("program", program), ("hyper", values)):
                object.__setattr__(method, attribute, value)
            return method

        register_method(name, build)
        return build

    return wrap


def _rebuild(factory: Callable[..., Method], structure: dict[str, Any],
             values: dict[str, Any]) -> Method:
    """The method of ``factory`` with its structural settings and traced ``values``."""
    return factory(**structure, **values)


def method_names() -> list[str]:
    return sorted(_REGISTRY)


@functools.lru_cache(maxsize=64)
def _cached(name: str, frozen: tuple[tuple[str, Any], ...]) -> Method:
    return _REGISTRY[name](**dict(frozen))


def accepts_parameter(name: str, parameter: str) -> bool:
    """Whether the registered method ``name`` takes ``parameter``."""
    factory = _REGISTRY.get(name)
    return factory is not None and parameter in inspect.signature(factory).parameters


def check_parameters(name: str, params: dict[str, Any]) -> None:
    """Refuse, in one line, a parameter the method ``name`` does not take or whose value
    is not of its default's type (an int where an int is expected, a finite number where a
    number is, a bool where a bool is), before any work starts."""
    signature = inspect.signature(_REGISTRY[name])
    for key, value in params.items():
        if key not in signature.parameters:
            known = ", ".join(signature.parameters)
            raise BayevalError(f"method {name!r} has no parameter {key!r} (it takes {known})")
        default = signature.parameters[key].default
        if default is inspect.Parameter.empty or default is None or value is None:
            continue
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok = (isinstance(value, int | float) and not isinstance(value, bool)
                  and math.isfinite(value))
        else:
            ok = isinstance(value, type(default))
        if not ok:
            raise BayevalError(f"method {name!r}: parameter {key}={value!r} should be "
                               f"{type(default).__name__} like its default {default!r}")


def as_text_parameters(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the words that :func:`parse_method_spec` reads as None or bool
    (none, true, false) given back as text where the parameter's default is text, so that
    ``active-pai(floor=none)`` names the floor ``"none"``."""
    signature = inspect.signature(_REGISTRY[name])
    out = dict(params)
    for key, value in params.items():
        default = signature.parameters[key].default if key in signature.parameters else None
        if isinstance(default, str) and (value is None or isinstance(value, bool)):
            out[key] = "none" if value is None else str(value).lower()
    return out


def resolved_parameters(spec: str) -> dict[str, Any]:
    """Every parameter of the method spec ``spec`` (:func:`parse_method_spec`) as
    :func:`make_method` would build it: the spec's parameters over the factory's
    defaults. A result cache keys a spec's units by these, so that a run cached before a
    default changed is not taken for one with the new default."""
    name, params = parse_method_spec(spec)
    if name not in _REGISTRY:
        raise BayevalError(f"unknown method {name!r} (known: {', '.join(method_names())})")
    params = as_text_parameters(name, params)
    check_parameters(name, params)
    defaults = {key: p.default for key, p in inspect.signature(_REGISTRY[name]).parameters.items()
                if p.default is not inspect.Parameter.empty}
    return {**defaults, **params}


def make_method(name: str, **params: Any) -> Method:
    """The method ``name`` with ``params`` (cached: equal arguments give the same object);
    parameters are checked first (:func:`check_parameters`), after the words none, true
    and false are read as text where the default is text (:func:`as_text_parameters`)."""
    if name not in _REGISTRY:
        raise BayevalError(f"unknown method {name!r} (known: {', '.join(method_names())})")
    params = as_text_parameters(name, params)
    check_parameters(name, params)
    try:
        return _cached(name, tuple(sorted(params.items())))
    except (TypeError, ValueError) as exc:
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


