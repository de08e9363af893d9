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
from bayeval.acquisition.faq import (
    blend,
    budget_rounds,
    exploration,
    faq_rule,
    hybrid_probabilities,
    oracle_optimal,
    power,
    probabilities,
    sample_with_replacement,
    tempering,
    variance_reduction,
)
from bayeval.acquisition.info_gain import bayesame_rule, info_gain, information_gain

__all__ = [
    "Policy",
    "Rule",
    "argmax",
    "bayesame_rule",
    "blend",
    "budget_rounds",
    "exploration",
    "faq_rule",
    "hybrid_probabilities",
    "info_gain",
    "information_gain",
    "mixture",
    "oracle_optimal",
    "power",
    "probabilities",
    "sample",
    "sample_with_replacement",
    "switch",
    "tempered",
    "tempering",
    "uniform",
    "uniform_floor",
    "variance_reduction",
]
