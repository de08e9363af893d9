"""Rules that score candidate items from a posterior, policies, and combinators."""

from bayeval.acquisition.base import Policy, Rule, argmax, sample, uniform

__all__ = ["Policy", "Rule", "argmax", "sample", "uniform"]
