"""Selection over (target, item) pairs for multi-target BayesAME (seed 000 §3.2;
docs/methods.md §2).

Rules here map a :class:`~bayeval.inference.joint.JointPrediction` and a (T, N) mask of
available pairs to (T, N) log-weights, so the policies of
:mod:`bayeval.acquisition.base` (``argmax``, ``sample``) choose pairs from the flattened
grid unchanged:

* :func:`initial_design`: all targets on a random 10% of the items first;
* :func:`round_robin`: for the current target t, IG_t(i) (§1's closed form under the joint
  posterior); other targets excluded;
* :func:`mean_information_gain`: the item of largest mean IG over targets; ``argmax``'s
  random tie-break then picks the target uniformly among those still needing that item.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bayeval.acquisition.info_gain import information_gain
from bayeval.inference.joint import JointPrediction, design_size, per_target
from bayeval.types import Array


def target_information_gain(prediction: JointPrediction) -> Array:
    """(T, N) IG_t(i): information about R^t from scoring target t on item i."""
    return jax.vmap(information_gain)(per_target(prediction))


def initial_design(key: Array, n_items: int, fraction: float = 0.1) -> Array:
    """(N,) mask of ⌈fraction · N⌉ items drawn uniformly without replacement."""
    chosen = jax.random.permutation(key, n_items)[:design_size(fraction, n_items)]
    return jnp.zeros(n_items, bool).at[chosen].set(True)


def round_robin(prediction: JointPrediction, available: Array, target: Array) -> Array:
    """IG_t(i) on the row of ``target``, −inf elsewhere."""
    rows = jnp.arange(available.shape[0])[:, None] == target
    return jnp.where(rows & available, target_information_gain(prediction), -jnp.inf)


def mean_information_gain(prediction: JointPrediction, available: Array) -> Array:
    """(1/T) Σ_t IG_t(i) on every available pair of item i."""
    mean_ig = jnp.mean(target_information_gain(prediction), axis=0)
    return jnp.where(available, mean_ig[None, :], -jnp.inf)


def next_target(done: Array, last: Array) -> Array:
    """The first target after ``last`` (cyclically) that has not met its stopping rule
    (``last`` itself if it is the only one left; −1 when all are done)."""
    T = done.shape[0]
    order = (last + 1 + jnp.arange(T)) % T
    pending = ~done[order]
    return jnp.where(pending.any(), order[jnp.argmax(pending)], -1)
