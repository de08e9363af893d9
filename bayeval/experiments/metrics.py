"""Metrics for estimation experiments (seed 000 §5; docs/methods.md §6). One home for them."""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from bayeval.estimators.interval import COVER_TOLERANCE, covers  # noqa: F401  (its home)


def coverage(covered, clusters=None) -> tuple[float, float]:
    """(share of runs whose interval covered, its binomial SE) of a boolean series; the
    SE's variance is floored at 1e-12 so that a cell where every run covers has a
    (tiny) positive SE. With ``clusters`` (each run's cluster, e.g. its target model) the
    SE is :func:`clustered_coverage`'s."""
    if clusters is not None:
        return clustered_coverage(covered, clusters)
    share = float(np.mean(covered))
    return share, math.sqrt(max(share * (1 - share), 1e-12) / max(len(covered), 1))


def clustered_coverage(covered, clusters) -> tuple[float, float]:
    """(share of runs whose interval covered, its cluster-robust SE): runs of one cluster
    (the same target model, run several times or in several draws) are not independent,
    so the SE is the sandwich estimate over clusters, sqrt(G/(G−1) Σ_g (Σ_{i∈g}
    (y_i − p̂))²) / n (Cameron & Miller 2015, "A Practitioner's Guide to Cluster-Robust
    Inference", eq. 11 with the G/(G−1) correction), floored as :func:`coverage`'s."""
    y = np.asarray(covered, float)
    groups = np.unique(np.asarray(clusters), return_inverse=True)[1]
    share = float(y.mean())
    sums = np.bincount(groups, weights=y - share)
    G, n = sums.size, y.size
    if G < 2:
        return share, math.sqrt(max(share * (1 - share), 1e-12) / max(n, 1))
    var = G / (G - 1) * float(np.sum(sums**2)) / n**2
    return share, math.sqrt(max(var, 1e-12 / n))


def rmse_curve(estimate: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """RMSE(n) = sqrt(mean over runs of (R̂_n − R*)²); ``estimate`` is (runs, N)."""
    return np.sqrt(np.mean((estimate - truth[:, None]) ** 2, axis=0))


def integrated_rmse(rmse: np.ndarray) -> float:
    """Evaluation-weighted integrated RMSE, ×100: 100 Σ n RMSE(n) / Σ n (our normalisation)."""
    n = np.arange(1, rmse.size + 1)
    return float(100.0 * np.sum(n * rmse) / np.sum(n))


def rmse_gain(rmse: np.ndarray, rmse_reference: np.ndarray) -> np.ndarray:
    """(RMSE_RS(n) − RMSE(n)) / RMSE_RS(n), NaN where the reference RMSE is 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(rmse_reference > 0, (rmse_reference - rmse) / rmse_reference, np.nan)


def stopping_points(estimate: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                    epsilon2: float, epsilon1: float = 0.005, window: int = 30) -> np.ndarray:
    """Index t (n = t + 1) where the two-condition rule first holds for each run; the last
    step when it never does. Same rule as :func:`bayeval.stopping.two_condition`, applied
    after the fact (stopping does not change which items a run picks)."""
    runs, steps = estimate.shape
    spread = np.full((runs, steps), np.inf)
    if steps > window:
        view = sliding_window_view(estimate, window + 1, axis=1)
        spread[:, window:] = view.max(-1) - view.min(-1)
    ok = (spread <= epsilon1) & ((upper - lower) <= epsilon2)
    return np.where(ok.any(1), ok.argmax(1), steps - 1)


def at_stop(values: np.ndarray, stops: np.ndarray) -> np.ndarray:
    return values[np.arange(values.shape[0]), stops]


def irmse_ratio_interval(estimate_a: np.ndarray, estimate_b: np.ndarray, truth: np.ndarray,
                         groups: np.ndarray, n_boot: int = 2000, level: float = 0.95,
                         seed: int = 0) -> tuple[float, float, float]:
    """IRMSE(a) / IRMSE(b) and a percentile bootstrap interval, resampling whole groups
    of runs (e.g. the seeds, each with its own reference draw) with replacement; a and b
    are (runs, N) estimates of the same runs."""
    groups = np.asarray(groups)
    labels = np.unique(groups)
    members = [np.flatnonzero(groups == g) for g in labels]
    sq_a = (estimate_a - truth[:, None]) ** 2
    sq_b = (estimate_b - truth[:, None]) ** 2

    def ratio(rows):
        return (integrated_rmse(np.sqrt(sq_a[rows].mean(0)))
                / integrated_rmse(np.sqrt(sq_b[rows].mean(0))))

    rng = np.random.default_rng(seed)
    boots = [ratio(np.concatenate([members[i] for i in rng.integers(0, len(labels),
                                                                   len(labels))]))
             for _ in range(n_boot)]
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(boots, [tail, 100 - tail])
    return ratio(np.arange(truth.size)), float(lo), float(hi)
