"""The joint coregional posterior of several targets as a backend (seed 000 §3.2, App.
C.1; docs/methods.md §2): the reference matrix bucketed, the coregional prior over T targets
(:mod:`bayeval.models.coregional`), exact observe/predict with deferred updates
(:mod:`bayeval.inference.joint`), and the re-fit of {α_l, β_l, w, σ²} by AdamW on the
marginal likelihood of a subset of the observed (target, bucket) pairs followed by a
rebuild of the posterior on all of them. Multi-target methods
(:mod:`bayeval.methods.multi_target`) run on it over cells c = t · N + i.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.data.matrix import infer_kind
from bayeval.errors import BayevalError
from bayeval.inference.base import Backend, refitted
from bayeval.inference.exact import PENDING, fit_sizes, switch_by_size
from bayeval.inference.joint import (
    FITTED,
    JointState,
    design_size,
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
from bayeval.types import Array, Prediction

__all__ = ["WEIGHT_STREAM", "JointBackend", "JointBackendState"]

WEIGHT_STREAM = 2**31 - 2  # fold_in of a run's key: its starting coregionalisation weights


class JointBackendState(NamedTuple):
    """The joint posterior with its hyperparameters and the AdamW learning rate."""

    joint: JointState
    params: dict[str, Array]
    learning_rate: Array  # ()
    nearly_unique: Array  # () bool: B ≥ N − N0


@dataclass(frozen=True, eq=False)
class JointBackend:
    """Settings of the joint posterior (defaults: seed 000 App. C.1).

    ``n_latent`` coregionalisation components; ``adam_steps`` AdamW steps per re-fit.
    ``learning_rate`` and ``sigma2`` default by score kind (read off the reference
    matrix): 0.01 and 0.1 for binary, 0.001 and 0.01 for continuous scores.
    ``fit_pairs``: the AdamW fit uses a uniform random subset of at most that many
    observed (target, bucket) pairs, drawn afresh at each re-fit (None: all; the rebuild
    always uses all). ``fit_sigma2=False`` keeps σ² at the single-target rule of §1
    (10⁻⁴ when the reference vectors are nearly unique, else 10⁻¹) instead of fitting it
    (an ablation: App. C.1 fits σ²). ``target_offset`` = τ²₀ adds a constant offset per
    target, c_t ~ N(0, τ²), to the model (see
    :func:`~bayeval.models.coregional.coregional_model`), with τ² fitted from τ²₀ at every
    re-fit (None: the paper's model, no offset). ``n0``: the near-uniqueness margin of
    §1; ``pending``: observations held as deferred updates before a compaction.

    Re-fits: after the initial design's D = T · ⌈``design_fraction`` · N⌉ observations and
    every ``refit_every`` after it (0: only the first; none when ``adam_steps`` = 0); the
    method that runs the backend gives its design's fraction here
    (:class:`~bayeval.methods.targets.TargetTurns`).
    """

    n_latent: int = 2
    adam_steps: int = 200
    learning_rate: float | None = None
    sigma2: float | None = None
    fit_pairs: int | None = 256
    fit_sigma2: bool = True
    target_offset: float | None = None
    n0: int = N0
    pending: int = PENDING
    refit_every: int = 50
    design_fraction: float = 0.1

    def __post_init__(self) -> None:
        if self.adam_steps < 0 or self.n_latent < 1:
            raise BayevalError("adam_steps must be ≥ 0, n_latent ≥ 1")
        if self.pending < 1:
            raise BayevalError(f"pending must be ≥ 1, got {self.pending}")
        if self.refit_every < 0:
            raise BayevalError(f"refit_every must be ≥ 0, got {self.refit_every}")

    def refit_schedule(self, n: Any, n_targets: int, n_items: int) -> Any:
        """Whether a re-fit follows the n-th observation (``n`` an int or an array; None:
        never): after the D-th and every ``refit_every`` after it (class docstring)."""
        if self.adam_steps == 0:
            return None
        D = n_targets * design_size(self.design_fraction, n_items)
        due = n == D
        if self.refit_every > 0:
            due = due | ((n > D) & ((n - D) % self.refit_every == 0))
        return due

    def refit_due(self, n: Any, state: JointBackendState) -> Any:
        """:meth:`refit_schedule` for ``state``'s targets and items (runs batched in front
        allowed)."""
        return self.refit_schedule(n, *state.joint.observed.shape[-2:])

    def begin(self, state: JointBackendState, key: Array) -> JointBackendState:
        """One run's own starting weights (``fold_in(key, WEIGHT_STREAM)``), with the prior
        rebuilt for them."""
        joint = state.joint
        T = joint.observed.shape[0]
        params = self.hyperparameters(jax.random.fold_in(key, WEIGHT_STREAM), T,
                                      state.params["sigma2"])
        prior = self.prior(joint.phi, joint.sizes, params, T)
        joint = joint_init(joint.phi, joint.sizes, joint.item_bucket, prior, T,
                           joint.pending.shape[0])
        return state._replace(joint=joint, params=params)

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
        from a fixed key; the method's ``begin`` draws each run's own)."""
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

    def refit_slots(self, state: JointBackendState) -> tuple[int, int]:
        """:meth:`slots` for the pairs ``state`` has observed."""
        return self.slots(state, int(jnp.sum(state.joint.count > 0)))

    def refit(self, state: JointBackendState, key: Array) -> tuple[JointBackendState, Any]:
        """:meth:`fit_at` then :meth:`rebuild_at` at the smallest slot counts that hold
        the pairs, each one ``lax.switch`` over the sizes (for a jitted loop; the Session
        picks the sizes in Python, :meth:`~bayeval.methods.base.Method.step`)."""
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
        """The joint posterior as a :class:`~bayeval.inference.base.Backend` over cells,
        re-fitted on :meth:`refit_due`'s schedule (in pieces in a Session:
        :class:`~bayeval.inference.base.RefitInPieces`)."""
        return Backend("joint_coregional", self.init, self.observe, self.predict,
                       self.refit, 0, self.compact, self.pending,
                       refit_due=self.refit_due if self.adam_steps else None,
                       begin=self.begin, settings=self)
