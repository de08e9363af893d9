"""Rules that score candidate items from a posterior, policies, and combinators."""

from bayeval.acquisition.base import (
    Policy,
    Rule,
    argmax,
    mixture,
    sample,
    switch,
    tempered,
    uniform,
    uniform_floor,
)
from bayeval.acquisition.info_gain import bayesame_rule, info_gain, information_gain

__all__ = [
    "Policy",
    "Rule",
    "argmax",
    "bayesame_rule",
    "info_gain",
    "information_gain",
    "mixture",
    "sample",
    "switch",
    "tempered",
    "uniform",
    "uniform_floor",
]
