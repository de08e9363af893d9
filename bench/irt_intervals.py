"""Why irt's posterior interval under-covers on random targets, and what its model-assisted
interval does instead (bayeval.inference.irt, steps 3 and 4), at a fixed number of items.

For each seed, the standard split of ``bench validity`` (20 random targets, half of the
other models as references), items calibrated by MAP on the references, ``fraction`` · N
items of each target drawn uniformly, one NUTS fit of all the targets' abilities (items
fixed), then per target: the posterior's estimate and interval (step 3) and the assisted
one (step 4, :func:`bayeval.inference.irt.assisted`), against the target's true score.

    python bench/irt_intervals.py --datasets sst2,mrpc,commonsense [--seeds 5] [--fraction 0.45]

Prints, per dataset: the fits' largest R-hat and their divergences, coverage of each
interval, the spread of its errors against the interval's own SD, and, by quartile of the
true score, the coverage and the mean residual r̄ of the seen items (the bias of the
model's predictions that the posterior cannot see).
"""

from __future__ import annotations

import argparse

import jax.numpy as jnp
import numpy as np

from bayeval.data import load_dataset
from bayeval.data.splits import make_split
from bayeval.inference.irt import assisted, calibrate, estimate, fit_ability
from bayeval.models.irt import expected_score
from bayeval.precision import enable_float64


def runs(dataset: str, seeds: int, fraction: float, targets: int = 20) -> dict[str, np.ndarray]:
    """Per run: truth, the posterior's (mean, var), the assisted (mean, var), r̄."""
    matrix = load_dataset(dataset)
    out: dict[str, list] = {k: [] for k in ("truth", "post_mean", "post_var", "mean", "var",
                                             "r_bar", "r_hat", "divergences")}
    for seed in range(seeds):
        split = make_split(matrix, "interpolation", n_targets=targets, seed=seed)
        scores = np.asarray(split.targets.scores, float)
        items = calibrate("2pl", np.asarray(split.reference.scores, float), "map")
        M, N = scores.shape
        n = int(fraction * N)
        rng = np.random.default_rng(100 + seed)
        mask = np.zeros((M, N), bool)
        for i in range(M):
            mask[i, rng.choice(N, n, replace=False)] = True
        fit = fit_ability("2pl", items, scores, mask, num_warmup=300, num_samples=500,
                          num_chains=2, seed=seed)
        ability = np.asarray(fit.samples["ability"]).reshape(-1, M)
        out["r_hat"].append(float(fit.diagnostics["r_hat"].max()))
        out["divergences"].append(fit.divergences)
        post_mean, post_var = estimate("2pl", ability, items, scores, mask)
        p, v = (np.asarray(a).mean(0) for a in expected_score("2pl", jnp.asarray(ability),
                                                                items))
        for i in range(M):
            mean, var, _ = assisted(jnp.asarray(scores[i]), jnp.asarray(mask[i]),
                                    jnp.asarray(p[i]), jnp.asarray(v[i]), post_mean[i],
                                    post_var[i])
            out["truth"].append(scores[i].mean())
            out["post_mean"].append(post_mean[i])
            out["post_var"].append(post_var[i])
            out["mean"].append(float(mean))
            out["var"].append(float(var))
            out["r_bar"].append((scores[i, mask[i]] - p[i, mask[i]]).mean())
    return {k: np.asarray(v) for k, v in out.items()}


def report(dataset: str, r: dict[str, np.ndarray], z: float = 1.96) -> None:
    print(f"## {dataset}: {len(r['truth'])} runs (NUTS fits: largest R-hat "
          f"{r['r_hat'].max():.3f}, {int(r['divergences'].sum())} divergences)\n")
    print("| interval | coverage ± SE | error SD | interval SD |")
    print("|---|---|---|---|")
    covered = {}
    for name, mean, var in (("posterior (step 3)", r["post_mean"], r["post_var"]),
                            ("assisted (step 4)", r["mean"], r["var"])):
        covered[name] = np.abs(mean - r["truth"]) <= z * np.sqrt(var)
        c = covered[name].mean()
        print(f"| {name} | {c:.3f} ± {np.sqrt(c * (1 - c) / len(mean)):.3f} | "
              f"{np.std(mean - r['truth']):.4f} | {np.sqrt(var).mean():.4f} |")
    quartile = np.digitize(r["truth"], np.quantile(r["truth"], [0.25, 0.5, 0.75]))
    print("\n| quartile of the true score | posterior covers | assisted covers | mean r̄ |")
    print("|---|---|---|---|")
    for q in range(4):
        k = quartile == q
        print(f"| {q + 1} | {covered['posterior (step 3)'][k].mean():.2f} | "
              f"{covered['assisted (step 4)'][k].mean():.2f} | {r['r_bar'][k].mean():+.3f} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="sst2,mrpc,commonsense")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--fraction", type=float, default=0.45)
    args = parser.parse_args()
    enable_float64()
    for dataset in args.datasets.split(","):
        report(dataset, runs(dataset, args.seeds, args.fraction))


if __name__ == "__main__":
    main()
