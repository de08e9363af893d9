"""Why irt's posterior interval under-covers on random targets, and what its model-assisted
interval does instead (bayeval.inference.irt, steps 3 and 4), at a fixed number of items.

For each seed, the standard split of ``bench validity`` (20 random targets, half of the
other models as references), items calibrated by MAP on the references, ``fraction`` · N
items of each target drawn uniformly, one NUTS fit of all the targets' abilities (items
fixed), then per target: the posterior's estimate and interval (step 3) and the assisted
one (step 4, :func:`bayeval.inference.irt.assisted`), against the target's true score.

    python bench/irt_intervals.py --datasets sst2,mrpc,commonsense [--seeds 5] [--fraction 0.45]
    python bench/irt_intervals.py --design 280 --datasets commonsense,math [--draws 200]

Prints, per dataset: the fits' largest R-hat and their divergences, coverage of each
interval, the spread of its errors against the interval's own SD, and, by quartile of the
true score, the coverage and the mean residual r̄ of the seen items (the bias of the
model's predictions that the posterior cannot see).

``--design n`` asks what the assisted interval's coverage *is* for each target of ``bench
validity``'s standard splits (the same seeds, so the same 100 targets), not what one run
of each shows: per target, ``--draws`` uniform draws of n items, each with the ability
refitted to that draw (its posterior mode by Newton's method, a fast stand-in for the NUTS
posterior mean that the method uses) and the assisted estimate and interval
(:func:`bayeval.inference.irt.assisted`). Prints the coverage averaged over targets with
its standard error over targets, by range of the true score, and the errors' spread
against the interval's.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from bayeval.data import load_dataset
from bayeval.data.sources import bench_dataset
from bayeval.data.splits import make_split
from bayeval.experiments.validity import variant_split
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


def ability_mode(a: np.ndarray, b: np.ndarray, scores: np.ndarray, mask: np.ndarray,
                 steps: int = 30) -> np.ndarray:
    """Each row's 2PL ability mode under θ ~ N(0, 1) given the ``mask``ed scores, items
    fixed (Newton's method; the log posterior is concave in θ)."""
    theta = np.zeros(scores.shape[0])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
        grad = np.where(mask, a * (scores - p), 0.0).sum(1) - theta
        hess = -np.where(mask, a * a * p * (1.0 - p), 0.0).sum(1) - 1.0
        theta = theta - grad / hess
    return theta


def design_runs(dataset: str, seeds: int, n: int, draws: int, targets: int = 20,
                z: float = 1.96) -> dict[str, np.ndarray]:
    """Per target of ``bench validity``'s standard splits (seeds 0 … ``seeds`` − 1): its
    true score, the share of ``draws`` uniform draws of ``n`` items whose assisted interval
    covers it, the errors' SD and the interval's mean SD."""
    _, matrix = bench_dataset(dataset)
    out: dict[str, list] = {k: [] for k in ("truth", "covered", "error_sd", "interval_sd")}
    for seed in range(seeds):
        split = variant_split(matrix, "standard", targets, 0.5, seed)
        items = calibrate("2pl", np.asarray(split.reference.scores, float), "map")
        a, b = np.asarray(items.discrimination), np.asarray(items.difficulty)
        rng = np.random.default_rng([seed, 7])
        for row in np.asarray(split.targets.scores, float):
            N = row.size
            mask = np.zeros((draws, N), bool)
            for d in range(draws):
                mask[d, rng.choice(N, min(n, N), replace=False)] = True
            scores = np.broadcast_to(row, mask.shape)
            theta = ability_mode(a, b, scores, mask)[None]  # one "draw" per draw of items
            p, v = (np.asarray(x)[0] for x in expected_score("2pl", jnp.asarray(theta), items))
            post_mean, post_var = estimate("2pl", theta, items, scores, mask)
            mean, var, _ = jax.vmap(assisted)(jnp.asarray(scores), jnp.asarray(mask),
                                              jnp.asarray(p), jnp.asarray(v),
                                              jnp.asarray(post_mean), jnp.asarray(post_var))
            error = np.asarray(mean) - row.mean()
            sd = np.sqrt(np.asarray(var))
            out["truth"].append(row.mean())
            out["covered"].append(np.mean(np.abs(error) <= z * sd))
            out["error_sd"].append(error.std())
            out["interval_sd"].append(sd.mean())
    return {k: np.asarray(v) for k, v in out.items()}


def design_report(dataset: str, n: int, r: dict[str, np.ndarray]) -> None:
    T = len(r["truth"])
    print(f"## {dataset}: {T} targets, {n} items each, coverage over the draws\n")
    print("| true score | targets | coverage ± SE (over targets) | error SD / interval SD |")
    print("|---|---|---|---|")
    bands = (("all", 0.0, 1.01), ("< 5%", 0.0, 0.05), ("5–50%", 0.05, 0.5),
             ("50–80%", 0.5, 0.8), ("80–95%", 0.8, 0.95), ("> 95%", 0.95, 1.01))
    for name, lo, hi in bands:
        k = (r["truth"] >= lo) & (r["truth"] < hi)
        if not k.any():
            continue
        c = r["covered"][k]
        se = c.std(ddof=1) / np.sqrt(k.sum()) if k.sum() > 1 else float("nan")
        ratio = np.mean(r["error_sd"][k] / r["interval_sd"][k])
        print(f"| {name} | {k.sum()} | {c.mean():.3f} ± {se:.3f} | {ratio:.2f} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="sst2,mrpc,commonsense")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--fraction", type=float, default=0.45)
    parser.add_argument("--design", type=int, default=0, metavar="N",
                        help="coverage over repeated uniform draws of N items per target "
                             "(module docstring)")
    parser.add_argument("--draws", type=int, default=200)
    args = parser.parse_args()
    enable_float64()
    for dataset in args.datasets.split(","):
        if args.design:
            design_report(dataset, args.design,
                          design_runs(dataset, args.seeds, args.design, args.draws))
        else:
            report(dataset, runs(dataset, args.seeds, args.fraction))


if __name__ == "__main__":
    main()
