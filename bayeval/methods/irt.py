"""The IRT baseline (seed 000 item 7; METHODS.md §4) as METHODS.md §4 states it: random
selection, a NUTS fit of the target's ability every ``refit_every`` evaluations (and at
``first_fits``, our choice, so that the first 50 estimates do not rest on the prior), R̂_n
from the latest fit's draws and the n items seen, and R-hat, bulk/tail ESS and
divergences for every fit. The parts (item calibration, ability fits, the performance
draws) are in :mod:`bayeval.estimators.irt`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
import pandas as pd

from bayeval.estimators.interval import z_value
from bayeval.estimators.irt import calibrate, fit_ability
from bayeval.models.irt import ItemParams, expected_score
from bayeval.precision import require_float64
from bayeval.types import SimulationResult


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
    require_float64("the IRT baseline")
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



__all__ = ["fit_schedule", "simulate_irt"]
