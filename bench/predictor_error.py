"""How well the reference predicts a target: the share of the target's score variance
that ``active-pai``'s predictor leaves, the bound on what its estimator can save.

The design-valid estimator (docs/methods.md §9) samples the residuals s_i − p̂_i of its
predictor p̂; drawn uniformly its variance per item is the residuals' spread, against
θ (1 − θ) for random sampling (RS-Mean) on a binary score. So

    R = mean_i (s_i − p̂_i)² / (θ (1 − θ))

is the items a uniform design of the estimator needs as a share of random sampling's,
1 − R the saving that design would have; the oracle rule's unequal draws add to it where
the predictor knows which items are uncertain, and the linear recalibration of past
rounds (n0 = 10) takes off a constant or scale error. Per bundled dataset and variant
(``standard``: random targets, half the other models as reference; ``extrapolation``:
targets among the strongest 30%, the weakest half as reference;
``bayeval.experiments.validity.variant_split``), over ``--seeds`` draws of 20 targets: R
of the prediction from the reference alone (before any score of the target) and after
``--seen`` of the target's items drawn at random (the backend's own update), both with
the best linear recalibration a + b p̂ fitted on all of the target's items (the most a
recalibration can take off), and the mean target score. A dataset whose R after the
recalibration stays near or above 1 has no saving for the estimator to keep, one at a
time or in batches.

    python bench/predictor_error.py --out docs/results/predictor_error.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

DATASETS = "arc_challenge,commonsense,ifeval,math,mmlu,mrpc,musr,rte,sst2"


def residual_share(scores: np.ndarray, predicted: np.ndarray,
                   recalibrate: bool = True) -> float:
    """R of the module docstring for one target's ``scores`` and the ``predicted`` p̂
    (with the least-squares a + b p̂ where ``recalibrate``)."""
    theta = scores.mean()
    bernoulli = theta * (1.0 - theta)
    if bernoulli <= 0:
        return float("nan")
    p = predicted
    if recalibrate:
        design = np.column_stack([np.ones_like(p), p])
        coef, *_ = np.linalg.lstsq(design, scores, rcond=None)
        p = np.clip(design @ coef, 0.0, 1.0)
    return float(np.mean((scores - p) ** 2) / bernoulli)


def cell(dataset: str, variant: str, seeds: int, seen: int) -> dict:
    """R before and after ``seen`` items, per target, over ``seeds`` draws."""
    import jax.numpy as jnp

    from bayeval.data.bundled import load_dataset
    from bayeval.experiments.validity import variant_split
    from bayeval.methods import make_method

    matrix = load_dataset(dataset)
    backend = make_method("active-pai").backend
    before, after, before_raw, theta = [], [], [], []
    for seed in range(seeds):
        split = variant_split(matrix, variant, 20, 0.5, seed)
        reference = jnp.asarray(np.asarray(split.reference.scores, np.float64))
        start = backend.init(reference, matrix.n_items)
        p0 = np.clip(np.asarray(backend.predict(start).item_mean), 0.0, 1.0)
        rng = np.random.default_rng(seed)
        for row in np.asarray(split.targets.scores, np.float64):
            before.append(residual_share(row, p0))
            before_raw.append(residual_share(row, p0, recalibrate=False))
            state = start
            for item in rng.choice(matrix.n_items, seen, replace=False):
                state = backend.observe(state, jnp.asarray(item), jnp.asarray(row[item]))
            p1 = np.clip(np.asarray(backend.predict(state).item_mean), 0.0, 1.0)
            after.append(residual_share(row, p1))
            theta.append(row.mean())
    return {"dataset": dataset, "variant": variant, "targets": len(theta),
            "score": float(np.mean(theta)), "raw": float(np.nanmedian(before_raw)),
            "before": float(np.nanmedian(before)), "after": float(np.nanmedian(after))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=DATASETS)
    parser.add_argument("--variants", default="standard,extrapolation")
    parser.add_argument("--seeds", type=int, default=3, help="draws of 20 targets")
    parser.add_argument("--seen", type=int, default=100,
                        help="items of the target the backend has seen for the second R")
    parser.add_argument("--out", type=Path, default=Path("predictor_error.md"))
    args = parser.parse_args()

    from bayeval.precision import enable_float64

    enable_float64()
    rows = [cell(d, v, args.seeds, args.seen) for v in args.variants.split(",")
            for d in args.datasets.split(",")]
    lines = ["# What the reference's prediction leaves of a target's score variance", "",
             f"`python bench/predictor_error.py --seeds {args.seeds} --seen {args.seen}`: "
             "R = mean (s − p̂)² / (θ (1 − θ)), the median over targets; 1 − R is what a "
             "uniform design of active-pai's estimator saves against random sampling "
             "(bench/predictor_error.py's docstring).", "",
             "| dataset | variant | targets | mean score | R, reference alone, as predicted "
             "| R, reference alone, recalibrated | R after "
             f"{args.seen} items, recalibrated |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['variant']} | {r['targets']} | {r['score']:.3f}"
                     f" | {r['raw']:.2f} | {r['before']:.2f} | {r['after']:.2f} |")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
