"""Estimators of the benchmark score and their intervals."""

from bayeval.estimators.interval import (
    clip_interval,
    gaussian_bounds,
    wilson_fpc_bounds,
    z_value,
)

__all__ = ["clip_interval", "gaussian_bounds", "wilson_fpc_bounds", "z_value"]
