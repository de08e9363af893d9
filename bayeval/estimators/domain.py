"""Can the reference models explain this target? A check of a model-based estimate.

A model-based interval (the posterior of BayesAME, BQ, IRT: docs/methods.md §1–§4) is right
only as far as the model is: when the target lies outside what the reference models span
(stronger than all of them, say), the posterior can be confidently wrong, and nothing in
the interval says so. Two signs are read off the items already scored:

* **range**: the target's mean on the observed items against each reference model's mean
  on the same items; a target above (or below) every reference model is outside their
  range, where the model can only extrapolate.
* **prequential bias** (Dawid 1984): each observed score s_j against the model's
  prediction m_j = E[s_j | scores before it], made before s_j was seen. Under the model
  the residuals r_j = s_j − m_j are martingale differences: their mean r̄ estimates the
  model's bias on this target, with standard error sd(r)/√n whatever the items'
  variances and however they were chosen (each prediction reads only the past). If the
  bias persists on the N − n items not yet scored, it moves the estimate by

      shift = (N − n)/N · r̄,    se = (N − n)/N · sd(r)/√n.

  The run is flagged when |shift| − ``SHIFT_SE`` · se exceeds ``SHIFT_SHARE`` of the
  interval's half-width h: the data show a bias that takes a sizeable part of the
  interval, more than its noise explains. (The self-normalised z = Σ r_j / √(Σ r_j²)
  is reported too; on its own it flags a bias too small to matter once n is large.)

A flagged model-based estimate should be redone with the design-valid ``active-pai``,
whose interval holds whatever the model gets wrong (docs/methods.md §9). The constants were
chosen on the bundled datasets (docs/results/validity/domain_check.md: misses flagged on
an extrapolation split, false alarms on random targets).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import numpy as np

__all__ = ["SHIFT_SE", "SHIFT_SHARE", "DomainCheck", "check_observed", "domain_check"]

SHIFT_SHARE = 0.5  # flag when the bias's shift of the estimate, less SHIFT_SE of its
SHIFT_SE = 1.0  # standard errors, is above this share of the interval's half-width


class DomainCheck(NamedTuple):
    """The check of the module docstring after ``n`` of ``n_items`` items: the target's
    observed ``mean`` and ``share_below`` (the share of reference models whose mean on the
    same items is below it, ties counting half), ``outside`` (above or below all of
    them); the prequential ``z``, the ``shift`` the model's bias implies for the estimate
    and its ``shift_se``, against the interval's ``half_width``; ``flagged``."""

    n: int
    n_items: int
    mean: float
    share_below: float
    outside: bool
    z: float
    shift: float
    shift_se: float
    half_width: float
    flagged: bool

    @property
    def bias_share(self) -> float:
        """(|shift| − SHIFT_SE · se) / h: the bias the data show beyond their noise, as a
        share of the interval's half-width (the bias part fires above ``SHIFT_SHARE``)."""
        excess = abs(self.shift) - SHIFT_SE * self.shift_se
        if self.half_width > 0:
            return excess / self.half_width
        return math.inf if excess > 0 else -math.inf

    @property
    def biased(self) -> bool:
        """Whether the bias part of the check fires (module docstring)."""
        return self.bias_share > SHIFT_SHARE

    def note(self, method: str) -> str | None:
        """One line for a flagged run (None when not flagged)."""
        if not self.flagged:
            return None
        why = []
        if self.outside:
            side = "above" if self.share_below >= 0.5 else "below"
            why.append(f"the target scores {side} every reference model on the "
                       f"{self.n} items seen")
        if self.biased:
            side = "above" if self.shift > 0 else "below"
            why.append(f"its scores lie {side} the model's predictions, by enough to move "
                       f"the estimate {abs(self.shift):.3f} (± {self.shift_se:.3f}) "
                       f"against a half-width of {self.half_width:.3f}")
        return (f"{method}'s interval rests on the reference models, which do not explain "
                f"this target: {'; '.join(why)}. Its interval may miss; active-pai's "
                "holds whatever the models get wrong")

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self._fields}


def domain_check(reference: np.ndarray, scores: np.ndarray, predicted: np.ndarray,
                 n_items: int, half_width: float) -> DomainCheck:
    """The check of the module docstring. ``reference``: (M, n) the reference models'
    scores on the n observed items (NaN: missing, skipped in each model's mean);
    ``scores``: (n,) the target's; ``predicted``: (n,) the model's prediction of each
    score made before it was observed; ``n_items``: the benchmark's N; ``half_width``:
    the interval's half-width now."""
    reference = np.asarray(reference, np.float64)
    scores = np.asarray(scores, np.float64)
    predicted = np.asarray(predicted, np.float64)
    n = scores.size
    if reference.ndim != 2 or reference.shape[1] != n or predicted.shape != (n,):
        raise ValueError(f"need (M, {n}) reference scores and {n} predictions, got "
                         f"{reference.shape} and {predicted.shape}")
    if n == 0:
        return DomainCheck(0, n_items, math.nan, math.nan, False, 0.0, 0.0, 0.0,
                           half_width, False)
    residual = scores - predicted
    spread = float(np.sum(residual ** 2))
    z = float(np.sum(residual) / math.sqrt(spread)) if spread > 0 else 0.0
    unseen = max(n_items - n, 0) / n_items
    shift = unseen * float(residual.mean())
    shift_se = unseen * float(residual.std(ddof=1)) / math.sqrt(n) if n > 1 else math.inf
    mean = float(scores.mean())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a model with none of the
        means = np.nanmean(reference, axis=1)  # items: NaN, left out below
    means = means[np.isfinite(means)]
    if means.size == 0:
        share, outside = math.nan, False
    else:
        share = float(np.mean(means < mean) + 0.5 * np.mean(means == mean))
        outside = bool(mean > means.max() or mean < means.min())
    check = DomainCheck(n, n_items, mean, share, outside, z, shift, shift_se,
                        float(half_width), False)
    return check._replace(flagged=bool(outside or check.biased))


def check_observed(reference_scores: np.ndarray, scores: np.ndarray,
                   predicted: list[tuple[int, float]], estimate: Any) -> DomainCheck:
    """:func:`domain_check` of a run on (M, N) ``reference_scores``: ``scores`` (N,) the
    target's (read at the observed items), ``predicted`` (item, prediction) of each
    observation in order, ``estimate`` the current :class:`~bayeval.types.Estimate`."""
    items = np.array([c for c, _ in predicted], int)
    before = np.array([m for _, m in predicted], np.float64)
    return domain_check(reference_scores[:, items], scores[items], before,
                        reference_scores.shape[1],
                        float(estimate.upper - estimate.lower) / 2)
