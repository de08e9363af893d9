"""Item response theory models used as baselines (seed 000 item 7; docs/methods.md §4).

Both are NumPyro programs over a models × items score matrix with a mask of observed
entries (missing scores are the normal case). Item parameters are latent unless given as
arrays, so one program serves the calibration on the reference models (everything latent)
and the fit of new models' abilities with the items fixed (``discrimination`` and
``difficulty`` of shape (N,) or one row per model, (M, N)).

* :func:`irt_2pl`, binary scores: P(s_ij = 1) = σ(a_j (θ_i − b_j)), with priors
  θ_i ~ N(0, 1), a_j ~ LogNormal(0, 0.5), b_j ~ N(0, 2²) (our choice: the usual weakly
  informative 2PL priors; θ's unit scale identifies the model).
* :func:`irt_beta3`, scores in (0, 1) (β³-IRT, Chen et al. 2019): θ_i, δ_j ∈ (0, 1),
  s_ij ~ Beta((θ_i/δ_j)^{a_j}, ((1 − θ_i)/(1 − δ_j))^{a_j}), with θ_i, δ_j ~ Beta(1, 1)
  and a_j ~ N(1, 1) (Chen et al.'s priors). A score within ε = 1e-3 of 0 or 1 (exact 0s and
  1s are common, in real scores and under the model alike) is treated as censored there
  (our choice): its likelihood is P(s ≤ ε) or P(s ≥ 1 − ε), with
  P(s ≤ ε) ≈ ε^α (1 − ε)^β (1 + ε (α + β)/(α + 1)) / (α B(α, β)), the first terms of the
  incomplete-beta series (differentiable in α, β; relative error O(ε²(α + β)²)).

Sites: ``ability`` (M,), ``discrimination`` (N,), ``difficulty`` (N,) and the observed
``s``. Replace a prior by site name with :func:`bayeval.models.priors.with_priors`.
:func:`expected_score` gives E[s | θ] and Var(s | θ) of every item, which the IRT
estimator (:mod:`bayeval.inference.irt`) averages over posterior draws.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import gammaln

from bayeval.types import Array

CLIP = 1e-3
KINDS = ("2pl", "beta3")


class ItemParams(NamedTuple):
    """Discrimination a and difficulty (b for 2PL, δ for β³) of every item."""

    discrimination: Array
    difficulty: Array


def _filled(scores: Array, mask: Array | None) -> tuple[Array, Array]:
    mask = ~jnp.isnan(scores) if mask is None else jnp.asarray(mask, bool)
    return jnp.where(mask, jnp.nan_to_num(scores), 0.0), mask


def _items(name: str, value: Array | None, prior: dist.Distribution, n_items: int) -> Array:
    if value is not None:
        return jnp.asarray(value)
    return numpyro.sample(name, prior.expand([n_items]).to_event(1))


def irt_2pl(scores: Array, mask: Array | None = None, *, discrimination: Array | None = None,
            difficulty: Array | None = None) -> None:
    """2PL over ``scores`` (M, N) in {0, 1}; NaN or ``mask`` False = not observed."""
    M, N = scores.shape
    filled, mask = _filled(scores, mask)
    ability = numpyro.sample("ability", dist.Normal(jnp.zeros(M), 1.0).to_event(1))
    a = _items("discrimination", discrimination, dist.LogNormal(0.0, 0.5), N)
    b = _items("difficulty", difficulty, dist.Normal(0.0, 2.0), N)
    logits = a * (ability[:, None] - b)
    numpyro.sample("s", dist.Bernoulli(logits=logits).mask(mask).to_event(2), obs=filled)


def _beta_parameters(ability: Array, a: Array, delta: Array) -> tuple[Array, Array]:
    theta = ability[..., None]
    log_alpha = a * (jnp.log(theta) - jnp.log(delta))
    log_beta = a * (jnp.log1p(-theta) - jnp.log1p(-delta))
    return jnp.exp(log_alpha), jnp.exp(log_beta)


def beta_lower_tail(a: Array, b: Array, eps: float = CLIP) -> Array:
    """log P(s ≤ eps) for s ~ Beta(a, b), small eps (series of the module docstring)."""
    log_beta = gammaln(a) + gammaln(b) - gammaln(a + b)
    return (a * jnp.log(eps) + b * jnp.log1p(-eps) + jnp.log1p(eps * (a + b) / (a + 1.0))
            - jnp.log(a) - log_beta)


class CensoredBeta(dist.Distribution):
    """Beta(α, β) observed with scores within ``eps`` of 0 or 1 censored there."""

    support = dist.constraints.unit_interval

    def __init__(self, alpha: Array, beta: Array, eps: float = CLIP,
                 validate_args: bool | None = None) -> None:
        self.alpha, self.beta, self.eps = alpha, beta, eps
        super().__init__(jnp.broadcast_shapes(jnp.shape(alpha), jnp.shape(beta)),
                         validate_args=validate_args)

    def sample(self, key: Array, sample_shape: tuple = ()) -> Array:
        return dist.Beta(self.alpha, self.beta).sample(key, sample_shape)

    def log_prob(self, value: Array) -> Array:
        low, high = value <= self.eps, value >= 1.0 - self.eps
        inner = jnp.clip(value, self.eps, 1.0 - self.eps)
        density = dist.Beta(self.alpha, self.beta).log_prob(inner)
        return jnp.where(low, beta_lower_tail(self.alpha, self.beta, self.eps),
                         jnp.where(high, beta_lower_tail(self.beta, self.alpha, self.eps),
                                   density))


def irt_beta3(scores: Array, mask: Array | None = None, *,
              discrimination: Array | None = None, difficulty: Array | None = None) -> None:
    """β³-IRT over ``scores`` (M, N) in [0, 1]; NaN or ``mask`` False = not observed."""
    M, N = scores.shape
    filled, mask = _filled(scores, mask)
    filled = jnp.where(mask, filled, 0.5)
    ability = numpyro.sample("ability", dist.Beta(jnp.ones(M), 1.0).to_event(1))
    a = _items("discrimination", discrimination, dist.Normal(1.0, 1.0), N)
    delta = _items("difficulty", difficulty, dist.Beta(1.0, 1.0), N)
    alpha, beta = _beta_parameters(ability, a, delta)
    numpyro.sample("s", CensoredBeta(alpha, beta).mask(mask).to_event(2), obs=filled)


MODELS = {"2pl": irt_2pl, "beta3": irt_beta3}


def expected_score(kind: str, ability: Array, items: ItemParams) -> tuple[Array, Array]:
    """(E[s_j | θ], Var(s_j | θ)) for abilities ``ability`` (..., M) and items (N,) or
    (M, N): arrays of shape (..., M, N)."""
    if kind == "2pl":
        p = jax.nn.sigmoid(items.discrimination * (ability[..., None] - items.difficulty))
        return p, p * (1.0 - p)
    if kind == "beta3":
        alpha, beta = _beta_parameters(ability, items.discrimination, items.difficulty)
        total = alpha + beta
        mean = alpha / total
        return mean, mean * (beta / total) / (total + 1.0)
    raise ValueError(f"unknown IRT model {kind!r} (known: {', '.join(KINDS)})")


__all__ = ["KINDS", "MODELS", "CensoredBeta", "ItemParams", "beta_lower_tail",
           "expected_score", "irt_2pl", "irt_beta3"]
