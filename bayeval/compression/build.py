"""Build a frozen subset of a benchmark with any compression method, and measure its drift
on models that took no part in building it (what ``bayeval compress`` runs).

The models are split at random (``seed``) into a held-out share (``holdout``) and the
construction models; probes (BestRand, seed 003), calibration models (MINCE, seed 004)
and k-means' reference rows are drawn from the construction models only. The drift of the
subset's estimate (its weighted mean) against each held-out model's full mean is reported
as its maximum and mean absolute error (:func:`held_out_drift`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import jax
import numpy as np
import pandas as pd

from bayeval.compression.baselines import kmeans_subset, stratified_subset, uniform_subset
from bayeval.compression.bestrand import bestrand
from bayeval.compression.mince import freeze_subset, mince_sizing
from bayeval.compression.subset import Subset
from bayeval.data.lm_eval import harness_task, parse_subtasks
from bayeval.data.matrix import ScoreMatrix
from bayeval.errors import BayevalError

METHODS = ("bestrand", "mince", "random", "kmeans", "stratified")


def held_out_drift(scores: np.ndarray, rows: np.ndarray, items: np.ndarray,
                   weights: np.ndarray | None) -> dict[str, float]:
    """Max, mean, root-mean-square and 95th percentile of |subset estimate − full mean|
    over the models ``rows`` (the percentile is what ``bayeval estimate`` reports as a
    weighted subset's empirical interval)."""
    w = np.full(len(items), 1 / len(items)) if weights is None else np.asarray(weights)
    error = np.abs(scores[rows][:, items] @ w - scores[rows].mean(axis=1))
    return {"held_out_max": float(error.max()), "held_out_mean": float(error.mean()),
            "held_out_rmse": float(np.sqrt(np.mean(error ** 2))),
            "held_out_q95": float(np.quantile(error, 0.95)), "held_out_models": len(rows)}


def read_categories(path: str | os.PathLike) -> dict[str, str]:
    """item → category from a headerless CSV of ``item,category`` rows."""
    try:
        table = pd.read_csv(path, header=None, names=["item", "category"], dtype=str,
                            keep_default_na=False)
    except OSError as exc:
        raise BayevalError(f"--categories {path}: {exc.strerror}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise BayevalError(f"--categories {path}: not a CSV of item,category rows "
                           f"({str(exc).splitlines()[0][:80]})") from None
    return dict(zip(table["item"], table["category"], strict=False))


def build_subset(matrix: ScoreMatrix, method: str = "bestrand", *,
                 retention: float | None = None, size: int | None = None,
                 probes: Sequence[str] | None = None, pool: float = 4.0,
                 candidates: int = 1000, calibration: Sequence[str] | None = None,
                 step: int = 50, tau: float = 0.01,
                 categories: Mapping[str, str] | None = None, holdout: float = 0.5,
                 seed: int = 0, task: str | None = None) -> Subset:
    """A subset of ``matrix``'s items by ``method`` (module docstring), with its drift.

    ``retention`` or ``size`` set the size (default 10% of the items; MINCE chooses its
    own); ``probes`` / ``calibration`` name the models BestRand / MINCE use (default: 5 /
    7 construction models); ``pool`` is BestRand's pool as a multiple of the size,
    ``candidates`` its number of candidate subsets; ``step`` and ``tau`` MINCE's size grid
    and marginal-gain threshold; ``categories`` the item labels of a stratified subset."""
    if method not in METHODS:
        raise BayevalError(f"unknown compression method {method!r} (known: {', '.join(METHODS)})")
    scores = matrix.scores
    if np.isnan(scores).any():
        raise BayevalError(f"{matrix.name}: the score matrix has missing entries")
    K, L = scores.shape
    names = [str(m) for m in matrix.models]
    if not 0 <= holdout < 1:
        raise BayevalError(f"--holdout must be in [0, 1), got {holdout}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(K)
    n_held = round(holdout * K)
    held, build = order[:n_held], order[n_held:]

    def models_of(wanted: Sequence[str] | None, flag: str, default: int) -> np.ndarray:
        if wanted is None:
            return build[:default]
        unknown = [m for m in wanted if m not in names]
        if unknown:
            raise BayevalError(f"{flag}: model(s) {unknown} are not in {matrix.name}")
        return np.array([names.index(m) for m in wanted])

    if method != "mince":
        if retention is not None and size is not None:
            raise BayevalError("give either --retention or --size, not both")
        if retention is not None and not 0.0 < retention <= 1.0:
            raise BayevalError(f"--retention must be a fraction in (0, 1], got {retention}")
        if size is None:
            size = max(1, round((0.1 if retention is None else retention) * L))
        if not 1 <= size <= L:
            raise BayevalError(f"subset size must be in 1..{L}, got {size}")
    elif retention is not None or size is not None:
        raise BayevalError("mince chooses the size itself; drop --retention/--size")
    weights, used, params = None, [], {}
    key = jax.random.key(seed)
    if method == "bestrand":
        probe_rows = models_of(probes, "--probes", 5)
        M = int(min(L, max(size, round(pool * size))))
        result = bestrand(scores[probe_rows], key, size, M, candidates)
        items = np.sort(np.asarray(result.items))
        used = probe_rows
        params = {"probes": len(probe_rows), "pool": M, "candidates": candidates,
                  "imbalance": float(np.min(np.asarray(result.imbalance)))}
    elif method == "mince":
        cal = models_of(calibration, "--calibration", 7)
        sizing = mince_sizing(scores[cal], key, step, tau)
        items = freeze_subset(L, sizing.size)
        used = cal
        t = int(np.flatnonzero(sizing.sizes == sizing.size)[0])
        params = {"step": step, "tau": tau, "subsets": 10_000,
                  "p95_at_size": float(sizing.p95[t]), "freeze_seed": 42}
    elif method == "random":
        items, _ = uniform_subset(rng, L, size)
    elif method == "kmeans":
        items, weights = kmeans_subset(rng, scores[build], size)
        used = build
    else:
        if categories is None:
            raise BayevalError("stratified needs --categories FILE (CSV of item,category)")
        missing = [i for i in matrix.items if i not in categories]
        if missing:
            raise BayevalError(f"--categories: no category for {len(missing)} item(s), "
                               f"e.g. {str(missing[0])!r}")
        items, weights = stratified_subset(rng, [categories[i] for i in matrix.items], size)
    if len(held):
        drift = held_out_drift(scores, held, items, weights)
    else:  # nothing held out: the drift on the models that built it, and said so
        drift = {**held_out_drift(scores, order, items, weights), "held_out_models": 0,
                 "in_sample_models": len(order)}
    return Subset(matrix.name, L, [str(matrix.items[j]) for j in items], method, params,
                  seed, [names[i] for i in used], drift,
                  None if weights is None else [float(x) for x in weights],
                  task or harness_task(matrix), [[n, c] for n, c in parse_subtasks(
                      matrix.metadata.get("subtasks"))] or None,
                  matrix.metadata.get("metric"))


__all__ = ["METHODS", "build_subset", "held_out_drift", "read_categories"]
