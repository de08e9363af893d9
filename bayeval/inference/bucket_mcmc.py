"""The bucket GP under NUTS, with its performance posterior from posterior draws
(seed 000 App. C.1; docs/methods.md §1, non-Gaussian variants).

:func:`bucket_gp_nuts` buckets the reference matrix, samples θ of
:func:`~bayeval.models.bucket_gp.bucket_gp_model` (non-centred) given the coreset with
:func:`~bayeval.inference.mcmc.run_nuts`, and returns the draws with a
:class:`~bayeval.types.Prediction` computed from them
(:func:`prediction_from_draws`): with p(θ_b), q(θ_b) the conditional mean and variance of a
score of bucket b (:mod:`bayeval.inference.laplace`, ``Likelihood.moments``; the
logit-normal ones by quadrature over the item noise) and R^(d) the draws of
(1/N)(Σ_{i∈C} s_i + Σ_b m_b p(θ_b^(d))),

    E[R | C] = mean_d R^(d),   Var(R | C) = Var_d R^(d) + (1/N²) Σ_b m_b mean_d q_b,
    Cov(R, s_i | C) = Cov_d(R^(d), p_b^(d)) + mean_d q_b / N,
    Var(s_i | C) = Var_d p_b^(d) + mean_d q_b      (i unobserved, in bucket b),

so the information gain of BayesAME's rule is computed from draws as well.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

from bayeval.inference.laplace import CLIP, LIKELIHOOD
from bayeval.inference.mcmc import MCMCResult, run_nuts
from bayeval.models.bucket_gp import N0, bucket_gp_model, bucket_layout, prior_scale_tril
from bayeval.types import Prediction


def prediction_from_draws(likelihood: str, theta: np.ndarray, noise: np.ndarray,
                          item_bucket: np.ndarray, observed: np.ndarray,
                          scores: np.ndarray, nearly_unique: bool = True) -> Prediction:
    """The performance posterior from draws ``theta`` (D, B) (module docstring).

    ``noise``: (B,) latent noise variance per item (N_b σ²); ``observed`` (N,) bool;
    ``scores`` (N,) (read where observed)."""
    theta = np.asarray(theta, dtype=np.float64)
    item_bucket = np.asarray(item_bucket)
    observed = np.asarray(observed, bool)
    n_items = item_bucket.size
    B = theta.shape[1]
    remaining = np.bincount(item_bucket[~observed], minlength=B).astype(np.float64)
    p, _, q = (np.asarray(x) for x in LIKELIHOOD[likelihood].moments(
        jnp.asarray(theta), jnp.broadcast_to(jnp.asarray(noise), theta.shape)))
    seen_sum = float(np.where(observed, scores, 0.0).sum())
    draws = (seen_sum + p @ remaining) / n_items  # (D,)
    eq = q.mean(axis=0)
    centred = p - p.mean(axis=0)
    cov_rp = (draws - draws.mean()) @ centred / theta.shape[0]  # Cov_d(R, p_b)
    var_p = (centred**2).mean(axis=0)
    b = item_bucket
    return Prediction(
        mean=jnp.asarray(draws.mean()),
        var=jnp.asarray(draws.var() + remaining @ eq / n_items**2),
        item_mean=jnp.asarray(np.where(observed, scores, p.mean(axis=0)[b])),
        item_var=jnp.asarray(np.where(observed, 0.0, (var_p + eq)[b])),
        item_cov=jnp.asarray(np.where(observed, 0.0, (cov_rp + eq / n_items)[b])),
        n=jnp.asarray(float(observed.sum())), nearly_unique=jnp.asarray(nearly_unique))


@functools.cache
def _program(likelihood: str) -> Callable:
    """The non-centred bucket GP with this likelihood, one object per likelihood so that
    :func:`~bayeval.inference.mcmc.run_nuts` reuses its compiled program."""
    return functools.partial(bucket_gp_model, likelihood=likelihood, centred=False)


def bucket_gp_nuts(reference_scores: np.ndarray, items: np.ndarray, scores: np.ndarray,
                   likelihood: str = "bernoulli", alpha: float = 1.0, beta: float = 1.0,
                   sigma2: float | None = None, n0: int = N0, **nuts: Any
                   ) -> tuple[MCMCResult, Prediction]:
    """NUTS on the bucket GP of ``reference_scores`` (M, N) given the scores of ``items``
    and the performance posterior from the draws. ``nuts``: options of
    :func:`~bayeval.inference.mcmc.run_nuts` (chains, draws, seed, ``init`` …)."""
    reference_scores = np.asarray(reference_scores, dtype=np.float64)
    n_items = reference_scores.shape[1]
    layout = bucket_layout(reference_scores, n_items, sigma2, n0)
    items = np.asarray(items, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    if items.shape != scores.shape or len(np.unique(items)) != items.size:
        raise ValueError("need one score per item and no item twice")
    observed_scores = np.clip(scores, CLIP, 1 - CLIP) if likelihood == "logit_normal" else scores
    # the matrices are arguments of one compiled program, not constants folded into it
    # (a B × B kernel baked in took XLA seconds per dot product to fold)
    nuts.setdefault("jit_model_args", True)
    # α and β are fixed: the prior's Cholesky factor is computed once here, not at every
    # gradient evaluation of the run
    phi = jnp.asarray(layout.phi)
    result = run_nuts(_program(likelihood), phi, jnp.asarray(layout.sizes),
                      jnp.asarray(layout.item_bucket[items]), jnp.asarray(observed_scores),
                      alpha=alpha, beta=beta, sigma2=layout.sigma2,
                      scale_tril=prior_scale_tril(phi, alpha, beta), **nuts)
    observed = np.zeros(n_items, bool)
    observed[items] = True
    full = np.zeros(n_items)
    full[items] = scores
    theta = result.samples["theta"].reshape(-1, layout.phi.shape[0])
    prediction = prediction_from_draws(likelihood, theta, layout.sizes * layout.sigma2,
                                       layout.item_bucket, observed, full,
                                       layout.nearly_unique)
    return result, prediction


__all__ = ["bucket_gp_nuts", "prediction_from_draws"]
