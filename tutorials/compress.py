"""Tutorial: shrink a benchmark to a frozen subset, export it for lm-evaluation-harness,
and check its drift on models that played no part in building it.

Run: python tutorials/compress.py [--out compress.png] [--subsets 10000]

1. Take the bundled IFEval matrix (541 prompts) and split its models: half are the models
   you already have (construction), half stand for models released later (new).
2. MINCE: 7 calibration models from the construction half size the subset (the first size,
   on a 50-item step, whose 95th-percentile worst drift improves by less than 1 pp), then
   one random subset of that size is frozen.
3. BestRand at the same size: 5 probe models, a pool of 4× the size, 1000 candidates.
4. Save both as subset files and export the lm-evaluation-harness ``--samples`` file.
5. On the new models: subset score against full score, for MINCE's frozen subset, BestRand's
   and a plain random subset of the same size.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import jax
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bayeval.compression.baselines import uniform_subset
from bayeval.compression.bestrand import bestrand
from bayeval.compression.mince import freeze_subset, mince_sizing
from bayeval.compression.subset import Subset, export_lm_eval_samples
from bayeval.data import load_dataset
from bayeval.precision import enable_float64

enable_float64()  # bayeval computes in float64 (README: "Precision")

OUTPUT = Path(__file__).parent / "output"  # plots land here unless --out says


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUTPUT / "compress.png"),
                        help="where to save the plot")
    parser.add_argument("--subsets", type=int, default=10_000,
                        help="MINCE's random subsets per candidate size")
    args = parser.parse_args()

    matrix = load_dataset("ifeval")
    scores = matrix.scores
    K, L = scores.shape
    order = np.random.default_rng(0).permutation(K)
    have, new = order[: K // 2], order[K // 2:]
    full = scores[new].mean(axis=1)

    calibration = have[:7]
    sizing = mince_sizing(scores[calibration], jax.random.key(0), step=50, tau=0.01,
                          n_subsets=args.subsets)
    print("MINCE: size  P95 worst drift (pp)  gain (pp)")
    for n, p, g in zip(sizing.sizes, sizing.p95, sizing.gains, strict=True):
        mark = "  <- n*" if n == sizing.size else ""
        print(f"       {n:4d}  {100 * p:6.2f}  {'' if np.isnan(g) else f'{100 * g:5.2f}'}{mark}")
    k = sizing.size
    frozen = freeze_subset(L, k)
    chosen = np.sort(np.asarray(bestrand(scores[have[:5]], jax.random.key(1), k,
                                         min(L, 4 * k), 1000).items))
    uniform, _ = uniform_subset(np.random.default_rng(2), L, k)

    folder = Path(tempfile.mkdtemp())
    subsets = {}
    for method, items, used in (("mince", frozen, calibration), ("bestrand", chosen, have[:5]),
                                ("random", uniform, [])):
        error = scores[new][:, items].mean(axis=1) - full
        subset = Subset("ifeval", L, [str(matrix.items[j]) for j in items], method,
                        {"size": int(k)}, 0, [str(matrix.models[i]) for i in used],
                        {"held_out_max": float(np.abs(error).max()),
                         "held_out_mean": float(np.abs(error).mean())}, task="leaderboard_ifeval")
        subset.save(folder / f"ifeval_{method}.json")
        subsets[method] = (items, error)
        print(f"{method:8s}: {k} of {L} items ({1 - k / L:.0%} fewer); drift on "
              f"{len(new)} new models: max {100 * np.abs(error).max():.2f} pp, "
              f"mean {100 * np.abs(error).mean():.2f} pp")
    samples = folder / "ifeval_samples.json"
    export_lm_eval_samples(Subset.load(folder / "ifeval_mince.json"), samples)
    print(f"subset files and {samples.name} in {folder}")
    print(f"run it: lm_eval --model hf --model_args pretrained=MY_MODEL "
          f"--tasks leaderboard_ifeval --samples {samples}")
    print("first doc indices:", json.loads(samples.read_text())["leaderboard_ifeval"][:8])

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), sharey=True)
    for ax, (method, (items, error)) in zip(axes, subsets.items(), strict=True):
        ax.scatter(100 * full, 100 * (full + error), s=6, alpha=0.6)
        lo, hi = 100 * full.min(), 100 * full.max()
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.set_title(f"{method}: {len(items)} items, max drift {100 * np.abs(error).max():.1f} pp")
        ax.set_xlabel("full IFEval score (%)")
    axes[0].set_ylabel("subset score (%)")
    fig.suptitle(f"{len(new)} models not used to build the subsets")
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
