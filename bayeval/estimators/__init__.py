"""Estimators of the benchmark score and their intervals."""

from bayeval.estimators.interval import normal_interval, z_value

__all__ = ["normal_interval", "z_value"]
