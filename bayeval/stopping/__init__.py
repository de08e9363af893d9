"""Stopping rules and their composition."""

from bayeval.stopping.rules import (
    StoppingRule,
    all_of,
    any_of,
    budget,
    interval_width,
    min_observations,
    two_condition,
    width_after,
    window_range,
)

__all__ = [
    "StoppingRule",
    "all_of",
    "any_of",
    "budget",
    "interval_width",
    "min_observations",
    "two_condition",
    "width_after",
    "window_range",
]
