"""Normal (Wald / Gaussian-posterior) intervals for the benchmark score."""

from __future__ import annotations

import math
from statistics import NormalDist


def z_value(level: float = 0.95) -> float:
    """Two-sided standard-normal quantile: 1.959964 for ``level = 0.95``."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"interval level must be in (0, 1), got {level}")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def normal_interval(mean: float, var: float, level: float = 0.95) -> tuple[float, float]:
    """``mean ± z sqrt(var)`` clipped to [0, 1] (scores are bounded)."""
    half = z_value(level) * math.sqrt(max(float(var), 0.0))
    return max(0.0, float(mean) - half), min(1.0, float(mean) + half)
