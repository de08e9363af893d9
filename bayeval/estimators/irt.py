"""The IRT estimator of a new model's score (seed 000 item 7; METHODS.md §4).

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
   second term is the unevaluated items' own noise).

:func:`bayeval.methods.irt.simulate_irt` runs the baseline with these parts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.inference.mcmc import MCMCResult, run_nuts
from bayeval.inference.optimise import lbfgs_minimise
from bayeval.models.irt import KINDS, MODELS, ItemParams, expected_score


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
    values = postprocess(optimise(info.param_info.z))
    return ItemParams(values["discrimination"], values["difficulty"])


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


__all__ = ["calibrate", "estimate", "fit_ability", "performance_draws"]
