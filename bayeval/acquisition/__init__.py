"""Rules that score candidate items from a posterior, combinators that compose them,
schedules of the round, and policies that draw (with the probability of each draw)."""

from bayeval.acquisition.base import (
    Rule,
    Schedule,
    blend,
    mixture,
    power,
    probabilities,
    switch,
    tempered,
    uniform,
    uniform_floor,
)
from bayeval.acquisition.hybrid import faq_rule, hybrid_probabilities
from bayeval.acquisition.info_gain import (
    bayesame_rule,
    fisher_information,
    info_gain,
    information_gain,
)
from bayeval.acquisition.policies import (
    Policy,
    argmax,
    as_policy,
    draw_index,
    inverse_cdf,
    sample,
    sample_with_replacement,
    sequential_distributions,
    sequential_probabilities,
)
from bayeval.acquisition.schedules import (
    exploration,
    exploration_weight,
    tempering,
    tempering_exponent,
)
from bayeval.acquisition.variance import oracle_optimal, variance_reduction
from bayeval.stopping.rules import budget_rounds

__all__ = [
    "Policy",
    "Rule",
    "Schedule",
    "argmax",
    "as_policy",
    "bayesame_rule",
    "blend",
    "budget_rounds",
    "draw_index",
    "exploration",
    "exploration_weight",
    "faq_rule",
    "fisher_information",
    "hybrid_probabilities",
    "info_gain",
    "information_gain",
    "inverse_cdf",
    "mixture",
    "oracle_optimal",
    "power",
    "probabilities",
    "sample",
    "sample_with_replacement",
    "sequential_distributions",
    "sequential_probabilities",
    "switch",
    "tempered",
    "tempering",
    "tempering_exponent",
    "uniform",
    "uniform_floor",
    "variance_reduction",
]
