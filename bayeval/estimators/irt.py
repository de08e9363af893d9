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

:func:`simulate_irt` runs the baseline as METHODS.md §4 states it: random selection, a
NUTS fit every ``refit_every`` evaluations (and at ``first_fits``, our choice, so that the
first 50 estimates do not rest on the prior), R̂_n from the latest fit's draws and the n
items seen, and R-hat, bulk/tail ESS and divergences for every fit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from bayeval.estimators.interval import z_value
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


def fit_schedule(n_steps: int, refit_every: int, first_fits: Sequence[int]) -> list[int]:
    """Sizes n at which the ability is fitted: ``first_fits`` and multiples of
    ``refit_every`` up to ``n_steps``."""
    if refit_every < 1:
        raise ValueError(f"refit_every must be ≥ 1, got {refit_every}")
    points = {n for n in first_fits if 1 <= n <= n_steps}
    points |= set(range(refit_every, n_steps + 1, refit_every))
    return sorted(points | {1})


def _segment(kind: str, ability: np.ndarray, items: ItemParams, rows: np.ndarray,
             orders: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R̂_n, Var_n) of runs (rows) at every n in ``steps`` from one fit's draws (D, R),
    items observed in ``orders``: cumulative sums over the order give every n at once."""
    n_items = rows.shape[1]
    p, v = (np.asarray(x) for x in expected_score(kind, jnp.asarray(ability), items))
    p_ord = np.take_along_axis(p, orders[None], axis=2)  # (D, R, N)
    v_ord = np.take_along_axis(v, orders[None], axis=2).mean(0)  # (R, N)
    s_ord = np.take_along_axis(rows, orders, axis=1)
    unseen_p = p_ord.sum(2)[..., None] - np.cumsum(p_ord, axis=2)[..., steps - 1]
    unseen_v = v_ord.sum(1)[:, None] - np.cumsum(v_ord, axis=1)[:, steps - 1]
    draws = (np.cumsum(s_ord, axis=1)[:, steps - 1][None] + unseen_p) / n_items
    return draws.mean(0), np.maximum(draws.var(0) + unseen_v / n_items**2, 0.0)


def simulate_irt(references: Sequence[np.ndarray], targets: np.ndarray,
                 seeds: Sequence[int] | None = None, kind: str = "2pl",
                 n_steps: int | None = None, refit_every: int = 50,
                 first_fits: Sequence[int] = (10, 25), calibration: str = "map",
                 num_warmup: int = 500, num_samples: int = 1000, num_chains: int = 4,
                 level: float = 0.95, log: Callable[[str], None] | None = None,
                 ) -> tuple[Any, pd.DataFrame]:
    """Run the IRT baseline on every target row with every reference matrix.

    Runs are reference-major (run g·T + t: reference g, target t), each with its own
    random item order from ``seeds`` (default g·T + t). Returns a
    :class:`~bayeval.simulate.SimulationResult` (interval: R̂ ∓ z sqrt(Var_R)) and one row
    per NUTS fit: n, seconds, worst R-hat, lowest bulk and tail ESS, divergences."""
    from bayeval.simulate import SimulationResult

    targets = np.asarray(targets, dtype=np.float64)
    if targets.ndim != 2 or np.isnan(targets).any():
        raise ValueError("targets must be complete (T, N) score rows")
    T, N = targets.shape
    G = len(references)
    seeds = np.arange(G * T) if seeds is None else np.asarray(seeds)
    if seeds.shape != (G * T,):
        raise ValueError(f"need {G * T} seeds (references × targets), got {seeds.size}")
    n_steps = N if n_steps is None else int(n_steps)
    calibrated = [calibrate(kind, ref, calibration) for ref in references]
    items = ItemParams(*(jnp.asarray(np.repeat(np.stack([np.asarray(c[k]) for c in calibrated]),
                                               T, axis=0)) for k in range(2)))
    rows = np.tile(targets, (G, 1))
    R = rows.shape[0]
    orders = np.stack([np.random.default_rng(int(s)).permutation(N) for s in seeds])
    estimate_n = np.full((R, n_steps), np.nan)
    var_n = np.full((R, n_steps), np.nan)
    schedule = fit_schedule(n_steps, refit_every, first_fits)
    fits, previous = [], None
    chunk = max(1, int(2e8 // (8 * num_chains * num_samples * N)))  # ≈ 200 MB of draws
    run_index = np.arange(R)[:, None]
    for j, n_fit in enumerate(schedule):
        mask = np.zeros((R, N), bool)
        mask[run_index, orders[:, :n_fit]] = True
        result = fit_ability(kind, items, rows, mask, num_warmup=num_warmup,
                             num_samples=num_samples, num_chains=num_chains,
                             seed=int(seeds[0]) * 7919 + n_fit, init=previous, warn=False)
        previous = result
        table = result.diagnostics
        fits.append({"n": n_fit, "runs": R, "seconds": result.seconds,
                     "max_r_hat": float(table.r_hat.max()),
                     "min_ess_bulk": float(table.ess_bulk.min()),
                     "min_ess_tail": float(table.ess_tail.min()),
                     "divergences": result.divergences, "problems": len(result.problems)})
        ability = result.samples["ability"].reshape(-1, R)  # (D, R)
        end = schedule[j + 1] if j + 1 < len(schedule) else n_steps + 1
        steps = np.arange(n_fit, end)  # n = n_fit … next fit − 1
        for start in range(0, R, chunk):
            part = slice(start, min(R, start + chunk))
            est, var = _segment(kind, ability[:, part],
                                ItemParams(items.discrimination[part], items.difficulty[part]),
                                rows[part], orders[part], steps)
            estimate_n[part, steps - 1] = est
            var_n[part, steps - 1] = var
        if log is not None:
            log(f"IRT ({kind}) fit at n = {n_fit}: {result.seconds:.1f} s, R-hat ≤ "
                f"{fits[-1]['max_r_hat']:.3f}, {result.divergences} divergences")
    half = z_value(level) * np.sqrt(var_n)
    result = SimulationResult(estimate_n, var_n, estimate_n - half, estimate_n + half,
                              orders[:, :n_steps].astype(np.int32),
                              np.zeros(R, np.int32), rows.mean(axis=1))
    return result, pd.DataFrame(fits)


__all__ = ["calibrate", "estimate", "fit_ability", "fit_schedule", "performance_draws",
           "simulate_irt"]
