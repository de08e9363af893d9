"""Intervals for the benchmark score R.

* :func:`gaussian_bounds` — ``mean ± z sqrt(var)``: the credible interval of a Gaussian
  posterior (BayesAME, seed 000 §3.1), or a Wald interval.
* :func:`wilson_fpc_bounds` — the Wilson score interval with the finite-population
  correction, for the mean of n of N binary scores drawn without replacement.
* :func:`covers` — whether an interval holds a true score (coverage is its mean).

Bounds are returned unclipped (their difference is the width the stopping rules read,
docs/methods.md §1 condition ii); reports clip them to [0, 1] with :func:`clip_interval`.
"""

from __future__ import annotations

from statistics import NormalDist

import jax.numpy as jnp
import numpy as np

from bayeval.types import Array


def z_value(level: float = 0.95) -> float:
    """Two-sided standard-normal quantile: 1.959964 for ``level = 0.95``."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"interval level must be in (0, 1), got {level}")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def gaussian_bounds(mean: Array, var: Array, z: float) -> tuple[Array, Array]:
    """``mean ∓ z sqrt(var)``."""
    half = z * jnp.sqrt(jnp.maximum(var, 0.0))
    return mean - half, mean + half


def finite_population_factor(n: Array, n_items: int) -> Array:
    """1 − n/N, never below 0: XLA turns ``n / N`` into ``n · (1/N)``, which is
    1 + 2⁻⁵² at n = N for some N (277, say), and a negative factor made the variance
    negative and the Wilson bounds NaN there."""
    return jnp.maximum((n_items - n) / n_items, 0.0)


def wilson_fpc_bounds(mean: Array, n: Array, n_items: int, z: float) -> tuple[Array, Array]:
    """Wilson score interval for a proportion, with finite-population correction.

    Solves |p̂ − p| ≤ z sqrt((1 − n/N) p(1 − p) / n) for p: with a = z²(1 − n/N)/n,
    centre (p̂ + a/2)/(1 + a), half-width sqrt(a p̂(1 − p̂) + a²/4)/(1 + a). Unlike the Wald
    interval its width does not collapse when p̂ is near 0 or 1, so a width-based stopping
    rule does not stop early on an unlucky run of equal scores (see ``bench/coverage.py``).
    n = 0 gives [0, 1]; n = N gives [p̂, p̂].
    """
    fpc = finite_population_factor(n, n_items)
    a = jnp.where(n > 0, z * z * fpc / jnp.maximum(n, 1.0), jnp.inf)
    finite = jnp.isfinite(a)
    a_safe = jnp.where(finite, a, 0.0)
    centre = (mean + a_safe / 2.0) / (1.0 + a_safe)
    half = jnp.sqrt(a_safe * mean * (1.0 - mean) + a_safe * a_safe / 4.0) / (1.0 + a_safe)
    lower = jnp.where(finite, centre - half, 0.0)
    upper = jnp.where(finite, centre + half, 1.0)
    return lower, upper


def clip_interval(lower: float, upper: float) -> tuple[float, float]:
    """Bounds clipped to [0, 1], the range of a benchmark score."""
    return max(0.0, float(lower)), min(1.0, float(upper))


COVER_TOLERANCE = 1e-12


def covers(lower, upper, truth, tol: float = COVER_TOLERANCE):
    """Whether [lower, upper] holds ``truth``, up to ``tol`` of float rounding (an interval
    that closes on the truth at n = N can miss it by 1e-17 otherwise)."""
    return (np.asarray(lower) - tol <= truth) & (np.asarray(truth) <= np.asarray(upper) + tol)
