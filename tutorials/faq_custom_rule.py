"""Write a new acquisition rule, compose it with the uniform floor, run it under
Pro-Active Inference, and check its coverage.

A rule maps the posterior summary (bayeval.types.Prediction) and a mask of
available items to one log-weight per item. Under FAQ every item is always available (items
are drawn with replacement), and Pro-Active Inference (PAI) turns any policy into an
unbiased estimate of the benchmark score, provided each item keeps a probability bounded
away from 0: that is what the uniform floor guarantees. Its 95% interval is a
large-sample (Wald) interval: with few draws, and a sharp rule whose rare draws carry
large weights, it covers less than 95% — the table shows by how much (coverage ± its SE
over models).

Here the new rule prefers items whose score the factor model is least sure of, sharpened:
q ∝ Var(s_j | data)². We compare it, with and without a floor, against FAQ's own hybrid
policy and uniform sampling, on IFEval models held out from the history.

    python tutorials/faq_custom_rule.py --out faq_rule.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from bayeval import acquisition as acq
from bayeval.data import load_dataset
from bayeval.estimators.pai import horvitz_thompson_uniform, wald_interval
from bayeval.inference.factor_laplace import prefitted
from bayeval.loop.simulate import simulate
from bayeval.methods.faq import faq_with
from bayeval.models.factor import factor_prior, fit_factors
from bayeval.precision import enable_float64

enable_float64()  # bayeval computes in float64 (README: "Precision")

OUTPUT = Path(__file__).parent / "output"  # plots land here unless --out says


def predictive_variance(sharpness: float = 2.0) -> acq.Rule:
    """The new rule: log-weight = sharpness · log Var(s_j | data)."""

    def rule(prediction, available):
        return sharpness * jnp.log(prediction.item_var)

    return rule


def _coverage(covered: np.ndarray, models: np.ndarray) -> tuple[float, float]:
    """Coverage over all runs and its SE over models (runs of one model are not
    independent: they share its score)."""
    per_model = np.bincount(models, covered) / np.bincount(models)
    return float(covered.mean()), float(per_model.std(ddof=1) / np.sqrt(per_model.size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUTPUT / "faq_rule.png"))
    parser.add_argument("--models", type=int, default=60, help="new models evaluated")
    parser.add_argument("--seeds", type=int, default=20, help="runs per new model")
    parser.add_argument("--budget", type=float, default=0.1, help="share of the items")
    args = parser.parse_args()

    matrix = load_dataset("ifeval")
    order = np.random.default_rng(0).permutation(matrix.n_models)
    history, new = matrix.scores[order[:224]], matrix.scores[order[224:224 + args.models]]
    fit = fit_factors(history, k=8, weight_decay=1.0, epochs=1000)
    mean0, cov0 = factor_prior(fit.U)
    rounds = round(args.budget * matrix.n_items)
    targets = np.tile(np.arange(len(new)), args.seeds)
    run_seeds = np.arange(len(targets))
    truth = new.mean(1)[targets]

    rows = {}
    rules = {"new rule + floor τ=0.1": acq.uniform_floor(predictive_variance(), 0.1),
             "new rule, no floor": predictive_variance(),
             "FAQ hybrid (default)": acq.faq_rule(rounds, 1.0, 0.0, 0.0, 0.05)}
    backend = prefitted(fit.V, mean0, cov0)  # one fit for every rule
    for name, rule in rules.items():
        # FAQ's loop with this rule: draws with replacement, PAI, a budget of `rounds`
        method = faq_with(rule, rounds, backend, name=name)
        out = simulate(method, history, new[targets], run_seeds, n_steps=rounds)
        theta, var = out.estimate[:, -1], out.var[:, -1]
        lo, hi = (np.asarray(x) for x in wald_interval(theta, var))
        rows[name] = (*_coverage((lo <= truth) & (truth <= hi), targets), np.mean(hi - lo))
    kept = np.random.default_rng(1).random((len(targets), matrix.n_items)) < rounds / matrix.n_items
    theta, var = horvitz_thompson_uniform(new[targets], kept, rounds / matrix.n_items)
    lo, hi = (np.asarray(x) for x in wald_interval(theta, var))
    rows["uniform (Poisson)"] = (*_coverage((lo <= truth) & (truth <= hi), targets),
                                 np.mean(hi - lo))

    print(f"IFEval, {len(new)} new models × {args.seeds} runs, {rounds} draws "
          f"({args.budget:.0%} of {matrix.n_items} items)")
    print(f"{'policy':26s} coverage ± SE      mean width  ESS ×")
    uniform_width = rows["uniform (Poisson)"][2]
    for name, (coverage, se, width) in rows.items():
        print(f"{name:26s} {coverage:.3f} ± {se:.3f}   {width:10.4f}  "
              f"{(uniform_width / width) ** 2:5.2f}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
    names = list(rows)
    ax1.barh(names, [rows[n][0] for n in names], xerr=[rows[n][1] for n in names],
             color="tab:blue")
    ax1.axvline(0.95, color="k", lw=0.8)
    ax1.set(xlim=(0.8, 1.0), xlabel="coverage of the 95% interval")
    ax2.barh(names, [rows[n][2] for n in names], color="tab:orange")
    ax2.set(xlabel="mean interval width")
    ax2.set_yticklabels([])
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
