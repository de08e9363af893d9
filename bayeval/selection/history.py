"""History-informed synchronised successive rejects (docs/methods.md §10).

SySRs (seed 002; :mod:`~bayeval.selection.successive_rejects`) ranks the surviving
candidates by their mean score on the shared items seen so far. Teams that choose among
candidates usually hold a score matrix of earlier models on the same benchmark; here the
logistic factor model of FAQ (seed 001; docs/methods.md §3), fitted on those reference models
only, predicts every candidate's score on every item, and each candidate's factor follows
its own scores by the online Laplace update. The arm estimate is the sample mean with the
predictions as a control variate, built so that it stays unbiased for the full mean
whatever the factor model gets wrong.

**The estimator.** SySRs meets the items in one uniform random order I_1, I_2, … (the
phases cut it into consecutive blocks), so for every candidate the t-th item is uniform
over the pool R_t of the L − t + 1 items not seen before it. Let f_t be the candidate's
predicted scores from its first t − 1 scores (the Laplace posterior mean; any rule that
uses only the past would do) and

    d_t = f_t(I_t) − mean_{j ∈ R_t} f_t(j),    E[d_t | past] = 0.

After n items (n < L) the estimate is

    μ̂_n = ȳ_n − ((L − n) / n) Σ_{t ≤ n} d_t / (L − t)                              (★)

and μ̂_L = ȳ_L, the full mean. (★) is Σ_t w_t θ̃_t with the finite-population estimates
θ̃_t = (1/L)[Σ_{s<t} y_s + Σ_{R_t} f_t + |R_t| (y_t − f_t(I_t))], each unbiased given the
past, and the fixed weights w_t = L (L − n) / (n (L − t)(L − t + 1)) (which sum to one);
these are the only weights for which f ≡ 0 gives back the sample mean ȳ_n exactly. Hence:

* E[μ̂_n] = full mean for every n fixed in advance (the phase ends n_k are), whatever the
  predictions are — tested by enumerating every item order of a small case;
* with no reference matrix (f ≡ 0), or any constant prediction, every d_t is exactly 0 and
  this *is* SySRs;
* ranking the survivors by μ̂ keeps SySRs' pairing (all survivors share the items); the
  predictions remove the part of each score the history explains.

A phase's items can be evaluated as one batch: they are a uniform random block of the
order, and (★) reads them in that order with the predictions of the scores before each.
The simulation computes n μ̂_n for every prefix n of a run's order in one scan, so one
pass serves every budget, and :func:`~bayeval.selection.successive_rejects.eliminate`
reads the phases off it exactly as for SySRs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.errors import DataError, JournalError
from bayeval.inference.factor_laplace import item_probabilities, rank_one_update
from bayeval.models.factor import CrossValidation, cross_validate, factor_prior, fit_factors
from bayeval.records.files import write_file
from bayeval.selection.design import (
    corrected_total,
    step_term,
    weighted_order,
    weighted_sums,
)
from bayeval.selection.schedule import phase_schedule
from bayeval.selection.successive_rejects import (
    SelectionResult,
    eliminate,
    item_orders,
    run_schedules,
)
from bayeval.types import Array


class History(NamedTuple):
    """The factor model of the reference models: item factors V (L, k) and a new model's
    prior N(mean0, cov0) (seed 001 §3.1 "Deploying")."""

    item_factors: Array
    mean0: Array
    cov0: Array


def fit_history(reference_scores: np.ndarray, seed: int = 0,
                ks: Sequence[int] = (2, 4, 8, 16, 32, 64),
                weight_decays: Sequence[float] = (0.01, 0.1, 1.0),
                log: Callable[[str], None] | None = None) -> tuple[History, CrossValidation]:
    """Fit the factor model on the reference models' scores ((M, L), binary, NaN = not
    evaluated) with (k, λ) chosen on them alone by 5-fold cross-validation and the 1-SE
    rule (:func:`~bayeval.models.factor.cross_validate`)."""
    ref = np.asarray(reference_scores, np.float64)
    if ref.ndim != 2 or ref.shape[0] < 5:
        raise DataError(f"the history needs at least 5 reference models × items, got shape "
                        f"{ref.shape}")
    cv = cross_validate(ref, ks=ks, weight_decays=weight_decays, seed=seed, log=log)
    fit = fit_factors(ref, cv.k, cv.weight_decay, seed=seed)
    mean0, cov0 = factor_prior(fit.U)
    return History(jnp.asarray(fit.V), jnp.asarray(mean0), jnp.asarray(cov0)), cv


class ArmState(NamedTuple):
    """One candidate's running estimate: its factor posterior N(``mean``, ``cov``), the
    items it has seen (``seen``, (L,) bool), how many (``n``), the sum of its scores
    (``total``) and Σ_t d_t / (L − t) (``correction``) of (★)."""

    mean: Array
    cov: Array
    seen: Array
    n: Array
    total: Array
    correction: Array


def arm_start(history: History) -> ArmState:
    """A candidate before its first score: the history's prior."""
    v = history.item_factors
    zero = jnp.zeros((), v.dtype)
    return ArmState(jnp.asarray(history.mean0, v.dtype), jnp.asarray(history.cov0, v.dtype),
                    jnp.zeros(v.shape[0], bool), jnp.zeros((), jnp.int32), zero, zero)


def arm_step(state: ArmState, item_factors: Array, item: Array, score: Array,
             inverse_probability: Array | None = None) -> ArmState:
    """Add the candidate's ``score`` on ``item`` (not seen before): the d_t term of (★)
    with the predictions of the scores so far, then the online Laplace update. With
    ``inverse_probability`` (π_t, for items met by a weighted design) the term is g_t of
    (★w) in :mod:`~bayeval.selection.design`; without, the item was uniform over the
    unused ones (π_t = |R_t|)."""
    n_items = item_factors.shape[0]
    p = item_probabilities(state.mean, item_factors)
    pool = n_items - state.n  # |R_t|, this item included
    pi = pool if inverse_probability is None else inverse_probability
    correction = state.correction + step_term(
        score, state.n + 1, pi, n_items, p[item], jnp.sum(jnp.where(state.seen, 0.0, p)) / pool)
    mean, cov, _, _ = rank_one_update(state.mean, state.cov, item_factors[item], score)
    return ArmState(mean, cov, state.seen.at[item].set(True), state.n + 1,
                    state.total + score, correction)


def arm_sum(state: ArmState, n_items: int) -> Array:
    """n μ̂_n of (★): the plain sum of the scores, corrected."""
    return corrected_total(state.total, state.correction, state.n, n_items)


def arm_estimate(state: ArmState, n_items: int) -> Array:
    """μ̂_n of (★) (NaN before the first score)."""
    n = state.n
    return jnp.where(n > 0, arm_sum(state, n_items) / jnp.maximum(n, 1), jnp.nan)


def corrected_sums(scores: Array, order: Array, history: History,
                   inverse_probability: Array | None = None) -> Array:
    """(K, L) n μ̂_n for every candidate (rows of ``scores``) and every prefix n of the
    item ``order``: the running sums SySRs' elimination reads, with (★) in place of the
    plain sum, or (★w) when the order was drawn by a weighted design with the
    ``inverse_probability`` of each step (:func:`~bayeval.selection.design.weighted_order`)."""
    v = history.item_factors
    n_items = v.shape[0]
    start = arm_start(history)
    states = jax.tree.map(lambda x: jnp.broadcast_to(x, (scores.shape[0], *x.shape)), start)
    step = jax.vmap(arm_step, in_axes=(0, None, None, 0, None))
    if inverse_probability is None:
        inverse_probability = n_items - jnp.arange(n_items, dtype=v.dtype)  # uniform: |R_t|

    def one(states, x):
        item, pi = x
        states = step(states, v, item, scores[:, item], pi)
        return states, arm_sum(states, n_items)

    _, sums = jax.lax.scan(one, states, (order, inverse_probability))
    return sums.T


@jax.jit
def run_history_schedules(scores: Array, keys: Array, schedules: Array,
                          history: History | None, weights: Array | None = None
                          ) -> SelectionResult:
    """History-informed SySRs for R runs and B schedules, batched as
    :func:`~bayeval.selection.successive_rejects.run_schedules`: the estimate (★) with the
    factor model ``history``, and/or the items drawn by the weighted design of
    :mod:`~bayeval.selection.design` (``weights``, (L,); the estimate is then (★w), with
    f ≡ 0 when ``history`` is None). Without weights the item orders and tie draws are
    SySRs' for the same keys, so the two compare run by run; with weights the tie draws
    are."""
    scores = jnp.asarray(scores)
    K, L = scores.shape
    if history is None and weights is None:
        raise ValueError("run_history_schedules needs a history, item weights or both "
                         "(for neither, run_schedules is SySRs)")
    split = jax.vmap(jax.random.split)(keys)
    if weights is None:
        orders = jax.vmap(lambda k: item_orders(k, K, L, True)[0])(split[:, 0])
        running = jax.vmap(lambda o: corrected_sums(scores, o, history))(orders)
    else:
        orders, inverse = jax.vmap(lambda k: weighted_order(k, weights))(split[:, 0])
        if history is None:
            running = jax.vmap(lambda o, pi: weighted_sums(scores, o, pi))(orders, inverse)
        else:
            running = jax.vmap(lambda o, pi: corrected_sums(scores, o, history, pi))(
                orders, inverse)
    ties = jax.vmap(lambda k: jax.random.uniform(k, (K - 1, K)))(split[:, 1])
    return eliminate(running, ties, schedules)


def history_sysrs(scores: Array, key: Array, budget: int,
                  history: History | None) -> SelectionResult:
    """One run of history-informed SySRs with ``budget`` model–item evaluations over the
    candidates' full score matrix (a simulation); ``history=None`` is SySRs."""
    K, L = jnp.shape(scores)
    schedule = jnp.asarray(phase_schedule(K, L, budget))[None]
    if history is None:
        result = run_schedules(scores, key[None], schedule, True)
    else:
        result = run_history_schedules(scores, key[None], schedule, history)
    return SelectionResult(result.best[0, 0], result.order[0, 0], result.evaluations[0])


@functools.partial(jax.jit, static_argnames=("n_items",))
def _jit_step(state: ArmState, item_factors: Array, item: Array, score: Array,
              inverse_probability: Array, n_items: int) -> tuple[ArmState, Array]:
    new = arm_step(state, item_factors, item, score, inverse_probability)
    return new, arm_estimate(new, n_items)


def step_and_estimate(state: ArmState, history: History, item: int, score: float,
                      inverse_probability: float | None = None) -> tuple[ArmState, float]:
    """:func:`arm_step` then :func:`arm_estimate`, compiled once per item count (for the
    ask/tell session); ``inverse_probability`` as in :func:`arm_step` (None: the uniform
    design, π_t = |R_t|)."""
    n_items = int(history.item_factors.shape[0])
    dtype = history.item_factors.dtype
    pi = n_items - state.n if inverse_probability is None else inverse_probability
    new, est = _jit_step(state, history.item_factors, jnp.asarray(item, jnp.int32),
                         jnp.asarray(score, dtype), jnp.asarray(pi, dtype), n_items=n_items)
    return new, float(est)


def save_history(history: History | None, journal: Path,
                 weights: np.ndarray | None = None) -> dict[str, str]:
    """Write what a selection reads of the earlier models (the factor model ``history``,
    the design's item ``weights``, or both) beside ``journal`` as
    ``<journal>.history.npz`` and return the header record {file, sha256} that
    :func:`load_history` checks."""
    import hashlib
    import io

    path = journal.with_name(journal.name + ".history.npz")
    parts = {} if history is None else {
        "item_factors": np.asarray(history.item_factors), "mean0": np.asarray(history.mean0),
        "cov0": np.asarray(history.cov0)}
    if weights is not None:
        parts["weights"] = np.asarray(weights, np.float64)
    buffer = io.BytesIO()
    np.savez(buffer, **parts)
    data = buffer.getvalue()
    try:
        write_file(path, data)
    except OSError as exc:
        raise JournalError(f"history file {path}: cannot write it ({exc.strerror})") from None
    return {"file": path.name, "sha256": hashlib.sha256(data).hexdigest()}


def load_history(journal: Path, record: dict[str, str]
                 ) -> tuple[History | None, np.ndarray | None]:
    """(factor model, item weights) of the history file a journal's header names (either
    may be None), refused if the file changed."""
    import hashlib
    import io

    path = Path(journal).with_name(str(record.get("file", "")))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise JournalError(f"journal {journal}: its history file {path} cannot be read "
                           f"({exc.strerror})") from None
    if hashlib.sha256(data).hexdigest() != record.get("sha256"):
        raise JournalError(f"journal {journal}: history file {path} is not the one the "
                           "selection started with (SHA-256 differs)")
    with np.load(io.BytesIO(data)) as z:
        history = History(jnp.asarray(z["item_factors"]), jnp.asarray(z["mean0"]),
                          jnp.asarray(z["cov0"])) if "item_factors" in z.files else None
        weights = np.asarray(z["weights"]) if "weights" in z.files else None
    return history, weights
