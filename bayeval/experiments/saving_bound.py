"""How many items any design-unbiased estimator needs, given how well the target's items
can be predicted: the ceiling on the saving of docs/methods.md §9's estimator against RS-Mean.

For a sampling design with first-order inclusion probabilities π_i and a score model under
which the target's scores are independent with variances σ_i² given what a predictor
knows, every design-unbiased estimator of the total has an expected design variance of at
least Σ_i (1/π_i − 1) σ_i² (Godambe & Joshi 1965, Theorem 1; the difference estimator
Σ_i p̂_i + Σ_{i∈s} (s_i − p̂_i)/π_i with the model's means reaches it). For a mean
over N items and an expected sample size n the bound is least at π_i = min(1, c σ_i)
with Σ π_i = n, so

    V_GJ(n) = (1/N²) Σ_i (1/π_i − 1) σ_i²,   π_i = min(1, c σ_i),  Σ_i π_i = n.

A predictor p̂ of the target's scores gives σ_i² = p̂_i (1 − p̂_i) where it is calibrated.
Where it is not, what a design built on it really gives is the Poisson-sampling variance
of the difference estimator with the residuals e_i = s_i − p̂_i it leaves,

    V_P(n) = (1/N²) Σ_i (1/π_i − 1) e_i²,   π_i ∝ (1 − τ) σ_i / Σ σ + τ / N,

(π from the predictor's own σ, with the uniform share τ of active-pai's policy floor).
active-pai's interval is not that narrow: its rule and its variance floor read p̂ clipped
to [p_min, 1 − p_min], and its variance is never below the floor, the design variance
with v_i = p̃_i (1 − p̃_i) (p̃ the clipped p̂) in place of e_i². With ``p_min`` given, the
``floored`` design draws from π ∝ (1 − τ) sqrt(v_i) / Σ sqrt(v) + τ / N and its variance
is max(V_P(n) with e², V_P(n) with v): the same ceiling with the clip charged.
The number of items for a width ε is the least n with 2 z sqrt(V(n)) ≤ ε; RS-Mean's is the
same with V_RS(n) = S² (1/n − 1/N), S² the target's population variance (the normal
width of a mean without replacement). Both ignore what estimating the variance costs, so
a real run needs more.

The predictors are given the target's **whole row**, cross-fitted over ``folds`` folds of
items (each item's prediction comes from a fit on the other folds): more than any run
knows at its stop, so the saving they allow is an upper bound for their class:

* ``difficulty(K)``: active-pai's calibrated-difficulty model
  (:mod:`bayeval.inference.difficulty`, K principal axes) with the target's weights fitted
  by the same ridge logistic regression as a reference row;
* ``similar-models``: the mean of the reference models' scores on the item, each model
  weighted by exp(τ_s × its agreement with the target on the other folds);
* ``stacked``: a logistic regression of the target's scores on the logits of the two
  cross-fitted predictions above (three coefficients fitted over all N items, so slightly
  optimistic): what a predictor combining both could know.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from bayeval.data import ScoreMatrix
from bayeval.data.matrix import fill_with_item_means
from bayeval.estimators.interval import z_value
from bayeval.experiments.validity import NOMINAL, variant_matrix, variant_split
from bayeval.inference.difficulty import fit_rows, item_features

POLICY_FLOOR = 0.05  # τ: the uniform share of active-pai's policy (docs/methods.md §9 "Policy")
SIMILARITY_TEMPERATURE = 30.0  # τ_s of ``similar-models``


def inclusion_probabilities(share: np.ndarray, n: float) -> np.ndarray:
    """π_i = min(1, c share_i) with Σ π_i = n (0 < n ≤ N; shares > 0): the largest
    shares are capped at 1 one by one until the rest, scaled to the remaining total,
    stay below 1."""
    share = np.asarray(share, np.float64)
    size = share.size
    if not 0 < n <= size:
        raise ValueError(f"n must be in (0, {size}], got {n}")
    order = np.argsort(-share, kind="stable")
    sorted_share = share[order]
    rest = np.cumsum(sorted_share[::-1])[::-1]  # Σ of share[k:] in sorted order
    pi = np.ones(size)
    for capped in range(size):
        c = (n - capped) / rest[capped]
        if c * sorted_share[capped] <= 1.0:
            pi[order[capped:]] = c * sorted_share[capped:]
            break
    return pi


def poisson_variance(pi: np.ndarray, residual2: np.ndarray) -> float:
    """Variance of the mean's difference estimator under Poisson sampling with inclusion
    probabilities π and squared residuals e²: (1/N²) Σ (1/π_i − 1) e_i²."""
    return float(np.sum((1.0 / pi - 1.0) * residual2) / pi.size**2)


def godambe_joshi_variance(sigma2: np.ndarray, n: float) -> float:
    """V_GJ(n) of the module docstring: the least expected design variance of a
    design-unbiased estimator of the mean with expected sample size n."""
    if n >= sigma2.size:
        return 0.0
    sigma = np.sqrt(np.maximum(sigma2, 1e-24))
    return poisson_variance(inclusion_probabilities(sigma, n), sigma2)


def policy_variance(sigma2: np.ndarray, residual2: np.ndarray, n: float,
                    floor: float = POLICY_FLOOR) -> float:
    """V_P(n) of the module docstring: π from the predictor's σ with a uniform share
    ``floor``, the variance from the residuals it really leaves."""
    size = sigma2.size
    if n >= size:
        return 0.0
    sigma = np.sqrt(np.maximum(sigma2, 1e-24))
    share = (1.0 - floor) * sigma / sigma.sum() + floor / size
    return poisson_variance(inclusion_probabilities(share, n), residual2)


def items_for_width(variance_at: Callable[[int], float], epsilon: float, n_items: int,
                    z: float) -> int:
    """The least n in [1, N] with 2 z sqrt(V(n)) ≤ ε, for V decreasing in n (N if none);
    z the normal quantile of the interval's level."""
    def narrow(n: int) -> bool:
        return 2.0 * z * np.sqrt(max(variance_at(n), 0.0)) <= epsilon

    if narrow(1):
        return 1
    low, high = 1, n_items
    while high - low > 1:
        mid = (low + high) // 2
        if narrow(mid):
            high = mid
        else:
            low = mid
    return high


def _folds(n_items: int, folds: int, seed: int) -> np.ndarray:
    return np.random.default_rng([seed, n_items]).permutation(n_items) % folds


def difficulty_predictor(components: int) -> Callable:
    """``difficulty(K)`` of the module docstring, cross-fitted."""
    def predict(reference: np.ndarray, scores: np.ndarray, folds: np.ndarray) -> np.ndarray:
        x = item_features(reference, components)
        p = np.empty(scores.size)
        for f in np.unique(folds):
            train = folds != f
            u = fit_rows(scores[None, train], x[train])[0]
            p[~train] = 1.0 / (1.0 + np.exp(-(x[~train] @ u)))
        return p
    return predict


def similar_models_predictor(temperature: float = SIMILARITY_TEMPERATURE) -> Callable:
    """``similar-models`` of the module docstring, cross-fitted."""
    def predict(reference: np.ndarray, scores: np.ndarray, folds: np.ndarray) -> np.ndarray:
        ref = fill_with_item_means(reference)
        p = np.empty(scores.size)
        for f in np.unique(folds):
            train = folds != f
            agreement = 1.0 - np.abs(ref[:, train] - scores[train]).mean(axis=1)
            w = np.exp(temperature * (agreement - agreement.max()))
            p[~train] = (w / w.sum()) @ ref[:, ~train]
        return p
    return predict


def stack_predictions(parts: Sequence[np.ndarray], scores: np.ndarray) -> np.ndarray:
    """``stacked`` of the module docstring: the logistic regression of the target's scores
    on the logits of cross-fitted predictions (clipped to [1e-4, 1 − 1e-4])."""
    logits = [np.log(q / (1.0 - q)) for q in (np.clip(p, 1e-4, 1.0 - 1e-4) for p in parts)]
    x = np.column_stack([np.ones(scores.size), *logits])
    u = fit_rows(scores[None], x, ridge=1e-3)[0]
    return 1.0 / (1.0 + np.exp(-(x @ u)))


# name → (predictor, whether its p̂ (1 − p̂) may stand for σ² in the Godambe–Joshi bound:
# a logistic fit is calibrated on its training items; a similarity-weighted mean is not,
# and its confident predictions would make that bound meaningless)
PREDICTORS: dict[str, tuple[Callable, bool]] = {
    "difficulty(5)": (difficulty_predictor(5), True),
    "difficulty(10)": (difficulty_predictor(10), True),
    "similar-models": (similar_models_predictor(), False),
}
# name → the predictors it stacks (each a key of the predictors given); a stacked
# prediction is a logistic fit, so calibrated in the sense above
STACKS: dict[str, tuple[str, ...]] = {"stacked": ("difficulty(5)", "similar-models")}


def target_items(reference: np.ndarray, scores: np.ndarray, epsilons: Sequence[float],
                 predictors: dict[str, tuple[Callable, bool]],
                 stacks: dict[str, tuple[str, ...]] | None = None, folds: int = 5,
                 seed: int = 0, p_clip: float = 1e-4,
                 p_min: float | None = None) -> list[dict]:
    """For one target: RS-Mean's n and, per predictor and per stack of predictors
    (``stacks``: name → the names it stacks, reusing their predictions), the
    Godambe–Joshi n (``gj``) and the n of the policy's design with the residuals left
    (``policy``), at each ε; the Godambe–Joshi n only for a predictor marked calibrated;
    with ``p_min``, the n of the ``floored`` design (module docstring)."""
    scores = np.nan_to_num(np.asarray(scores, np.float64), nan=0.0)
    n_items = scores.size
    theta = scores.mean()
    population = np.mean((scores - theta) ** 2) * n_items / max(n_items - 1, 1)
    split = _folds(n_items, folds, seed)
    predictions = {name: np.clip(f(reference, scores, split), p_clip, 1.0 - p_clip)
                   for name, (f, _) in predictors.items()}
    calibrated = {name: flag for name, (_, flag) in predictors.items()}
    for name, parts in (stacks or {}).items():
        predictions[name] = np.clip(stack_predictions([predictions[q] for q in parts], scores),
                                    p_clip, 1.0 - p_clip)
        calibrated[name] = True
    z = z_value(NOMINAL)
    rows = []
    for eps in epsilons:
        row = {"epsilon": eps, "truth": theta, "n_items": n_items,
               "rs_mean": items_for_width(
                   lambda n: population * (1.0 / n - 1.0 / n_items), eps, n_items, z)}
        for name, p in predictions.items():
            sigma2 = p * (1.0 - p)
            residual2 = (scores - p) ** 2
            if calibrated[name]:
                row[f"{name} gj"] = items_for_width(
                    lambda n, s=sigma2: godambe_joshi_variance(s, n), eps, n_items, z)
            row[f"{name} policy"] = items_for_width(
                lambda n, s=sigma2, e=residual2: policy_variance(s, e, n), eps, n_items, z)
            if p_min is not None:
                clipped = np.clip(p, p_min, 1.0 - p_min)
                v = clipped * (1.0 - clipped)
                row[f"{name} floored"] = items_for_width(
                    lambda n, v=v, e=residual2: max(policy_variance(v, e, n),
                                                    policy_variance(v, v, n)),
                    eps, n_items, z)
            row[f"{name} brier"] = float(np.mean(residual2))
        rows.append(row)
    return rows


def run_saving_bound(matrix: ScoreMatrix, variants: Sequence[str] = ("standard",),
                     epsilons: Sequence[float] = (0.05,), seeds: int = 25, targets: int = 10,
                     reference_fraction: float = 0.5,
                     predictors: dict[str, tuple[Callable, bool]] | None = None,
                     stacks: dict[str, tuple[str, ...]] | None = None,
                     p_min: float | None = None,
                     progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """One row per (variant, draw, target, ε) on ``bench validity``'s draws
    (:func:`~bayeval.experiments.validity.variant_split` with the same seeds);
    ``predictors`` and ``stacks`` default to :data:`PREDICTORS` and :data:`STACKS`;
    ``p_min``: see :func:`target_items`; ``progress`` is called with (draws done, draws
    in all) after each draw."""
    predictors = PREDICTORS if predictors is None else predictors
    stacks = STACKS if stacks is None else stacks
    rows = []
    for v, variant in enumerate(variants):
        vm = variant_matrix(matrix, variant)
        for seed in range(seeds):
            split = variant_split(vm, variant, targets, reference_fraction, seed)
            for k, scores in enumerate(split.targets.scores):
                for row in target_items(split.reference.scores, scores, epsilons,
                                        predictors, stacks, seed=seed, p_min=p_min):
                    rows.append({"dataset": matrix.name, "variant": variant, "seed": seed,
                                 "target": split.targets.models[k], **row})
            if progress is not None:
                progress(v * seeds + seed + 1, len(variants) * seeds)
    return pd.DataFrame(rows)


def saving_table(runs: pd.DataFrame, boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per (dataset, variant, ε) and per bound column: saving = 1 − Σ n / Σ n_RS over the
    targets, as ``bench validity`` computes it, with its SE from a bootstrap over draws."""
    columns = [c for c in runs.columns if c.endswith((" gj", " policy", " floored"))]
    rng = np.random.default_rng(seed)
    out = []
    for key, part in runs.groupby(["dataset", "variant", "epsilon"], sort=False):
        by_draw = part.groupby("seed")[["rs_mean", *columns]].sum()
        picks = rng.integers(0, len(by_draw), (boot, len(by_draw)))
        row = dict(zip(("dataset", "variant", "epsilon"), key, strict=True), targets=len(part),
                   rs_mean=part["rs_mean"].mean())
        for c in columns:
            row[c] = 1.0 - by_draw[c].sum() / by_draw["rs_mean"].sum()
            base = by_draw["rs_mean"].to_numpy()[picks].sum(1)
            values = by_draw[c].to_numpy()[picks].sum(1) / base
            row[f"{c} se"] = float(np.std(values, ddof=1))
        out.append(row)
    return pd.DataFrame(out)


__all__ = [
    "PREDICTORS",
    "STACKS",
    "difficulty_predictor",
    "godambe_joshi_variance",
    "inclusion_probabilities",
    "items_for_width",
    "poisson_variance",
    "policy_variance",
    "run_saving_bound",
    "saving_table",
    "similar_models_predictor",
    "stack_predictions",
    "target_items",
]
