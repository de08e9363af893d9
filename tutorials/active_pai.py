"""Evaluate a model with active-pai: an interval you can trust, and a stop that saves items.

active-pai (docs/methods.md §9) lets a backend's posterior pick the items and predict the
unseen ones, and corrects the predictions with a design-based martingale estimator: the
estimate is unbiased at every round and the interval is the design's, whatever the model
gets wrong. This tutorial

1. evaluates one held-out IFEval model in a Session until the 95% interval is 0.05 wide,
   and compares the items used with what random sampling (RS-Mean) needs for that width;
2. plots the estimate with its fixed-n interval and its anytime-valid confidence sequence
   (``anytime=True``) against n;
3. peeks: over many simulated runs, how often does each interval miss the true score at
   *some* n? The fixed-n interval is valid at a fixed n (or at the automatic stop); the
   confidence sequence holds at every n at once, so stopping early on what you see is
   safe with it.

Run: ``python tutorials/active_pai.py --out active_pai.png``
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from bayeval import Session, load_dataset, make_method
from bayeval.loop.simulate import simulate
from bayeval.precision import enable_float64

OUTPUT = Path(__file__).parent / "output"  # plots land here unless --out says


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUTPUT / "active_pai.png"))
    parser.add_argument("--runs", type=int, default=200, help="simulated runs for step 3")
    parser.add_argument("--steps", type=int, default=300, help="items per simulated run")
    parser.add_argument("--predictor", default="difficulty",
                        help="difficulty, exact, laplace or factor")
    parser.add_argument("--epsilon", type=float, default=0.05, help="width to stop at")
    args = parser.parse_args()
    enable_float64()

    matrix = load_dataset("ifeval")
    target = matrix.models[7]
    reference, held_out = matrix.split([target])
    truth_row = held_out.scores[0]
    truth = float(truth_row.mean())

    # 1. one evaluation, stopping by itself
    method = make_method("active-pai", epsilon=args.epsilon, predictor=args.predictor)
    session = Session(reference, target, method, seed=0)
    while not session.done:
        for item in session.ask():
            session.tell(item, float(truth_row[reference.item_index(item)]))
    estimate, lower, upper = session.estimate()
    rs = make_method("random", epsilon=args.epsilon)
    rs_runs = simulate(rs, reference.scores, np.repeat(truth_row[None], 50, 0), np.arange(50),
                       until_stop=True)
    rs_items = float(np.where(rs_runs.stop_n > 0, rs_runs.stop_n, matrix.n_items).mean())
    print(f"{target}: {estimate:.3f} [{lower:.3f}, {upper:.3f}], true {truth:.3f}, "
          f"{session.n_observed} items of {matrix.n_items}; random sampling needs "
          f"{rs_items:.0f} for the same width (mean of 50 runs): "
          f"{1 - session.n_observed / rs_items:.0%} saved")

    # 2. and 3. many runs, fixed-n interval and confidence sequence, same draws
    steps = min(args.steps, matrix.n_items)
    rows = np.repeat(truth_row[None], args.runs, 0)
    seeds = np.arange(args.runs)
    runs = {}
    for anytime in (False, True):
        m = make_method("active-pai", epsilon=1e-6, anytime=anytime, predictor=args.predictor)
        runs[anytime] = simulate(m, reference.scores, rows, seeds, n_steps=steps)
    n = np.arange(1, steps + 1)
    first = 30  # active-pai's n_min: no stop is allowed before it

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    fixed, cs = runs[False], runs[True]
    ax.plot(n, fixed.estimate[0], color="C0", label="estimate")
    ax.fill_between(n, np.clip(fixed.lower[0], 0, 1), np.clip(fixed.upper[0], 0, 1),
                    color="C0", alpha=0.25, label="fixed-n 95% interval")
    ax.plot(n, np.clip(cs.lower[0], 0, 1), "C1--", label="anytime 95% sequence")
    ax.plot(n, np.clip(cs.upper[0], 0, 1), "C1--")
    ax.axhline(truth, color="k", lw=0.8, label="true score")
    ax.set_ylim(max(0, truth - 0.25), min(1, truth + 0.25))
    ax.set_xlabel("items evaluated")
    ax.set_title(f"one run on {target}")
    ax.legend(fontsize=8)

    ax = axes[1]
    for anytime, label in ((False, "fixed-n interval"), (True, "anytime sequence")):
        r = runs[anytime]
        miss = (np.clip(r.lower, 0, 1) > truth + 1e-12) | (np.clip(r.upper, 0, 1) < truth - 1e-12)
        ever = np.cumsum(miss[:, first - 1:], axis=1) > 0
        ever_miss = ever.mean(0)
        se = np.sqrt(ever_miss[-1] * (1 - ever_miss[-1]) / args.runs)
        ax.plot(n[first - 1:], ever_miss, label=label)
        print(f"{label}: misses the true score at some n in {first}..{steps} in "
              f"{ever_miss[-1]:.1%} ± {se:.1%} of {args.runs} runs; at n = {steps} alone "
              f"in {miss[:, -1].mean():.1%}")
    ax.axhline(0.05, color="k", lw=0.8, ls=":")
    ax.set_xlabel("items evaluated (peeking from n = 30)")
    ax.set_ylabel("share of runs that missed at some n so far")
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
