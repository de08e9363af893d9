"""Tutorial: evaluate one model with BayesAME, plot the estimate against n, and swap in a
custom prior.

Run: python tutorials/bayesame.py [--out bayesame.png] [--steps 250]

BayesAME (seed 000) groups IFEval's items by the scores earlier models got on them,
puts a Gaussian-process prior over those groups, picks the item with the most
information about the benchmark score, and reports the posterior mean with a 95%
interval. The prior is a NumPyro program (bayeval.models.bucket_gp.bucket_gp_model); here
we also run it with a custom prior mean — the 25th percentile of the reference scores of
each group, for a user who expects the new model to be weaker than most — without
touching the inference code.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bayeval import acquisition as acq
from bayeval.data import load_dataset, make_split
from bayeval.evaluators import MatrixOracle
from bayeval.inference.exact import ExactBucketGP
from bayeval.loop.session import Session
from bayeval.methods import Method
from bayeval.precision import enable_float64
from bayeval.stopping import any_of, budget, two_condition

enable_float64()  # bayeval computes in float64 (README: "Precision")

OUTPUT = Path(__file__).parent / "output"  # plots land here unless --out says


def run(method, reference, oracle, target):
    session = Session(reference, target, method, seed=0)
    session.run(oracle)
    return session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUTPUT / "bayesame.png"))
    parser.add_argument("--steps", type=int, default=250, help="items to evaluate at most")
    args = parser.parse_args()

    split = make_split(load_dataset("ifeval"), "interpolation", n_targets=1,
                       reference_fraction=0.5, seed=3)
    target = str(split.targets.models[0])
    oracle = MatrixOracle(split.targets, target)
    stopping = any_of(budget(args.steps), two_condition(0.02))

    default = Method("bayesame", ExactBucketGP().backend(), acq.bayesame_rule(), acq.argmax,
                     stopping)
    # the custom prior: only the mean function changes; everything else reads it from
    # the NumPyro program
    pessimistic = ExactBucketGP(mean=lambda phi: jnp.quantile(phi, 0.25, axis=1))
    custom = Method("bayesame-q25", pessimistic.backend(), acq.bayesame_rule(), acq.argmax,
                    stopping)

    fig, ax = plt.subplots(figsize=(7, 4))
    for method, colour in ((default, "C0"), (custom, "C1")):
        session = run(method, split.reference, oracle, target)
        n, est, lo, hi = zip(*session.history, strict=True)
        ax.fill_between(n, lo, hi, color=colour, alpha=0.2)
        ax.plot(n, est, color=colour, label=f"{method.name} (stopped at n = {n[-1]})")
        value, lower, upper = session.estimate()
        print(f"{method.name}: {value:.3f} [{lower:.3f}, {upper:.3f}] after {n[-1]} items "
              f"({session.stop_reason}); true {oracle.true_score:.3f}")
    ax.axhline(oracle.true_score, color="k", ls="--", lw=1, label="true score")
    ax.set_xscale("log")
    ax.set_xlabel("items evaluated")
    ax.set_ylabel("IFEval score")
    ax.set_title(target)
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"plot saved to {args.out}")


if __name__ == "__main__":
    main()
